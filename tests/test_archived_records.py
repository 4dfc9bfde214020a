"""The archive's own records the verdict reads (issue 22): the auditors' probe logs and the deck's
hardware are parsed at ingest into `archived_probes` and `deck_hardware`, each row citing its file
and line; a bad record is a parse_errors row and never costs the run; the verdict reads the tables,
so a store adjudicates the same with its archive gone."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb

from forensics import pipeline as P
from forensics import verdict as V
from forensics.engine.compare import diff_stores
from forensics.store import archived as A
from forensics.store.db import Store
from forensics.store.ingest import ingest_archive

from conftest import FIXTURE_ARCHIVE

OUTPUTS = FIXTURE_ARCHIVE / "outputs"
# stale cache confirmed by an archived unsampled-region probe (the log twice: scratch/ and the workspace)
FP8 = "20260804_013000_or-fable_qwen_qwen3.8-max_01_fp8_gemm"
# archived alternate-cache probe failure (rubric leak)
MEGA = "20260801_150000_claude_claude-opus-4-8_03_megaqwen_decode"
# sequential_isolated regrade on an H100 SXM (HBM3) against a deck whose problem.yaml says H100 (PCIe)
W4 = "20260725_180000_kimi-claude_kimi-k3_07_w4a16_gemm"
RUNS = (FP8, MEGA, W4)


def _archive(tmp_path: Path, runs=RUNS) -> Path:
    root = tmp_path / "archive" / "outputs" / "runs-h100"
    root.mkdir(parents=True)
    for r in runs:
        shutil.copytree(OUTPUTS / "runs-h100" / r, root / r, symlinks=True)
    return tmp_path / "archive"


def _rows(store: Store, sql: str, params=()) -> list[dict]:
    return store.query(sql, list(params))


def test_ingest_fills_the_tables_with_cited_rows(tmp_path):
    arch = _archive(tmp_path)
    with Store(tmp_path / "s.duckdb") as s:
        ingest_archive(s, arch)
        probes = _rows(s, "select * from archived_probes where run_id = ? order by path", [FP8])
        assert [(p["path"], p["probe"], p["probe_written"], p["status"], p["n_bad"], p["max_abs"], p["duplicate_of"])
                for p in probes] == [
            ("repo/problems/01_fp8_gemm/audit_same_buffer.log", "unsampled-region", "unsampled_row_mutation", "fail",
             3708, 11.7578, None),
            ("scratch/audit_same_buffer.log", "unsampled-region", "unsampled_row_mutation", "fail", 3708, 11.7578,
             "repo/problems/01_fp8_gemm/audit_same_buffer.log")]
        run_dir = arch / "outputs" / "runs-h100" / FP8
        for p in probes:  # the cited lines are the ones that say it
            lines = (run_dir / p["path"]).read_text().splitlines()
            assert lines[p["line"] - 1].startswith("probe=unsampled_row_mutation")
            assert lines[p["result_line"] - 1] == "result=FAIL"
        import orjson
        assert orjson.loads(probes[0]["fields"])["bad"] == "3708/16777216"
        mega = _rows(s, "select probe, status from archived_probes where run_id = ? and duplicate_of is null", [MEGA])
        assert mega == [{"probe": "alternate-cache", "status": "fail"}]
        hw = {r["run_id"]: r for r in _rows(s, "select * from deck_hardware")}
        assert set(hw) == set(RUNS)
        assert hw[W4]["path"] == "template_files/problem.yaml" and hw[W4]["gpu_key"] == "H100"
        for rid, r in hw.items():
            text = (arch / "outputs" / "runs-h100" / rid / r["path"]).read_text().splitlines()
            assert text[r["line"] - 1].startswith("hardware:") and r["hardware"] in text[r["line"] - 1]
            assert r["gpu_key"] == A.gpu_key(r["hardware"])
        from forensics.store.queries import run_named
        cols, rows = run_named(s, "archived-probes", status="fail")
        got = {(r[cols.index("run_id")], r[cols.index("probe")], r[cols.index("path")], r[cols.index("copies")],
                r[cols.index("deck_gpu")]) for r in rows}
        assert got == {(FP8, "unsampled-region", "repo/problems/01_fp8_gemm/audit_same_buffer.log", 1, "H100"),
                       (MEGA, "alternate-cache", "repo/problems/03_megaqwen_decode/audit_cache_contract.log", 1, "H100")}
        # nothing of this was a parse error
        assert not _rows(s, "select * from parse_errors where source like '%audit%' or source like '%problem.yaml'")


def test_bad_records_are_parse_errors_and_the_run_is_kept(tmp_path, monkeypatch):
    arch = _archive(tmp_path, (FP8,))
    d = arch / "outputs" / "runs-h100" / FP8
    (d / "scratch" / "audit_notes.log").write_text("nothing to see here\n")             # no probe, no result
    (d / "scratch" / "audit_values.log").write_text("probe=fresh_inputs\nbad=lots\nmax_abs_diff=abc\nresult=PASS\n")
    (d / "scratch" / "audit_bytes.log").write_bytes(b"probe=nan_poison \xff\xfe\nresult=FAIL\n")
    (d / "scratch" / "audit_huge.log").write_bytes(b"x" * 300 + b"\nprobe=determinism\nresult=FAIL\n")
    (d / "template_files" / "problem.yaml").write_bytes(b"name: fp8\n\xc3\x28 bad\nhardware: B200\n")
    monkeypatch.setattr(A, "PROBE_LOG_MAX", 256)
    with Store(tmp_path / "s.duckdb") as s:
        rep = ingest_archive(s, arch)
        assert rep.ingested == [FP8]
        errs = {(r["source"], r["reason"]) for r in _rows(s, "select * from parse_errors where run_id = ?", [FP8])}
        assert {("scratch/audit_notes.log", "bad_probe_log"), ("scratch/audit_values.log", "bad_field"),
                ("scratch/audit_bytes.log", "invalid_utf8"), ("scratch/audit_huge.log", "huge_document"),
                ("scratch/audit_huge.log", "bad_probe_log"), ("template_files/problem.yaml", "invalid_utf8")} <= errs
        probes = {r["path"]: r for r in _rows(s, "select * from archived_probes where run_id = ?", [FP8])}
        # a bad value costs that value; undecodable bytes are replaced, the record kept
        assert probes["scratch/audit_values.log"]["probe"] == "fresh-inputs"
        assert probes["scratch/audit_values.log"]["n_bad"] is None and probes["scratch/audit_values.log"]["max_abs"] is None
        assert probes["scratch/audit_bytes.log"]["probe"] == "nan-poison" and probes["scratch/audit_bytes.log"]["status"] == "fail"
        assert "scratch/audit_notes.log" not in probes and "scratch/audit_huge.log" not in probes
        assert _rows(s, "select gpu_key, line from deck_hardware where run_id = ?", [FP8]) == [{"gpu_key": "B200", "line": 3}]
        run = _rows(s, "select * from runs where run_id = ?", [FP8])[0]
        assert run["n_records"] > 0 and run["n_tool_calls"] > 0
        assert run["n_parse_errors"] == len(_rows(s, "select * from parse_errors where run_id = ?", [FP8]))


def test_a_parser_crash_costs_the_records_not_the_run(tmp_path, monkeypatch):
    arch = _archive(tmp_path, (FP8,))

    def boom(text, path):
        raise RuntimeError("parser bug")
    monkeypatch.setattr(A, "read_probe_log", boom)
    with Store(tmp_path / "s.duckdb") as s:
        ingest_archive(s, arch)
        run = _rows(s, "select n_records, n_tool_calls from runs where run_id = ?", [FP8])[0]
        assert run["n_records"] > 0 and run["n_tool_calls"] > 0
        e = _rows(s, "select * from parse_errors where run_id = ? and reason = 'internal'", [FP8])
        assert len(e) == 1 and "archived records not parsed: RuntimeError: parser bug" in e[0]["detail"]
        assert not _rows(s, "select * from archived_probes")


def test_reingest_unchanged_is_a_no_op_and_a_changed_log_replaces_its_rows(tmp_path):
    arch = _archive(tmp_path, (FP8,))
    with Store(tmp_path / "s.duckdb") as s:
        ingest_archive(s, arch)
        assert ingest_archive(s, arch).skipped == [FP8]
        log = arch / "outputs" / "runs-h100" / FP8 / "scratch" / "audit_same_buffer.log"
        st = log.stat()
        log.write_text(log.read_text().replace("result=FAIL", "result=PASS"))
        os.utime(log, (st.st_atime, st.st_mtime + 10))
        assert ingest_archive(s, arch).ingested == [FP8]
        rows = _rows(s, "select path, status, duplicate_of from archived_probes where run_id = ? order by path", [FP8])
        assert rows == [{"path": "repo/problems/01_fp8_gemm/audit_same_buffer.log", "status": "fail", "duplicate_of": None},
                        {"path": "scratch/audit_same_buffer.log", "status": "pass", "duplicate_of": None}]
        assert len(_rows(s, "select * from deck_hardware where run_id = ?", [FP8])) == 1


def test_a_store_older_than_the_tables_is_re_read_once(tmp_path):
    arch = _archive(tmp_path, (FP8, W4))
    db = tmp_path / "s.duckdb"
    with Store(db) as s:
        ingest_archive(s, arch)
        fps = {r["run_id"]: r["fingerprint"] for r in _rows(s, "select run_id, fingerprint from runs")}
    con = duckdb.connect(str(db))          # a store written before the tables existed
    con.execute("drop table archived_probes")
    con.execute("drop table deck_hardware")
    con.close()
    with Store(db) as s:
        rep = ingest_archive(s, arch)
        assert sorted(rep.ingested) == sorted([FP8, W4]) and not rep.skipped
        assert {r["run_id"]: r["fingerprint"] for r in _rows(s, "select run_id, fingerprint from runs")} == fps
        assert len(_rows(s, "select * from archived_probes")) == 2 and len(_rows(s, "select * from deck_hardware")) == 2
        assert sorted(ingest_archive(s, arch).skipped) == sorted([FP8, W4])


def _verdicts(store: Store) -> dict[str, dict]:
    rows = store.query("select * from verdicts order by run_id")
    # adjudicate() alone writes no input fingerprint (the scan does)
    return {r["run_id"]: {k: v for k, v in r.items() if k not in ("adjudicated_at", "input_fingerprint")} for r in rows}


def test_the_verdict_reads_the_tables_not_the_archive(tmp_path):
    arch = _archive(tmp_path)
    db = tmp_path / "s.duckdb"
    P.scan(arch, out=tmp_path / "rep", db=db, progress=False, reports=False)
    with Store(db) as s:
        before = _verdicts(s)
        assert before[FP8]["measurement_status"] == "sequential_isolated_empirical_failed"
        assert before[FP8]["correct"] == "false" and "archived probe log" in before[FP8]["decided_by"]
        assert before[MEGA]["verdict"] == "rubric_leak"
        assert before[W4]["measurement_status"] == "sequential_isolated_wrong_hardware_sku"
        shutil.rmtree(arch)                 # no file left to read
        V.adjudicate(s)
        assert _verdicts(s) == before
        # and the tables are what it read: without their rows the facts are gone
        s.con.execute("delete from archived_probes")
        s.con.execute("delete from deck_hardware")
        V.adjudicate(s)
        after = _verdicts(s)
        assert "archived probe log" not in after[FP8]["decided_by"]  # result.json's audit_empirical_failure remains
        assert after[MEGA]["verdict"] != "rubric_leak"
        assert after[W4]["measurement_status"] == "sequential_isolated"


def test_compare_names_a_table_only_one_store_has(tmp_path):
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    for p in (a, b):
        Store(p).close()
    con = duckdb.connect(str(a))
    con.execute("drop table deck_hardware")
    con.close()
    assert diff_stores(a, b) == {"deck_hardware": (None, 0)}
