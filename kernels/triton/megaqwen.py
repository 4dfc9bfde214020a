"""cuda/03_megaqwen_decode: a fused Triton decode step, replayed from one CUDA graph per token.

One token is 6 launches per layer (24 in all), none of them taking a host value that changes
from token to token:
  1. RMSNorm(input_ln) + q/k/v GEMV (layer 0 first forms x = bf16(0.5*stream[pos] + 0.5*h));
  2. split-KV attention: each program re-derives q-norm + RoPE of its GQA group, the programs
     of split 0 also k-norm + RoPE the new key, write k/v to the bf16 caches at `pos` and add
     the new token to their softmax; every split reads cache rows < pos only;
  3. merge of the splits (a merge by the last split to finish, behind an atomic counter, measured
     slower on an H200: 259 vs 242 us a token at position 8000);
  4. o_proj + residual (layer 3: also pos += 1);
  5. RMSNorm(post_ln) + gate/up GEMV + SiLU*mul;
  6. down + residual + bf16 cast.
The position is a device int32 read by the kernels, the input stream is drawn up front (as the
deck's generators draw it) and indexed on the device, and attention loops stop at the device
position inside a fixed grid: the launches are identical for every token, so `Stepper` captures
them once per (model, max_seq) into a torch.cuda.CUDAGraph and replays it.

Numerics: bf16 weights are read directly and upcast in registers (exact, as the deck's upcast),
all math in fp32, the caches and block outputs rounded to bf16 where the deck rounds; only the
summation orders differ from the deck's torch ops, so the result is close to, not bitwise equal
to, the deck's run (spec.deck_tolerance, checked by verify and the tests).
"""
from __future__ import annotations

import math
import warnings

import torch
import triton
import triton.language as tl

from ..common import load_reference_module
from ._common import cdiv, interpreting

_REF = load_reference_module("cuda_03_megaqwen.py", "_megaqwen_triton_ref")
HID, INTER, NH, NKV, HD = _REF.HIDDEN, _REF.INTERMEDIATE, _REF.NUM_HEADS, _REF.NUM_KV_HEADS, _REF.HEAD_DIM
G = NH // NKV
assert G == 2, "the split-attention kernel carries the two query heads of a kv head explicitly"

#: last path taken by `graph_forward` on a GPU: "cuda_graph" or "eager (<why capture failed>)"
LAST_PATH: dict = {}


@triton.jit
def _bf16(x):
    """fp32 -> bf16, round to nearest even, by integer ops: the same bits as the GPU's cvt.rn for
    finite values, and right under the CPU interpreter too, whose conversion (triton 3.9)
    truncates; the tests compare the interpreted kernels with the deck at ~1e-2."""
    b = x.to(tl.uint32, bitcast=True)
    b = b + 0x7FFF + ((b >> 16) & 1)
    return (b >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def _rms_scale(x, w_ptr, offs, K: tl.constexpr, eps):
    """rms_norm(x) * w for a full fp32 vector x of length K."""
    rs = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / K + eps)
    return x * rs * tl.load(w_ptr + offs).to(tl.float32)


@triton.jit
def _norm_qkv_kernel(x_ptr, stream_ptr, pos_ptr, xout_ptr, ln_ptr, wq_ptr, wk_ptr, wv_ptr, y_ptr, eps,
                     COMBINE: tl.constexpr, NQ: tl.constexpr, NK: tl.constexpr, K: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, K)
    if COMBINE:  # layer 0: x = r*0.5 + h*0.5 in bf16 arithmetic (each product rounded, then the sum)
        p = tl.load(pos_ptr)
        a = _bf16(tl.load(stream_ptr + p * K + offs).to(tl.float32) * 0.5)
        b = _bf16(tl.load(x_ptr + offs).to(tl.float32) * 0.5)
        xb = _bf16(a.to(tl.float32) + b.to(tl.float32))
        if pid == 0:
            tl.store(xout_ptr + offs, xb)  # the block's residual input, read by the o_proj kernel
    else:
        xb = tl.load(x_ptr + offs)
    h = _rms_scale(xb.to(tl.float32), ln_ptr, offs, K, eps)
    row0 = pid * BLOCK_N  # BLOCK_N divides NQ and NK, so a program's rows lie in one matrix
    if row0 < NQ:
        w_ptr = wq_ptr + row0 * K
    elif row0 < NQ + NK:
        w_ptr = wk_ptr + (row0 - NQ) * K
    else:
        w_ptr = wv_ptr + (row0 - NQ - NK) * K
    rows = tl.arange(0, BLOCK_N)
    w = tl.load(w_ptr + rows[:, None] * K + offs[None, :]).to(tl.float32)
    tl.store(y_ptr + row0 + rows, tl.sum(w * h[None, :], axis=1))


