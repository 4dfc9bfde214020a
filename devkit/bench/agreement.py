"""Measured agreement of the scan's verdict fields with a labeled corpus (issue 7 section 6).

    from devkit.bench.agreement import agreement, agreement_table
    a = agreement(store, "corpus/fixtures/labels.json")
    print(agreement_table(a))

`labels.json` (devkit/generator/labels.py) holds per run an `expected` block with the nine
verdict fields.  Agreement per field = runs whose adjudicated value equals the label / runs
labeled.  An `unknown` value counts as a disagreement (the tool did not decide what the label
states); the disagreements are listed with the rule that decided (or failed to decide) the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from forensics import verdict as V
from forensics.store.db import Store


def _norm(field: str, v: Any) -> Any:
    if isinstance(v, str) and v.lower() in ("true", "false") and field != "verdict":
        return v.lower() == "true"
    return v


def load_labels(path: str | Path) -> dict[str, dict[str, Any]]:
    data = orjson.loads(Path(path).read_bytes())
    runs = data.get("runs", data)
    return {k: r for k, r in runs.items() if isinstance(r, Mapping) and isinstance(r.get("expected"), Mapping)}


def agreement(store: Store, labels: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    lab = load_labels(labels) if not isinstance(labels, Mapping) else labels
    rows = {r["run_id"]: V.verdict_dict(r) for r in store.query("select * from verdicts")}
    by_name = {}
    for r in store.query("select run_id, run_name from runs"):
        by_name.setdefault(r["run_name"], r["run_id"])
    fields = {k: {"agree": 0, "total": 0, "unknown": 0} for k in V.FIELDS}
    disagreements: list[dict[str, Any]] = []
    missing: list[str] = []
    for key, lr in sorted(lab.items()):
        rid = key if key in rows else by_name.get(key) or by_name.get(key.split("@")[0])
        v = rows.get(rid) if rid else None
        exp = lr["expected"]
        if v is None:
            missing.append(key)
        for k in V.FIELDS:
            if k not in exp:
                continue
            fields[k]["total"] += 1
            ours = None if v is None else _norm(k, v.get(k))
            want = _norm(k, exp[k])
            if v is not None and ours == want:
                fields[k]["agree"] += 1
                continue
            if ours == V.UNKNOWN:
                fields[k]["unknown"] += 1
            disagreements.append({"run": key, "field": k, "expected": want, "ours": ours,
                                  "rule": (v or {}).get("rules", {}).get(k) if v else None,
                                  "scenario": lr.get("scenario"), "why": (v or {}).get("decided_by", {}).get(k)})
    for k, f in fields.items():
        f["rate"] = round(f["agree"] / f["total"], 4) if f["total"] else None
    total_a = sum(f["agree"] for f in fields.values())
    total_t = sum(f["total"] for f in fields.values())
    all_fields = sum(1 for key in lab if not any(d["run"] == key for d in disagreements))
    return {"runs": len(lab), "missing": missing, "fields": fields, "overall": round(total_a / total_t, 4) if total_t else None,
            "runs_all_fields_agree": all_fields, "disagreements": disagreements}


def agreement_table(a: dict[str, Any], max_disagreements: int = 40) -> str:
    lines = [f"{'field':<30} {'agree':>6} {'total':>6} {'rate':>7} {'unknown':>8}"]
    for k, f in a["fields"].items():
        rate = "-" if f["rate"] is None else f"{100 * f['rate']:.1f}%"
        lines.append(f"{k:<30} {f['agree']:>6} {f['total']:>6} {rate:>7} {f['unknown']:>8}")
    lines.append(f"{'overall':<30} {'':>6} {'':>6} {100 * (a['overall'] or 0):>6.1f}%")
    lines.append(f"runs with every field in agreement: {a['runs_all_fields_agree']}/{a['runs']}"
                 + (f"; {len(a['missing'])} labeled runs not in the store" if a["missing"] else ""))
    if a["disagreements"]:
        lines.append("")
        lines.append("disagreements (run, field: expected vs ours [rule]):")
        for d in a["disagreements"][:max_disagreements]:
            lines.append(f"  {d['run'][:70]} {d['field']}: {d['expected']!r} vs {d['ours']!r} [{d['rule']}]"
                         + (f" ({d['scenario']})" if d.get("scenario") else ""))
        if len(a["disagreements"]) > max_disagreements:
            lines.append(f"  ... {len(a['disagreements']) - max_disagreements} more")
    return "\n".join(lines)
