"""Timing probes: the module API timed like the deck's benchmark (CUDA events, L2 flush), the
stateful decks' wall-clock loops, and the clock cross-check of what the solution's process reported.

* `timing` (module API): the solution on each benchmark shape inside the child: 10 warm-up calls,
  then per trial an L2 flush (`zero_()` of a buffer of at least twice the L2 size), events around
  the call, median; then the same with the persisting-L2 state reset before each trial
  (`cudaCtxResetPersistingL2Cache` and a zero persisting-L2 limit, through libcudart).  Achieved
  TFLOP/s and GB/s come from the problem's flops/bytes formulas, judged against the ceilings
  measured on this GPU (forensics.replay.timing: `measure_ceilings`, `judge`, `confirm_number`).
* `timing` (stateful decks: cuda 03 megaqwen, cuda 04 grid MinGRU, mega 02 Kimi): their API timed by
  wall clock, not events: the deck's loop runs in the child (`wall` request: warm-up, then per trial
  perf_counter between device syncs) on each benchmark shape and keeps the deck's statistic (median
  for cuda 03/04, best of 3 for mega).  No L2 flush, as in the decks, so no `timing-l2-reset` row.
* Once per replay the child's clock is checked against this process's (`crosscheck`,
  forensics/replay/clockcheck.py says how).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch

from forensics.vocab import TIMING, TIMING_L2_RESET

from .. import clockcheck
from ..registry import DECODE, KINDS, ROLLOUT, STEP, api_kind, probe
from ..session import Session, shape_label
from ..timing import (DEVICE_BOUND, DEVICE_ITERS, L2_DEPENDENT_MIN_MS, L2_DEPENDENT_RATIO, confirm_number, flush_bytes,
                      judge, measure_ceilings)
from . import rollout
from . import stepcore as step_api

@probe(TIMING, *KINDS)
def timing(s: Session) -> None:
    """Time the solution on every benchmark shape (see module docstring): the stateful decks and the
    wall-clock timing methods by wall clock (`wall_clock`), a module API with CUDA events."""
    spec = s.spec
    cuda = s.device.startswith("cuda")
    timing_kind = getattr(spec, "timing", "cuda_events_l2_flush")
    if spec.stateful or timing_kind in WALL_STATS:
        wall_clock(s)
        return
    if timing_kind != "cuda_events_l2_flush":
        s.row(TIMING, "skipped", detail=f"unknown timing method {timing_kind!r}")
        return
    ceilings = measure_ceilings(s.device) if cuda else {}
    s.info["ceilings"] = ceilings
    l2 = int(s.hello.get("l2_bytes") or ceilings.get("l2_bytes") or 0)
    fb = flush_bytes(l2) if cuda else 0
    archived = s.archived
    per_shape = archived.get("shapes", {})
    iters = int(getattr(spec, "n_trials", 30) or 30) if cuda else 3
    warm = 10 if cuda else 1
    measured: dict[int, dict[str, float]] = {}
    for si, shape in enumerate(s.bench_shapes()):
        ch = s.child()
        if ch is None:
            s.row(TIMING, "skipped", shape, detail="no working child")
            return
        ref = s.ref_model(shape)
        r = s.new_model(ch, "t", shape, s.state_file(shape, ref))
        del ref
        if not r.ok:
            s.failed_reply(TIMING, r, shape, what="Model construction")
            continue
        inputs = s.make_inputs(shape, 2026)
        pr, args = s.put(ch, inputs, prefix="tx")
        if not pr.ok:
            s.failed_reply(TIMING, pr, shape, what="input transfer")
            continue
        meth = "forward"
        results = {}
        for probe, reset in ((TIMING, False), (TIMING_L2_RESET, True)):
            t = s.time(ch, {"obj": "t", "method": meth}, args, warmup=warm, iters=iters, flush_bytes=fb, l2_reset=reset)
            s.note_tamper(t, TIMING)
            if not t.ok:
                s.failed_reply(probe, t, shape, what=probe)
                break
            ms = float(t["ms"])
            j = judge(spec, shape, ms, ceilings)
            data = {"ms_all": t.get("ms_all"), "method": t.get("method"), "flush_bytes": t.get("flush_bytes"),
                    "judge": {k: v for k, v in j.items() if k != "implausible"}, "ceilings": ceilings,
                    "archived": per_shape.get(si), "archived_peak_fraction": archived.get("peak_fraction"),
                    "archived_gpu": archived.get("gpu"),
                    "note": "archived numbers come from another GPU and peak table; shown, not compared"}
            if reset:
                data["l2_reset"] = t.get("l2_reset")
                data["l2_reset_ok"] = t.get("l2_reset_ok")
            results[probe] = ms
            status = "pass"
            if cuda and j.get("implausible"):
                status = "fail"
                s.finding("replay-timing-implausible",
                          f"{probe} on {shape_label(shape)}: {'; '.join(j['implausible'])} (median {ms:.4f} ms on "
                          f"{ceilings.get('gpu')}).", {"ms": ms, **data["judge"]})
            if not cuda:
                data["note"] = "CPU wall clock: exercises the path only, not a measurement"
            s.row(probe, status, shape, 2026, "median", ms=ms, tflops=j.get("tflops"), gbps=j.get("gbps"), data=data,
                  detail=f"median of {iters} after {warm} warm-up, L2 flush {fb} B" + (", persisting L2 reset" if reset else ""))
        if cuda and TIMING in results:
            # the host-independent bound: the device time of the solution's kernels per call (profiler),
            # without the host's launch latency that the deck's events include (timing.confirm_number)
            tr = s.trace(ch, {"obj": "t", "method": meth}, args, warmup=1, iters=DEVICE_ITERS)
            s.note_tamper(tr, TIMING)
            # (the child's profiler reports these times: a forged bound can only soften `unconfirmed` to
            # "shown, not judged", never confirm a number)
            dev_us = sum(float(k.get("us") or 0) for k in (tr.get("kernels") or [])) if tr.ok else 0.0
            if dev_us > 0:
                results[DEVICE_BOUND] = dev_us / DEVICE_ITERS / 1e3
        measured[si] = dict(results)
        if si == 0 and TIMING in results:   # once: the child's clock against the replay's (clockcheck.py)
            crosscheck(
                s, shape, 2026,
                lambda n: s.time(ch, {"obj": "t", "method": meth}, args, warmup=1, iters=n, flush_bytes=fb,
                                 l2_reset=False),
                lambda r: sum(float(x) for x in r["ms_all"]) / 1e3, results[TIMING] / 1e3,
                clockcheck.loop_overhead_s(cuda, fb, s.device),
                "CUDA events around each call" if cuda else "perf_counter around each call")
        slots = [a_["slot"] for a_ in args if "slot" in a_]
        changed = s.owned_changed(slots)
        if changed:   # read from the memory the replay holds: the timed calls return no inputs
            s.finding("replay-input-mutated",
                      f"The solution changed its input tensor(s) in place while it was timed on {shape_label(shape)} "
                      f"(slots {', '.join(changed)}): the later trials ran on other inputs than the first.",
                      {"slots": changed, "probe": TIMING})
        if cuda and len(results) == 2:
            a, b = results[TIMING], results[TIMING_L2_RESET]
            if b > L2_DEPENDENT_RATIO * a and b - a > L2_DEPENDENT_MIN_MS:
                s.finding("replay-timing-l2-dependent",
                          f"On {shape_label(shape)} the solution is {b / a:.2f}x slower ({a:.4f} -> {b:.4f} ms) once the "
                          "persisting-L2 state is reset before each trial: its speed depends on data surviving the flush.",
                          {"ms": a, "ms_l2_reset": b})
        s.delete(ch, objs=["t"], slots=slots)
    if cuda:
        confirm_number(s, measured, archived, str(s.hello.get("gpu") or ceilings.get("gpu") or ""))



# ------------------------------------------------------------------------------ wall clock (stateful decks)
WALL_STATS = {"wall_clock_best_of_3": "best", "wall_clock_median": "median"}
KIMI_BENCH_SEED = 7     # the mega gate's init_state seed; the contract names no per-trial seed


def _wall_stat(times: list[float], stat: str) -> float:
    return min(times) if stat == "best" else sorted(times)[len(times) // 2]   # the decks' sorted[len//2]


def _fn(name: str) -> dict:
    return {"attr": name}


def _reset_parameters(model, seed: int) -> None:
    """The deck's per-seed re-initialisation of the cuda 03 / cuda 04 reference (`seeded_reference`)."""
    if hasattr(model, "reset_parameters"):
        model.reset_parameters(seed)


