"""mega/02_kimi_linear_decode (D1): Model.step(hidden, state) with per-layer state dicts."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from forensics import problems

from ..common import _result, cosine, load_reference_module
from ..registry import ProblemSpec
from ._util import cases, lazy_triton

_REF = load_reference_module("mega_02_kimi.py", "_kimi_ref")
_BASELINE = load_reference_module("mega_02_kimi_baseline.py", "_kimi_baseline")
COSINE_MIN = 0.98


def init_args(spec, shape):
    return [_REF.build_config(shape)]


def make_inputs(spec, shape, seed, device="cpu", cfg=None):
    """[hidden, state] = [init_token(cfg, seed), init_state(cfg, ctx, seed)] on `device`
    (the deck draws them from CUDA generators; on the CPU the numbers differ)."""
    cfg = cfg or _REF.build_config(shape)
    return [_REF.init_token(cfg, seed, device), _REF.init_state(cfg, shape["ctx"], seed, device)]


def device_reset(mod, model, device, seed=1234):
    """`Model.reset_parameters()` with the CPU generator replaced by a `device` generator seeded
    with 1234: the same draws (shapes, scales, dtypes, `modules()` order: nn.Linear weights and
    conv_w drawn in bf16 in place, quantised weights in fp32) and the same quantisation,
    different numbers.  Solutions load the reference weights strict, so a
    check is as valid with these; only the exact deck weights need the CPU path."""
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device)

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.normal_(m.weight, 0.0, 0.02, generator=gen)
                continue
            if m is model or not hasattr(m, "reset_parameters") or isinstance(m, mod.MoE):
                continue
            if isinstance(m, mod.QuantLinear):
                w = randn(m.fin, m.fout) * 0.02
            elif isinstance(m, mod.QuantExperts):
                w = randn(m.n, m.fin, m.fout) * 0.02
            elif isinstance(m, mod.KDAttention):
                torch.nn.init.normal_(m.conv_w, 0.0, 0.1, generator=gen)
                continue
            else:   # a module the mirror does not know: refuse rather than leave it half-initialised
                raise TypeError(f"device_reset: no device mirror for {type(m).__name__}.reset_parameters")
            for name, t in zip(("w_q", "scales", "zeros"), mod.quantize_w4(w, m.group)):
                getattr(m, name).copy_(t)
            del w
    return model


def build(spec, shape, device, exact_init, mod):
    """build_fn: exact_init -> None (the registry's default: the deck's CPU generator 1234, 12.7 s
    on the H200 for 64 experts); otherwise the modules are allocated on `device` with the
    constructor's CPU reset suppressed, then `device_reset`."""
    if exact_init or torch.device(device).type == "cpu":
        return None
    Model = mod.Model
    orig = Model.reset_parameters
    Model.reset_parameters = lambda self: self
    try:
        with torch.device(device):
            model = Model(*spec.init_args(shape, mod))
    finally:
        Model.reset_parameters = orig
    return device_reset(mod, model, device)


def reference_step(spec, model, inputs):
    hidden, state = inputs
    return model.step(hidden, state)


def baseline_step(spec, model, inputs):
    """The deck's baseline.py step (bf16 dequantize-then-matmul, kernels/ref/mega_02_kimi_baseline.py)
    on a reference model's weights: the denominator of the mega score, speedup = baseline / solution."""
    hidden, state = inputs
    return _BASELINE.step(_REF, model, hidden, state)


def compare(spec, ref_out, sol_out, case, inputs):
    """Mega check: output shape equal and finite; cosine >= 0.98 for the output, state[0]['S'] and
    state[3]['c_kv'] (which must have ctx+1 rows)."""
    try:
        ref_h, ref_state = ref_out
        sol_h, sol_state = sol_out
    except (TypeError, ValueError):
        return _result(False, f"step must return (hidden, state), got {type(sol_out).__name__}")
    if not isinstance(sol_h, torch.Tensor) or tuple(sol_h.shape) != tuple(ref_h.shape):
        return _result(False, "output shape mismatch")
    if not bool(torch.isfinite(sol_h.float()).all()):
        return _result(False, "output not finite")
    try:
        s_ref, s_sol = ref_state[0]["S"], sol_state[0]["S"]
        c_ref, c_sol = ref_state[-1]["c_kv"], sol_state[-1]["c_kv"]
    except (KeyError, IndexError, TypeError) as exc:
        return _result(False, f"state layout: {exc!r}")
    if tuple(c_sol.shape) != tuple(c_ref.shape):
        return _result(False, f"MLA cache shape {tuple(c_sol.shape)} != {tuple(c_ref.shape)} (ctx+1 rows expected)")
    cos = {"out": cosine(ref_h, sol_h), "S": cosine(s_ref, s_sol), "cache": cosine(c_ref, c_sol)}
    ok = all(v >= COSINE_MIN for v in cos.values())
    d = (ref_h.float() - sol_h.float().to(ref_h.device)).abs()
    return _result(ok, "out={out:.4f} S={S:.4f} cache={cache:.4f} ".format(**cos) + ("OK" if ok else "FAIL (< 0.98)"),
                   max_abs=float(d.max()), n_total=ref_h.numel(), cosines=cos, cosine_min=COSINE_MIN)


