"""Per-run work chunk by chunk (forensics.store.chunks, issue 39): a scan whose analyzers and report
pages work in stores of a few runs' rows ends with the same store and the same report as one that
works on the whole store, with one process and with two; a chunk store holds the chunk's rows, the
pairs naming its runs and the declared columns of every other run, nothing else."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from forensics import pipeline as P
from forensics.analyze import registry as R
from forensics.engine.compare import diff_stores
from forensics.store import chunks as C
from forensics.store.db import Store

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "corpus" / "fixtures" / "archive"
N_RUNS = 14


def _report(out: Path) -> dict[str, bytes]:
    got = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if not p.is_file() or rel.startswith("audit.duckdb") or rel in ("scan.json", ".forensics-report.json"):
            continue
        data = p.read_bytes()
        if rel == "index.html":
            data = re.sub(rb'<p class="muted">Timings \(s\):[^<]*</p>', b"", data)
        got[rel] = data
    return got


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("chunks") / "a"
    for src in sorted(FIXTURE.glob("outputs/*/*"))[:N_RUNS]:
        shutil.copytree(src, dest / src.relative_to(FIXTURE), symlinks=True)
    return dest


@pytest.fixture(scope="module")
def whole(archive, tmp_path_factory) -> Path:
    """The scan on the whole store (a store no larger than a chunk)."""
    out = tmp_path_factory.mktemp("whole") / "r"
    res = P.scan(archive, out=out, progress=False, jobs=1)
    assert len(res.run_ids) == N_RUNS
    return out


@pytest.mark.parametrize("jobs", [1, 2])
def test_chunked_scan_equals_the_whole_store_scan(archive, whole, tmp_path, monkeypatch, jobs):
    monkeypatch.setenv("FORENSICS_CHUNK_STORES_ABOVE", "0")
    monkeypatch.setattr(C, "CHUNK_RUNS", 4)          # 14 runs: chunks of 4, 4, 4 and 2
    seen: list[list[str]] = []
    orig = C.ChunkStore.load

    def load(self, chunk, others=()):
        seen.append(list(chunk))
        return orig(self, chunk, others)
    monkeypatch.setattr(C.ChunkStore, "load", load)
    out = tmp_path / "r"
    P.scan(archive, out=out, progress=False, jobs=jobs)
    if jobs == 1:   # (in workers the loads are another process's)
        assert seen and max(map(len, seen)) == 4 and len(seen) >= 3 * 4     # 3 analyzers and the report
    assert diff_stores(whole / "audit.duckdb", out / "audit.duckdb") == {}
    assert diff_stores(whole / "audit.duckdb", out / "audit.duckdb", where="where stage <> 'report'",
                       tables={"stage_runs"}) == {}
    assert _report(out) == _report(whole)


def test_a_chunk_store_holds_the_chunk_and_what_is_declared_of_the_others(whole, tmp_path):
    shutil.copy(whole / "audit.duckdb", tmp_path / "s.duckdb")
    with Store(tmp_path / "s.duckdb") as st:
        ids = st.run_ids()
        chunk = ids[3:6]
        st.con.execute("insert into similarity_pairs (a_id, b_id, jaccard) values (?, ?, 0.5), (?, ?, 0.4)",
                       [ids[0], ids[4], ids[0], ids[1]])
        with C.ChunkStore.beside(st) as cs:
            mem = cs.load(chunk, R.BY_NAME["provenance"].reads_all)
            for t in ("files", "findings", "tool_calls", "records", "verdicts"):
                want = st.scalar(f"select count(*) from {t} where run_id in (select unnest(?::VARCHAR[]))", [chunk])
                assert mem.scalar(f"select count(*) from {t}") == want > 0, t
                assert mem.scalar(f"select count(*) from {t} where run_id not in (select unnest(?::VARCHAR[]))",
                                  [chunk]) == 0, t
            # every run's facts, the chunk's whole rows only
            assert mem.scalar("select count(*) from runs") == len(ids)
            assert mem.scalar("select count(*) from runs where run_path is not null") == len(chunk)
            assert mem.scalar("select count(*) from runs where problem is not null") == \
                st.scalar("select count(*) from runs where problem is not null")
            q = "select a_id, b_id from similarity_pairs order by 1, 2"
            touching = [p for p in st.query(q) if p["a_id"] in chunk or p["b_id"] in chunk]
            assert {"a_id": ids[0], "b_id": ids[4]} in touching
            assert mem.query(q) == touching
            assert mem.scalar("select count(*) from skipped_folders") == 0
            # the next chunk replaces it
            mem = cs.load(ids[:1])
            assert mem.scalar("select count(*) from runs") == 1
            assert mem.scalar("select count(distinct run_id) from files") == 1
            # what the chunk's work wrote replaces the chunk's rows in the store, the others untouched
            before = st.scalar("select count(*) from findings")
            n0 = st.scalar("select count(*) from findings where run_id = ?", [ids[0]])
            mem.con.execute("delete from findings")
            cs.apply(st, ids[:1], ["findings"])
            assert st.scalar("select count(*) from findings where run_id = ?", [ids[0]]) == 0
            assert st.scalar("select count(*) from findings") == before - n0
        # the chunk database is gone with the chunk store
        assert [r[0] for r in st.con.execute("select database_name from duckdb_databases() "
                                             "where database_name like 'fx_chunk%'").fetchall()] == []


def test_chunks_are_bounded_in_runs_and_bytes(whole):
    with Store(whole / "audit.duckdb", read_only=True) as st:
        ids = st.run_ids()
        sizes = dict(st.con.execute("select run_id, transcript_bytes from runs").fetchall())
        got = C.chunks(st, ids, max_runs=5)
        assert [len(c) for c in got] == [5, 5, 4] and sum(got, []) == ids
        cap = max(sizes.values())
        got = C.chunks(st, ids, max_runs=100, max_bytes=cap)
        assert sum(got, []) == ids
        for c in got:
            assert len(c) == 1 or sum(sizes[r] for r in c) <= cap


@pytest.mark.parametrize("batch", [3, 1000])
def test_scan_json_written_in_batches_is_the_whole_document(whole, tmp_path, batch):
    import orjson

    from forensics.report.jsonout import scan_json, write_scan_json
    info = {"archive": "/x", "timings": {"total": 1.5}, "when": __import__("datetime").datetime(2026, 1, 1)}
    with Store(whole / "audit.duckdb", read_only=True) as st:
        ids = st.run_ids()
        for sel in (ids, ids[:1], []):
            p = write_scan_json(st, tmp_path / "s.json", list(reversed(sel)), info, batch=batch)
            want = orjson.dumps(scan_json(st, sel, info), default=str, option=orjson.OPT_INDENT_2)
            assert p.read_bytes() == want
            doc = orjson.loads(want)
            assert [r["run_id"] for r in doc["runs"]] == sorted(sel)
            assert sum(doc["verdict_counts"].values()) == len(sel)
