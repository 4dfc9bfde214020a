"""Triton fused int4-dequant GEMM / GEMV (hard/07_w4a16_gemm; also usable for the Kimi QuantLinear).

w[k,n] = bf16((q[k,n] - z[k//g,n]) * s[k//g,n]), y = bf16(x @ w) with fp32 accumulation.
The packed rows are consumed directly: even K rows come from the low nibbles, odd from the high
nibbles, so the kernel splits x into its even and odd columns and issues two dots per step.
Small-M shapes (decode) use split-K so that enough programs stream the weight.

M <= GEMV_MAX_M (decode) goes to `_w4a16_gemv_kernel` instead: no tl.dot (an MMA tile of 16 rows
for 1 useful row), each packed byte read once per row and dequantized in registers, fp32 FMAs and
a row reduction, split-K over enough programs to keep the H200's HBM busy; the block shape is
autotuned on the GPU (a small config list: nothing here could be timed).  The previous dot-based
split-K path stays reachable (`kernel="dot"`, `VARIANTS`) and verify times both.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import interpreting


@triton.jit
def _w4a16_kernel(x_ptr, wq_ptr, s_ptr, z_ptr, y_ptr, M, N, K, K_PER_SPLIT,
                  sxm, sxk, swk, swn, ssg, ssn, sys_, sym, syn,
                  GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  DOT_F32: tl.constexpr, X_F32: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_h = tl.arange(0, BLOCK_K // 2)          # packed rows within a step
    m_mask = offs_m < M
    n_mask = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_start = pid_k * K_PER_SPLIT
    # the last split stops at K: past it the group index k0 // GROUP would read scales/zeros rows
    # that do not exist (masked weights and x are 0, but 0 * a garbage NaN/inf scale is NaN)
    for k0 in range(k_start, tl.minimum(k_start + K_PER_SPLIT, K), BLOCK_K):
        kh = k0 // 2 + offs_h                       # packed row index
        kmask = (k0 + 2 * offs_h) < K
        packed = tl.load(wq_ptr + kh[:, None] * swk + offs_n[None, :] * swn,
                         mask=kmask[:, None] & n_mask[None, :], other=0)
        g = k0 // GROUP                             # BLOCK_K divides GROUP: one group per step
        s = tl.load(s_ptr + g * ssg + offs_n * ssn, mask=n_mask, other=0.0)
        z = tl.load(z_ptr + g * ssg + offs_n * ssn, mask=n_mask, other=0.0)
        # (q - z) * s is exact in fp32 (4-bit times 8-bit mantissa), so rounding it to bf16 gives
        # exactly the reference's bf16 product
        sf = s.to(tl.float32)[None, :]
        zf = z.to(tl.float32)[None, :]
        w_lo = (((packed & 0xF).to(tl.float32) - zf) * sf).to(tl.bfloat16)
        w_hi = (((packed >> 4).to(tl.float32) - zf) * sf).to(tl.bfloat16)
        x_lo = tl.load(x_ptr + offs_m[:, None] * sxm + (k0 + 2 * offs_h)[None, :] * sxk,
                       mask=m_mask[:, None] & kmask[None, :], other=0.0)
        x_hi = tl.load(x_ptr + offs_m[:, None] * sxm + (k0 + 2 * offs_h + 1)[None, :] * sxk,
                       mask=m_mask[:, None] & kmask[None, :], other=0.0)
        if DOT_F32:
            acc += tl.dot(x_lo.to(tl.float32), w_lo.to(tl.float32))
            acc += tl.dot(x_hi.to(tl.float32), w_hi.to(tl.float32))
        elif X_F32:  # fp32 activations (Kimi expert down-projection): near-fp32 dots
            acc += tl.dot(x_lo, w_lo.to(tl.float32), input_precision="tf32x3")
            acc += tl.dot(x_hi, w_hi.to(tl.float32), input_precision="tf32x3")
        else:
            acc = tl.dot(x_lo.to(tl.bfloat16), w_lo, acc)
            acc = tl.dot(x_hi.to(tl.bfloat16), w_hi, acc)
    tl.store(y_ptr + pid_k * sys_ + offs_m[:, None] * sym + offs_n[None, :] * syn, acc,
             mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def _w4a16_gemv_body(x_ptr, wq_ptr, s_ptr, z_ptr, y_ptr, N, K, K_PER_SPLIT,
                     sxm, sxk, swk, swn, ssg, ssn, sys_, sym,
                     GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_n = tl.program_id(0)
    m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_h = tl.arange(0, BLOCK_K // 2)
    n_mask = offs_n < N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    k_start = pid_k * K_PER_SPLIT
    # the last split stops at K: past it the group index k0 // GROUP would read scales/zeros rows
    # that do not exist (masked weights and x are 0, but 0 * a garbage NaN/inf scale is NaN)
    for k0 in range(k_start, tl.minimum(k_start + K_PER_SPLIT, K), BLOCK_K):
        kh = k0 // 2 + offs_h
        kmask = (k0 + 2 * offs_h) < K
        packed = tl.load(wq_ptr + kh[:, None] * swk + offs_n[None, :] * swn,
                         mask=kmask[:, None] & n_mask[None, :], other=0)
        g = k0 // GROUP                             # BLOCK_K divides GROUP: one group per step
        sf = tl.load(s_ptr + g * ssg + offs_n * ssn, mask=n_mask, other=0.0).to(tl.float32)[None, :]
        zf = tl.load(z_ptr + g * ssg + offs_n * ssn, mask=n_mask, other=0.0).to(tl.float32)[None, :]
        # exact (q - z) * s, rounded once to bf16 = the reference's dequantized weight
        w_lo = (((packed & 0xF).to(tl.float32) - zf) * sf).to(tl.bfloat16).to(tl.float32)
        w_hi = (((packed >> 4).to(tl.float32) - zf) * sf).to(tl.bfloat16).to(tl.float32)
        x_lo = tl.load(x_ptr + m * sxm + (k0 + 2 * offs_h) * sxk, mask=kmask, other=0.0).to(tl.float32)
        x_hi = tl.load(x_ptr + m * sxm + (k0 + 2 * offs_h + 1) * sxk, mask=kmask, other=0.0).to(tl.float32)
        acc += tl.sum(x_lo[:, None] * w_lo + x_hi[:, None] * w_hi, axis=0)
    tl.store(y_ptr + pid_k * sys_ + m * sym + offs_n, acc, mask=n_mask)


_GEMV_CONFIGS = [triton.Config(dict(BLOCK_N=bn, BLOCK_K=bk), num_warps=w, num_stages=st)
                 for bn, bk, w, st in ((64, 128, 4, 4), (128, 128, 4, 4), (128, 64, 4, 4), (256, 128, 8, 3),
                                       (256, 64, 4, 4), (64, 64, 2, 4))]
_w4a16_gemv_kernel = triton.autotune(_GEMV_CONFIGS, key=["N", "K", "K_PER_SPLIT", "sym"])(_w4a16_gemv_body)

#: rows up to which the GEMV kernel is used (each row re-reads the packed weight, mostly from L2)
GEMV_MAX_M = 4
#: the split-K granule: a multiple of every BLOCK_K in the config list (and <= group)
_K_GRAIN = 128


def _split_k(n_prog, K, block_k, target, cap):
    """Power-of-two split-K count: grow while fewer than `target` programs and each split keeps
    >= 4 blocks of K.  The last split is usually shorter (the kernels stop it at K)."""
    split = 1
    while n_prog * split < target and K // (split * 2) >= 4 * block_k and split < cap:
        split *= 2
    return split


def _sm_count(x, sms):
    """SMs to size split-K for: given, else the device's; None on the interpreter (no split)."""
    if sms is None and not interpreting(x):
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    return sms


