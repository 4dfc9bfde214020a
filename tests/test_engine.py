"""forensics.engine without Ray: the local engine is the default, the tool imports and scans with
Ray absent, `--engine ray` without Ray is a clear usage error, and `--json` gives per-run timings
with the node (and GPU) that ran them.  The Ray engine itself: tests/test_engine_ray.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from engine_util import REPLAY_RUNS, cut_archive
from forensics.engine import EngineError, LocalEngine, get_engine
from forensics.pool import parse_fault

REPO = Path(__file__).resolve().parent.parent

# The scan CLI with `import ray` made to fail, as on a machine without the extra installed.
NO_RAY = textwrap.dedent("""
    import sys
    sys.modules["ray"] = None          # `import ray` raises ImportError from here on
    from forensics.cli import main
    main(sys.argv[1:])
""")


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return cut_archive(tmp_path_factory.mktemp("eng") / "a", REPLAY_RUNS)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", NO_RAY, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)


def test_scan_without_ray_installed(small, tmp_path):
    r = _cli(["scan", str(small), "--out", str(tmp_path / "r"), "--no-progress", "--json", "-j", "2"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    d = orjson.loads(r.stdout)
    assert d["engine"]["name"] == "local" and d["engine"]["jobs"] == 2
    runs = d["engine"]["runs"]
    assert set(runs) == {v["run_id"] for v in d["verdicts"]} and len(runs) == 3
    for rid, stages in runs.items():
        assert stages["ingest"]["node"] and "gpu" in stages["ingest"] and stages["ingest"]["seconds"] >= 0, rid
    # the per-run analyzers ran in the pool (two chunks): each run has their timings too
    assert all({"provenance", "timeline", "static"} <= set(s) for s in runs.values())


def test_engine_ray_without_ray_is_a_usage_error(small, tmp_path):
    r = _cli(["scan", str(small), "--out", str(tmp_path / "r"), "--no-progress", "--engine", "ray"], tmp_path)
    assert r.returncode == 2
    assert "needs Ray" in r.stderr and "pip install 'kernel-forensics[ray]'" in r.stderr
    assert not (tmp_path / "r" / "audit.duckdb").exists()   # nothing started, nothing written


def test_get_engine():
    assert isinstance(get_engine("local", jobs=3), LocalEngine) and get_engine("local", jobs=3).jobs == 3
    eng = LocalEngine(2)
    assert get_engine(eng) is eng
    with pytest.raises(EngineError, match="unknown engine"):
        get_engine("dask")
    with pytest.raises(EngineError, match="--address needs --engine ray"):
        get_engine("local", address="auto")


def test_local_engine_chunks_and_report():
    eng = LocalEngine(2)
    assert eng.chunk_size("timeline", 49) == 13 and eng.chunk_size("timeline", 1000) == 250
    assert eng.chunk_size("timeline", 100_000) == 256      # a chunk store's worth at most (forensics.store.chunks)
    assert not eng.parallel(4, ":memory:") and not LocalEngine(1).parallel(4, "x.duckdb") and eng.parallel(4, "x.duckdb")
    eng.record("ingest", ["a"], 0.5, {"node": "n1", "gpu": None})
    eng.record("timeline", ["a", "b"], 1.0, {"node": "n2", "gpu": "0"})
    rep = eng.report(["a", "b"])
    assert rep["runs"]["a"]["ingest"] == {"seconds": 0.5, "node": "n1", "gpu": None}
    assert rep["runs"]["b"]["timeline"] == {"seconds": 1.0, "node": "n2", "gpu": "0", "chunk_runs": 2}
    assert rep["stages"]["timeline"] == {"units": 1, "runs": 2, "worker_seconds": 1.0, "nodes": ["n2"]}
    assert "runs" not in eng.report(per_run=False)


def test_fault_spec():
    assert parse_fault(None) is None and parse_fault("") is None
    assert parse_fault("stage=ingest,run=r1") == {"stage": "ingest", "run": "r1", "mode": "exit"}
    assert parse_fault("stage=replay, run=r2, mode=hang, once=/tmp/x")["once"] == "/tmp/x"
    for bad in ("stage=ingest", "run=x", "stage=a,run=b,mode=explode", "garbage"):
        with pytest.raises(ValueError):
            parse_fault(bad)


def test_compare_stores_sees_rows_not_clocks(small, tmp_path):
    import shutil

    import duckdb

    from forensics import pipeline as P
    from forensics.engine.compare import diff_stores, main as compare_main
    res = P.scan(small, out=tmp_path / "a", progress=False, reports=False)
    a = Path(res.db)
    b = tmp_path / "b.duckdb"
    shutil.copyfile(a, b)
    con = duckdb.connect(str(b))
    con.execute("update verdicts set adjudicated_at = adjudicated_at + interval 1 hour")   # a clock: ignored
    con.execute("update runs set ingested_at = now()")
    con.close()
    assert diff_stores(a, b) == {} and compare_main([str(a), str(b)]) == 0
    con = duckdb.connect(str(b))
    n = con.execute("select count(*) from findings").fetchone()[0]
    con.execute("delete from findings where rowid = (select min(rowid) from findings)")
    con.execute("update tool_calls set tool = tool || 'x' where call_seq = (select min(call_seq) from tool_calls)")
    con.close()
    assert diff_stores(a, b) == {"findings": (n, n - 1), "tool_calls": (18, 18)}
    assert compare_main([str(a), str(b), "--json"]) == 1


def test_ray_workers_empty_store_leaves_no_folder_behind(tmp_path, monkeypatch):
    """Ray ends its workers without running atexit: the empty-store template a worker made once
    was a folder per worker left in the temp dir after every scan (60 of them on this machine).
    Now it is kept in memory.  Look-alike: each task still gets its own complete, writable store."""
    import tempfile
    from forensics.engine import ray_engine
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(ray_engine, "_TEMPLATE", [])
    for i in range(2):
        st = ray_engine._empty_store(str(tmp_path / f"chunk{i}.duckdb"))
        try:
            st.con.execute("SELECT count(*) FROM runs").fetchone()
        finally:
            st.close()
    assert list((tmp_path / "tmp").iterdir()) == []
