"""scan.json: the machine-readable result of a scan, for scripts (written a batch of runs at a time).

    {"scan": {archive, db, runs, analyzed, skipped_unchanged, coverage, timings, exit_code, ...},
     "verdict_counts": {verdict: n},
     "runs": [{run_id, run_name, problem, harness, model, peak_fraction, verdict, reward_hack, contamination,
               correct, failure_reason, measurement_status, publish_grade, empirical_recompute_required,
               exclude_from_denominator, summary (plain language), implication, rule_trace,
               rules: {field: rule}, decided_by: {...}, archived: {...},
               findings: [{id, analyzer, rule, category, severity, message}],
               replay_account: {...} (replayed runs: where the replay's time went)}]}

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


_IDS = "(select unnest(?::VARCHAR[]))"


def _only(ids: Sequence[str]) -> tuple[str, list]:
    """A where clause (and its parameters) selecting the runs `ids` (sorted), their range first."""
    return (f"run_id between ? and ? and run_id in {_IDS}",
            [min(ids), max(ids), list(ids)] if ids else ["", "", []])


def _run_rows(store: Store, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The scan.json rows of the runs `ids` (sorted), from three queries over those runs only (their
    range first: the tables are in run order, so a page of runs reads the row groups of its range,
    not every table whole per page)."""
    where, params = _only(ids)
    runs = {r["run_id"]: r for r in store.query(
        "select run_id, run_name, problem, harness, model, bench, peak_fraction, has_solution from runs "
        f"where {where}", params)}
    verdicts = {r["run_id"]: V.verdict_dict(r) for r in store.query(f"select * from verdicts where {where}", params)}
    finds: dict[str, list[dict[str, Any]]] = {}
    prose_finds: dict[str, list[dict[str, Any]]] = {}   # what the plain-language summary reads
    for f in store.query("select run_id, finding_id, analyzer, rule, category, severity, message, probe, data from "
                         f"findings where analyzer <> 'pipeline' and {where} "
                         "order by run_id, severity, rule, finding_id", params):
        finds.setdefault(f["run_id"], []).append(
            {"id": f["finding_id"], "analyzer": f["analyzer"], "rule": f["rule"], "category": f["category"],
             "severity": f["severity"], "message": f["message"], "probe": f["probe"]})
        prose_finds.setdefault(f["run_id"], []).append({**f, "data": loads_json(f["data"])})
    accounts = replay_accounts(store, ids)
    out_runs = []
    for rid in ids:
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
        if rid in accounts:
            row["replay_account"] = accounts[rid]
        out_runs.append(row)
    return out_runs


def replay_accounts(store: Store, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """run_id -> where its replay's wall time went (forensics/replay/account.py), from the replay
    summary row `analyze` writes (probe `build`, data.info.account), for the runs `ids` (sorted);
    runs not replayed are absent."""
    where, params = _only(ids)
    out: dict[str, dict[str, Any]] = {}
    for r in store.query(f"select run_id, data from replay_results where detail like 'replay summary:%' and {where}",
                         params):
        acct = ((loads_json(r["data"]) or {}).get("info") or {}).get("account")
        if isinstance(acct, dict):
            out[r["run_id"]] = acct
    return out


def _verdict_counts(store: Store, ids: Sequence[str]) -> dict[str, int]:
    # (a run without a verdicts row counts as unknown; a row whose verdict is NULL as "None", as str() says it)
    got = store.con.execute(f"select case when v.run_id is null then ? else coalesce(v.verdict, 'None') end, count(*) "
                            f"from {_IDS} i(run_id) left join verdicts v using (run_id) group by 1",
                            [V.UNKNOWN, list(ids)]).fetchall()
    return dict(sorted((str(k), n) for k, n in got))


def scan_json(store: Store, run_ids: Sequence[str], scan_info: dict[str, Any]) -> dict[str, Any]:
    ids = sorted(set(run_ids))
    return {"scan": scan_info, "verdict_counts": _verdict_counts(store, ids), "runs": _run_rows(store, ids)}


def write_scan_json(store: Store, path: Path, run_ids: Sequence[str], scan_info: dict[str, Any],
                    batch: int = 1000) -> Path:
    """scan.json, as `orjson.dumps(scan_json(...), OPT_INDENT_2)` writes it, written `batch` runs at
    a time: what it holds is one batch's rows, whatever the archive's size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = sorted(set(run_ids))
    opt = orjson.OPT_INDENT_2
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "wb") as f:
        def member(key: str, value: Any, last: bool = False) -> None:
            body = orjson.dumps(value, default=str, option=opt).replace(b"\n", b"\n  ")
            f.write(b"  " + orjson.dumps(key) + b": " + body + (b"\n" if last else b",\n"))
        f.write(b"{\n")
        member("scan", scan_info)
        member("verdict_counts", _verdict_counts(store, ids))
        if not ids:
            f.write(b'  "runs": []\n}')
        else:
            f.write(b'  "runs": [\n')
            for i in range(0, len(ids), batch):
                rows = _run_rows(store, ids[i:i + batch])
                for k, row in enumerate(rows):
                    body = orjson.dumps(row, default=str, option=opt).replace(b"\n", b"\n    ")
                    f.write(b"    " + body + (b"\n" if i + k == len(ids) - 1 else b",\n"))
            f.write(b"  ]\n}")
    tmp.replace(path)
    return path


def load(path: str | Path) -> dict[str, Any]:
    return loads_json(Path(path).read_bytes())
