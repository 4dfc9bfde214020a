"""Verify and benchmark the bundled references on a GPU (and, for tests, on the CPU).

    python -m forensics.kernels.verify --out OUT.json [--problems P ...] [--quick] [--budget-s 500]

For every problem (each deck version) and every canonical shape:
  * Triton reference vs oracle and vs the deck reference (compare() statistics);
  * Triton reference timed beside the best library operation for the same work where one exists
    (torch._scaled_mm, torch.topk, SDPA on the gathered pages, bf16 matmul of the dequantized
    weights, grouped bf16 matmuls), CUDA events around each call with a 128 MiB zero_() L2 flush
    between calls, medians;
and once per problem the wall time of the reference side of a full check (every check shape x
seed x stress case, plus the property cases: model build, input generation and reference
outputs, no solution), with the deck reference path and, where one exists, the Triton path.

Only torch, triton, numpy and the standard library are imported (the GPU machine has no duckdb,
orjson or forensics.store).  One problem failing never stops the others: its error is recorded.
`--device cpu` runs the same flow on tiny shapes under TRITON_INTERPRET=1 with wall-clock timing
(used by the tests; numbers are meaningless there).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
import traceback
from contextlib import nullcontext

import torch

RESULT_KEYS = ("ok", "max_abs", "max_rel", "n_bad", "n_total", "worst_index", "atol", "rtol", "rel_l2", "msg")


def _summ(res: dict) -> dict:
    out = {k: res.get(k) for k in RESULT_KEYS}
    if isinstance(out.get("msg"), str):
        out["msg"] = out["msg"][:300]
    return out


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _sync_quiet(device):
    """Sync after a failed call; an error the sync raises is the failure already recorded."""
    try:
        _sync(device)
    except Exception:  # noqa: BLE001
        pass


# ------------------------------------------------------------------------------- timing
class Timer:
    """A5 timing: warmup calls (the first also sizes the trial count), then per trial an L2 flush (zero_() of 128 MiB), a sync, CUDA events
    around the call; the median in ms.  That counts the host's launch time as the grader does; on a GPU
    `device_time` then times the device's share alone (ms_device_median).  On the CPU: perf_counter
    around each call."""

    #: an op whose first (warm-up) call takes longer than this gets iters // 3 trials (>= 5)
    slow_ms = 20.0

    def __init__(self, device, iters=30, warmup=10, device_iters=10):
        self.device = torch.device(device)
        self.iters, self.warmup, self.device_iters = iters, max(1, warmup), device_iters
        self.flush = (torch.empty(128 * 1024 * 1024 // 4, dtype=torch.float32, device=self.device)
                      if self.device.type == "cuda" else None)

    def __call__(self, fn) -> dict:
        with torch.no_grad():
            t0 = time.perf_counter()
            fn()
            _sync(self.device)
            first_ms = (time.perf_counter() - t0) * 1e3
            iters, warmup = self.iters, self.warmup
            if self.device.type == "cuda" and first_ms > self.slow_ms:   # slow op: fewer trials (budget)
                iters, warmup = max(5, iters // 3), min(warmup, 2)
            for _ in range(warmup - 1):
                fn()
            _sync(self.device)
            times = []
            for _ in range(iters):
                if self.flush is not None:
                    self.flush.zero_()
                    torch.cuda.synchronize()
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    fn()
                    b.record()
                    torch.cuda.synchronize()
                    times.append(a.elapsed_time(b))
                else:
                    t0 = time.perf_counter()
                    fn()
                    times.append((time.perf_counter() - t0) * 1e3)
            res = dict(ms_median=statistics.median(times), ms_min=min(times), n=len(times))
            if self.flush is not None and self.device_iters:
                res.update(self.device_time(fn, max(3, min(self.device_iters, iters)), res["ms_median"]))
        return res

    def device_time(self, fn, iters, host_ms) -> dict:
        """The same flushed call with the host's launch time hidden: after the flush the stream
        first runs a spin kernel (torch.cuda._sleep) long enough for the host to enqueue the start
        event, every launch of `fn` and the end event behind it, so the events time only the
        device's work (its kernels and the gaps between them).  ms_median - ms_device_median is
        the host's share of the grader-style time.  A trial whose host enqueue outlasted the spin
        (the device idled inside the interval) is left out of the median and counted in
        n_device_uncovered; ms_device_ok is False when no trial was covered (the median is then
        over all of them)."""
        spin_ms = min(max(2.0 * host_ms, 0.5), 50.0)
        cycles = int(spin_ms * 1e-3 * self._clock_hz())
        covered, uncovered = [], []
        for _ in range(iters):
            self.flush.zero_()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            torch.cuda._sleep(cycles)
            a.record()
            fn()
            b.record()
            host = (time.perf_counter() - t0) * 1e3
            torch.cuda.synchronize()
            (covered if host < spin_ms else uncovered).append(a.elapsed_time(b))
        return dict(ms_device_median=statistics.median(covered or uncovered), ms_device_ok=bool(covered),
                    n_device=len(covered), n_device_uncovered=len(uncovered))

    def _clock_hz(self) -> float:
        """SM clock for the spin length (cycles); 2 GHz where torch does not report it."""
        khz = getattr(torch.cuda.get_device_properties(self.device), "clock_rate", 0) or 2_000_000
        return khz * 1e3

    def pair(self, fns: dict) -> dict:
        """Several implementations of the same op timed back to back (name -> zero-arg callable)."""
        return {k: self(f) for k, f in fns.items()}


# ------------------------------------------------------------------- library baselines
def _baseline(spec, model, inputs, device):
    """(label, zero-arg callable doing the same work with the best library op) or (label, None)."""
    name = spec.name
    if name == "01_fp8_gemm":
        (x,) = inputs
        if spec.deck_version.startswith("pre"):
            w = model.weight
            return "bf16 matmul x.bf16 @ w.T", lambda: x.to(torch.bfloat16) @ w.T
        w, s = model.weight, model.weight_scale
        one = torch.ones(x.shape[0], 1, dtype=torch.float32, device=x.device)
        sb = s.view(1, -1).contiguous()
        K = x.shape[1]
        if K % 16 == 0:
            wt = w.t()

            def scaled():
                return torch._scaled_mm(x, wt, scale_a=one, scale_b=sb, out_dtype=torch.bfloat16)
            return "torch._scaled_mm rowwise (fp8 MMA, fp32 accumulate)", scaled
        # _scaled_mm needs K % 16 == 0: zero-pad K of both operands (as bytes: 0 is +0.0 in e4m3)
        # inside the timed op, as a real solution would
        from .triton.fp8_gemm import pad_k
        kp = K + (-K % 16)

        def scaled_padded():
            return torch._scaled_mm(pad_k(x, kp), pad_k(w, kp).t(), scale_a=one, scale_b=sb, out_dtype=torch.bfloat16)
        return "torch._scaled_mm rowwise, K zero-padded to a multiple of 16 (padding timed)", scaled_padded
    if name == "05_topk_bitonic":
        (x,) = inputs
        return "torch.topk", lambda: torch.topk(x, model.k, dim=-1)
    if name == "03_paged_attention":
        q, kv, bt, lens = inputs
        B, H, D = q.shape
        P, Hkv = kv.shape[1], kv.shape[2]
        pages = bt.shape[1]
        dense = kv[bt.long()].reshape(B, pages * P, Hkv, 2 * D)
        L = int(lens.max())
        k = dense[:, :L, :, :D].transpose(1, 2).contiguous()
        v = dense[:, :L, :, D:].transpose(1, 2).contiguous()
        qq = q[:, :, None, :]
        import torch.nn.functional as F
        return ("SDPA (flash) on pre-gathered contiguous pages, enable_gqa (gather not timed)",
                lambda: F.scaled_dot_product_attention(qq, k, v, enable_gqa=True))
    if name == "07_w4a16_gemm":
        (x,) = inputs
        mod = spec.reference_module()
        w = mod.dequantize_w4(model.w_q, model.scales, model.zeros, model.group_size)
        return "bf16 matmul of the pre-dequantized weight (dequant not timed)", lambda: x @ w
    if name == "06_sonic_moe_swiglu":
        h, off = inputs
        wg, wu = model.W_gate, model.W_up
        ends = off[1:].to(torch.int32)
        import torch.nn.functional as F
        if hasattr(torch, "_grouped_mm") and device.type == "cuda":
            def gm():
                return F.silu(torch._grouped_mm(h, wg, offs=ends)) * torch._grouped_mm(h, wu, offs=ends)
            try:
                gm()
                return "torch._grouped_mm x2 + silu*mul", gm
            except Exception:  # noqa: BLE001 - fall back to the per-expert loop
                pass
        offs = off.tolist()

        def loop():
            out = torch.empty(h.shape[0], wg.shape[2], dtype=torch.bfloat16, device=h.device)
            for e in range(wg.shape[0]):
                a, b = offs[e], offs[e + 1]
                if b > a:
                    out[a:b] = F.silu(h[a:b] @ wg[e]) * (h[a:b] @ wu[e])
            return out
        return "per-expert bf16 matmuls + silu*mul", loop
    if name == "01_glm52_fused_moe":
        x, ids, w = inputs
        import torch.nn.functional as F
        E, I = model.w1_routed.shape[0], model.I
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=E)
        ends = counts.cumsum(0).to(torch.int32)
        xs = x[order // ids.shape[1]]
        w1t = model.w1_routed.transpose(1, 2)      # (E, H, 2I)
        w2t = model.w2_routed.transpose(1, 2)      # (E, I, H)
        if hasattr(torch, "_grouped_mm") and device.type == "cuda":
            def gm():
                hh = torch._grouped_mm(xs, w1t, offs=ends)
                return torch._grouped_mm(F.silu(hh[:, :I]) * hh[:, I:], w2t, offs=ends)
            try:
                gm()
                return "torch._grouped_mm routed GEMMs (bf16; no shared expert, no combine)", gm
            except Exception:  # noqa: BLE001
                pass
        cl = counts.tolist()

        def loop():
            start, outs = 0, []
            for e in range(E):
                n = cl[e]
                if n:
                    hh = xs[start:start + n] @ w1t[e]
                    outs.append((F.silu(hh[:, :I]) * hh[:, I:]) @ w2t[e])
                start += n
            return outs
        return "per-expert bf16 matmuls (routed only)", loop
    if name == "02_deepseek_nsa":
        q, k, v = inputs
        import torch.nn.functional as F
        return ("dense causal SDPA (more work than NSA: an upper reference, not the same op)",
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    if name == "02_kda_cutlass":
        return "deck reference (torch chunked form; no library KDA on the machine)", lambda: model(*inputs)
    if spec.baseline_fn is not None:   # mega 02: the deck's own denominator, one step on the same state
        return ("the deck's baseline.py step, rebuilt (bf16 dequantize-then-matmul)",
                lambda: spec.baseline_fn(spec, model, inputs))
    return "none", None


def _triton_variants(spec, model, inputs):
    """Other Triton kernels for the same op (the previous kernel kept beside a new one that has
    not been timed on a GPU yet), timed next to `triton`: (label, zero-arg callable).  A module's
    VARIANT_APPLIES(model, inputs) -> bool, where defined, leaves out the shapes on which its
    variants would only rerun the default (w4a16's GEMM tiles at M == 1, which runs the GEMV)."""
    mod_name = getattr(spec.triton_fn, "triton_module", None)
    if not mod_name:
        return []
    import importlib
    mod = importlib.import_module(mod_name)
    variants = getattr(mod, "VARIANTS", None)
    applies = getattr(mod, "VARIANT_APPLIES", None)
    if not variants or (applies is not None and not applies(model, inputs)):
        return []
    return [(label, (lambda f=f: f(model, inputs))) for label, f in variants.items()]


# ---------------------------------------------------------------------- full-check timing
def _free():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _check_plan(spec, shapes=None, seeds=None):
    shapes = shapes if shapes is not None else spec.check_shapes
    seeds = seeds if seeds is not None else spec.seeds
    plan = [(s, tuple(seeds)) for s in shapes]
    if spec.name == "03_megaqwen_decode":
        lc = spec.stateful["long_context_check"]
        plan.append((dict(ctx_len=lc["ctx_len"], n_decode=lc["n_decode"]), (lc["seed"],)))
    return plan


def full_check_time(spec, device, use_triton=False, shapes=None, seeds=None, exact=None, warm=True) -> dict:
    """Wall time of the reference side of a full check: per check shape build the reference model,
    then per seed re-initialise it where the check does (cuda 03/04), generate inputs and compute
    the reference output of every stress case; then the property cases on their shape.  A (shape,
    seed) the plan lists again (cuda 01 caps five of its six check shapes to the same T=256) has
    the same weights, inputs and outputs: computed once, counted in n_reused.

    exact: None -> the registry defaults for `device` (on a GPU: weights, per-seed re-init and
    inputs drawn on the device; on the CPU: the deck's exact CPU draws); True -> exact
    everywhere.  Property-case inputs are always the exact ones (`property_inputs`).
    warm: before the first timed forward of each new shape (stateful problems: of the first one)
    one untimed nominal forward runs, so Triton's JIT compile and library first-call set-up are
    not in forward_s; its wall time is reported as warm_s (not in total_s)."""
    fwd = spec.triton_forward if use_triton else spec.reference_forward
    t_build = t_inputs = t_fwd = t_warm = 0.0
    n_outputs = 0
    modes = set()
    warmed = set()
    t_all = time.perf_counter()
    model, model_args = None, None
    exact_init = bool(exact) if exact is not None else None

    def warm_once(key, x):
        nonlocal t_warm
        if not warm or key in warmed or (spec.stateful and warmed):
            return
        warmed.add(key)
        t0 = time.perf_counter()
        fwd(model, x)
        _sync(device)
        t_warm += time.perf_counter() - t0

    done = set()       # (shape, seed) already computed: the same weights, inputs and outputs again
    n_reused = 0
    for shape, sd in _check_plan(spec, shapes, seeds):
        sk = repr(sorted(shape.items()))
        if all((sk, seed) in done for seed in sd):
            n_reused += len(sd) * len(spec.stress_cases)   # e.g. cuda 01: five shapes capped to T=256
            continue
        t0 = time.perf_counter()
        args = repr(spec.init_args(shape))
        if model is None or args != model_args:       # check.py builds per shape; same weights reused here
            # dropping the reference frees the old model's memory to the caching allocator, as in
            # check.py; no gc.collect() here (0.05-0.1 s in a large process, per shape)
            model = None
            model = spec.build_reference(shape, device, exact_init=exact_init)
            model_args = args
        _sync(device)
        t_build += time.perf_counter() - t0
        for seed in sd:
            if (sk, seed) in done:
                n_reused += len(spec.stress_cases)
                continue
            done.add((sk, seed))
            t0 = time.perf_counter()
            spec.reinit(model, seed, exact=exact)
            _sync(device)
            t_build += time.perf_counter() - t0
            t0 = time.perf_counter()
            info = {}
            inputs = spec.make_inputs(shape, seed, device, exact=exact, info=info)
            modes.add(info.get("mode"))
            _sync(device)
            t_inputs += time.perf_counter() - t0
            warm_once(repr(sorted(shape.items())), inputs)
            t0 = time.perf_counter()
            for case in spec.stress_cases:
                with spec.apply_stress(model, None, inputs, case) as x:
                    fwd(model, x)
                    n_outputs += 1
            if spec.name == "04_grid_mingru_sps":
                from .problems import cuda_04_mingru as mg
                mod = spec.reference_module()
                mod.env_step(*mg.env_step_inputs(seed, device))
                mod.run(128, 8, seed, model=model)
                n_outputs += 2
            _sync(device)
            t_fwd += time.perf_counter() - t0
    model = None
    _free()
    for pc in spec.property_cases:
        shape = spec.shapes[pc.shape_index]
        t0 = time.perf_counter()
        model = spec.build_reference(shape, device, exact_init=exact_init)
        _sync(device)
        t_build += time.perf_counter() - t0
        t0 = time.perf_counter()
        _, x = spec.property_inputs(pc, device)
        modes.add("exact_cpu (property case)")
        _sync(device)
        t_inputs += time.perf_counter() - t0
        warm_once(("property", pc.shape_index), x)
        t0 = time.perf_counter()
        fwd(model, x)
        _sync(device)
        t_fwd += time.perf_counter() - t0
        n_outputs += 1
        del model
        _free()
    total = time.perf_counter() - t_all - t_warm
    dev = torch.device(device)
    init_mode = ("exact_cpu" if (exact or (exact is None and dev.type == "cpu"))
                 else "device" + (" (problem build_fn)" if spec.build_fn else ""))
    return dict(path="triton" if use_triton else "reference", total_s=round(total, 3),
                build_s=round(t_build, 3), inputs_s=round(t_inputs, 3), forward_s=round(t_fwd, 3),
                warm_s=round(t_warm, 3), n_outputs=n_outputs, n_reused=n_reused, under_2s=total < 2.0,
                init_mode=init_mode, inputs_modes=sorted(m for m in modes if m),
                excludes="warm_s: one untimed nominal forward per new shape (Triton JIT compile, cuBLAS/"
                         "library first-call set-up) before the timed ones" if warm else "nothing (no warm pass)")


def inputs_time(spec, device, exact) -> dict:
    """Input generation alone for every (check shape, seed) of a full check, in one mode: how
    much of inputs_s the on-device option saves (property-case inputs are exact either way)."""
    t0 = time.perf_counter()
    modes = set()
    n = 0
    for shape, sd in _check_plan(spec):
        for seed in sd:
            info = {}
            x = spec.make_inputs(shape, seed, device, exact=exact, info=info)
            modes.add(info.get("mode"))
            _sync(device)
            del x
            n += 1
    _free()
    return dict(exact=exact, inputs_s=round(time.perf_counter() - t0, 3), n_inputs=n, modes=sorted(m for m in modes if m))


# ------------------------------------------------------------------------------- driver
def _out_dtype(ref):
    if isinstance(ref, (tuple, list)):
        return ref[0].dtype if isinstance(ref[0], torch.Tensor) else None
    return ref.dtype if isinstance(ref, torch.Tensor) else None


def _equal(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b


def _leaves(x) -> list:
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in _leaves(x[k])]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _leaves(v)]
    return [x]


