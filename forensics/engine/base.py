"""What an engine is (`Engine`: the calls `ingest_archive` and `run_analyzers` make), and what
both engines share: the usage error, a chunk no worker finished, the fault hook's setting."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from forensics.pool import FAULT_ENV, parse_fault

ENGINES = ("local", "ray")
DEFAULT_TASK_TIMEOUT_S = 1800.0   # one Ray task (a chunk of runs, one replay) at most
DEFAULT_RETRIES = 1               # re-runs of a Ray task whose worker died
#: `--jobs` not given: one process for a stage of fewer runs than this (each stage's workers cost a
#: fixed start that a small archive never earns back: measured, 2 workers against 1, 2.1x slower at
#: 49 runs, 1.18x at 100, even at 200; BENCHMARKS.md, "Scan: --jobs by archive size"), else one per
#: CPU, at most AUTO_MAX_JOBS (a cap on the parent, DuckDB's one writer, committing every worker's
#: rows; more than 2 workers is not measured on the 2-core development machine)
AUTO_MIN_RUNS = 200
AUTO_MAX_JOBS = 8


def auto_jobs(n_runs: int, cpus: int | None = None) -> int:
    """Worker processes for a stage of `n_runs` runs when --jobs is not given."""
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    return 1 if n_runs < AUTO_MIN_RUNS else max(1, min(cpus, AUTO_MAX_JOBS))


class EngineError(Exception):
    """The engine cannot be used as asked (Ray missing, cluster unreachable): a usage error."""


def failed_chunk(module: str, chunk: Sequence[str], reason: str) -> tuple:
    """A chunk no worker finished, in the shape `registry.analyze_chunk` returns: every run of it
    failed with `reason`."""
    return module, list(chunk), {}, {rid: reason for rid in chunk}


def fault_from_env() -> dict | None:
    """FORENSICS_ENGINE_FAULT (forensics.pool.parse_fault); a malformed one is a usage error."""
    try:
        return parse_fault(os.environ.get(FAULT_ENV))
    except ValueError as e:
        raise EngineError(str(e)) from e


class Engine:
    """What `ingest_archive` and `run_analyzers` call.  Subclasses: LocalEngine, RayEngine."""

    name = "engine"

    def __init__(self) -> None:
        self.units: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []

    def fit(self, n_runs: int) -> None:
        """Size the engine for a stage of `n_runs` runs (LocalEngine with --jobs auto); others: nothing."""

    # -- ingest ------------------------------------------------------------------------------
    def parse_runs(self, src: Any, location: str, runs: Sequence[Any], known: Any) -> Iterator[Any]:
        """Yield one RunRows per run (any order); a run whose parse failed has ``error`` set.
        `known`: the ingest's context (forensics.store.ingest IngestContext: the other runs' names,
        the stored fingerprints, the code digest and limits a worker applies), handed to parse_one."""
        raise NotImplementedError

    # -- per-run analyzers ---------------------------------------------------------------------
    def chunk_size(self, analyzer: str, n_runs: int) -> int:
        raise NotImplementedError

    def parallel(self, n_chunks: int, db_path: str | None) -> bool:
        """Whether run_analyzers hands a per-run analyzer's chunks to map_chunks."""
        raise NotImplementedError

    def map_chunks(self, store: Any, db_path: str, analyzer: str, module: str, chunks: Sequence[Sequence[str]],
                   on_result: Callable[[int], None] | None = None) -> tuple[Any, list[tuple]]:
        """Run `analyze_chunk` over every chunk; returns the (possibly reopened) store and one
        result per chunk, in `analyze_chunk`'s shape.  Never raises for a chunk's sake."""
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


__all__ = ["DEFAULT_RETRIES", "DEFAULT_TASK_TIMEOUT_S", "ENGINES", "Engine", "EngineError", "failed_chunk",
           "fault_from_env"]
