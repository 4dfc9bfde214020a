"""Which store the auditor notebooks (notebooks/*.ipynb) read, said out loud.

Jupyter starts a notebook's kernel in the notebook's folder, not in the folder the user typed the
command in: ``FORENSICS_DB=report/audit.duckdb jupyter nbconvert --execute notebooks/x.ipynb`` from
the repository root gave the kernel a working directory of ``notebooks/``, where
``report/audit.duckdb`` does not exist.  The kernel does inherit the environment of the shell that
launched Jupyter, and a POSIX shell keeps ``$PWD`` at the folder it was in, so a relative path is
resolved as the user meant it: against ``$PWD`` first (the folder Jupyter was launched from), then
against the kernel's working directory.

    from forensics.report.notebook import open_store
    store, db = open_store()        # prints which store it opened, and why that one

* ``$FORENSICS_DB`` set: that store (absolute, or relative as above), or `NoStore` naming every
  place looked;
* unset: ``report/audit.duckdb``, then ``audit.duckdb`` (where `forensics scan` and `forensics
  ingest` write them, the order `forensics query` looks in) in the launch folder, then in the
  kernel's working directory;
* none of them, a file that is not a DuckDB database, or a database without the tables of a
  forensics store: `NoStore`, one line saying what to run.  Never another store, never a scan of
  something else in its place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from forensics.store.queries import DB_ENV, DB_SEARCH

SCAN_HINT = "run `forensics scan ARCHIVE --out report/` first, then set FORENSICS_DB=$PWD/report/audit.duckdb"


class NoStore(Exception):
    """No store to read: $FORENSICS_DB names nothing, or nothing is where `forensics scan` writes
    one, or the file is not a forensics store."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows these lines instead of a traceback: the error is the user's set-up, not our code.
        return [f"NoStore: {self}"]


def launch_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """The folder Jupyter was launched from: ``$PWD`` as the launching shell left it, when it is an
    absolute path of an existing folder (None otherwise: started from a desktop launcher, say)."""
    env = os.environ if env is None else env
    p = env.get("PWD")
    if not p or not os.path.isabs(p) or not os.path.isdir(p):
        return None
    return Path(p)


def _bases(env: Mapping[str, str], cwd: Path) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    ld = launch_dir(env)
    if ld is not None:
        out.append((ld, "the folder Jupyter was started from ($PWD)"))
    if ld is None or ld.resolve() != cwd.resolve():
        out.append((cwd, "the notebook kernel's working directory"))
    return out


def find_notebook_store(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> tuple[str, str]:
    """(path of the store to read, why that one).  Raises NoStore naming every place looked."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    named = env.get(DB_ENV)
    if named:
        p = Path(named).expanduser()
        if p.is_absolute():
            if p.is_file():
                return str(p), f"{DB_ENV}={named}"
            raise NoStore(f"no store at {DB_ENV}={named} ("
                          + ("a folder" if p.is_dir() else "no such file")
                          + "); point it at the audit.duckdb that `forensics scan` wrote")
        looked = []
        for base, what in _bases(env, cwd):
            q = base / p
            if q.is_file():
                return str(q.resolve()), f"{DB_ENV}={named}, relative to {what}"
            looked.append(f"{q} ({what})")
        raise NoStore(f"no store at {DB_ENV}={named}: looked at " + " and ".join(looked)
                      + "; give an absolute path, e.g. FORENSICS_DB=$PWD/report/audit.duckdb")
    looked = []
    for base, what in _bases(env, cwd):
        for rel in DB_SEARCH:
            q = base / rel
            if q.is_file():
                return str(q.resolve()), f"{rel} in {what}; ${DB_ENV} is not set"
            looked.append(str(q))
    raise NoStore(f"no store found: ${DB_ENV} is not set and nothing is at " + " or ".join(looked)
                  + "; " + SCAN_HINT)


def open_store(env: Mapping[str, str] | None = None, cwd: Path | None = None, quiet: bool = False):
    """Open the store a notebook reads (read-only), print which one and why, and return
    (Store, path).  Raises NoStore when there is none or the file is not a forensics store."""
    from forensics.cliutil import InputError
    from forensics.store import queries
    db, why = find_notebook_store(env, cwd)
    try:
        store = queries.open_store(db, read_only=True)
    except InputError as e:
        raise NoStore(f"{e.message} ({why}); {SCAN_HINT}") from None
    if not store.scalar("select count(*) from duckdb_tables() where schema_name = 'main' and table_name = 'runs'"):
        store.close()
        raise NoStore(f"{db} ({why}) is a DuckDB database but not a forensics store (no runs table); {SCAN_HINT}")
    if not quiet:
        print(f"store: {db} ({why}) - {store.scalar('select count(*) from runs')} runs")
    return store, db