@triton.jit
def _head_norm_rope(v_ptr, w_ptr, cos_ptr, sin_ptr, p, rows, offs_d, eps, D: tl.constexpr):
    """rope_rotate_half(rms_norm(x, w), p) for the heads `rows` of x (rows, D) at v_ptr."""
    half: tl.constexpr = D // 2
    partner = (offs_d + half) % D
    x = tl.load(v_ptr + rows[:, None] * D + offs_d[None, :])
    xp = tl.load(v_ptr + rows[:, None] * D + partner[None, :])
    rs = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / D + eps)
    x = x * rs[:, None] * tl.load(w_ptr + offs_d).to(tl.float32)[None, :]
    xp = xp * rs[:, None] * tl.load(w_ptr + partner).to(tl.float32)[None, :]
    c = tl.load(cos_ptr + p * half + offs_d % half)[None, :]
    s = tl.load(sin_ptr + p * half + offs_d % half)[None, :]
    # first half: x1*c - x2*s; second half: x2*c + x1*s
    return x * c + tl.where(offs_d[None, :] < half, -xp, xp) * s


@triton.jit
def _online(s, vt, m_i, l_i, acc):
    """One key tile of one query head's online softmax: s (T,) scores (-inf where masked), vt (T, D)."""
    m_new = tl.maximum(m_i, tl.max(s, axis=0))
    alpha = tl.exp(m_i - m_new)
    e = tl.exp(s - m_new)
    return m_new, l_i * alpha + tl.sum(e, axis=0), acc * alpha + tl.sum(e[:, None] * vt, axis=0)


@triton.jit
def _attn_split_kernel(qkv_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, pos_ptr, kc_ptr, vc_ptr, m_ptr, l_ptr, acc_ptr,
                       s_head, per, sm_scale, eps, NQ: tl.constexpr, NK: tl.constexpr, D: tl.constexpr,
                       BLOCK_T: tl.constexpr):
    """Split `sp` of kv head hk for its two query heads (G == 2, asserted below): 2-D tiles only
    (key tile (T, D) times one query row), each head's state carried separately.  A (G, T, D)
    broadcast formulation of the same loop, with the same launch parameters, ran the whole step
    at 167 / 242 us a token at cache position 64 / 8000 on an H200, this one at 161 / 235
    (forensics.kernels.tune, docs/h200/2026-12-03-tune-7b9044d.json and -8d43d9f.json)."""
    hk = tl.program_id(0)
    sp = tl.program_id(1)
    p = tl.load(pos_ptr)
    offs_d = tl.arange(0, D)
    one = tl.arange(0, 1)
    q0 = tl.sum(_head_norm_rope(qkv_ptr, qn_ptr, cos_ptr, sin_ptr, p, 2 * hk + one, offs_d, eps, D), axis=0)
    q1 = tl.sum(_head_norm_rope(qkv_ptr, qn_ptr, cos_ptr, sin_ptr, p, 2 * hk + 1 + one, offs_d, eps, D), axis=0)
    k = _bf16(tl.sum(_head_norm_rope(qkv_ptr + NQ, kn_ptr, cos_ptr, sin_ptr, p, hk + one, offs_d, eps, D), axis=0))
    v = _bf16(tl.load(qkv_ptr + NQ + NK + hk * D + offs_d))
    first = sp == 0
    if first:
        tl.store(kc_ptr + hk * s_head + p * D + offs_d, k)
        tl.store(vc_ptr + hk * s_head + p * D + offs_d, v)
    # split 0 starts from the new token (read from registers: its cache row is written by this
    # very program); every split then attends its share of the rows < p already in the cache
    kf, vf = k.to(tl.float32), v.to(tl.float32)
    m0 = tl.where(first, tl.sum(q0 * kf, axis=0) * sm_scale, float("-inf"))
    m1 = tl.where(first, tl.sum(q1 * kf, axis=0) * sm_scale, float("-inf"))
    l0 = tl.where(first, 1.0, 0.0)
    l1 = l0
    a0 = tl.where(first, vf, 0.0)
    a1 = a0
    offs_t = tl.arange(0, BLOCK_T)
    t_begin = sp * per
    t_end = tl.minimum(t_begin + per, p)
    for t0 in range(t_begin, t_end, BLOCK_T):
        t = t0 + offs_t
        t_mask = t < t_end
        kv_off = hk * s_head + t[:, None] * D + offs_d[None, :]
        kt = tl.load(kc_ptr + kv_off, mask=t_mask[:, None], other=0.0).to(tl.float32)                # (T, D)
        vt = tl.load(vc_ptr + kv_off, mask=t_mask[:, None], other=0.0).to(tl.float32)
        s0 = tl.where(t_mask, tl.sum(kt * q0[None, :], axis=1) * sm_scale, float("-inf"))
        s1 = tl.where(t_mask, tl.sum(kt * q1[None, :], axis=1) * sm_scale, float("-inf"))
        m0, l0, a0 = _online(s0, vt, m0, l0, a0)
        m1, l1, a1 = _online(s1, vt, m1, l1, a1)
    base = (hk * tl.num_programs(1) + sp) * 2
    tl.store(m_ptr + base, m0)
    tl.store(m_ptr + base + 1, m1)
    tl.store(l_ptr + base, l0)
    tl.store(l_ptr + base + 1, l1)
    tl.store(acc_ptr + base * D + offs_d, a0)
    tl.store(acc_ptr + (base + 1) * D + offs_d, a1)