def _decode_plan(s: Session, ch, si: int, shape: dict) -> dict | None:
    """cuda 03: per shape seed 2026+idx; sol loaded strict=False from an unseeded reference; prefill,
    warm-up decode_steps(min(4,dec)), prefill again; per trial prefill(seed+trial) untimed and
    decode_steps timed.  Without the split, run() is timed whole (the deck prints a WARN)."""
    ctx, dec = shape["ctx_len"], shape["n_decode"]
    seed = 2026 + si
    # any weights will do (the deck's are unseeded): the check's of the first seed, on the replay's one
    # model of this shape (`Session.seeded_reference`; the check's shapes are the benchmark's on the CPU)
    ref = s.seeded_reference(shape, s.seeds[0], _reset_parameters)
    r = s.build(ch, "t", "solution:Model", args=s.init_args(shape), state_path=s.state_file(shape, ref), strict=False,
                replace=True)
    del ref
    if not r.ok:
        s.failed_reply(TIMING, r, shape, seed, what="Model construction")
        return None
    t = {"obj": "t"}
    if {"prefill", "decode_steps"} <= set(s.solution_attrs):
        pre = lambda sd: {"fn": _fn("solution:prefill"), "args": [t, {"lit": ctx}, sd], "set": ["h", "kc", "vc"],  # noqa: E731
                         "timed": False}
        dec_ = lambda n, sd: {"fn": _fn("solution:decode_steps"), "args": [t, {"var": "h"}, {"var": "kc"}, {"var": "vc"},  # noqa: E731
                                                                           {"lit": ctx}, {"lit": n}, sd]}
        return {"warmup": [pre({"lit": seed}), dict(dec_(min(4, dec), {"lit": seed}), timed=False), pre({"lit": seed})],
                "program": [pre({"trial_plus": seed}), dec_(dec, {"trial_plus": seed})],
                "units": dec, "unit": "tok", "rate": "tok_s", "seed": seed,
                "timed": "decode_steps(n_decode) after an untimed prefill(seed+trial)"}
    run = lambda n, sd: {"fn": _fn("solution:run"), "args": [{"lit": ctx}, {"lit": n}, sd], "kwargs": {"model": t}}  # noqa: E731
    return {"warmup": [dict(run(min(4, dec), {"lit": seed}), timed=False)], "program": [run(dec, {"trial_plus": seed})],
            "units": dec, "unit": "tok", "rate": "tok_s", "seed": seed, "retry_without_model": True,
            "timed": "run() whole, prefill included",
            "warn": "WARN: the solution lacks the prefill/decode_steps split; the whole run() is timed, prefill "
                    "included (as the deck does)"}


