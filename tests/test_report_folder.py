"""A report folder (and its store) belongs to one archive: another archive scanned into it stops
with exit 2 and one line saying how to proceed; `--replace` removes the files the tool wrote there
(nothing else) first; a rescan of the same archive resumes and drops the files of runs it no longer
has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from forensics.pipeline import ScanError, scan, scan_cmd
from forensics.report.folder import MARKER
from forensics.store.db import Store
from test_hardening import claude_lines, write_run

BASE = "20260801_101500_claude_claude-opus-4-8_01_fp8_gemm"


def archive(root: Path, *suffixes: str) -> Path:
    for s in suffixes:
        rid = f"{BASE}_{s}"
        write_run(root / "outputs" / "runs", rid, claude_lines(rid))
    return root


def store_archives(db: Path) -> set[str]:
    with Store(str(db), read_only=True) as st:
        return {r["archive"] for r in st.query("select distinct archive from runs")}


def test_second_archive_into_the_same_out_is_refused(tmp_path):
    a = archive(tmp_path / "a", "a1", "a2")
    b = archive(tmp_path / "b", "b1")
    out = tmp_path / "out"
    scan(a, out=out, progress=False)
    before = sorted(p.name for p in (out / "annotations").iterdir())
    r = CliRunner().invoke(scan_cmd, [str(b), "--out", str(out), "--no-progress"])
    assert r.exit_code == 2, r.output
    msg = r.output.strip()
    assert "\n" not in msg and str(a.resolve()) in msg and "--out" in msg and "--replace" in msg, msg
    assert store_archives(out / "audit.duckdb") == {str(a.resolve())}          # nothing of b was written
    assert sorted(p.name for p in (out / "annotations").iterdir()) == before
    ident = json.loads((out / "scan.json").read_text())["scan"]["archive_identity"]
    assert ident["path"] == str(a.resolve()) and "inode" in ident


def test_replace_removes_only_the_tools_files(tmp_path):
    a = archive(tmp_path / "a", "a1", "a2")
    b = archive(tmp_path / "b", "b1")
    out = tmp_path / "out"
    scan(a, out=out, progress=False)
    (out / "notes.txt").write_text("mine")
    (out / "annotations" / "hand-written.yaml").write_text("mine: 1\n")
    res = scan(b, out=out, progress=False, replace=True)
    assert res.run_ids == [f"{BASE}_b1"]
    assert store_archives(out / "audit.duckdb") == {str(b.resolve())}
    assert sorted(p.name for p in (out / "annotations").iterdir()) == [f"{BASE}_b1.yaml", "hand-written.yaml"]
    assert sorted(p.name for p in (out / "runs").glob("*.html")) == [f"{BASE}_b1.html"]
    assert (out / "notes.txt").read_text() == "mine"
    scan_json = json.loads((out / "scan.json").read_text())
    assert [r["run_id"] for r in scan_json["runs"]] == [f"{BASE}_b1"]
    assert scan_json["scan"]["archive_identity"]["path"] == str(b.resolve())


def test_a_store_of_another_archive_is_refused(tmp_path):
    a = archive(tmp_path / "a", "a1")
    b = archive(tmp_path / "b", "b1")
    db = tmp_path / "shared.duckdb"
    scan(a, out=tmp_path / "out-a", db=db, progress=False)
    with pytest.raises(ScanError, match="store .* holds runs of another archive"):
        scan(b, out=tmp_path / "out-b", db=db, progress=False)
    assert store_archives(db) == {str(a.resolve())}
    assert not (tmp_path / "out-b" / "annotations").exists()


def test_rescan_of_the_same_archive_resumes_and_drops_gone_runs(tmp_path):
    import shutil
    a = archive(tmp_path / "a", "a1", "a2")
    out = tmp_path / "out"
    scan(a, out=out, progress=False)
    res = scan(a, out=out, progress=False)                 # resume: nothing changed
    assert res.skipped == res.run_ids and len(res.run_ids) == 2
    shutil.rmtree(a / "outputs" / "runs" / f"{BASE}_a2")
    res = scan(a, out=out, progress=False)
    assert res.run_ids == [f"{BASE}_a1"]
    assert sorted(p.name for p in (out / "annotations").iterdir()) == [f"{BASE}_a1.yaml"]
    assert sorted(p.name for p in (out / "runs").glob("*.html")) == [f"{BASE}_a1.html"]
    marker = json.loads((out / MARKER).read_text())
    assert set(marker["files"]) == {"index.html", "verdict.html", "scan.json", f"runs/{BASE}_a1.html", f"annotations/{BASE}_a1.yaml"} | \
        ({f"runs/{BASE}_a1.timeline.png"} if (out / "runs" / f"{BASE}_a1.timeline.png").exists() else set())


def test_a_moved_archive_is_named_as_such(tmp_path):
    a = archive(tmp_path / "a", "a1")
    out = tmp_path / "out"
    scan(a, out=out, progress=False)
    moved = a.rename(tmp_path / "moved")
    with pytest.raises(ScanError, match="moved or linked"):
        scan(moved, out=out, progress=False)
