"""Triton KDA chunk forward (hard/02_kda_cutlass): chunk-parallel preparation + sequential scan.

_prep (one program per (chunk, b*h)): G = within-chunk cumsum of g; L = -beta_c k_c.k_i e^{G_c-G_i}
(strictly lower); (I - L)^-1 by Neumann doubling ((I+L)(I+L^2)...(I+L^32), exact because L is
nilpotent); A = (I - L)^-1 diag(beta); w = A (e^G k), u = A v; Aqk (lower, diagonal included);
q e^G; k e^{G_last - G}; e^{G_last}.  All fp32.
_scan (one program per (b*h, V block)): the K x BV state in registers across chunks:
v' = u - w S, o = (q e^G) S + Aqk v', S <- e^{G_last} S + (k e^{G_last-G})^T v'.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import cdiv, interpreting


@triton.jit
def _prep_kernel(q_ptr, k_ptr, v_ptr, g_ptr, b_ptr, w_ptr, u_ptr, qg_ptr, kd_ptr, aqk_ptr, gl_ptr,
                 T, H, scale, C: tl.constexpr, K: tl.constexpr, V: tl.constexpr, PREC: tl.constexpr):
    chunk = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    n_chunks = T // C
    rows = tl.arange(0, C)
    ck = tl.arange(0, K)
    cv = tl.arange(0, V)
    tok = b * T + chunk * C + rows                                # (C,)
    kx = (tok[:, None] * H + h) * K + ck[None, :]
    vx = (tok[:, None] * H + h) * V + cv[None, :]
    k = tl.load(k_ptr + kx).to(tl.float32)
    g = tl.load(g_ptr + kx).to(tl.float32)
    G = tl.cumsum(g, axis=0)
    eG = tl.exp(G)
    kk = k * eG
    kn = k * tl.exp(-G)
    beta = tl.load(b_ptr + tok * H + h).to(tl.float32)
    eye = (rows[:, None] == rows[None, :]).to(tl.float32)
    strict = rows[:, None] > rows[None, :]
    L = tl.where(strict, -beta[:, None] * tl.dot(kk, tl.trans(kn), input_precision=PREC), 0.0)
    X = eye + L
    P = L
    for _ in range(5):
        P = tl.dot(P, P, input_precision=PREC)
        X = X + tl.dot(X, P, input_precision=PREC)
    A = X * beta[None, :]
    v = tl.load(v_ptr + vx).to(tl.float32)
    w = tl.dot(A, kk, input_precision=PREC)
    u = tl.dot(A, v, input_precision=PREC)
    q = tl.load(q_ptr + kx).to(tl.float32) * scale
    qg = q * eG
    aqk = tl.where(rows[:, None] >= rows[None, :], tl.dot(qg, tl.trans(kn), input_precision=PREC), 0.0)
    glast = tl.sum(tl.where(rows[:, None] == C - 1, G, 0.0), axis=0)        # (K,)
    kd = k * tl.exp(glast[None, :] - G)
    base = (bh * n_chunks + chunk) * C                             # scratch row of this chunk
    sk = (base + rows)[:, None] * K + ck[None, :]
    tl.store(w_ptr + sk, w)
    tl.store(qg_ptr + sk, qg)
    tl.store(kd_ptr + sk, kd)
    tl.store(u_ptr + (base + rows)[:, None] * V + cv[None, :], u)
    tl.store(aqk_ptr + (base + rows)[:, None] * C + rows[None, :], aqk)
    tl.store(gl_ptr + (bh * n_chunks + chunk) * K + ck, tl.exp(glast))


@triton.jit
def _scan_kernel(w_ptr, u_ptr, qg_ptr, kd_ptr, aqk_ptr, gl_ptr, o_ptr, T, H,
                 C: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr):
    bh = tl.program_id(0)
    vb = tl.program_id(1)
    b = bh // H
    h = bh % H
    n_chunks = T // C
    rows = tl.arange(0, C)
    ck = tl.arange(0, K)
    cv = vb * BV + tl.arange(0, BV)
    S = tl.zeros((K, BV), dtype=tl.float32)
    for c in range(n_chunks):
        base = (bh * n_chunks + c) * C
        sk = (base + rows)[:, None] * K + ck[None, :]
        w = tl.load(w_ptr + sk)
        u = tl.load(u_ptr + (base + rows)[:, None] * V + cv[None, :])
        vp = u - tl.dot(w, S, input_precision=PREC)
        qg = tl.load(qg_ptr + sk)
        aqk = tl.load(aqk_ptr + (base + rows)[:, None] * C + rows[None, :])
        o = tl.dot(qg, S, input_precision=PREC) + tl.dot(aqk, vp, input_precision=PREC)
        kdT = tl.load(kd_ptr + (base + rows)[None, :] * K + ck[:, None])          # (K, C)
        gl = tl.load(gl_ptr + (bh * n_chunks + c) * K + ck)
        S = gl[:, None] * S + tl.dot(kdT, vp, input_precision=PREC)
        tok = b * T + c * C + rows
        tl.store(o_ptr + (tok[:, None] * H + h) * V + cv[None, :], o.to(tl.bfloat16))


def kda_forward(q, k, v, g, beta, chunk_size=64):
    B, T, H, K = q.shape
    V = v.shape[-1]
    C = chunk_size
    assert T % C == 0
    q, k, v, g, beta = (t.contiguous() for t in (q, k, v, g, beta))
    n = T // C
    dev = q.device
    cpu = interpreting(q)
    prec = "ieee" if cpu else "tf32x3"
    f32 = dict(dtype=torch.float32, device=dev)
    w = torch.empty(B * H * n * C, K, **f32)
    qg = torch.empty_like(w)
    kd = torch.empty_like(w)
    u = torch.empty(B * H * n * C, V, **f32)
    aqk = torch.empty(B * H * n * C, C, **f32)
    gl = torch.empty(B * H * n, K, **f32)
    _prep_kernel[(n, B * H)](q, k, v, g, beta, w, u, qg, kd, aqk, gl, T, H, K ** -0.5, C=C, K=K, V=V, PREC=prec,
                             num_warps=4 if cpu else 8, num_stages=1)
    o = torch.empty(B, T, H, V, dtype=torch.bfloat16, device=dev)
    BV = min(V, 16 if cpu else 32)
    _scan_kernel[(B * H, cdiv(V, BV))](w, u, qg, kd, aqk, gl, o, T, H, C=C, K=K, V=V, BV=BV, PREC=prec,
                                             num_warps=4, num_stages=1 if cpu else 2)
    return o


def forward(model, inputs):
    return kda_forward(*inputs, chunk_size=model.chunk_size)
