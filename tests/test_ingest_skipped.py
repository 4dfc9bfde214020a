"""Discovery: folders that look like runs but are not taken as runs are counted and said, with the
reason (issue 39), in the ingest's report, its CLI output, the store and the scan's summary; the
discovery's rules themselves (nested runs, names not UTF-8) are unchanged by its linear rewrite."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from forensics.archive.discover import SKIP_REASONS, discover_runs
from forensics.archive.source import ArchiveSource, Entry
from forensics.cli import main
from forensics.store.db import Store
from forensics.store.ingest import ingest_archive

from tests.test_ingest import RID_A, RID_B, RID_C, _claude_lines, _write_run

BAD = [f"20260801_{t}_claude_claude-opus-4-8_01_fp8_gemm" for t in ("256093", "996000", "101561", "240000", "120099")]


def _layout(root: Path) -> Path:
    """Two runs, and eight folders that look like runs but are not, of every reason."""
    root.mkdir(parents=True)
    _write_run(root, RID_A, "01_fp8_gemm", _claude_lines(RID_A, "01_fp8_gemm", None))
    runs_root = root / "outputs" / "runs"
    runs_root.mkdir(parents=True)
    _write_run(runs_root, RID_B, "01_fp8_gemm", _claude_lines(RID_B, "01_fp8_gemm", None))
    for name in BAD:     # invalid time, not under a runs root: skipped (the issue's 1,600 of 2,500)
        _write_run(root, name, "01_fp8_gemm", _claude_lines(name, "01_fp8_gemm", None))
    (root / "misc" / "notes").mkdir(parents=True)
    (root / "misc" / "notes" / "result.json").write_text("{}")                       # not_run_id
    (root / "elsewhere" / RID_C / "sub").mkdir(parents=True)
    (root / "elsewhere" / RID_C / "sub" / "notes.txt").write_text("x")               # no_runner_files
    (runs_root / "tmpjunk").mkdir()
    (runs_root / "tmpjunk" / "x.txt").write_text("x")                               # unrecognised
    # inside a run, and inside a skipped folder: never listed again
    inner = root / RID_A / "repo" / "copy" / "notarun"
    inner.mkdir(parents=True)
    (inner / "result.json").write_text("{}")
    return root


def test_skipped_folders_are_counted_with_reasons_in_report_store_and_cli(tmp_path: Path):
    arch = _layout(tmp_path / "arch")
    db = tmp_path / "a.duckdb"
    with Store(db) as st:
        rep = ingest_archive(st, arch)
        assert sorted(rep.run_ids) == sorted([RID_A, RID_B])
        got = {f.path: f.reason for f in rep.skipped_folders}
        assert got == {**{b: "invalid_run_id" for b in BAD}, "misc/notes": "not_run_id",
                       f"elsewhere/{RID_C}": "no_runner_files", "outputs/runs/tmpjunk": "unrecognised"}
        bad = next(f for f in rep.skipped_folders if f.path == BAD[0])
        assert "20260801_256093" in bad.detail
        d = rep.to_dict()["skipped_folders"]
        assert d["count"] == 8 and d["by_reason"] == {"invalid_run_id": 5, "not_run_id": 1, "no_runner_files": 1,
                                                      "unrecognised": 1}
        assert [e["path"] for e in d["examples"]["invalid_run_id"]] == sorted(BAD)[:3]    # a few, in path order
        rows = st.query("select path, reason, detail from skipped_folders where archive = ? order by path",
                        [rep.archive])
        assert {r["path"]: r["reason"] for r in rows} == got and all(r["detail"] for r in rows)
        # a second ingest rewrites them (no duplicates); a fixed archive drops them
        ingest_archive(st, arch)
        assert st.scalar("select count(*) from skipped_folders") == 8
        for b in BAD:
            shutil.rmtree(arch / b)
        rep = ingest_archive(st, arch)
        assert st.scalar("select count(*) from skipped_folders") == 3
        assert Counter(f.reason for f in rep.skipped_folders) == {"not_run_id": 1, "no_runner_files": 1,
                                                                 "unrecognised": 1}


def test_cli_says_what_was_skipped_and_why(tmp_path: Path):
    arch = _layout(tmp_path / "arch")
    db = str(tmp_path / "c.duckdb")
    r = CliRunner().invoke(main, ["ingest", str(arch), "--db", db, "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "skipped 8 folder(s)" in r.output and "invalid_run_id 5" in r.output
    assert SKIP_REASONS["invalid_run_id"] in r.output and f"e.g. {sorted(BAD)[0]}" in r.output
    assert f"forensics query skipped-folders --db {db}" in r.output
    r = CliRunner().invoke(main, ["query", "skipped-folders", "--db", db, "-p", "reason=invalid_run_id", "--json"])
    assert r.exit_code == 0, r.output
    assert sorted(x["path"] for x in json.loads(r.output)) == sorted(BAD)
    r = CliRunner().invoke(main, ["ingest", str(arch), "--db", db, "--json"])
    assert json.loads(r.output)["skipped_folders"]["count"] == 8


def test_no_runs_error_names_the_skipped_folders(tmp_path: Path):
    arch = tmp_path / "only-bad"
    arch.mkdir()
    for name in BAD:
        _write_run(arch, name, "01_fp8_gemm", _claude_lines(name, "01_fp8_gemm", None))
    db = tmp_path / "n.duckdb"
    r = CliRunner().invoke(main, ["ingest", str(arch), "--db", str(db)])
    assert r.exit_code == 2
    msg = " ".join(r.output.split())
    assert "5 folder(s) that look like runs were skipped" in msg and "5 invalid_run_id" in msg
    assert not db.exists()
    r = CliRunner().invoke(main, ["scan", str(arch), "--out", str(tmp_path / "rep"), "--no-progress"])
    assert r.exit_code == 2 and "5 invalid_run_id" in " ".join(r.output.split())


def test_scan_summary_and_json_say_the_skipped_folders(tmp_path: Path):
    arch = _layout(tmp_path / "arch")
    out = tmp_path / "rep"
    r = CliRunner().invoke(main, ["scan", str(arch), "--out", str(out), "--no-progress", "--jobs", "1"])
    assert r.exit_code == 0, r.output
    assert "skipped 8 folder(s)" in r.output and "unrecognised 1" in r.output
    scan = json.loads((out / "scan.json").read_text())
    assert scan["scan"]["ingest"]["skipped_folders"]["by_reason"]["invalid_run_id"] == 5
    with Store(out / "audit.duckdb", read_only=True) as st:
        assert st.scalar("select count(*) from skipped_folders") == 8


class ListSource(ArchiveSource):
    """An archive given as its listing (what discovery reads of a source)."""

    kind = "list"

    def __init__(self, paths: list[str], raw_names: dict[str, bytes] | None = None):
        t = datetime(2026, 8, 1, tzinfo=timezone.utc)
        self._entries = [Entry(p, 1, t) for p in paths]
        self.raw_names = raw_names or {}

    def entries(self) -> list[Entry]:
        return self._entries


def test_discovery_rules_nested_runs_and_raw_names():
    a, b, c = RID_A, RID_B, RID_C
    src = ListSource([
        f"outputs/runs/{a}/result.json", f"outputs/runs/{a}/repo/outputs/runs/{b}/result.json",   # a run inside a run
        f"outputs/runs/{b}/transcript.jsonl", f"outputs/runs-h100/{b}/result.json",               # same name, two roots
        f"rescue/{c}/notes.txt",                                                                # under rescue: a run
        "outputs/runs/x\\xff/result.json",                                                      # not UTF-8, marked
        "outputs/runs/plain/x.txt",
    ], raw_names={"outputs/runs/x\\xff": b"x\xff", f"outputs/runs/{a}/n\\xfe": b"n\xfe", "outputs": b"outputs"})
    skipped: list = []
    runs = {r.run_id: r for r in discover_runs(src, skipped=skipped)}
    assert set(runs) == {a, f"{b}@runs", f"{b}@runs-h100", c, "x\\xff"}
    assert sorted(e.path for e in runs[a].entries) == ["repo/outputs/runs/" + b + "/result.json", "result.json"]
    assert runs["x\\xff"].raw_names == {"outputs/runs/x\\xff": b"x\xff", "outputs": b"outputs"}
    assert runs[a].raw_names == {f"outputs/runs/{a}/n\\xfe": b"n\xfe", "outputs": b"outputs"}
    assert runs[c].raw_names == {}
    assert [(f.path, f.reason) for f in skipped] == [("outputs/runs/plain", "unrecognised")]
    assert discover_runs(src) == list(runs.values())      # the same runs whether skipped folders are asked for
