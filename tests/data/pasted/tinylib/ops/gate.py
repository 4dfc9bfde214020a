# Copyright (c) 2031, Tinylib Authors (a fixture library written for the forensics tests)
"""The fixture library's pointwise gate: a long kernel with no dot, reduction, scan or loop (it
cannot compute part of a GEMM, an attention or a sort), written for tests/test_pasted.py."""

import triton
import triton.language as tl


@triton.jit
def tinylib_fused_gate_activation_kernel(x, gate, bias, scale, out, n, alpha, beta, clip,
                                         BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b_x = tl.load(x + offs, mask=mask, other=0.).to(tl.float32)
    b_g = tl.load(gate + offs, mask=mask, other=0.).to(tl.float32)
    if HAS_BIAS:
        b_g = b_g + tl.load(bias + offs % 128, mask=mask, other=0.).to(tl.float32)
    b_s = tl.load(scale + offs // 64, mask=mask, other=1.).to(tl.float32)
    b_sig = tl.sigmoid(b_g * alpha)
    b_silu = b_x * tl.sigmoid(b_x) * (1. + beta * b_sig)
    b_mix = tl.where(b_g > 0, b_silu * b_sig, b_x * (1. - b_sig) * 0.5)
    b_mix = tl.minimum(tl.maximum(b_mix * b_s, -clip), clip)
    b_res = b_mix + 0.0625 * b_x * b_sig - 0.03125 * b_g
    tl.store(out + offs, b_res.to(out.dtype.element_ty), mask=mask)
