"""Triton references against their oracles on tiny CPU shapes, under TRITON_INTERPRET=1.

The Triton checks run once, in a child process (`python -m forensics.kernels.selftest --json`) whose
environment sets TRITON_INTERPRET=1, so this test module never changes how triton behaves in the
pytest process itself (GPU tests elsewhere keep the compiled path).  Each case also runs a
negative control (a perturbed output must fail the comparison).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from forensics.kernels import registry

REPO = Path(__file__).resolve().parent.parent
WITH_TRITON = sorted({n for n in registry.names() for v in registry.deck_versions(n)
                      if registry.get(n, v).has_triton})


@pytest.fixture(scope="module")
def selftest():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-m", "forensics.kernels.selftest", "--json"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.stdout, proc.stderr[-4000:]
    rows = json.loads(proc.stdout)
    return {(r["problem"], r["deck_version"]): r for r in rows}


def test_every_problem_has_triton():
    assert set(registry.names()) == set(WITH_TRITON)


@pytest.mark.parametrize("name", WITH_TRITON)
def test_triton_matches_oracle_nominal_stress_property(selftest, name):
    for ver in registry.deck_versions(name):
        spec = registry.get(name, ver)
        if not spec.has_triton:
            continue
        r = selftest[(name, ver)]
        assert "error" not in r, r.get("traceback")
        names = [c["case"] for c in r["cases"]]
        assert names == [c.name for c in spec.stress_cases] + [p.name for p in spec.property_cases]
        for c in r["cases"]:
            assert c["vs_oracle"]["ok"], (ver, c["case"], c["vs_oracle"]["msg"])
            assert c["vs_reference"]["ok"], (ver, c["case"], c["vs_reference"]["msg"])
            assert c["negative_control_failed"], (ver, c["case"], "perturbed output passed")
            assert c.get("property_exact_one", True), (ver, c["case"])


def test_selftest_reports_errors_without_stopping(monkeypatch):
    from forensics.kernels import selftest as st
    monkeypatch.setattr(registry.get("02_kimi_linear_decode"), "triton_fn", None)
    res = st.run(["02_kimi_linear_decode"])
    assert res[0].get("skipped") == "no Triton reference"
    monkeypatch.setattr(registry.get("05_topk_bitonic"), "triton_fn", lambda m, x: (_ for _ in ()).throw(ValueError("boom")))
    res = st.run(["05_topk_bitonic", "02_kimi_linear_decode"])
    assert res[0]["ok"] is False and "boom" in res[0]["error"] and res[1].get("skipped")


def test_verify_cpu_flow_and_error_isolation(tmp_path):
    """forensics.kernels.verify on the CPU (tiny shapes, interpreter): JSON shape, a bad problem name recorded
    without stopping the others, stateful problems verified through their full path."""
    out = tmp_path / "v.json"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-m", "forensics.kernels.verify", "--device", "cpu", "--out", str(out), "--problems",
                           "07_w4a16_gemm", "no_such_problem", "04_grid_mingru_sps"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    res = json.loads(out.read_text())
    assert proc.returncode == 1                        # the bad name makes the run not-ok
    by = {p["problem"]: p for p in res["problems"]}
    assert "KeyError" in by["no_such_problem"]["errors"][0]["error"]
    w = by["07_w4a16_gemm"]
    assert w["ok"] and w["shapes"][0]["triton_vs_oracle"]["ok"]
    t = w["shapes"][0]["timing"]
    assert t["triton"]["ms_median"] > 0 and "matmul" in t["library"]["op"]
    m = by["04_grid_mingru_sps"]
    assert m["ok"] is True and m["shapes"][0]["triton_vs_oracle"]["ok"] and "triton" in m["shapes"][0]["timing"]
    assert res["environment"]["device"] == "cpu"


def test_bench_kernels_is_registered():
    from devkit.bench.cli import BENCHMARKS
    mod, attr = BENCHMARKS["kernels"][0].split(":")
    import importlib
    assert getattr(importlib.import_module(mod), attr).name == "kernels"


def test_every_kernel_compiles_for_sm90():
    """The GPU-only paths (bf16/fp8 MMA, tf32x3, pipelining, shared memory) built for Hopper by
    Triton's compiler without a device (kernels/compile_check.py), in a child without the
    interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONWARNINGS="ignore", TRITON_DEFAULT_FP_FUSION="1")
    proc = subprocess.run([sys.executable, "-m", "forensics.kernels.compile_check", "--json"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    rows = json.loads(proc.stdout)
    assert len(rows) >= 20
    bad = [(r["kernel"], r["error"][:300]) for r in rows if not r["ok"]]
    assert not bad, bad
    assert all(r["shared_bytes"] <= 228 * 1024 for r in rows)          # H100/H200 per-block limit
    mma = {r["kernel"] for r in rows if r["mma"]}
    assert {"fp8 large", "w4a16 gemm BM=256 swapped", "w4a16 gemm BM=16", "grouped swiglu (sonic)",
            "nsa attention D=128 BLOCK_M=64 TMA", "kda scan", "w4a16 gemm BM=256 swapped fp32 dequant"} <= mma
    # the build structure the measured defaults rely on (Triton's compiler in CI, not the H200's 3.6):
    by = {r["kernel"]: r for r in rows}
    sw = by["w4a16 gemm BM=256 swapped"]      # the dequantized weight is wgmma's register operand
    assert sw["wgmma"] >= 1 and sw["wgmma_register_a"] == sw["wgmma"], sw
    for v in ("fp32 dequant", "no tail split"):    # the variants feed wgmma from registers too
        r = by[f"w4a16 gemm BM=256 swapped {v}"]
        assert r["wgmma_register_a"] == r["wgmma"] >= 1 and r["stack_bytes"] in (0, None), r
    assert by["w4a16 gemm BM=64"]["wgmma_register_a"] == 0          # unswapped: weight tile via shared memory
    for name in ("nsa attention D=64 BLOCK_M=64", "nsa attention D=128 BLOCK_M=64 TMA"):   # p @ v from registers
        assert by[name]["wgmma_register_a"] >= 1 and by[name]["stack_bytes"] == 0, by[name]
    pg = by["paged decode D=128 split 16-token tiles 1 warps"]     # K/V prefetched 2 tiles deep
    assert any(b.startswith("2x16x128") for b in pg["pipeline_buffers"]), pg
    assert all(r["registers"] is None or r["registers"] <= 255 for r in rows)


def test_w4a16_gemm_and_gemv_paths_match_oracle():
    """Both kernels (GEMM for M >= 2, GEMV for M == 1, each forced on the other's shapes too) against the
    oracle and the deck reference: M not a multiple of BLOCK_M, N not a multiple of BLOCK_N, K a
    multiple of the group that splits unevenly, split-K forced (the counters must be re-armed),
    bf16 and fp32 activations (Kimi)."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    from forensics.kernels import registry
    from forensics.kernels.triton import w4a16
    spec = registry.get("07_w4a16_gemm")
    deq = spec.reference_module().dequantize_w4
    for sh in (dict(M=1, N=40, K=256), dict(M=3, N=200, K=384), dict(M=17, N=80, K=384)):
        m = spec.build_reference(sh)
        (x,) = spec.make_inputs(sh, 1)
        ref, orc = spec.reference_forward(m, [x]), spec.oracle(m, [x])
        want = x.double() @ deq(m.w_q, m.scales, m.zeros, m.group_size).double()
        for kernel in ("auto", "gemm", "gemv"):
            for split in (None, 2, 3):
                y = w4a16.w4a16_matmul(x, m.w_q, m.scales, m.zeros, m.group_size, kernel=kernel, split=split)
                assert y.shape == ref.shape and y.dtype == torch.bfloat16
                assert spec.compare(ref, y)["ok"] and spec.compare(orc, y, dtype=torch.bfloat16)["ok"], (sh, kernel, split)
                yf = w4a16.w4a16_matmul(x.float(), m.w_q, m.scales, m.zeros, m.group_size, kernel=kernel, split=split,
                                        out_dtype=torch.float32)
                # ~2e-3: the interpreter's fp32->bf16 weight rounding in the GEMM (docs/kernels.md, Triton notes)
                assert float((yf.double() - want).abs().max()) < 1e-2, (sh, kernel, split)
                assert int(w4a16._WS[x.device][1].abs().sum()) == 0          # split-K counters re-armed
        for split in (None, 3):    # the swapped-operand GEMM (the GPU default past M = 64)
            ys = w4a16.w4a16_matmul(x, m.w_q, m.scales, m.zeros, m.group_size, kernel="gemm", split=split,
                                    config=dict(gemm=(16, 64, 64, 4, 1, True)))
            assert spec.compare(ref, ys)["ok"] and spec.compare(orc, ys, dtype=torch.bfloat16)["ok"], (sh, split)
            yf = w4a16.w4a16_matmul(x.float(), m.w_q, m.scales, m.zeros, m.group_size, kernel="gemm", split=split,
                                    out_dtype=torch.float32, config=dict(gemm=(32, 64, 128, 4, 1, True)))
            assert float((yf.double() - want).abs().max()) < 1e-2, (sh, split)
            assert int(w4a16._WS[x.device][1].abs().sum()) == 0
        bad = y.clone()
        bad.view(-1)[7] += 0.5
        assert not spec.compare(ref, bad)["ok"]
    yv = w4a16.w4a16_matmul(x[0], m.w_q, m.scales, m.zeros, m.group_size)   # 1-D x
    assert yv.shape == (sh["N"],) and torch.equal(yv, w4a16.w4a16_matmul(x[:1], m.w_q, m.scales, m.zeros, m.group_size)[0])


def test_fp8_gemm_unaligned_k_and_library_baseline():
    """Both deck versions with K not a multiple of 16 (zero-padded per call, K=4127-style), ragged M
    and N; the _scaled_mm library baseline pads K the same way (it rejects K % 16 != 0)."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    from forensics.kernels import registry, verify
    from forensics.kernels.triton import fp8_gemm
    for ver, fwd in (("2026-06-14", fp8_gemm.forward), ("pre-2026-06-14", fp8_gemm.forward_bf16_weight)):
        spec = registry.get("01_fp8_gemm", ver)
        for sh in (dict(M=20, N=48, K=72 + 7), dict(M=3, N=40, K=33), dict(M=17, N=24, K=64)):
            m = spec.build_reference(sh)
            (x,) = spec.make_inputs(sh, 1)
            ref, orc = spec.reference_forward(m, [x]), spec.oracle(m, [x])
            w0 = m.weight.clone()
            y = fwd(m, [x])
            assert y.shape == ref.shape and y.dtype == torch.bfloat16
            assert spec.compare(ref, y)["ok"] and spec.compare(orc, y, dtype=torch.bfloat16)["ok"], (ver, sh)
            assert torch.equal(m.weight, w0)                         # padding copies, never edits the weight
            if ver == "2026-06-14":
                label, fn = verify._baseline(spec, m, [x], torch.device("cpu"))
                assert ("padded" in label) == (sh["K"] % 16 != 0)
                try:
                    b = fn()
                except (RuntimeError, NotImplementedError) as exc:   # no CPU _scaled_mm in this torch
                    assert "scaled_mm" in str(exc) or "not implemented" in str(exc).lower(), exc
                    continue
                assert spec.compare(ref, b)["ok"], (sh, label)


def test_w4a16_tail_split_matches_oracle():
    """The GEMM's tail split (config tail_slots): with more tiles than program slots but fewer than
    twice, the first 2T - slots tiles run whole and the rest in two K halves summed through the
    workspace; swapped and unswapped tiles, K halves that do not split evenly in steps, a second
    call (the counters re-arm).  Slots outside (T, 2T) leave the plain launch."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from forensics.kernels import registry
    from forensics.kernels.triton import w4a16
    spec = registry.get("07_w4a16_gemm")
    sh = dict(M=17, N=200, K=384)                  # 16-row x 64-column tiles: 2 x 4 = 8 tiles
    m = spec.build_reference(sh)
    (x,) = spec.make_inputs(sh, 1)
    ref, orc = spec.reference_forward(m, [x]), spec.oracle(m, [x])
    launched = []
    real = w4a16._w4a16_gemm_kernel

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **kw):
                launched.append((grid, kw["TAIL"], kw["N_FULL"]))
                return real[grid](*args, **kw)
            return launch
    w4a16._w4a16_gemm_kernel = Spy()
    try:
        for swap in (False, True):
            for slots, want in ((11, ((11, 1, 1), 2, 5)), (9, ((9, 1, 1), 2, 7)), (16, ((4, 2, 1), 0, 0)),
                                (0, ((4, 2, 1), 0, 0))):
                for _ in range(2):
                    y = w4a16.w4a16_matmul(x, m.w_q, m.scales, m.zeros, m.group_size, kernel="gemm",
                                           config=dict(gemm=(16, 64, 64, 4, 1, swap), tail_slots=slots))
                    assert launched[-1] == want, (swap, slots, launched[-1])
                    assert spec.compare(ref, y)["ok"] and spec.compare(orc, y, dtype=torch.bfloat16)["ok"], (swap, slots)
                    assert int(w4a16._WS[x.device][1].abs().sum()) == 0
    finally:
        w4a16._w4a16_gemm_kernel = real


def test_w4a16_experts_one_launch_matches_per_expert_calls():
    """The batched-expert GEMV (the Kimi MoE's selected experts in one launch, indices read on the
    device) against one w4a16_matmul per expert: the same x for all or one row each, a repeated
    expert, split-K with per-expert counters that re-arm."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from forensics.kernels.triton import w4a16
    from forensics.kernels.ref.mega_02_kimi import quantize_w4
    gen = torch.Generator().manual_seed(11)
    E, K, N, group = 5, 256, 96, 128
    w_q, s, z = quantize_w4(torch.randn(E, K, N, generator=gen) * 0.05, group)
    idx = torch.tensor([3, 0, 3, 4])
    for x in (torch.randn(K, generator=gen).bfloat16(), torch.randn(len(idx), K, generator=gen)):
        want = torch.stack([w4a16.w4a16_matmul(x if x.dim() == 1 else x[j], w_q[e], s[e], z[e], group,
                                               out_dtype=torch.float32) for j, e in enumerate(idx.tolist())])
        for split in (None, 2):
            got = w4a16.w4a16_experts(x, w_q, s, z, idx, group, split=split)
            assert got.shape == (len(idx), N) and got.dtype == torch.float32
            assert float((got - want).abs().max()) <= 1e-4 * float(want.abs().max()), (x.dim(), split)
            assert int(w4a16._WS[x.device][1].abs().sum()) == 0
    assert not torch.equal(got[0], got[1])


def test_w4a16_split_k_tail_stops_at_k():
    """Regression (mega 02 Kimi, non-finite output on the H200): K=2304 (the Kimi hidden size) on
    132 SMs splits K into 4 x 640, so the last split ran two 128-row blocks past K and loaded
    scales/zeros rows K/group and K/group+1, which do not exist.  The masked weights and x are 0,
    but 0 * a NaN/inf read past the scales is NaN.  The scales here sit in a buffer whose rows
    past K/group are NaN, and the H200's split plan (4 x 640) is forced under the interpreter."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    from forensics.kernels.ref.mega_02_kimi import dequant_w4, quantize_w4
    from forensics.kernels.triton import w4a16
    K, N, group = 2304, 256, 128
    gen = torch.Generator().manual_seed(0)
    w_q, s, z = quantize_w4(torch.randn(K, N, generator=gen) * 0.02, group)
    pad = torch.full((2, N), float("nan"), dtype=torch.bfloat16)
    s_buf, z_buf = torch.cat([s, pad]), torch.cat([z, pad])
    s, z = s_buf[: K // group], z_buf[: K // group]       # views: the NaN rows follow in memory
    w = dequant_w4(w_q, s, z, group).float()
    for M, x_dtype, kernel in ((1, torch.bfloat16, "gemv"), (1, torch.float32, "gemv"), (8, torch.bfloat16, "gemm")):
        x = (0.5 * torch.randn(M, K, generator=gen)).to(x_dtype)
        y = w4a16.w4a16_matmul(x, w_q, s, z, group, out_dtype=torch.float32, kernel=kernel, split=4)
        assert bool(torch.isfinite(y).all()), (M, x_dtype, kernel)
        assert float((y - x.float() @ w).abs().max()) < 1e-2, (M, x_dtype, kernel)


def test_topk_k1_single_pass_ties_and_chunks():
    """k=1 takes the one-launch row argmax: first index on ties (also across its 4096-column
    chunks), rows of -inf, the cluster property input, against the oracle's stable sort."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    from forensics.kernels import registry
    from forensics.kernels.triton.topk import topk
    spec = registry.get("05_topk_bitonic")
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(5, 9000, generator=gen)
    x[0, 4100] = x[0, 8999] = x[0, 10] = 9.0          # tie across chunks: index 10
    x[1, 5000] = x[1, 4097] = 9.0                     # tie inside the second chunk: 4097
    x[2] = float("-inf")
    x[3, :] = 0.5
    (c,) = spec.property_cases[0].mutate(spec, dict(batch=2, n=4096, k=1), [torch.zeros(2, 4096)])
    for inp in (x, c, x[:, :3]):
        m = spec.build_reference(dict(batch=inp.shape[0], n=inp.shape[1], k=1))
        v, i = topk(inp, 1)
        ov, oi = spec.oracle(m, [inp])
        assert torch.equal(i, oi) and torch.equal(v, ov), (i, oi)
        assert i.dtype == torch.int64 and v.dtype == torch.float32


def test_glm_decode_path_matches_oracle():
    """cuda 01 at decode sizes (T <= DECODE_MAX_T: the two GEMV-style launches): T=1 and a T=3 with
    two shared experts and dims that leave partial blocks, against the oracle and the reference,
    weights amplified so that the outputs are O(1)-O(10); a perturbed output must fail."""
    import os
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    from forensics.kernels import registry
    from forensics.kernels.triton import glm_moe
    spec = registry.get("01_glm52_fused_moe")
    for sh in (dict(T=1, E=16, top_k=8, n_shared=1, H=64, I=48), dict(T=3, E=16, top_k=8, n_shared=2, H=300, I=40)):
        assert sh["T"] <= glm_moe.DECODE_MAX_T
        m = spec.build_reference(sh)
        with torch.no_grad():
            for p in m.parameters():
                p.mul_(8.0)
        x = spec.make_inputs(sh, 42)
        tri = glm_moe.forward(m, x)
        assert spec.compare(spec.oracle(m, x), tri, inputs=x, dtype=torch.bfloat16)["ok"]
        ref = spec.reference_forward(m, x)
        assert spec.compare(ref, tri, inputs=x)["ok"]
        bad = tri.clone()
        bad[0, 5] += 1.0 + bad[0, 5].abs()
        assert not spec.compare(ref, bad, inputs=x)["ok"]


def _paged_dense(q, rows, lens):
    """fp64 decode attention from explicit per-token (K, V) rows: rows(b, t) -> (k (Hkv, D), v (Hkv, D))."""
    B, H, D = q.shape
    out = torch.empty(B, H, D, dtype=torch.float64)
    for b in range(B):
        ks, vs = zip(*(rows(b, t) for t in range(int(lens[b]))))
        k, v = torch.stack(ks).double(), torch.stack(vs).double()         # (L, Hkv, D)
        G = H // k.shape[1]
        for h in range(H):
            p = torch.softmax(k[:, h // G] @ q[b, h].double() / math.sqrt(D), 0)
            out[b, h] = p @ v[:, h // G]
    return out


def test_paged_decode_edge_cases():
    """Lengths off the page and tile grid, length 1, GQA groups 1/4/8, page sizes 8/16/32, a
    one-page table (the contiguous path), and 1-3 splits (the in-kernel merge); a second call
    gives the same result (the split counters re-arm themselves).  The TMA path (tma=True) too,
    with NaN in the unused slots of the last page: its loads are not masked, so V must be zeroed there."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from forensics.kernels.triton import paged_attention as pa
    gen = torch.Generator().manual_seed(3)
    for B, H, Hkv, D, P, lens in ((3, 8, 2, 16, 16, [45, 1, 17]), (2, 8, 8, 32, 16, [100, 33]),
                                  (2, 8, 1, 16, 8, [70, 9]), (1, 4, 4, 16, 16, [5]), (2, 16, 2, 16, 32, [64, 200])):
        maxb = -(-max(lens) // P)
        nblk = B * maxb + 3
        q = (torch.randn(B, H, D, generator=gen) * 0.5).bfloat16()
        kv = (torch.randn(nblk, P, Hkv, 2 * D, generator=gen) * 0.5).bfloat16()
        bt = torch.randperm(nblk, generator=gen)[:B * maxb].reshape(B, maxb).int()
        lt = torch.tensor(lens, dtype=torch.int32)
        for b, L in enumerate(lens):              # poison the slots past each length in its last page
            if L % P:
                kv[bt[b, L // P], L % P:] = float("nan")
        want = _paged_dense(q, lambda b, t: (kv[bt[b, t // P], t % P, :, :D], kv[bt[b, t // P], t % P, :, D:]), lt)
        for tma in (False, False, True, True):
            got = pa.paged_decode(q, kv, bt, lt, tma=tma)
            assert got.dtype == torch.bfloat16 and float((got.double() - want).abs().max()) < 4e-3, (B, H, Hkv, D, P, lens, tma)
        assert all(int(c.abs().sum()) == 0 for _, _, c in pa._SCRATCH.values())


def test_decode_attention_contiguous_cache_device_lens():
    """megaqwen's call: fp32 query and output, a per-layer (Hkv, max_seq, D) cache viewed as one
    page, seq_lens on the device and a fixed max_len above it (extra splits see no tokens)."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from forensics.kernels.triton.paged_attention import decode_attention
    gen = torch.Generator().manual_seed(4)
    Hkv, max_seq, D, H = 2, 150, 32, 8
    kc = (torch.randn(Hkv, max_seq, D, generator=gen)).bfloat16()
    vc = (torch.randn(Hkv, max_seq, D, generator=gen)).bfloat16()
    q = torch.randn(1, H, D, generator=gen)
    table = torch.zeros(1, 1, dtype=torch.int32)
    for L in (1, 37, 97):
        lens = torch.tensor([L], dtype=torch.int32)
        want = _paged_dense(q, lambda b, t: (kc[:, t], vc[:, t]), lens)
        for max_len in (L, max_seq):
            got = decode_attention(q, kc, vc, 0, kc.stride(1), kc.stride(0), table, lens, max_seq, Hkv, max_len=max_len,
                                   out_dtype=torch.float32)
            assert got.dtype == torch.float32 and float((got.double() - want).abs().max()) < 1e-5, (L, max_len)


def test_nsa_edge_shapes_against_oracle():
    """S below one block, S off the 64-block and 128-row tile grid, D=32, and S > 1024 where the
    top-8 selection drops blocks for most queries; 128- and 64-row query tiles."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from forensics.kernels.triton.nsa import nsa_forward
    spec = registry.get("02_deepseek_nsa")
    ref = spec.reference_module(dict(B=1, H=1, S=64, D=16))
    gen = torch.Generator().manual_seed(5)
    for B, H, S, D in ((2, 1, 50, 16), (1, 1, 600, 16), (1, 2, 700, 32), (1, 1, 1100, 16)):
        q, k, v = (torch.randn(B, H, S, D, generator=gen).bfloat16() for _ in range(3))
        want = ref.nsa_attention(q, k, v, dtype=torch.float64).float()
        for config, tma in ((None, False), ((64, 4, 1), False), (None, True), ((64, 4, 1), True)):
            # the launcher's tiles, other tiles; pointer and TMA loads
            got = nsa_forward(q, k, v, config=config, tma=tma)
            res = spec.compare(want, got, dtype=torch.bfloat16)
            assert got.dtype == torch.bfloat16 and res["ok"] and res["max_abs"] < 0.03, (S, D, config, tma, res["msg"])


def test_verify_checks_each_timing_variant_before_timing_it(monkeypatch):
    """forensics.kernels.verify times the VARIANTS of a Triton module beside its default as candidate
    defaults: each variant's output is compared with the reference first (a wrong one is
    reported, not silently timed), and one that raises is recorded without losing the row."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from forensics.kernels import verify
    from forensics.kernels.selftest import TINY
    from forensics.kernels.triton import w4a16
    spec = registry.get("07_w4a16_gemm")
    good = next(iter(w4a16.VARIANTS.values()))

    def wrong(model, inputs):
        return good(model, inputs) + 1.0

    def broken(model, inputs):
        raise RuntimeError("PassManager::run failed")      # a launch this Triton cannot compile
    monkeypatch.setattr(w4a16, "VARIANTS", {"good": good, "wrong": wrong, "broken": broken})
    row = verify.verify_shape(spec, TINY[spec.name], "cpu", verify.Timer("cpu", iters=1, warmup=0), do_oracle=False)
    t = row["timing"]
    assert t["triton_good"]["vs_reference_ok"] is True and "ms_median" in t["triton_good"]
    assert t["triton_wrong"]["vs_reference_ok"] is False and t["triton_wrong"]["vs_reference_max_abs"] >= 1.0
    assert t["triton_broken"]["error"].startswith("RuntimeError") and "ms_median" in t["library"]
    assert row["triton_vs_reference"]["ok"]
    # M == 1 runs the GEMV: the GEMM-tile variants are not timed there (VARIANT_APPLIES)
    row1 = verify.verify_shape(spec, dict(TINY[spec.name], M=1), "cpu", verify.Timer("cpu", iters=1, warmup=0),
                               do_oracle=False)
    assert "triton" in row1["timing"] and not {"triton_good", "triton_wrong"} & set(row1["timing"])
