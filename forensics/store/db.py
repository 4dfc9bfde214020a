"""DuckDB store: connection, schema creation, and batched, per-run transactional writes.

Writers never append blindly: every write of a run's rows first deletes that run's rows from the
same table inside the same transaction, so re-running an ingest or an analyzer never duplicates,
and a process killed mid-write leaves the previous committed state (DuckDB rolls back the open
transaction on the next open).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
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


# --------------------------------------------------------------------------- value coercion
# A value that cannot be stored as its column's type (a lone surrogate in a string, an integer out of
# the column's range, a list where a string belongs, JSON nested deeper than the serializer allows)
# must never lose its row, let alone its run: every writer goes through `to_column`/`RowBuffer`,
# which try the fast Arrow conversion and, only when it fails, coerce value by value and report a
# `Coercion` for each value changed (the ingest turns these into parse_errors rows).
_CONVERT_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError,
                   UnicodeEncodeError, TypeError, ValueError)
_JSON_OPTS = orjson.OPT_NON_STR_KEYS
JSON_MAX_DEPTH = 200        # orjson refuses more than 255 levels; deeper levels are stored as text


@dataclass(slots=True)
class Coercion:
    """One value changed to be storable: where (table, column, row of the batch) and why."""
    table: str
    column: str
    row: int
    reason: str
    source: str | None = None
    line: int | None = None

    def detail(self) -> str:
        return f"{self.table}.{self.column}: {self.reason}"


def _show(v: Any, n: int = 120) -> str:
    """A short, always-encodable rendering of a value for a parse_errors detail."""
    if isinstance(v, int) and not isinstance(v, bool):
        t = str(v)
        return t if len(t) <= n else f"{t[:n // 2]}...{t[-20:]} ({len(t)} digits)"
    try:
        r = repr(v)
    except Exception:  # noqa: BLE001 - a repr that fails is itself a value we describe
        r = f"<{type(v).__name__}>"
    r = r.encode("utf-8", "backslashreplace").decode("utf-8")
    return r if len(r) <= n else r[:n] + f"... ({len(r)} chars)"


def escape_surrogates(s: str) -> str:
    """`s` with every lone surrogate written as its escape text (U+D83D -> '\\ud83d')."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def json_safe(v: Any, depth: int = 0) -> tuple[Any, list[str]]:
    """A copy of `v` that orjson can serialize, and what had to change: lone surrogates escaped,
    integers beyond 64 bits as decimal text, nesting deeper than JSON_MAX_DEPTH as its text,
    keys as strings, any other object as its str()."""
    notes: list[str] = []

    def walk(x: Any, d: int) -> Any:
        if x is None or isinstance(x, (bool, float)):
            return x
        if isinstance(x, str):
            y = escape_surrogates(x)
            if y is not x:
                notes.append("lone surrogate escaped")
            return y
        if isinstance(x, int):
            if -(1 << 63) <= x < (1 << 64):
                return x
            notes.append(f"integer {_show(x, 60)} beyond 64 bits stored as text")
            return str(x)
        if isinstance(x, (dict, list, tuple)) and d >= JSON_MAX_DEPTH:
            notes.append(f"nested deeper than {JSON_MAX_DEPTH} levels; the rest stored as text")
            return _show(x, 2000)
        if isinstance(x, dict):
            return {walk(k if isinstance(k, str) else str(k), d + 1): walk(val, d + 1) for k, val in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(e, d + 1) for e in x]
        if isinstance(x, (datetime, date)):
            return x.isoformat()
        notes.append(f"{type(x).__name__} stored as text")
        return escape_surrogates(str(x))

    return walk(v, depth), notes


def jsonify(v: Any) -> tuple[str | None, list[str]]:
    """The JSON text of a value for a JSON column, and what had to change to make it storable.
    A str is taken as JSON text already when it parses, else stored as a JSON string."""
    if v is None:
        return None, []
    if isinstance(v, str):
        try:
            orjson.loads(v)
            return v, []
        except (orjson.JSONDecodeError, TypeError, ValueError):
            safe, notes = json_safe(v)
            return orjson.dumps(safe).decode(), ["not JSON text; stored as a JSON string", *notes]
    try:
        return orjson.dumps(v, default=str, option=_JSON_OPTS).decode(), []
    except (TypeError, ValueError, OverflowError, RecursionError):
        safe, notes = json_safe(v)
        return orjson.dumps(safe, default=str, option=_JSON_OPTS).decode(), notes or ["not serializable as is"]


