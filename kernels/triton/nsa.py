"""cuda/02_deepseek_nsa: torch glue for block selection + a Triton masked flash-attention kernel.

Selection (torch, O(S * blocks * D), fp32): the mean raw scaled score of a block's causal keys is
q_t . (sum of those keys) / count, from per-block prefix sums of K; blocks starting after t get
-1e9; a stable descending sort of the reversed block order picks the top 8 with ties to the
higher block index; only blocks starting at or before t are kept.
Attention (Triton): one program per (64-query tile, b*h) walks the causal key blocks (64 keys =
one NSA block), skips blocks no query of the tile uses, and applies the per-(query, block)
selection mask OR the sliding window, with an fp32 online softmax.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._common import interpreting

BLOCK = 64
TOP_N = 8
WINDOW = 64


def select_blocks(q, k, block=BLOCK, top_n=TOP_N):
    """-> bool (B, H, S, nb): block j used by query t (excluding the sliding window)."""
    B, H, S, D = q.shape
    nb = triton.cdiv(S, block)
    pad = nb * block - S
    qf, kf = q.float(), k.float()
    kp = torch.nn.functional.pad(kf, (0, 0, 0, pad)).view(B, H, nb, block, D)
    kcum = kp.cumsum(3)
    scale = 1.0 / math.sqrt(D)
    imp = (qf @ kcum[:, :, :, -1].transpose(-1, -2)) * (scale / block)          # full-block means
    t = torch.arange(S, device=q.device)
    jt = t // block
    r = t % block
    diag = (qf * kcum.view(B, H, nb * block, D)[:, :, :S]).sum(-1) * scale / (r + 1).to(torch.float32)
    imp.scatter_(-1, jt.view(1, 1, S, 1).expand(B, H, S, 1), diag.unsqueeze(-1))
    valid = torch.arange(nb, device=q.device)[None, :] <= jt[:, None]           # (S, nb)
    imp = imp.masked_fill(~valid, -1e9)
    order = torch.sort(imp.flip(-1), dim=-1, descending=True, stable=True).indices[..., :top_n]
    sel = torch.zeros(B, H, S, nb, dtype=torch.bool, device=q.device)
    sel.scatter_(-1, nb - 1 - order, True)
    return sel & valid


@triton.jit
def _nsa_attn_kernel(q_ptr, k_ptr, v_ptr, sel_ptr, o_ptr, S, NB, sm_scale,
                     D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WINDOW: tl.constexpr,
                     DOT_F32: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    m_mask = offs_m < S
    base = bh.to(tl.int64) * S * D
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :], mask=m_mask[:, None], other=0.0)
    if DOT_F32:
        q = q.to(tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    last_q = tl.minimum(pid_m * BLOCK_M + BLOCK_M, S) - 1
    first_q = pid_m * BLOCK_M
    n_blocks = last_q // BLOCK_N + 1
    for j in range(0, n_blocks):
        selq = tl.load(sel_ptr + (bh.to(tl.int64) * S + offs_m) * NB + j, mask=m_mask, other=0)
        in_window = (j * BLOCK_N + BLOCK_N - 1) >= (first_q - (WINDOW - 1))
        if (tl.max(selq, axis=0) > 0) | in_window:
            offs_n = j * BLOCK_N + tl.arange(0, BLOCK_N)
            n_mask = offs_n < S
            kt = tl.load(k_ptr + base + offs_n[:, None] * D + offs_d[None, :], mask=n_mask[:, None], other=0.0)
            vt = tl.load(v_ptr + base + offs_n[:, None] * D + offs_d[None, :], mask=n_mask[:, None], other=0.0)
            if DOT_F32:
                s = tl.dot(q, tl.trans(kt.to(tl.float32)))
            else:
                s = tl.dot(q, tl.trans(kt))
            causal = offs_n[None, :] <= offs_m[:, None]
            win = offs_n[None, :] >= (offs_m[:, None] - (WINDOW - 1))
            keep = causal & ((selq[:, None] > 0) | win) & n_mask[None, :]
            s = tl.where(keep, s * sm_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp(m_i - m_safe)
            p = tl.exp(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            if DOT_F32:
                acc = acc * alpha[:, None] + tl.dot(p, vt.to(tl.float32))
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), vt)
            m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * D + offs_d[None, :], out.to(tl.bfloat16), mask=m_mask[:, None])


def nsa_forward(q, k, v):
    B, H, S, D = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    sel = select_blocks(q, k).to(torch.uint8).contiguous()
    nb = sel.shape[-1]
    o = torch.empty_like(q, dtype=torch.bfloat16)
    cpu = interpreting(q)
    BM = 64
    _nsa_attn_kernel[(triton.cdiv(S, BM), B * H)](q, k, v, sel, o, S, nb, 1.0 / math.sqrt(D), D=D, BLOCK_M=BM,
                                                   BLOCK_N=BLOCK, WINDOW=WINDOW, DOT_F32=cpu,
                                                   num_warps=4, num_stages=1 if cpu else 2)
    return o


def forward(model, inputs):
    return nsa_forward(*inputs)
