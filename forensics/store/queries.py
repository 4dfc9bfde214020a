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
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import orjson

from forensics.cliutil import InputError  # noqa: F401 - the exit-2 error of every command (also imported from here)
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


FORMATS = ("table", "csv", "json", "jsonl", "markdown")
TTY_MAX_WIDTH = 60   # a table cell's characters on a terminal (--max-width); elsewhere nothing is cut


def _cell(v: Any) -> str:
    return "" if v is None else str(_jsonable(v))


def render(cols: list[str], rows: list[tuple], fmt: str = "table", max_width: int = 0) -> str:
    """Rows as text: an aligned `table` (cells cut at `max_width` characters, 0: never; newlines
    shown as \\n), `csv` (RFC 4180, NULL empty), `json` (an array of objects), `jsonl` (one object a
    line) or `markdown` (a GitHub table)."""
    if fmt == "json":
        return orjson.dumps([{c: _jsonable(v) for c, v in zip(cols, r)} for r in rows],
                            default=str, option=orjson.OPT_INDENT_2).decode()
    if fmt == "jsonl":
        return "\n".join(orjson.dumps({c: _jsonable(v) for c, v in zip(cols, r)}, default=str).decode() for r in rows)
    if fmt == "csv":
        import csv
        import io
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        w.writerows([_cell(v) for v in r] for r in rows)
        return buf.getvalue().rstrip("\n")
    if fmt == "markdown":
        def md(v: Any) -> str:
            return _cell(v).replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")
        lines = ["| " + " | ".join(md(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
        lines += ["| " + " | ".join(md(v) for v in r) + " |" for r in rows]
        return "\n".join(lines)
    cells = [[_cell(v).replace("\n", "\\n") for v in r] for r in rows]
    if max_width > 0:
        cells = [[c if len(c) <= max_width else c[: max_width - 1] + "…" for c in r] for r in cells]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    out = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    out.append(f"({len(rows)} rows)")
    return "\n".join(out)


def _emit(cols: list[str], rows: list[tuple], fmt: str = "table", max_width: int | None = None) -> None:
    """Print rows in `fmt`; a table's cells are cut at TTY_MAX_WIDTH on a terminal unless
    `max_width` says otherwise (0: never), never when stdout is a pipe or a file."""
    if max_width is None:
        max_width = TTY_MAX_WIDTH if _stdout_is_tty() else 0
    text = render(cols, rows, fmt, max_width)
    if text:
        click.echo(text)


def _stdout_is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def output_options(f: Any) -> Any:
    """--format, its --json and --csv aliases (as sqlite-utils and the duckdb CLI spell them) and
    --max-width, shared by `query` and `sql`; the command reads them with `chosen_format`."""
    f = click.option("--max-width", type=click.IntRange(min=0), default=None, metavar="N",
                     help=f"Cut table cells at N characters, 0 never (default: {TTY_MAX_WIDTH} on a terminal, "
                          "never when piped).")(f)
    f = click.option("--csv", "as_csv", is_flag=True, help="Same as --format csv.")(f)
    f = click.option("--json", "as_json", is_flag=True, help="Same as --format json.")(f)
    f = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                     help="Output format: an aligned table, CSV, a JSON array, JSON lines or a Markdown table.")(f)
    return f


def chosen_format(fmt: str, as_json: bool, as_csv: bool) -> str:
    """The output format that --format, --json and --csv ask for; two asking for different formats
    are a usage error (exit 2), never one of them silently winning."""
    given = [("--json", "json")] * as_json + [("--csv", "csv")] * as_csv
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.get_parameter_source("fmt") not in (None, click.core.ParameterSource.DEFAULT):
        given.append((f"--format {fmt}", fmt))
    if len({f for _, f in given}) > 1:
        raise InputError(" and ".join(s for s, _ in given) + " ask for different output formats; give one")
    return given[0][1] if given else fmt


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


def remove_store_files(db: str | os.PathLike) -> None:
    """Remove a store file this command created (and its write-ahead log)."""
    for p in (Path(db), Path(f"{db}.wal")):
        try:
            p.unlink()
        except OSError:
            pass


def open_store(db: str | os.PathLike, **kw: Any) -> Store:
    """Store(db), a store that cannot be created or opened (a read-only file system, a folder that
    cannot be made, a file that is not a DuckDB database, a lock held by another process) being a
    one-line usage error (InputError, exit 2)."""
    import duckdb
    from forensics.cliutil import os_error_text
    try:
        return Store(db, **kw)
    except OSError as e:
        raise InputError(f"cannot open the store {db}: {os_error_text(e)}") from e
    except duckdb.Error as e:
        raise InputError(f"cannot open the store {db}: {str(e).splitlines()[0]}") from e


def _open_ro(db: str | None) -> Store:
    path = find_store(db)
    return open_store(path, locked=True)  # user SQL: read-only, no file access, settings frozen


def _list_output(qs: dict[str, NamedQuery], fmt: str, max_width: int | None) -> None:
    if fmt == "table":
        for q in qs.values():
            ps = ", ".join(q.params) if q.params else "-"
            click.echo(f"{q.name:28s} {q.description}  [params: {ps}]")
    elif fmt == "json":   # params keep their descriptions
        click.echo(orjson.dumps([{"name": q.name, "description": q.description, "params": q.params,
                                  "path": str(q.path)} for q in qs.values()], option=orjson.OPT_INDENT_2).decode())
    else:
        _emit(["name", "description", "params", "path"],
              [(q.name, q.description, ", ".join(q.params), str(q.path)) for q in qs.values()], fmt, max_width)


def _one_line(e: Exception) -> str:
    """A DuckDB error on one line: its message lines, without the echoed statement and its caret."""
    keep = [ln.strip() for ln in str(e).splitlines() if ln.strip() and not ln.startswith("LINE ")
            and set(ln.strip()) != {"^"}]
    return " ".join(keep) or type(e).__name__


DB_HELP = "Store (default: $FORENSICS_DB, else ./report/audit.duckdb, else ./audit.duckdb)."


@click.command("query")
@click.argument("name", required=False)
@click.option("--db", default=None, type=click.Path(dir_okay=False), help=DB_HELP)
@click.option("--run", "run_id", default=None, help="Shorthand for --param run=RUN_ID.")
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE", help="A query parameter (repeatable).")
@click.option("--list", "list_", is_flag=True, help="List the named queries.")
@click.option("--show", is_flag=True, help="Print the query's SQL instead of running it.")
@output_options
def query_cmd(name, db, run_id, params, list_, show, fmt, as_json, as_csv, max_width) -> None:
    """Run a named query from forensics/queries/*.sql (see --list)."""
    fmt = chosen_format(fmt, as_json, as_csv)
    qs = named_queries()
    if list_ or not name:
        _list_output(qs, fmt, max_width)
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
    _emit(cols, rows, fmt, max_width)


@click.command("sql")
@click.argument("statement", metavar="SQL")
@click.option("--db", default=None, type=click.Path(dir_okay=False), help=DB_HELP)
@output_options
def sql_cmd(statement: str, db: str | None, fmt: str, as_json: bool, as_csv: bool, max_width: int | None) -> None:
    """Run ad-hoc SQL over the store (read-only: no file access, settings locked).  SQL '-' reads
    the statement from standard input.  Several statements separated by ';' run in order and the
    last one's rows are printed."""
    import duckdb
    fmt = chosen_format(fmt, as_json, as_csv)
    if statement == "-":
        statement = sys.stdin.read()
    if not statement.replace(";", " ").strip():
        raise InputError("no SQL statement given (an empty string or only ';'): "
                         "forensics sql \"select count(*) from runs\", or forensics sql - < file.sql")
    with _open_ro(db) as store:
        try:
            cur = store.con.execute(statement)
        except duckdb.Error as e:
            raise InputError(_one_line(e)) from e
        if cur is None:   # nothing to run: only comments
            raise InputError("no SQL statement to run (only comments?)")
        cols = [d[0] for d in cur.description] if cur.description else []
        rows = cur.fetchall() if cur.description else []
    _emit(cols, rows, fmt, max_width)


@click.command("schema")
@click.argument("table", required=False)
@click.option("--markdown", is_flag=True, help="The whole schema as Markdown (docs/schema.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the tables as JSON.")
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
