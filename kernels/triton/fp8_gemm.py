"""Triton fp8 GEMM with a per-output-channel scale epilogue (hard/01_fp8_gemm).

y = bf16( round_bf16(x_fp8 @ w_fp8^T, fp32 accumulate) * scale[n] ).  The accumulator is rounded
to bf16 before scaling, like the reference.  The pre-2026-06-14 deck (bf16 weight, no scale)
uses the same kernel with the fp8 activations upcast to bf16 in registers.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import interpreting


@triton.jit
def _gemm_kernel(x_ptr, w_ptr, s_ptr, y_ptr, M, N, K,
                 sxm, sxk, swn, swk, sym, syn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                 HAS_SCALE: tl.constexpr, UPCAST_BF16: tl.constexpr, EVEN_K: tl.constexpr,
                 DOT_F32: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    gid = pid // group
    first_m = gid * GROUP_M
    gsize = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % gsize
    pid_n = (pid % group) // gsize
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < M
    n_mask = offs_n < N
    x_ptrs = x_ptr + offs_m[:, None] * sxm + offs_k[None, :] * sxk
    w_ptrs = w_ptr + offs_n[None, :] * swn + offs_k[:, None] * swk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(x_ptrs, mask=m_mask[:, None], other=0.0)
            b = tl.load(w_ptrs, mask=n_mask[None, :], other=0.0)
        else:
            k_left = K - kk * BLOCK_K
            a = tl.load(x_ptrs, mask=m_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(w_ptrs, mask=n_mask[None, :] & (offs_k[:, None] < k_left), other=0.0)
        if UPCAST_BF16:  # fp8 -> bf16 is exact
            if DOT_F32:  # CPU interpreter: its bf16 tl.dot is wrong (triton 3.9); fp32 is exact here
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            else:
                a = a.to(tl.bfloat16)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K * sxk
        w_ptrs += BLOCK_K * swk
    out = acc.to(tl.bfloat16)
    if HAS_SCALE:
        s = tl.load(s_ptr + offs_n, mask=n_mask, other=0.0)
        out = (out.to(tl.float32) * s[None, :]).to(tl.bfloat16)
    tl.store(y_ptr + offs_m[:, None] * sym + offs_n[None, :] * syn, out, mask=m_mask[:, None] & n_mask[None, :])


def _config(M, N, K, fp8, cpu):
    if cpu:
        return dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=32, GROUP_M=4, num_warps=4, num_stages=1)
    if M <= 64:
        return dict(BLOCK_M=max(16, triton.next_power_of_2(M)) if M <= 32 else 64, BLOCK_N=64,
                    BLOCK_K=256 if fp8 else 128, GROUP_M=1, num_warps=4, num_stages=4)
    return dict(BLOCK_M=128, BLOCK_N=256 if N % 256 == 0 else 128, BLOCK_K=128 if fp8 else 64, GROUP_M=8,
                num_warps=8, num_stages=3 if fp8 else 3)


def fp8_gemm(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """x (M,K) fp8, w (N,K) fp8 or bf16, scale (N,) fp32 or None -> (M,N) bf16."""
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty(M, N, dtype=torch.bfloat16, device=x.device)
    fp8 = w.dtype == torch.float8_e4m3fn
    cfg = _config(M, N, K, fp8, interpreting(x))
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    _gemm_kernel[grid](x, w, scale if scale is not None else y, y, M, N, K,
                       x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1),
                       HAS_SCALE=scale is not None, UPCAST_BF16=not fp8, EVEN_K=(K % cfg["BLOCK_K"] == 0),
                       DOT_F32=interpreting(x), **cfg)
    return y


def forward(model, inputs):
    (x,) = inputs
    return fp8_gemm(x, model.weight, model.weight_scale)


def forward_bf16_weight(model, inputs):
    (x,) = inputs
    return fp8_gemm(x, model.weight, None)
