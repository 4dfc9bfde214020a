"""Ingest: discovery, idempotence, crash safety, archive formats, bad input, named queries."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from forensics.archive.runid import parse_run_id
from forensics.store import schema as S
from forensics.store.db import Store
from forensics.store.ingest import ingest_archive
from forensics.store.queries import named_queries, run_named

RID_A = "20260801_101500_claude_claude-opus-4-8_01_fp8_gemm"
RID_B = "20260801_111500_codex_gpt-5.5_01_fp8_gemm"
RID_C = "20260802_090000_claude_claude-opus-4-8_05_topk_bitonic_4242_2"
HOST = "/home/infatoshi/benchmarks/KernelBench-Hard/outputs/runs"


def _j(o) -> str:
    return json.dumps(o, separators=(",", ":"))


def _claude_lines(rid: str, problem: str, foreign: str | None) -> list[str]:
    cwd = f"{HOST}/{rid}/repo/problems/{problem}"
    usage = {"input_tokens": 10, "output_tokens": 50, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}
    L = [_j({"type": "system", "subtype": "init", "cwd": cwd, "session_id": "s1", "model": "claude-opus-4-8",
             "tools": ["Bash", "Read", "Write"], "mcp_servers": [], "claude_code_version": "2.1.0",
             "permissionMode": "bypassPermissions", "apiKeySource": "none"})]
    L.append(_j({"type": "assistant", "message": {"id": "msg_1", "model": "claude-opus-4-8", "role": "assistant",
                 "content": [{"type": "text", "text": "Reading the reference."}], "usage": usage}, "session_id": "s1"}))
    L.append(_j({"type": "assistant", "message": {"id": "msg_1", "model": "claude-opus-4-8", "role": "assistant",
                 "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": f"{cwd}/reference.py"}}],
                 "usage": usage}, "session_id": "s1"}))
    L.append(_j({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\timport torch\n"}]}, "session_id": "s1"}))
    for i in range(30):
        L.append(_j({"type": "system", "subtype": "task_progress", "task_id": "t1", "session_id": "s1"}))
    L.append(_j({"type": "assistant", "message": {"id": "msg_2", "model": "claude-opus-4-8", "role": "assistant",
                 "content": [{"type": "tool_use", "id": "toolu_2", "name": "Write",
                              "input": {"file_path": f"{cwd}/solution.py", "content": "import torch\n"}}], "usage": usage}}))
    L.append(_j({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": f"File created successfully at: {cwd}/solution.py"}]}}))
    cmd = "uv run python check.py 2>&1 | tail -5"
    if foreign:
        cmd = f"cat {HOST}/{foreign}/solution.py"
    L.append(_j({"type": "assistant", "message": {"id": "msg_3", "model": "claude-opus-4-8", "role": "assistant",
                 "content": [{"type": "tool_use", "id": "toolu_3", "name": "Bash", "input": {"command": cmd}}], "usage": usage}}))
    L.append(_j({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_3", "content": "PASS", "is_error": False}]}}))
    L.append(_j({"type": "result", "subtype": "success", "is_error": False, "num_turns": 3, "result": "done",
                 "session_id": "s1", "total_cost_usd": 0.5, "usage": usage, "stop_reason": "end_turn"}))
    return L


def _write_run(root: Path, rid: str, problem: str, lines: list[str], extra: dict[str, bytes] | None = None) -> Path:
    d = root / rid
    (d / "template_files").mkdir(parents=True)
    (d / "repo" / "problems" / problem).mkdir(parents=True)
    for f in ("reference.py", "check.py", "benchmark.py", "shapes.py", "problem.yaml", "PROMPT.txt", "sota.py"):
        body = f"# {f} of {problem}\n".encode()
        (d / "template_files" / f).write_bytes(body)
        (d / "repo" / "problems" / problem / f).write_bytes(body)
    (d / "transcript.jsonl").write_text("\n".join(lines) + "\n")
    (d / "solution.py").write_text("import torch\n")
    (d / "check.log").write_text("Using CPython 3.11.15\nPASS\n")
    (d / "benchmark.log").write_text("shape=0 variant=solution tflops=26.710 gbps=313.415 ms=0.080\n"
                                     "shape=0 solution_peak_fraction=0.1335\npeak_fraction: 0.1335\nRESULT: OK\n")
    (d / "gpu_lock.log").write_text("2026-08-01T10:20:00+00:00 wait pid=1 cmd=check.py args=--kill-after=30s\\ 1800s\\ uv\\ run\\ python\\ check.py\n"
                                    "2026-08-01T10:20:01+00:00 start pid=1 cmd=check.py\n"
                                    "2026-08-01T10:21:01+00:00 end pid=1 cmd=check.py status=0 elapsed_s=60\n")
    res = {"run_id": rid, "run_group": "", "problem": problem, "harness": rid.split("_")[2], "model": "claude-opus-4-8",
           "reasoning_effort": "max", "started_at": "2026-08-01T10:15:00-06:00", "has_solution": True, "correct": True,
           "failure_reason": "pass", "peak_fraction": 0.1335, "template_mutated": False, "session_complete": True,
           "harness_exit_code": 0, "check_exit_code": 0, "benchmark_exit_code": 0, "check_timeout_seconds": 1800}
    (d / "result.json").write_text(json.dumps(res, indent=4))
    for rel, data in (extra or {}).items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return d


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    root = tmp_path / "outputs" / "runs"
    root.mkdir(parents=True)
    _write_run(root, RID_A, "01_fp8_gemm", _claude_lines(RID_A, "01_fp8_gemm", None))
    bad = _claude_lines(RID_B, "01_fp8_gemm", RID_A)
    bad.insert(3, '{"type": "assistant", "message": {')          # invalid JSON
    raw = ("\n".join(bad) + "\n").encode().replace(b"Reading", b"Read\xff\xfeing")  # invalid UTF-8
    d = _write_run(root, RID_B, "01_fp8_gemm", [])
    (d / "transcript.jsonl").write_bytes(raw[:-40])  # truncated last line
    c = _write_run(root, RID_C, "05_topk_bitonic", [])
    (c / "transcript.jsonl").write_bytes(gzip.compress(("\n".join(_claude_lines(RID_C, "05_topk_bitonic", None)) + "\n").encode()))
    return tmp_path / "outputs" / "runs"


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        h.update(f"{p.relative_to(root)}|{st.st_mode}|{st.st_mtime_ns}\n".encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def _dump(store: Store) -> dict[str, list]:
    out = {}
    for t in (*S.INGEST_TABLES, *S.VIEW_BY_NAME):
        cols = [c for c in (S.TABLE_BY_NAME.get(t) or S.VIEW_BY_NAME[t]).column_names() if c not in ("ingested_at", "archive", "stamp")]
        q = ", ".join(f'"{c}"' for c in cols)
        out[t] = sorted(map(repr, store.con.execute(f"select {q} from {t}").fetchall()))
    return out


def test_run_id_parsing():
    r = parse_run_id("20260604_131045_claude_claude-opus-4-6_02_kda_cutlass")
    assert (r.harness, r.model_slug, r.problem, r.bench, r.collision_suffix) == ("claude", "claude-opus-4-6", "02_kda_cutlass", "hard", None)
    r = parse_run_id("20260715_010203_kinetic-claude_kinetic-0715_1m__01_fp8_gemm_12345_3")
    assert (r.model_slug, r.problem, r.collision_suffix) == ("kinetic-0715_1m_", "01_fp8_gemm", "12345_3")
    r = parse_run_id("20260803_214551_or-fable_qwen_qwen3.8-max_02_kimi_linear_decode")
    assert (r.harness, r.model_slug, r.problem, r.bench) == ("or-fable", "qwen_qwen3.8-max", "02_kimi_linear_decode", "mega")
    r = parse_run_id("20260730_004646_opencode-or_moonshotai-kimi-k3_01_allreduce_residual")
    assert r.bench == "multi"
    assert parse_run_id("not_a_run") is None
    assert parse_run_id("20261399_000000_x_y_01_fp8_gemm") is None  # impossible date


def test_ingest_counts_and_idempotence(archive: Path, tmp_path: Path):
    before = _tree_hash(archive)
    db = tmp_path / "a.duckdb"
    with Store(db) as st:
        rep = ingest_archive(st, archive)
        assert sorted(rep.run_ids) == sorted([RID_A, RID_B, RID_C])
        first = _dump(st)
        runs = {r["run_id"]: r for r in st.query("select * from runs")}
        assert runs[RID_C]["collision_suffix"] == "4242_2" and runs[RID_C]["problem"] == "05_topk_bitonic"
        assert runs[RID_A]["check_verdict"] == "PASS" and runs[RID_A]["benchmark_peak_fraction"] == pytest.approx(0.1335)
        assert runs[RID_A]["transcript_format"] == "claude"
        assert runs[RID_C]["transcript_format"] == "claude"  # gzip bytes inside transcript.jsonl
        assert st.scalar("select count(*) from tool_calls where run_id=?", [RID_A]) == 3
        kinds = dict(st.con.execute("select tool, kind from tool_calls where run_id=?", [RID_A]).fetchall())
        assert kinds == {"Read": "read", "Write": "write", "Bash": "exec"}
        linked = st.scalar("select count(*) from tool_results where run_id=? and call_seq is not null", [RID_A])
        assert linked == 3
        # usage deduplicated by message id: 3 distinct messages, the terminal result preferred
        end = st.query("select * from session_end where run_id=?", [RID_A])[0]
        assert end["end_reason"] == "success" and end["terminal_type"] == "result"
        reasons = {r[0] for r in st.con.execute("select reason from parse_errors where run_id=?", [RID_B]).fetchall()}
        assert {"invalid_json", "invalid_utf8", "truncated_line"} <= reasons
        lines = st.con.execute("select line from parse_errors where run_id=? and reason='invalid_json'", [RID_B]).fetchall()
        assert (4,) in lines
        locks = st.scalar("select count(*) from check_log_lines where run_id=? and source='gpu_lock.log'", [RID_A])
        assert locks == 3
        # a second ingest of the unchanged archive writes nothing new
        rep2 = ingest_archive(st, archive)
        assert len(rep2.skipped) == 3 and not rep2.ingested
        rep3 = ingest_archive(st, archive, force=True)
        assert len(rep3.ingested) == 3
        assert _dump(st) == first
    assert _tree_hash(archive) == before, "ingest must never write into the archive"


def test_tar_and_zip_read_in_place(archive: Path, tmp_path: Path):
    with Store(tmp_path / "dir.duckdb") as st:
        ingest_archive(st, archive)
        ref = _dump(st)
    tgz = tmp_path / "runs.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(archive, arcname="outputs/runs")
    zp = tmp_path / "runs.zip"
    with zipfile.ZipFile(zp, "w") as zf:
        for p in sorted(archive.rglob("*")):
            if p.is_file():
                zf.write(p, "outputs/runs/" + str(p.relative_to(archive)))
    for arc in (tgz, zp):
        size = arc.stat().st_size
        with Store(tmp_path / f"{arc.name}.duckdb") as st:
            ingest_archive(st, arc)
            got = _dump(st)
        assert arc.stat().st_size == size
        for t in ("tool_calls", "tool_results", "records", "record_rows", "record_spans", "parse_errors", "session_end",
                  "check_log_lines"):
            assert got[t] == ref[t], t
        # file mtimes differ between a tree and a zip; paths, sizes and hashes must not
        strip = lambda rows: sorted(r.rsplit(", datetime", 1)[0] for r in rows)  # noqa: E731
        assert strip(got["files"]) == strip(ref["files"])


def test_single_run_folder_and_missing_transcript(archive: Path, tmp_path: Path):
    run = archive / RID_A
    with Store(":memory:") as st:
        rep = ingest_archive(st, run)
        assert rep.run_ids == [RID_A]
        assert st.scalar("select count(*) from tool_calls") == 3
    (archive / RID_C / "transcript.jsonl").unlink()
    with Store(":memory:") as st:
        ingest_archive(st, archive)
        assert st.scalar("select reason from parse_errors where run_id=? and source='transcript.jsonl'", [RID_C]) == "missing_file"
        assert st.scalar("select end_reason from session_end where run_id=?", [RID_C]) == "unknown"


def test_missing_archive_is_a_clear_error(tmp_path: Path):
    from click.testing import CliRunner

    from forensics.cli import main
    r = CliRunner().invoke(main, ["ingest", str(tmp_path / "nope"), "--db", str(tmp_path / "x.duckdb")])
    assert r.exit_code != 0 and "archive not found" in r.output


# The child ingests with one commit per run and SIGKILLs itself inside the third run's transaction:
# either after some of that run's rows were inserted but before its runs row ("rows"), or after its
# runs row, just before COMMIT ("runs_row").  Two runs are committed; the third must be absent.
_KILLER = """
import os, signal, sys
from forensics.store import db
from forensics.store.ingest import ingest_archive
orig, runs_rows = db.Store.insert_arrow, [0]
def insert_arrow(self, table, data):
    if table != "runs" and runs_rows[0] == 2 and sys.argv[3] == "rows":
        os.kill(os.getpid(), signal.SIGKILL)
    orig(self, table, data)
    if table == "runs":
        runs_rows[0] += 1
        if runs_rows[0] == 3 and sys.argv[3] == "runs_row":
            os.kill(os.getpid(), signal.SIGKILL)
