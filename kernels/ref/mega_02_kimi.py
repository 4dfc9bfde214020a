"""mega/02_kimi_linear_decode: one decode step of a 4-block Kimi-Linear-style model
(KDA, KDA, KDA, MLA; each block followed by a W4A16 MoE), `Model.step(hidden, state)`."""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-6


@dataclass(frozen=True)
class Config:
    hidden: int = 2304
    kda_heads: int = 32
    kda_head_dim: int = 128
    short_conv: int = 4
    mla_heads: int = 32
    kv_lora: int = 512
    qk_nope: int = 128
    qk_rope: int = 64
    v_head: int = 128
    rope_theta: float = 10000.0
    n_experts: int = 64
    n_active: int = 8
    n_shared: int = 1
    moe_inter: int = 1024
    routed_scaling: float = 2.446
    group: int = 128
    pattern: tuple = ("K", "K", "K", "M")
    dtype: torch.dtype = torch.bfloat16


def build_config(shape):
    n_exp = shape["n_experts"] if isinstance(shape, dict) else getattr(shape, "n_experts")
    return Config(n_experts=n_exp)


def quantize_w4(w, group=128):
    """(..., in, out) fp32 -> w_q (..., in/2, out) uint8 (low nibble = even row), scales/zeros bf16."""
    *lead, fin, fout = w.shape
    wg = w.reshape(*lead, fin // group, group, fout)
    mn, mx = wg.amin(dim=-2), wg.amax(dim=-2)
    scale = (mx - mn).clamp_min(1e-8) / 15
    zero = torch.round(-mn / scale).clamp(0, 15)
    q = torch.round(wg / scale.unsqueeze(-2) + zero.unsqueeze(-2)).clamp(0, 15).to(torch.uint8)
    q = q.reshape(*lead, fin, fout)
    return q[..., 0::2, :] | (q[..., 1::2, :] << 4), scale.to(torch.bfloat16), zero.to(torch.bfloat16)


def dequant_w4(w_q, scales, zeros, group=128):
    q = torch.stack([w_q & 0xF, w_q >> 4], dim=-2)
    q = q.reshape(*w_q.shape[:-2], w_q.shape[-2] * 2, w_q.shape[-1])
    z = zeros.repeat_interleave(group, dim=-2)
    s = scales.repeat_interleave(group, dim=-2)
    return (q.to(torch.bfloat16) - z) * s


def _cpu_normal(like: torch.Tensor, std: float, gen: torch.Generator) -> torch.Tensor:
    """normal_(0, std) drawn from the CPU generator `gen` into a CPU tensor of `like`'s shape and
    dtype (the deck's numbers), then moved to `like`'s device: a model built on a GPU (under
    `torch.device("cuda")`) gets the same weights as one built on the CPU and moved."""
    t = torch.empty(like.shape, dtype=like.dtype, device="cpu")
    nn.init.normal_(t, 0.0, std, generator=gen)
    return t.to(like.device)


class QuantLinear(nn.Module):
    def __init__(self, fin, fout, group=128):
        super().__init__()
        self.fin, self.fout, self.group = fin, fout, group
        self.register_buffer("w_q", torch.zeros(fin // 2, fout, dtype=torch.uint8))
        self.register_buffer("scales", torch.ones(fin // group, fout, dtype=torch.bfloat16))
        self.register_buffer("zeros", torch.zeros(fin // group, fout, dtype=torch.bfloat16))

    def reset_parameters(self, gen):
        w = (torch.randn(self.fin, self.fout, generator=gen, device="cpu") * 0.02).to(self.w_q.device)
        for name, t in zip(("w_q", "scales", "zeros"), quantize_w4(w, self.group)):
            getattr(self, name).copy_(t)  # CPU draw, copied to the buffer device

    def weight(self):
        return dequant_w4(self.w_q, self.scales, self.zeros, self.group)

    def forward(self, x):
        return (x.float() @ self.weight().float()).to(torch.bfloat16)


class QuantExperts(nn.Module):
    def __init__(self, n, fin, fout, group=128):
        super().__init__()
        self.n, self.fin, self.fout, self.group = n, fin, fout, group
        self.register_buffer("w_q", torch.zeros(n, fin // 2, fout, dtype=torch.uint8))
        self.register_buffer("scales", torch.ones(n, fin // group, fout, dtype=torch.bfloat16))
        self.register_buffer("zeros", torch.zeros(n, fin // group, fout, dtype=torch.bfloat16))

    def reset_parameters(self, gen):
        # one (in, out) draw per expert, in expert order (the deck's); on the CPU generator the
        # numbers equal one (n, in, out) draw, not on a device generator
        for e in range(self.n):
            w = (torch.randn(self.fin, self.fout, generator=gen, device="cpu") * 0.02).to(self.w_q.device)
            for name, t in zip(("w_q", "scales", "zeros"), quantize_w4(w, self.group)):
                getattr(self, name)[e].copy_(t)

    def weight(self, idx):
        return dequant_w4(self.w_q[idx], self.scales[idx], self.zeros[idx], self.group)


def rms(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(torch.bfloat16)


class KDAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, hd = cfg.hidden, cfg.kda_heads * cfg.kda_head_dim
        self.cfg = cfg
        self.q_proj, self.k_proj = QuantLinear(d, hd), QuantLinear(d, hd)
        self.v_proj, self.g_proj = QuantLinear(d, hd), QuantLinear(d, hd)
        # registration order = the deck's draw order (modules() pre-order): beta_proj before o_proj
        self.beta_proj = nn.Linear(d, cfg.kda_heads, bias=False, dtype=torch.bfloat16)
        self.conv_w = nn.Parameter(torch.zeros(3, hd, cfg.short_conv, dtype=torch.bfloat16))
        self.o_proj = QuantLinear(hd, d)

    def reset_parameters(self, gen):   # the conv weights only: beta_proj is an nn.Linear (Model does it)
        with torch.no_grad():
            self.conv_w.copy_(_cpu_normal(self.conv_w, 0.1, gen))   # drawn in bf16, std 0.1

    def forward(self, x, st):
        cfg = self.cfg
        nh, dk = cfg.kda_heads, cfg.kda_head_dim
        outs = []
        new_conv = {}
        for idx, (proj, ck) in enumerate(((self.q_proj, "cq"), (self.k_proj, "ck"), (self.v_proj, "cv"))):
            cur = proj(x)
            win = torch.cat([st[ck], cur[None]], dim=0)                    # (4, C)
            y = F.silu((self.conv_w[idx].float() * win.float().T).sum(-1)).to(torch.bfloat16)
            outs.append(y)
            new_conv[ck] = win[1:].clone()
        q, k, v = (t.float().view(nh, dk) for t in outs)
        q = q * dk ** -0.5
        g = -F.softplus(self.g_proj(x).float()).view(nh, dk)
        beta = torch.sigmoid(self.beta_proj(x).float())                     # (nh,)
        S = st["S"] * g.exp()[:, :, None]
        kv = torch.einsum("hk,hkv->hv", k, S)
        S = S + beta[:, None, None] * k[:, :, None] * (v - kv)[:, None, :]
        o = torch.einsum("hkv,hk->hv", S, q)
        st2 = dict(st)
        st2.update(new_conv)
        st2["S"] = S
        return self.o_proj(o.reshape(-1).to(torch.bfloat16)), st2


def rope_interleaved(x, pos, theta):
    d = x.shape[-1]
    inv = theta ** (-2 * torch.arange(d // 2, dtype=torch.float32, device=x.device) / d)
    ang = pos * inv
    c, s = torch.cos(ang), torch.sin(ang)
    xf = x.float()
    x1, x2 = xf[..., 0::2], xf[..., 1::2]
    out = torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2)
    return out.to(torch.bfloat16)


class MLAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, nh = cfg.hidden, cfg.mla_heads
        self.q_proj = QuantLinear(d, nh * (cfg.qk_nope + cfg.qk_rope))
        self.kv_a = QuantLinear(d, cfg.kv_lora + cfg.qk_rope)
        self.kv_b = QuantLinear(cfg.kv_lora, nh * (cfg.qk_nope + cfg.v_head))
        self.o_proj = QuantLinear(nh * cfg.v_head, d)

    def forward(self, x, st):
        cfg = self.cfg
        nh = cfg.mla_heads
        pos = st["c_kv"].shape[0]
        q = self.q_proj(x).view(nh, cfg.qk_nope + cfg.qk_rope)
        kv = self.kv_a(x)
        c, kr = kv[: cfg.kv_lora], kv[cfg.kv_lora:]
        q_nope = q[:, : cfg.qk_nope]
        q_rope = rope_interleaved(q[:, cfg.qk_nope:], pos, cfg.rope_theta)
        kr = rope_interleaved(kr, pos, cfg.rope_theta)
        c_kv = torch.cat([st["c_kv"], c[None]], dim=0)
        k_rope = torch.cat([st["k_rope"], kr[None]], dim=0)
        kvb = self.kv_b(c_kv).view(-1, nh, cfg.qk_nope + cfg.v_head)
        k_nope, v = kvb[..., : cfg.qk_nope].float(), kvb[..., cfg.qk_nope:].float()
        scores = (torch.einsum("hd,lhd->lh", q_nope.float(), k_nope)
                  + torch.einsum("hd,ld->lh", q_rope.float(), k_rope.float())) / math.sqrt(cfg.qk_nope + cfg.qk_rope)
        p = torch.softmax(scores, dim=0)
        o = torch.einsum("lh,lhd->hd", p, v)
        return self.o_proj(o.reshape(-1).to(torch.bfloat16)), {"c_kv": c_kv, "k_rope": k_rope}


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, e, f = cfg.hidden, cfg.n_experts, cfg.moe_inter
        self.router = nn.Linear(d, e, bias=False, dtype=torch.bfloat16)
        self.gate, self.up, self.down = QuantExperts(e, d, f), QuantExperts(e, d, f), QuantExperts(e, f, d)
        self.s_gate, self.s_up = QuantExperts(cfg.n_shared, d, f), QuantExperts(cfg.n_shared, d, f)
        self.s_down = QuantExperts(cfg.n_shared, f, d)

    def reset_parameters(self, gen):   # nothing of its own: the router is an nn.Linear (Model does it)
        return None

    @staticmethod
    def ffn(x, wg, wu, wd):
        xf = x.float()
        return (F.silu(xf @ wg.float()) * (xf @ wu.float())) @ wd.float()

    def forward(self, x):
        cfg = self.cfg
        probs = torch.softmax(self.router(x).float(), dim=-1)
        w, idx = torch.topk(probs, cfg.n_active)
        w = w / (w.sum() + 1e-9) * cfg.routed_scaling
        out = torch.zeros(cfg.hidden, dtype=torch.float32, device=x.device)
        for j in range(cfg.n_active):
            e = int(idx[j])
            out = out + w[j] * self.ffn(x, self.gate.weight(e), self.up.weight(e), self.down.weight(e))
        for s in range(cfg.n_shared):
            out = out + self.ffn(x, self.s_gate.weight(s), self.s_up.weight(s), self.s_down.weight(s))
        return out.to(torch.bfloat16)


class Block(nn.Module):
    def __init__(self, cfg, kind):
        super().__init__()
        self.kind = kind
        self.attn_norm = nn.Parameter(torch.ones(cfg.hidden, dtype=torch.bfloat16))
        self.moe_norm = nn.Parameter(torch.ones(cfg.hidden, dtype=torch.bfloat16))
        self.attn = KDAttention(cfg) if kind == "K" else MLAttention(cfg)
        self.moe = MoE(cfg)

    def forward(self, x, st):
        a, st = self.attn(rms(x, self.attn_norm), st)
        h = x + a
        return h + self.moe(rms(h, self.moe_norm)), st


class Model(nn.Module):
    def __init__(self, cfg=None):
        super().__init__()
        self.cfg = cfg or Config()
        self.blocks = nn.ModuleList([Block(self.cfg, kind) for kind in self.cfg.pattern])
        self.reset_parameters()

    def reset_parameters(self):
        # The deck's draws: one CPU generator seeded 1234 over `modules()` in pre-order; an
        # nn.Linear (bf16) gets normal_(0, 0.02) in place, the others their own reset.
        gen = torch.Generator(device="cpu").manual_seed(1234)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                with torch.no_grad():   # drawn on the CPU in the weight's dtype, wherever it lives
                    m.weight.copy_(_cpu_normal(m.weight, 0.02, gen))
            elif m is not self and hasattr(m, "reset_parameters"):
                m.reset_parameters(gen)
        return self

    @torch.no_grad()
    def step(self, hidden, state):
        new_state = []
        x = hidden
        for blk, st in zip(self.blocks, state):
            x, st = blk(x, st)
            new_state.append(st)
        return x, new_state

    def forward(self, hidden, state):
        return self.step(hidden, state)


def init_state(cfg, ctx, seed, device="cuda"):
    gen = torch.Generator(device=device).manual_seed(seed)
    state = []
    hd = cfg.kda_heads * cfg.kda_head_dim
    for kind in cfg.pattern:
        if kind == "K":
            # the deck's draws: S in fp32; the conv windows and caches drawn in bf16 and scaled in
            # bf16 (two roundings)
            S = torch.randn(cfg.kda_heads, cfg.kda_head_dim, cfg.kda_head_dim, generator=gen, device=device) * 0.05
            conv = {c: torch.randn(cfg.short_conv - 1, hd, generator=gen, device=device, dtype=torch.bfloat16) * 0.1
                    for c in ("cq", "ck", "cv")}
            state.append({"S": S.float(), **conv})
        else:
            c_kv = torch.randn(ctx, cfg.kv_lora, generator=gen, device=device, dtype=torch.bfloat16) * 0.1
            k_rope = torch.randn(ctx, cfg.qk_rope, generator=gen, device=device, dtype=torch.bfloat16) * 0.1
            state.append({"c_kv": c_kv, "k_rope": k_rope})
    return state


def init_token(cfg, seed, device="cuda"):
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    return torch.randn(cfg.hidden, generator=gen, device=device, dtype=torch.bfloat16) * 0.25


def get_init_inputs():
    return [Config()]