def _jsonify(v: Any) -> Any:
    return jsonify(v)[0]


_INT_BOUNDS = {pa.int64(): (-(1 << 63), (1 << 63) - 1), pa.int32(): (-(1 << 31), (1 << 31) - 1),
               pa.int16(): (-(1 << 15), (1 << 15) - 1), pa.int8(): (-(1 << 7), (1 << 7) - 1)}
_INT_TEXT = re.compile(r"\s*[-+]?\d{1,40}\s*")


def coerce_value(v: Any, typ: pa.DataType) -> tuple[Any, str | None]:
    """`v` made storable as Arrow type `typ`: (value, None) when unchanged, else (new value, why).
    Integers out of range are clipped to the type's bounds; text where a number belongs is parsed
    when it is a number; anything else that does not fit becomes NULL (or, in a string column, its
    JSON text).  The reason always names the original value."""
    if v is None:
        return None, None
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        if isinstance(v, str):
            y = escape_surrogates(v)
            return (y, None) if y is v else (y, f"lone surrogate in {_show(v)}; stored escaped")
        if isinstance(v, (bytes, bytearray)):
            return bytes(v).decode("utf-8", "replace"), "bytes where text belongs; decoded with replacement"
        text, _notes = jsonify(v)
        return text, f"{type(v).__name__} {_show(v)} where text belongs; stored as its JSON text"
    bounds = _INT_BOUNDS.get(typ)
    if bounds is not None:
        lo, hi = bounds
        n = None
        if isinstance(v, bool):
            return int(v), f"bool {v} where an integer belongs; stored as {int(v)}"
        if isinstance(v, int):
            n = v
        elif isinstance(v, float) and math.isfinite(v) and v.is_integer():
            n = int(v)
        elif isinstance(v, str) and _INT_TEXT.fullmatch(v):
            n = int(v)
        if n is None:
            return None, f"{type(v).__name__} {_show(v)} where an integer belongs; stored as NULL"
        if n < lo or n > hi:
            c = lo if n < lo else hi
            return c, f"integer {_show(v)} out of range of {typ}; clipped to {c}"
        return n, None if type(v) is int else f"{type(v).__name__} {_show(v)} stored as integer {n}"
    if pa.types.is_floating(typ):
        if isinstance(v, bool):
            return None, f"bool {v} where a number belongs; stored as NULL"
        if isinstance(v, int):
            try:
                return float(v), None
            except OverflowError:
                return (math.inf if v > 0 else -math.inf), f"integer {_show(v)} beyond a double; stored as infinity"
        if isinstance(v, str):
            try:
                return float(v), f"text {_show(v)} stored as a number"
            except ValueError:
                pass
        return None, f"{type(v).__name__} {_show(v)} where a number belongs; stored as NULL"
    if pa.types.is_boolean(typ):
        if isinstance(v, int) and v in (0, 1):
            return bool(v), f"{_show(v)} stored as boolean"
        if isinstance(v, str) and v.strip().lower() in ("true", "false"):
            return v.strip().lower() == "true", f"text {_show(v)} stored as boolean"
        return None, f"{type(v).__name__} {_show(v)} where a boolean belongs; stored as NULL"
    if pa.types.is_timestamp(typ):
        if isinstance(v, str):
            try:
                d = datetime.fromisoformat(v.replace("Z", "+00:00"))
                pa.array([d], typ)
                return d, f"text {_show(v)} stored as a timestamp"
            except (ValueError, *_CONVERT_ERRORS):
                pass
        return None, f"{type(v).__name__} {_show(v)} where a timestamp belongs; stored as NULL"
    if pa.types.is_list(typ):
        if not isinstance(v, (list, tuple)):
            return None, f"{type(v).__name__} {_show(v)} where a list belongs; stored as NULL"
        out, why = [], []
        for e in v:
            c, w = coerce_value(e, typ.value_type)
            out.append(c)
            if w:
                why.append(w)
        return out, ("; ".join(why[:3]) + (f" (+{len(why) - 3} more)" if len(why) > 3 else "")) if why else None
    return None, f"{type(v).__name__} {_show(v)} cannot be stored as {typ}; stored as NULL"


