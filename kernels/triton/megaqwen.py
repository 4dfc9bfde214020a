"""cuda/03_megaqwen_decode: the decode step with Triton for the hot parts, torch glue elsewhere.

Triton: every projection is a bf16-weight GEMV with fp32 activations and fp32 accumulation (the
same products as the reference's upcast weights, without materialising fp32 copies of the
weights each step), and attention over the bf16 cache is the split-KV decode kernel of
kernels/triton/paged_attention.py (the per-layer cache viewed as one page, fp32 query, fp32
output).  Torch glue: RMSNorm, RoPE, SiLU, residual adds, cache writes, the input stream.
No CUDA graphs: each token is ~40 launches.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..common import load_reference_module
from ._common import interpreting
from .paged_attention import decode_attention

_REF = load_reference_module("cuda_03_megaqwen.py", "_megaqwen_triton_ref")


@triton.jit
def _gemv_kernel(w_ptr, x_ptr, y_ptr, N, K, swn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    r_mask = rows < N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        c_mask = cols < K
        w = tl.load(w_ptr + rows[:, None].to(tl.int64) * swn + cols[None, :], mask=r_mask[:, None] & c_mask[None, :],
                    other=0.0)
        x = tl.load(x_ptr + cols, mask=c_mask, other=0.0)
        acc += tl.sum(w.to(tl.float32) * x[None, :], axis=1)
    tl.store(y_ptr + rows, acc, mask=r_mask)


def gemv(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """w (N,K) bf16 row-major, x (K,) fp32 -> (N,) fp32 = w.float() @ x."""
    N, K = w.shape
    assert w.stride(1) == 1
    y = torch.empty(N, dtype=torch.float32, device=x.device)
    if interpreting(x):
        bn, bk, warps = 256, 1024, 4
    else:
        bn, bk, warps = 8, 512, 4
    _gemv_kernel[(triton.cdiv(N, bn),)](w, x.contiguous(), y, N, K, w.stride(0), BLOCK_N=bn, BLOCK_K=bk, num_warps=warps)
    return y


def block_step(blk, x, k_cache, v_cache, position, table, lens):
    nh, nkv, hd = _REF.NUM_HEADS, _REF.NUM_KV_HEADS, _REF.HEAD_DIM
    r = x.float()
    h = _REF.rms_norm(r, blk.input_ln.float())
    q = gemv(blk.q_proj, h).view(nh, hd)
    k = gemv(blk.k_proj, h).view(nkv, hd)
    v = gemv(blk.v_proj, h).view(nkv, hd)
    q = _REF.rope_rotate_half(_REF.rms_norm(q, blk.q_norm.float()), position)
    k = _REF.rope_rotate_half(_REF.rms_norm(k, blk.k_norm.float()), position)
    k_cache[:, position, :] = k.to(k_cache.dtype)
    v_cache[:, position, :] = v.to(v_cache.dtype)
    max_seq = k_cache.shape[1]
    o = decode_attention(q[None].contiguous(), k_cache, v_cache, 0, k_cache.stride(1), k_cache.stride(0), table, lens,
                         max_seq, nkv, max_len=position + 1, out_dtype=torch.float32)
    r = r + gemv(blk.o_proj, o.reshape(-1))
    h2 = _REF.rms_norm(r, blk.post_ln.float())
    r = r + gemv(blk.down_proj, F.silu(gemv(blk.gate_proj, h2)) * gemv(blk.up_proj, h2))
    return r.to(torch.bfloat16)


def model_step(model, x, k_caches, v_caches, position):
    dev = x.device
    table = torch.zeros(1, 1, dtype=torch.int32, device=dev)
    lens = torch.full((1,), position + 1, dtype=torch.int32, device=dev)
    h = x
    for i, blk in enumerate(model.blocks):
        h = block_step(blk, h, k_caches[i], v_caches[i], position, table, lens)
    return h


def forward(model, inputs):
    """run(ctx_len, n_decode, seed) with the Triton step -> {'last_hidden'}."""
    ctx, dec, seed = inputs
    device = next(model.parameters()).device
    kc, vc = model.new_caches(ctx + dec + 8, device)
    h = torch.randn(_REF.HIDDEN, generator=torch.Generator().manual_seed(seed), device="cpu").to(torch.bfloat16).to(device)
    for gen_seed, positions in ((seed + 1, range(ctx)), (seed + 2, range(ctx, ctx + dec))):
        gen = torch.Generator().manual_seed(gen_seed)
        for t in positions:
            h = model_step(model, _REF._next_input(gen, h, device), kc, vc, t)
    return {"last_hidden": h}
