"""What the timing probes (forensics/replay/probes/timing.py) measure against: ceilings measured on
this GPU, the roofline judgement of a time, the archived benchmark numbers and the archived claim.

* `measure_ceilings()` measures, once per session (cached in memory and on disk per GPU and torch
  version), a device-to-device copy bandwidth (bytes read + written) and a bf16 GEMM rate.  These
  are the ceilings a result is judged against, not datasheet figures.
* `judge()`: achieved TFLOP/s and GB/s from the problem's flops/bytes formulas, the roofline floor
  here, and whether the time is physically possible (`replay-timing-implausible` when bandwidth
  exceeds the measured memory ceiling or the time is under the roofline floor);
  `replay-timing-l2-dependent` when the persisting-L2 reset makes it slower (L2_DEPENDENT_*).
* Archived numbers (benchmark.log per-shape ms, runs.peak_fraction, `parse_benchmark_log`) are
  reported beside ours in `data`; on the same GPU model the claim is confirmed or flagged
  (`confirm_number`), elsewhere shown, not compared.
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

from forensics.vocab import TIMING, TIMING_L2_RESET

# Ratio of a dtype's dense tensor rate to bf16's on Hopper (datasheet ratios; the bf16 rate itself
# is measured).
RATE_RATIO = {"bf16": 1.0, "fp16": 1.0, "fp8": 2.0, "int8": 2.0, "tf32": 0.5, "fp32": 67 / 989.5}
IMPLAUSIBLE_MARGIN = 1.10     # >10 % above a measured ceiling
L2_DEPENDENT_RATIO = 1.25     # reset timing 25 % slower ...
L2_DEPENDENT_MIN_MS = 0.005   # ... and at least 5 us slower

_CEILINGS: dict[str, dict] = {}

_VARIANT_LINE = re.compile(r"^shape=(\d+) variant=(\w+) (.*)$")
_KV = re.compile(r"(\w+)=([0-9.eE+-]+)(?=\s|$)")
_PF_LINE = re.compile(r"^shape=(\d+) solution_peak_fraction=([0-9.eE+-]+)")
_MEGA_LINE = re.compile(r"^shape ctx=(\d+): solution ([0-9.eE+-]+) ms/tok \((\d+(?:\.\d*)?) tok/s\)"
                        r"(?: \| baseline ([0-9.eE+-]+) ms/tok \| speedup ([0-9.eE+-]+)x)?")


def parse_benchmark_log(text: str) -> dict[int | str, dict]:
    """Per-shape archived numbers from benchmark.log.

    Hard / cuda 01-02 (`shape=i variant=solution tflops= gbps= ms=`, `shape=i solution_peak_fraction=`),
    cuda 03 (`... ctx_len= decode_steps= tok_s= decode_wall_s= prefill_wall_s= peak_fraction=`) and
    cuda 04 (`... num_envs= horizon= sps= wall_s= peak_fraction=`) are keyed by shape index; other
    variants (eager_ref, eager, compiled, sota) go under their name.  Mega (`shape ctx=c: solution
    x ms/tok (n tok/s) | baseline y ms/tok | speedup zx`) is keyed `"ctx=c"`."""
    out: dict[int | str, dict] = {}
    for line in (text or "").splitlines():
        line = line.strip()
        m = _VARIANT_LINE.match(line)
        if m:
            vals = {k: float(v) for k, v in _KV.findall(m.group(3))}
            entry = out.setdefault(int(m.group(1)), {})
            if m.group(2) == "solution":
                entry.update(vals)
            elif vals:
                entry.setdefault(m.group(2), {}).update(vals)
            continue
        m = _PF_LINE.match(line)
        if m:
            out.setdefault(int(m.group(1)), {})["peak_fraction"] = float(m.group(2))
            continue
        m = _MEGA_LINE.match(line)
        if m:
            e = out.setdefault(f"ctx={m.group(1)}", {})
            e.update(ms_per_tok=float(m.group(2)), tok_s=float(m.group(3)))
            if m.group(4):
                e.update(baseline_ms_per_tok=float(m.group(4)), speedup=float(m.group(5)))
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


# ------------------------------------------------------------------------------ the archived number
#: the archived peak fraction is confirmed when ours, measured the deck's way on the same GPU model, is at
#: least 1/NUMBER_TOLERANCE of it (GPU clocks, co-tenants and driver versions move a median by tens of
#: percent between sessions on one model; more than this is not noise)
NUMBER_TOLERANCE = 1.5
#: `measured`'s key for the device time per call of the solution's kernels (the profiler's kernel times
#: summed, over DEVICE_ITERS traced calls): what any host would measure at best.  The deck's CUDA
#: events start on an idle GPU (it synchronizes after the L2 flush) and so include the host's launch
#: latency, which differs between the grading machine and this one.
DEVICE_BOUND = "device"
DEVICE_ITERS = 3


def reproduced_fraction(archived_shapes: dict, ours_ms: dict[int, float]) -> tuple[float | None, list[dict]]:
    """The archive's peak fraction as our times reproduce it: per shape the archived fraction scaled by
    archived ms / our ms (a fraction is a rate over a fixed peak, so it scales with 1/time), then the
    geometric mean over the shapes both have, as the decks do.  (None, []) where no shape has both."""
    per = []
    for si, ms in sorted(ours_ms.items()):
        a = archived_shapes.get(si) if isinstance(archived_shapes, dict) else None
        if not isinstance(a, dict):
            continue
        ams, afrac = a.get("ms"), a.get("peak_fraction", a.get("frac"))
        if not ams or not afrac or not ms or ams <= 0 or ms <= 0 or afrac <= 0:
            continue
        per.append({"shape": si, "archived_ms": ams, "ms": ms, "ratio": ms / ams, "archived_fraction": afrac,
                    "fraction": afrac * ams / ms})
    if not per:
        return None, []
    return math.exp(sum(math.log(x["fraction"]) for x in per) / len(per)), per


def confirm_number(rp: Any, measured: dict[int, dict[str, float]], archived: dict, gpu_here: str) -> None:
    """Set the archived performance claim beside ours (the deck's method: CUDA events, L2 flushed) and the
    hardened one (persisting L2 reset as well).  On the same GPU model a claim ours falls short of by more
    than NUMBER_TOLERANCE is `replay-number-unconfirmed`; on another model it is shown, not judged."""
    from forensics.store.archived import gpu_key
    shapes = archived.get("shapes") or {}
    ours, per = reproduced_fraction(shapes, {si: r[TIMING] for si, r in measured.items() if TIMING in r})
    hard, _ = reproduced_fraction(shapes, {si: r[TIMING_L2_RESET] for si, r in measured.items()
                                           if TIMING_L2_RESET in r})
    bound, _ = reproduced_fraction(shapes, {si: r[DEVICE_BOUND] for si, r in measured.items() if DEVICE_BOUND in r})
    claimed = archived.get("peak_fraction")
    if ours is None:
        # nothing to set ours beside: say so (a user reads "not judged, why", never silence)
        times = {str(si): round(r[TIMING], 5) for si, r in sorted(measured.items()) if TIMING in r}
        if not times:
            return
        why = ("the archive keeps no measurement for this run" if not archived else
               f"the archive keeps no per-shape times for this run{f' (its claim: peak fraction {claimed:.4f})' if isinstance(claimed, (int, float)) else ''}, "
               "and its fraction cannot be recomputed from ours without them")
        rp.finding("replay-number", f"Not judged: {why}; measured the deck's way here on {gpu_here or 'this GPU'}: "
                   + ", ".join(f"shape {si} {ms:.4f} ms" for si, ms in times.items()) + ".",
                   {"archived_peak_fraction": claimed, "ms_here": times, "gpu_here": gpu_here,
                    "archived_gpu": archived.get("gpu"), "judged": False}, probe=TIMING)
        return
    same = gpu_key(archived.get("gpu")) is not None and gpu_key(archived.get("gpu")) == gpu_key(gpu_here)
    data = {"archived_peak_fraction": claimed, "peak_fraction_here": round(ours, 4),
            "peak_fraction_hardened": round(hard, 4) if hard is not None else None, "shapes": per,
            "peak_fraction_device_bound": round(bound, 4) if bound is not None else None,
            "archived_gpu": archived.get("gpu"), "gpu_here": gpu_here, "same_gpu_model": same,
            "tolerance": NUMBER_TOLERANCE}
    if claimed is None:
        # no archived fraction: the geomean of the archived per-shape fractions stands for it
        claimed = math.exp(sum(math.log(x["archived_fraction"]) for x in per) / len(per))
        data["archived_peak_fraction_from_shapes"] = round(claimed, 4)
    fallback = (getattr(rp, "info", None) or {}).get("fallback")
    if fallback:
        data["fallback"] = fallback
    hard_txt = f", hardened {hard:.4f}" if hard is not None else ""
    text = (f"archived peak fraction {claimed:.4f} on {archived.get('gpu') or 'an unnamed GPU'}; measured the deck's way "
            f"here {ours:.4f}{hard_txt} on {gpu_here or 'this GPU'} over {len(per)} shape(s)")
    if fallback:
        rp.finding("replay-number", f"Not judged: this replay timed the path the solution took after an exception in "
                   f"its own code ({fallback[0]}), not the graded build: " + text + ".", data, probe=TIMING)
    elif same and ours * NUMBER_TOLERANCE < claimed and bound is not None and bound * NUMBER_TOLERANCE >= claimed:
        rp.finding("replay-number", f"Within this host's launch latency: {text}; the solution's kernels alone "
                   f"(device time, no host) reach {bound:.4f}, so the gap is the time this host takes to launch them, "
                   "which the deck's timing includes and the grading machine's differs in: shown, not judged.",
                   data, probe=TIMING)
    elif same and ours * NUMBER_TOLERANCE < claimed:
        rp.finding("replay-number-unconfirmed",
                   f"The archived number does not reproduce on the same GPU model: {text}; ours is "
                   f"{claimed / ours:.2f}x lower, beyond the tolerance {NUMBER_TOLERANCE}x"
                   + (f", and even the device time of its kernels alone reaches only {bound:.4f}" if bound is not None else
                      " (no device-time bound was measured)")
                   + (" (the hardened timing explains part of it: the solution's speed depends on state "
                      "surviving the flush)" if hard is not None and hard < ours / 1.1 else "") + ".", data, probe=TIMING)
    else:
        rp.finding("replay-number", ("Confirmed within the tolerance: " if same else
                                     "Another GPU model than the archive's: shown, not judged: ") + text + ".",
                   data, probe=TIMING)


def gpu_env_summary() -> dict:
    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        out.update(gpu=p.name, capability=list(torch.cuda.get_device_capability(0)),
                   l2_bytes=int(getattr(p, "L2_cache_size", 0)), sms=p.multi_processor_count,
                   memory_gb=round(p.total_memory / 2**30, 1))
    out["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return out
