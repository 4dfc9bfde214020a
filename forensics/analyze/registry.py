"""The analyzers, declared: what each is, what it reads of another analyzer's output, what it writes;
and how one analyzer runs over a chunk of runs (in the scan's process or in an engine's worker).

An analyzer is a module with ``analyze(store, run_ids)``. It reads the ingested tables and writes
its own; the only reads of another analyzer's output are the ones declared in ``requires`` (the
pipeline runs that one first and, for a run where it failed or did not run, reports this one as
failed for that run too: fail closed, never a silently thinner result). Analyzers never import each
other (`../shared/DESIGN.md`); the pipeline and the engines import this module, and it imports
analyzers only by name, when they run.

Adding an analyzer: one entry here and its module; its tables in `forensics.store.schema` with
``owner`` naming it (a test checks both ways).
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.store.db import Store


@dataclass(frozen=True)
class Analyzer:
    name: str
    module: str
    #: one call over every run at once (its result for a run depends on the others), else per run in chunks
    cross_run: bool
    #: tables it writes (findings rows are tagged with its name)
    writes: tuple[str, ...]
    #: analyzers whose output it reads; they run first
    requires: tuple[str, ...] = ()
    #: run only when asked (--replay)
    opt_in: bool = False


ANALYZERS: tuple[Analyzer, ...] = (
    Analyzer("provenance", "forensics.analyze.provenance", False, ("foreign_refs", "findings")),
    # contamination chains join its pairs with provenance's deliberate reads of the other run
    Analyzer("similarity", "forensics.analyze.similarity", True, ("similarity_pairs", "findings"),
             requires=("provenance",)),
    Analyzer("timeline", "forensics.analyze.timeline", False, ("file_versions", "check_runs", "findings")),
    Analyzer("static", "forensics.analyze.static", False, ("findings",)),
    # the static findings name the probes that settle them
    Analyzer("replay", "forensics.replay", False, ("replay_results", "findings"), requires=("static",), opt_in=True),
)
BY_NAME = {a.name: a for a in ANALYZERS}


def order(analyzers: Sequence[Analyzer] = ANALYZERS) -> list[Analyzer]:
    """`analyzers` in declared order, checked: every requirement is declared and comes earlier."""
    seen: set[str] = set()
    names = {a.name for a in analyzers}
    for a in analyzers:
        for r in a.requires:
            if r not in names:
                raise ValueError(f"analyzer {a.name} requires {r}, which is not declared")
            if r not in seen:
                raise ValueError(f"analyzer {a.name} requires {r}, declared after it")
        seen.add(a.name)
    return list(analyzers)


def output_tables(analyzers: Sequence[Analyzer] = ANALYZERS) -> tuple[str, ...]:
    """Tables the per-run analyzers write (what a worker hands back for its chunk)."""
    out: list[str] = []
    for a in analyzers:
        if not a.cross_run:
            out += [t for t in a.writes if t not in out]
    return tuple(out)


def import_analyzer(module: str) -> Callable[[Store, list[str]], Any]:
    mod = importlib.import_module(module)
    fn = getattr(mod, "analyze", None)
    if fn is None:
        raise ImportError(f"{module} has no analyze(store, run_ids)")
    return fn


def describe_error(e: BaseException) -> str:
    """An exception in one line, with the file and line it came from."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return f"{type(e).__name__}: {str(e)[:300]}{where}"


def run_isolated(fn, store: Store, run_ids: Sequence[str]) -> dict[str, str]:
    """Run a per-run analyzer over `run_ids`; if it raises, bisect the runs until each failure is
    pinned to one run, so one bad run fails only its own fields and the others are analysed
    normally.  Returns {run_id: error} of the runs it failed on (empty when all ran)."""
    try:
        fn(store, list(run_ids))
        return {}
    except Exception as e:  # noqa: BLE001 - an analyzer crash fails its run's fields closed
        try:
            store.con.execute("ROLLBACK")
        except Exception:  # noqa: BLE001 - no transaction was open
            pass
        if len(run_ids) == 1:
            return {run_ids[0]: describe_error(e)}
        mid = len(run_ids) // 2
        return {**run_isolated(fn, store, run_ids[:mid]), **run_isolated(fn, store, run_ids[mid:])}


def analyze_chunk(args) -> tuple[str, list[str], dict[str, Any], dict[str, str]]:
    """In a worker: copy the chunk's rows from the (read-only) store into memory, run one analyzer,
    return the rows it wrote as Arrow IPC bytes per table and {run_id: error} of the runs it failed
    on (never an exception)."""
    try:
        return _analyze_chunk(args)
    except Exception as e:  # noqa: BLE001 - the chunk's fields fail closed in the parent
        return args[1], list(args[2]), {}, {rid: describe_error(e) for rid in args[2]}


def _analyze_chunk(args) -> tuple[str, list[str], dict[str, Any], dict[str, str]]:
    db_path, module, chunk = args
    import pyarrow as pa

    from forensics.store import schema as S
    mem = Store(":memory:")
    try:
        mem.con.execute(f"ATTACH '{db_path}' AS src (READ_ONLY)")
        ph = ",".join("?" * len(chunk))
        for t in S.TABLES:
            cols = ", ".join(f'"{c}"' for c in t.column_names())
            if t.name in ("runs", "archives"):
                mem.con.execute(f"INSERT INTO {t.name} ({cols}) SELECT {cols} FROM src.{t.name}")
            elif "run_id" in t.column_names():
                mem.con.execute(f"INSERT INTO {t.name} ({cols}) SELECT {cols} FROM src.{t.name} WHERE run_id IN ({ph})",
                                list(chunk))
            else:
                mem.con.execute(f"INSERT INTO {t.name} ({cols}) SELECT {cols} FROM src.{t.name}")
        mem.con.execute("DETACH src")
        errs = run_isolated(import_analyzer(module), mem, list(chunk))
        ok = [r for r in chunk if r not in errs]  # a failed run's partial rows are not handed back
        out: dict[str, bytes] = {}
        for t in output_tables():
            ids = ", ".join("'" + r.replace("'", "''") + "'" for r in ok) or "NULL"
            rel = mem.con.sql(f"select * from {t} where run_id in ({ids})")
            tbl = (getattr(rel, "to_arrow_table", None) or getattr(rel, "arrow"))()
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, tbl.schema) as w:
                w.write_table(tbl)
            out[t] = sink.getvalue().to_pybytes()
        return module, list(chunk), out, errs
    finally:
        mem.close()


def apply_chunk_rows(store: Store, chunk: Sequence[str], tables: dict[str, bytes]) -> None:
    """In the driver: replace the chunk's rows of each table with what its worker wrote."""
    import pyarrow as pa
    ph = ",".join("?" * len(chunk))
    with store.transaction():
        for t, blob in tables.items():
            tbl = pa.ipc.open_stream(blob).read_all()
            store.con.execute(f"DELETE FROM {t} WHERE run_id IN ({ph})", list(chunk))
            store.insert_arrow(t, tbl)


__all__ = ["ANALYZERS", "Analyzer", "BY_NAME", "analyze_chunk", "apply_chunk_rows", "describe_error",
           "import_analyzer", "order", "output_tables", "run_isolated"]
