"""Resource bombs (issue 36, "Resources are unbounded per run"): one file of one run can no longer
take the scan's memory or time, or cost another run anything; every cap that bites is said.

Each test failed on the code before the fix: a .gz of newlines was split into one bytes object
per line (119 CPU seconds for 2 MiB), a transcript's records were all kept (30 M records took the
scan past 8 GiB), solution.py and result.json were read whole, every file was hashed whatever its
size (a sparse 64 GiB sidecar), a .tar.gz decompressed again from its start for every backward
seek, and nothing in the verdict said a file had not been read.  The limits are named in
forensics/limits.py; the tests lower them through their variables, as a user can.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import shutil
import tarfile
from pathlib import Path

import pytest

from forensics import limits as LIM
from forensics import pipeline as P
from forensics.store.db import Store
from forensics.store.ingest import ingest_archive
from forensics.transcripts import parse_source
from forensics.transcripts import reader as R

FIXTURE = Path(__file__).resolve().parent.parent / "corpus" / "fixtures" / "archive"
BASE = "20260730_150000_claude_claude-opus-4-8_01_fp8_gemm"     # a Claude run with every file
OTHER = "20260731_140000_claude_claude-opus-4-8_05_topk_bitonic"


def _archive(tmp: Path, bombed: str = "20200101_000000_claude_claude-opus-4-8_01_fp8_gemm") -> tuple[Path, Path]:
    """An archive of two fixture runs: an ordinary one, and a copy of BASE (to plant a bomb in)."""
    root = tmp / "arch" / "outputs" / "runs"
    root.mkdir(parents=True)
    from devkit.generator.bombs import copy_run
    shutil.copytree(next(FIXTURE.glob(f"outputs/*/{OTHER}")), root / OTHER)
    copy_run(next(FIXTURE.glob(f"outputs/*/{BASE}")), root / bombed)
    return tmp / "arch", root / bombed


def _rows(db, sql, args=()):
    with Store(db, read_only=True) as s:
        return s.query(sql, list(args))


# ------------------------------------------------------------------------------ blank lines
def test_a_gzip_of_newlines_is_counted_not_split():
    """64 MiB of newlines (64 KiB gzipped) then one record: the reader yields a few BLANK batches
    instead of 64 M empty lines, and the record keeps its line number and byte offset."""
    n = 64 << 20
    rec = b'{"type":"user","message":{"role":"user","content":"hi"}}'
    data = gzip.compress(b"\n" * n + rec + b"\n", 6)
    items = blanks = 0
    for kind, payload in R.iter_batches(R.Source(io.BytesIO(data))):
        if kind == R.BLANK:
            blanks += payload
        elif kind in (R.LINES, R.LAST):
            items += len(payload)
    assert blanks + items == n + 1
    assert items < 5000, f"{items} line objects for a run of blank lines"
    recs = [e for e in parse_source(io.BytesIO(data), harness="claude") if type(e).__name__ == "Record"]
    assert [(r.line, r.byte_offset) for r in recs] == [(n + 1, n)]


@pytest.mark.parametrize("k", [1, 2, 63, 64, 65, 200])
def test_blank_runs_keep_every_line_number(k):
    """Blank runs of every length around BLANK_RUN, across block boundaries, under a partial line:
    the lines the reader yields (BLANK counted as that many empty lines) equal str.split."""
    rnd = random.Random(k)
    parts = []
    for _ in range(400):
        parts.append(b"x" * rnd.randint(0, 3000))
        parts.append(b"\n" * rnd.choice([1, k, k + 1, 2 * k]))
    data = b"".join(parts) + b"tail"
    got: list[bytes] = []
    for kind, payload in R.iter_batches(R.Source(io.BytesIO(data))):
        if kind == R.BLANK:
            got += [b""] * payload
        elif kind in (R.LINES, R.LAST):
            got += payload
    assert got == data.split(b"\n")


# ------------------------------------------------------------------------------ transcripts
def _claude(n: int) -> bytes:
    out = [json.dumps({"type": "system", "subtype": "init", "session_id": "s", "cwd": "/w"})]
    for i in range(n):
        out.append(json.dumps({"type": "user", "message": {"role": "user", "content": f"turn {i}"}}))
    return ("\n".join(out) + "\n").encode()


def test_records_per_run_are_capped_and_said(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_MAX_RECORDS", "500")
    arch, run = _archive(tmp_path)
    (run / "transcript.jsonl").write_bytes(_claude(3000))
    with Store(tmp_path / "s.duckdb") as st:
        ingest_archive(st, arch)
        rid = run.name
        assert st.scalar("select count(*) from records where run_id = ?", [rid]) == 500
        row = st.query("select source, line, detail from parse_errors where run_id = ? and reason = 'over_limit'", [rid])
        assert row and row[0]["source"] == "transcript.jsonl" and row[0]["line"] == 501
        assert "MAX_RECORDS" in row[0]["detail"] and "FORENSICS_MAX_RECORDS" in row[0]["detail"]
        end = st.query("select end_reason, cut_off from session_end where run_id = ?", [rid])
        assert end == [{"end_reason": "unknown", "cut_off": False}]
        assert st.scalar("select transcript_format from runs where run_id = ?", [rid]) == "claude"
        assert st.scalar("select sha256 from files where run_id = ? and path = 'transcript.jsonl'", [rid]) \
            == __import__("hashlib").sha256((run / "transcript.jsonl").read_bytes()).hexdigest()
        # the ordinary run is whole
        assert not st.query("select 1 from parse_errors where run_id = ? and reason = 'over_limit'", [OTHER])


def test_decompressed_transcript_bytes_are_capped(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_MAX_TRANSCRIPT_BYTES", "20K")
    arch, run = _archive(tmp_path)
    (run / "transcript.jsonl").unlink()
    (run / "transcript.jsonl.gz").write_bytes(gzip.compress(_claude(2000)))
    with Store(tmp_path / "s.duckdb") as st:
        ingest_archive(st, arch)
        rid = run.name
        rows = st.query("select source, line, detail from parse_errors where run_id = ? and reason = 'over_limit'", [rid])
        assert [r["source"] for r in rows] == ["transcript.jsonl.gz"]
        assert "MAX_TRANSCRIPT_BYTES" in rows[0]["detail"]
        n = st.scalar("select count(*) from records where run_id = ?", [rid])
        assert 100 < n < 400 and rows[0]["line"] == n + 1
        assert st.scalar("select end_reason from session_end where run_id = ?", [rid]) == "unknown"


# ------------------------------------------------------------------------------ files
def test_files_over_their_limits_are_streamed_or_skipped_and_said(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_MAX_FILE_BYTES", "64K")
    monkeypatch.setenv("FORENSICS_MAX_HASH_BYTES", "1M")
    arch, run = _archive(tmp_path)
    sol = b"import torch\n" + b"X = 1  # padding\n" * 20_000            # 340 KB
    (run / "solution.py").write_bytes(sol)
    (run / "result.json").write_bytes(b'{"problem": "01_fp8_gemm", "trace": [' + b"0," * 100_000 + b"0]}")
    with open(run / "scratch" / "huge.cu", "wb") as f:        # sparse: 8 GiB apparent, no blocks
        f.truncate(8 << 30)
    with Store(tmp_path / "s.duckdb") as st:
        ingest_archive(st, arch)
        rid = run.name
        over = {r["source"]: r["detail"] for r in st.query(
            "select source, detail from parse_errors where run_id = ? and reason = 'over_limit'", [rid])}
        assert set(over) == {"solution.py", "result.json", "scratch/huge.cu"}
        assert "MAX_FILE_BYTES" in over["solution.py"] and "MAX_HASH_BYTES" in over["scratch/huge.cu"]
        r = st.query("select solution_sha256, solution_lines, has_result from runs where run_id = ?", [rid])[0]
        import hashlib
        assert r["solution_sha256"] == hashlib.sha256(sol).hexdigest() and r["solution_lines"] == 20_001
        assert r["has_result"] is False
        assert st.scalar("select sha256 from files where run_id = ? and path = 'scratch/huge.cu'", [rid]) is None
        assert st.scalar("select size from files where run_id = ? and path = 'scratch/huge.cu'", [rid]) == 8 << 30
        from forensics.archive import RunFiles
        rf = RunFiles.from_store(st, rid)
        assert rf.read_bytes("solution.py") is None and rf.read_bytes("solution.py", 13) == b"import torch\n"
        assert rf.read_bytes("scratch/huge.cu") is None
        assert rf.read_bytes("check.log") is not None


def test_a_bombed_run_is_marked_and_its_fields_unknown(tmp_path, monkeypatch):
    """The scan: the bombed run gets an input-over-limit finding citing each file and its fields
    are unknown (K1) with the reason; the ordinary run's verdict is the one it has alone."""
    monkeypatch.setenv("FORENSICS_MAX_FILE_BYTES", "64K")
    arch, run = _archive(tmp_path)
    alone = P.scan(arch, out=tmp_path / "alone", progress=False, reports=False)
    ref = {v["run_id"]: v for v in alone.verdicts}[OTHER]
    (run / "solution.py").write_bytes(b"import torch\n" + b"X = 1\n" * 20_000)
    (run / "result.json").write_bytes(b'{"correct": true, "trace": [' + b"0," * 100_000 + b"0]}")
    res = P.scan(arch, out=tmp_path / "r", progress=False, reports=False)
    v = {x["run_id"]: x for x in res.verdicts}
    bomb = v[run.name]
    for f in ("reward_hack", "correct", "failure_reason", "measurement_status", "empirical_recompute_required"):
        assert bomb[f] == "unknown" and bomb["rules"][f] == "K1", (f, bomb["decided_by"][f])
        assert "MAX_FILE_BYTES" in bomb["decided_by"][f]
    assert bomb["verdict"] == "unknown"
    marks = _rows(res.db, "select file, severity, data from findings where run_id = ? and rule = 'input-over-limit' "
                  "order by file", [run.name])
    assert [m["file"] for m in marks] == ["result.json", "solution.py"] and {m["severity"] for m in marks} == {"high"}
    assert {k: v[OTHER][k] for k in ("verdict", "reward_hack", "contamination", "correct")} == \
        {k: ref[k] for k in ("verdict", "reward_hack", "contamination", "correct")}


