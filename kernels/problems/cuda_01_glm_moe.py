"""cuda/01_glm52_fused_moe (C1)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..registry import ProblemSpec
from ._util import cases, lazy_triton, stress

_KEYS = ("T", "E", "top_k", "n_shared", "H", "I")
_CONST = dict(E=256, top_k=8, n_shared=1, H=4096, I=2048)
SHAPES = [dict(T=t, **_CONST) for t in (4096, 4127, 1, 8192, 512, 1000)]
CHECK_SHAPES = [dict(s, T=min(s["T"], 256)) for s in SHAPES]
TRITON_SET = ["import triton", "from triton", "@triton.jit", "triton.language"]
DSL_SET = ["import thunderkittens", "from cutlass.cute", "import tilelang"]
REF_IMPORTS = ["import reference", "from reference"]


def oracle(model, inputs):
    """Dense routing matrix (T, E) and a per-expert fp64 SwiGLU; shared experts unweighted."""
    x, ids, w = inputs
    E, I = model.w1_routed.shape[0], model.I
    xd = x.double()
    route = torch.zeros(x.shape[0], E, dtype=torch.float64, device=x.device)
    route.scatter_add_(1, ids.long(), w.double())

    def ffn(xs, w1, w2):
        w1 = w1.double()
        return (F.silu(xs @ w1[:I].T) * (xs @ w1[I:].T)) @ w2.double().T

    out = torch.zeros(x.shape[0], model.H, dtype=torch.float64, device=x.device)
    for s in range(model.w1_shared.shape[0]):
        out += ffn(xd, model.w1_shared[s], model.w2_shared[s])
    for e in (route != 0).any(0).nonzero().flatten().tolist():
        rows = (route[:, e] != 0).nonzero().flatten()
        out[rows] += route[rows, e, None] * ffn(xd[rows], model.w1_routed[e], model.w2_routed[e])
    return out.float()


SPECS = [ProblemSpec(
    name="01_glm52_fused_moe", bench="cuda", deck_version="2026-07-16", since=None, until=None,
    regime="compute", peak_key="bf16", shapes=SHAPES, check_shapes=CHECK_SHAPES, seeds=(42, 123, 456),
    ref_file="cuda_01_glm_moe.py", global_names=_KEYS, tolerance={"bfloat16": 0.08, "float32": 1e-3},
    stress_cases=cases(stress("small_hidden", 5e-4, 5e-2, inputs=(0,), scale=1e-2),
                       stress("large_hidden", 1.5, 5e-2, inputs=(0,), scale=8.0)),
    flops_expr="T*(n_shared+top_k)*(4*H*I + 2*I*H)", bytes_expr="T*H*2*2 + (E+n_shared)*(2*I*H + H*I)*2",
    n_trials=15, timing="cuda_events_l2_flush",
    forbidden=[*TRITON_SET, "import vllm", "from vllm", "flashinfer", "megablocks", "scattermoe", "torch._grouped_mm",
               *DSL_SET, *REF_IMPORTS], forbidden_kind="substring",
    interface=dict(init="Model(T, E, top_k, n_shared, H, I)",
                   forward="forward(x bf16 (T,H), expert_ids int64 (T,8), expert_weights bf16 (T,8)) -> bf16 (T,H)",
                   state_dict={n: dict(kind="parameter", dtype="bfloat16", shape=s, persistent=True) for n, s in
                               (("w1_routed", "(E,2I,H)"), ("w2_routed", "(E,H,I)"), ("w1_shared", "(n_shared,2I,H)"),
                                ("w2_shared", "(n_shared,H,I)"))},
                   module_helpers=[], import_reference_allowed=False, cuda_language_gate=True,
                   sources_scanned="solution.py + top-level *.cu *.cuh *.cpp *.cc *.h *.hpp"),
    oracle_fn=oracle, triton_fn=lazy_triton("glm_moe"), stress_since="2026-07-16",
    notes=["check.py caps T at 256 (check_shapes); replay should probe T > 256 (Part F.6).",
           "Comparison is on .float() tensors with dtype bf16 tolerance (0.08).",
           "Weights are ~12.9 GB per model: build_reference(exact_init=False) on the GPU."],
)]