def to_column(values: list[Any], typ: pa.DataType) -> tuple[pa.Array, list[tuple[int, str]]]:
    """An Arrow array of `values`: the fast conversion when it works, else value by value through
    `coerce_value`; returns the array and [(row, why)] for each value changed."""
    try:
        return pa.array(values, typ), []
    except _CONVERT_ERRORS:
        pass
    out: list[Any] = []
    why: list[tuple[int, str]] = []
    for i, v in enumerate(values):
        try:
            pa.array([v], typ)
            out.append(v)
            continue
        except _CONVERT_ERRORS:
            pass
        c, w = coerce_value(v, typ)
        try:
            pa.array([c], typ)
        except _CONVERT_ERRORS:
            c, w = None, f"{w or _show(v)}; stored as NULL"
        out.append(c)
        why.append((i, w or "value changed to be storable"))
    try:
        return pa.array(out, typ), why
    except _CONVERT_ERRORS:  # values that convert alone but not together (naive and aware datetimes)
        return pa.concat_arrays([pa.array([c], typ) for c in out]), why


def table_from_columns(table: str, cols: dict[str, list[Any]], schema: pa.Schema | None = None,
                       problems: list[Coercion] | None = None) -> pa.Table:
    """A typed Arrow table of `table` from Python column lists; values that do not fit are coerced
    and reported in `problems` (with the row's source and line, where the table has them)."""
    schema = schema or arrow_schema(table)
    try:
        return pa.Table.from_pydict(cols, schema=schema)
    except _CONVERT_ERRORS:
        pass
    arrays = []
    for f in schema:
        arr, why = to_column(cols[f.name], f.type)
        arrays.append(arr)
        if why and problems is not None:
            src = cols.get("source")
            ln = next((cols[c] for c in _LINE_COLS if c in cols), None)
            for i, w in why:
                problems.append(Coercion(table, f.name, i, w, _as_str(src[i]) if src else None,
                                         _as_line(ln[i]) if ln else None))
    return pa.Table.from_arrays(arrays, schema=schema)


_LINE_COLS = ("line", "terminal_line", "first_line", "api_error_line")


def _as_str(v: Any) -> str | None:
    return escape_surrogates(v) if isinstance(v, str) else None


