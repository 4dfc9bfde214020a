"""Triton grouped GEMMs over expert-contiguous rows (hard/06 sonic MoE, cuda/01 GLM MoE).

Rows of expert e are [offsets[e], offsets[e+1]) of the (optionally gathered) activation matrix.
Programs are laid out as (row tile, column tile); a row tile id is mapped to its expert on the
device by counting the prefix of per-expert tile counts (no host synchronisation).  Weights are
addressed through strides, so both the (E, H, I) "x @ W" layout and the (E, N, K) "x @ W^T"
layout work without copies.

`grouped_swiglu`: out = silu(x W_gate) * (x W_up) with the reference's bf16 rounding points
(each GEMM rounded to bf16, silu and product on bf16 values), or the fp32 variant (no rounding).
`grouped_gemm`: out = (x W) * row_scale, fp32 output, rows written at a per-row destination.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import cdiv, interpreting, next_pow2


@triton.jit
def _find_tile(tile_cum_ptr, pid_m, E, BLOCK_E: tl.constexpr):
    """expert e with tile_cum[e] <= pid_m < tile_cum[e+1]; tile start inside that expert."""
    offs = tl.arange(0, BLOCK_E)
    cum = tl.load(tile_cum_ptr + 1 + offs, mask=offs < E, other=2147483647)
    e = tl.sum((cum <= pid_m).to(tl.int32), axis=0)
    first = tl.load(tile_cum_ptr + e)
    return e, pid_m - first


@triton.jit
def _swiglu_kernel(x_ptr, rows_ptr, off_ptr, tile_cum_ptr, wg_ptr, wu_ptr, out_ptr,
                   E, N, KD, total_tiles,
                   sxr, sxk, swe, swk, swn, sor, son,
                   HAS_ROWS: tl.constexpr, ROUND_BF16: tl.constexpr, BLOCK_E: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT_F32: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m >= tl.load(tile_cum_ptr + E):
        return
    e, t = _find_tile(tile_cum_ptr, pid_m, E, BLOCK_E)
    start = tl.load(off_ptr + e)
    end = tl.load(off_ptr + e + 1)
    offs_r = start + t * BLOCK_M + tl.arange(0, BLOCK_M)
    r_mask = offs_r < end
    if HAS_ROWS:
        src = tl.load(rows_ptr + offs_r, mask=r_mask, other=0).to(tl.int64)
    else:
        src = offs_r.to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    wbase = e.to(tl.int64) * swe
    for k0 in range(0, KD, BLOCK_K):
        kk = k0 + offs_k
        k_mask = kk < KD
        a = tl.load(x_ptr + src[:, None] * sxr + kk[None, :] * sxk, mask=r_mask[:, None] & k_mask[None, :], other=0.0)
        woff = wbase + kk[:, None] * swk + offs_n[None, :] * swn
        wmask = k_mask[:, None] & n_mask[None, :]
        bg = tl.load(wg_ptr + woff, mask=wmask, other=0.0)
        bu = tl.load(wu_ptr + woff, mask=wmask, other=0.0)
        if DOT_F32:
            acc_g += tl.dot(a.to(tl.float32), bg.to(tl.float32))
            acc_u += tl.dot(a.to(tl.float32), bu.to(tl.float32))
        else:
            acc_g = tl.dot(a, bg, acc_g)
            acc_u = tl.dot(a, bu, acc_u)
    if ROUND_BF16:
        g = acc_g.to(tl.bfloat16).to(tl.float32)
        u = acc_u.to(tl.bfloat16).to(tl.float32)
        act = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
        res = act * u
    else:
        res = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    tl.store(out_ptr + offs_r[:, None] * sor + offs_n[None, :] * son, res.to(out_ptr.dtype.element_ty),
             mask=r_mask[:, None] & n_mask[None, :])


@triton.jit
def _gemm_kernel(x_ptr, off_ptr, tile_cum_ptr, w_ptr, scale_ptr, dst_ptr, out_ptr,
                 E, N, KD, sxr, sxk, swe, swk, swn, sor, son,
                 HAS_SCALE: tl.constexpr, BLOCK_E: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT_F32: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m >= tl.load(tile_cum_ptr + E):
        return
    e, t = _find_tile(tile_cum_ptr, pid_m, E, BLOCK_E)
    start = tl.load(off_ptr + e)
    end = tl.load(off_ptr + e + 1)
    offs_r = start + t * BLOCK_M + tl.arange(0, BLOCK_M)
    r_mask = offs_r < end
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    wbase = e.to(tl.int64) * swe
    for k0 in range(0, KD, BLOCK_K):
        kk = k0 + offs_k
        k_mask = kk < KD
        a = tl.load(x_ptr + offs_r[:, None].to(tl.int64) * sxr + kk[None, :] * sxk,
                    mask=r_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(w_ptr + wbase + kk[:, None] * swk + offs_n[None, :] * swn,
                    mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        if DOT_F32:
            acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
        else:
            acc = tl.dot(a, b, acc)
    if HAS_SCALE:
        acc = acc * tl.load(scale_ptr + offs_r, mask=r_mask, other=0.0)[:, None]
    dst = tl.load(dst_ptr + offs_r, mask=r_mask, other=0).to(tl.int64)
    tl.store(out_ptr + dst[:, None] * sor + offs_n[None, :] * son, acc.to(out_ptr.dtype.element_ty),
             mask=r_mask[:, None] & n_mask[None, :])


def _tiles(offsets: torch.Tensor, block_m: int, total_rows: int):
    counts = (offsets[1:] - offsets[:-1]).to(torch.int64)
    tiles = (counts + block_m - 1) // block_m
    cum = torch.zeros(offsets.numel(), dtype=torch.int32, device=offsets.device)
    cum[1:] = tiles.cumsum(0).to(torch.int32)
    bound = cdiv(total_rows, block_m) + offsets.numel() - 1      # >= sum of tiles
    return cum, bound


def _blocks(cpu: bool, N: int, big: bool = True):
    if cpu:
        return dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=4, num_stages=1)
    return dict(BLOCK_M=128 if big else 64, BLOCK_N=128 if N >= 128 else 64, BLOCK_K=64, num_warps=8, num_stages=3)


def grouped_swiglu(x, offsets, w_gate, w_up, w_strides, out, rows=None, round_bf16=True):
    """x (R, KD) bf16; expert e rows are offsets[e]:offsets[e+1] (of `rows`-gathered x when given);
    w_gate/w_up base tensors with w_strides = (expert, k, n) element strides; out (R', N)."""
    E = offsets.numel() - 1
    N = out.shape[1]
    KD = x.shape[1]
    cpu = interpreting(x)
    cfg = _blocks(cpu, N, big=out.shape[0] >= 64 * E)
    cum, bound = _tiles(offsets, cfg["BLOCK_M"], out.shape[0] if rows is None else rows.numel())
    grid = (bound, cdiv(N, cfg["BLOCK_N"]))
    _swiglu_kernel[grid](x, rows if rows is not None else offsets, offsets, cum, w_gate, w_up, out, E, N, KD, bound,
                         x.stride(0), x.stride(1), *w_strides, out.stride(0), out.stride(1),
                         HAS_ROWS=rows is not None, ROUND_BF16=round_bf16, BLOCK_E=max(16, next_pow2(E)),
                         DOT_F32=cpu, **cfg)
    return out


def grouped_gemm(x, offsets, w, w_strides, out, dst_rows, row_scale=None):
    """out[dst_rows[r]] = (x[r] @ W_e) * row_scale[r] for r in expert e's rows (fp32 math)."""
    E = offsets.numel() - 1
    N = out.shape[1]
    KD = x.shape[1]
    cpu = interpreting(x)
    cfg = _blocks(cpu, N, big=x.shape[0] >= 64 * E)
    cum, bound = _tiles(offsets, cfg["BLOCK_M"], x.shape[0])
    grid = (bound, cdiv(N, cfg["BLOCK_N"]))
    _gemm_kernel[grid](x, offsets, cum, w, row_scale if row_scale is not None else x, dst_rows, out, E, N, KD,
                       x.stride(0), x.stride(1), *w_strides, out.stride(0), out.stride(1),
                       HAS_SCALE=row_scale is not None, BLOCK_E=max(16, next_pow2(E)), DOT_F32=cpu, **cfg)
    return out