def _vs_deck(spec, deck, ref, inputs) -> dict:
    """reference_forward against the deck's own call: bitwise equal, or, where the problem states a
    `deck_tolerance` (cuda 03: a fused GPU path with other fp32 summation orders), every output
    element within |deck - ref| <= atol + rtol*|ref| and ||deck - ref|| <= rel_l2 * ||deck||."""
    if spec.deck_tolerance is None:
        r = spec.compare(deck, ref, inputs=inputs)
        r["ok"] = bool(_equal(deck, ref))
        r["msg"] = "bitwise equal" if r["ok"] else "NOT bitwise equal to the deck's own call: " + str(r.get("msg"))
        return r
    from .common import check_tensor, merge_results
    tol = spec.deck_tolerance
    d, f = _leaves(deck), _leaves(ref)
    if len(d) != len(f) or not all(isinstance(t, torch.Tensor) for t in d + f):
        return dict(ok=False, msg="output structure differs from the deck's own call")
    parts = {}
    for i, (a, b) in enumerate(zip(d, f)):
        r = check_tensor(a.float(), b.float(), tol["atol"], tol["rtol"], f"out{i}")
        r["rel_l2"] = float((a.float() - b.float().to(a.device)).norm() / a.float().norm().clamp_min(1e-30))
        r["ok"] = bool(r["ok"] and r["rel_l2"] <= tol["rel_l2"])
        parts[f"out{i}"] = r
    r = merge_results(parts)
    r["rel_l2"] = max(p["rel_l2"] for p in parts.values())
    r["msg"] = (f"within {tol} of the deck's own call: {r['ok']} (rel_l2 {r['rel_l2']:.3g}); " + str(r.get("msg")))
    return r


