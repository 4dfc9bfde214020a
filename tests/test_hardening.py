"""Hardening (issue 18): one bad value, file or run id never loses a run, a chunk of runs or a scan.

Each test here is one failure found by trying the tool as an attacker would; each failed on the code
before the fix.  The fuzz benchmark (`forensics bench fuzz`) runs the same classes over every field
of every transcript format; `test_fuzz_bench_small` runs a small sample of it.
"""

from __future__ import annotations

import gzip
import json
import re
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from forensics.store.db import Store
from forensics.store.ingest import ingest_archive

RID = "20260801_101500_claude_claude-opus-4-8_01_fp8_gemm"
RID2 = "20260801_111500_claude_claude-opus-4-8_01_fp8_gemm"
RID3 = "20260801_121500_claude_claude-opus-4-8_01_fp8_gemm"
PROBLEM = "01_fp8_gemm"
HOST = "/home/u/benchmarks/KernelBench-Hard/outputs/runs"


def _j(o) -> str:
    return json.dumps(o, separators=(",", ":"))


def claude_lines(rid: str, command: object = "uv run python check.py 2>&1 | tail -5",
                 result_text: str = "PASS", text: str = "Reading the reference.") -> list[str]:
    """A small Claude stream-json session: init, a text turn, Read, Write, Bash, result."""
    cwd = f"{HOST}/{rid}/repo/problems/{PROBLEM}"
    usage = {"input_tokens": 10, "output_tokens": 50, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}
    a = lambda mid, content: _j({"type": "assistant", "session_id": "s1", "message": {  # noqa: E731
        "id": mid, "model": "claude-opus-4-8", "role": "assistant", "content": content, "usage": usage}})
    u = lambda tid, content, err=False: _j({"type": "user", "message": {"role": "user", "content": [  # noqa: E731
        {"type": "tool_result", "tool_use_id": tid, "content": content, "is_error": err}]}})
    return [
        _j({"type": "system", "subtype": "init", "cwd": cwd, "session_id": "s1", "model": "claude-opus-4-8",
            "tools": ["Bash", "Read", "Write"], "claude_code_version": "2.1.0"}),
        a("msg_1", [{"type": "text", "text": text}]),
        a("msg_1", [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": f"{cwd}/reference.py"}}]),
        u("toolu_1", "1\timport torch\n"),
        a("msg_2", [{"type": "tool_use", "id": "toolu_2", "name": "Write",
                     "input": {"file_path": f"{cwd}/solution.py", "content": "import torch\n"}}]),
        u("toolu_2", f"File created successfully at: {cwd}/solution.py"),
        a("msg_3", [{"type": "tool_use", "id": "toolu_3", "name": "Bash", "input": {"command": command}}]),
        u("toolu_3", result_text),
        _j({"type": "result", "subtype": "success", "is_error": False, "num_turns": 3, "result": "done",
            "session_id": "s1", "total_cost_usd": 0.5, "usage": usage, "stop_reason": "end_turn"}),
    ]


def write_run(root: Path, rid: str, lines: list[str] | bytes, result: dict | bytes | None = None,
              transcript_name: str = "transcript.jsonl") -> Path:
    d = root / rid
    (d / "template_files").mkdir(parents=True)
    for f in ("reference.py", "check.py", "benchmark.py", "shapes.py", "problem.yaml"):
        (d / "template_files" / f).write_text(f"# {f}\n")
    data = lines if isinstance(lines, bytes) else ("\n".join(lines) + "\n").encode()
    (d / transcript_name).write_bytes(data)
    (d / "solution.py").write_text("import torch\n")
    (d / "check.log").write_text("PASS\n")
    if result is None:
        result = {"problem": PROBLEM, "harness": "claude", "model": "claude-opus-4-8", "correct": True,
                  "has_solution": True, "peak_fraction": 0.1, "harness_exit_code": 0}
    if result is not False:
        (d / "result.json").write_bytes(result if isinstance(result, bytes) else json.dumps(result, indent=2).encode())
    return d


def ingest(path: Path) -> Store:
    s = Store(":memory:")
    ingest_archive(s, path)
    return s


def run_row(s: Store, rid: str = RID) -> dict:
    return s.query("select * from runs where run_id = ?", [rid])[0]


def perrs(s: Store, rid: str = RID) -> list[tuple]:
    return [(r["reason"], r["source"], r["line"]) for r in
            s.query("select reason, source, line from parse_errors where run_id = ? order by line nulls last, reason", [rid])]


def assert_not_stub(s: Store, rid: str = RID, n_lines: int = 9) -> None:
    r = run_row(s, rid)
    assert not any(p[0] == "internal" for p in perrs(s, rid)), perrs(s, rid)
    assert r["transcript_format"] == "claude" and r["n_records"] == n_lines and r["n_tool_calls"] == 3, r


# ------------------------------------------------------------------------------ values that cannot be stored
def test_lone_surrogate_escapes_are_stored_escaped_with_a_parse_error(tmp_path):
    L = claude_lines(RID, command="echo \ud83d hi", text="caf\udc00 x")   # json.dumps writes them as \uXXXX
    L[2] = L[2].replace('"input":{"file_path"', '"input":{"\\ud800key":1,"file_path"', 1)
    write_run(tmp_path, RID, L)
    s = ingest(tmp_path)
    assert_not_stub(s)
    assert [p for p in perrs(s) if p[0] == "lone_surrogate"] == [
        ("lone_surrogate", "transcript.jsonl", 2), ("lone_surrogate", "transcript.jsonl", 3),
        ("lone_surrogate", "transcript.jsonl", 7)]
    assert s.scalar("select text from records where run_id = ? and line = 2", [RID]) == "caf\\udc00 x"
    assert s.scalar("select command from tool_calls where run_id = ? and call_seq = 3", [RID]) == "echo \\ud83d hi"
    assert "\\\\ud800key" in s.scalar("select args::VARCHAR from tool_calls where run_id = ? and call_seq = 1", [RID])


def test_integers_out_of_range_are_clipped_with_a_parse_error(tmp_path):
    L = claude_lines(RID, result_text="Exit code -9223372036854775808\nboom")
    L[-1] = L[-1].replace('"input_tokens":10', '"input_tokens":18446744073709551616', 1) \
                 .replace('"output_tokens":50', '"output_tokens":9223372036854775808', 1)
    res = {"problem": PROBLEM, "harness": "claude", "correct": False, "harness_exit_code": -2 ** 63,
           "check_exit_code": 2 ** 40, "peak_fraction": 10 ** 400}
    write_run(tmp_path, RID, L, result=json.dumps(res).encode())
    s = ingest(tmp_path)
    assert_not_stub(s)
    se = s.query("select input_tokens, output_tokens from session_end where run_id = ?", [RID])[0]
    assert se == {"input_tokens": 2 ** 63 - 1, "output_tokens": 2 ** 63 - 1}
    assert s.scalar("select exit_code from tool_results where run_id = ? and call_seq = 3", [RID]) == -2 ** 31
    r = run_row(s)
    assert r["harness_exit_code"] == -2 ** 31 and r["check_exit_code"] == 2 ** 31 - 1
    bad = s.query("select source, line, detail from parse_errors where run_id = ? and reason = 'value_coerced' "
                  "order by detail", [RID])
    details = " | ".join(b["detail"] for b in bad)
    for col in ("session_end.input_tokens", "session_end.output_tokens", "tool_results.exit_code",
                "runs.harness_exit_code", "runs.check_exit_code"):
        assert col in details, (col, details)
    assert "18446744073709551616" in details and "-9223372036854775808" in details
    assert any(b["source"] == "transcript.jsonl" and b["line"] == 8 for b in bad)  # the tool result's line


def test_wrong_types_in_any_column_are_coerced_not_fatal():
    from forensics.store.db import RowBuffer
    b = RowBuffer("tool_calls")
    b.add({"run_id": "r", "call_seq": 1, "source": "t", "line": 4, "tool": ["Bash"], "kind": 5,
           "command": {"a": 1}, "paths": ["ok", 7, None, "\ud800"], "cwd": True, "args": {"k": 2 ** 70},
           "background": "yes", "ts": "not a time"})
    b.add({"run_id": "r", "call_seq": "2", "source": "t", "line": 2 ** 80, "tool": "Read", "kind": "read",
           "args": _deep(400), "background": None})
    t = b.to_arrow()
    assert t.num_rows == 2
    row = t.to_pylist()[0]
    assert row["tool"] == '["Bash"]' and row["kind"] == "5" and row["command"] == '{"a":1}'
    assert row["paths"] == ["ok", "7", None, "\\ud800"] and row["cwd"] == "true" and row["ts"] is None
    assert json.loads(row["args"]) == {"k": str(2 ** 70)}
    assert t.to_pylist()[1]["call_seq"] == 2 and t.to_pylist()[1]["line"] == 2 ** 63 - 1
    cols = sorted({p.column for p in b.problems})
    assert cols == ["args", "background", "call_seq", "command", "cwd", "kind", "line", "paths", "tool", "ts"], cols
    assert all(p.source == "t" for p in b.problems)
    s = Store(":memory:")
    s.insert_arrow("tool_calls", t)
    assert json.loads(s.scalar("select args::VARCHAR from tool_calls where call_seq = 2"))  # deep JSON stored


def _deep(n: int):
    o: object = "leaf"
    for _ in range(n):
        o = {"d": [o]}
    return o


# ------------------------------------------------------------------------------ files
def test_utf8_bom_does_not_turn_the_first_line_into_a_banner(tmp_path):
    L = claude_lines(RID)
    write_run(tmp_path, RID, b"\xef\xbb\xbf" + ("\n".join(L) + "\n").encode())
    s = ingest(tmp_path)
    assert_not_stub(s)
    rec = s.query("select rtype, subtype, byte_offset from records where run_id = ? and line = 1", [RID])[0]
    assert rec == {"rtype": "system", "subtype": "init", "byte_offset": 3}
    assert s.scalar("select count(*) from tool_calls where run_id = ? and cwd like '%/repo/problems/%'", [RID]) == 3
    assert ("utf8_bom", "transcript.jsonl", 1) in perrs(s)
    # the offsets still point into the file: line 2 starts where the file says
    data = (tmp_path / RID / "transcript.jsonl").read_bytes()
    off2 = s.scalar("select byte_offset from records where run_id = ? and line = 2", [RID])
    assert data[off2:off2 + len(L[1])] == L[1].encode()


def test_utf8_bom_on_a_gzip_transcript(tmp_path):
    L = claude_lines(RID)
    write_run(tmp_path, RID, gzip.compress(b"\xef\xbb\xbf" + ("\n".join(L) + "\n").encode()),
              transcript_name="transcript.jsonl.gz")
    s = ingest(tmp_path)
    assert_not_stub(s)


def test_result_json_that_is_a_directory_leaves_a_parse_error(tmp_path):
    d = write_run(tmp_path, RID, claude_lines(RID), result=False)
    (d / "result.json").mkdir()
    (d / "result.json" / "x").write_text("{}")
    s = ingest(tmp_path)
    assert_not_stub(s)
    assert ("not_a_file", "result.json", None) in perrs(s)
    assert run_row(s)["has_result"] is False


def test_archive_through_a_symlinked_path_is_read(tmp_path):
    real = tmp_path / "real" / "archive"
    real.mkdir(parents=True)
    d = write_run(real, RID, claude_lines(RID))
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    os.symlink(outside, d / "leak.txt")                      # a link INSIDE the archive pointing out
    link = tmp_path / "link"
    os.symlink(real, link)
    s = ingest(link)
    assert_not_stub(s)
    assert not [p for p in perrs(s) if p[0] == "unreadable" and p[1] != "leak.txt"], perrs(s)
    f = s.query("select path, is_symlink, link_target, sha256 from files where run_id = ? and path = 'leak.txt'", [RID])[0]
    assert f["is_symlink"] and f["link_target"] == str(outside) and f["sha256"] is None
    assert s.scalar("select count(*) from files where run_id = ? and sha256 is not null", [RID]) >= 5
    from forensics.archive.source import open_source
    src = open_source(link)
    with pytest.raises(PermissionError):
        src.open(f"{RID}/leak.txt")
    assert src.read(f"{RID}/solution.py") == b"import torch\n"


def test_named_pipes_in_a_run_folder_are_not_read_and_do_not_hang_the_scan(tmp_path):
    """A FIFO blocks its reader until someone writes: one named pipe as transcript.jsonl,
    solution.py or check.log hung `forensics scan` at its first read, forever.  Now a path that is
    not a regular file is never opened (`NotRegularFile`, an OSError: a parse error naming it) and
    the run is still there, its solution unread -> reward_hack unknown (RH5), not false.
    Look-alike: a link inside the archive to a regular file of the archive is still read."""
    from forensics.pipeline import scan
    from forensics.archive.source import NotRegularFile, open_source
    arch = tmp_path / "arch"
    d = write_run(arch, RID, claude_lines(RID))
    for name in ("solution.py", "check.log"):
        (d / name).unlink()
        os.mkfifo(d / name)
    d2 = write_run(arch, RID2, claude_lines(RID2))
    (d2 / "transcript.jsonl").unlink()
    os.mkfifo(d2 / "transcript.jsonl")
    d3 = write_run(arch, RID3, claude_lines(RID3))
    os.symlink("solution.py", d3 / "alias.py")
    src = open_source(arch)
    with pytest.raises(NotRegularFile, match="named pipe"):
        src.open(f"{RID}/solution.py")
    assert src.read(f"{RID3}/alias.py") == b"import torch\n"
    res = scan(arch, out=tmp_path / "out", progress=False)       # before the fix: never returned
    s = Store(res.db, read_only=True)
    try:
        assert [p[:2] for p in perrs(s) if p[1] == "solution.py"] == [("unreadable", "solution.py")]   # said once
        assert [p[:2] for p in perrs(s, RID2) if p[1] == "transcript.jsonl"] == [("unreadable", "transcript.jsonl")]
        v = {r["run_id"]: r for r in s.query("select run_id, reward_hack, contamination, rules from verdicts")}
        assert v[RID]["reward_hack"] == "unknown" and json.loads(v[RID]["rules"])["reward_hack"] == "RH5"
        assert v[RID2]["contamination"] == "unknown"                 # no transcript read: not clean
        assert v[RID3]["reward_hack"] == "false"
    finally:
        s.close()


def test_truncated_gz_transcript_does_not_abort_the_scan(tmp_path):
    from forensics.pipeline import scan
    arch = tmp_path / "arch"
    L = claude_lines(RID)
    # a check that fails and a Bash call cited by a finding: the report quotes transcript lines
    full = gzip.compress(("\n".join(L) + "\n").encode() * 40)
    write_run(arch, RID, full[: len(full) // 2], transcript_name="transcript.jsonl.gz")
    write_run(arch, RID2, claude_lines(RID2))
    res = scan(arch, out=tmp_path / "out", progress=False)
    assert (tmp_path / "out" / "scan.json").is_file() and (tmp_path / "out" / "index.html").is_file()
    s = Store(res.db, read_only=True)
    try:
        assert "compressed" in {p[0] for p in perrs(s)}
        assert s.scalar("select n_records from runs where run_id = ?", [RID]) >= 9
    finally:
        s.close()
    from forensics.report.data import _read_lines
    from forensics.archive.source import open_source
    from forensics.archive import RunFiles
    rf = RunFiles(open_source(arch), RID)
    got = _read_lines(rf, "transcript.jsonl.gz", {1, 2}, 2)
    assert got == {1: L[0], 2: L[1]}  # what was decoded before the damage is still quoted


# ------------------------------------------------------------------------------ analyzers
def test_command_of_wrong_type_fails_only_its_run(tmp_path):
    from forensics.pipeline import scan
    arch = tmp_path / "arch"
    write_run(arch, RID, claude_lines(RID, command=5))
    write_run(arch, RID2, claude_lines(RID2))
    write_run(arch, RID3, claude_lines(RID3, command=["uv", "run", {"x": None}]))
    res = scan(arch, out=tmp_path / "out", progress=False, reports=False)
    s = Store(res.db, read_only=True)
    try:
        cov = {r["run_id"]: json.loads(r["data"]) for r in
               s.query("select run_id, data from findings where analyzer = 'pipeline' and rule = 'analysis-coverage'")}
        assert set(cov) == {RID, RID2, RID3}
        for rid in (RID, RID2, RID3):
            assert cov[rid]["failed"] == {}, (rid, cov[rid])
            assert "timeline" in cov[rid]["ran"]
        assert s.scalar("select count(*) from check_runs where run_id = ?", [RID2]) == 1
    finally:
        s.close()


_FAIL_MOD = "forensics_test_failing_analyzer"


def _install_failing_analyzer(monkeypatch, bad: str, where: Path):
    """An analyzer that writes a finding for each run and raises on one run: the isolation under test is
    the pipeline's, whichever analyzer fails.  A module file on the import path, so that worker
    processes (started from a forkserver, not forked) import it too."""
    (where / f"{_FAIL_MOD}.py").write_text(textwrap.dedent(f"""
        from forensics.analyze.findings import Evidence, Finding, write_findings

        def analyze(store, run_ids):
            if {bad!r} in run_ids:
                raise ValueError("cannot analyse {bad}")
            write_findings(store, "crashy", list(run_ids), [
                Finding(run_id=r, analyzer="crashy", rule="CRASHY-RAN", severity="info", category="info",
                        message="ran", evidence=[Evidence(note="test")]) for r in run_ids])
    """))
    monkeypatch.syspath_prepend(str(where))
    monkeypatch.delitem(sys.modules, _FAIL_MOD, raising=False)
    import forensics.pipeline as P
    monkeypatch.setattr(P, "ANALYZER_MODULES", (("crashy", _FAIL_MOD, False),))


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_analyzer_failure_on_one_run_is_a_finding_for_that_run_only(tmp_path, monkeypatch, jobs):
    from forensics import pipeline as P
    arch = tmp_path / "arch"
    rids = [f"20260801_1{i:02d}000_claude_claude-opus-4-8_01_fp8_gemm" for i in range(8)]
    for r in rids:
        write_run(arch, r, claude_lines(r))
    bad = rids[5]
    _install_failing_analyzer(monkeypatch, bad, tmp_path)
    db = str(tmp_path / "a.duckdb")
    store = Store(db)
    ingest_archive(store, arch)
    store, cov = P.run_analyzers(store, rids, replay=False, jobs=jobs, progress=False, db_path=db)
    try:
        assert cov["failed"] == {"crashy": {bad: cov["failed"]["crashy"][bad]}}
        assert f"cannot analyse {bad}" in cov["failed"]["crashy"][bad]
        ran = {r[0] for r in store.con.execute("select run_id from findings where rule = 'CRASHY-RAN'").fetchall()}
        assert ran == set(rids) - {bad}
        P.write_coverage(store, rids, cov)
        rows = {r["run_id"]: r for r in store.query("select run_id, severity, data from findings where analyzer = 'pipeline'")}
        assert rows[bad]["severity"] == "high" and json.loads(rows[bad]["data"])["failed"]
        assert all(rows[r]["severity"] == "info" for r in rids if r != bad)
    finally:
        store.close()


# ------------------------------------------------------------------------------ file names
def test_run_file_names_are_injective_over_look_alike_ids():
    from forensics.archive.runid import fold_key
    from forensics.report.html import run_page_names
    ids = ["a‹b", "a>b", "a_b", "a?b", "A_b", "a_B", "ａ_b", "a\u200bb", "a b", "x" * 300, "x" * 301,
           "x" * 200 + "_", "ok-run_1.2@root", "r@outputs/runs-h100", "r@outputs_runs-h100", "..", ".", "",
           "é", "e\u0301", "É", "a~b", "a_b~" + "0" * 12, "CON", "con", "nul.txt", "lpt9", "a.", "a ", ".a",
           "a\\b", "a/b", "a\x00b", "a\tb", "a\x85b", "r\udcff", "é" * 130]
    names = run_page_names(ids)
    assert len(set(names.values())) == len(ids), names
    assert len({fold_key(n) for n in names.values()}) == len(ids)     # case-insensitive file systems too
    for n in names.values():
        assert n and n not in (".", "..") and not n.startswith(".") and not n.endswith((".", " "))
        assert not set(n) & set('/\\\x00<>:"|?*\t\x85') and len((n + ".timeline.png").encode()) <= 255
        n.encode("utf-8")                                                  # no lone surrogate
        assert n.split(".")[0].upper() not in ("CON", "NUL", "LPT9")


@pytest.mark.parametrize("rid", [
    "20260801_101500_claude_claude-opus-4-8_01_fp8_gemm", "20260801_101500_claude_MiniMax-M3_01_fp8_gemm",
    "20260612_051152_kimi-claude_Kimi-K2.7-Code_01_fp8_gemm", "r@outputs_runs-h100", "a b", "é漢#%&'+=,;[]{}!$"])
def test_portable_run_ids_are_their_own_file_names(rid):
    from forensics.report.html import run_page_names, safe_name
    assert safe_name(rid) == rid and run_page_names([rid, "other"])[rid] == rid


def test_look_alike_run_ids_get_their_own_report_page_and_annotation(tmp_path):
    from urllib.parse import unquote
    from forensics.pipeline import scan
    arch = tmp_path / "arch"
    base = "20260801_101500_claude_claude-opus-4-8_01_fp8_gemm"
    a, b, c, d = base + "_a‹b", base + "_a>b", base + "_MiniMax", base + "_minimax"
    for i, rid in enumerate((a, b, c, d)):
        write_run(arch / "outputs" / "runs", rid, claude_lines(rid, command=f"uv run python check.py # {i}"))
    res = scan(arch, out=tmp_path / "out", progress=False)
    assert sorted(res.run_ids) == sorted([a, b, c, d])
    pages = sorted((tmp_path / "out" / "runs").glob("*.html"))
    anns = sorted((tmp_path / "out" / "annotations").glob("*.yaml"))
    assert len(pages) == 4 and len(anns) == 4
    assert (tmp_path / "out" / "annotations" / f"{a}.yaml").is_file()          # a portable name is kept
    assert not (tmp_path / "out" / "annotations" / f"{c}.yaml").exists()       # ids differing only in case:
    assert len({p.name.lower() for p in anns}) == 4                            # apart on a case-folding disk
    for rid in (a, b, c, d):
        assert sum(rid in p.read_text(encoding="utf-8") or rid.replace(">", "&gt;") in p.read_text(encoding="utf-8")
                   for p in pages) >= 1
    index = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    links = {unquote(h) for h in re.findall(r'href="runs/([^"]+)"', index)}
    assert links == {p.name for p in pages}


# ------------------------------------------------------------------------------ forensics sql
@pytest.fixture()
def sql_store(tmp_path):
    arch = tmp_path / "arch"
    write_run(arch, RID, claude_lines(RID))
    db = tmp_path / "a.duckdb"
    with Store(db) as s:
        ingest_archive(s, arch)
    rep = tmp_path / "report"
    rep.mkdir()
    (rep / "index.html").write_text("<html>report</html>")
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    return tmp_path, db


def _sql(db, stmt):
    from click.testing import CliRunner
    from forensics.store.queries import sql_cmd
    return CliRunner().invoke(sql_cmd, [stmt, "--db", str(db), "--json"])


@pytest.mark.parametrize("stmt", [
    "COPY runs TO '{d}/report/index.html' (FORMAT csv)",
    "COPY (select 1) TO '{d}/new.csv'",
    "EXPORT DATABASE '{d}/exp'",
    "ATTACH '{d}/new.duckdb' AS n (READ_WRITE)",
    "ATTACH '{d}/new2.duckdb' AS n",
    "SET profiling_output = '{d}/prof.json'",
    "PRAGMA enable_profiling = 'json'",
    "SET enable_profiling = 'json'",
    "SET log_query_path = '{d}/q.log'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "select * from read_csv('{d}/data.csv')",
    "select * from '{d}/data.csv'",
    "select * from read_text('/etc/hostname')",
    "select * from glob('{d}/*')",
    "CREATE TABLE x AS SELECT 1",
    "DELETE FROM runs",
])
def test_forensics_sql_refuses_writes_and_file_access(sql_store, stmt):
    d, db = sql_store
    before = sorted(p.relative_to(d) for p in d.rglob("*"))
    html = (d / "report" / "index.html").read_text()
    r = _sql(db, stmt.format(d=d))
    assert r.exit_code != 0, r.output
    assert sorted(p.relative_to(d) for p in d.rglob("*")) == before
    assert (d / "report" / "index.html").read_text() == html
    # and the store still answers
    r2 = _sql(db, "select count(*) as n from runs")
    assert r2.exit_code == 0 and json.loads(r2.output)[0]["n"] == 1


def test_named_queries_work_on_the_locked_connection(sql_store):
    from click.testing import CliRunner
    from forensics.store.queries import named_queries, query_cmd
    _d, db = sql_store
    for name, q in named_queries().items():
        args = [name, "--db", str(db), "--json"] + [a for p in q.params for a in ("--param", f"{p}={RID}")]
        r = CliRunner().invoke(query_cmd, args)
        assert r.exit_code == 0, (name, r.output)
    r = _sql(db, "select run_id from runs")
    assert r.exit_code == 0 and json.loads(r.output) == [{"run_id": RID}]


# ------------------------------------------------------------------------------ the fuzz benchmark
def test_fuzz_mutations_reach_every_field_and_class():
    import random
    from devkit.bench.fuzz import CLASSES, field_paths, mutate_line
    line = _j({"type": "assistant", "message": {"id": "m", "content": [
        {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls", "timeout": 5}}]}}).encode()
    n = len(field_paths(json.loads(line)))
    assert n == 11
    seen: set = set()
    rng = random.Random(0)
    classes = set()
    for rnd in range(n * len(CLASSES)):
        new, cls = mutate_line(line, 0, rnd, rng, 1000, seen)
        classes.add(cls)
        assert new != line
        if cls in ("deep_nesting", "huge_int", "null", "wrong_type", "negative_int", "long_string"):
            try:
                json.loads(new)  # still valid JSON
            except RecursionError:  # 3,000 levels: deeper than the stdlib parser goes
                assert cls == "deep_nesting" and new.count(b"[") + new.count(b"{") > 2000
    assert classes == set(CLASSES)
    assert len({f for f, _c in seen if f != "<line>"}) == n  # every field path was mutated


def test_fuzz_bench_small(tmp_path):
    """A small sample of `forensics bench fuzz`: 10 runs of the fixture covering its formats, one
    round; every line in records or parse_errors, no stub, every analyzer ran for every run."""
    from devkit.bench.fuzz import default_archive, run_fuzz
    res = run_fuzz(default_archive(), tmp_path, rounds=1, seed=3, rate=0.6, long_bytes=4000, runs=10)
    assert res["problems"] == [], res["problems"]
    assert res["runs_per_round"] == 10 and res["lines_tried"] > 100
    assert res["runs_lost"] == 0 and res["lines_lost"] == 0 and res["analyzers_failed"] == 0
    assert {"lone_surrogate", "huge_int", "wrong_type", "deep_nesting", "invalid_utf8", "truncation"} <= set(res["classes"])
    assert {"two_line_prefix", "non_utf8_name/file", "non_utf8_name/run_folder"} <= set(res["classes"])
    assert res["names_unreported"] == 0


def test_non_finite_token_counts_do_not_stop_the_parser():
    from forensics.transcripts import parse_source
    from forensics.transcripts.events import ParseError
    L = claude_lines(RID)
    L[1] = L[1].replace('"input_tokens":10', '"input_tokens":NaN', 1)
    L[-1] = L[-1].replace('"output_tokens":50', '"output_tokens":Infinity', 1)
    ev = list(parse_source(("\n".join(L) + "\n").encode(), harness="claude"))
    assert not [e for e in ev if isinstance(e, ParseError)], [e for e in ev if isinstance(e, ParseError)]
    assert ev[-1].end_reason == "success" and ev[-1].format == "claude"
