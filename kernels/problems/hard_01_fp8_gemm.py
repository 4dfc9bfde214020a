"""hard/01_fp8_gemm (B1): both deck versions."""
from __future__ import annotations

import torch

from forensics import problems

from ..registry import ProblemSpec
from ._util import cases, lazy_triton, stress

NAME = "01_fp8_gemm"


def oracle_scaled(model, inputs):
    """fp64: (x @ w^T) * s, no intermediate bf16 rounding (the rounding-free ideal)."""
    (x,) = inputs
    y = x.double() @ model.weight.double().T
    return (y * model.weight_scale.double()[None, :]).float()


def oracle_bf16_weight(model, inputs):
    (x,) = inputs
    return (x.double() @ model.weight.double().T).float()


_COMMON = dict(
    regime="compute", peak_key="fp8", global_names=("M", "N", "K"), flops_expr="2*M*N*K",
    bytes_expr="M*K + K*N + M*N*2", stress_since="2026-06-02",
)

CURRENT = ProblemSpec(
    entry=problems.get(NAME, "2026-06-14"),
    stress_cases=cases(
        stress("small_input", 5e-4, 5e-2, inputs=(0,), scale=1e-3),
        stress("large_input", 12.0, 5e-2, inputs=(0,), scale=64.0),
        stress("small_weight", 3e-3, 5e-2, state={"weight": 1e-2}),
    ),
    interface=dict(
        init="Model(M, N, K)", forward="forward(x: (M,K) float8_e4m3fn) -> (M,N) bfloat16",
        state_dict={"weight": dict(kind="buffer", dtype="float8_e4m3fn", shape="(N,K)", persistent=True),
                    "weight_scale": dict(kind="buffer", dtype="float32", shape="(N,)", persistent=True)},
        module_helpers=["Model", "get_inputs", "get_init_inputs", "M", "N", "K"], import_reference_allowed=True),
    oracle_fn=oracle_scaled, triton_fn=lazy_triton("fp8_gemm"),
    notes=["Reference rounds the matmul to bf16 BEFORE scaling; the oracle does not round (fp64).",
           "small_weight scales the fp8 `weight` buffer in place in both models (probes live reads)."],
    **_COMMON)

PRE_20260614 = ProblemSpec(
    entry=problems.get(NAME, "pre-2026-06-14"),     # tolerance fp8_e4m3fn 0.15: a dead key (the output is bf16 -> bf16 0.01)
    stress_cases=cases(
        stress("small_input", None, None, inputs=(0,), scale=1e-3),
        stress("large_input", None, None, inputs=(0,), scale=64.0),
    ),
    interface=dict(
        init="Model(M, N, K)", forward="forward(x: (M,K) float8_e4m3fn) -> (M,N) bfloat16",
        state_dict={"weight": dict(kind="parameter", dtype="bfloat16", shape="(N,K)", persistent=True)},
        module_helpers=["Model", "get_inputs", "get_init_inputs", "M", "N", "K"], import_reference_allowed=True),
    oracle_fn=oracle_bf16_weight, triton_fn=lazy_triton("fp8_gemm", "forward_bf16_weight"),
    notes=["Contract gives only 'stress cases used the generic bf16 tolerances': modelled as the "
           "small_input/large_input cases judged at the problem tolerance (bf16 0.01); the exact "
           "pre-2026-06-14 case list is not in the contract.",
           "x generation assumed identical to the current deck (fp8 of U[-4,4))."],
    **_COMMON)

SPECS = [PRE_20260614, CURRENT]
