"""Gather what a report shows about one run: identity, verdict fields with what decided them,
findings, verbatim quotes from the cited files, and the trajectory of in-session checks.

Quotes are read from the archive through `forensics.archive.RunFiles` (read-only).  A quote's
`text` is always a verbatim substring of the cited line range of the cited file: whole lines when
the range is short, otherwise the first lines / the first characters of a huge line; if the file
cannot be read the quote is left out rather than reconstructed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from forensics import verdict as V
from forensics.analyze.findings import severity_key
from forensics.archive.lines import is_fail
from forensics.store.db import Store, loads_json
from forensics.store.archived import ARCHIVED_PROBE_LOG
from forensics.store.files import run_files

MAX_QUOTES = 10
MAX_QUOTE_LINES = 30
MAX_QUOTE_CHARS = 2400


def _read_lines(rf, path: str, wanted: set[int], max_line: int) -> dict[int, str]:
    """Stream `path` and keep the wanted 1-based lines (exact text without the newline).

    Read with the transcript reader (forensics.transcripts.reader), so the line numbers are the
    ingest's (gzip by magic bytes, a leading BOM skipped) and a damaged file - a truncated .gz, an
    I/O error - yields the lines decoded before the damage instead of an exception."""
    from forensics.transcripts import reader as R
    out: dict[int, str] = {}
    try:
        fh = rf.open(path)
    except (FileNotFoundError, OSError, ValueError):
        return out
    try:
        i = 0
        for kind, payload in R.iter_batches(R.Source(fh)):
            if kind == R.LINES or kind == R.LAST:
                for raw in payload:
                    i += 1
                    if i > max_line:
                        return out
                    if i in wanted:
                        out[i] = raw.rstrip(b"\r").decode("utf-8", "replace")
            elif kind == R.HUGE:
                i += 1
                if i in wanted:  # never assembled: its first characters (a prefix, still verbatim)
                    out[i] = payload.head.decode("utf-8", "replace").rstrip("\ufffd")
            elif kind == R.BLANK:  # blank lines, counted
                for k in range(i + 1, min(i + payload, max_line) + 1):
                    if k in wanted:
                        out[k] = ""
                i += payload
            else:  # FAIL: the damage; what came before it is kept
                break
            if i > max_line:
                break
    except Exception:  # noqa: BLE001 - a quote is optional; a report is not
        return out
    finally:
        try:
            fh.close()
        except Exception:  # noqa: BLE001
            pass
    return out


def _clip(text: str) -> str:
    if len(text) <= MAX_QUOTE_CHARS:
        return text
    return text[:MAX_QUOTE_CHARS]


def collect_quotes(store: Store, run_id: str, findings: list[dict[str, Any]], run: dict[str, Any]) -> list[dict[str, Any]]:
    """Quotes for the most severe findings' evidence, plus the archived grade lines."""
    wants: list[tuple[str, int, int, str]] = []  # file, a, b, label
    ranked = [f for f in findings if f["analyzer"] != "pipeline" and f["severity"] != "info"] or \
        [f for f in findings if f["analyzer"] != "pipeline"]
    for f in sorted(ranked, key=lambda f: (severity_key(f["severity"]), f["rule"])):
        for e in (f.get("evidence") or [])[:2]:
            if e.get("file") and e.get("line_start"):
                a = int(e["line_start"])
                b = int(e.get("line_end") or a)
                wants.append((e["file"], a, max(a, b), f"{f['rule']} ({f['severity']})"))
            elif e.get("transcript_line"):
                src = e.get("file") or "transcript.jsonl"
                n = int(e["transcript_line"])
                wants.append((src, n, n, f"{f['rule']} ({f['severity']}), call {e.get('call_seq') or '?'}"))
        if len(wants) >= MAX_QUOTES * 2:
            break
    try:
        rf = run_files(store, run_id)
    except Exception:  # noqa: BLE001 - no reader: no quotes (never reconstructed)
        return []
    # the archived grade: result.json lines of the fields the verdict reads, check.log FAIL line
    grade_lines: list[tuple[str, int, int, str]] = []
    text = rf.read_text("result.json") if run.get("has_result") else None
    if text:
        for i, line in enumerate(text.splitlines(), 1):
            s = line.strip()
            if s.startswith(('"correct"', '"failure_reason"', '"peak_fraction"', '"gpu_queue_mode"', '"has_solution"',
                             '"audit_empirical_failure"', '"mode"')):
                grade_lines.append(("result.json", i, i, "archived grade"))
    # auditors' archived probe logs (scratch/audit_*.log ...): the evidence a probe-decided field rests on
    for pth in rf.list("scratch/"):
        if ARCHIVED_PROBE_LOG.search(pth):
            t = rf.read_text(pth) or ""
            n = len(t.splitlines())
            if n:
                grade_lines.append((pth, 1, min(n, MAX_QUOTE_LINES), "archived probe log"))
    if run.get("check_fail_reason"):
        t = rf.read_text("check.log") or ""
        for i, line in enumerate(t.splitlines(), 1):
            if is_fail(line.strip()):   # the line check_fail_reason was read from
                grade_lines.append(("check.log", i, i, "official check FAIL"))
                break
    by_file: dict[str, set[int]] = {}
    for fpath, a, b, _ in wants + grade_lines:
        b2 = min(b, a + MAX_QUOTE_LINES - 1)
        by_file.setdefault(fpath, set()).update(range(a, b2 + 1))
    texts: dict[str, dict[int, str]] = {}
    for fpath, lines in by_file.items():
        texts[fpath] = _read_lines(rf, fpath, lines, max(lines))
    quotes: list[dict[str, Any]] = []
    seen: set[tuple[str, int, int]] = set()
    # merge result.json grade lines into one quote per contiguous block
    merged: list[tuple[str, int, int, str]] = []
    for q in grade_lines:
        if merged and merged[-1][0] == q[0] and merged[-1][3] == q[3] and q[1] <= merged[-1][2] + 3:
            merged[-1] = (q[0], merged[-1][1], q[2], q[3])
        else:
            merged.append(q)
    for fpath, a, b, label in wants[: MAX_QUOTES] + merged:
        key = (fpath, a, b)
        if key in seen:
            continue
        seen.add(key)
        got = texts.get(fpath, {})
        b2 = min(b, a + MAX_QUOTE_LINES - 1)
        if fpath == "result.json" and label == "archived grade":
            full = rf.read_text("result.json") or ""
            lines = full.splitlines()[a - 1:b]
            if not lines:
                continue
            quotes.append({"file": fpath, "lines": [a, a + len(lines) - 1], "label": label, "text": _clip("\n".join(lines))})
            continue
        if any(i not in got for i in range(a, b2 + 1)):
            continue
        text = "\n".join(got[i] for i in range(a, b2 + 1))
        quotes.append({"file": fpath, "lines": [a, b2], "label": label, "text": _clip(text)})
    return quotes


