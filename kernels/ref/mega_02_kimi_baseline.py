"""mega/02_kimi_linear_decode: the deck's speedup denominator, `baseline.py`, rebuilt from its
description in the replay contract (D1): the reference step's math in bf16, every weight
dequantized to a full bf16 matrix and multiplied with `@`, the MoE's 8 selected experts
dequantized as one batch and run as bf16 einsums, the MLA softmax in fp32 cast back to bf16.

Not the deck's file (it is not in the archives): a speedup computed against it is this
reconstruction's, shown beside the archived one, not a re-grade.

`step(ref, model, hidden, state)` runs one decode step with the weights of a reference
`Model` (the deck's baseline loads the reference state dict strict=True, so the weights are
the same); `ref` is the reference module, whose dequantizer, RMSNorm and RoPE it shares.
"""
import math

import torch
import torch.nn.functional as F


def _lin(ref, q, x):
    """QuantLinear in bf16: the full bf16 weight, then x @ W."""
    return x @ ref.dequant_w4(q.w_q, q.scales, q.zeros, q.group)


def _kda(ref, at, x, st):
    cfg = at.cfg
    nh, dk = cfg.kda_heads, cfg.kda_head_dim
    outs, st2 = [], dict(st)
    for idx, (proj, ck) in enumerate(((at.q_proj, "cq"), (at.k_proj, "ck"), (at.v_proj, "cv"))):
        win = torch.cat([st[ck], _lin(ref, proj, x)[None]], dim=0)          # (4, C) bf16
        outs.append(F.silu((at.conv_w[idx] * win.T).sum(-1)))
        st2[ck] = win[1:].clone()
    q, k, v = (t.view(nh, dk) for t in outs)
    q = q * dk ** -0.5
    g = -F.softplus(_lin(ref, at.g_proj, x)).view(nh, dk)
    beta = torch.sigmoid(x @ at.beta_proj.weight.T)                          # (nh,)
    S = st["S"].to(torch.bfloat16) * g.exp()[:, :, None]
    kv = torch.einsum("hk,hkv->hv", k, S)
    S = S + beta[:, None, None] * k[:, :, None] * (v - kv)[:, None, :]
    o = torch.einsum("hkv,hk->hv", S, q)
    st2["S"] = S.float()                                                     # the state's dtype is fp32
    return _lin(ref, at.o_proj, o.reshape(-1)), st2


def _mla(ref, at, x, st):
    cfg = at.cfg
    nh, dn = cfg.mla_heads, cfg.qk_nope
    pos = st["c_kv"].shape[0]
    q = _lin(ref, at.q_proj, x).view(nh, dn + cfg.qk_rope)
    kv = _lin(ref, at.kv_a, x)
    c, kr = kv[: cfg.kv_lora], kv[cfg.kv_lora:]
    q_rope = ref.rope_interleaved(q[:, dn:], pos, cfg.rope_theta)
    kr = ref.rope_interleaved(kr, pos, cfg.rope_theta)
    c_kv = torch.cat([st["c_kv"], c[None]], dim=0)
    k_rope = torch.cat([st["k_rope"], kr[None]], dim=0)
    kvb = _lin(ref, at.kv_b, c_kv).view(-1, nh, dn + cfg.v_head)
    scores = (torch.einsum("hd,lhd->lh", q[:, :dn], kvb[..., :dn])
              + torch.einsum("hd,ld->lh", q_rope, k_rope)) / math.sqrt(dn + cfg.qk_rope)
    p = torch.softmax(scores.float(), dim=0).to(torch.bfloat16)
    o = torch.einsum("lh,lhd->hd", p, kvb[..., dn:])
    return _lin(ref, at.o_proj, o.reshape(-1)), {"c_kv": c_kv, "k_rope": k_rope}


def _experts(ref, qe, idx):
    """(n, in, out) bf16 weights of the experts `idx`, dequantized as one batch."""
    return ref.dequant_w4(qe.w_q[idx], qe.scales[idx], qe.zeros[idx], qe.group)


def _ffn(ref, moe_gate, moe_up, moe_down, idx, x):
    wg, wu, wd = (_experts(ref, m, idx) for m in (moe_gate, moe_up, moe_down))
    h = F.silu(torch.einsum("d,edf->ef", x, wg)) * torch.einsum("d,edf->ef", x, wu)
    return torch.einsum("ef,efd->ed", h, wd)                                 # (n, hidden) bf16


def _moe(ref, moe, x):
    cfg = moe.cfg
    probs = torch.softmax(moe.router(x).float(), dim=-1)
    w, idx = torch.topk(probs, cfg.n_active)
    w = (w / (w.sum() + 1e-9) * cfg.routed_scaling).to(torch.bfloat16)
    routed = (w[:, None] * _ffn(ref, moe.gate, moe.up, moe.down, idx, x)).sum(0)
    shared = torch.arange(cfg.n_shared, device=x.device)
    return routed + _ffn(ref, moe.s_gate, moe.s_up, moe.s_down, shared, x).sum(0)


@torch.no_grad()
def step(ref, model, hidden, state):
    """One baseline decode step on `model`'s weights -> (hidden, new state), as Model.step."""
    x, new_state = hidden, []
    for blk, st in zip(model.blocks, state):
        attn = _kda if blk.kind == "K" else _mla
        a, st = attn(ref, blk.attn, ref.rms(x, blk.attn_norm), st)
        h = x + a
        x = h + _moe(ref, blk.moe, ref.rms(h, blk.moe_norm))
        new_state.append(st)
    return x, new_state
