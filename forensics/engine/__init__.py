"""Where `forensics scan` runs its per-run work: local worker processes (the default) or Ray.

    from forensics.engine import get_engine
    eng = get_engine("local", jobs=2)                  # worker processes of this machine
    eng = get_engine("ray", address="auto")            # Ray tasks on a cluster (pip install 'forensics[ray]')

An engine runs the same units of work either way, and the driver (the `forensics scan` process)
stays DuckDB's one writer, so a scan's store does not depend on the engine:

* ingest: ``parse_runs`` turns discovered runs into `forensics.store.ingest.RunRows` (Arrow
  batches); `ingest_archive` commits them.
* per-run analyzers (provenance, timeline, static, replay): ``map_chunks`` runs
  `forensics.pipeline._analyze_chunk` over chunks of runs and hands back the rows each wrote;
  `run_analyzers` applies them.  Cross-run analysis (similarity) stays in the driver.

Every unit a worker ran is recorded (``units``: stage, runs, seconds, node, GPU); ``report``
turns them into the per-run timings `forensics scan --json` prints.

The local engine's workers come from `forensics.engine.pool` (a forkserver, never fork: a dead
worker costs only its own run or chunk, which is recorded with the reason; it never hangs the scan).
The Ray engine is in `forensics.engine.ray_engine`; Ray is imported only when it is asked for, so
the tool imports and runs without Ray installed.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from .pool import pmap

ENGINES = ("local", "ray")
DEFAULT_TASK_TIMEOUT_S = 1800.0   # one Ray task (a chunk of runs, one replay) at most
DEFAULT_RETRIES = 1               # re-runs of a Ray task whose worker died


class EngineError(Exception):
    """The engine cannot be used as asked (Ray missing, cluster unreachable): a usage error."""


def here(gpu: str | None = None) -> dict[str, Any]:
    """Where this process runs: host name, pid and the GPUs it may use (CUDA_VISIBLE_DEVICES)."""
    return {"node": socket.gethostname(), "pid": os.getpid(),
            "gpu": gpu if gpu is not None else os.environ.get("CUDA_VISIBLE_DEVICES")}


# Fault injection (both engines), for tests and drills: FORENSICS_ENGINE_FAULT="stage=ingest,run=RUN_ID"
# [,mode=exit|hang][,once=DIR] makes the worker that handles RUN_ID at that stage exit (or hang).
FAULT_ENV = "FORENSICS_ENGINE_FAULT"
FAULT_EXIT = 86          # exit status of a worker killed by the fault hook


def parse_fault(spec: str | None) -> dict[str, str] | None:
    """FORENSICS_ENGINE_FAULT's value as a dict (None when unset or empty)."""
    if not spec:
        return None
    out: dict[str, str] = {}
    for part in spec.split(","):
        k, sep, v = part.partition("=")
        if not sep:
            raise EngineError(f"{FAULT_ENV}: expected key=value, got {part!r}")
        out[k.strip()] = v.strip()
    if not out.get("stage") or not out.get("run"):
        raise EngineError(f"{FAULT_ENV} needs stage= and run=")
    if out.setdefault("mode", "exit") not in ("exit", "hang"):
        raise EngineError(f"{FAULT_ENV}: mode must be exit or hang")
    return out


def maybe_fault(fault: dict[str, str] | None, stage: str, run_ids: Sequence[str]) -> None:
    """In a worker: die (or hang) as `fault` asks when `run_ids` holds its run at `stage`."""
    if not fault or fault["stage"] != stage or fault["run"] not in run_ids:
        return
    once = fault.get("once")
    if once:
        marker = Path(once) / f"{stage}-{hashlib.sha256(fault['run'].encode()).hexdigest()[:16]}"
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
    if fault["mode"] == "hang":
        while True:
            time.sleep(3600)
    os._exit(FAULT_EXIT)


