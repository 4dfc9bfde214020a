"""mega/02_kimi_linear_decode: one step with Triton for the hot parts, torch glue elsewhere.

Triton: every W4A16 projection (KDA q/k/v/g/o, MLA q/kv_a/kv_b/o, the selected and shared
experts' gate/up/down) is the fused-dequant kernel of kernels/triton/w4a16.py reading the packed
nibbles directly (GEMV for the token, GEMM for kv_b over the whole latent cache), instead of
materialising each dequantized bf16 matrix.  The selected experts of a projection run in one GEMV
launch that reads their indices on the device, so the step never waits on the host.  Torch glue: RMSNorm, the short conv, the KDA state
update, RoPE, the MLA softmax, routing.  Many launches per step: not a megakernel.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..common import load_reference_module
from .w4a16 import w4a16_experts, w4a16_matmul

_REF = load_reference_module("mega_02_kimi.py", "_kimi_triton_ref")


def _ql(q, x):
    """QuantLinear: bf16(x.float() @ W.float())."""
    return w4a16_matmul(x, q.w_q, q.scales, q.zeros, q.group, out_dtype=torch.bfloat16)


def _qx(ex, sel, x):
    """x (or x[j] for expert sel[j]) @ W[sel[j]], fp32 out; sel stays on the device (no host sync)."""
    return w4a16_experts(x, ex.w_q, ex.scales, ex.zeros, sel, ex.group, out_dtype=torch.float32)


def _kda(at, x, st, cfg):
    nh, dk = cfg.kda_heads, cfg.kda_head_dim
    outs, new_conv = [], {}
    for idx, (proj, ck) in enumerate(((at.q_proj, "cq"), (at.k_proj, "ck"), (at.v_proj, "cv"))):
        win = torch.cat([st[ck], _ql(proj, x)[None]], dim=0)
        outs.append(F.silu((at.conv_w[idx].float() * win.float().T).sum(-1)).to(torch.bfloat16))
        new_conv[ck] = win[1:].clone()
    q, k, v = (t.float().view(nh, dk) for t in outs)
    q = q * dk ** -0.5
    g = -F.softplus(_ql(at.g_proj, x).float()).view(nh, dk)
    beta = torch.sigmoid((x.float() @ at.beta_proj.weight.float().T).to(torch.bfloat16).float())
    S = st["S"] * g.exp()[:, :, None]
    kv = torch.einsum("hk,hkv->hv", k, S)
    S = S + beta[:, None, None] * k[:, :, None] * (v - kv)[:, None, :]
    o = torch.einsum("hkv,hk->hv", S, q)
    st2 = dict(st)
    st2.update(new_conv)
    st2["S"] = S
    return _ql(at.o_proj, o.reshape(-1).to(torch.bfloat16)), st2


def _mla(at, x, st, cfg):
    nh = cfg.mla_heads
    pos = st["c_kv"].shape[0]
    q = _ql(at.q_proj, x).view(nh, cfg.qk_nope + cfg.qk_rope)
    kv = _ql(at.kv_a, x)
    c, kr = kv[: cfg.kv_lora], kv[cfg.kv_lora:]
    q_rope = _REF.rope_interleaved(q[:, cfg.qk_nope:], pos, cfg.rope_theta)
    kr = _REF.rope_interleaved(kr, pos, cfg.rope_theta)
    c_kv = torch.cat([st["c_kv"], c[None]], dim=0)
    k_rope = torch.cat([st["k_rope"], kr[None]], dim=0)
    kvb = _ql(at.kv_b, c_kv).view(-1, nh, cfg.qk_nope + cfg.v_head)
    k_nope, v = kvb[..., : cfg.qk_nope].float(), kvb[..., cfg.qk_nope:].float()
    scores = (torch.einsum("hd,lhd->lh", q[:, : cfg.qk_nope].float(), k_nope)
              + torch.einsum("hd,ld->lh", q_rope.float(), k_rope.float())) / math.sqrt(cfg.qk_nope + cfg.qk_rope)
    o = torch.einsum("lh,lhd->hd", torch.softmax(scores, dim=0), v)
    return _ql(at.o_proj, o.reshape(-1).to(torch.bfloat16)), {"c_kv": c_kv, "k_rope": k_rope}


def _moe(moe, x, cfg):
    probs = torch.softmax((x.float() @ moe.router.weight.float().T).to(torch.bfloat16).float(), dim=-1)
    w, idx = torch.topk(probs, cfg.n_active)
    w = w / (w.sum() + 1e-9) * cfg.routed_scaling

    def ffn(g, u, d, sel):
        """The experts `sel` (a device index tensor) in one launch per projection: (n, hidden) fp32."""
        h = F.silu(_qx(g, sel, x)) * _qx(u, sel, x)
        return _qx(d, sel, h)

    out = (w[:, None] * ffn(moe.gate, moe.up, moe.down, idx)).sum(0)
    if cfg.n_shared:
        out = out + ffn(moe.s_gate, moe.s_up, moe.s_down, torch.arange(cfg.n_shared, device=x.device)).sum(0)
    return out.to(torch.bfloat16)


def step(model, hidden, state):
    cfg = model.cfg
    x = hidden
    new_state = []
    for blk, st in zip(model.blocks, state):
        a_in = _REF.rms(x, blk.attn_norm)
        a, st = (_kda if blk.kind == "K" else _mla)(blk.attn, a_in, st, cfg)
        h = x + a
        x = h + _moe(blk.moe, _REF.rms(h, blk.moe_norm), cfg)
        new_state.append(st)
    return x, new_state


def forward(model, inputs):
    hidden, state = inputs
    return step(model, hidden, state)
