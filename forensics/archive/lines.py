"""The line grammar of check.py / benchmark.py output (spec sections 6 and 7).

The same lines reach us twice: in the runner's check.log / benchmark.log (`forensics.archive.logs`)
and in the results of the agent's own check and benchmark runs (`forensics.analyze.timeline.
outcome`).  `classify` reads one stripped line; each caller keeps the kinds it records.

    PASS                                   pass (the whole line; `kv=0x7PASS` is not)
    FAIL | FAIL: <reason>                  fail (shape / seed / case parsed when present)
    peak_fraction: <x>                     peak_fraction (value None when <x> is not a number)
    speedup: <x> | geomean_speedup_vs_eager: <x>      speedup
    RESULT: <label>                        result
    shape=<n> k=v ...                      shape (fields: the k=v pairs, as written)
    shape ctx=<n>: <text>                  shape_ctx (ctx, text; ms_per_tok, speedup when given)
    seed <n> ctx <n>: <detail> OK          seed_ok
    PROPERTY_SEED: <n>, cuda_language: k=v ..., WARN..., benchmark_event k=v ...
    Traceback ..., benchmark error: ...    traceback
    ValueError: ..., KeyboardInterrupt     exception
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_NUM = r"[-+0-9.eE]+|[-+]?(?i:nan|inf)"
_KV = re.compile(r"(\w+)=(\S+)")
_FAIL_SHAPE = re.compile(r"^FAIL: shape (\d+)\s+(\{.*?\}|\S+)?\s*seed (\d+)(?: case (\S+?))?:\s*(.*)$")
_FAIL_SHAPE_CASE = re.compile(r"^FAIL: shape (\d+) case (\S+)")
_MEGA_FAIL = re.compile(r"^FAIL: seed (\d+) ctx (\d+): (.*)$")
_SEED_FAIL = re.compile(r"^FAIL: seed[ =](\d+)")
_MEGA_SEED = re.compile(r"^seed (\d+) ctx (\d+): (.*) OK$")
_PEAK = re.compile(r"^peak_fraction:\s*(" + _NUM + r")\s*$")
_SPEEDUP = re.compile(r"^(?:speedup|geomean_speedup_vs_eager):\s*([-+]?\d+\.?\d*(?:[eE][-+]?\d+)?)\s*$")
_SHAPE = re.compile(r"^shape=(\d+)\s+(.*)$")
_SHAPE_CTX = re.compile(r"^shape ctx=(\d+):\s*(.*)$")
_CTX_MS = re.compile(r"^solution ([0-9.]+) ms/tok ")
_CTX_SPEEDUP = re.compile(r"speedup ([0-9.]+)x")
_EXC = re.compile(r"^(?:[\w.]+(?:Error|Exception|Interrupt)|error)(?::|$)")


def num(s: str | None) -> float | None:
    if s is None:
        return None
    try:
        return float(s)
    except ValueError:
        return None


def kv(text: str) -> dict[str, str]:
    """The ``key=value`` pairs of a line, values as written."""
    return dict(_KV.findall(text))


def is_fail(line: str) -> bool:
    return line == "FAIL" or line.startswith("FAIL:")


@dataclass(slots=True)
class Line:
    kind: str
    value: float | None = None
    shape: int | None = None
    seed: int | None = None
    case_name: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


def _fail(line: str) -> Line:
    m = _FAIL_SHAPE.match(line)
    if m:
        return Line("fail", shape=int(m[1]), seed=int(m[3]), case_name=m[4] or "nominal",
                    fields={"shape_desc": m[2], "msg": m[5]})
    m = _MEGA_FAIL.match(line)
    if m:
        return Line("fail", seed=int(m[1]), fields={"ctx": int(m[2]), "msg": m[3]})
    m = _FAIL_SHAPE_CASE.match(line)
    if m:
        return Line("fail", shape=int(m[1]), case_name=m[2])
    m = _SEED_FAIL.match(line)
    return Line("fail", seed=int(m[1]) if m else None)


def classify(line: str) -> Line | None:
    """The kind of one output line (already stripped), with what it carries; None for other text."""
    if not line:
        return None
    if line == "PASS":
        return Line("pass")
    if is_fail(line):
        return _fail(line)
    m = _PEAK.match(line)
    if m:
        return Line("peak_fraction", value=num(m[1]))
    m = _SPEEDUP.match(line)
    if m:
        return Line("speedup", value=float(m[1]))
    if line.startswith("RESULT:"):
        return Line("result", fields={"result": line.split(":", 1)[1].strip()})
    m = _SHAPE.match(line)
    if m:
        return Line("shape", shape=int(m[1]), fields=kv(m[2]))
    m = _SHAPE_CTX.match(line)
    if m:
        d: dict[str, Any] = {"ctx": int(m[1]), "text": m[2]}
        ms, sp = _CTX_MS.match(m[2]), _CTX_SPEEDUP.search(m[2])
        if ms:
            d["ms_per_tok"] = num(ms[1])
        if sp:
            d["speedup"] = float(sp[1])
        return Line("shape_ctx", fields=d)
    m = _MEGA_SEED.match(line)
    if m:
        return Line("seed_ok", seed=int(m[1]), fields={"ctx": int(m[2]), "detail": m[3]})
    if line.startswith("PROPERTY_SEED:"):
        return Line("property_seed", value=num(line.split(":", 1)[1].strip()))
    if line.startswith("cuda_language:"):
        return Line("cuda_language", fields=kv(line))
    if line.startswith("WARN"):
        return Line("warn")
    if line.startswith("benchmark_event "):
        f = kv(line)
        return Line("benchmark_event", shape=int(f["shape"]) if f.get("shape", "").isdigit() else None,
                    value=num(f.get("ms")), fields=f)
    if line.startswith(("Traceback", "benchmark error:")):
        return Line("traceback")
    if _EXC.match(line):
        return Line("exception")
    return None
