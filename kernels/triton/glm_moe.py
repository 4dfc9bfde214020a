"""cuda/01_glm52_fused_moe through the grouped GEMM kernels (kernels/triton/grouped_gemm.py).

Torch glue sorts the (token, slot) pairs by expert (device-side, no host sync); the grouped
SwiGLU kernel gathers token rows and computes h = silu(x W1_gate^T) * (x W1_up^T) in fp32,
stored as bf16 (the one rounding the fp32 reference does not have: it is far inside the 0.08
tolerance); the grouped GEMM computes w * (h W2^T) in fp32 into a per-slot buffer, summed over
the 8 slots, plus the unweighted shared expert(s).
"""
from __future__ import annotations

import torch

from .grouped_gemm import grouped_gemm, grouped_swiglu


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
    E, I, top_k = model.w1_routed.shape[0], model.I, ids.shape[1]
    dev = x.device
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=E)
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
        one = torch.tensor([0, T], dtype=torch.int32, device=dev)
        ar = torch.arange(T, dtype=torch.int32, device=dev)
        for s in range(n_shared):
            _ffn(x, one, model.w1_shared[s:s + 1], model.w2_shared[s:s + 1], I, ar, T, ar, None, shared)
            out += shared
    return out.to(torch.bfloat16)
