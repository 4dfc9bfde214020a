"""cuda/02_deepseek_nsa (C2)."""
from __future__ import annotations

import torch

from ..common import load_reference_module
from ..registry import ProblemSpec
from ._util import cases, lazy_triton, stress
from .cuda_01_glm_moe import DSL_SET, REF_IMPORTS, TRITON_SET

_KEYS = ("B", "H", "S", "D")
SHAPES = [dict(zip(_KEYS, s)) for s in [(1, 16, 2048, 64), (1, 16, 4127, 64), (1, 8, 8192, 64), (1, 8, 8191, 128),
                                        (4, 8, 1024, 64), (2, 8, 3000, 64)]]
CHECK_SHAPES = [dict(B=1, H=4, S=256, D=64), dict(B=1, H=2, S=384, D=64)]
_REF = load_reference_module("cuda_02_nsa.py", "_nsa_ref")


def oracle(model, inputs):
    """The selection + masked softmax in fp64 (vectorized); checked in tests against a
    per-query loop that follows the contract text literally."""
    return _REF.nsa_attention(*inputs, dtype=torch.float64).float()


SPECS = [ProblemSpec(
    name="02_deepseek_nsa", bench="cuda", deck_version="2026-07-16", since=None, until=None,
    regime="compute", peak_key="bf16", shapes=SHAPES, check_shapes=CHECK_SHAPES, seeds=(42, 123),
    ref_file="cuda_02_nsa.py", global_names=_KEYS, tolerance={"bfloat16": 0.1, "float32": 2e-3},
    stress_cases=cases(stress("small_qkv", 5e-4, 5e-2, inputs=(0, 1, 2), scale=1e-2),
                       stress("large_qkv", 5e-2, 5e-2, inputs=(0, 1, 2), scale=8.0)),
    flops_expr="4*B*H*S*S*D", bytes_expr="B*H*S*D*2*4", n_trials=15, timing="cuda_events_l2_flush",
    forbidden=[*TRITON_SET, "flash_attn", "flashinfer", "scaled_dot_product_attention",
               "F.scaled_dot_product_attention", "torch.nn.functional.scaled_dot_product_attention", *DSL_SET,
               *REF_IMPORTS], forbidden_kind="substring",
    interface=dict(init="Model(B, H, S, D)", forward="forward(q, k, v bf16 (B,H,S,D)) -> bf16 (B,H,S,D)",
                   state_dict={"_dummy": dict(kind="buffer", dtype="bfloat16", shape="(1,)", persistent=True)},
                   module_constants={"BLOCK_SIZE": 64, "TOP_N_BLOCKS": 8, "SLIDING_WINDOW": 64},
                   module_helpers=[], import_reference_allowed=False, cuda_language_gate=True),
    oracle_fn=oracle, triton_fn=lazy_triton("nsa"), stress_since="2026-07-16",
    notes=["check shapes (S <= 384) never exercise block selection (<= 6 blocks < top-8); probe S >= 1024.",
           "Keys of a selected block are restricted to <= t (causal), our reading of 'keep only the causal ones'.",
           "flops are dense S*S, not causal. The benchmark does not call load_state_dict."],
)]