def trajectory(store: Store, run_id: str) -> list[Any]:
    """The annotation `trajectory` entries: the timeline engineer's function when present,
    else one line per in-session check/benchmark run from `check_runs`."""
    try:
        from forensics.analyze.timeline import trajectory_entries  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        trajectory_entries = None
    if trajectory_entries is not None:
        try:
            return list(trajectory_entries(store, run_id))
        except Exception:  # noqa: BLE001 - fall back to the table
            pass
    out = []
    for c in store.query("select * from check_runs where run_id = ? order by call_seq", [run_id]):
        bits = [f"call {c['call_seq']} (line {c['line']})", f"{c['script']} {c['outcome']}"]
        if c.get("peak_fraction") is not None:
            bits.append(f"peak_fraction {c['peak_fraction']}")
        if c.get("solution_version") is not None:
            bits.append(f"solution v{c['solution_version']}")
        if c.get("superseded"):
            bits.append("superseded by later edits")
        elif c.get("is_final_version"):
            bits.append("final version")
        if c.get("fail_reason"):
            bits.append(str(c["fail_reason"])[:120])
        out.append(", ".join(bits))
    return out


def replay_info(store: Store, run_id: str) -> dict[str, Any]:
    """What the replay of `run_id` said about itself (the `info` of the replay summary row
    `forensics.replay.analyze` writes: its time account, its deviations from the archived build), or
    {} for a run not replayed."""
    for r in store.query("select data from replay_results where run_id = ? and detail like 'replay summary:%' "
                         "order by ran_at desc", [run_id]):
        info = (loads_json(r["data"]) or {}).get("info")
        if isinstance(info, dict):
            return info
    return {}