def oracle(model, inputs):
    """One step in fp64 with independent formulations: KDA as (I - b k k^T) D S + b k v^T,
    MLA with the kv_b weight absorbed into the query (attention over the latent cache),
    MoE as an explicit weighted sum over the selected experts."""
    hidden, state = inputs
    cfg = model.cfg
    dd = torch.float64
    x = hidden.to(dd)
    new_state = []

    def lin(q, v):  # QuantLinear in fp64
        return v.to(dd) @ q.weight().to(dd)

    def norm(v, w):
        return v * torch.rsqrt(v.pow(2).mean() + _REF.EPS) * w.to(dd)

    for blk, st in zip(model.blocks, state):
        a_in = norm(x, blk.attn_norm)
        at = blk.attn
        if blk.kind == "K":
            nh, dk = cfg.kda_heads, cfg.kda_head_dim
            convs, st2 = [], {}
            for idx, (proj, ck) in enumerate(((at.q_proj, "cq"), (at.k_proj, "ck"), (at.v_proj, "cv"))):
                win = torch.cat([st[ck].to(dd), lin(proj, a_in)[None]], 0)
                convs.append(F.silu(sum(at.conv_w[idx][:, j].to(dd) * win[j] for j in range(win.shape[0]))))
                st2[ck] = win[1:]
            q, k, v = (c.view(nh, dk) for c in convs)
            q = q / math.sqrt(dk)
            decay = torch.exp(-F.softplus(lin(at.g_proj, a_in))).view(nh, dk)
            beta = torch.sigmoid(a_in @ at.beta_proj.weight.to(dd).T)
            DS = decay[:, :, None] * st["S"].to(dd)
            eye = torch.eye(dk, dtype=dd, device=x.device)
            proj = eye[None] - beta[:, None, None] * k[:, :, None] * k[:, None, :]
            S = proj @ DS + beta[:, None, None] * k[:, :, None] * v[:, None, :]
            o = torch.einsum("hkv,hk->hv", S, q).reshape(-1)
            st2["S"] = S
            attn = lin(at.o_proj, o)
        else:
            nh, dn, dr, dv = cfg.mla_heads, cfg.qk_nope, cfg.qk_rope, cfg.v_head
            pos = st["c_kv"].shape[0]
            qa = lin(at.q_proj, a_in).view(nh, dn + dr)
            kva = lin(at.kv_a, a_in)
            c, kr = kva[: cfg.kv_lora], kva[cfg.kv_lora:]
            inv = cfg.rope_theta ** (-2 * torch.arange(dr // 2, dtype=dd, device=x.device) / dr)
            ang = pos * inv

            def rope(t):
                t1, t2 = t[..., 0::2], t[..., 1::2]
                return torch.stack([t1 * ang.cos() - t2 * ang.sin(), t1 * ang.sin() + t2 * ang.cos()], -1).flatten(-2)

            q_nope, q_rope, kr = qa[:, :dn], rope(qa[:, dn:]), rope(kr)
            c_all = torch.cat([st["c_kv"].to(dd), c[None]], 0)
            kr_all = torch.cat([st["k_rope"].to(dd), kr[None]], 0)
            wkv = at.kv_b.weight().to(dd).view(cfg.kv_lora, nh, dn + dv)
            w_k, w_v = wkv[..., :dn], wkv[..., dn:]
            q_lat = torch.einsum("hd,chd->hc", q_nope, w_k)                  # absorbed query
            scores = (c_all @ q_lat.T + kr_all @ q_rope.T) / math.sqrt(dn + dr)   # (L+1, h)
            p = torch.softmax(scores, 0)
            o = torch.einsum("lh,lc,chd->hd", p, c_all, w_v).reshape(-1)
            st2 = {"c_kv": c_all, "k_rope": kr_all}
            attn = lin(at.o_proj, o)
        h = x + attn
        m_in = norm(h, blk.moe_norm)
        moe = blk.moe
        probs = torch.softmax(m_in @ moe.router.weight.to(dd).T, -1)
        w, idx = torch.topk(probs, cfg.n_active)
        w = w / (w.sum() + 1e-9) * cfg.routed_scaling

        def ffn(ex_g, ex_u, ex_d, e):
            return (F.silu(m_in @ ex_g.weight(e).to(dd)) * (m_in @ ex_u.weight(e).to(dd))) @ ex_d.weight(e).to(dd)

        out = sum(w[j] * ffn(moe.gate, moe.up, moe.down, int(idx[j])) for j in range(cfg.n_active))
        out = out + sum(ffn(moe.s_gate, moe.s_up, moe.s_down, s) for s in range(cfg.n_shared))
        x = h + out
        new_state.append(st2)
    return x.float(), [{k: t.float() for k, t in st.items()} for st in new_state]


SPECS = [ProblemSpec(
    entry=problems.get("02_kimi_linear_decode", "2026-07-21"),   # seed-major check (for seed: for ctx)
    regime="speedup", peak_key=None, global_names=(),
    stress_cases=cases(), flops_expr="0", bytes_expr="0",
    interface=dict(init="Model(cfg: reference.Config)", forward="step(hidden bf16 (2304,), state) -> (hidden, state)",
                   state_dict="identical buffer/param names to the reference (blocks.{0..3}.attn_norm, moe_norm, "
                              "attn.{q,k,v,g,o}_proj.{w_q,scales,zeros}, attn.beta_proj.weight, attn.conv_w, "
                              "MLA attn.{q_proj,kv_a,kv_b,o_proj}.*, moe.router.weight, moe.{gate,up,down,s_gate,s_up,s_down}.*)",
                   module_helpers=["Config", "build_config", "init_state", "init_token", "QuantLinear", "QuantExperts",
                                   "quantize_w4", "dequant_w4"], import_reference_allowed=False),
    stateful=dict(
        api=["Model(cfg).step(hidden, state) -> (hidden, state); state may be mutated in place or returned"],
        state_layout="list of 4 dicts in pattern order (K,K,K,M): KDA {'S': (32,128,128) fp32, 'cq','ck','cv': "
                     "(3,4096) bf16}; MLA {'c_kv': (L,512) bf16, 'k_rope': (L,64) bf16}, pos = L",
        helpers={"init_state": "init_state(cfg, ctx, seed) - CUDA generator seeded seed",
                 "init_token": "init_token(cfg, seed) - CUDA generator seeded seed+1, 0.25*randn(2304) bf16",
                 "build_config": "build_config(shape) -> Config(n_experts=shape.n_experts)"},
        check="seeds 0/1/2 x ctx {2048, 8192}: same fed state for both models, one step; cosines >= 0.98 "
              "for out, state[0]['S'], state[3]['c_kv']",
        benchmark="gate: one step from init_state(seed 7), cosine >= 0.98; warmup _run of min(3,steps) steps, "
                  "3 trials best wall clock, each timed _run includes init_state and init_token; "
                  "speedup = baseline_s / solution_s (baseline: bf16 dequantize-then-matmul)"),
    init_args_fn=init_args, make_inputs_fn=make_inputs, reference_fn=reference_step, build_fn=build, compare_fn=compare,
    oracle_fn=oracle, triton_fn=lazy_triton("kimi"), baseline_fn=baseline_step,
    notes=["Parameter init as the deck's reference.py (read 2026-12): CPU generator 1234 over modules() in "
           "pre-order; N(0,0.02) quantized weights (one draw per expert), nn.Linear N(0,0.02) and conv_w "
           "N(0,0.1) drawn in bf16. init_state / init_token draw the conv windows, caches and token in bf16 "
           "and scale in bf16 (tests/test_kernels.py compares them with ../shared/decks when present).",
           "RMSNorm eps (1e-6) is our choice; not in the contract.",
           "Replay should chain several steps and compare all layer states (Part F.6).",
           "Triton path: fused-dequant W4A16 GEMV/GEMM for every projection, torch glue for the rest."],
)]