def _gemv(x, w_q, scales, zeros, group, out_dtype, sms=None):
    M, K = x.shape
    N = w_q.shape[1]
    cpu = interpreting(x)
    assert group % _K_GRAIN == 0 or cpu, "GEMV path needs group % 128 == 0"
    sms = _sm_count(x, sms)
    split = 1 if sms is None else _split_k(triton.cdiv(N, 128) * M, K, _K_GRAIN, 4 * sms, 32)
    grain = min(_K_GRAIN, group) if cpu else _K_GRAIN
    k_per = triton.cdiv(triton.cdiv(K, split), grain) * grain
    split = triton.cdiv(K, k_per)
    part = torch.empty(split, M, N, dtype=torch.float32, device=x.device)
    args = (x, w_q, scales, zeros, part, N, K, k_per, x.stride(0), x.stride(1), w_q.stride(0), w_q.stride(1),
            scales.stride(0), scales.stride(1), part.stride(0), part.stride(1))
    if cpu:   # the interpreter cannot autotune (no CUDA events): one fixed config
        _w4a16_gemv_body[(triton.cdiv(N, 64), M, split)](*args, GROUP=group, BLOCK_N=64, BLOCK_K=grain)
    else:
        _w4a16_gemv_kernel[lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), M, split)](*args, GROUP=group)
    return (part[0] if split == 1 else part.sum(0)).to(out_dtype)


