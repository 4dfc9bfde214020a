"""Triton split-KV decode attention over a paged KV cache (hard/03_paged_attention).

Kernel 1, grid (batch, kv_head, split): the GQA group of query heads of one kv head attends a
contiguous token range of its sequence, gathering K/V rows through the block table, with an
fp32 online softmax; it writes (max, sum, un-normalised output) per split.  Kernel 2 merges the
splits.  K and V are addressed through separate base pointers and strides, so the same kernels
serve a packed [K|V] paged cache and a contiguous per-layer cache (megaqwen decode).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._common import interpreting, next_pow2


@triton.jit
def _split_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, len_ptr, m_ptr, l_ptr, acc_ptr,
                  sq_b, sq_h, s_page, s_slot, s_head, sbt_b, page_size, tokens_per_split, sm_scale,
                  G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_T: tl.constexpr,
                  NSPLIT: tl.constexpr, DOT_F32: tl.constexpr, Q_F32: tl.constexpr):
    b = tl.program_id(0)
    hk = tl.program_id(1)
    sp = tl.program_id(2)
    L = tl.load(len_ptr + b)
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_t = tl.arange(0, BLOCK_T)
    g_mask = offs_g < G
    q = tl.load(q_ptr + b * sq_b + (hk * G + offs_g)[:, None] * sq_h + offs_d[None, :], mask=g_mask[:, None], other=0.0)
    if DOT_F32:
        q = q.to(tl.float32)
    m_i = tl.full((BLOCK_G,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_G,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_G, D), dtype=tl.float32)
    t_begin = sp * tokens_per_split
    t_end = tl.minimum(t_begin + tokens_per_split, L)
    for t0 in range(t_begin, t_end, BLOCK_T):
        t = t0 + offs_t
        t_mask = t < t_end
        page = tl.load(bt_ptr + b * sbt_b + t // page_size, mask=t_mask, other=0).to(tl.int64)
        row = page * s_page + (t % page_size) * s_slot + hk * s_head
        kt = tl.load(k_ptr + row[:, None] + offs_d[None, :], mask=t_mask[:, None], other=0.0)
        vt = tl.load(v_ptr + row[:, None] + offs_d[None, :], mask=t_mask[:, None], other=0.0)
        if DOT_F32:
            s = tl.dot(q, tl.trans(kt.to(tl.float32)))
        elif Q_F32:  # fp32 query (megaqwen): near-fp32 dot
            s = tl.dot(q, tl.trans(kt.to(tl.float32)), input_precision="tf32x3")
        else:  # bf16 x bf16 products are exact in the fp32 accumulator
            s = tl.dot(q, tl.trans(kt))
        s = tl.where(t_mask[None, :], s * sm_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if DOT_F32:
            acc = acc * alpha[:, None] + tl.dot(p, vt.to(tl.float32))
        else:
            acc = acc * alpha[:, None] + tl.dot(p, vt.to(tl.float32), input_precision="tf32x3")
        m_i = m_new
    base = ((b * tl.num_programs(1) + hk) * NSPLIT + sp) * BLOCK_G
    tl.store(m_ptr + base + offs_g, m_i)
    tl.store(l_ptr + base + offs_g, l_i)
    tl.store(acc_ptr + (base + offs_g)[:, None] * D + offs_d[None, :], acc)


@triton.jit
def _merge_kernel(m_ptr, l_ptr, acc_ptr, o_ptr, so_b, so_h, HKV: tl.constexpr, G: tl.constexpr,
                  BLOCK_G: tl.constexpr, D: tl.constexpr, NSPLIT: tl.constexpr, BLOCK_S: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    hk = h // G
    g = h % G
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    s_mask = offs_s < NSPLIT
    idx = ((b * HKV + hk) * NSPLIT + offs_s) * BLOCK_G + g
    m = tl.load(m_ptr + idx, mask=s_mask, other=float("-inf"))
    l = tl.load(l_ptr + idx, mask=s_mask, other=0.0)
    a = tl.load(acc_ptr + idx[:, None] * D + offs_d[None, :], mask=s_mask[:, None], other=0.0)
    m_all = tl.max(m, axis=0)
    w = tl.where(m > float("-inf"), tl.exp(m - m_all), 0.0)
    out = tl.sum(a * w[:, None], axis=0) / tl.sum(l * w, axis=0)
    tl.store(o_ptr + b * so_b + h * so_h + offs_d, out.to(o_ptr.dtype.element_ty))


def decode_attention(query, k_base, v_base, s_page, s_slot, s_head, block_table, seq_lens, page_size, num_kv_heads,
                     max_len=None, out_dtype=torch.bfloat16):
    """query (B,H,D) -> (B,H,D) bf16.  Token t of sequence b: page block_table[b, t//page_size],
    element address base + page*s_page + (t%page_size)*s_slot + kv_head*s_head + d."""
    B, H, D = query.shape
    G = H // num_kv_heads
    BLOCK_G = max(16, next_pow2(G))
    cpu = interpreting(query)
    BLOCK_T = 16 if cpu else 64
    if max_len is None:
        max_len = block_table.shape[1] * page_size
    if cpu:
        nsplit = 2
    else:
        sms = torch.cuda.get_device_properties(query.device).multi_processor_count
        nsplit = max(1, min(triton.cdiv(2 * sms, B * num_kv_heads), triton.cdiv(max_len, 256)))
    per = triton.cdiv(triton.cdiv(max_len, nsplit), BLOCK_T) * BLOCK_T
    nsplit = max(1, triton.cdiv(max_len, per))
    m = torch.empty(B, num_kv_heads, nsplit, BLOCK_G, dtype=torch.float32, device=query.device)
    l = torch.empty_like(m)
    acc = torch.empty(B, num_kv_heads, nsplit, BLOCK_G, D, dtype=torch.float32, device=query.device)
    _split_kernel[(B, num_kv_heads, nsplit)](
        query, k_base, v_base, block_table, seq_lens, m, l, acc,
        query.stride(0), query.stride(1), s_page, s_slot, s_head, block_table.stride(0), page_size, per,
        1.0 / math.sqrt(D), G=G, BLOCK_G=BLOCK_G, D=D, BLOCK_T=BLOCK_T, NSPLIT=nsplit, DOT_F32=cpu,
        Q_F32=query.dtype == torch.float32,
        num_warps=4, num_stages=1 if cpu else 3)
    out = torch.empty(B, H, D, dtype=out_dtype, device=query.device)
    _merge_kernel[(B, H)](m, l, acc, out, out.stride(0), out.stride(1), HKV=num_kv_heads, G=G, BLOCK_G=BLOCK_G, D=D,
                          NSPLIT=nsplit, BLOCK_S=max(2, next_pow2(nsplit)), num_warps=1 if cpu else 2)
    return out


def paged_decode(query, kv_cache, block_table, seq_lens):
    D = query.shape[-1]
    P, Hkv = kv_cache.shape[1], kv_cache.shape[2]
    assert kv_cache.stride(-1) == 1
    return decode_attention(query, kv_cache, kv_cache[..., D:], kv_cache.stride(0), kv_cache.stride(1),
                            kv_cache.stride(2), block_table, seq_lens, P, Hkv)


def forward(model, inputs):
    return paged_decode(*inputs)
