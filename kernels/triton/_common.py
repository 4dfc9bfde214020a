"""Helpers shared by the Triton references."""
from __future__ import annotations

import os

import torch


def interpreting(t: torch.Tensor | None = None) -> bool:
    """True when kernels run on the CPU interpreter (TRITON_INTERPRET=1, CPU tensors)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or (t is not None and t.device.type == "cpu")


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for host ints.  triton.cdiv is a constexpr function in Triton 3.6 whose wrapper
    unwraps every argument: several microseconds a call on a launch's host path."""
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


# The Triton CPU interpreter (TRITON_INTERPRET=1, triton 3.9) computes tl.dot on bf16 operands
# wrongly (values ~1e10) while fp32 and fp8 dots are right; every kernel therefore takes a
# `DOT_F32` constexpr that upcasts bf16 dot operands to fp32 when interpreting (bf16 products
# are exact in fp32, so the result matches a bf16 MMA with fp32 accumulation up to summation order).
