"""DuckDB store: connection, schema creation, and batched, per-run transactional writes.

Writers never append blindly: every write of a run's rows first deletes that run's rows from the
same table inside the same transaction, so re-running an ingest or an analyzer never duplicates,
and a process killed mid-write leaves the previous committed state (DuckDB rolls back the open
transaction on the next open).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from forensics.store import schema as S

DEFAULT_DB = "audit.duckdb"

_ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "TIMESTAMP": pa.timestamp("us"),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
    "JSON": pa.string(),
    "VARCHAR[]": pa.list_(pa.string()),
    "BIGINT[]": pa.list_(pa.int64()),
}


def _view_ast(con, sql: str | None) -> Any:
    """The parse tree of a view's SELECT (DuckDB keeps a view's SQL reformatted, so the text of
    the stored definition cannot be compared with the declared one; their parse trees can)."""
    if sql is None:
        return None
    sel = sql.split(" AS ", 1)[1] if sql.lstrip().upper().startswith("CREATE") else sql
    try:
        tree = orjson.loads(con.execute("select json_serialize_sql(?)", [sel.strip().rstrip(";")]).fetchone()[0])
    except duckdb.Error:
        return sql  # cannot parse here: compare the text (at worst the view is re-created)

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not k.startswith("query_location")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return strip(tree)


def _base_type(sqltype: str) -> str:
    return sqltype.replace(" NOT NULL", "").strip()


def arrow_schema(table: str) -> pa.Schema:
    t = S.TABLE_BY_NAME[table]
    return pa.schema([(c.name, _ARROW_TYPES[_base_type(c.type)]) for c in t.columns])


def _jsonify(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    return orjson.dumps(v, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


class RowBuffer:
    """Column-wise buffer of rows for one table; `to_arrow()` builds a typed Arrow table.

    Rows are dicts keyed by column name; missing keys become NULL.  JSON columns accept any
    JSON-serializable Python value (it is serialized here).
    """

    def __init__(self, table: str):
        self.table = table
        self._t = S.TABLE_BY_NAME[table]
        self._names = self._t.column_names()
        self._json = {c.name for c in self._t.columns if _base_type(c.type) == "JSON"}
        self.cols: dict[str, list[Any]] = {n: [] for n in self._names}
        # per column: (name, append to its list); JSON columns are serialized first
        self._plain = [(n, self.cols[n].append) for n in self._names if n not in self._json]
        self._jsoncols = [(n, self.cols[n].append) for n in self._names if n in self._json]
        self.n = 0

    def add(self, row: Mapping[str, Any]) -> None:
        get = row.get
        for n, app in self._plain:
            app(get(n))
        for n, app in self._jsoncols:
            app(_jsonify(get(n)))
        self.n += 1

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for r in rows:
            self.add(r)

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pydict(self.cols, schema=arrow_schema(self.table))

    def clear(self) -> None:
        for v in self.cols.values():
            v.clear()
        self.n = 0


class Store:
    """A DuckDB file (or ':memory:') holding the schema of `forensics.store.schema`."""

    def __init__(self, path: str | os.PathLike = DEFAULT_DB, read_only: bool = False):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(self.path, read_only=read_only)
        if not read_only:
            self.init_schema()

    # -- lifecycle -------------------------------------------------------------------------
    def init_schema(self) -> None:
        """Create missing tables, add columns added since the file was made, rename tables renamed
        since (schema.RENAMED_TABLES), (re)create the views whose definition changed, and (re)write
        the comments that differ, all in one transaction (cheap when up to date)."""
        tables = {r[0] for r in self.con.execute(
            "select table_name from duckdb_tables() where schema_name='main'").fetchall()}
        views = dict(self.con.execute(
            "select view_name, sql from duckdb_views() where schema_name='main' and not internal").fetchall())
        stmts: list[str] = []
        for old, new in S.RENAMED_TABLES.items():
            if old in tables and new not in tables:
                if old in views:
                    stmts.append(f"DROP VIEW {old}")
                stmts.append(f"ALTER TABLE {old} RENAME TO {new}")
        if stmts:
            with self.transaction():
                for stmt in stmts:
                    self.con.execute(stmt)
            views = {}  # re-created below
        cols = {}
        for t, c, comment in self.con.execute(
                "select table_name, column_name, comment from duckdb_columns() where schema_name='main'").fetchall():
            cols.setdefault(t, {})[c] = comment
        tcomments = dict(self.con.execute(
            "select table_name, comment from duckdb_tables() where schema_name='main'").fetchall())
        vcomments = dict(self.con.execute(
            "select view_name, comment from duckdb_views() where schema_name='main' and not internal").fetchall())
        stmts = []
        for t in S.TABLES:
            have = cols.get(t.name)
            if have is None:
                stmts.append(t.ddl())
                have = {}
            else:
                for c in t.columns:
                    if c.name not in have:  # forward-compatible: columns added since the file was made
                        stmts.append(f'ALTER TABLE {t.name} ADD COLUMN "{c.name}" {_base_type(c.type)}')
            if tcomments.get(t.name) != t.comment:
                stmts.append(f"COMMENT ON TABLE {t.name} IS {S._sql_str(t.comment)}")
            for c in t.columns:
                if have.get(c.name) != c.comment:
                    stmts.append(f'COMMENT ON COLUMN {t.name}."{c.name}" IS {S._sql_str(c.comment)}')
        for v in S.VIEWS:
            have = cols.get(v.name, {})
            if v.name not in views or _view_ast(self.con, views[v.name]) != _view_ast(self.con, v.select):
                stmts.append(v.ddl())
                have, vcomments[v.name] = {}, None  # a re-created view has lost its comments
            if vcomments.get(v.name) != v.comment:
                stmts.append(f"COMMENT ON VIEW {v.name} IS {S._sql_str(v.comment)}")
            for c in v.columns:
                if have.get(c.name) != c.comment:
                    stmts.append(f'COMMENT ON COLUMN {v.name}."{c.name}" IS {S._sql_str(c.comment)}')
        if stmts:
            with self.transaction():
                for stmt in stmts:
                    self.con.execute(stmt)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self):
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield self
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")

    # -- writes ----------------------------------------------------------------------------
    def insert_arrow(self, table: str, data: pa.Table) -> None:
        if data.num_rows == 0:
            return
        if data.num_columns and data.column(0).num_chunks > 1:
            data = data.combine_chunks()  # DuckDB's Arrow scan pays ~1 ms per chunk: hand it one
        cols = ", ".join(f'"{c}"' for c in data.column_names)
        self.con.register("_fx_batch", data)
        try:
            self.con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _fx_batch")
        finally:
            self.con.unregister("_fx_batch")

    def insert_rows(self, table: str, rows: Iterable[Mapping[str, Any]]) -> int:
        buf = RowBuffer(table)
        buf.extend(rows)
        self.insert_arrow(table, buf.to_arrow())
        return buf.n

    def delete_run(self, table: str, run_id: str, where: str = "", params: Sequence[Any] = ()) -> None:
        sql = f"DELETE FROM {table} WHERE run_id = ?"
        if where:
            sql += f" AND ({where})"
        self.con.execute(sql, [run_id, *params])

    def replace_run(self, table: str, run_id: str, rows: Iterable[Mapping[str, Any]],
                    where: str = "", params: Sequence[Any] = ()) -> int:
        """Delete the run's rows (optionally only those matching `where`) and insert `rows`,
        atomically."""
        with self.transaction():
            self.delete_run(table, run_id, where, params)
            return self.insert_rows(table, rows)

    # -- reads -----------------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, params or [])
        names = [d[0] for d in cur.description] if cur.description else []
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def scalar(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        row = self.con.execute(sql, params or []).fetchone()
        return row[0] if row else None

    def run_ids(self) -> list[str]:
        return [r[0] for r in self.con.execute("select run_id from runs order by run_id").fetchall()]


def loads_json(v: Any) -> Any:
    """Decode a JSON column value (DuckDB returns JSON as str)."""
    if v is None or not isinstance(v, (str, bytes)):
        return v
    return orjson.loads(v)