def verify_shape(spec, shape, device, timer, do_oracle=True) -> dict:
    row = dict(shape=shape)
    model = spec.build_reference(shape, device)
    info = {}
    inputs = spec.make_inputs(shape, 2026, device, info=info)            # the benchmark seed
    row["inputs_mode"] = info.get("mode")
    with torch.no_grad():
        ref = spec.reference_forward(model, inputs)
        dtype = _out_dtype(ref)
        if spec.name == "03_megaqwen_decode" and torch.device(device).type == "cuda":
            from .triton import megaqwen
            row["reference_path"] = megaqwen.LAST_PATH.get("path")
        if spec.deck_fn is not None:      # reference_forward is a faster formulation: must be the same values
            deck = spec.deck_forward(model, inputs)
            row["reference_vs_deck"] = _summ(_vs_deck(spec, deck, ref, inputs))
            del deck
        if spec.has_triton:
            tri = spec.triton_forward(model, inputs)
            row["triton_vs_reference"] = _summ(spec.compare(ref, tri, inputs=inputs))
            if do_oracle:
                try:
                    orc = spec.oracle(model, inputs)
                    row["triton_vs_oracle"] = _summ(spec.compare(orc, tri, inputs=inputs, dtype=dtype))
                    row["reference_vs_oracle"] = _summ(spec.compare(orc, ref, inputs=inputs, dtype=dtype))
                    del orc
                except torch.cuda.OutOfMemoryError as exc:  # fp64 oracles of the largest shapes
                    row["oracle_error"] = f"OutOfMemoryError: {str(exc)[:200]}"
            del tri
        elif do_oracle:
            orc = spec.oracle(model, inputs)
            row["reference_vs_oracle"] = _summ(spec.compare(orc, ref, inputs=inputs, dtype=dtype))
        _free()
        # megaqwen is timed by forensics.kernels.tune; the Kimi step on the CPU would run the interpreted
        # Triton step again for a number that means nothing there (minutes)
        slow_cpu = spec.name == "02_kimi_linear_decode" and torch.device(device).type == "cpu"
        if timer is not None and spec.name != "03_megaqwen_decode" and not slow_cpu:
            flops, nbytes = spec.flops(shape), spec.bytes(shape)
            timings = {}
            if spec.has_triton:
                timings["triton"] = timer(lambda: spec.triton_fn(model, inputs))
                for label, fn in _triton_variants(spec, model, inputs):
                    # a variant is a candidate default: its output is checked before it is timed; one
                    # that does not build or run here (a launch this Triton cannot compile) is recorded
                    try:
                        check = _summ(spec.compare(ref, fn(), inputs=inputs))
                        timings[f"triton_{label}"] = dict(timer(fn), vs_reference_ok=check.get("ok"),
                                                          vs_reference_max_abs=check.get("max_abs"))
                    except Exception as exc:  # noqa: BLE001 - recorded, the default's row stands
                        timings[f"triton_{label}"] = dict(error=f"{type(exc).__name__}: {str(exc)[:300]}")
                        _sync_quiet(device)
            try:
                label, fn = _baseline(spec, model, inputs, torch.device(device))
                if fn is not None:
                    timings["library"] = dict(timer(fn), op=label)
            except Exception as exc:  # noqa: BLE001 - e.g. _scaled_mm rejects K % 16 != 0
                timings["library"] = dict(op="error", error=f"{type(exc).__name__}: {str(exc)[:300]}")
            try:
                timings["reference"] = timer(lambda: spec.reference_forward(model, inputs))
            except torch.cuda.OutOfMemoryError as exc:
                timings["reference"] = dict(error=f"OutOfMemoryError: {str(exc)[:200]}")
                _free()
            for t in timings.values():
                if t and "ms_median" in t:
                    ms = t["ms_median"]
                    t["tflops"] = flops / (ms * 1e-3) / 1e12 if flops else None
                    t["gbps"] = nbytes / (ms * 1e-3) / 1e9 if nbytes else None
            if "triton" in timings and "ms_median" in timings.get("library", {}):
                timings["triton_over_library"] = timings["triton"]["ms_median"] / timings["library"]["ms_median"]
                # a device median whose trials all outlasted the spin holds host stalls (a sync inside
                # the call): not a device time, so no device ratio from it
                if timings["triton"].get("ms_device_ok") and timings["library"].get("ms_device_ok"):
                    timings["triton_over_library_device"] = (timings["triton"]["ms_device_median"]
                                                             / timings["library"]["ms_device_median"])
            row["timing"] = timings
    del model, inputs, ref
    _free()
    return row


