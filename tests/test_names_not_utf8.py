"""File and run-folder names that are not UTF-8 (real bytes, written through os.fsencode paths):
one such name used to abort the whole scan (rc 1, no report).  Now every run is analysed, the name
is shown with `\\xNN` escapes, and a `parse_errors` row `non_utf8_name` cites it; in a folder, a
.tar and a .zip (with and without the zip's UTF-8 flag on the bad name)."""

from __future__ import annotations

import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from forensics.archive import RunFiles
from forensics.pipeline import scan
from forensics.store.db import Store
from test_hardening import claude_lines, write_run

GOOD = "20260801_101500_claude_claude-opus-4-8_01_fp8_gemm"
BAD_FILE_RUN = GOOD + "_2"
BAD_RUN_RAW = b"20260801_101600_claude_claude-opus-4-8_\xe9_01_fp8_gemm"
BAD_RUN = "20260801_101600_claude_claude-opus-4-8_\\xe9_01_fp8_gemm"     # as shown
BAD_FILE_RAW = b"notes_\xff\xfe.txt"


def folder_archive(root: Path) -> Path:
    runs = root / "outputs" / "runs"
    write_run(runs, GOOD, claude_lines(GOOD))
    d = write_run(runs, BAD_FILE_RUN, claude_lines(BAD_FILE_RUN))
    with open(os.path.join(os.fsencode(d), BAD_FILE_RAW), "wb") as f:
        f.write(b"scratch\n")
    write_run(runs, os.fsdecode(BAD_RUN_RAW), claude_lines("x"))
    return root


def raw_files(root: Path) -> dict[bytes, bytes]:
    out = {}
    for dp, _dn, fn in os.walk(os.fsencode(root)):
        for f in fn:
            full = os.path.join(dp, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, os.fsencode(root))] = fh.read()
    return out


def zip_with_raw_names(path: Path, files: dict[bytes, bytes], utf8_flag: bool) -> Path:
    """A zip whose entry names are these exact bytes: written under placeholders of the same length
    (non-ASCII ones where `utf8_flag`, so zipfile sets the flag), then the bytes patched in."""
    placeholders = {}
    with zipfile.ZipFile(path, "w") as zf:
        for i, (raw, data) in enumerate(sorted(files.items())):
            if raw.isascii():
                zf.writestr(raw.decode(), data)
                continue
            ph = f"é{i:0{len(raw) - 2}d}" if utf8_flag else f"P{i:0{len(raw) - 1}d}"
            placeholders[ph.encode()] = raw
            zf.writestr(ph, data)
    data = path.read_bytes()
    for ph, raw in placeholders.items():
        assert data.count(ph) == 2               # the local header and the central directory
        data = data.replace(ph, raw)
    path.write_bytes(data)
    return path


def make(kind: str, tmp: Path) -> Path:
    root = folder_archive(tmp / "a")
    if kind == "dir":
        return root
    if kind == "tar":
        with tarfile.open(tmp / "a.tar.gz", "w:gz") as tf:
            tf.add(root, arcname="a")
        return tmp / "a.tar.gz"
    return zip_with_raw_names(tmp / f"{kind}.zip", raw_files(root), utf8_flag=(kind == "zip-flagged"))


@pytest.mark.parametrize("kind,jobs", [("dir", 1), ("dir", 2), ("tar", 1), ("zip", 1), ("zip-flagged", 1)])
def test_every_run_is_analysed_and_the_bad_names_are_cited(tmp_path, kind, jobs):
    arch = make(kind, tmp_path)
    res = scan(arch, out=tmp_path / "out", progress=False, jobs=jobs)
    assert sorted(res.run_ids) == sorted([GOOD, BAD_FILE_RUN, BAD_RUN])
    with Store(res.db, read_only=True) as st:
        runs = {r["run_id"]: r for r in st.query("select run_id, n_records, has_solution from runs")}
        assert all(r["n_records"] == 9 and r["has_solution"] for r in runs.values()), runs
        rows = st.query("select run_id, source, detail, excerpt from parse_errors where reason = 'non_utf8_name' "
                        "order by run_id")
        assert [(r["run_id"], r["source"]) for r in rows] == [(BAD_FILE_RUN, "notes_\\xff\\xfe.txt"), (BAD_RUN, None)]
        assert "\\xe9" in rows[1]["detail"] and "run folder" in rows[1]["detail"]
        # the bad run's files were read (hashed) under the shown name, and read back through the store
        hashed = {r["path"] for r in st.query("select path from files where run_id = ? and sha256 is not null", [BAD_RUN])}
        assert {"solution.py", "transcript.jsonl", "result.json"} <= hashed
        assert RunFiles.from_store(st, BAD_RUN).read_bytes("solution.py") == b"import torch\n"
        assert RunFiles.from_store(st, BAD_FILE_RUN).read_bytes("notes_\\xff\\xfe.txt") == b"scratch\n"
        cov = {r[0] for r in st.con.execute("select run_id from findings where rule = 'analysis-coverage' "
                                            "and severity = 'info'").fetchall()}
        assert cov == set(res.run_ids)                      # every analyzer ran for every run
    assert len(list((tmp_path / "out" / "annotations").glob("*.yaml"))) == 3


def test_shown_names_are_injective_beside_a_real_backslash_name(tmp_path):
    from forensics.archive.source import DirSource
    d = tmp_path / "a"
    d.mkdir()
    (d / "x\\xff").write_bytes(b"literal")                  # a real name holding backslash-x-f-f
    with open(os.path.join(os.fsencode(d), b"x\xff"), "wb") as f:
        f.write(b"raw")
    src = DirSource(d)
    names = sorted(e.path for e in src.entries())
    assert len(names) == 2 and "x\\xff" in names
    other = next(n for n in names if n != "x\\xff")
    assert other.startswith("x\\xff~")
    assert src.read("x\\xff") == b"literal" and src.read(other) == b"raw"
    assert DirSource(d).read(other) == b"raw"               # mapped back without a listing too
