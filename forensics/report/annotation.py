"""Annotation YAML in the auditors' schema (spec/archive-format.md 4.1), one file per run.

Identity (run_id, model, harness, problem, gpu), peak_fraction, verdict and the separate status
fields (reward_hack, contamination, correct, failure_reason, measurement_status, publish_grade,
empirical_recompute_required, exclude_from_denominator), summary, quotes
[{file, lines: [a, b], label, text}] with verbatim text, implication, trajectory, and the
provenance of the judgement (decided_by, the archived-verdict comparison, the tool version).
Unknown fields are written as the string ``unknown``; the reason is under ``decided_by``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from forensics import verdict as V
from forensics.report.data import implication


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # libyaml when available (10x faster)
    pass


def _str_presenter(dumper, data: str):
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_presenter)


def _plain(v: Any) -> Any:
    """JSON-ish values only (datetimes -> str)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def annotation_dict(rep: dict[str, Any]) -> dict[str, Any]:
    run, v = rep["run"], rep["verdict"] or {}
    result = rep.get("result") or {}
    harness = run.get("harness") or result.get("harness")
    d: dict[str, Any] = {
        "run_id": run.get("run_name") or run["run_id"],
        "model": run.get("model") or result.get("model") or run.get("model_slug"),
        "harness": harness,
        "effort": run.get("reasoning_effort") if run.get("reasoning_effort") is not None else result.get("reasoning_effort"),
        "problem": run.get("problem"),
        "bench": run.get("bench"),
    }
    if run.get("gpu_name"):
        d["gpu_name"] = run["gpu_name"]
    d["peak_fraction"] = run.get("peak_fraction")
    d["verdict"] = V._fmt(v.get("verdict", V.UNKNOWN))
    for k in ("reward_hack", "contamination", "correct", "failure_reason", "measurement_status", "publish_grade",
              "empirical_recompute_required", "exclude_from_denominator"):
        val = v.get(k, V.UNKNOWN) if v else V.UNKNOWN
        d[k] = val if (isinstance(val, bool) or val is None) else str(val)   # None: not applicable (nothing measured)
    d["summary"] = v.get("summary") or ""
    d["quotes"] = [{"file": q["file"], "lines": list(q["lines"]), "label": q["label"], "text": q["text"]}
                   for q in rep.get("quotes", [])]
    d["implication"] = implication(v)
    d["trajectory"] = _plain(rep.get("trajectory") or [])
    d["findings"] = [{"id": f["finding_id"], "rule": f["rule"], "category": f["category"], "severity": f["severity"],
                      "message": f["message"]} for f in rep.get("findings", []) if f["analyzer"] != "pipeline"]
    d["decided_by"] = _plain(v.get("decided_by") or {})
    arch = v.get("archived") or {}
    if arch:
        d["archived_verdict_check"] = _plain({k: {kk: vv for kk, vv in e.items() if kk in ("status", "archived", "source")}
                                              for k, e in (arch.get("fields") or {}).items()})
        if arch.get("source"):
            d["archived_annotation"] = arch["source"]
        if arch.get("annotation_error"):
            d["archived_annotation_error"] = arch["annotation_error"]
    d["auditor"] = "forensics scan (automated; decision table docs/verdict.md)"
    return d


def dump_annotation(d: dict[str, Any]) -> str:
    return yaml.dump(d, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False)


def write_annotation(rep: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(dump_annotation(annotation_dict(rep)), encoding="utf-8")
    tmp.replace(path)
    return path
