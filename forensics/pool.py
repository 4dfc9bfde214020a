"""Worker processes on this machine: the one pool every in-machine fan-out uses (the local engine,
the report, MinHash signatures, the benches).  Imports nothing of forensics: every layer may use it.

Two hazards of `multiprocessing.Pool` with the fork start method, one of which cost a CI run
(the suite hung until the 90-minute limit):

- fork copies a parent that may hold native threads (Ray's, DuckDB's, a BLAS pool's). A lock one of
  them held at the moment of the fork stays held forever in the child, and the child deadlocks;
- `Pool.imap` waits forever for the result of a worker that died (the OOM killer, a segfault in a C
  extension on a hostile input).

So here children come from a forkserver (a clean, single-threaded interpreter; spawn where there
is none), and a dead worker breaks the pool visibly (`BrokenProcessPool`) instead of silently. The
items that were in flight when it broke are each retried once, alone, in a fresh pool: the one
that kills its worker alone gets `lost(item, reason)` as its result, and every other item still
gets its real one. An ordinary exception raised by `fn` is not a lost worker and propagates.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

#: submitted but not finished, per worker: enough to keep workers busy, few enough to retry
IN_FLIGHT_PER_WORKER = 2


def context():
    """forkserver on Linux, spawn elsewhere; never fork (see the module doc)."""
    import multiprocessing as mp
    if sys.platform.startswith("linux") and "forkserver" in mp.get_all_start_methods():
        return mp.get_context("forkserver")
    return mp.get_context("spawn")


def _init(env: dict[str, str], path: list[str], initializer: Callable[..., None] | None, initargs: tuple) -> None:
    """In a worker: the parent's environment and import path as they are now (a forkserver's
    children would otherwise see them as they were when the server started), then the caller's
    initializer."""
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = path
    if initializer is not None:
        initializer(*initargs)


def _lost_default(item: Any, reason: str) -> Any:
    raise RuntimeError(f"a worker process died on {item!r}: {reason}")


def _call_batch(fn_batch: tuple[Callable[[Any], Any], list[Any]]) -> list[Any]:
    fn, batch = fn_batch
    return [fn(x) for x in batch]


def pmap(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int, *,
         initializer: Callable[..., None] | None = None, initargs: tuple = (), ordered: bool = True,
         lost: Callable[[Any, str], Any] | None = None, chunksize: int = 1) -> Iterator[Any]:
    """fn(item) for each item in `jobs` worker processes; yields results (in the items' order when
    `ordered`, else as they finish).  `lost(item, reason)` stands in for the result of an item whose
    worker died even when it ran alone (default: raise RuntimeError).  `chunksize` > 1 sends items
    in batches (fewer round trips for small items); a batch whose worker died is retried item by item."""
    if chunksize > 1:
        items = list(items)
        batches = [(fn, items[i:i + chunksize]) for i in range(0, len(items), chunksize)]

        def lost_batch(fb, reason):
            return [r for x in fb[1] for r in pmap(fn, [x], 1, initializer=initializer, initargs=initargs, lost=lost)]
        for res in pmap(_call_batch, batches, jobs, initializer=initializer, initargs=initargs, ordered=ordered,
                        lost=lost_batch):
            yield from res
        return
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    items = list(items)
    lost = lost or _lost_default
    ctx = context()
    todo = deque(range(len(items)))
    alone: list[int] = []          # in flight when a pool broke: each gets a pool of its own
    ready: dict[int, Any] = {}
    nxt = 0

    def emit(i: int, res: Any) -> Iterator[Any]:
        nonlocal nxt
        if not ordered:
            yield res
            return
        ready[i] = res
        while nxt in ready:
            yield ready.pop(nxt)
            nxt += 1

    def pool(n: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init,
                                   initargs=(dict(os.environ), list(sys.path), initializer, initargs))

    while todo:
        with pool(max(1, jobs)) as ex:
            inflight: dict[Any, int] = {}
            broken = False
            while (todo or inflight) and not broken:
                try:
                    while todo and len(inflight) < IN_FLIGHT_PER_WORKER * max(1, jobs):
                        i = todo[0]
                        inflight[ex.submit(fn, items[i])] = i
                        todo.popleft()
                except BrokenProcessPool:
                    broken = True
                    break
                done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                for f in done:
                    i = inflight.pop(f)
                    try:
                        res = f.result()
                    except BrokenProcessPool:
                        broken = True
                        alone.append(i)
                        continue
                    yield from emit(i, res)
            if broken:
                alone.extend(inflight.values())
        for i in sorted(alone):
            with pool(1) as ex:
                try:
                    res = ex.submit(fn, items[i]).result()
                except BrokenProcessPool as e:
                    res = lost(items[i], f"worker process died ({e or 'BrokenProcessPool'})")
            yield from emit(i, res)
        alone.clear()


# ---------------------------------------------------------------------------------------------
# Where a worker runs, and fault injection for the workers of both engines (forensics.engine).
def here(gpu: str | None = None) -> dict[str, Any]:
    """Where this process runs: host name, pid and the GPUs it may use (CUDA_VISIBLE_DEVICES)."""
    return {"node": socket.gethostname(), "pid": os.getpid(),
            "gpu": gpu if gpu is not None else os.environ.get("CUDA_VISIBLE_DEVICES")}


# Fault injection (both engines), for tests and drills: FORENSICS_ENGINE_FAULT="stage=ingest,run=RUN_ID"
# [,mode=exit|hang][,once=DIR] makes the worker that handles RUN_ID at that stage exit (or hang).
FAULT_ENV = "FORENSICS_ENGINE_FAULT"
FAULT_EXIT = 86          # exit status of a worker killed by the fault hook


def parse_fault(spec: str | None) -> dict[str, str] | None:
    """FORENSICS_ENGINE_FAULT's value as a dict (None when unset or empty); ValueError when malformed."""
    if not spec:
        return None
    out: dict[str, str] = {}
    for part in spec.split(","):
        k, sep, v = part.partition("=")
        if not sep:
            raise ValueError(f"{FAULT_ENV}: expected key=value, got {part!r}")
        out[k.strip()] = v.strip()
    if not out.get("stage") or not out.get("run"):
        raise ValueError(f"{FAULT_ENV} needs stage= and run=")
    if out.setdefault("mode", "exit") not in ("exit", "hang"):
        raise ValueError(f"{FAULT_ENV}: mode must be exit or hang")
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


__all__ = ["FAULT_ENV", "FAULT_EXIT", "IN_FLIGHT_PER_WORKER", "context", "here", "maybe_fault", "parse_fault", "pmap"]