def problem_shapes(spec, device, quick):
    if torch.device(device).type == "cpu":
        from .selftest import TINY
        return [TINY[spec.name]] if spec.name in TINY else []
    if spec.name in ("03_megaqwen_decode", "02_kimi_linear_decode"):
        return spec.check_shapes[:1]     # whole prefill+decode / one step; canonical contexts are too long here
    return spec.shapes[:1] if quick else spec.shapes


def _new_result(spec) -> dict:
    return dict(problem=spec.name, bench=spec.bench, deck_version=spec.deck_version, has_triton=spec.has_triton,
                shapes=[], errors=[], skipped_units=[], wall_s=0.0)


def _run_unit(res, spec, device, unit, timer, quick):
    """One unit of work for one problem: ("shape", shape), ("full_check", use_triton) or
    ("inputs_exact", None): the full check's input generation the exact (CPU) way, beside the
    on-device default, where the two differ."""
    t0 = time.perf_counter()
    kind, arg = unit
    try:
        if kind == "shape":
            res["shapes"].append(verify_shape(spec, arg, device, timer))
        elif kind == "inputs_exact":
            res["inputs_exact_vs_device"] = dict(exact=inputs_time(spec, device, True),
                                                 device=inputs_time(spec, device, False))
        else:
            key = "full_check_triton" if arg else "full_check_reference"
            res[key] = full_check_time(spec, device, arg)
    except Exception as exc:  # noqa: BLE001 - recorded; the other units and problems go on
        res["errors"].append(dict(unit=f"{kind}:{arg}", error=f"{type(exc).__name__}: {str(exc)[:500]}",
                                  traceback=traceback.format_exc(limit=8)))
        _free()
    res["wall_s"] = round(res["wall_s"] + time.perf_counter() - t0, 2)