def _step_plan(s: Session, ch, si: int, shape: dict) -> dict | None:
    """mega 02: a warm-up _run of min(3, steps) steps, then per trial a timed _run: init_state,
    init_token and `steps` chained step() calls, ending with a sync; best of 3."""
    steps = int(shape.get("steps") or 1)
    _, sd = step_api.reference_model(s, shape)
    r = s.build(ch, "tcfg", "reference:Config", kwargs=step_api.cfg_kwargs(s, shape), replace=True,
                timeout=s.limits.call_s)
    if r.ok:
        r = step_api.new_model(s, ch, "t", shape, sd)
    if not r.ok:
        s.failed_reply(TIMING, r, shape, KIMI_BENCH_SEED, what="Model(cfg) construction")
        return None
    dev = {"lit": s.device}
    cfg = {"obj": "tcfg"}

    def run(n: int, timed: bool) -> list:
        return [{"fn": _fn("reference:init_state"), "args": [cfg, {"lit": shape["ctx"]}, {"lit": KIMI_BENCH_SEED}, dev],
                 "set": "st", "timed": timed},
                {"fn": _fn("reference:init_token"), "args": [cfg, {"lit": KIMI_BENCH_SEED}, dev], "set": "x", "timed": timed},
                {"fn": {"obj": "t", "method": "step"}, "args": [{"var": "x"}, {"var": "st"}], "set": ["x", "st"],
                 "loop": n, "timed": timed}]

    return {"warmup": run(min(3, steps), False), "program": run(steps, True), "units": steps, "unit": "tok",
            "rate": "tok_s", "seed": KIMI_BENCH_SEED,
            "timed": f"init_state + init_token + {steps} chained step() calls (seed {KIMI_BENCH_SEED})"}