@triton.jit
def _attn_merge_kernel(m_ptr, l_ptr, acc_ptr, o_ptr, nsplit, G: tl.constexpr, D: tl.constexpr,
                       BLOCK_S: tl.constexpr):
    h = tl.program_id(0)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    s_mask = offs_s < nsplit
    idx = ((h // G) * nsplit + offs_s) * G + h % G
    m = tl.load(m_ptr + idx, mask=s_mask, other=float("-inf"))
    l = tl.load(l_ptr + idx, mask=s_mask, other=0.0)
    a = tl.load(acc_ptr + idx[:, None] * D + offs_d[None, :], mask=s_mask[:, None], other=0.0)
    w = tl.where(m > float("-inf"), tl.exp(m - tl.max(m, axis=0)), 0.0)   # splits past pos are empty
    tl.store(o_ptr + h * D + offs_d, tl.sum(a * w[:, None], axis=0) / tl.sum(l * w, axis=0))


@triton.jit
def _gemv_residual_kernel(x_ptr, w_ptr, res_ptr, out_ptr, pos_ptr, K: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, ADVANCE: tl.constexpr):
    """out[rows] = res[rows] + W[rows] @ x, stored in out's dtype; ADVANCE: pos += 1."""
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), tl.float32)
    for k0 in tl.static_range(0, K, BLOCK_K):  # unrolled: every chunk's weight load issued up front
        cols = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rows[:, None] * K + cols[None, :]).to(tl.float32)
        acc += tl.sum(w * tl.load(x_ptr + cols)[None, :], axis=1)
    out = tl.load(res_ptr + rows).to(tl.float32) + acc
    if out_ptr.dtype.element_ty == tl.bfloat16:
        tl.store(out_ptr + rows, _bf16(out))
    else:
        tl.store(out_ptr + rows, out)
    if ADVANCE:
        if pid == 0:  # nothing after this kernel in the token reads pos (o_proj of the last layer)
            tl.store(pos_ptr, tl.load(pos_ptr) + 1)


@triton.jit
def _norm_gate_up_kernel(r_ptr, ln_ptr, wg_ptr, wu_ptr, a_ptr, eps, K: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, K)
    h = _rms_scale(tl.load(r_ptr + offs), ln_ptr, offs, K, eps)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    w_off = rows[:, None] * K + offs[None, :]
    g = tl.sum(tl.load(wg_ptr + w_off).to(tl.float32) * h[None, :], axis=1)
    u = tl.sum(tl.load(wu_ptr + w_off).to(tl.float32) * h[None, :], axis=1)
    tl.store(a_ptr + rows, g / (1.0 + tl.exp(-g)) * u)


_PARAMS = ("input_ln", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "o_proj", "post_ln", "gate_proj",
           "up_proj", "down_proj")


#: launch parameters of the step on a GPU (rows per program of each GEMV, its K chunk, warps, the
#: attention's warps, key tile and split cap); the interpreter uses CPU_CONFIG (few, large programs).
#: Measured on an H200 with forensics.kernels.tune, us a token at cache position 64 / 8000: the attention
#: with 4 warps and 64 splits 161 / 235, with 2 warps and 128 splits 154 / 178 (-8d43d9f.json),
#: with 1 warp 142 / 158 (-3b8f6a7.json), and with GEMV rows per program 4 / 4 / 2 instead of
#: 8 / 8 / 4 as well, this config, 140 / 155 (-e7bfbb5.json; files docs/h200/2026-12-03-tune-*).
#: `Stepper(config=...)` overrides any of them (forensics.kernels.tune sweeps them on a GPU).
GPU_CONFIG = dict(bn_qkv=4, bn_mlp=4, bn_res=2, bk_res=1024, warps=4, attn_warps=1, block_t=32, max_split=128)
CPU_CONFIG = dict(bn_qkv=1024, bn_mlp=1024, bn_res=1024, bk_res=1024, warps=4, attn_warps=4, block_t=2, max_split=2)