def w4a16_matmul(x: torch.Tensor, w_q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                 group: int = 128, out_dtype=torch.bfloat16, kernel: str = "auto", sms: int | None = None) -> torch.Tensor:
    """x (M,K) bf16/fp32, w_q (K/2,N) uint8, scales/zeros (K/group,N) bf16 -> (M,N) out_dtype.
    kernel: "auto" (GEMV for M <= GEMV_MAX_M, else the dot kernel), "gemv" or "dot".
    sms: the SM count split-K is sized for (default: the device's; the interpreter does not split),
    e.g. 132 to run the H200's split-K plan under the CPU interpreter."""
    squeeze = x.dim() == 1
    if squeeze:
        x = x[None]
    M, K = x.shape
    N = w_q.shape[1]
    if kernel == "gemv" or (kernel == "auto" and M <= GEMV_MAX_M and group % _K_GRAIN == 0):
        y = _gemv(x, w_q, scales, zeros, group, out_dtype, sms)
        return y[0] if squeeze else y
    cpu = interpreting(x)
    if cpu:
        BM, BN, BK, warps, stages = 16, 128, min(128, group), 4, 1   # few, large programs: the interpreter is per-program
    elif M <= 16:
        BM, BN, BK, warps, stages = 16, 64, 128, 4, 4
    elif M <= 64:
        BM, BN, BK, warps, stages = 32 if M <= 32 else 64, 64, 128, 4, 4
    else:
        BM, BN, BK, warps, stages = 128, 128, 64, 8, 3
    assert group % BK == 0 and K % 2 == 0
    sms = _sm_count(x, sms)
    split = 1 if sms is None else _split_k(triton.cdiv(N, BN) * triton.cdiv(M, BM), K, BK, 2 * sms, 16)
    k_per = triton.cdiv(triton.cdiv(K, split), BK) * BK
    split = triton.cdiv(K, k_per)
    part = torch.empty(split, M, N, dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(N, BN), triton.cdiv(M, BM), split)
    _w4a16_kernel[grid](x, w_q, scales, zeros, part, M, N, K, k_per,
                        x.stride(0), x.stride(1), w_q.stride(0), w_q.stride(1), scales.stride(0), scales.stride(1),
                        part.stride(0), part.stride(1), part.stride(2),
                        GROUP=group, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, DOT_F32=cpu, X_F32=x.dtype == torch.float32, num_warps=warps, num_stages=stages)
    y = (part[0] if split == 1 else part.sum(0)).to(out_dtype)
    return y[0] if squeeze else y


def forward(model, inputs):
    (x,) = inputs
    return w4a16_matmul(x, model.w_q, model.scales, model.zeros, model.group_size)


def forward_dot(model, inputs):
    """The previous path (dot-based split-K at every M), kept to be timed beside `forward`."""
    (x,) = inputs
    return w4a16_matmul(x, model.w_q, model.scales, model.zeros, model.group_size, kernel="dot")


#: other kernels for the same op, timed by kernels.verify beside `forward`
VARIANTS = {"dot_splitk": forward_dot}
