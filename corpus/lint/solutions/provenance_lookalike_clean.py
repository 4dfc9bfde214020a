# Copyright (c) 2017 - 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0
# One decode step: like flash-attn's online softmax, one pass over the cache; inspired by vLLM's
# paged attention, but the kernel below is our own.
import torch
import triton
import triton.language as tl


@triton.jit
def decode_attn_kernel(q, k, v, out, L, D: tl.constexpr, BL: tl.constexpr):
    h = tl.program_id(0)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + h * D + o_d).to(tl.float32)
    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for s in range(0, L, BL):
        o_l = s + tl.arange(0, BL)
        b_k = tl.load(k + (h * L + o_l)[:, None] * D + o_d[None, :], mask=(o_l < L)[:, None], other=0.).to(tl.float32)
        sc = tl.where(o_l < L, tl.sum(b_k * b_q[None, :], axis=1), -float("inf"))
        m_new = tl.maximum(m_i, tl.max(sc, axis=0))
        p = tl.exp(sc - m_new)
        alpha = tl.exp(m_i - m_new)
        b_v = tl.load(v + (h * L + o_l)[:, None] * D + o_d[None, :], mask=(o_l < L)[:, None], other=0.).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * b_v, axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new
    tl.store(out + h * D + o_d, acc / l_i)


class Model(torch.nn.Module):
    def forward(self, q, k, v):
        H, L, D = k.shape
        out = torch.empty_like(q)
        decode_attn_kernel[(H,)](q, k, v, out, L, D=D, BL=64)
        return out
