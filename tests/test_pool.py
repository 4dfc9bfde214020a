"""forensics.pool and the local engine on top of it: a worker that dies costs only its own
item (never the others, never a hang), workers see the parent's environment as it is now, and a
scan whose worker dies on one run still records every run (the local twin of the Ray engine's
failure tests in tests/test_engine_ray.py)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from engine_util import SIX_RUNS, cut_archive
from forensics import pipeline as P
from forensics.engine import LocalEngine
from forensics.engine.compare import diff_stores
from forensics.pool import FAULT_ENV, context, pmap
from forensics.store.db import Store

DIE_ON = 7


def square_or_die(x: int) -> int:
    if x == DIE_ON:
        os._exit(3)                 # as the OOM killer or a segfault would: no exception, no result
    return x * x


def boom(x: int) -> int:
    if x == 2:
        raise ValueError("an ordinary exception")
    return x


def env_of(name: str) -> str | None:
    return os.environ.get(name)


def test_never_fork():
    # fork would copy a parent's native threads' held locks into the child (the CI hang of stop 25's round)
    assert context().get_start_method() in ("forkserver", "spawn")


@pytest.mark.parametrize("chunksize", [1, 4])
def test_a_dead_worker_costs_its_item_only(chunksize):
    lost = []
    out = list(pmap(square_or_die, range(20), 2, chunksize=chunksize,
                    lost=lambda x, why: lost.append((x, why)) or -1))
    assert out == [-1 if x == DIE_ON else x * x for x in range(20)]      # in order, every other result real
    assert [x for x, _ in lost] == [DIE_ON] and "worker process died" in lost[0][1]


def test_unordered_yields_everything_once():
    out = list(pmap(square_or_die, range(12), 2, ordered=False, lost=lambda x, why: None))
    assert sorted(v for v in out if v is not None) == sorted(x * x for x in range(12) if x != DIE_ON)
    assert out.count(None) == 1


def test_dead_worker_without_lost_raises_not_hangs():
    with pytest.raises(RuntimeError, match="worker process died"):
        list(pmap(square_or_die, [DIE_ON], 1))


def test_an_ordinary_exception_propagates():
    # a bug in fn is not a lost worker: it is not papered over
    with pytest.raises(ValueError, match="ordinary"):
        list(pmap(boom, range(4), 2))


def test_workers_see_the_environment_as_it_is_now(monkeypatch):
    list(pmap(env_of, ["X"], 1))                      # the forkserver is up, started with the old environment
    monkeypatch.setenv("FORENSICS_POOL_TEST", "now")
    assert list(pmap(env_of, ["FORENSICS_POOL_TEST"] * 3, 2)) == ["now"] * 3


def test_a_threaded_parent_does_not_hang_the_pool():
    # the look-alike of the CI hang: busy threads (holding locks) in the parent at the moment workers start
    stop = threading.Event()
    lock = threading.Lock()

    def hold():
        while not stop.is_set():
            with lock:
                time.sleep(0.001)
    ts = [threading.Thread(target=hold, daemon=True) for _ in range(4)]
    for t in ts:
        t.start()
    try:
        assert list(pmap(square_or_die, range(6), 2)) == [x * x for x in range(6)]
    finally:
        stop.set()


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    arch = cut_archive(tmp_path_factory.mktemp("six") / "a", SIX_RUNS)
    ref = P.scan(arch, out=tmp_path_factory.mktemp("six-ref"), jobs=2, progress=False, reports=False)
    return arch, ref


def test_local_scan_survives_a_worker_that_dies_on_one_run(six, tmp_path, monkeypatch):
    arch, ref = six
    ids = sorted(ref.run_ids)
    victim = ids[3]
    # an analyzer: the victim's chunk dies, is split into one task per run, and only the victim is lost
    monkeypatch.setenv(FAULT_ENV, f"stage=static,run={victim}")
    res = P.scan(arch, out=tmp_path / "s", progress=False, reports=False, jobs=2)
    assert res.coverage["failed"] == {"static": 1}
    assert [f["action"] for f in res.engine["failures"]][-1] == "reported"
    assert all(f["runs"] == [victim] for f in res.engine["failures"] if f["action"] == "reported")
    with Store(res.db, read_only=True) as s:
        cov = s.query("select message, data from findings where analyzer = 'pipeline' and run_id = ? "
                      "and rule = 'analysis-coverage'", [victim])
        assert any("worker process died" in (r["message"] or "") + (r["data"] or "") for r in cov), cov
    assert diff_stores(ref.db, res.db, where=f"where run_id <> '{victim}'") == {}
    assert len(res.verdicts) == len(ids)
    # not final: the next scan (no fault) redoes that run alone, and then all agrees
    monkeypatch.delenv(FAULT_ENV)
    again = P.scan(arch, out=tmp_path / "s", progress=False, reports=False, jobs=2)
    assert again.analyzed == [victim] and again.coverage["failed"] == {}
    assert diff_stores(ref.db, again.db) == {}

    # ingest: the victim gets its runs row and a parse_errors row with the reason
    monkeypatch.setenv(FAULT_ENV, f"stage=ingest,run={victim}")
    res = P.scan(arch, out=tmp_path / "i", progress=False, reports=False, jobs=2)
    assert set(res.run_ids) == set(ids)
    with Store(res.db, read_only=True) as s:
        err = s.query("select reason, detail from parse_errors where run_id = ?", [victim])
        assert err and any("worker process died" in f"{e['reason']} {e['detail']}" for e in err), err
        assert s.scalar("select count(*) from tool_calls where run_id <> ?", [victim]) > 0


def test_jobs_1_never_faults_the_driver(six, tmp_path):
    arch, ref = six
    eng = LocalEngine(1, fault={"stage": "static", "run": sorted(ref.run_ids)[0], "mode": "exit"})
    res = P.scan(arch, out=tmp_path / "one", progress=False, reports=False, engine=eng)
    assert res.coverage["failed"] == {}
