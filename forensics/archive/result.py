"""result.json in every era (spec archive-format.md section 3) and format-era inference (section 0)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import orjson

_LOOSE_KV = re.compile(r'"(\w+)"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)')


def read_result(data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """Parse result.json; on invalid JSON (the runner's heredoc can break on a quote), recover the
    flat key/value pairs and report the error.  Returns (result, error)."""
    if not data.strip():
        return None, "empty result.json"
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        text = data.decode("utf-8", "replace")
        rec: dict[str, Any] = {}
        for k, v in _LOOSE_KV.findall(text):
            try:
                rec.setdefault(k, orjson.loads(v))
            except orjson.JSONDecodeError:
                rec.setdefault(k, v.strip('"'))
        return (rec or None), f"invalid JSON ({e}); recovered {len(rec)} flat keys"
    if not isinstance(obj, dict):
        return None, f"result.json is a {type(obj).__name__}, not an object"
    return obj, None


def _dt(v: Any) -> datetime | None:
    if not isinstance(v, str):
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None


def as_bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return None


def as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def as_float(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def result_fields(res: dict[str, Any] | None) -> dict[str, Any]:
    """The runs-table columns that come from result.json."""
    r = res or {}
    regrade = r.get("regrade") if isinstance(r.get("regrade"), dict) else None
    gpu = r.get("gpu_name") if isinstance(r.get("gpu_name"), str) else None
    if regrade and isinstance(regrade.get("gpu_name"), str):
        gpu = regrade["gpu_name"]
    return {
        "model": r.get("model") if isinstance(r.get("model"), str) else None,
        "reasoning_effort": r.get("reasoning_effort") if isinstance(r.get("reasoning_effort"), str) else None,
        "started_at": _dt(r.get("started_at")),
        "finished_at": _dt(r.get("finished_at")),
        "has_solution": as_bool(r.get("has_solution")),
        "correct": as_bool(r.get("correct")),
        "failure_reason": r.get("failure_reason") if isinstance(r.get("failure_reason"), str) else None,
        "peak_fraction": as_float(r.get("peak_fraction")),
        "template_mutated": as_bool(r.get("template_mutated")),
        "session_complete": as_bool(r.get("session_complete")),
        "harness_exit_code": as_int(r.get("harness_exit_code")),
        "check_exit_code": as_int(r.get("check_exit_code")),
        "benchmark_exit_code": as_int(r.get("benchmark_exit_code")),
        "elapsed_seconds": as_float(r.get("elapsed_seconds")),
        "regrade_json": regrade,
        "gpu_name": gpu,
    }


_E5 = datetime(2026, 8, 7)
_E4 = datetime(2026, 7, 15)
_E3 = datetime(2026, 6, 26)
_E2 = datetime(2026, 6, 1)
_E1 = datetime(2026, 5, 14)


def infer_era(files: set[str], res: dict[str, Any] | None, run_ts: datetime | None,
              check_has_property_seed: bool = False) -> tuple[str, str]:
    """Format era E0..E5 from the files present, result.json keys and the run date."""
    keys = set(res or {})
    has = lambda prefix: any(f == prefix or f.startswith(prefix + "/") for f in files)  # noqa: E731
    if has("trusted_src") or check_has_property_seed:
        return "E5", "trusted_src/ present" if has("trusted_src") else "check.log prints PROPERTY_SEED"
    if not has("repo") and not has("template_files") and "gpu_lock.log" not in files and (not keys or "run_id" not in keys):
        return "E0", f"no repo/, template_files/ or gpu_lock.log; result.json has {len(keys)} keys"
    if run_ts is not None:
        if run_ts >= _E5:  # E5 needs its own evidence (trusted_src/, PROPERTY_SEED); without it the runner was older
            return "E4", f"run date {run_ts:%Y-%m-%d} is in E5's time but no trusted_src/ or PROPERTY_SEED"
        if run_ts >= _E4 or "regrade" in keys or res and res.get("check_timeout_seconds") == 1800:
            return "E4", f"run date {run_ts:%Y-%m-%d} / check timeout 1800 / regrade object"
        if run_ts >= _E3:
            return "E3", f"run date {run_ts:%Y-%m-%d} in 2026-06-26..07-14"
        if run_ts >= _E2 or "check_timeout_seconds" in keys:
            return "E2", "check_timeout_seconds present" if "check_timeout_seconds" in keys else f"run date {run_ts:%Y-%m-%d}"
        return "E1", "template_files/ or repo/ present before 2026-06-01"
    if "check_timeout_seconds" in keys:
        return "E2", "check_timeout_seconds present (no date)"
    return "E1", "template_files/ or repo/ present (no date)"