def _finish(res):
    res["ok"] = not res["errors"] and all(
        r.get(k, {}).get("ok", True) for r in res["shapes"]
        for k in ("triton_vs_oracle", "triton_vs_reference", "reference_vs_deck"))
    for key in ("full_check_reference", "full_check_triton"):
        if "error" in res.get(key, {}):
            res["ok"] = False


def verify_problem(spec, device, quick, timer) -> dict:
    res = _new_result(spec)
    for shape in problem_shapes(spec, device, quick):
        _run_unit(res, spec, device, ("shape", shape), timer, quick)
    if torch.device(device).type == "cuda":
        for use_triton in ([False, True] if spec.has_triton else [False]):
            _run_unit(res, spec, device, ("full_check", use_triton), timer, quick)
    _finish(res)
    return res


def environment(device) -> dict:
    env = dict(python=platform.python_version(), torch=torch.__version__, device=str(device))
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception as exc:  # noqa: BLE001
        env["triton"] = f"unavailable: {exc}"
    if torch.device(device).type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env.update(gpu=p.name, sm=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
                   memory_gb=round(p.total_memory / 1e9, 1), l2_mb=round(getattr(p, "L2_cache_size", 0) / 2**20, 1))
    return env


def run(problems=None, device=None, quick=False, budget_s=None, iters=None, out_path=None) -> dict:
    """Work is done in passes so that a time budget (or an outer kill) still leaves the most useful
    results: pass 1 the first canonical shape of every problem (correctness + timing), pass 2 the
    full-check reference timing, pass 3 the other canonical shapes (the library comparison),
    pass 4 the full-check Triton timing, pass 5 exact-vs-device input generation.
    The JSON at `out_path` is rewritten after every unit."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from . import registry
    out = dict(environment=environment(device), quick=quick, budget_s=budget_s,
               started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), load_errors=dict(registry.LOAD_ERRORS),
               problems=[], done=False)
    if dev.type == "cpu":      # the interpreter is slow and CPU numbers mean nothing: one call
        timer = Timer(device, iters=iters or 1, warmup=0)
    else:
        timer = Timer(device, iters=iters or (5 if quick else 30), warmup=3 if quick else 10)
    order = {"hard": 0, "cuda": 1, "mega": 2}
    targets = []
    for n in problems or registry.names():
        try:
            for ver in registry.deck_versions(n):
                targets.append(registry.get(n, ver))
        except KeyError as exc:
            out["problems"].append(dict(problem=n, ok=False, errors=[dict(error=f"KeyError: {exc}")]))
    targets.sort(key=lambda s: (order.get(s.bench, 9), s.name, s.since or ""))
    results = [(spec, _new_result(spec)) for spec in targets]
    out["problems"].extend(r for _, r in results)
    passes = []
    for spec, res in results:
        shapes = problem_shapes(spec, device, quick)
        passes.append((0, spec, res, ("shape", shapes[0])) if shapes else None)
        if dev.type == "cuda":
            passes.append((1, spec, res, ("full_check", False)))
            if spec.has_triton:
                passes.append((3, spec, res, ("full_check", True)))
            if spec.make_inputs_fn is None:   # problems with their own input rule have one mode
                passes.append((4, spec, res, ("inputs_exact", None)))
        passes.extend((2, spec, res, ("shape", sh)) for sh in shapes[1:])
    units = sorted((u for u in passes if u is not None), key=lambda u: u[0])
    t_start = time.perf_counter()

    def dump():
        out["wall_s"] = round(time.perf_counter() - t_start, 2)
        if out_path:
            tmp = f"{out_path}.tmp"
            with open(tmp, "w") as fh:
                json.dump(out, fh, indent=1, default=str)
            os.replace(tmp, out_path)

    for _, spec, res, unit in units:
        if budget_s is not None and time.perf_counter() - t_start > budget_s:
            res["skipped_units"].append(f"{unit[0]}:{unit[1]} (time budget of {budget_s}s spent)")
            continue
        print(f"[verify {time.perf_counter() - t_start:7.1f}s] {spec.name}@{spec.deck_version} {unit[0]} {unit[1]}",
              flush=True)
        with torch.no_grad():
            _run_unit(res, spec, device, unit, timer, quick)
        _finish(res)
        dump()
    for _, res in results:
        _finish(res)
    out["done"] = True
    out["ok"] = all(p.get("ok") is True for p in out["problems"])
    dump()
    return out


def summary_lines(result: dict) -> list[str]:
    lines = [f"environment: {json.dumps(result['environment'])}"]
    for p in result["problems"]:
        head = f"{p.get('problem')}@{p.get('deck_version')}: " + ("ok" if p.get("ok") else "FAIL")
        if p.get("skipped_units"):
            head += f" ({len(p['skipped_units'])} units skipped: budget)"
        fc = p.get("full_check_reference", {})
        if "total_s" in fc:
            head += (f"  full-check ref {fc['total_s']}s (build {fc['build_s']} inputs {fc['inputs_s']} "
                     f"fwd {fc['forward_s']}; init {fc.get('init_mode')}, inputs {','.join(fc.get('inputs_modes', []))})")
        ie = p.get("inputs_exact_vs_device", {})
        if ie:
            head += f"  inputs exact {ie['exact']['inputs_s']}s vs device {ie['device']['inputs_s']}s"
        ft = p.get("full_check_triton", {})
        if "total_s" in ft:
            head += f" (triton {ft['total_s']}s)"
        lines.append(head)
        for e in p.get("errors", []):
            lines.append(f"    error: {e.get('error')}")
        for r in p.get("shapes", []):
            t = r.get("timing", {})
            tri = t.get("triton", {}).get("ms_median")
            lib = t.get("library", {})
            vo = r.get("triton_vs_oracle", {})
            extra = "".join(f" {k[7:]}={v['ms_median']:.4f}ms" for k, v in t.items()
                            if k.startswith("triton_") and isinstance(v, dict) and "ms_median" in v)
            if "reference_vs_deck" in r:
                extra += f" ref_vs_deck={r['reference_vs_deck'].get('ok')}"
            lines.append(f"    {r['shape']}: vs_oracle ok={vo.get('ok')} max_abs={vo.get('max_abs')}{extra} "
                         f"triton={tri and round(tri, 4)}ms library={lib.get('ms_median') and round(lib['ms_median'], 4)}ms"
                         f" ratio={t.get('triton_over_library') and round(t['triton_over_library'], 2)}"
                         f" device ratio={t.get('triton_over_library_device') and round(t['triton_over_library_device'], 2)}"
                         f" [{lib.get('op', '')[:40]}]")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Verify and benchmark the bundled reference kernels.")
    ap.add_argument("--out", required=True, help="JSON output path")
    ap.add_argument("--problems", nargs="*", help="problem names (default: all)")
    ap.add_argument("--quick", action="store_true", help="first canonical shape only, fewer timing trials")
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu (tiny shapes, interpreter)")
    ap.add_argument("--budget-s", type=float, default=None, help="skip the remaining problems after this many seconds")
    ap.add_argument("--iters", type=int, default=None, help="timing trials per op (default 30, quick 5)")
    args = ap.parse_args(argv)
    result = run(args.problems, args.device, args.quick, args.budget_s, args.iters, out_path=args.out)
    print("\n".join(summary_lines(result)))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