db.Store.insert_arrow = insert_arrow
ingest_archive(db.Store(sys.argv[2]), sys.argv[1])
"""


@pytest.mark.parametrize("kill_at", ["rows", "runs_row"])
def test_sigkill_midway_then_restart_matches_uninterrupted(archive: Path, tmp_path: Path, kill_at: str):
    for i in range(12):
        rid = f"20260801_12{i:02d}00_claude_claude-opus-4-8_01_fp8_gemm"
        lines = _claude_lines(rid, "01_fp8_gemm", None)
        lines[5:5] = [_j({"type": "system", "subtype": "task_progress", "task_id": "t1"})] * 20000
        _write_run(archive, rid, "01_fp8_gemm", lines)
    ref_db = tmp_path / "ref.duckdb"
    with Store(ref_db) as st:
        ingest_archive(st, archive)
        ref = _dump(st)
    db = tmp_path / "killed.duckdb"
    env = dict(os.environ, FORENSICS_INGEST_GROUP_RUNS="1")  # one commit per run
    p = subprocess.run([sys.executable, "-c", _KILLER, str(archive), str(db), kill_at], env=env, timeout=300)
    assert p.returncode == -signal.SIGKILL
    with Store(db) as st:
        assert st.scalar("select count(*) from runs") == 2, "exactly the two committed runs survive the kill"
        for t in S.INGEST_TABLES:  # no row of the killed transaction survives
            assert st.scalar(f"select count(distinct run_id) from {t}") <= 2, t
        rep = ingest_archive(st, archive)
        assert len(rep.skipped) == 2 and len(rep.ingested) == 13
        assert _dump(st) == ref


def test_named_queries_have_headers_and_run(archive: Path, tmp_path: Path):
    qs = named_queries()
    for name in ("tool-calls-by-tool", "run-references", "agent-check-runs", "session-end-reasons",
                 "largest-transcripts", "parse-errors"):
        assert name in qs and qs[name].description, name
    with Store(tmp_path / "q.duckdb") as st:
        ingest_archive(st, archive)
        cols, rows = run_named(st, "tool-calls-by-tool", run=RID_A)
        assert {r[cols.index("tool")]: r[cols.index("calls")] for r in rows} == {"Read": 1, "Write": 1, "Bash": 1}
        cols, rows = run_named(st, "agent-check-runs")
        got = [(r[0], r[cols.index("script")], r[cols.index("outcome")]) for r in rows]
        assert (RID_A, "check", "PASS") in got
        assert all(r[0] != RID_B for r in rows)  # `cat .../solution.py` is not a check run
        cols, rows = run_named(st, "parse-errors", run=RID_B)
        assert rows and all(r[0] == RID_B for r in rows)
        for name, q in qs.items():  # every named query runs on a real store
            run_named(st, name)


def test_cli_query_sql_schema_json(archive: Path, tmp_path: Path):
    from click.testing import CliRunner

    from forensics.cli import main
    db = str(tmp_path / "c.duckdb")
    r = CliRunner().invoke(main, ["ingest", str(archive), "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["runs"] == 3
    r = CliRunner().invoke(main, ["query", "tool-calls-by-tool", "--db", db, "--run", RID_A, "--json"])
    assert r.exit_code == 0 and {x["tool"] for x in json.loads(r.output)} == {"Read", "Write", "Bash"}
    r = CliRunner().invoke(main, ["sql", "select run_id, count(*) n from tool_calls group by 1 order by 1", "--db", db, "--json"])
    assert r.exit_code == 0 and len(json.loads(r.output)) == 3
    r = CliRunner().invoke(main, ["schema", "--json"])
    tables = {t["table"]: t for t in json.loads(r.output)}
    assert all(c["comment"] for t in tables.values() for c in t["columns"])
    r = CliRunner().invoke(main, ["query", "--list"])
    assert "agent-check-runs" in r.output


def test_schema_doc_is_current(repo):
    """docs/schema.md is generated from schema.py; it must not drift."""
    assert (repo / "docs" / "schema.md").read_text() == S.markdown() + "\n"


def test_dir_source_never_opens_outside_the_archive(tmp_path: Path):
    from forensics.archive.source import DirSource
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    root = tmp_path / "arch"
    run = root / "run"
    run.mkdir(parents=True)
    (run / "real.txt").write_text("inside")
    (run / "link_in").symlink_to("real.txt")
    (run / "link_out").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside)
    src = DirSource(root)
    for _ in range(2):  # the second pass goes through the cached directories
        assert src.read("run/link_in") == b"inside" and src.read("run/real.txt") == b"inside"
        for bad in ("run/link_out", "dir_out/secret.txt", "run/../../outside/secret.txt", "../outside/secret.txt",
                    str(outside / "secret.txt"), "run/../.."):
            with pytest.raises(PermissionError):
                src.open(bad)
