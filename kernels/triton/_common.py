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


class _Scratch:
    """triton.set_allocator's allocator for kernels that build TMA descriptors on the device
    (tl.make_tensor_descriptor: 128 bytes of global memory per program).  Triton calls it at every
    such launch, so the buffer is cached per device and stream and grown, not allocated per call:
    launches on one stream run in order, so one buffer serves them all, and kernels on two streams
    never share one."""

    def __init__(self):
        self.bufs: dict = {}

    def __call__(self, size: int, alignment: int, stream):
        dev = torch.cuda.current_device() if torch.cuda.is_available() else "cpu"
        buf = self.bufs.get((dev, stream))
        if buf is None or buf.numel() < size:
            buf = torch.empty(max(size, 1 << 16), dtype=torch.int8, device="cpu" if dev == "cpu" else f"cuda:{dev}")
            self.bufs[(dev, stream)] = buf
        return buf


_SCRATCH_ALLOCATOR = _Scratch()


def ensure_allocator() -> None:
    """Install the cached scratch allocator unless one is set (Triton's is a ContextVar: per thread
    and context, so each launching wrapper calls this; the check is a ContextVar read)."""
    import triton
    try:
        from triton.runtime import _allocation
        unset = isinstance(_allocation._allocator.get(), _allocation.NullAllocator)
    except (ImportError, AttributeError):      # another Triton layout: install ours
        unset = True
    if unset:
        triton.set_allocator(_SCRATCH_ALLOCATOR)
