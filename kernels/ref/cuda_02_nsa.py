"""cuda/02_deepseek_nsa: simplified native sparse attention (causal).

For query t: block importance = mean raw scaled score over the block's causal keys; the top 8
blocks (ties -> higher block index) that start at or before t, plus the sliding window
[t-63, t], form the key set; softmax attention over it (fp32, scale 1/sqrt(D))."""
import math

import torch
import torch.nn as nn

B = 1
H = 16
S = 2048
D = 64
BLOCK_SIZE = 64
TOP_N_BLOCKS = 8
SLIDING_WINDOW = 64


def nsa_key_mask(scores, block_size=BLOCK_SIZE, top_n=TOP_N_BLOCKS, window=SLIDING_WINDOW):
    """scores (..., S, S) raw scaled scores -> bool mask (..., S, S) of the keys each query attends."""
    Sq = scores.shape[-1]
    dev = scores.device
    t = torch.arange(Sq, device=dev)
    causal = t[None, :] <= t[:, None]                              # [query, key]
    nb = (Sq + block_size - 1) // block_size
    pad = nb * block_size - Sq
    sc = scores.masked_fill(~causal, 0)
    if pad:
        sc = torch.nn.functional.pad(sc, (0, pad))
    block_sum = sc.reshape(*sc.shape[:-1], nb, block_size).sum(-1)   # (..., S, nb)
    s0 = torch.arange(nb, device=dev) * block_size
    count = (torch.minimum(s0[None, :] + block_size, t[:, None] + 1) - s0[None, :]).clamp_min(1)
    importance = block_sum / count.to(scores.dtype)
    valid = s0[None, :] <= t[:, None]                                # (S, nb)
    importance = importance.masked_fill(~valid, -1e9)
    # descending by (importance, block index): stable sort of the reversed block order
    rev = importance.flip(-1)
    order = torch.sort(rev, dim=-1, descending=True, stable=True).indices
    chosen_rev = order[..., :top_n]
    chosen = nb - 1 - chosen_rev                                     # block indices
    sel = torch.zeros(*importance.shape, dtype=torch.bool, device=dev)
    sel.scatter_(-1, chosen, True)
    sel &= valid
    key_block = t // block_size
    mask = sel[..., key_block]                                       # (..., S, S)
    win = (t[None, :] >= (t[:, None] - (window - 1))) & causal
    return (mask | win) & causal


def nsa_attention(q, k, v, dtype=torch.float32):
    Dq = q.shape[-1]
    qf, kf, vf = q.to(dtype), k.to(dtype), v.to(dtype)
    scores = (qf @ kf.transpose(-1, -2)) / math.sqrt(Dq)
    mask = nsa_key_mask(scores)
    p = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return p @ vf


class Model(nn.Module):
    def __init__(self, B, H, S, D):
        super().__init__()
        self.B, self.H, self.S, self.D = B, H, S, D
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.bfloat16))

    def forward(self, q, k, v):
        return nsa_attention(q, k, v).to(torch.bfloat16)


def get_inputs():
    q = torch.randn(B, H, S, D, dtype=torch.bfloat16)
    k = torch.randn(B, H, S, D, dtype=torch.bfloat16)
    v = torch.randn(B, H, S, D, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return [B, H, S, D]
