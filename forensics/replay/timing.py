"""Timing probes: CUDA-event medians with an L2 flush, against ceilings measured on this GPU.

* `measure_ceilings()` measures, once per session (cached in memory and on disk per GPU and torch
  version), a device-to-device copy bandwidth (bytes read + written) and a bf16 GEMM rate.  These
  are the ceilings a result is judged against, not datasheet figures.
* `probe_timing(replay)` times the solution on each benchmark shape inside the child: 10 warm-up
  calls, then per trial an L2 flush (`zero_()` of a buffer of at least twice the L2 size),
  events around the call, median; then the same with the persisting-L2 state reset before each
  trial (`cudaCtxResetPersistingL2Cache` and a zero persisting-L2 limit, through libcudart).
  Achieved TFLOP/s and GB/s come from the problem's flops/bytes formulas.
* Findings: `replay-timing-implausible` when bandwidth exceeds the measured memory ceiling or the
  time is under the roofline floor; `replay-timing-l2-dependent` when the reset makes it slower.
* Archived numbers (benchmark.log per-shape ms, runs.peak_fraction) are reported beside ours in
  `data`; they were measured on another GPU against another peak table and are not compared.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any

import torch

# Ratio of a dtype's dense tensor rate to bf16's on Hopper (datasheet ratios; the bf16 rate itself
# is measured).
RATE_RATIO = {"bf16": 1.0, "fp16": 1.0, "fp8": 2.0, "int8": 2.0, "tf32": 0.5, "fp32": 67 / 989.5}
IMPLAUSIBLE_MARGIN = 1.10     # >10 % above a measured ceiling
L2_DEPENDENT_RATIO = 1.25     # reset timing 25 % slower ...
L2_DEPENDENT_MIN_MS = 0.005   # ... and at least 5 us slower

_CEILINGS: dict[str, dict] = {}

_BENCH_LINE = re.compile(r"^shape=(\d+) variant=solution tflops=([0-9.eE+-]+) gbps=([0-9.eE+-]+) ms=([0-9.eE+-]+)")
_PF_LINE = re.compile(r"^shape=(\d+) solution_peak_fraction=([0-9.eE+-]+)")


def parse_benchmark_log(text: str) -> dict[int, dict]:
    """Per-shape archived numbers from benchmark.log (hard, cuda 01/02 format)."""
    out: dict[int, dict] = {}
    for line in (text or "").splitlines():
        m = _BENCH_LINE.match(line.strip())
        if m:
            out.setdefault(int(m.group(1)), {}).update(tflops=float(m.group(2)), gbps=float(m.group(3)),
                                                       ms=float(m.group(4)))
        m = _PF_LINE.match(line.strip())
        if m:
            out.setdefault(int(m.group(1)), {})["peak_fraction"] = float(m.group(2))
    return out


def _cache_file() -> Path:
    from .runner import default_cache_root
    return default_cache_root() / "ceilings.json"


def measure_ceilings(device: str = "cuda", use_disk: bool = True) -> dict:
    """{'gpu', 'copy_gbps', 'bf16_tflops', 'l2_bytes', 'measured_at'} for the current GPU."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return {}
    props = torch.cuda.get_device_properties(0)
    key = f"{props.name}|{torch.__version__}"
    if key in _CEILINGS:
        return _CEILINGS[key]
    path = _cache_file()
    if use_disk and path.exists():
        try:
            data = json.loads(path.read_text())
            if key in data and time.time() - data[key].get("measured_at", 0) < 86400:
                _CEILINGS[key] = data[key]
                return data[key]
        except (ValueError, OSError):
            pass
    n = 1 << 30  # 1 GiB source, 1 GiB destination
    src = torch.empty(n // 2, dtype=torch.float16, device=device).normal_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    copy_ms = sorted(ts)[len(ts) // 2]
    copy_gbps = 2 * n / (copy_ms * 1e-3) / 1e9
    del src, dst
    m = 8192
    a = torch.randn(m, m, dtype=torch.bfloat16, device=device)
    b = torch.randn(m, m, dtype=torch.bfloat16, device=device)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    gemm_ms = sorted(ts)[len(ts) // 2]
    del a, b
    torch.cuda.empty_cache()
    out = {"gpu": props.name, "torch": torch.__version__, "copy_gbps": copy_gbps,
           "bf16_tflops": 2 * m ** 3 / (gemm_ms * 1e-3) / 1e12, "copy_ms": copy_ms, "gemm_ms": gemm_ms,
           "l2_bytes": int(getattr(props, "L2_cache_size", 0)), "measured_at": time.time()}
    _CEILINGS[key] = out
    if use_disk:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = json.loads(path.read_text()) if path.exists() else {}
            data[key] = out
            path.write_text(json.dumps(data, indent=1))
        except (ValueError, OSError):
            pass
    return out


def flush_bytes(l2_bytes: int) -> int:
    """At least twice the L2 (and at least the deck's 128 MiB)."""
    return max(2 * int(l2_bytes or 0), 128 * 2**20)


def judge(spec: Any, shape: dict, ms: float, ceilings: dict) -> dict:
    """Achieved rates, the roofline floor on this GPU and whether the time is physically possible."""
    flops = float(spec.flops(shape)) if getattr(spec, "flops_expr", None) else 0.0
    nbytes = float(spec.bytes(shape)) if getattr(spec, "bytes_expr", None) else 0.0
    out: dict[str, Any] = {"flops": flops, "bytes": nbytes}
    if ms <= 0 or not math.isfinite(ms):
        out["implausible"] = [f"non-positive time {ms}"]
        return out
    out["tflops"] = flops / (ms * 1e-3) / 1e12
    out["gbps"] = nbytes / (ms * 1e-3) / 1e9
    reasons = []
    if ceilings:
        key = getattr(spec, "peak_key", None) or "bf16"
        peak_tflops = ceilings["bf16_tflops"] * RATE_RATIO.get(key, 1.0)
        floor_ms = max(flops / (peak_tflops * 1e12) if flops else 0.0, nbytes / (ceilings["copy_gbps"] * 1e9) if nbytes else 0.0) * 1e3
        out.update(peak_tflops_here=peak_tflops, peak_gbps_here=ceilings["copy_gbps"], floor_ms=floor_ms,
                   fraction_of_floor=floor_ms / ms if ms else None)
        if out["gbps"] > IMPLAUSIBLE_MARGIN * ceilings["copy_gbps"]:
            reasons.append(f"{out['gbps']:.0f} GB/s exceeds the measured memory ceiling {ceilings['copy_gbps']:.0f} GB/s")
        if flops and out["tflops"] > IMPLAUSIBLE_MARGIN * peak_tflops:
            reasons.append(f"{out['tflops']:.0f} TFLOP/s exceeds the {key} ceiling {peak_tflops:.0f} TFLOP/s")
        if floor_ms and ms < floor_ms / IMPLAUSIBLE_MARGIN:
            reasons.append(f"{ms:.4f} ms is under the roofline floor {floor_ms:.4f} ms")
    out["implausible"] = reasons
    return out


def probe_timing(rp: Any) -> None:
    """Time the solution on every benchmark shape (see module docstring)."""
    spec = rp.spec
    cuda = rp.device.startswith("cuda")
    timing_kind = getattr(spec, "timing", "cuda_events_l2_flush")
    if spec.stateful or timing_kind != "cuda_events_l2_flush":
        rp.row("timing", "skipped", detail=f"timing method {timing_kind!r} (stateful API) is not replayed yet")
        return
    ceilings = measure_ceilings(rp.device) if cuda else {}
    rp.out.info["ceilings"] = ceilings
    l2 = int(rp.hello.get("l2_bytes") or ceilings.get("l2_bytes") or 0)
    fb = flush_bytes(l2) if cuda else 0
    archived = getattr(rp, "archived", {}) or {}
    per_shape = archived.get("shapes", {})
    iters = int(getattr(spec, "n_trials", 30) or 30) if cuda else 3
    warm = 10 if cuda else 1
    for si, shape in enumerate(rp.bench_shapes()):
        ch = rp.ensure_child()
        if ch is None:
            rp.row("timing", "skipped", shape, detail="no working child")
            return
        ref = rp.ref_model(shape)
        r = rp.new_model(ch, "t", shape, rp.state_file(shape, ref))
        del ref
        if not r.ok:
            rp.failed_reply("timing", r, shape, what="Model construction")
            continue
        inputs = spec.make_inputs(shape, 2026, "cpu")
        pr, args = rp.put(ch, inputs, prefix="tx")
        if not pr.ok:
            rp.failed_reply("timing", pr, shape, what="input transfer")
            continue
        meth = "forward"
        results = {}
        for probe, reset in (("timing", False), ("timing-l2-reset", True)):
            t = ch.request("time", rp.limits.time_s, fn={"obj": "t", "method": meth}, args=args,
                           warmup=warm, iters=iters, flush_bytes=fb, l2_reset=reset)
            rp._note_tamper(t, "timing")
            if not t.ok:
                rp.failed_reply(probe, t, shape, what=probe)
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
                rp.finding("replay-timing-implausible",
                           f"{probe} on {_label(shape)}: {'; '.join(j['implausible'])} (median {ms:.4f} ms on "
                           f"{ceilings.get('gpu')}).", {"ms": ms, **data["judge"]})
            if not cuda:
                data["note"] = "CPU wall clock: exercises the path only, not a measurement"
            rp.row(probe, status, shape, 2026, "median", ms=ms, tflops=j.get("tflops"), gbps=j.get("gbps"), data=data,
                   detail=f"median of {iters} after {warm} warm-up, L2 flush {fb} B" + (", persisting L2 reset" if reset else ""))
        if cuda and len(results) == 2:
            a, b = results["timing"], results["timing-l2-reset"]
            if b > L2_DEPENDENT_RATIO * a and b - a > L2_DEPENDENT_MIN_MS:
                rp.finding("replay-timing-l2-dependent",
                           f"On {_label(shape)} the solution is {b / a:.2f}x slower ({a:.4f} -> {b:.4f} ms) once the "
                           "persisting-L2 state is reset before each trial: its speed depends on data surviving the flush.",
                           {"ms": a, "ms_l2_reset": b})
        ch.request("delete", rp.limits.call_s, objs=["t"], slots=[a_["slot"] for a_ in args if "slot" in a_])


def _label(shape: dict) -> str:
    from .probes import shape_label
    return shape_label(shape)


def gpu_env_summary() -> dict:
    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        out.update(gpu=p.name, capability=list(torch.cuda.get_device_capability(0)),
                   l2_bytes=int(getattr(p, "L2_cache_size", 0)), sms=p.multi_processor_count,
                   memory_gb=round(p.total_memory / 2**30, 1))
    out["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return out