def failed_chunk(module: str, chunk: Sequence[str], reason: str) -> tuple:
    """A chunk no worker finished, in the shape `pipeline._analyze_chunk` returns: every run of it
    failed with `reason`."""
    return module, list(chunk), {}, {rid: reason for rid in chunk}


class Engine:
    """What `ingest_archive` and `run_analyzers` call.  Subclasses: LocalEngine, RayEngine."""

    name = "engine"

    def __init__(self) -> None:
        self.units: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []

    # -- ingest ------------------------------------------------------------------------------
    def parse_runs(self, src: Any, location: str, runs: Sequence[Any], known: dict[str, str | None]) -> Iterator[Any]:
        """Yield one RunRows per run (any order); a run whose parse failed has ``error`` set."""
        raise NotImplementedError

    # -- per-run analyzers ---------------------------------------------------------------------
    def chunk_size(self, analyzer: str, n_runs: int) -> int:
        raise NotImplementedError

    def parallel(self, n_chunks: int, db_path: str | None) -> bool:
        """Whether run_analyzers hands a per-run analyzer's chunks to map_chunks."""
        raise NotImplementedError

    def map_chunks(self, store: Any, db_path: str, analyzer: str, module: str, chunks: Sequence[Sequence[str]],
                   on_result: Callable[[int], None] | None = None) -> tuple[Any, list[tuple]]:
        """Run `_analyze_chunk` over every chunk; returns the (possibly reopened) store and one
        result per chunk, in `_analyze_chunk`'s shape.  Never raises for a chunk's sake."""
        raise NotImplementedError

    # -- bookkeeping -----------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        return {"name": self.name}

    def close(self) -> None:
        pass

    def unfinished(self) -> set[str]:
        """Runs a unit of which no worker finished (a worker died or hung): their verdicts are
        not final, so the pipeline stores no input fingerprint for them and a rescan redoes them."""
        return {rid for f in self.failures if f.get("action") == "reported" for rid in f["runs"]}

    def record(self, stage: str, runs: Sequence[str], seconds: float, where: dict[str, Any], **extra: Any) -> None:
        self.units.append({"stage": stage, "runs": list(runs), "seconds": round(seconds, 4), **where, **extra})

    def report(self, run_ids: Sequence[str] | None = None, per_run: bool = True) -> dict[str, Any]:
        """The engine's summary; with per_run, ``runs``: run_id -> stage -> seconds, node, gpu.

        A unit of several runs (an analyzer's chunk) reports its own seconds and ``chunk_runs``:
        the analyzer ran over the chunk at once, so no finer time exists."""
        out = dict(self.info())
        stages: dict[str, dict[str, Any]] = {}
        for u in self.units:
            s = stages.setdefault(u["stage"], {"units": 0, "runs": 0, "worker_seconds": 0.0, "nodes": []})
            s["units"] += 1
            s["runs"] += len(u["runs"])
            s["worker_seconds"] = round(s["worker_seconds"] + u["seconds"], 3)
            if u.get("node") not in s["nodes"]:
                s["nodes"].append(u.get("node"))
        out["stages"] = stages
        out["failures"] = list(self.failures)
        if per_run:
            want = set(run_ids) if run_ids is not None else None
            runs: dict[str, dict[str, Any]] = {}
            for u in self.units:
                for rid in u["runs"]:
                    if want is not None and rid not in want:
                        continue
                    d = {k: u.get(k) for k in ("seconds", "node", "gpu")}
                    if u.get("node_id"):
                        d["node_id"] = u["node_id"]
                    if len(u["runs"]) > 1:
                        d["chunk_runs"] = len(u["runs"])
                    runs.setdefault(rid, {})[u["stage"]] = d
            out["runs"] = runs
        return out


# ---------------------------------------------------------------------------------------------
# The local engine: worker processes of this machine (forensics.engine.pool).
_W: dict[str, Any] = {}


def _local_init(location: str) -> None:
    from forensics.archive.source import open_source
    _W["src"] = open_source(location)


