"""`forensics scan --engine ray` on a local Ray of 2 CPUs (started once for the module): the store
is the local engine's, table by table; a worker killed mid-run is retried or its run reported,
never lost; a hung task times out into its run's finding; a driver killed mid-scan resumes; and
`--replay` runs one replay per task (on the CPU here: no GPU in the cluster)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

ray = pytest.importorskip("ray")

from conftest import FIXTURE_ARCHIVE  # noqa: E402
from engine_util import REPLAY_RUNS, SIX_RUNS, cut_archive  # noqa: E402
from forensics import pipeline as P  # noqa: E402
from forensics.engine.compare import diff_stores, table_rows  # noqa: E402
from forensics.engine.ray_engine import FAULT_ENV  # noqa: E402
from forensics.store.db import Store  # noqa: E402
from forensics.store.schema import INGEST_TABLES  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    """One local Ray for the module; the engine uses it (and leaves it running) when it is up."""
    import signal
    started = not ray.is_initialized()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield ray.get_runtime_context().gcs_address
    if started:
        ray.shutdown()
    for s, h in handlers.items():       # ray.init installs its own; the rest of the suite gets pytest's back
        signal.signal(s, h)


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    """Six runs, scanned by the local engine: the reference store."""
    arch = cut_archive(tmp_path_factory.mktemp("six") / "a", SIX_RUNS)
    ref = P.scan(arch, out=tmp_path_factory.mktemp("six-local"), jobs=2, progress=False, reports=False)
    return arch, Path(ref.db), ref


def _runs(res) -> set[str]:
    return set(res.run_ids)


def test_fixture_ray_matches_local(cluster, tmp_path):
    local = P.scan(FIXTURE_ARCHIVE, out=tmp_path / "local", jobs=2, progress=False, reports=False)
    rres = P.scan(FIXTURE_ARCHIVE, out=tmp_path / "ray", jobs=2, progress=False, engine="ray")
    assert diff_stores(local.db, rres.db) == {}
    assert sum(len(table_rows(rres.db, t)) for t in ("files", "record_rows", "findings", "verdicts")) > 4000
    strip = [{k: v for k, v in d.items() if k not in ("adjudicated_at", "input_fingerprint")} for d in local.verdicts]
    assert strip == [{k: v for k, v in d.items() if k not in ("adjudicated_at", "input_fingerprint")}
                     for d in rres.verdicts]
    assert rres.coverage == local.coverage and rres.exit_code == local.exit_code
    # reports rendered from the Ray-built store (the report pool forks beside a live Ray)
    assert (tmp_path / "ray" / "index.html").is_file() and len(list((tmp_path / "ray" / "annotations").iterdir())) == 49
    e = rres.engine
    assert e["name"] == "ray" and e["cpus"] == 2 and e["failures"] == []
    assert set(e["runs"]) == _runs(rres)
    for rid, stages in e["runs"].items():
        assert {"ingest", "provenance", "timeline", "static"} <= set(stages), rid
        for st in stages.values():
            assert st["node"] and st["node_id"] and "gpu" in st and st["seconds"] >= 0
    assert "runs" not in rres.to_dict()["engine"]        # per-run detail is for --json, not scan.json


def test_killed_worker_is_retried(cluster, six, tmp_path, monkeypatch):
    arch, ref_db, ref = six
    victim = sorted(ref.run_ids)[2]
    for stage in ("ingest", "timeline"):
        marks = tmp_path / f"marks-{stage}"
        marks.mkdir()
        monkeypatch.setenv(FAULT_ENV, f"stage={stage},run={victim},mode=exit,once={marks}")
        res = P.scan(arch, out=tmp_path / stage, progress=False, reports=False, engine="ray")
        assert len(list(marks.iterdir())) == 1, stage          # the first attempt's worker did die
        assert res.engine["failures"] == [], stage              # ... and Ray re-ran its task
        assert diff_stores(ref_db, res.db) == {}, stage


def test_run_whose_worker_always_dies_is_reported(cluster, six, tmp_path, monkeypatch):
    arch, ref_db, ref = six
    ids = sorted(ref.run_ids)
    victim = ids[3]
    # an analyzer: the victim's chunk (2 runs) fails twice, is split, and only the victim is lost
    monkeypatch.setenv(FAULT_ENV, f"stage=static,run={victim}")
    res = P.scan(arch, out=tmp_path / "s", progress=False, reports=False, engine="ray", jobs=2)
    assert res.coverage["failed"] == {"static": 1}
    actions = [(f["action"], len(f["runs"])) for f in res.engine["failures"]]
    assert actions == [("split into one task per run", 2), ("reported", 1)]
    with Store(res.db, read_only=True) as s:
        cov = s.query("select message, data from findings where analyzer = 'pipeline' and run_id = ? "
                      "and rule = 'analysis-coverage'", [victim])
        assert any("worker died" in (r["message"] or "") + (r["data"] or "") for r in cov), cov
        assert s.scalar("select count(*) from findings where analyzer = 'static' and run_id = ?", [victim]) == 0
    assert diff_stores(ref_db, res.db, where=f"where run_id <> '{victim}'") == {}
    assert len(res.verdicts) == len(ids)                        # the scan went on
    # its verdict is not final: the next scan redoes that run alone, and then all agrees
    monkeypatch.delenv(FAULT_ENV)
    again = P.scan(arch, out=tmp_path / "s", progress=False, reports=False, engine="ray", jobs=2)
    assert again.analyzed == [victim] and again.coverage["failed"] == {}
    assert diff_stores(ref_db, again.db) == {}

    # ingest: the victim gets a runs row and a parse_errors row with the reason, not silence
    monkeypatch.setenv(FAULT_ENV, f"stage=ingest,run={victim}")
    out = tmp_path / "i"
    res = P.scan(arch, out=out, progress=False, reports=False, engine="ray")
    assert set(res.run_ids) == set(ids)
    with Store(res.db, read_only=True) as s:
        fp = s.scalar("select fingerprint from runs where run_id = ?", [victim])
        err = s.query("select reason, detail from parse_errors where run_id = ?", [victim])
    assert fp.startswith("error:")
    assert err and err[0]["reason"] == "internal" and "worker died" in err[0]["detail"]
    # the next scan (the fault gone) re-ingests and re-analyses it, and redoes for the other runs
    # the stages that read every run (provenance classifies a reference by the other run's facts,
    # similarity compares every run's code: forensics.analyze.registry): every run's rows are the
    # local engine's, a cross-run finding of another run about the victim included
    monkeypatch.delenv(FAULT_ENV)
    again = P.scan(arch, out=out, progress=False, reports=False, engine="ray")
    assert again.stages["ingest"] == 1 and victim in again.analyzed
    assert again.stages["static"] == again.stages["timeline"] == 1
    assert diff_stores(ref_db, again.db) == {}


def test_hung_task_times_out_into_its_runs_finding(cluster, six, tmp_path, monkeypatch):
    """The victim's ingest task hangs: its watchdog kills it at the task timeout, the run is
    recorded with the reason, and the scan goes on (an analyzer's or a replay's hang takes the
    same path: tests above)."""
    arch, ref_db, ref = six
    victim = sorted(ref.run_ids)[0]
    monkeypatch.setenv(FAULT_ENV, f"stage=ingest,run={victim},mode=hang")
    t0 = time.monotonic()
    res = P.scan(arch, out=tmp_path / "h", progress=False, reports=False, engine="ray", task_timeout=10, retries=0)
    assert time.monotonic() - t0 < 150
    reported = [f for f in res.engine["failures"] if f["action"] == "reported"]
    assert [f["runs"] for f in reported] == [[victim]] and "timeout" in reported[0]["reason"]
    with Store(res.db, read_only=True) as s:
        detail = s.scalar("select detail from parse_errors where run_id = ? and reason = 'internal'", [victim])
    assert "10 s timeout" in detail
    assert len(res.verdicts) == len(ref.run_ids)
    assert diff_stores(ref_db, res.db, where=f"where run_id <> '{victim}'", tables=INGEST_TABLES) == {}


def _cli(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "forensics.cli", "scan", *args],
                            env={**os.environ, "PYTHONPATH": str(REPO), **env}, start_new_session=True, **kw)


def test_driver_killed_mid_scan_resumes(cluster, six, tmp_path):
    """A driver on the module's cluster (--address) is SIGKILLed during an analyzer; the next scan
    finishes the job and the store is the local engine's."""
    arch, ref_db, ref = six
    out = tmp_path / "r"
    err = tmp_path / "err"
    victim = sorted(ref.run_ids)[1]
    with open(err, "wb") as ef:
        marks = tmp_path / "fault"
        marks.mkdir()
        p = _cli([str(arch), "--out", str(out), "--engine", "ray", "--address", cluster, "--task-timeout", "30"],
                 {FAULT_ENV: f"stage=static,run={victim},mode=hang,once={marks}"}, stderr=ef, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 180
            # the worker leaves its `once` marker right before it hangs (forensics.pool.maybe_fault): the
            # driver is inside the static analyzer (progress bars, the old signal, are drawn on a terminal only)
            while not any(marks.glob("static-*")):
                assert p.poll() is None and time.monotonic() < deadline, err.read_bytes()[-2000:]
                time.sleep(0.3)
            time.sleep(1.0)
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    assert (out / "audit.duckdb").exists()
    with Store(out / "audit.duckdb", read_only=True) as s:
        assert s.scalar("select count(*) from runs") == len(ref.run_ids)
        assert s.scalar("select count(*) from verdicts") == 0          # killed before adjudication
    r = _cli([str(arch), "--out", str(out), "--engine", "ray", "--address", cluster, "--json", "--no-progress"], {},
             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    so, se = r.communicate(timeout=300)
    assert r.returncode == 0, se[-2000:]
    d = orjson.loads(so)
    assert d["analyzed"] == len(ref.run_ids) and d["engine"]["address"] == cluster
    assert set(d["engine"]["runs"]) == set(ref.run_ids)
    assert all(st["static"]["node"] for st in d["engine"]["runs"].values())
    assert diff_stores(ref_db, out / "audit.duckdb") == {}


def test_replay_on_ray_one_run_per_task(cluster, tmp_path):
    arch = cut_archive(tmp_path / "a", REPLAY_RUNS[1:])     # W4A16, and a run without a solution
    local = P.scan(arch, out=tmp_path / "l", replay=True, progress=False, reports=False)
    rres = P.scan(arch, out=tmp_path / "y", replay=True, progress=False, reports=False, engine="ray")
    assert local.coverage["failed"] == {} and rres.coverage == local.coverage
    assert diff_stores(local.db, rres.db) == {}
    with Store(rres.db, read_only=True) as s:
        statuses = {r["status"] for r in s.query("select status from replay_results")}
        assert "pass" in statuses                                      # a replay really ran
        assert s.scalar("select count(*) from findings where rule = 'replay-cpu-only'") == 1
    e = rres.engine
    assert e["replay_resources"] == {"num_cpus": 1, "note": "no GPU in the cluster"}
    assert e["stages"]["replay"]["units"] == 2 and e["stages"]["replay"]["runs"] == 2
    for rid in rres.run_ids:
        rep = e["runs"][rid]["replay"]
        assert "chunk_runs" not in rep and rep["gpu"] is None and rep["seconds"] > 0


def test_tiny_generated_archive_ray_matches_chunked_local(cluster, tmp_path, monkeypatch):
    """The scale input (corpus generate --tiny) scanned by the local engine working chunk by chunk
    (chunk stores forced, chunks of 8 runs: the path an archive above CHUNK_RUNS takes) and by the
    Ray engine: every table the same, the planted copies found by both."""
    from click.testing import CliRunner

    from devkit.generator.cli import corpus_cmd
    from forensics.store import chunks as C
    arch = tmp_path / "tiny"
    r = CliRunner().invoke(corpus_cmd, ["generate", str(arch), "--runs", "60", "--seed", "5", "--tiny"])
    assert r.exit_code == 0, r.output
    monkeypatch.setenv("FORENSICS_CHUNK_STORES_ABOVE", "0")
    monkeypatch.setattr(C, "CHUNK_RUNS", 8)
    local = P.scan(arch, out=tmp_path / "local", jobs=1, progress=False, reports=False)
    rres = P.scan(arch, out=tmp_path / "ray", jobs=2, progress=False, reports=False, engine="ray")
    assert len(local.run_ids) == 60 and set(rres.run_ids) == set(local.run_ids)
    assert diff_stores(local.db, rres.db) == {}
    assert len(table_rows(rres.db, "verdicts")) == 60 and len(table_rows(rres.db, "findings")) > 0
    assert rres.engine["failures"] == []


def test_a_task_gets_its_chunks_runs_and_only_the_columns_its_analyzer_reads_of_the_others(six):
    """Every Ray task loaded the whole `runs` table (every column of every run) into its scratch store:
    O(archive) per task of every analyzer (issue 39).  A task now gets its chunk's rows of every table
    (`runs` whole), the pairs naming its runs, and of the other runs only the `runs` columns its
    analyzer declares it reads (`reads_all`): none for timeline or static, the facts for provenance."""
    from forensics.analyze.registry import BY_NAME
    from forensics.engine.ray_engine import RayEngine
    _, db, ref = six
    ids = sorted(ref.run_ids)
    chunk = ids[:2]
    with Store(str(db), read_only=True) as st:
        own = RayEngine._inputs(None, st, chunk)
        assert sorted(own["runs"].column("run_id").to_pylist()) == chunk
        assert set(own["runs"].column_names) == set(st.query("select * from runs limit 1")[0])
        for name in ("timeline", "static"):
            assert "runs" not in RayEngine._shared(None, st, BY_NAME[name].module), name
        prov = BY_NAME["provenance"]
        shared = RayEngine._shared(None, st, prov.module)
        declared = {c for r in prov.reads_all for c in r.columns} | {"run_id"}
        assert set(shared["runs"].column_names) == declared and shared["runs"].num_rows == len(ids)
        assert "archives" in shared and "skipped_folders" not in shared
