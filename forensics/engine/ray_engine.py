"""The Ray engine: `forensics scan ARCHIVE --engine ray [--address auto|HOST:PORT]`.

The units of work are the local engine's, as Ray tasks:

* ingest: a task parses a batch of runs (`forensics.store.ingest.parse_run`, reading the archive
  by its absolute path, read-only) and returns their Arrow batches; the driver commits them.
* per-run analyzers: a task gets its chunk's rows of the store (its runs' rows of every table, the
  similarity pairs naming them, the tables that belong to no run, and of every other run only the
  `runs` columns the analyzer declares it reads, `reads_all`) as Arrow tables through Ray's object store, loads
  them into a scratch DuckDB file of its own and runs `forensics.analyze.registry.analyze_chunk` there,
  exactly as a local worker does on the driver's store; the rows it wrote come back and the
  driver applies them.  So no node but the driver needs the store, and the store is the one a
  local scan writes.
* replay: one run per task, each holding one GPU (``num_gpus=1``) where the cluster has GPUs, in
  a fresh worker process (``max_calls=1``); the replay's own child process and its isolation are
  those of `forensics.replay` (called through its store analyzer, which uses
  `forensics.replay.api`).  A cluster without GPUs replays on the CPU (tiny shapes), as a local
  scan on a CPU machine does.

Failure: a task whose worker dies (a crash, the OOM killer, a lost node) is re-run by Ray up to
``retries`` times.  A task that runs past ``task_timeout`` seconds is killed from inside (its
watchdog kills the processes it started, then its worker) and counts as a death.  A chunk of
several runs that still fails is split into one task per run, so one bad run cannot take the
others with it; a run that still fails becomes that run's finding (an ingest run gets a
``parse_errors`` row, an analyzer's run the pipeline's ``analysis-coverage`` finding with the
reason), and the scan goes on.  Nothing is lost silently: every run either has its rows or the
reason it has none.

Fault injection (tests, drills): FORENSICS_ENGINE_FAULT="stage=STAGE,run=RUN_ID[,mode=exit|hang]
[,once=DIR]" in the driver's environment (read by both engines: forensics.engine) makes the Ray task that handles RUN_ID in STAGE
(``ingest`` or an analyzer name) exit its worker (``os._exit``) or hang; with ``once=DIR`` only the
first attempt does (a marker file in DIR remembers it), so the retry succeeds.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from forensics.pool import FAULT_ENV, here, maybe_fault
from forensics.store.ingest import failed_rows, parse_one

from .base import Engine, EngineError, failed_chunk, fault_from_env

TIMEOUT_EXIT = 87        # exit status of a worker its watchdog killed
GRACE_S = 60.0           # the driver's backstop waits this much past the task timeout
REPLAY = "replay"


# ---------------------------------------------------------------------------------------------
# Worker side (runs in Ray worker processes; plain functions, wrapped by ray.remote in the driver)
def _signal_handlers() -> dict[int, Any]:
    """This process's SIGTERM/SIGINT handlers (none from a thread other than the main one)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}


