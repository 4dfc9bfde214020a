"""Where `forensics scan` runs its per-run work: local worker processes (the default) or Ray.

    from forensics.engine import get_engine
    eng = get_engine("local", jobs=2)                  # worker processes of this machine
    eng = get_engine("ray", address="auto")            # Ray tasks on a cluster (pip install 'kernel-forensics[ray]')

An engine runs the same units of work either way, and the driver (the `forensics scan` process)
stays DuckDB's one writer, so a scan's store does not depend on the engine:

* ingest: ``parse_runs`` turns discovered runs into `forensics.store.ingest.RunRows` (Arrow
  batches); `ingest_archive` commits them.
* per-run analyzers (provenance, timeline, static, replay): ``map_chunks`` runs
  `forensics.analyze.registry.analyze_chunk` over chunks of runs and hands back the rows each wrote;
  `run_analyzers` applies them.  Cross-run analysis (similarity) stays in the driver.

Every unit a worker ran is recorded (``units``: stage, runs, seconds, node, GPU); ``report``
turns them into the per-run timings `forensics scan --json` prints.

The local engine's workers come from `forensics.pool` (a forkserver, never fork: a dead
worker costs only its own run or chunk, which is recorded with the reason; it never hangs the scan).
The Ray engine is in `forensics.engine.ray_engine`; Ray is imported only when it is asked for, so
the tool imports and runs without Ray installed.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from typing import Any

from forensics.pool import here, maybe_fault, pmap
from forensics.store.ingest import parse_local

from .base import AUTO_MAX_JOBS, AUTO_MIN_RUNS, auto_jobs  # noqa: F401 - re-exported
from .base import (DEFAULT_RETRIES, DEFAULT_TASK_TIMEOUT_S, ENGINES, Engine, EngineError, failed_chunk,
                   fault_from_env)

# ---------------------------------------------------------------------------------------------
# The local engine: worker processes of this machine (forensics.pool).
def _local_analyze(args) -> tuple[tuple, float, dict[str, Any]]:
    from forensics.analyze.registry import analyze_chunk
    db_path, module, chunk, stage, fault = args
    maybe_fault(fault, stage, chunk)
    t0 = time.perf_counter()
    res = analyze_chunk((db_path, module, chunk))
    return res, time.perf_counter() - t0, here()


class LocalEngine(Engine):
    """``jobs`` worker processes on this machine (``jobs=1``: in the driver's process); ``jobs=None``:
    sized per stage by the runs it has to do (`auto_jobs`: one process for few runs)."""

    name = "local"

    def __init__(self, jobs: int | None = 1, fault: dict | None = None) -> None:
        super().__init__()
        self.auto = jobs is None
        self.jobs = 1 if self.auto else max(1, int(jobs or 1))
        # honoured in worker processes only (jobs > 1): the driver itself is never killed
        self.fault = fault if fault is not None else fault_from_env()

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "jobs": self.jobs, "node": socket.gethostname(),
                **({"jobs_auto": True} if self.auto else {})}

    def fit(self, n_runs):
        if self.auto:
            self.jobs = auto_jobs(n_runs)

    def parse_runs(self, src, location, runs, known):
        self.fit(len(runs))
        def lost(run, reason):
            self.failures.append({"stage": "ingest", "runs": [run.run_id], "reason": reason, "action": "reported"})
        # the fault hook only in worker processes: the driver itself is never killed
        fault = self.fault if self.jobs > 1 else None
        for rows, secs, where in parse_local(src, location, runs, known, self.jobs, fault, lost):
            if where:
                self.record("ingest", [rows.run_id], secs, where)
            yield rows

    def chunk_size(self, analyzer, n_runs):
        # at most a chunk store's worth (each chunk is copied out of the store once: fewer, larger
        # chunks copy less), at least two chunks a worker
        from forensics.store.chunks import CHUNK_RUNS
        return max(1, min(CHUNK_RUNS, -(-n_runs // (2 * self.jobs))))

    def parallel(self, n_chunks, db_path):
        return bool(self.jobs > 1 and n_chunks > 1 and db_path and db_path != ":memory:")

    def map_chunks(self, store, db_path, analyzer, module, chunks, on_result=None):
        """Each worker attaches the store read-only, so the driver checkpoints and releases it
        for the duration and reopens it after."""
        from forensics.store.db import Store
        store.con.execute("CHECKPOINT")
        store.close()
        results = []
        try:
            split: list[Sequence[str]] = []

            def lost(args, reason):
                chunk = list(args[2])
                if len(chunk) > 1:      # which run killed it is unknown: each runs alone
                    self.failures.append({"stage": analyzer, "runs": chunk, "reason": reason,
                                          "action": "split into one task per run"})
                    split.extend([rid] for rid in chunk)
                    return None
                self.failures.append({"stage": analyzer, "runs": chunk, "reason": reason, "action": "reported"})
                return failed_chunk(module, chunk, reason), 0.0, {}

            for batch in (chunks, split):
                for out in pmap(_local_analyze, [(db_path, module, c, analyzer, self.fault) for c in batch], self.jobs,
                                ordered=False, lost=lost):
                    if out is None:
                        continue
                    res, secs, where = out
                    if where:
                        self.record(analyzer, res[1], secs, where)
                    results.append(res)
                    if on_result:
                        on_result(len(res[1]))
        finally:
            store = Store(db_path)
        return store, results


def get_engine(name: str | Engine | None = "local", jobs: int | None = 1, address: str | None = None,
               task_timeout: float | None = None, retries: int | None = None) -> Engine:
    """An engine by name ('local' or 'ray'); an Engine instance is returned as is.  `jobs` None:
    the local engine sizes each stage itself (`auto_jobs`); Ray's local cluster gets one CPU."""
    if isinstance(name, Engine):
        return name
    name = (name or "local").lower()
    if name == "local":
        if address:
            raise EngineError("--address needs --engine ray")
        return LocalEngine(jobs)
    if name == "ray":
        from .ray_engine import RayEngine
        return RayEngine(address=address, jobs=jobs or 1,
                         task_timeout=DEFAULT_TASK_TIMEOUT_S if task_timeout is None else task_timeout,
                         retries=DEFAULT_RETRIES if retries is None else retries)
    raise EngineError(f"unknown engine {name!r} (have {', '.join(ENGINES)})")


__all__ = ["AUTO_MIN_RUNS", "ENGINES", "Engine", "EngineError", "LocalEngine", "auto_jobs", "get_engine", "failed_chunk"]
