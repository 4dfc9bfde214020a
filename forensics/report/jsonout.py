"""scan.json: the machine-readable result of a scan, for scripts.

    {"scan": {archive, db, runs, analyzed, skipped_unchanged, coverage, timings, exit_code, ...},
     "verdict_counts": {verdict: n},
     "runs": [{run_id, run_name, problem, harness, model, peak_fraction, verdict, reward_hack, contamination,
               correct, failure_reason, measurement_status, publish_grade, empirical_recompute_required,
               exclude_from_denominator, summary (plain language), implication, rule_trace,
               rules: {field: rule}, decided_by: {...}, archived: {...},
               findings: [{id, analyzer, rule, category, severity, message}]}]}

Booleans are JSON booleans; an undecided field is the string "unknown" (reason in decided_by).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from forensics import verdict as V
from forensics.report.prose import implication, reader_summary
from forensics.store.db import Store, loads_json


def scan_json(store: Store, run_ids: Sequence[str], scan_info: dict[str, Any]) -> dict[str, Any]:
    want = set(run_ids)
    runs = {r["run_id"]: r for r in store.query(
        "select run_id, run_name, problem, harness, model, bench, peak_fraction, has_solution from runs")
        if r["run_id"] in want}
    verdicts = {r["run_id"]: V.verdict_dict(r) for r in store.query("select * from verdicts") if r["run_id"] in want}
    finds: dict[str, list[dict[str, Any]]] = {}
    prose_finds: dict[str, list[dict[str, Any]]] = {}   # what the plain-language summary reads
    for f in store.query("select run_id, finding_id, analyzer, rule, category, severity, message, probe, data from "
                         "findings where analyzer <> 'pipeline' order by run_id, severity, rule"):
        if f["run_id"] in want:
            finds.setdefault(f["run_id"], []).append(
                {"id": f["finding_id"], "analyzer": f["analyzer"], "rule": f["rule"], "category": f["category"],
                 "severity": f["severity"], "message": f["message"], "probe": f["probe"]})
            prose_finds.setdefault(f["run_id"], []).append({**f, "data": loads_json(f["data"])})
    out_runs = []
    counts: dict[str, int] = {}
    for rid in sorted(want):
        r = runs.get(rid, {"run_id": rid})
        v = verdicts.get(rid) or {}
        row = dict(r)
        for k in V.FIELDS:
            row[k] = v.get(k, V.UNKNOWN)
        row["rules"] = v.get("rules")
        row["decided_by"] = v.get("decided_by")
        row["archived"] = v.get("archived")
        prose_rep = {"run": r, "verdict": v or None, "findings": prose_finds.get(rid, [])}
        row["summary"] = reader_summary(prose_rep) if v else None
        row["implication"] = implication(v or None, r)
        row["rule_trace"] = v.get("summary")
        row["findings"] = finds.get(rid, [])
        counts[str(row["verdict"])] = counts.get(str(row["verdict"]), 0) + 1
        out_runs.append(row)
    return {"scan": scan_info, "verdict_counts": dict(sorted(counts.items())), "runs": out_runs}


def write_scan_json(store: Store, path: Path, run_ids: Sequence[str], scan_info: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = scan_json(store, run_ids, scan_info)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(orjson.dumps(data, default=str, option=orjson.OPT_INDENT_2))
    tmp.replace(path)
    return path


def load(path: str | Path) -> dict[str, Any]:
    return loads_json(Path(path).read_bytes())
