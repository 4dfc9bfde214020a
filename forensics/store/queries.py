"""Named SQL (`queries/*.sql`), ad-hoc SQL, and the schema, over the store.

A named query file starts with a header of `--` comment lines:

    -- tool-calls-by-tool: Tool calls per run, by tool name and normalized kind.
    -- param run: restrict to this run_id (default: all runs)
    select ... where ($run is null or run_id = $run)

The first line names the query and says what it answers; each `-- param NAME: text` line
declares a named parameter (DuckDB `$NAME`), NULL when not given.  Notebooks and tests run the
same files through `run_named(store, name, **params)`.

`query` and `sql` find the store without being told (`find_store`): `--db PATH`, else the
`FORENSICS_DB` environment variable, else `./report/audit.duckdb` (where `forensics scan` writes
it), else `./audit.duckdb` (the `forensics ingest` default).  No store is an input error (exit 2)
whose message lists where it looked.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import orjson

from forensics.store import schema as S
from forensics.store.db import Store

QUERY_DIRS = [Path(__file__).resolve().parents[1] / "queries"]   # forensics/queries/*.sql (package data)
_PARAM = re.compile(r"^--\s*param\s+(\w+)\s*:\s*(.*)$")


@dataclass
class NamedQuery:
    name: str
    description: str
    sql: str
    path: Path
    params: dict[str, str] = field(default_factory=dict)


def _parse(path: Path) -> NamedQuery:
    text = path.read_text(encoding="utf-8")
    params: dict[str, str] = {}
    desc_lines: list[str] = []
    for line in text.splitlines():
        if not line.startswith("--"):
            if line.strip():
                break
            continue
        m = _PARAM.match(line)
        if m:
            params[m[1]] = m[2].strip()
            continue
        body = line[2:].strip()
        if not desc_lines and body.startswith(path.stem + ":"):
            body = body.split(":", 1)[1].strip()
        if body:
            desc_lines.append(body)
    desc = " ".join(desc_lines)
    return NamedQuery(path.stem, desc.strip(), text, path, params)


def named_queries() -> dict[str, NamedQuery]:
    out: dict[str, NamedQuery] = {}
    for d in QUERY_DIRS:
        if d.is_dir():
            for p in sorted(d.glob("*.sql")):
                out.setdefault(p.stem, _parse(p))
    return out


def run_named(store: Store, name: str, **params: Any) -> tuple[list[str], list[tuple]]:
    qs = named_queries()
    if name not in qs:
        raise KeyError(f"no query named {name!r}; try `forensics query --list`")
    q = qs[name]
    unknown = set(params) - set(q.params)
    if unknown:
        raise KeyError(f"query {name} has no parameter(s) {sorted(unknown)}; it takes {sorted(q.params)}")
    bind = {k: params.get(k) for k in q.params if f"${k}" in q.sql}
    cur = store.con.execute(q.sql, bind) if bind else store.con.execute(q.sql)
    cols = [d[0] for d in cur.description] if cur.description else []
    return cols, cur.fetchall()


def _jsonable(v: Any) -> Any:
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def _emit(cols: list[str], rows: list[tuple], as_json: bool, max_width: int = 60) -> None:
    if as_json:
        click.echo(orjson.dumps([{c: _jsonable(v) for c, v in zip(cols, r)} for r in rows],
                                default=str, option=orjson.OPT_INDENT_2).decode())
        return
    cells = [[("" if v is None else str(v)).replace("\n", "\\n") for v in r] for r in rows]
    cells = [[c if len(c) <= max_width else c[: max_width - 1] + "…" for c in r] for r in cells]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    click.echo("  ".join("-" * w for w in widths))
    for r in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    click.echo(f"({len(rows)} rows)")


class InputError(click.ClickException):
    """Bad input (no store, unknown query, malformed parameter, bad SQL): exit code 2, as documented."""
    exit_code = 2


DB_ENV = "FORENSICS_DB"
DB_SEARCH = ("report/audit.duckdb", "audit.duckdb")   # relative to the working directory, in this order


def find_store(db: str | None = None, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """The store to read: `db` (--db), else $FORENSICS_DB, else ./report/audit.duckdb, else
    ./audit.duckdb.  An explicit --db or FORENSICS_DB that does not exist is an error rather than
    a silent fall-through.  Raises InputError (exit 2) naming every place it looked."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    if db:
        if (cwd / db).exists():   # an absolute db stays itself under cwd / db
            return str(cwd / db)
        raise InputError(f"no store at --db {db}; run `forensics scan ARCHIVE` (writes report/audit.duckdb) "
                         f"or `forensics ingest ARCHIVE --db {db}` first")
    if env.get(DB_ENV):
        p = env[DB_ENV]
        if (cwd / p).exists():
            return str(cwd / p)
        raise InputError(f"no store at {DB_ENV}={p}; unset it or point it at a store written by `forensics scan`")
    looked = []
    for rel in DB_SEARCH:
        if (cwd / rel).is_file():
            return str(cwd / rel)
        looked.append(str(cwd / rel))
    raise InputError("no store found: no --db, no $" + DB_ENV + ", and nothing at " + " or ".join(looked)
                     + "; run `forensics scan ARCHIVE` here (it writes report/audit.duckdb) or pass --db PATH")