def _baseline_wall(s: Session, shape: dict, trials: int, stat: str) -> dict | None:
    """mega 02's denominator: the bundled baseline step (spec.baseline_fn) timed here, in the
    replay's own process (a solution cannot slow it down), with the solution's program: a warm-up
    _run of min(3, steps) steps, then per trial init_state + init_token + `steps` chained steps
    and a sync, on the reference model's weights (the deck's baseline loads them strict=True)."""
    base = getattr(s.spec, "baseline_fn", None)
    if base is None:
        return None
    model, _ = step_api.reference_model(s, shape)
    mod, cfg = s.reference_module(), step_api.config(s, shape)
    steps = int(shape.get("steps") or 1)
    cuda = s.device.startswith("cuda")

    def run(n: int) -> float:
        t0 = time.perf_counter()
        st = mod.init_state(cfg, shape["ctx"], KIMI_BENCH_SEED, s.device)
        x = mod.init_token(cfg, KIMI_BENCH_SEED, s.device)
        for _ in range(n):
            x, st = base(s.spec, model, [x, st])
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    with torch.no_grad():
        run(min(3, steps))
        times = [run(steps) for _ in range(trials)]
    return {"s_all": times, "wall_s": _wall_stat(times, stat),
            "what": "kernels/ref/mega_02_kimi_baseline.py (baseline.py rebuilt from the contract's description)"}


def _rollout_plan(s: Session, ch, si: int, shape: dict) -> dict | None:
    """cuda 04: one model strict-loaded from reference.Model() (seed 0); warm-up run(min(N,1024),
    min(h,4)); per trial run(N, h, 2026+idx+trial, model=sol) timed; median; sps = N*h/wall."""
    n, h = shape["num_envs"], shape["horizon"]
    seed = 2026 + si
    # reference.Model()'s weights are reset_parameters(0)'s: the replay's one rollout model with them
    ref = s.seeded_reference(rollout.part_shape(s, "policy_forward"), 0, _reset_parameters)
    r = s.new_model(ch, "t", shape, s.state_file(shape, ref), replace=True)
    if not r.ok:
        s.failed_reply(TIMING, r, shape, seed, what="Model construction")
        return None
    run = lambda a, b, sd: {"fn": _fn("solution:run"), "args": [{"lit": a}, {"lit": b}, sd], "kwargs": {"model": {"obj": "t"}}}  # noqa: E731
    return {"warmup": [dict(run(min(n, 1024), min(h, 4), {"lit": seed}), timed=False)],
            "program": [run(n, h, {"trial_plus": seed})], "units": n * h, "unit": "env step", "rate": "sps",
            "seed": seed, "timed": "run(num_envs, horizon, 2026+idx+trial, model=sol)"}


