"""Triton decode attention over a paged KV cache (hard/03_paged_attention), one launch.

Grid (batch, kv_head, split): the GQA group of query heads of one kv head attends a contiguous,
tile-aligned token range of its sequence with an fp32 online softmax.  A token tile is whole
pages: one block-table load per page, then [PAGE, D] rows at the slot stride.  With one split the
program writes the output directly.  With several (only when batch*kv_heads leaves SMs idle) each
program writes (max, sum, un-normalised output) to cached scratch and bumps a per-(b, kv head)
counter; the program that arrives last merges the splits and resets the counter to zero, so no
second launch and no per-call zeroing are needed.  K and V have separate base pointers and
strides, so the same kernel serves the packed [K|V] paged cache and megaqwen's contiguous
per-layer cache (one page: CONTIG).  seq_lens is only read on the device.
"""
from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from ._common import cdiv, ensure_allocator, interpreting, next_pow2

NEG = tl.constexpr(-1.0e30)       # finite "-inf" for running maxima: empty splits/rows never produce inf - inf


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, len_ptr, ml_ptr, acc_ptr, cnt_ptr, o_ptr,
                   sq_b, sq_h, s_page, s_slot, s_head, sbt_b, tokens_per_split, sm_scale, n_rows, v_col,
                   G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_T: tl.constexpr,
                   PAGE: tl.constexpr, CONTIG: tl.constexpr, SPLIT: tl.constexpr,
                   DOT_F32: tl.constexpr, Q_F32: tl.constexpr, TMA: tl.constexpr):
    b = tl.program_id(0)
    hk = tl.program_id(1)
    sp = tl.program_id(2)
    HKV = tl.num_programs(1)
    L = tl.load(len_ptr + b)
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_t = tl.arange(0, BLOCK_T)
    g_mask = offs_g < G
    q = tl.load(q_ptr + b * sq_b + (hk * G + offs_g)[:, None] * sq_h + offs_d[None, :], mask=g_mask[:, None], other=0.0)
    if DOT_F32 or Q_F32:
        q = q.to(tl.float32)
    else:
        q = q.to(k_ptr.dtype.element_ty)
    m_i = tl.full((BLOCK_G,), NEG, dtype=tl.float32)
    l_i = tl.zeros((BLOCK_G,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_G, D), dtype=tl.float32)
    head = hk * s_head
    bt_row = bt_ptr + b * sbt_b
    if CONTIG:
        base0 = tl.load(bt_row).to(tl.int64) * s_page + head
    if TMA:  # one-page tiles (BLOCK_T == PAGE) of the cache seen as [pages * PAGE slots, s_slot]
        kv_desc = tl.make_tensor_descriptor(k_ptr, shape=[n_rows, s_slot], strides=[s_slot, 1],
                                            block_shape=[PAGE, D])
    t_begin = sp * tokens_per_split
    t_end = tl.minimum(t_begin + tokens_per_split, L)
    for t0 in range(t_begin, t_end, BLOCK_T):
        t = t0 + offs_t
        t_mask = t < t_end
        if TMA:  # the slots past the sequence hold anything: V is zeroed there (0 * NaN is NaN)
            r0 = tl.load(bt_row + t0 // PAGE) * PAGE
            kt = kv_desc.load([r0, head])
            vt = tl.where(t_mask[:, None], kv_desc.load([r0, head + v_col]), 0.0)
        else:
            if CONTIG:
                row = base0 + t.to(tl.int64) * s_slot
            else:  # BLOCK_T // PAGE pages per tile (t0 is page aligned): one table entry per page
                pg_i = t0 // PAGE + tl.arange(0, BLOCK_T // PAGE)
                pg = tl.load(bt_row + pg_i, mask=pg_i * PAGE < t_end, other=0).to(tl.int64)
                row = tl.reshape(pg[:, None] * s_page + tl.arange(0, PAGE)[None, :] * s_slot, (BLOCK_T,)) + head
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
            pv = tl.dot(p, vt.to(tl.float32))
        elif Q_F32:  # fp32 output path (megaqwen): keep p in fp32
            pv = tl.dot(p, vt.to(tl.float32), input_precision="tf32x3")
        else:  # bf16 p, as in flash attention (0.4% per weight, far inside the 0.02 tolerance)
            pv = tl.dot(p.to(vt.dtype), vt)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    o_rows = o_ptr + ((b * HKV + hk) * G + offs_g)[:, None] * D + offs_d[None, :]
    if not SPLIT:
        tl.store(o_rows, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=g_mask[:, None])
    else:
        nsplit = tl.num_programs(2)
        pair = b * HKV + hk
        part = (pair * nsplit + sp) * BLOCK_G
        tl.store(ml_ptr + 2 * part + offs_g, m_i)
        tl.store(ml_ptr + 2 * part + BLOCK_G + offs_g, l_i)
        tl.store(acc_ptr + (part + offs_g)[:, None] * D + offs_d[None, :], acc)
        tl.debug_barrier()          # every thread's partial stores precede the release below
        arrived = tl.atomic_add(cnt_ptr + pair, 1, sem="acq_rel", scope="gpu")
        if arrived == nsplit - 1:   # last split of this (b, kv head): merge, then re-arm the counter
            tl.debug_barrier()
            m_all = tl.full((BLOCK_G,), NEG, dtype=tl.float32)
            l_all = tl.zeros((BLOCK_G,), dtype=tl.float32)
            o = tl.zeros((BLOCK_G, D), dtype=tl.float32)
            for s_i in range(nsplit):
                ps = (pair * nsplit + s_i) * BLOCK_G
                m_s = tl.load(ml_ptr + 2 * ps + offs_g, cache_modifier=".cg")
                l_s = tl.load(ml_ptr + 2 * ps + BLOCK_G + offs_g, cache_modifier=".cg")
                a_s = tl.load(acc_ptr + (ps + offs_g)[:, None] * D + offs_d[None, :], cache_modifier=".cg")
                m_n = tl.maximum(m_all, m_s)
                w_old = tl.exp(m_all - m_n)
                w_s = tl.exp(m_s - m_n)
                l_all = l_all * w_old + l_s * w_s
                o = o * w_old[:, None] + a_s * w_s[:, None]
                m_all = m_n
            tl.store(o_rows, (o / l_all[:, None]).to(o_ptr.dtype.element_ty), mask=g_mask[:, None])
            tl.atomic_xchg(cnt_ptr + pair, 0)


@functools.lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


_SCRATCH: dict = {}


def _scratch(device, pairs, nsplit, block_g, d):
    """(max/sum, accumulator, zeroed counters) for split-KV, cached per geometry and device and
    grown to the largest split count seen (megaqwen's max_len grows every step; the split count is
    a launch dimension, not a constexpr, so that never recompiles either).  Calls with one geometry
    on several streams at once would share it (not a use here)."""
    key = (device, pairs, block_g, d)
    buf = _SCRATCH.get(key)
    if buf is None or buf[0].numel() < pairs * nsplit * 2 * block_g:
        buf = (torch.empty(pairs * nsplit * 2 * block_g, dtype=torch.float32, device=device),
               torch.empty(pairs * nsplit * block_g * d, dtype=torch.float32, device=device),
               buf[2] if buf is not None else torch.zeros(pairs, dtype=torch.int32, device=device))
        _SCRATCH[key] = buf
    return buf


def decode_attention(query, k_base, v_base, s_page, s_slot, s_head, block_table, seq_lens, page_size, num_kv_heads,
                     max_len=None, out_dtype=torch.bfloat16, programs_per_sm=None, block_t=None, warps=None, stages=None,
                     tma=None):
    """query (B,H,D) -> (B,H,D) out_dtype.  Token t < seq_lens[b] of sequence b: page
    block_table[b, t//page_size], element address base + page*s_page + (t%page_size)*s_slot +
    kv_head*s_head + d.  max_len (host int, default the table's capacity) bounds seq_lens and only
    sizes the split; seq_lens stays on the device.  A one-column table is a contiguous cache (any
    page_size >= max_len); otherwise page_size must be a power of two.  tma: load one-page tiles
    through a TMA descriptor (default: wherever the cache layout allows it)."""
    B, H, D = query.shape
    G = H // num_kv_heads
    BLOCK_G = max(16, next_pow2(G))
    cpu = interpreting(query)
    contig = block_table.shape[1] == 1
    if max_len is None:
        max_len = block_table.shape[1] * page_size
    pairs = B * num_kv_heads
    # sm_90 launch.  Paged: one-page (16-token) tiles loaded by TMA, one warp, 3 stages, splits for
    # 8 programs per SM at D=128 and 4 at D=64.  Device time on an H200: at D=128 0.080 ms at B=32
    # against 0.120 for the pointer loads before it, 7-34% less on the four D=128 shapes
    # (docs/h200/2026-12-03-kernels-verify-tma1.json, again in -2026-12-04-...-3cd53c7.json); at
    # D=64 0.0213 against 0.0234 for the former pointer-load default (-3cd53c7).  Contiguous
    # (megaqwen's per-layer cache) or a layout TMA cannot describe: pointer loads, D=128 one-page
    # tiles x 5 stages in one warp at 8 per SM, D=64 64-token tiles x 3 in 4 warps at 2 per SM.
    # Pointer loads at D=128 (-944d520.json): one warp was 10-32% faster than 4 at the same tile
    # (the score tile is 16 x 16: 4 heads padded to 16 rows by 16 tokens; the 4-warp build's MMA
    # layout spreads 4 warps over 32 columns, so half of them repeat work, by its TTGIR; ncu showed
    # half its stall cycles on L1TEX, -ncu-d75d951-paged.txt); deeper K/V buffering and a grid with
    # kv heads fastest made no difference (-dc9fb5e, -6448cf5).
    small_tiles = D >= 128
    esize = k_base.element_size()
    v_col = (v_base.data_ptr() - k_base.data_ptr()) // esize
    # TMA: whole pages as boxes (page_size <= 64), k_base's first dimension the pages, packed
    # (s_page == page * s_slot: the descriptor spans shape[0] * page_size slot rows), V in the same
    # slot row as K, 16-byte aligned rows and base
    tma = True if tma is None else tma
    tma = (tma and not contig and page_size <= 64 and k_base.dim() >= 2 and k_base.stride(0) == s_page
           and s_page == page_size * s_slot and 0 <= v_col < s_slot
           and (s_slot * esize) % 16 == 0 and (s_head * esize) % 16 == 0 and (v_col * esize) % 16 == 0
           and k_base.data_ptr() % 16 == 0)
    tile = 16 if cpu or tma else (block_t or (16 if small_tiles else 64))
    stages = stages or (3 if tma else 5 if small_tiles else 3)
    programs_per_sm = programs_per_sm or ((8 if small_tiles else 4) if tma else (8 if small_tiles else 2))
    warps = warps or (1 if tma or small_tiles else 4)
    if contig:
        page, block_t = 1, tile
    else:
        if page_size & (page_size - 1):
            raise ValueError(f"page_size {page_size} is not a power of two")
        page = page_size
        block_t = page if tma else max(page_size, tile)
    if tma:
        ensure_allocator()
    # split only while the (b, kv head) pairs leave slots idle (programs_per_sm co-resident
    # programs per SM, 4 warps each); each split keeps >= 2 tiles.  The interpreter gets 3 slots per pair, so tests reach 1-3 splits via max_len.
    slots = 3 * pairs if cpu else programs_per_sm * _sm_count(query.device.index if query.device.index is not None
                                                 else torch.cuda.current_device())
    nsplit = max(1, min(slots // pairs, cdiv(max_len, 2 * block_t)))
    per = cdiv(cdiv(max_len, nsplit), block_t) * block_t
    nsplit = cdiv(max_len, per)
    out = torch.empty(B, H, D, dtype=out_dtype, device=query.device)
    ml, acc, cnt = _scratch(query.device, pairs, nsplit, BLOCK_G, D) if nsplit > 1 else (out, out, out)
    _decode_kernel[(B, num_kv_heads, nsplit)](
        query, k_base, v_base, block_table, seq_lens, ml, acc, cnt, out,
        query.stride(0), query.stride(1), s_page, s_slot, s_head, block_table.stride(0), per, 1.0 / math.sqrt(D),
        k_base.shape[0] * page_size if tma else 0, v_col if tma else 0,
        G=G, BLOCK_G=BLOCK_G, D=D, BLOCK_T=block_t, PAGE=page, CONTIG=contig, SPLIT=nsplit > 1, DOT_F32=cpu,
        Q_F32=query.dtype == torch.float32, TMA=tma, num_warps=4 if cpu else warps, num_stages=1 if cpu else stages)
    return out


def paged_decode(query, kv_cache, block_table, seq_lens, **launch):
    """launch: decode_attention's programs_per_sm / block_t / warps / stages (the timing variants)."""
    D = query.shape[-1]
    P, Hkv = kv_cache.shape[1], kv_cache.shape[2]
    assert kv_cache.stride(-1) == 1
    return decode_attention(query, kv_cache, kv_cache[..., D:], kv_cache.stride(0), kv_cache.stride(1),
                            kv_cache.stride(2), block_table, seq_lens, P, Hkv, **launch)


def forward(model, inputs):
    return paged_decode(*inputs)


#: timed beside `forward` by forensics.kernels.verify on a GPU (candidates for the defaults): programs per SM
#: (sizes the split), key tile, warps, stages, TMA.  Measured 2026-12-03/04 (device time) and not
#: adopted: 128-token tiles, (2, 128, 4, 2) 10-50x slower on D=128 (docs/h200/...-d8827ad.json);
#: 2-4 deep buffers, 8 per SM at 4 warps (-dc9fb5e); 1-2 warps at D=64 (-944d520); pointer loads at
#: D=128 other than (8, 16, 1, 5) within 1% of it or slower (-c8e608b); TMA (8, 1, 5), (8, 4, 4),
#: (4, 4, 4), (16, 1, 4) (-tma1) and (2, 1, 3), (4, 2, 3), (2, 4, 4) (-3cd53c7) slower than the
#: defaults on 4 of 5 shapes.  Kept below as the comparison: the two former pointer-load defaults
#: (14-44% slower at D=128, 8-10% at D=64 in -3e62e03 and -21d8575), TMA (8, 2, 4) (within 6% of
#: the D=128 default either way in four runs) and TMA at 8 per SM for D=64 (6-8% slower).
def _variant(pps, bt, w, st, tma=None):
    return lambda model, inputs: paged_decode(*inputs, programs_per_sm=pps, block_t=bt, warps=w, stages=st, tma=tma)


VARIANTS = {"ptr_p8_t16_w1_s5": _variant(8, 16, 1, 5, tma=False),
            "ptr_p2_t64_w4_s3": _variant(2, 64, 4, 3, tma=False),
            "tma_p8_w2_s4": _variant(8, 16, 2, 4, tma=True),
            "tma_p8_w1_s3": _variant(8, 16, 1, 3, tma=True)}