def run_report(store: Store, run_id: str, with_quotes: bool = True) -> dict[str, Any]:
    """Everything the YAML/JSON/HTML writers need for one run."""
    run = store.query("select * from runs where run_id = ?", [run_id])[0]
    vrow = store.query("select * from verdicts where run_id = ?", [run_id])
    v = V.verdict_dict(vrow[0]) if vrow else None
    findings = store.query("select * from findings where run_id = ? order by case severity when 'critical' then 0 "
                           "when 'high' then 1 when 'medium' then 2 when 'low' then 3 else 4 end, analyzer, rule", [run_id])
    for f in findings:
        f["evidence"] = loads_json(f.get("evidence")) or []
        f["data"] = loads_json(f.get("data"))
    session = (store.query("select * from session_end where run_id = ?", [run_id]) or [None])[0]
    foreign = store.query("select * from foreign_refs where run_id = ? order by call_seq", [run_id])
    sims = store.query("select * from similarity_pairs where a_id = ? or b_id = ? order by jaccard desc nulls last limit 20",
                       [run_id, run_id])
    checks = store.query("select call_seq, line, script, outcome, exit_code, peak_fraction, solution_version, "
                         "is_final_version, superseded, fail_reason from check_runs where run_id = ? order by call_seq", [run_id])
    versions = store.query("select path, rel_path, version, call_seq, line, op, sha256, n_lines, gap, matches_final "
                           "from file_versions where run_id = ? order by path, version", [run_id])
    replay = store.query("select probe, status, case_name, max_abs, n_bad, n_total, device, detail from replay_results "
                         "where run_id = ?", [run_id])
    quotes = collect_quotes(store, run_id, findings, run) if with_quotes else []
    return {"run": run, "verdict": v, "findings": findings, "session": session, "foreign": foreign,
            "similar": sims, "checks": checks, "versions": versions, "replay": replay, "quotes": quotes,
            "replay_info": replay_info(store, run_id),
            "trajectory": trajectory(store, run_id), "result": loads_json(run.get("result_json")) or {}}


_OVERVIEW = ("select r.run_id, r.run_name, r.problem, r.harness, r.model, r.bench, r.peak_fraction, "
             "r.n_tool_calls, r.transcript_bytes, v.verdict, v.reward_hack, v.contamination, v.correct, "
             "v.failure_reason, v.measurement_status, v.publish_grade, v.empirical_recompute_required, "
             "v.exclude_from_denominator, v.archived, coalesce(h.n, 0) as n_high "
             "from runs r left join verdicts v using (run_id) "
             "left join (select run_id, count(*) as n from findings where analyzer <> 'pipeline' and "
             " severity in ('high','critical') group by run_id) h using (run_id) ")


def runs_overview(store: Store, run_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    return list(iter_runs_overview(store, run_ids))


def iter_runs_overview(store: Store, run_ids: Sequence[str] | None = None, batch: int = 1000
                       ) -> Iterator[dict[str, Any]]:
    """The index's row of each run (of `run_ids`, all if None), in run id order, read `batch` rows
    at a time (a cursor of its own: the index of a large archive never holds every row)."""
    cur = store.con.cursor()
    try:
        if run_ids is None:
            cur.execute(_OVERVIEW + "order by r.run_id")
        else:
            cur.execute(_OVERVIEW + "where r.run_id in (select unnest(?::VARCHAR[])) order by r.run_id", [list(run_ids)])
        names = [d[0] for d in cur.description]
        while True:
            got = cur.fetchmany(batch)
            if not got:
                break
            for row in got:
                r = dict(zip(names, row))
                r["archived"] = loads_json(r.get("archived"))
                yield r
    finally:
        cur.close()