def test_a_cap_does_not_hide_a_decisive_finding(tmp_path, monkeypatch):
    """K1 leaves a decision that stands whatever the unread file holds: a run whose solution.py is a
    hack (RH2) stays reward_hack although a sidecar is over the limit; a run with no solution keeps
    correct=false (CO2) although its result.json is."""
    monkeypatch.setenv("FORENSICS_MAX_FILE_BYTES", "64K")
    from devkit.generator.bombs import copy_run
    hack = "20260801_090000_claude_claude-opus-4-8_07_w4a16_gemm"
    arch, run = _archive(tmp_path)
    copy_run(next(FIXTURE.glob(f"outputs/*/{hack}")), arch / "outputs" / "runs" / hack)
    with open(arch / "outputs" / "runs" / hack / "scratch" / "big.cu", "wb") as f:
        f.truncate(1 << 20)
    (run / "solution.py").unlink()
    (run / "result.json").write_bytes(b'{"has_solution": false, "trace": [' + b"0," * 100_000 + b"0]}")
    res = P.scan(arch, out=tmp_path / "r", progress=False, reports=False)
    v = {x["run_id"]: x for x in res.verdicts}
    assert v[hack]["reward_hack"] is True and v[hack]["rules"]["reward_hack"] == "RH2"
    assert v[hack]["verdict"] == "reward_hack"
    assert v[hack]["rules"]["empirical_recompute_required"] in ("K1", "ER1")
    marks = _rows(res.db, "select file, data from findings where run_id = ? and rule = 'input-over-limit'", [hack])
    assert [m["file"] for m in marks] == ["scratch/big.cu"] and "reward_hack" in json.loads(marks[0]["data"])["fields"]
    nosol = v[run.name]
    assert nosol["correct"] is False and nosol["rules"]["correct"] == "CO2"
    assert nosol["rules"]["failure_reason"] == "K1"


