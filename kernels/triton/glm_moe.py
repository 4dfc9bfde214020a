"""cuda/01_glm52_fused_moe through the grouped GEMM kernels (kernels/triton/grouped_gemm.py).

Torch glue sorts the (token, slot) pairs by expert (device-side, no host sync); the grouped
SwiGLU kernel gathers token rows and computes h = silu(x W1_gate^T) * (x W1_up^T) in fp32,
stored as bf16 (the one rounding the fp32 reference does not have: it is far inside the 0.08
tolerance); the grouped GEMM computes w * (h W2^T) in fp32 into a per-slot buffer, summed over
the 8 slots, plus the unweighted shared expert(s).

Decode (T <= DECODE_MAX_T): two GEMV-style launches reading only the routed and shared experts'
weights, with no sort and no host work: `_decode_swiglu_kernel` gives h = silu(x W1_gate^T) *
(x W1_up^T) in fp32 for each (token, slot), the expert id read from expert_ids on the device;
`_decode_down_kernel` sums w_slot * (h W2^T) over the slots (shared: weight 1) per output block,
stored as bf16.  fp32 FMAs and row sums, no MMA (a 16-row tile for 1 row would waste 15/16).
The grouped path at T=1 ran 257x16 mostly-empty programs and ~20 torch launches (6.8x the
library op on the H200).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import cdiv, interpreting
from .grouped_gemm import grouped_gemm, grouped_swiglu

#: tokens up to which the decode kernels are used (they re-read the routed weights per token)
DECODE_MAX_T = 4


@triton.jit
def _decode_swiglu_kernel(x_ptr, ids_ptr, w1r_ptr, w1s_ptr, h_ptr, T, I, H,
                          sxt, sit, swe, swn, sse, sht, shj,
                          TOP_K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    t = tl.program_id(0)
    j = tl.program_id(1)                         # slot: TOP_K routed, then the shared experts
    offs_n = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < I
    offs_k = tl.arange(0, BLOCK_K)
    if j < TOP_K:
        base = w1r_ptr + tl.load(ids_ptr + t * sit + j).to(tl.int64) * swe     # E*2I*H > 2^31
    else:
        base = w1s_ptr + (j - TOP_K).to(tl.int64) * sse
    rows_g = base + offs_n[:, None].to(tl.int64) * swn
    rows_u = rows_g + I * swn
    acc_g = tl.zeros((BLOCK_N,), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):
        kk = k0 + offs_k
        k_mask = kk < H
        xv = tl.load(x_ptr + t * sxt + kk, mask=k_mask, other=0.0).to(tl.float32)[None, :]
        m2 = n_mask[:, None] & k_mask[None, :]
        acc_g += tl.sum(tl.load(rows_g + kk[None, :], mask=m2, other=0.0).to(tl.float32) * xv, axis=1)
        acc_u += tl.sum(tl.load(rows_u + kk[None, :], mask=m2, other=0.0).to(tl.float32) * xv, axis=1)
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    tl.store(h_ptr + t * sht + j * shj + offs_n, h, mask=n_mask)


@triton.jit
def _decode_down_kernel(h_ptr, ids_ptr, wts_ptr, w2r_ptr, w2s_ptr, out_ptr, T, H, I,
                        sht, shj, sit, swe, swn, sse, sot,
                        TOP_K: tl.constexpr, N_SLOTS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    t = tl.program_id(0)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < H
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for j in tl.static_range(N_SLOTS):           # in-program sum over the slots: no atomics
        if j < TOP_K:
            base = w2r_ptr + tl.load(ids_ptr + t * sit + j).to(tl.int64) * swe
        else:
            base = w2s_ptr + (j - TOP_K) * sse
        rows = base + offs_n[:, None].to(tl.int64) * swn
        part = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for k0 in range(0, I, BLOCK_K):
            kk = k0 + offs_k
            k_mask = kk < I
            hv = tl.load(h_ptr + t * sht + j * shj + kk, mask=k_mask, other=0.0)[None, :]
            wv = tl.load(rows + kk[None, :], mask=n_mask[:, None] & k_mask[None, :], other=0.0).to(tl.float32)
            part += tl.sum(wv * hv, axis=1)
        if j < TOP_K:
            part = part * tl.load(wts_ptr + t * sit + j).to(tl.float32)
        acc += part
    tl.store(out_ptr + t * sot + offs_n, acc.to(out_ptr.dtype.element_ty), mask=n_mask)


def _cfgs(items):
    return [triton.Config(dict(BLOCK_N=bn, BLOCK_K=bk), num_warps=w, num_stages=st) for bn, bk, w, st in items]


#: block shapes autotuned on the GPU (nothing here could be timed); the interpreter uses the first
_SWIGLU_CFGS = _cfgs(((16, 256, 4, 3), (8, 512, 4, 3), (32, 128, 4, 3), (16, 512, 8, 3), (32, 256, 8, 3)))
_DOWN_CFGS = _cfgs(((8, 512, 4, 3), (16, 256, 4, 3), (4, 1024, 4, 3), (16, 512, 8, 3), (32, 256, 8, 3)))
_decode_swiglu_tuned = triton.autotune(_SWIGLU_CFGS, key=["T", "I", "H"])(_decode_swiglu_kernel)
_decode_down_tuned = triton.autotune(_DOWN_CFGS, key=["T", "H", "I"])(_decode_down_kernel)


def _decode(model, x, ids, weights):
    T, H = x.shape
    I, top_k = model.I, ids.shape[1]
    w1r, w2r, w1s, w2s = model.w1_routed, model.w2_routed, model.w1_shared, model.w2_shared
    assert all(w.stride(-1) == 1 for w in (w1r, w2r, w1s, w2s)) and x.stride(1) == 1
    ids, weights = ids.contiguous(), weights.contiguous()
    n_slots = top_k + w1s.shape[0]
    h = torch.empty(T, n_slots, I, dtype=torch.float32, device=x.device)
    out = torch.empty(T, H, dtype=torch.bfloat16, device=x.device)
    a1 = (x, ids, w1r, w1s, h, T, I, H, x.stride(0), ids.stride(0), w1r.stride(0), w1r.stride(1), w1s.stride(0),
          h.stride(0), h.stride(1))
    a2 = (h, ids, weights, w2r, w2s, out, T, H, I, h.stride(0), h.stride(1), ids.stride(0), w2r.stride(0),
          w2r.stride(1), w2s.stride(0), out.stride(0))
    if interpreting(x):   # no autotuning without CUDA events: the first configs
        c1, c2 = _SWIGLU_CFGS[0].kwargs, _DOWN_CFGS[0].kwargs
        _decode_swiglu_kernel[(T, n_slots, cdiv(I, c1["BLOCK_N"]))](*a1, TOP_K=top_k, **c1)
        _decode_down_kernel[(T, cdiv(H, c2["BLOCK_N"]))](*a2, TOP_K=top_k, N_SLOTS=n_slots, **c2)
    else:
        _decode_swiglu_tuned[lambda m: (T, n_slots, cdiv(I, m["BLOCK_N"]))](*a1, TOP_K=top_k)
        _decode_down_tuned[lambda m: (T, cdiv(H, m["BLOCK_N"]))](*a2, TOP_K=top_k, N_SLOTS=n_slots)
    return out


def _ffn(x, offsets, w1, w2, inter, rows, n_rows, dst, scale, out):
    E, two_i, H = w1.shape
    h = torch.empty(n_rows, inter, dtype=torch.bfloat16, device=x.device)
    grouped_swiglu(x, offsets, w1, w1[:, inter:, :], (w1.stride(0), w1.stride(2), w1.stride(1)), h, rows=rows,
                   round_bf16=False)
    grouped_gemm(h, offsets, w2, (w2.stride(0), w2.stride(2), w2.stride(1)), out, dst, scale)
    return out


def forward(model, inputs):
    x, ids, weights = inputs
    T, H = x.shape
    if T <= DECODE_MAX_T:
        return _decode(model, x, ids, weights)
    E, I, top_k = model.w1_routed.shape[0], model.I, ids.shape[1]
    dev = x.device
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    # per-expert counts without a host sync (bincount on CUDA reads the max back to size its output)
    counts = torch.zeros(E, dtype=torch.int64, device=dev).scatter_add_(0, flat, torch.ones_like(flat))
    offsets = torch.zeros(E + 1, dtype=torch.int32, device=dev)
    offsets[1:] = counts.cumsum(0).to(torch.int32)
    tokens = (order // top_k).to(torch.int32)
    scale = weights.reshape(-1)[order].float()
    slots = torch.empty(T * top_k, H, dtype=torch.float32, device=dev)
    _ffn(x, offsets, model.w1_routed, model.w2_routed, I, tokens, T * top_k, order.to(torch.int32), scale, slots)
    out = slots.view(T, top_k, H).sum(1)
    n_shared = model.w1_shared.shape[0]
    if n_shared:
        shared = torch.empty(T, H, dtype=torch.float32, device=dev)
        one = torch.arange(0, 2 * T, T, dtype=torch.int32, device=dev)   # [0, T]; torch.tensor() would copy and sync
        ar = torch.arange(T, dtype=torch.int32, device=dev)
        for s in range(n_shared):
            _ffn(x, one, model.w1_shared[s:s + 1], model.w2_shared[s:s + 1], I, ar, T, ar, None, shared)
            out += shared
    return out.to(torch.bfloat16)
