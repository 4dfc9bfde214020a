"""cuda/02_deepseek_nsa (C2)."""
from __future__ import annotations

import torch

from forensics import problems

from ..common import load_reference_module
from ..registry import ProblemSpec
from ._util import cases, lazy_triton, stress

_KEYS = ("B", "H", "S", "D")
_REF = load_reference_module("cuda_02_nsa.py", "_nsa_ref")


def oracle(model, inputs):
    """The selection + masked softmax in fp64 (vectorized); checked in tests against a
    per-query loop that follows the contract text literally."""
    return _REF.nsa_attention(*inputs, dtype=torch.float64).float()


SPECS = [ProblemSpec(
    entry=problems.get("02_deepseek_nsa", "2026-07-16"),
    regime="compute", peak_key="bf16", global_names=_KEYS,
    stress_cases=cases(stress("small_qkv", 5e-4, 5e-2, inputs=(0, 1, 2), scale=1e-2),
                       stress("large_qkv", 5e-2, 5e-2, inputs=(0, 1, 2), scale=8.0)),
    flops_expr="4*B*H*S*S*D", bytes_expr="B*H*S*D*2*4",
    interface=dict(init="Model(B, H, S, D)", forward="forward(q, k, v bf16 (B,H,S,D)) -> bf16 (B,H,S,D)",
                   state_dict={"_dummy": dict(kind="buffer", dtype="bfloat16", shape="(1,)", persistent=True)},
                   module_constants={"BLOCK_SIZE": 64, "TOP_N_BLOCKS": 8, "SLIDING_WINDOW": 64},
                   module_helpers=[], import_reference_allowed=False, cuda_language_gate=True),
    oracle_fn=oracle, triton_fn=lazy_triton("nsa"), stress_since="2026-07-16",
    notes=["check shapes (S <= 384) never exercise block selection (<= 6 blocks < top-8); probe S >= 1024.",
           "Keys of a selected block are restricted to <= t (causal), our reading of 'keep only the causal ones'.",
           "flops are dense S*S, not causal. The benchmark does not call load_state_dict."],
)]
