"""Sidecar shared by the planted megaqwen solutions (copied into the scratch dir beside
solution.py, as an archive's scratch/ sidecars are): a plain-torch Qwen-style decoder step."""
import math

import torch
import torch.nn as nn

H, I, NH, NKV, D, L = 1024, 3072, 16, 8, 128, 4
NAMES = (("input_ln", (H,)), ("q_proj", (NH * D, H)), ("k_proj", (NKV * D, H)), ("v_proj", (NKV * D, H)),
         ("q_norm", (D,)), ("k_norm", (D,)), ("o_proj", (H, NH * D)), ("post_ln", (H,)),
         ("gate_proj", (I, H)), ("up_proj", (I, H)), ("down_proj", (H, I)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        for n, s in NAMES:
            setattr(self, n, nn.Parameter(torch.zeros(s, dtype=torch.bfloat16)))


class Model(nn.Module):
    def __init__(self, num_layers=L, max_seq=131072):
        super().__init__()
        self.max_seq = max_seq
        self.blocks = nn.ModuleList([Block() for _ in range(num_layers)])

    def forward(self, x, k_caches, v_caches, position):
        h = step(float_weights(self), x, k_caches, v_caches, position)
        return h, k_caches, v_caches


def float_weights(model):
    return [{n: getattr(b, n).float() for n, _ in NAMES} for b in model.blocks]


def _rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _rope(x, pos):
    half = x.shape[-1] // 2
    ang = pos * 10000.0 ** (-torch.arange(half, dtype=torch.float32, device=x.device) / half)
    c, s = torch.cos(ang), torch.sin(ang)
    return torch.cat([x[..., :half] * c - x[..., half:] * s, x[..., half:] * c + x[..., :half] * s], -1)


def step(W, x, kc, vc, pos):
    r = x.float()
    for i, w in enumerate(W):
        h = _rms(r, w["input_ln"])
        q = _rope(_rms((h @ w["q_proj"].T).view(NH, D), w["q_norm"]), pos)
        k = _rope(_rms((h @ w["k_proj"].T).view(NKV, D), w["k_norm"]), pos)
        v = (h @ w["v_proj"].T).view(NKV, D)
        kc[i][:, pos] = k.to(torch.bfloat16)
        vc[i][:, pos] = v.to(torch.bfloat16)
        keys = kc[i][:, : pos + 1].float().repeat_interleave(NH // NKV, 0)
        vals = vc[i][:, : pos + 1].float().repeat_interleave(NH // NKV, 0)
        p = torch.softmax((keys @ q[:, :, None]).squeeze(-1) / math.sqrt(D), -1)
        r = r + (p[:, None, :] @ vals).reshape(NH * D) @ w["o_proj"].T
        h2 = _rms(r, w["post_ln"])
        r = r + (torch.nn.functional.silu(h2 @ w["gate_proj"].T) * (h2 @ w["up_proj"].T)) @ w["down_proj"].T
        r = r.to(torch.bfloat16).float()
    return r.to(torch.bfloat16)


def new_caches(model, max_seq):
    dev = model.blocks[0].input_ln.device
    mk = lambda: torch.zeros(NKV, max_seq, D, dtype=torch.bfloat16, device=dev)  # noqa: E731
    return [mk() for _ in model.blocks], [mk() for _ in model.blocks]


def token(gen, h):
    return torch.randn(H, generator=gen, dtype=torch.bfloat16).to(h.device) * 0.5 + h.to(torch.bfloat16) * 0.5


def first_hidden(seed, device="cpu"):
    return torch.randn(H, generator=torch.Generator().manual_seed(seed), dtype=torch.bfloat16).to(device)