def _as_line(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < (1 << 31) else None


class RowBuffer:
    """Column-wise buffer of rows for one table; `to_arrow()` builds a typed Arrow table.

    Rows are dicts keyed by column name; missing keys become NULL.  JSON columns accept any
    JSON-serializable Python value (it is serialized here).  A value that does not fit its
    column is coerced (see `coerce_value`, `jsonify`) and recorded in ``problems``; it never
    makes the batch fail.
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
        self.problems: list[Coercion] = []

    def add(self, row: Mapping[str, Any]) -> None:
        get = row.get
        for n, app in self._plain:
            app(get(n))
        for n, app in self._jsoncols:
            text, notes = jsonify(get(n))
            app(text)
            if notes:
                src = get("source")
                ln = next((get(c) for c in _LINE_COLS if c in self.cols), None)
                self.problems.append(Coercion(self.table, n, self.n, "; ".join(dict.fromkeys(notes)),
                                              _as_str(src), _as_line(ln)))
        self.n += 1

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for r in rows:
            self.add(r)

    def to_arrow(self) -> pa.Table:
        return table_from_columns(self.table, self.cols, arrow_schema(self.table), self.problems)

    def clear(self) -> None:
        for v in self.cols.values():
            v.clear()
        self.n = 0
        self.problems = []


# The connection `Store(locked=True)` opens: the store file is attached read-only when the connection
# is made; after that DuckDB refuses every file-system operation (enable_external_access=false
# covers COPY TO, EXPORT, ATTACH, INSTALL, read_* / glob table functions and secrets), community and
# unsigned extensions, and any change of setting (lock_configuration=true covers profiling_output,
# enable_profiling, log_query_path, temp_directory, and turning the two above back on).
LOCKED_CONFIG = {"enable_external_access": False, "allow_community_extensions": False,
                 "allow_unsigned_extensions": False, "autoinstall_known_extensions": False,
                 "autoload_known_extensions": False, "lock_configuration": True}


#: DuckDB's memory for a store (its buffer pool keeps the blocks it wrote and read, up to 80% of the
#: machine's memory by default: a scan's resident memory then grew with the store); past it DuckDB
#: evicts and spills.  FORENSICS_DUCKDB_MEMORY_LIMIT overrides it ("" keeps DuckDB's default).
DEFAULT_MEMORY_LIMIT = "1GB"


def memory_limit() -> str:
    v = os.environ.get("FORENSICS_DUCKDB_MEMORY_LIMIT", DEFAULT_MEMORY_LIMIT).strip()
    if v and not re.fullmatch(r"\d+(\.\d+)?\s*[KMGT]?i?B", v, re.I):
        raise ValueError(f"FORENSICS_DUCKDB_MEMORY_LIMIT={v!r}: a size such as 1GB or 512MB")
    return v


class Store:
    """A DuckDB file (or ':memory:') holding the schema of `forensics.store.schema`."""

    def __init__(self, path: str | os.PathLike = DEFAULT_DB, read_only: bool = False, locked: bool = False):
        """`locked` (implies read_only) is the connection for SQL typed by a user (`forensics sql`,
        `forensics query`): no file or network access at all and the configuration frozen, so no
        statement can write a file (COPY ... TO, EXPORT DATABASE, ATTACH, profiling or log output),
        read one outside the store (read_csv, glob, ...) or load an extension (see LOCKED_CONFIG)."""
        self.path = str(path)
        read_only = read_only or locked
        if self.path != ":memory:" and not read_only:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(self.path, read_only=read_only, config=dict(LOCKED_CONFIG) if locked else {})
        limit = memory_limit()
        # (a file's store only: an in-memory one would spill into the working folder; set, not a connect
        # option, so other connections to the file stay compatible)
        if limit and not locked and self.path != ":memory:":
            self.con.execute(f"SET memory_limit = '{limit}'")
        if not read_only:
            self.init_schema()

    @classmethod
    def on_connection(cls, con: duckdb.DuckDBPyConnection, path: str = ":memory:") -> "Store":
        """A Store over a connection made elsewhere whose current database already has the schema
        (forensics.store.chunks: a chunk of runs' in-memory database)."""
        self = cls.__new__(cls)
        self.path = path
        self.con = con
        return self

    # -- lifecycle -------------------------------------------------------------------------
    def init_schema(self) -> None:
        """Create missing tables, add columns added since the file was made, rename tables renamed
        since (schema.RENAMED_TABLES), (re)create the views whose definition changed, and (re)write
        the comments that differ, all in one transaction (cheap when up to date).  A new ingest table
        (schema.INGEST_TABLES) in a store that has runs marks their fingerprints, so that the next
        ingest re-reads them and fills it."""
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
        if "runs" in cols and any(t not in cols for t in S.INGEST_TABLES):
            # a store written before an ingest table existed holds no rows of it for its runs: their
            # fingerprints are marked so the next ingest re-reads them (an unchanged run is skipped)
            stmts.append("UPDATE runs SET fingerprint = 'schema:' || coalesce(fingerprint, '') "
                         "WHERE coalesce(fingerprint, '') NOT LIKE 'schema:%'")
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

    def update_runs(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Set `columns` of `table` per run: each row is (run_id, *values), in one statement (an
        UPDATE per run scans the table once a run: quadratic in runs)."""
        if not rows:
            return
        schema = arrow_schema(table)
        cols = ["run_id", *columns]
        data = pa.Table.from_arrays([pa.array([r[i] for r in rows], type=schema.field(c).type) for i, c in enumerate(cols)],
                                    names=cols)
        sets = ", ".join(f'"{c}" = _fx_upd."{c}"' for c in columns)
        self.con.register("_fx_upd", data)
        try:
            self.con.execute(f"UPDATE {table} SET {sets} FROM _fx_upd WHERE {table}.run_id = _fx_upd.run_id")
        finally:
            self.con.unregister("_fx_upd")

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
