"""hard/01_fp8_gemm (B1): both deck versions."""
from __future__ import annotations

import torch

from ..registry import ProblemSpec
from ._util import cases, lazy_triton, stress

SHAPES = [dict(M=4096, N=4096, K=4096), dict(M=4096, N=4096, K=4127), dict(M=32, N=8192, K=8192),
          dict(M=4096, N=14336, K=4096)]
FORBIDDEN = ["torch._scaled_mm", "torch.ops.aten._scaled_mm"]


def oracle_scaled(model, inputs):
    """fp64: (x @ w^T) * s, no intermediate bf16 rounding (the rounding-free ideal)."""
    (x,) = inputs
    y = x.double() @ model.weight.double().T
    return (y * model.weight_scale.double()[None, :]).float()


def oracle_bf16_weight(model, inputs):
    (x,) = inputs
    return (x.double() @ model.weight.double().T).float()


_COMMON = dict(
    bench="hard", regime="compute", peak_key="fp8", shapes=SHAPES, check_shapes=SHAPES, seeds=(42, 123, 456),
    global_names=("M", "N", "K"), flops_expr="2*M*N*K", bytes_expr="M*K + K*N + M*N*2", n_trials=30,
    timing="cuda_events_l2_flush", forbidden=FORBIDDEN, forbidden_kind="substring", stress_since="2026-06-02",
)

CURRENT = ProblemSpec(
    name="01_fp8_gemm", deck_version="2026-06-14", since="2026-06-14", until=None,
    ref_file="hard_01_fp8_gemm.py",
    tolerance={"bfloat16": 0.2, "fp8_e4m3fn": 0.2},
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
    name="01_fp8_gemm", deck_version="pre-2026-06-14", since=None, until="2026-06-14",
    ref_file="hard_01_fp8_gemm_pre20260614.py",
    tolerance={"fp8_e4m3fn": 0.15},      # dead key: output is bf16 -> effectively bf16 0.01
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