#: GPU_CONFIG overrides timed by `python -m forensics.kernels.tune` (µs per token at a short and a long position)
CANDIDATES = {
    "default": {},
    "gemv_8_8_4": dict(bn_qkv=8, bn_mlp=8, bn_res=4),
    "attn_w2": dict(attn_warps=2),
    "t64": dict(block_t=64),
    "t16": dict(block_t=16),
    "split64": dict(max_split=64),
}


def split_sizing(max_seq, cpu, block_t=None, max_split=None):
    """Split-KV for one query token over max_seq cache rows: (BLOCK_T, MAX_SPLIT, rows per split,
    splits).  On a GPU up to 128 splits per kv head (8 x 86 programs at max_seq 8216, 96 rows
    each); the grid is fixed per max_seq, the rows a split reads at a position come from the device."""
    cfg = CPU_CONFIG if cpu else GPU_CONFIG
    block_t, max_split = block_t or cfg["block_t"], max_split or cfg["max_split"]
    nsplit = min(max_split, cdiv(max_seq, block_t))
    per = cdiv(cdiv(max_seq, nsplit), block_t) * block_t
    return block_t, max_split, per, cdiv(max_seq, per)


class Stepper:
    """Static device state of one (model, max_seq) and the fused per-token step over it."""

    def __init__(self, model, max_seq, config=None):
        dev = next(model.parameters()).device
        self.cpu = interpreting() or dev.type == "cpu"
        self.cfg = {**(CPU_CONFIG if self.cpu else GPU_CONFIG), **(config or {})}
        self.max_seq, self.device = max_seq, dev
        self.w = [[getattr(blk, n) for n in _PARAMS] for blk in model.blocks]
        self.ptrs = self._ptrs(model)
        assert all(p.is_contiguous() for ws in self.w for p in ws)
        f32 = dict(dtype=torch.float32, device=dev)
        self.pos = torch.zeros(1, dtype=torch.int32, device=dev)
        self.stream = torch.zeros(max_seq, HID, dtype=torch.bfloat16, device=dev)
        self.xb = torch.zeros(len(self.w) + 1, HID, dtype=torch.bfloat16, device=dev)  # layer inputs; [-1] = h
        self.qkv = torch.empty((NH + 2 * NKV) * HD, **f32)
        self.o = torch.empty(NH * HD, **f32)
        self.r = torch.empty(HID, **f32)
        self.act = torch.empty(INTER, **f32)
        # caches are never cleared between runs: attention reads only rows < pos, written this run
        self.kc, self.vc = model.new_caches(max_seq, dev)
        half = HD // 2
        inv = _REF.ROPE_THETA ** (-torch.arange(half, **f32) / half)          # the deck's RoPE expression
        ang = torch.arange(max_seq, **f32)[:, None] * inv
        self.cos, self.sin = torch.cos(ang).contiguous(), torch.sin(ang).contiguous()
        self.block_t, self.max_split, self.per, self.nsplit = split_sizing(
            max_seq, self.cpu, self.cfg["block_t"], self.cfg["max_split"])
        self.m = torch.empty(NKV, self.nsplit, G, **f32)
        self.l = torch.empty_like(self.m)
        self.acc = torch.empty(NKV, self.nsplit, G, HD, **f32)
        self.graph, self.graph_error = None, None

    @staticmethod
    def _ptrs(model):
        return tuple(p.data_ptr() for p in model.parameters())

    def step(self):
        """One token: 24 launches, every argument fixed for the life of the Stepper."""
        eps, c = _REF.EPS, self.cfg
        bn_qkv, bn_mlp, bn_res, bk_res, warps = c["bn_qkv"], c["bn_mlp"], c["bn_res"], c["bk_res"], c["warps"]
        n_layers = len(self.w)
        for i, (ln, wq, wk, wv, qn, kn, wo, pln, wg, wu, wd) in enumerate(self.w):
            xin = self.xb[-1] if i == 0 else self.xb[i]
            _norm_qkv_kernel[(self.qkv.numel() // bn_qkv,)](
                xin, self.stream, self.pos, self.xb[0], ln, wq, wk, wv, self.qkv, eps, COMBINE=i == 0,
                NQ=NH * HD, NK=NKV * HD, K=HID, BLOCK_N=bn_qkv, num_warps=warps)
            _attn_split_kernel[(NKV, self.nsplit)](
                self.qkv, qn, kn, self.cos, self.sin, self.pos, self.kc[i], self.vc[i], self.m, self.l, self.acc,
                self.max_seq * HD, self.per, 1.0 / math.sqrt(HD), eps, NQ=NH * HD, NK=NKV * HD, D=HD,
                BLOCK_T=self.block_t, num_warps=c["attn_warps"])
            _attn_merge_kernel[(NH,)](self.m, self.l, self.acc, self.o, self.nsplit, G=G, D=HD,
                                      BLOCK_S=self.max_split, num_warps=1 if self.cpu else 2)
            _gemv_residual_kernel[(HID // bn_res,)](
                self.o, wo, self.xb[i], self.r, self.pos, K=NH * HD, BLOCK_N=bn_res, BLOCK_K=bk_res,
                ADVANCE=i == n_layers - 1, num_warps=warps)
            _norm_gate_up_kernel[(INTER // bn_mlp,)](self.r, pln, wg, wu, self.act, eps, K=HID, BLOCK_N=bn_mlp,
                                                     num_warps=warps)
            _gemv_residual_kernel[(HID // bn_res,)](
                self.act, wd, self.r, self.xb[i + 1], self.pos, K=INTER, BLOCK_N=bn_res, BLOCK_K=bk_res,
                ADVANCE=False, num_warps=warps)

    def capture(self):
        """Warm (JIT-compile) the step on a side stream, then capture it; on failure keep the
        reason and step eagerly."""
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                self.step()
                side.synchronize()   # once per capture, not per token
                # capture_begin/end rather than torch.cuda.graph(), whose entry runs gc.collect()
                # (tens of ms in a large process, per capture inside the timed full check)
                graph = torch.cuda.CUDAGraph()
                graph.capture_begin()
                try:
                    self.step()
                finally:
                    graph.capture_end()
            torch.cuda.current_stream(self.device).wait_stream(side)
            self.graph = graph
        except Exception as exc:  # noqa: BLE001 - recorded; the eager step computes the same values
            self.graph_error = f"{type(exc).__name__}: {str(exc)[:300]}"
            warnings.warn(f"megaqwen: CUDA graph capture failed, stepping eagerly: {self.graph_error}")

    def run(self, ctx, dec, seed, use_graph):
        """`run(ctx, dec, seed)`: the deck's input streams (the reference's `seeded_hidden` and
        `noise_stream`: its per-token bf16 draws), then ctx + dec steps with no host sync between."""
        assert ctx + dec <= self.max_seq
        self.xb[-1].copy_(_REF.seeded_hidden(seed))
        for gen_seed, lo, n in ((seed + 1, 0, ctx), (seed + 2, ctx, dec)):
            self.stream[lo:lo + n].copy_(_REF.noise_stream(gen_seed, n))
        self.pos.zero_()
        tick = self.graph.replay if use_graph and self.graph is not None else self.step
        for _ in range(ctx + dec):
            tick()
        return {"last_hidden": self.xb[-1].clone()}


def _stepper(model, max_seq, config=None):
    """The model's Stepper for (max_seq, config), rebuilt when the parameters moved (new storage)."""
    cache = model.__dict__.setdefault("_megaqwen_steppers", {})
    key = (max_seq, tuple(sorted((config or {}).items())))
    st = cache.get(key)
    if st is None or st.ptrs != Stepper._ptrs(model):
        st = cache[key] = Stepper(model, max_seq, config)
    return st


def forward(model, inputs):
    """run(ctx_len, n_decode, seed) with the fused step launched eagerly -> {'last_hidden'}."""
    ctx, dec, seed = inputs
    return _stepper(model, ctx + dec + 8).run(ctx, dec, seed, use_graph=False)


def graph_forward(model, inputs, config=None):
    """The same, replaying the step's CUDA graph (captured on first use); eager on the CPU or
    when capture failed (LAST_PATH says which)."""
    ctx, dec, seed = inputs
    st = _stepper(model, ctx + dec + 8, config)
    if st.device.type == "cuda" and st.graph is None and st.graph_error is None:
        st.capture()
    LAST_PATH.update(path="cuda_graph" if st.graph is not None else f"eager ({st.graph_error or 'no CUDA'})")
    return st.run(ctx, dec, seed, use_graph=True)
