# Copyright (c) 2031, Tinylib Authors (a fixture library written for the forensics tests)
# Adapted from the Triton tutorial 03-matrix-multiplication: a grouped tiled GEMM with a bias
# epilogue.  Written for tests/test_pasted.py: a library function whose file cites the tutorials.

import triton
import triton.language as tl


@triton.jit
def tinylib_grouped_tile_gemm_kernel(a, b, bias, c, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    n_m, n_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = pid // (GROUP * n_n)
    first = group * GROUP
    rows = min(n_m - first, GROUP)
    pid_m = first + (pid % (GROUP * n_n)) % rows
    pid_n = (pid % (GROUP * n_n)) // rows
    o_m = pid_m * BM + tl.arange(0, BM)
    o_n = pid_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, tl.cdiv(K, BK)):
        kk = k0 * BK + o_k
        t_a = tl.load(a + o_m[:, None] * s_am + kk[None, :] * s_ak, mask=(o_m[:, None] < M) & (kk[None, :] < K), other=0.)
        t_b = tl.load(b + kk[:, None] * s_bk + o_n[None, :] * s_bn, mask=(kk[:, None] < K) & (o_n[None, :] < N), other=0.)
        acc = tl.dot(t_a, t_b, acc)
    acc += tl.load(bias + o_n, mask=o_n < N, other=0.).to(tl.float32)[None, :]
    tl.store(c + o_m[:, None] * s_cm + o_n[None, :] * s_cn, acc.to(c.dtype.element_ty),
             mask=(o_m[:, None] < M) & (o_n[None, :] < N))