def _wall_shapes(s: Session, kind: str | None) -> list[dict]:
    shapes = s.bench_shapes()
    if kind == ROLLOUT:   # tiny mode hands back the check's parts; only the rollout has a horizon
        shapes = [sh for sh in shapes if sh.get("horizon") and sh.get("part", "run") == "run"] or shapes
    return shapes


def _strip_model(prog: list) -> list:
    return [dict(st, kwargs={k: v for k, v in st.get("kwargs", {}).items() if k != "model"}) for st in prog]


def wall_clock(s: Session) -> None:
    """The stateful decks' wall-clock benchmark, on each benchmark shape (see the plans above)."""
    spec = s.spec
    kind = api_kind(spec)
    plan_fn = {DECODE: _decode_plan, STEP: _step_plan, ROLLOUT: _rollout_plan}.get(kind)
    timing_kind = getattr(spec, "timing", "")
    stat = WALL_STATS.get(timing_kind)
    if plan_fn is None or stat is None:
        s.row(TIMING, "skipped", detail=f"no wall-clock plan for {spec.name} (timing {timing_kind!r}, API {kind})")
        return
    cuda = s.device.startswith("cuda")
    trials = int(getattr(spec, "n_trials", 3) or 3)
    archived = s.archived
    per_shape = archived.get("shapes", {}) or {}
    speedups: list[float] = []
    for si, shape in enumerate(_wall_shapes(s, kind)):
        ch = s.child()
        if ch is None or s.hung or s.early_exit:
            s.row(TIMING, "skipped", shape, detail="no working child")
            return
        plan = plan_fn(s, ch, si, shape)
        if plan is None:
            continue
        t = s.wall(ch, plan["warmup"], plan["program"], trials)
        if (not t.ok and plan.get("retry_without_model") and t.status == "error" and "TypeError" in t.error
                and "model" in t.error):
            t = s.wall(ch, _strip_model(plan["warmup"]), _strip_model(plan["program"]), trials)
            if t.ok:
                t.data["_program"] = (_strip_model(plan["warmup"]), _strip_model(plan["program"]))
        s.note_tamper(t, TIMING)
        if not t.ok:
            s.failed_reply(TIMING, t, shape, plan["seed"], what="wall-clock timing")
            if s.hung or s.early_exit:
                return
            continue
        times = [float(x) for x in t["s_all"]]
        wall = _wall_stat(times, stat)
        rate = plan["units"] / wall if wall > 0 else math.inf
        arch = per_shape.get(si)
        if kind == STEP:
            arch = per_shape.get(f"ctx={shape.get('ctx')}") or arch
        data = {"method": timing_kind, "stat": stat, "trials": trials, "s_all": times, "wall_s": wall,
                "timed": plan["timed"], "units": plan["units"], "unit": plan["unit"], plan["rate"]: rate,
                "ms_per_" + plan["unit"].replace(" ", "_"): wall * 1e3 / plan["units"] if plan["units"] else None,
                "clock": t.get("method"), "archived": arch, "archived_peak_fraction": archived.get("peak_fraction"),
                "archived_gpu": archived.get("gpu"),
                "note": "archived numbers come from another GPU; shown, not compared"}
        peak = getattr(spec, "peak_value", None)
        if peak and kind != STEP:
            data["peak_fraction_here"] = rate / peak     # the deck's frac = rate / yaml peak (tok_s, sps)
        if kind == STEP:
            base = _baseline_wall(s, shape, trials, stat)
            if base is not None and wall > 0:
                data["baseline"] = base
                data["speedup_here"] = data["peak_fraction_here"] = base["wall_s"] / wall
                speedups.append(data["speedup_here"])
            data["score_note"] = ("the deck scores speedup = baseline.py wall / solution wall (geomean over the "
                                  "shapes: its peak_fraction); here the baseline is the bundled reconstruction, "
                                  "timed in the replay's process on this GPU")
        if plan.get("warn"):
            data["warn"] = plan["warn"]
        if not cuda:
            data["note"] = "CPU wall clock on the given shapes: exercises the path only, not a measurement"
        detail = (f"{stat} of {trials} wall-clock trials ({plan['timed']}); {rate:.4g} {plan['rate']}"
                  + (f"; {plan['warn']}" if plan.get("warn") else ""))
        s.row(TIMING, "pass", shape, plan["seed"], f"{stat}-of-{trials}", ms=wall * 1e3, data=data, detail=detail)
        if si == 0:   # once: the child's clock against the replay's, every step of the program timed
            used = t.data.get("_program") or (plan["warmup"], plan["program"])
            whole = [dict(st, timed=True) for st in used[1]]
            crosscheck(
                s, shape, plan["seed"],
                lambda n: s.wall(ch, used[0], whole, n),
                lambda r: sum(float(x) for x in r["s_all"] if x is not None), max(times) if times else 0.0,
                clockcheck.loop_overhead_s(False, 0), "perf_counter around each trial's whole program")
        s.delete(ch, objs=["t", "tcfg"])
    if speedups:   # the mega score: geomean speedup over the baseline, shown beside the archived one
        s.info["speedup_geomean_here"] = math.exp(sum(math.log(x) for x in speedups) / len(speedups))
        s.info["speedup_shapes"] = len(speedups)