def _open_ro(db: str | None) -> Store:
    return Store(find_store(db), locked=True)  # user SQL: read-only, no file access, settings frozen


@click.command("query")
@click.argument("name", required=False)
@click.option("--db", default=None, help="Store (default: $FORENSICS_DB, else ./report/audit.duckdb, else ./audit.duckdb).")
@click.option("--run", "run_id", default=None, help="Shorthand for --param run=RUN_ID.")
@click.option("--param", "-p", "params", multiple=True, help="NAME=VALUE for a query parameter.")
@click.option("--list", "list_", is_flag=True, help="List the named queries.")
@click.option("--show", is_flag=True, help="Print the query's SQL instead of running it.")
@click.option("--json", "as_json", is_flag=True)
def query_cmd(name, db, run_id, params, list_, show, as_json) -> None:
    """Run a named query from forensics/queries/*.sql (see --list)."""
    qs = named_queries()
    if list_ or not name:
        if as_json:
            click.echo(orjson.dumps([{"name": q.name, "description": q.description, "params": q.params,
                                      "path": str(q.path)} for q in qs.values()], option=orjson.OPT_INDENT_2).decode())
        else:
            for q in qs.values():
                ps = ", ".join(q.params) if q.params else "-"
                click.echo(f"{q.name:28s} {q.description}  [params: {ps}]")
        return
    if name not in qs:
        raise InputError(f"no query named {name!r}; known: {', '.join(qs)}")
    if show:
        click.echo(qs[name].sql)
        return
    kv: dict[str, Any] = {}
    for p in params:
        if "=" not in p:
            raise InputError(f"--param wants NAME=VALUE, got {p!r}")
        k, v = p.split("=", 1)
        kv[k] = v
    if run_id is not None:
        kv["run"] = run_id
    with _open_ro(db) as store:
        try:
            cols, rows = run_named(store, name, **kv)
        except KeyError as e:
            raise InputError(str(e.args[0])) from e
    _emit(cols, rows, as_json)


@click.command("sql")
@click.argument("statement")
@click.option("--db", default=None, help="Store (default: $FORENSICS_DB, else ./report/audit.duckdb, else ./audit.duckdb).")
@click.option("--json", "as_json", is_flag=True)
def sql_cmd(statement: str, db: str, as_json: bool) -> None:
    """Run ad-hoc SQL over the store (read-only)."""
    import duckdb
    with _open_ro(db) as store:
        try:
            cur = store.con.execute(statement)
        except duckdb.Error as e:
            raise InputError(str(e)) from e
        cols = [d[0] for d in cur.description] if cur.description else []
        rows = cur.fetchall() if cur.description else []
    _emit(cols, rows, as_json)


@click.command("schema")
@click.argument("table", required=False)
@click.option("--markdown", is_flag=True, help="The whole schema as Markdown (docs/schema.md).")
@click.option("--json", "as_json", is_flag=True)
def schema_cmd(table: str | None, markdown: bool, as_json: bool) -> None:
    """Show the documented store schema (all tables and views, or one)."""
    if markdown:
        click.echo(S.markdown())
        return
    every = {**S.TABLE_BY_NAME, **S.VIEW_BY_NAME}
    if table and table not in every:
        raise InputError(f"no table or view {table!r}")
    tables = [every[table]] if table else [*S.TABLES, *S.VIEWS]
    if as_json:
        click.echo(orjson.dumps([{"table": t.name, "view": isinstance(t, S.View), "comment": t.comment, "columns": [
            {"name": c.name, "type": c.type, "comment": c.comment} for c in t.columns]} for t in tables],
            option=orjson.OPT_INDENT_2).decode())
        return
    for t in tables:
        click.echo(f"{t.name}{' (view)' if isinstance(t, S.View) else ''}: {t.comment}")
        for c in t.columns:
            click.echo(f"  {c.name:24s} {c.type.replace(' NOT NULL', ''):12s} {c.comment}")
        click.echo("")
