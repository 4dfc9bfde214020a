"""Sidecar shared by the planted Kimi step-API solutions (copied beside solution.py, as an archive's
scratch/ sidecars are): the mega 02 decode step in plain torch, with the deck's parameter and
buffer names (blocks.{i}.attn_norm, attn.q_proj.w_q, moe.gate.scales, ...), so the reference's
state dict loads strictly.  Config fields are read from the `cfg` the caller passes in."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-6
BF = torch.bfloat16


class QuantLinear(nn.Module):
    def __init__(self, fin, fout, group=128):
        super().__init__()
        self.group = group
        self.register_buffer("w_q", torch.zeros(fin // 2, fout, dtype=torch.uint8))
        self.register_buffer("scales", torch.ones(fin // group, fout, dtype=BF))
        self.register_buffer("zeros", torch.zeros(fin // group, fout, dtype=BF))


class QuantExperts(nn.Module):
    def __init__(self, n, fin, fout, group=128):
        super().__init__()
        self.group = group
        self.register_buffer("w_q", torch.zeros(n, fin // 2, fout, dtype=torch.uint8))
        self.register_buffer("scales", torch.ones(n, fin // group, fout, dtype=BF))
        self.register_buffer("zeros", torch.zeros(n, fin // group, fout, dtype=BF))


class KDA(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, hd = cfg.hidden, cfg.kda_heads * cfg.kda_head_dim
        self.q_proj, self.k_proj, self.v_proj, self.g_proj = (QuantLinear(d, hd, cfg.group) for _ in range(4))
        self.o_proj = QuantLinear(hd, d, cfg.group)
        self.beta_proj = nn.Linear(d, cfg.kda_heads, bias=False, dtype=BF)
        self.conv_w = nn.Parameter(torch.zeros(3, hd, cfg.short_conv, dtype=BF))


class MLA(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, nh = cfg.hidden, cfg.mla_heads
        self.q_proj = QuantLinear(d, nh * (cfg.qk_nope + cfg.qk_rope), cfg.group)
        self.kv_a = QuantLinear(d, cfg.kv_lora + cfg.qk_rope, cfg.group)
        self.kv_b = QuantLinear(cfg.kv_lora, nh * (cfg.qk_nope + cfg.v_head), cfg.group)
        self.o_proj = QuantLinear(nh * cfg.v_head, d, cfg.group)


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, e, f = cfg.hidden, cfg.n_experts, cfg.moe_inter
        self.router = nn.Linear(d, e, bias=False, dtype=BF)
        self.gate, self.up, self.down = QuantExperts(e, d, f, cfg.group), QuantExperts(e, d, f, cfg.group), \
            QuantExperts(e, f, d, cfg.group)
        self.s_gate = QuantExperts(cfg.n_shared, d, f, cfg.group)
        self.s_up = QuantExperts(cfg.n_shared, d, f, cfg.group)
        self.s_down = QuantExperts(cfg.n_shared, f, d, cfg.group)


class Block(nn.Module):
    def __init__(self, cfg, kind):
        super().__init__()
        self.kind = kind
        self.attn_norm = nn.Parameter(torch.ones(cfg.hidden, dtype=BF))
        self.moe_norm = nn.Parameter(torch.ones(cfg.hidden, dtype=BF))
        self.attn = KDA(cfg) if kind == "K" else MLA(cfg)
        self.moe = MoE(cfg)


def dequant(q4, group):
    q = torch.stack([q4.w_q & 0xF, q4.w_q >> 4], dim=-2)
    q = q.reshape(*q4.w_q.shape[:-2], q4.w_q.shape[-2] * 2, q4.w_q.shape[-1])
    return (q.to(BF) - q4.zeros.repeat_interleave(group, dim=-2)) * q4.scales.repeat_interleave(group, dim=-2)


def weights(model):
    """Every quantized weight dequantized to bf16, by module name."""
    return {name: dequant(m, m.group) for name, m in model.named_modules() if isinstance(m, (QuantLinear, QuantExperts))}


def _lin(W, name, x):
    return (x.float() @ W[name].float()).to(BF)


def _rms(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(BF)


def _rope(x, pos, theta):
    d = x.shape[-1]
    ang = pos * theta ** (-2 * torch.arange(d // 2, dtype=torch.float32, device=x.device) / d)
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
    return torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2).to(BF)


def kda(cfg, blk, W, p, x, st):
    """-> (attention output, new KDA state dict)."""
    nh, dk = cfg.kda_heads, cfg.kda_head_dim
    outs, new = [], {}
    for idx, (proj, ck) in enumerate((("q_proj", "cq"), ("k_proj", "ck"), ("v_proj", "cv"))):
        win = torch.cat([st[ck], _lin(W, p + proj, x)[None]], dim=0)
        outs.append(F.silu((blk.attn.conv_w[idx].float() * win.float().T).sum(-1)).to(BF))
        new[ck] = win[1:].clone()
    q, k, v = (t.float().view(nh, dk) for t in outs)
    q = q * dk ** -0.5
    g = -F.softplus(_lin(W, p + "g_proj", x).float()).view(nh, dk)
    beta = torch.sigmoid(F.linear(x, blk.attn.beta_proj.weight).float())
    S = st["S"] * g.exp()[:, :, None]
    S = S + beta[:, None, None] * k[:, :, None] * (v - torch.einsum("hk,hkv->hv", k, S))[:, None, :]
    new["S"] = S
    o = torch.einsum("hkv,hk->hv", S, q)
    return _lin(W, p + "o_proj", o.reshape(-1).to(BF)), new


def mla(cfg, W, p, x, st):
    nh = cfg.mla_heads
    pos = st["c_kv"].shape[0]
    q = _lin(W, p + "q_proj", x).view(nh, cfg.qk_nope + cfg.qk_rope)
    kv = _lin(W, p + "kv_a", x)
    c, kr = kv[: cfg.kv_lora], _rope(kv[cfg.kv_lora:], pos, cfg.rope_theta)
    q_nope, q_rope = q[:, : cfg.qk_nope], _rope(q[:, cfg.qk_nope:], pos, cfg.rope_theta)
    c_kv = torch.cat([st["c_kv"], c[None]], dim=0)
    k_rope = torch.cat([st["k_rope"], kr[None]], dim=0)
    kvb = _lin(W, p + "kv_b", c_kv).view(-1, nh, cfg.qk_nope + cfg.v_head)
    scores = (torch.einsum("hd,lhd->lh", q_nope.float(), kvb[..., : cfg.qk_nope].float())
              + torch.einsum("hd,ld->lh", q_rope.float(), k_rope.float())) / math.sqrt(cfg.qk_nope + cfg.qk_rope)
    o = torch.einsum("lh,lhd->hd", torch.softmax(scores, dim=0), kvb[..., cfg.qk_nope:].float())
    return _lin(W, p + "o_proj", o.reshape(-1).to(BF)), {"c_kv": c_kv, "k_rope": k_rope}


def moe(cfg, blk, W, p, x):
    probs = torch.softmax(F.linear(x, blk.moe.router.weight).float(), dim=-1)
    w, idx = torch.topk(probs, cfg.n_active)
    w = w / (w.sum() + 1e-9) * cfg.routed_scaling
    xf = x.float()

    def ffn(g, u, d, e):
        return (F.silu(xf @ W[p + g][e].float()) * (xf @ W[p + u][e].float())) @ W[p + d][e].float()

    out = torch.zeros(cfg.hidden, dtype=torch.float32, device=x.device)
    for j in range(cfg.n_active):
        out = out + w[j] * ffn("gate", "up", "down", int(idx[j]))
    for s in range(cfg.n_shared):
        out = out + ffn("s_gate", "s_up", "s_down", s)
    return out.to(BF)


def layer(cfg, blk, W, i, x, st):
    """One block: -> (hidden, new layer state)."""
    a_in = _rms(x, blk.attn_norm)
    a, new = kda(cfg, blk, W, f"blocks.{i}.attn.", a_in, st) if blk.kind == "K" else mla(cfg, W, f"blocks.{i}.attn.", a_in, st)
    h = x + a
    return h + moe(cfg, blk, W, f"blocks.{i}.moe.", _rms(h, blk.moe_norm)), new


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.blocks = nn.ModuleList([Block(cfg, kind) for kind in cfg.pattern])

    def weights(self):
        return weights(self)

    @torch.no_grad()
    def step(self, hidden, state):
        W = self.weights()
        x, out = hidden, []
        for i, (blk, st) in enumerate(zip(self.blocks, state)):
            x, new = layer(self.cfg, blk, W, i, x, st)
            out.append(new)
        return x, out
