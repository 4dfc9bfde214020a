"""Stores of one chunk of runs: per-run work whose cost does not grow with the archive.

A per-run analyzer or a report page asks the store a few dozen small questions about one run
(``... where run_id = ?``).  Asked of the whole store, each scans tables that grow with the
archive, so the scan's time per run grew with the number of runs.  Asked of a store that holds only
a chunk's rows (a few hundred runs), each costs what it costs at 1,000 runs, however large the
archive: the chunk's rows are copied in once (one filtered scan per table, so O(archive) per chunk,
O(archive^2 / chunk) in all, with chunks of hundreds of runs a small term), and what the work wrote
is copied back in one statement per table.

    with ChunkStore.beside(store) as cs:          # in the store's own process (the store's one writer)
        for chunk in chunks:
            mem = cs.load(chunk, others=stage.reads_all)
            ...analyze(mem, chunk)...
            cs.apply(store, ok_runs, tables)      # its rows replace the chunk's rows in the store

    cs = ChunkStore.reading(db_path)              # in a worker: the store file attached read-only

A chunk store holds, of each table with a ``run_id`` column, the rows of the chunk's runs; of
``similarity_pairs``, the pairs naming a run of the chunk; the tables that belong to no run, whole
(``skipped_folders`` excepted: nothing per run reads it); and of every other run, the columns that
``others`` declares (a stage's ``reads_all``: provenance reads every run's facts, a report page
every run's name).  Which runs go together: `chunks`, at most CHUNK_RUNS runs and CHUNK_BYTES
bytes of transcripts, so a chunk's rows stay bounded by the chunk whatever the archive holds.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from typing import Any

import duckdb

from forensics.store import schema as S
from forensics.store.db import Store

CHUNK_RUNS = int(os.environ.get("FORENSICS_CHUNK_RUNS", 256))
CHUNK_BYTES = int(os.environ.get("FORENSICS_CHUNK_BYTES", 256 << 20))
_NOT_COPIED = frozenset({"skipped_folders"})
_IDS = "(select unnest(?::VARCHAR[]))"
_counter = itertools.count()


def chunk_stores_above() -> int:
    """Runs in the store above which per-run work done in the store's own process (analyzers with
    one job, report pages) goes chunk by chunk through chunk stores: in a store no larger than a
    chunk it would only copy the store.  FORENSICS_CHUNK_STORES_ABOVE overrides it (the tests
    compare the two ways on a small archive)."""
    return int(os.environ.get("FORENSICS_CHUNK_STORES_ABOVE", CHUNK_RUNS))


def chunks(store: Store, run_ids: Sequence[str], max_runs: int | None = None, max_bytes: int | None = None
           ) -> list[list[str]]:
    """`run_ids` cut into consecutive chunks of at most `max_runs` runs and `max_bytes` bytes of
    transcripts (runs.transcript_bytes; a run larger than that is a chunk of its own); defaults
    CHUNK_RUNS and CHUNK_BYTES (FORENSICS_CHUNK_RUNS, FORENSICS_CHUNK_BYTES)."""
    max_runs = CHUNK_RUNS if max_runs is None else max_runs
    max_bytes = CHUNK_BYTES if max_bytes is None else max_bytes
    if not run_ids:
        return []
    size = dict(store.con.execute("select run_id, coalesce(transcript_bytes, 0) from runs where run_id in "
                                  + _IDS, [list(run_ids)]).fetchall())
    out: list[list[str]] = []
    cur: list[str] = []
    nbytes = 0
    for rid in run_ids:
        b = size.get(rid, 0) or 0
        if cur and (len(cur) >= max_runs or nbytes + b > max_bytes):
            out.append(cur)
            cur, nbytes = [], 0
        cur.append(rid)
        nbytes += b
    if cur:
        out.append(cur)
    return out


def _cols(t: S.Table) -> str:
    return ", ".join(f'"{c}"' for c in t.column_names())


class ChunkStore:
    """An in-memory database with the store's schema that holds one chunk of runs at a time, and
    `store`: a `Store` over it (what the per-run work is handed)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, name: str, source: str, owns: bool):
        self.con = con            # its current database is the chunk's
        self.name = name          # the chunk database's name
        self.source = source      # the qualified name of the store's database ("db" or "src")
        self._owns = owns         # the connection is ours to close (a worker's), else a cursor to detach
        for stmt in S.ddl_statements():
            con.execute(stmt)
        self.store = Store.on_connection(con)
        self.runs: list[str] = []

    @classmethod
    def beside(cls, store: Store) -> "ChunkStore":
        """A chunk store inside `store`'s own process: an in-memory database attached to its
        database instance, reached through a connection of its own (a cursor)."""
        db = store.con.execute("select current_database()").fetchone()[0]
        name = f"fx_chunk_{next(_counter)}"
        cur = store.con.cursor()
        cur.execute(f"ATTACH ':memory:' AS {name}")
        cur.execute(f"USE {name}")
        return cls(cur, name, '"' + db.replace('"', '""') + '"', owns=False)

    @classmethod
    def reading(cls, db_path: str) -> "ChunkStore":
        """A chunk store in a process that does not hold the store: an in-memory database with
        the store file attached read-only."""
        from forensics.store.db import memory_limit
        con = duckdb.connect(":memory:")
        if memory_limit():     # (spilling, if ever, beside the store: never into the working folder)
            con.execute(f"SET memory_limit = '{memory_limit()}'")
            con.execute("SET temp_directory = '" + (str(db_path) + ".tmp").replace("'", "''") + "'")
        con.execute("ATTACH ? AS src (READ_ONLY)", [str(db_path)])
        return cls(con, "memory", "src", owns=True)

    def close(self) -> None:
        if self._owns:
            self.con.close()
            return
        try:
            self.con.execute("USE " + self.source)
            self.con.execute(f"DETACH {self.name}")
        finally:
            self.con.close()

    def __enter__(self) -> "ChunkStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def load(self, chunk: Sequence[str], others: Iterable[Any] = ()) -> Store:
        """Empty the chunk store and copy in the rows of `chunk`'s runs (see the module's doc) and,
        of every other run, the columns `others` declares (registry.Rows of the table ``runs``)."""
        ids = list(chunk)
        lo, hi = (min(ids), max(ids)) if ids else ("", "")
        con, src = self.con, self.source
        for t in S.TABLES:
            con.execute(f"DELETE FROM {t.name}")
        for t in S.TABLES:
            if t.name in _NOT_COPIED:
                continue
            cols = _cols(t)
            names = t.column_names()
            if "run_id" in names:
                # (the range lets the scan skip row groups by their min/max, rows being stored in run order)
                con.execute(f"INSERT INTO {t.name} ({cols}) SELECT {cols} FROM {src}.main.{t.name} "
                            f"WHERE run_id BETWEEN ? AND ? AND run_id IN {_IDS}", [lo, hi, ids])
            elif t.name == "similarity_pairs":
                con.execute(f"INSERT INTO {t.name} ({cols}) SELECT {cols} FROM {src}.main.{t.name} "
                            f"WHERE a_id IN {_IDS} OR b_id IN {_IDS}", [ids, ids])
            else:
                con.execute(f"INSERT INTO {t.name} ({cols}) SELECT {cols} FROM {src}.main.{t.name}")
        want: list[str] = []
        for r in others:
            if r.table != "runs":
                raise ValueError(f"a chunk store holds every run's rows of `runs` only, not of {r.table}")
            cs = S.TABLE_BY_NAME["runs"].column_names() if r.columns == ("*",) else list(r.columns)
            want += [c for c in cs if c not in want]
        if want:
            if "run_id" not in want:
                want.insert(0, "run_id")
            cols = ", ".join(f'"{c}"' for c in want)
            con.execute(f"INSERT INTO runs ({cols}) SELECT {cols} FROM {src}.main.runs WHERE run_id NOT IN {_IDS}",
                        [ids])
        self.runs = ids
        return self.store

    def apply(self, store: Store, run_ids: Sequence[str], tables: Iterable[str]) -> None:
        """In `store` (whose process this chunk store lives in: `beside`), replace the rows of
        `run_ids` in each of `tables` with the chunk store's, in one transaction."""
        ids = list(run_ids)
        if not ids:
            return
        with store.transaction():
            for t in tables:
                cols = _cols(S.TABLE_BY_NAME[t])
                store.con.execute(f"DELETE FROM {t} WHERE run_id IN {_IDS}", [ids])
                store.con.execute(f"INSERT INTO {t} ({cols}) SELECT {cols} FROM {self.name}.main.{t} "
                                  f"WHERE run_id IN {_IDS}", [ids])


__all__ = ["CHUNK_BYTES", "CHUNK_RUNS", "ChunkStore", "chunk_stores_above", "chunks"]