def _descendants(root: int) -> list[int]:
    """Pids of every process below `root` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _kill_descendants() -> None:
    """SIGKILL every process this worker started, with its process group (the replay child runs
    in a session of its own, so it would outlive its worker otherwise)."""
    me = os.getpgrp()
    for pid in _descendants(os.getpid()):
        try:
            pg = os.getpgid(pid)
            if pg != me:
                os.killpg(pg, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class _Watchdog:
    """Kills the task (its child processes, then its worker) after `timeout` seconds."""

    def __init__(self, timeout: float | None):
        self.timer = None
        if timeout and timeout > 0:
            self.timer = threading.Timer(timeout, self._expire)
            self.timer.daemon = True

    def _expire(self) -> None:
        _kill_descendants()
        os._exit(TIMEOUT_EXIT)

    def __enter__(self) -> "_Watchdog":
        if self.timer:
            self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.timer:
            self.timer.cancel()


def _where() -> dict[str, Any]:
    import ray
    ctx = ray.get_runtime_context()
    gpus = ray.get_gpu_ids()
    d = here(os.environ.get("CUDA_VISIBLE_DEVICES") if gpus else None)
    d["node_id"] = ctx.get_node_id()[:16]
    return d


_SOURCES: dict[str, Any] = {}


def _source(location: str) -> Any:
    src = _SOURCES.get(location)
    if src is None:
        from forensics.archive.source import open_source
        src = _SOURCES[location] = open_source(location)
    return src


def parse_task(location: str, runs: list[Any], known: Any, fault: dict | None,
               timeout: float | None) -> tuple[list[tuple[Any, float]], dict[str, Any]]:
    """Parse a batch of runs: [(RunRows, seconds)] and where it ran (`known`: the IngestContext)."""
    with _Watchdog(timeout):
        maybe_fault(fault, "ingest", [r.run_id for r in runs])
        src = _source(location)
        out = []
        for r in runs:
            t0 = time.perf_counter()
            rows = parse_one(src, r, location, known)
            out.append((rows, time.perf_counter() - t0))
        return out, _where()


_TEMPLATE: list[bytes] = []


def _empty_store(path: str) -> Any:
    """A new store file at `path`: a copy of this worker's empty one (creating the schema, with a
    comment on every column, costs far more than copying the file).  The empty store is kept as
    bytes in this worker's memory, its file removed at once: Ray ends its workers without running
    atexit, and a template folder per worker was left in the temp dir after every scan."""
    from forensics.store.db import Store
    if not _TEMPLATE:
        d = tempfile.mkdtemp(prefix="forensics-ray-template-")
        try:
            Store(os.path.join(d, "empty.duckdb")).close()
            with open(os.path.join(d, "empty.duckdb"), "rb") as f:
                _TEMPLATE.append(f.read())
        finally:
            shutil.rmtree(d, ignore_errors=True)
    with open(path, "xb") as f:
        f.write(_TEMPLATE[0])
    return Store(path)


def analyze_task(stage: str, module: str, chunk: list[str], shared: dict[str, Any], own: dict[str, Any],
                 fault: dict | None, timeout: float | None, env: dict[str, str | None] | None = None
                 ) -> tuple[tuple, float, dict[str, Any]]:
    """Run one analyzer over a chunk of runs whose rows came with the task; `analyze_chunk`'s
    result, the seconds it took (loading the rows included) and where it ran.  `env`: variables
    to set (None: unset) first, e.g. the driver's OMP_NUM_THREADS that Ray overrides in tasks."""
    for k, v in (env or {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    with _Watchdog(timeout):
        t0 = time.perf_counter()
        maybe_fault(fault, stage, chunk)
        from forensics.analyze.registry import analyze_chunk
        tmp = tempfile.mkdtemp(prefix="forensics-ray-")
        try:
            db = os.path.join(tmp, "chunk.duckdb")
            st = _empty_store(db)
            try:
                with st.transaction():
                    for t, tbl in shared.items():
                        if t == "runs":    # the other runs' columns the analyzer reads: the chunk's rows come whole
                            import pyarrow as pa
                            import pyarrow.compute as pc
                            tbl = tbl.filter(pc.invert(pc.is_in(tbl.column("run_id"),
                                                                value_set=pa.array(list(chunk), pa.string()))))
                        st.insert_arrow(t, tbl)
                    for t, tbl in own.items():
                        st.insert_arrow(t, tbl)
                st.con.execute("CHECKPOINT")
            finally:
                st.close()
            res = analyze_chunk((db, module, chunk))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return res, time.perf_counter() - t0, _where()


# ---------------------------------------------------------------------------------------------
# Driver side
@dataclass
class _Unit:
    stage: str
    runs: list[str]
    payload: Any
    split: bool = False          # already a piece of a split chunk
    submitted: float = 0.0
    attempt_note: str = ""
    extra: dict = field(default_factory=dict)


def _arrow(con: Any, sql: str, params: list | None = None) -> Any:
    """The query's rows as one Arrow table."""
    rel = con.sql(sql, params=params) if params else con.sql(sql)
    fn = getattr(rel, "to_arrow_table", None) or getattr(rel, "arrow")
    return fn()


class RayEngine(Engine):
    """Ray tasks; the driver (this process) stays the store's one writer."""

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int = 1, task_timeout: float | None = 1800.0,
                 retries: int = 1, fault: dict | None = None) -> None:
        super().__init__()
        try:
            import ray
        except ImportError as e:
            from forensics.extras import install_command
            raise EngineError(f"--engine ray needs Ray: {install_command('ray')} (or 'ray==2.60.0')") from e
        self.ray = ray
        self.task_timeout = float(task_timeout) if task_timeout else None
        self.retries = max(0, int(retries))
        self.fault = fault if fault is not None else fault_from_env()
        self.address = address
        self.owns = False
        self._handlers: dict[int, Any] = {}
        if not ray.is_initialized():
            kw: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
            if address:
                kw["address"] = address
            elif not os.environ.get("RAY_ADDRESS"):
                kw["num_cpus"] = max(1, int(jobs or 1))   # a local Ray: --jobs worker CPUs
            self._handlers = _signal_handlers()
            try:
                ray.init(**kw)
            except Exception as e:  # noqa: BLE001 - an unreachable cluster is a usage error
                raise EngineError(f"cannot start or reach Ray ({address or 'local'}): {type(e).__name__}: {e}") from e
            self.owns = True
        res = ray.cluster_resources()
        self.cpus = max(1, int(res.get("CPU", 1)))
        self.gpus = int(res.get("GPU", 0))
        self.nodes = sorted({n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or n["NodeID"][:16]
                             for n in ray.nodes() if n.get("Alive")})
        opts = dict(max_retries=self.retries, retry_exceptions=False)
        self._parse = ray.remote(**opts)(parse_task)
        self._analyze = ray.remote(**opts)(analyze_task)
        # a replay holds one GPU (CPU where the cluster has none) in a fresh worker process
        self._replay = ray.remote(**opts, max_calls=1, **({"num_gpus": 1} if self.gpus else {"num_cpus": 1}))(analyze_task)

    # -- bookkeeping ---------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address or "local", "nodes": self.nodes, "cpus": self.cpus,
                "gpus": self.gpus, "task_timeout_s": self.task_timeout, "retries": self.retries,
                "replay_resources": {"num_gpus": 1} if self.gpus else {"num_cpus": 1, "note": "no GPU in the cluster"}}

    def close(self) -> None:
        if self.owns and self.ray.is_initialized():
            self.ray.shutdown()
        if self.owns:       # ray.init installed its own SIGTERM/SIGINT handlers in this process
            for sig, h in self._handlers.items():
                try:
                    signal.signal(sig, h)
                except (ValueError, OSError, TypeError):
                    pass
        self.owns = False

    # -- the scheduler loop ----------------------------------------------------------------------
    def _drive(self, units: Sequence[_Unit], submit: Callable[[_Unit], Any], window: int
               ) -> Iterator[tuple[_Unit, Any, str | None]]:
        """Submit units (at most `window` in flight, so a task starts about when it is submitted)
        and yield (unit, value, None) per success, (unit, None, reason) per run that failed for
        good.  A failed unit of several runs is split into one unit per run first."""
        ray = self.ray
        queue = deque(units)
        inflight: dict[Any, _Unit] = {}
        cancelled: set[Any] = set()
        backstop = None
        if self.task_timeout:
            backstop = (self.task_timeout + GRACE_S) * (self.retries + 2)
        while queue or inflight:
            while queue and len(inflight) < window:
                u = queue.popleft()
                u.submitted = time.monotonic()
                inflight[submit(u)] = u
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=5.0)
            for ref in ready:
                u = inflight.pop(ref)
                try:
                    val = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - a lost task is a failure of its runs, never a crash
                    reason = self._reason(u, e, ref in cancelled)
                    cancelled.discard(ref)
                    if len(u.runs) > 1 and not u.split:
                        self.failures.append({"stage": u.stage, "runs": list(u.runs), "reason": reason,
                                              "action": "split into one task per run"})
                        for piece in self._split(u):
                            queue.append(piece)
                        continue
                    self.failures.append({"stage": u.stage, "runs": list(u.runs), "reason": reason,
                                          "action": "reported"})
                    yield u, None, reason
                else:
                    yield u, val, None
            if backstop:
                now = time.monotonic()
                for ref, u in inflight.items():
                    if ref not in cancelled and now - u.submitted > backstop:
                        cancelled.add(ref)
                        ray.cancel(ref, force=True)

    def _reason(self, u: _Unit, e: BaseException, cancelled: bool) -> str:
        elapsed = time.monotonic() - u.submitted
        what = f"the Ray task for {u.stage} of {len(u.runs)} run(s)"
        tries = f"{self.retries + 1} attempt(s)"
        if cancelled:
            return f"{what} gave no result in {elapsed:.0f} s and was cancelled (hung; {tries})"
        if self.task_timeout and elapsed >= self.task_timeout:
            return (f"{what} ran past its {self.task_timeout:.0f} s timeout and was killed ({tries}, "
                    f"{elapsed:.0f} s in all): {type(e).__name__}")
        msg = " ".join(str(e).split())[:300]
        return f"{what} failed: its worker died ({tries}): {type(e).__name__}: {msg}"

    @staticmethod
    def _split(u: _Unit) -> list[_Unit]:
        if isinstance(u.payload, list) and len(u.payload) == len(u.runs):   # ingest: DiscoveredRun per run
            return [_Unit(u.stage, [rid], [p], split=True, extra=u.extra) for rid, p in zip(u.runs, u.payload)]
        return [_Unit(u.stage, [rid], [rid], split=True, extra=u.extra) for rid in u.runs]

    # -- ingest --------------------------------------------------------------------------------
    def parse_runs(self, src, location, runs, known):
        if not runs:
            return
        if not os.path.isabs(location):
            location = os.path.abspath(location)
        batch = max(1, min(32, math.ceil(len(runs) / (4 * self.cpus))))
        units = [_Unit("ingest", [r.run_id for r in runs[i:i + batch]], list(runs[i:i + batch]))
                 for i in range(0, len(runs), batch)]
        known_ref = self.ray.put(known)
        by_id = {r.run_id: r for r in runs}

        def submit(u: _Unit):
            return self._parse.remote(location, u.payload, known_ref, self.fault, self.task_timeout)

        for u, val, reason in self._drive(units, submit, window=2 * self.cpus):
            if reason is not None:
                for rid in u.runs:
                    yield failed_rows(by_id[rid], f"not parsed: {reason}")
                continue
            parsed, where = val
            for rows, secs in parsed:
                self.record("ingest", [rows.run_id], secs, where)
                yield rows

    # -- per-run analyzers -----------------------------------------------------------------------
    def chunk_size(self, analyzer, n_runs):
        if analyzer == REPLAY:
            return 1
        return max(1, min(100, math.ceil(n_runs / (2 * self.cpus))))

    def parallel(self, n_chunks, db_path):
        return n_chunks >= 1

    def _inputs(self, store: Any, chunk: Sequence[str]) -> dict[str, Any]:
        """The task's own rows: of every table with a ``run_id`` column (``runs`` too) the chunk's, and
        the similarity pairs naming a run of the chunk, as a chunk store holds them
        (forensics.store.chunks)."""
        from forensics.store import schema as S
        out = {}
        ids = list(chunk)
        for t in S.TABLES:
            names = t.column_names()
            cols = ", ".join(f'"{c}"' for c in names)
            if "run_id" in names:
                tbl = _arrow(store.con, f"SELECT {cols} FROM {t.name} WHERE run_id IN (SELECT unnest(?::VARCHAR[]))",
                             [ids])
            elif t.name == "similarity_pairs":
                tbl = _arrow(store.con, f"SELECT {cols} FROM {t.name} WHERE a_id IN (SELECT unnest(?::VARCHAR[])) "
                                        "OR b_id IN (SELECT unnest(?::VARCHAR[]))", [ids, ids])
            else:
                continue
            if tbl.num_rows:
                out[t.name] = tbl
        return out

    def _shared(self, store: Any, module: str) -> dict[str, Any]:
        """What every task of the analyzer `module` gets besides its chunk's rows (one object in Ray's
        store): the tables that belong to no run, whole (``skipped_folders`` and the pairs excepted,
        as in a chunk store), and of ``runs`` only the columns the analyzer reads of every run (its
        ``reads_all``: provenance every run's facts, similarity their names).  Every task used to get
        the whole ``runs`` table and load it into its scratch store: O(archive) per task of every
        analyzer, quadratic in runs; an analyzer that reads no other run's row now copies its chunk's."""
        from forensics.analyze.registry import _chunk_others
        from forensics.store import schema as S
        from forensics.store.chunks import _NOT_COPIED
        run_cols = S.TABLE_BY_NAME["runs"].column_names()
        want: list[str] = []
        for r in _chunk_others(module):
            if r.table != "runs":
                raise ValueError(f"a task gets every run's rows of `runs` only, not of {r.table}")
            want += [c for c in (run_cols if r.columns == ("*",) else r.columns) if c not in want]
        if want and "run_id" not in want:
            want.insert(0, "run_id")
        out = {}
        for t in S.TABLES:
            names = t.column_names()
            if t.name == "runs":
                if not want:
                    continue
                names = want
            elif "run_id" in names or t.name in _NOT_COPIED or t.name == "similarity_pairs":
                continue
            tbl = _arrow(store.con, f"SELECT {', '.join(chr(34) + c + chr(34) for c in names)} FROM {t.name}")
            if tbl.num_rows:
                out[t.name] = tbl
        return out

    def map_chunks(self, store, db_path, analyzer, module, chunks, on_result=None):
        """The store stays open in the driver: each task gets its rows through the object store."""
        shared_ref = self.ray.put(self._shared(store, module))
        replay = analyzer == REPLAY
        remote = self._replay if replay else self._analyze
        window = (self.gpus if (replay and self.gpus) else 2 * self.cpus) or 1
        units = [_Unit(analyzer, list(c), list(c)) for c in chunks]

        # Ray sets OMP_NUM_THREADS=1 in its tasks; a replay (a fresh worker, torch not yet imported)
        # gets the driver's value back, so its parent and child run with the threads a local scan has
        env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS",)} if replay else None

        def submit(u: _Unit):
            return remote.remote(analyzer, module, u.runs, shared_ref, self._inputs(store, u.runs),
                                 self.fault, self.task_timeout, env)

        results = []
        for u, val, reason in self._drive(units, submit, window=window):
            if reason is not None:
                results.append(failed_chunk(module, u.runs, reason))
                n = len(u.runs)
            else:
                res, secs, where = val
                self.record(analyzer, res[1], secs, where)
                results.append(res)
                n = len(res[1])
            if on_result:
                on_result(n)
        return store, results


__all__ = ["RayEngine", "FAULT_ENV", "parse_task", "analyze_task"]