def failed_rows(run: Any, reason: str) -> Any:
    """The rows of a run whose parse failed: the run is still recorded, with the reason."""
    from forensics.store.ingest import RunRows, _fingerprint
    rows = RunRows(run.run_id, _fingerprint(run))
    rows.error = reason
    return rows


def parse_one(src: Any, run: Any, location: str, known: dict[str, str | None]) -> Any:
    """parse_run that never raises: a crash becomes RunRows.error (the run is still recorded)."""
    from forensics.store.ingest import parse_run
    try:
        return parse_run(src, run, location, known)
    except Exception as e:  # noqa: BLE001 - one bad run must not stop the ingest
        return failed_rows(run, f"{type(e).__name__}: {e}")


def _local_parse(args) -> tuple[Any, float, dict[str, Any]]:
    run, location, known, fault = args
    maybe_fault(fault, "ingest", [run.run_id])
    t0 = time.perf_counter()
    rows = parse_one(_W["src"], run, location, known)
    return rows, time.perf_counter() - t0, here()


def _local_analyze(args) -> tuple[tuple, float, dict[str, Any]]:
    from forensics.pipeline import _analyze_chunk
    db_path, module, chunk, stage, fault = args
    maybe_fault(fault, stage, chunk)
    t0 = time.perf_counter()
    res = _analyze_chunk((db_path, module, chunk))
    return res, time.perf_counter() - t0, here()


class LocalEngine(Engine):
    """``jobs`` worker processes on this machine (``jobs=1``: in the driver's process)."""

    name = "local"

    def __init__(self, jobs: int = 1, fault: dict | None = None) -> None:
        super().__init__()
        self.jobs = max(1, int(jobs or 1))
        # honoured in worker processes only (jobs > 1): the driver itself is never killed
        self.fault = fault if fault is not None else parse_fault(os.environ.get(FAULT_ENV))

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "jobs": self.jobs, "node": socket.gethostname()}

    def parse_runs(self, src, location, runs, known):
        if self.jobs <= 1 or len(runs) <= 1:
            me = here()
            for r in runs:
                t0 = time.perf_counter()
                rows = parse_one(src, r, location, known)
                self.record("ingest", [r.run_id], time.perf_counter() - t0, me)
                yield rows
            return

        def lost(args, reason):
            reason = f"not parsed: {reason}"
            self.failures.append({"stage": "ingest", "runs": [args[0].run_id], "reason": reason, "action": "reported"})
            return failed_rows(args[0], reason), 0.0, {}
        # in order: a tar archive's members are read forwards
        for rows, secs, where in pmap(_local_parse, [(r, location, known, self.fault) for r in runs], self.jobs,
                                      initializer=_local_init, initargs=(location,), lost=lost):
            if where:
                self.record("ingest", [rows.run_id], secs, where)
            yield rows

    def chunk_size(self, analyzer, n_runs):
        return max(1, min(100, -(-n_runs // (2 * self.jobs))))

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


def get_engine(name: str | Engine | None = "local", jobs: int = 1, address: str | None = None,
               task_timeout: float | None = None, retries: int | None = None) -> Engine:
    """An engine by name ('local' or 'ray'); an Engine instance is returned as is."""
    if isinstance(name, Engine):
        return name
    name = (name or "local").lower()
    if name == "local":
        if address:
            raise EngineError("--address needs --engine ray")
        return LocalEngine(jobs)
    if name == "ray":
        from .ray_engine import RayEngine
        return RayEngine(address=address, jobs=jobs,
                         task_timeout=DEFAULT_TASK_TIMEOUT_S if task_timeout is None else task_timeout,
                         retries=DEFAULT_RETRIES if retries is None else retries)
    raise EngineError(f"unknown engine {name!r} (have {', '.join(ENGINES)})")


__all__ = ["ENGINES", "Engine", "EngineError", "LocalEngine", "get_engine", "here", "failed_chunk", "failed_rows",
           "parse_one"]
