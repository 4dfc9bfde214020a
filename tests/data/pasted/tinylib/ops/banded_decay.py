# Copyright (c) 2031, Tinylib Authors (a fixture library written for the forensics tests)
# SPDX-License-Identifier: MIT
"""A made-up library kernel: a banded, gated decay recurrence over chunks, with a wrapper.

Written for tests/test_pasted.py; it imitates the shape of a library kernel (heuristics, block
pointers, a chunk loop with a carried state, a wrapper that launches it), nothing more."""

import torch
import triton
import triton.language as tl


@triton.heuristics({"HAS_BIAS": lambda args: args["bias"] is not None})
@triton.jit
def tinylib_banded_decay_fwd_kernel(x, gate, bias, out, state_out, T, stride_t, stride_h,
                                    H: tl.constexpr, D: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr,
                                    BAND: tl.constexpr, HAS_BIAS: tl.constexpr):
    i_d, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_d = i_d * BD + tl.arange(0, BD)
    m_d = o_d < D
    carry = tl.zeros([BD], dtype=tl.float32)
    leak = tl.zeros([BD], dtype=tl.float32)
    if HAS_BIAS:
        carry += tl.load(bias + i_h * D + o_d, mask=m_d, other=0.).to(tl.float32)
    for i_t in range(0, tl.cdiv(T, BT)):
        o_t = i_t * BT + tl.arange(0, BT)
        m_t = o_t < T
        p_x = x + i_b * T * stride_t + o_t[:, None] * stride_t + i_h * stride_h + o_d[None, :]
        p_g = gate + i_b * T * stride_t + o_t[:, None] * stride_t + i_h * stride_h + o_d[None, :]
        b_x = tl.load(p_x, mask=m_t[:, None] & m_d[None, :], other=0.).to(tl.float32)
        b_g = tl.load(p_g, mask=m_t[:, None] & m_d[None, :], other=0.).to(tl.float32)
        b_lg = tl.cumsum(tl.log(tl.sigmoid(b_g) + 1e-6), axis=0)
        b_w = tl.exp(b_lg)
        b_band = tl.where((o_t[:, None] % BAND) == (BAND - 1), 0.5, 1.0)
        b_acc = carry[None, :] * b_w + tl.cumsum(b_x * tl.exp(-b_lg) * b_band, axis=0) * b_w
        leak = leak * 0.75 + tl.sum(tl.where(m_t[:, None], b_acc, 0.), axis=0) * 0.25
        tl.store(out + i_b * T * stride_t + o_t[:, None] * stride_t + i_h * stride_h + o_d[None, :],
                 (b_acc + leak[None, :] * 0.125).to(out.dtype.element_ty), mask=m_t[:, None] & m_d[None, :])
        last = tl.minimum(T - i_t * BT, BT) - 1
        carry = tl.sum(tl.where(tl.arange(0, BT)[:, None] == last, b_acc, 0.), axis=0)
    tl.store(state_out + i_bh * D + o_d, carry + leak, mask=m_d)


def tinylib_banded_decay_forward_launch(x, gate, bias=None, band=16, chunk=32):
    B, T, H, D = x.shape
    out = torch.empty_like(x)
    state = torch.empty(B * H, D, dtype=torch.float32, device=x.device)
    BD = min(64, triton.next_power_of_2(D))
    grid = (triton.cdiv(D, BD), B * H)
    tinylib_banded_decay_fwd_kernel[grid](x, gate, bias, out, state, T, x.stride(1), x.stride(2), H=H, D=D,
                                          BT=chunk, BD=BD, BAND=band)
    return out, state.view(B, H, D)