def test_limit_variables_are_checked():
    os.environ["FORENSICS_MAX_RECORDS"] = "many"
    try:
        with pytest.raises(ValueError, match="FORENSICS_MAX_RECORDS"):
            LIM.MAX_RECORDS.value()
    finally:
        del os.environ["FORENSICS_MAX_RECORDS"]
    assert LIM.parse_size("64K") == 65536 and LIM.parse_size("2G") == 2 << 30 and LIM.parse_size("x") is None


# ------------------------------------------------------------------------------ .tar.gz
def _rchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("rchar"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
def test_a_big_member_of_a_tgz_costs_later_reads_nothing(tmp_path):
    """A .tar.gz whose first member is 48 MiB of random bytes: reading a member after it, then one
    before it, then the one after it again reads a few MiB of the archive, not the big member again
    (gzip.GzipFile re-read it from the start at every backward seek)."""
    from forensics.archive.source import TarSource
    from forensics.archive import gzindex
    big = random.Random(0).randbytes(48 << 20)
    out = tmp_path / "a.tar.gz"
    with tarfile.open(out, "w:gz", compresslevel=1) as tf:
        for name, data in (("a/small0.txt", b"zero\n"), ("b/big.bin", big), ("c/small1.txt", b"one\n")):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    src = TarSource(out)
    src.entries()
    assert src.read("c/small1.txt") == b"one\n"
    before = _rchar()
    for _ in range(5):
        assert src.read("a/small0.txt") == b"zero\n"
        assert src.read("c/small1.txt") == b"one\n"
    spent = _rchar() - before
    assert spent < 5 * 2 * (gzindex.MIN_SPACING + (1 << 20)), f"{spent} bytes read for 10 small members"
    assert src.read("b/big.bin") == big
    src.close()


def test_indexed_gzip_seeks_anywhere():
    from hypothesis import given, settings, strategies as hs

    from forensics.archive import gzindex
    rnd = random.Random(3)
    data = b"".join(rnd.randbytes(rnd.randint(1, 4000)) + b"\0" * rnd.randint(0, 200_000) for _ in range(60))
    raw = gzip.compress(data[:len(data) // 3]) + gzip.compress(data[len(data) // 3:]) + b"\0" * 64
    old = gzindex.MIN_SPACING
    gzindex.MIN_SPACING = 1 << 16
    try:
        f = gzindex.open_indexed(io.BytesIO(raw))
        assert f.read() == data

        @settings(max_examples=200, deadline=None)
        @given(hs.lists(hs.tuples(hs.integers(0, len(data)), hs.integers(0, 70_000)), min_size=1, max_size=8))
        def seeks(ops):
            g = gzindex.open_indexed(io.BytesIO(raw))
            for a, n in ops:
                g.seek(a)
                assert g.read(n) == data[a:a + n]
        seeks()
    finally:
        gzindex.MIN_SPACING = old
    with pytest.raises((EOFError, OSError)):
        gzindex.open_indexed(io.BytesIO(raw[: len(raw) // 2])).read()


# ------------------------------------------------------------------------------ the bench
def test_bomb_bench_small(tmp_path):
    """`forensics bench bombs --small` on two bombs beside two ordinary runs: the scans finish, the
    bombed runs are marked, the ordinary runs are analysed as in the baseline."""
    from devkit.bench.bombs import SMALL_LIMITS, run_bombs
    from devkit.generator.bombs import Sizes
    res = run_bombs(tmp_path, ["solution", "transcript", "sparse"], ["dir"], 2, Sizes.small(), 1, 6 << 30, 4 << 30,
                    600, together=False, limits=SMALL_LIMITS)
    assert res["ok"], [m.get("problems") for m in res["rows"]]
    assert [m["name"] for m in res["rows"]] == ["baseline", "solution", "transcript", "sparse"]
    assert all(m["marked"] for m in res["rows"][1:])
