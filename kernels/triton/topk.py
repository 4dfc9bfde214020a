"""Triton top-k (hard/05_topk_bitonic): hierarchical tile selection.

Level 0: each program takes a TILE-wide slice of a row and extracts its k largest values by k
rounds of max/argmax (first index on ties), writing (value, source index) candidates.  Each
further level runs the same kernel over the candidate buffer until one tile per row remains;
the last level's output is the sorted top-k.  Ties resolve to the lowest source index at every
level (candidates stay in index order within equal values), like a stable descending sort.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import cdiv, next_pow2


@triton.jit
def _tile_topk_kernel(x_ptr, xi_ptr, ov_ptr, oi_ptr, n, sx_row, so_row,
                      K: tl.constexpr, TILE: tl.constexpr, HAS_IDX: tl.constexpr):
    row = tl.program_id(0)
    tile = tl.program_id(1)
    offs = tile * TILE + tl.arange(0, TILE)
    mask = offs < n
    v = tl.load(x_ptr + row * sx_row + offs, mask=mask, other=float("-inf"))
    if HAS_IDX:
        src = tl.load(xi_ptr + row * sx_row + offs, mask=mask, other=0)
    else:
        src = offs.to(tl.int64)
    pos = tl.arange(0, TILE)
    out_base = row * so_row + tile * K
    for i in range(K):
        best = tl.max(v, axis=0)
        at = tl.min(tl.where(v == best, pos, TILE), axis=0)        # first position of the max
        sel = pos == at
        tl.store(ov_ptr + out_base + i, best)
        tl.store(oi_ptr + out_base + i, tl.sum(tl.where(sel, src, 0), axis=0))
        v = tl.where(sel, float("-inf"), v)
        pos = tl.where(sel, TILE + 1, pos)                           # never selected twice


@triton.jit
def _row_argmax_kernel(x_ptr, ov_ptr, oi_ptr, n, sx_row, BLOCK: tl.constexpr):
    """k=1: one program per row streams it in BLOCK chunks keeping a running (max, first index);
    a chunk replaces it only when strictly greater, so ties keep the lowest index."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    best = tl.full((), float("-inf"), tl.float32)
    at = tl.full((), 0, tl.int32)
    for c0 in range(0, n, BLOCK):
        v = tl.load(x_ptr + row * sx_row + c0 + offs, mask=c0 + offs < n, other=float("-inf"))
        m = tl.max(v, axis=0)
        first = tl.min(tl.where(v == m, c0 + offs, n), axis=0)
        take = m > best
        at = tl.where(take, first, at)
        best = tl.where(take, m, best)
    tl.store(ov_ptr + row, best)
    tl.store(oi_ptr + row, at.to(tl.int64))


def topk(x: torch.Tensor, k: int):
    """x (batch, n) fp32 -> (values (batch,k) descending, indices (batch,k) int64)."""
    assert x.dim() == 2
    batch, n = x.shape
    x = x.contiguous()
    if k == 1:   # one launch instead of a level per 1024 columns (host launch cost dominated)
        ov = torch.empty(batch, 1, dtype=x.dtype, device=x.device)
        oi = torch.empty(batch, 1, dtype=torch.int64, device=x.device)
        block = min(4096, next_pow2(n))
        _row_argmax_kernel[(batch,)](x, ov, oi, n, x.stride(0), BLOCK=block, num_warps=4 if block <= 2048 else 8)
        return ov, oi
    tile = max(1024, next_pow2(4 * k))
    vals, idx = x, None
    width = n
    while True:
        ntiles = cdiv(width, tile)
        ov = torch.empty(batch, ntiles * k, dtype=x.dtype, device=x.device)
        oi = torch.empty(batch, ntiles * k, dtype=torch.int64, device=x.device)
        _tile_topk_kernel[(batch, ntiles)](vals, idx if idx is not None else oi, ov, oi, width, vals.stride(0),
                                           ov.stride(0), K=k, TILE=tile, HAS_IDX=idx is not None,
                                           num_warps=4 if tile <= 2048 else 8)
        vals, idx, width = ov, oi, ntiles * k
        if ntiles == 1:
            return vals, idx


def forward(model, inputs):
    (x,) = inputs
    return topk(x, model.k)
