"""Parsers for the runner's logs: check.log (section 6), benchmark.log (section 7) and
gpu_lock.log (section 8.1), and their contended / regrade / container variants.

Each parser turns a log into rows of ``check_log_lines`` (schema.py) and a small summary for the
``runs`` row.  Only harness lines are classified; everything else (build noise, tracebacks) is
kept out of the table but still counted by line number, so cited lines match the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from forensics.archive.lines import classify, kv as _kv, num as _num

_LOCK = re.compile(r"^(\S+)\s+(wait|start|end|lock_timeout|reentrant_after_wait)\s+(.*)$")


def _ts(s: str) -> datetime | None:
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass
class LogSummary:
    verdict: str = "NONE"                 # PASS | FAIL | NONE
    fail_reason: str | None = None
    n_pass_lines: int = 0
    peak_fraction: float | None = None     # first peak_fraction: line (E0-E4 grading)
    n_peak_lines: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)


def _row(source: str, line: int, kind: str, text: str, **kw: Any) -> dict[str, Any]:
    r = {"source": source, "line": line, "kind": kind, "text": text[:4000]}
    r.update(kw)
    return r


def _lines(text: str):
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line:
            yield i, raw, line, classify(line)


def parse_check_log(text: str, source: str = "check.log") -> LogSummary:
    out = LogSummary()
    first_fail = None
    for i, raw, line, ln in _lines(text):
        if ln is None:
            continue
        k = ln.kind
        if k == "pass":
            out.n_pass_lines += 1
            out.rows.append(_row(source, i, "pass", raw))
        elif k == "fail":
            if first_fail is None:
                first_fail = line
            kw: dict[str, Any] = {"shape": ln.shape, "seed": ln.seed, "case_name": ln.case_name,
                                  "fields": ln.fields or None}
            out.rows.append(_row(source, i, "fail", raw, **{x: v for x, v in kw.items() if v is not None}))
        elif k == "property_seed":
            out.rows.append(_row(source, i, "property_seed", raw, value=ln.value))
        elif k == "cuda_language":
            out.rows.append(_row(source, i, "cuda_language", raw, fields=ln.fields))
        elif k == "warn":
            out.rows.append(_row(source, i, "warn", raw))
        elif k == "seed_ok":
            out.rows.append(_row(source, i, "seed_ok", raw, seed=ln.seed, fields=ln.fields))
        elif k in ("traceback", "exception"):
            out.rows.append(_row(source, i, "error", raw))
    if out.n_pass_lines and first_fail is None:
        out.verdict = "PASS"
    elif first_fail is not None:
        out.verdict = "FAIL"
        out.fail_reason = first_fail[:1000]
    return out


def parse_benchmark_log(text: str, source: str = "benchmark.log") -> LogSummary:
    out = LogSummary()
    for i, raw, line, ln in _lines(text):
        if ln is None:
            continue
        k, f = ln.kind, ln.fields
        if k == "peak_fraction":
            out.n_peak_lines += 1
            if out.peak_fraction is None:
                out.peak_fraction = ln.value
            out.rows.append(_row(source, i, "peak_fraction", raw, value=ln.value))
        elif k == "benchmark_event":
            out.rows.append(_row(source, i, "benchmark_event", raw, shape=ln.shape, value=ln.value, fields=f,
                                 ts=_ts(f.get("ts", ""))))
        elif k == "shape" and next(iter(f), None) == "solution_peak_fraction":
            out.rows.append(_row(source, i, "shape_fraction", raw, shape=ln.shape, value=_num(f["solution_peak_fraction"])))
        elif k == "shape" and next(iter(f), None) == "variant" and len(line.split()) > 2:
            val = _num(f.get("ms")) if "ms" in f else _num(f.get("peak_fraction"))
            out.rows.append(_row(source, i, "shape", raw, shape=ln.shape, value=val,
                                 fields={**{x: v for x, v in f.items() if x != "variant"}, "variant": f["variant"]}))
        elif k == "shape_ctx" and "ms_per_tok" in f and "speedup" in f:
            out.rows.append(_row(source, i, "shape", raw, fields={"ctx": f["ctx"], "ms_per_tok": f["ms_per_tok"],
                                                                   "speedup": f["speedup"]}, value=f["ms_per_tok"]))
        elif k == "result":
            out.rows.append(_row(source, i, "result", raw, fields=f))
        elif k in ("fail", "warn"):
            out.rows.append(_row(source, i, k, raw))
        elif k == "traceback":
            out.rows.append(_row(source, i, "error", raw))
    return out


def parse_gpu_lock_log(text: str, source: str = "gpu_lock.log") -> LogSummary:
    out = LogSummary()
    for i, raw in enumerate(text.splitlines(), 1):
        m = _LOCK.match(raw.strip())
        if not m:
            continue
        ts, event, rest = m[1], m[2], m[3]
        kv: dict[str, Any] = {}
        # args=... is printf %q escaped and may contain '\ '; take it whole up to the end
        if "args=" in rest:
            head, args = rest.split("args=", 1)
            kv["args"] = args.replace("\\ ", " ")
            rest = head
        kv.update(_kv(rest))
        value = _num(kv.get("status")) if event == "end" else _num(kv.get("wait_timeout_s"))
        out.rows.append(_row(source, i, f"lock_{event}", raw, value=value, fields=kv, ts=_ts(ts)))
    return out


def log_kind(path: str) -> str | None:
    """Which parser a run file needs, from its name; None for files that are not runner logs."""
    name = path.rsplit("/", 1)[-1]
    if not name.endswith(".log"):
        return None
    if "gpu_lock" in name:
        return "gpu_lock"
    if "/" in path:  # runner logs live at the run root (scratch/*.log are the agent's own)
        return None
    if "check" in name:
        return "check"
    if "bench" in name:
        return "benchmark"
    return None


PARSERS = {"check": parse_check_log, "benchmark": parse_benchmark_log, "gpu_lock": parse_gpu_lock_log}