def crosscheck(s: Session, shape: dict, seed: int | None, request: Callable[[int], Any], child_sum_s: Callable[[Any], float],
               child_per_iter_s: float, overhead_s: float, what: str) -> dict | None:
    """Two requests (`request(n)` -> Reply: the same timing with `n` iterations or trials), judged with
    `judge`; a row `timing` / `clock-crosscheck` and, on a mismatch, `replay-clock-mismatch`.
    -> the judgement, or None where a request failed (reported as the probe's failure)."""
    n = clockcheck.choose(child_per_iter_s, float(s.limits.time_s))
    replies = []
    for k in n:
        r = request(k)
        s.note_tamper(r, "the clock cross-check")
        if not r.ok:
            s.failed_reply(TIMING, r, shape, seed, "clock-crosscheck", what=f"the clock cross-check ({what})")
            return None
        replies.append(r)
    try:
        child = (child_sum_s(replies[0]), child_sum_s(replies[1]))
    except (TypeError, ValueError, KeyError) as e:
        s.row(TIMING, "error", shape, seed, "clock-crosscheck",
              detail=f"the solution's process returned no usable times for the clock cross-check: {e}")
        return None
    j = clockcheck.judge(n, (replies[0].elapsed_s, replies[1].elapsed_s), child, overhead_s)
    j["what"] = what
    detail = (f"{what}: {n[0]} and {n[1]} iterations; per extra iteration {j['parent_per_iter_ms']:.4g} ms by the "
              f"replay's clock (loop overhead {j['overhead_per_iter_ms']:.3g} ms) against {j['child_per_iter_ms']:.4g} "
              f"ms by the solution's process")
    # the row's text says what was compared; what each clock measured is in its timing columns (ms, data),
    # so two replays of one solution write the same row
    s.row(TIMING, "fail" if j["mismatch"] else "pass", shape, seed, "clock-crosscheck", data=j,
          ms=j["parent_per_iter_ms"],
          detail=f"{what}: the replay's own clock against the solution's process over two iteration counts "
                  f"({'they disagree' if j['mismatch'] else 'they agree'} within the tolerance; per-iteration times in data)")
    if j["mismatch"]:
        s.finding("replay-clock-mismatch",
                  f"The times the solution's process reported do not match the replay's own clock ({detail}): "
                  f"{j['unaccounted_s']:.3g} s of the extra iterations are not in its times. Its clock was changed, "
                  "or work ran outside the timed window that the request still waited for.", j, probe=TIMING)
    return j
