"""What kept the scan from being linear in runs (issue 39), each checked by what it reads or runs, not
by timing it (BENCHMARKS.md "Scaling in runs" has the times): provenance reads the runs it analyses
and the runs they name, not every run; one statement per table where there was one per run; the
annotations folder listed once; the key findings in one query."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from forensics import pipeline as P
from forensics.analyze import findings as FD
from forensics.analyze import provenance
from forensics.store import archived as A
from forensics.store.db import Store


class _Counting:
    """A connection that counts the statements run through it (and the rows fetched)."""

    def __init__(self, con):
        self._con = con
        self.sql: list[str] = []

    def execute(self, sql, *a, **k):
        self.sql.append(sql)
        return self._con.execute(sql, *a, **k)

    def __getattr__(self, name):
        return getattr(self._con, name)


def test_provenance_reads_the_runs_it_needs_not_every_run():
    me = "20260803_120000_grok_grok-5_04_kahan_softmax"
    a = "20260801_090000_claude_claude-fable-5_04_kahan_softmax"
    store = Store(":memory:")
    t0 = datetime(2026, 7, 1)
    others = [{"run_id": f"20260701_{i:06d}_claude_m_04_kahan_softmax", "run_name": f"20260701_{i:06d}_claude_m_04_kahan_softmax",
               "problem": "04_kahan_softmax", "run_ts": t0 + timedelta(seconds=i), "peak_fraction": 0.5 + i / 10_000}
              for i in range(400)]
    store.insert_rows("runs", [
        {"run_id": me, "run_name": me, "problem": "04_kahan_softmax", "run_ts": datetime(2026, 8, 3, 12),
         "transcript_format": "grok_stream"},
        {"run_id": a, "run_name": a, "problem": "04_kahan_softmax", "run_ts": datetime(2026, 8, 1, 9), "peak_fraction": 0.0412},
        *others])
    text = f"Let me cat /home/u/outputs/runs/{a}/solution.py to see what worked. It scored 0.0412 there, and 0.5123."
    store.insert_rows("record_rows", [{"run_id": me, "source": "transcript.jsonl", "line": 1, "rtype": "thought",
                                       "text": text}])
    rows_read = []
    orig = store.query

    def query(sql, params=None):
        got = orig(sql, params)
        if " from runs" in sql:
            rows_read.append(len(got))
        return got
    store.query = query
    provenance.analyze(store, [me])
    assert sum(rows_read) <= 10, rows_read     # itself, the run it names, the runs near the two scores: not all 402
    f = {r["rule"]: r for r in orig("select * from findings where run_id = ?", [me])}
    msg = " ".join(r["message"] for r in orig("select message from findings where run_id = ? and "
                                              "rule = 'stream-foreign-score'", [me]))
    assert "0.0412" in msg and a in msg
    assert "0.5123" in msg and others[123]["run_id"] in msg       # an earlier run of that score
    assert f["stream-foreign-mention"]["severity"] == "high"


def test_findings_of_many_runs_are_replaced_in_one_statement():
    store = Store(":memory:")
    ids = [f"r{i}" for i in range(50)]
    store.insert_rows("findings", [{"run_id": r, "finding_id": "x", "analyzer": "pipeline", "rule": "r"} for r in ids])
    store.insert_rows("findings", [{"run_id": "r0", "finding_id": "y", "analyzer": "other", "rule": "r"}])
    store.con = _Counting(store.con)
    FD.write_findings(store, "pipeline", ids[:40], [])
    assert sum("DELETE" in s.upper() for s in store.con.sql) == 1
    assert store.scalar("select count(*) from findings where analyzer = 'pipeline'") == 10
    assert store.scalar("select count(*) from findings where analyzer = 'other'") == 1


def test_update_runs_sets_each_runs_values_in_one_statement():
    store = Store(":memory:")
    store.insert_rows("verdicts", [{"run_id": f"r{i}", "verdict": "clean"} for i in range(5)])
    store.con = _Counting(store.con)
    when = datetime(2026, 12, 1)
    store.update_runs("verdicts", ["input_fingerprint", "adjudicated_at"],
                      [("r1", "a", when), ("r3", None, when), ("zz", "b", when)])
    assert sum("UPDATE" in s.upper() for s in store.con.sql) == 1
    got = {r["run_id"]: (r["input_fingerprint"], r["adjudicated_at"]) for r in
           store.query("select run_id, input_fingerprint, adjudicated_at from verdicts")}
    assert got["r1"][0] == "a" and got["r1"][1].replace(tzinfo=None) == when and got["r3"][0] is None
    assert got["r0"] == (None, None) and "zz" not in got


def test_annotation_folder_listed_once_and_found_as_before(tmp_path: Path, monkeypatch):
    d = tmp_path / "ann"
    d.mkdir()
    names = ["20260801_101500_claude_m_01_fp8_gemm", "run[1]_x", "a", "a_b", "plain"]
    for f in ("20260801_101500_claude_m_01_fp8_gemm_b200.yaml", "20260801_101500_claude_m_01_fp8_gemm_a.yml",
              "run[1]_x_1.yaml", "a.yaml", "a_b_z.yaml", "a_q.txt", "plain_.yaml", "plain_x.yxml"):
        (d / f).write_text("verdict: clean\n")
    (d / "a_dir.yaml").mkdir()
    want = {n: A.find_annotation(n, [d]) for n in [*names, "missing"]}
    import os
    calls = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p: calls.append(p) or real(p))
    listings: dict = {}
    got = {n: A.find_annotation(n, [d], listings) for n in [*names, "missing"]}
    assert got == want and len(calls) == 1
    assert want["a_b"].name == "a_b_z.yaml" and want["plain"].name == "plain_.yaml" and want["missing"] is None


def test_key_findings_in_one_query_as_per_run(tmp_path: Path):
    store = Store(":memory:")
    rows = []
    for i in range(6):
        for j, (sev, rule) in enumerate([("high", "b-rule"), ("critical", "z-rule"), ("medium", "a-rule"),
                                         ("low", "c-rule"), ("high", "b-rule"), ("medium", f"m{i}")][: i + 1]):
            rows.append({"run_id": f"r{i}", "finding_id": f"f{j}", "analyzer": "static", "rule": rule, "severity": sev})
    rows.append({"run_id": "r5", "finding_id": "p", "analyzer": "pipeline", "rule": "cov", "severity": "critical"})
    store.insert_rows("findings", rows)
    old = {}
    for i in range(7):     # the per-run query it replaces
        old[f"r{i}"] = ", ".join(r["rule"] for r in store.query(
            "select rule, min(case severity when 'critical' then 0 when 'high' then 1 else 2 end) as s from findings "
            "where run_id = ? and analyzer <> 'pipeline' and severity in ('critical', 'high', 'medium') "
            "group by rule order by s, rule limit 3", [f"r{i}"]))
    new = P.key_findings_of(store, [f"r{i}" for i in range(7)])
    assert {k: new.get(k, "") for k in old} == old
    assert old["r5"] == "z-rule, b-rule, a-rule" and old["r6"] == ""


def test_a_released_listing_vouches_for_nothing_and_lists_again(tmp_path: Path):
    from forensics.archive.source import DirSource
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("x")
    import time
    time.sleep(2.1)          # older than STAMP_SETTLE_NS: its stat can vouch for it
    src = DirSource(tmp_path)
    assert [e.path for e in src.entries() if not e.is_dir] == ["a/f.txt"] and src.stamp("a/f.txt")
    src.release_listing()
    assert src.stamp("a/f.txt") is None                      # its content is hashed, not trusted
    assert [e.path for e in src.entries() if not e.is_dir] == ["a/f.txt"]


def test_a_store_files_duckdb_memory_is_bounded(tmp_path: Path, monkeypatch):
    import pytest
    from forensics.store import db as D
    with Store(tmp_path / "a.duckdb") as st:
        assert st.scalar("select current_setting('memory_limit')").startswith("953")     # 1GB (1000^3 B)
    monkeypatch.setenv("FORENSICS_DUCKDB_MEMORY_LIMIT", "512MB")
    with Store(tmp_path / "b.duckdb") as st:
        assert st.scalar("select current_setting('memory_limit')").startswith("488")
    monkeypatch.setenv("FORENSICS_DUCKDB_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="FORENSICS_DUCKDB_MEMORY_LIMIT"):
        D.memory_limit()


def test_similarity_keeps_no_tokens_yet_aligns_spans_and_bounds_the_lexer_caches(monkeypatch):
    import random

    from devkit.generator.tiny import tiny_solution
    from forensics.text import code as C
    rng = random.Random(4)
    a = tiny_solution("01_fp8_gemm", rng)
    b = a.replace("acc = x", "acc = y + x", 1)
    full = C.aligned_spans(C.build_doc("a", {"solution.py": a}), C.build_doc("b", {"solution.py": b}))
    lean_a, lean_b = C.build_doc("a", {"solution.py": a}, keep_where=False), C.build_doc("b", {"solution.py": b}, keep_where=False)
    assert not lean_a.tokens and full and C.aligned_spans(lean_a, lean_b) == full
    monkeypatch.setattr(C, "TOKEN_CACHE_MAX", 500)
    ids = [C.lex_file_ids("solution.py", tiny_solution("01_fp8_gemm", random.Random(i)))[0] for i in range(40)]
    assert len(C._PY_IDS) + len(C._CPP_IDS) + len(C._TOKEN_ID) < 500 + 2000      # emptied past the bound
    again = [C.lex_file_ids("solution.py", tiny_solution("01_fp8_gemm", random.Random(i)))[0] for i in range(40)]
    assert all((x == y).all() for x, y in zip(ids, again))                      # the same ids after a refill


def test_verdict_and_scan_json_batches_read_their_run_range():
    """Adjudication (500 runs a batch) and scan.json (1,000 a page) read each table by the batch's
    run-id range as well as its ids: DuckDB then reads the row groups of that range, where an id
    list alone scanned every table whole for every batch (quadratic in runs).  The rows are those
    of the batch's runs, in a batch given out of order too."""
    from forensics import verdict as V
    from forensics.report import jsonout as J
    store = Store(":memory:")
    ids = [f"2026{i:04d}_r" for i in range(60)]
    store.insert_rows("runs", [{"run_id": r, "run_name": r, "problem": "p"} for r in ids])
    store.insert_rows("findings", [{"run_id": r, "finding_id": f"f{k}", "analyzer": "static", "rule": f"R{k}",
                                    "severity": "low", "message": r} for r in ids for k in range(2)])
    store.insert_rows("check_runs", [{"run_id": r, "call_seq": 1, "outcome": "pass"} for r in ids])
    store.insert_rows("verdicts", [{"run_id": r, "verdict": "clean"} for r in ids])
    batch = [ids[31], ids[12], ids[40], ids[25]]          # out of order, gaps between them
    store.con = _Counting(store.con)
    facts = V.load_facts(store, batch)
    rows = J._run_rows(store, sorted(batch))
    reads = [s for s in store.con.sql if "run_id in" in s]
    assert reads and all("run_id between ? and ?" in s for s in reads), [s for s in reads if "between" not in s]
    assert set(facts) == set(batch)
    assert {f["message"] for rid in batch for f in facts[rid].findings} == set(batch)
    assert all(len(facts[rid].check_runs) == 1 for rid in batch)
    assert [r["run_id"] for r in rows] == sorted(batch) and all(len(r["findings"]) == 2 for r in rows)
