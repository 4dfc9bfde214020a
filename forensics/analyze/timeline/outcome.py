"""Parse the output of an in-transcript check/benchmark run (spec sections 6, 7 and 9.3-9.4)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from forensics.archive.lines import classify

_LABEL_RX = re.compile(r"(OK|LOW)\b")
_TIMEOUT_RX = re.compile(r"Command timed out|timed out after|TimeoutExpired", re.I)
_XML_RX = re.compile(r"<(retrieval_status|task_id|task_type|status|exit_code|output)>(.*?)</\1>", re.S)


def split_task_output(text: str) -> tuple[str, int | None, str | None]:
    """Claude TaskOutput XML-ish text -> (output, exit_code, status); plain text passes through."""
    if "<output>" not in text and "<exit_code>" not in text and "<status>" not in text:
        return text, None, None
    found = {m.group(1): m.group(2) for m in _XML_RX.finditer(text)}
    out = found.get("output")
    if out is None:
        i = text.find("<output>")
        out = text[i + len("<output>"):] if i >= 0 else ""
    ec = found.get("exit_code")
    try:
        ec_i = int(ec.strip()) if ec is not None and ec.strip() else None
    except ValueError:
        ec_i = None
    return out, ec_i, (found.get("status") or "").strip() or None


@dataclass
class Outcome:
    outcome: str = "UNKNOWN"
    fail_reason: str | None = None
    exit_code: int | None = None
    peak_fraction: float | None = None
    peak_fractions: list[float] = field(default_factory=list)
    result_labels: list[str] = field(default_factory=list)
    shape_lines: list[dict] = field(default_factory=list)
    n_pass_lines: int = 0
    reason: str | None = None


def parse_output(text: str, script: str, exit_code: int | None, filtered_by: str | None,
                 have_result: bool, still_running: bool = False, under_timeout: bool = False) -> Outcome:
    o = Outcome(exit_code=exit_code)
    lines = [ln.strip() for ln in (text or "").splitlines()]
    first_fail = None
    first_pass = None
    last_exc = None
    for k, ln in enumerate(lines):
        line = classify(ln)
        kind = line.kind if line is not None else None
        if kind == "pass":
            o.n_pass_lines += 1
            if first_pass is None:
                first_pass = k
        elif kind == "fail":
            if first_fail is None:
                first_fail = k
                o.fail_reason = ln
        elif kind == "peak_fraction":
            if line.value is not None:
                o.peak_fractions.append(line.value)
        elif kind == "speedup" and script != "check":
            o.peak_fractions.append(line.value)
        elif kind == "result":
            m = _LABEL_RX.match(line.fields["result"])
            if m:
                o.result_labels.append(m.group(1))
        elif kind == "shape":
            o.shape_lines.append({"shape": line.shape, **{kk: _num(vv) for kk, vv in line.fields.items()}})
        elif kind == "shape_ctx":
            o.shape_lines.append({kk: line.fields[kk] for kk in ("ctx", "text", "speedup") if kk in line.fields})
        elif kind == "exception":
            last_exc = ln
    if o.peak_fractions:
        o.peak_fraction = o.peak_fractions[-1]
    timed_out = exit_code == 124 or (bool(_TIMEOUT_RX.search(text or "")) and exit_code not in (0, None)) \
        or (exit_code is None and bool(re.search(r"Command timed out", text or ""))) \
        or (under_timeout and exit_code in (137, 143))
    ok_exit = exit_code in (None, 0)
    if timed_out:
        o.outcome, o.reason = "TIMEOUT", f"exit code {exit_code}" if exit_code is not None else "timed out"
    elif first_fail is not None:
        o.outcome = "FAIL"
    elif script in ("check", "wrapper") and first_pass is not None:
        if ok_exit:
            o.outcome = "PASS"
        else:
            o.outcome, o.fail_reason = "ERROR", f"PASS printed but exit code {exit_code}"
    elif script == "benchmark" and o.peak_fractions and ok_exit:
        o.outcome = "OK"
    elif not have_result or still_running:
        o.outcome, o.reason = "UNKNOWN", "output not returned in the transcript" if not have_result else "still running when last read"
    elif filtered_by and not (text or "").strip():
        o.outcome, o.reason = "UNKNOWN", f"output filtered by {filtered_by}"
    elif filtered_by and exit_code in (None, 0):
        o.outcome, o.reason = "UNKNOWN", f"PASS/FAIL not visible: output filtered by {filtered_by}"
    elif script == "wrapper" and exit_code in (None, 0):
        o.outcome, o.reason = "UNKNOWN", "wrapper printed no PASS/FAIL line"
    elif exit_code not in (None, 0) or last_exc:
        o.outcome = "ERROR"
        o.fail_reason = last_exc or f"exit code {exit_code}"
    elif script == "benchmark" and o.peak_fractions:
        o.outcome = "OK"
    else:
        o.outcome, o.reason = "UNKNOWN", "no PASS/FAIL line in the output"
    return o


def _num(v: str):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v
