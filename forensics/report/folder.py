"""A report folder belongs to one archive.

A second archive scanned into the same ``--out`` used to mix the two: the store held both archives'
runs, ``annotations/`` kept the first archive's files, the index counted one.  Now the folder and
the store record the archive they were written for, and a scan of another archive into them stops
(exit 2) with one line saying how to proceed: another ``--out``, or ``--replace``, which first
removes the files this tool wrote there (and nothing else).

What records it:

* ``OUT/.forensics-report.json`` (written when the scan starts, before any report file): the
  archive's identity (`archive_identity`: its resolved path as the store names it, its kind, and
  the device and inode of the path, which say "the same archive, moved or linked" when the path
  differs) and every file of the folder the tool wrote (``files``, relative paths).  The per-run
  files of a scan are listed before they are written, so an interrupted scan's files are known.
* the store: its ``archives`` table (and ``runs.archive``) name the archive every row came from.
* ``scan.json``: ``scan.archive_identity``.

A rescan of the same archive (the same resolved path) is a resume and goes on; its per-run files
of runs no longer in the archive (and a page whose name changed) are removed, since the tool wrote
them, so the folder holds exactly the archive just scanned.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

MARKER = ".forensics-report.json"
FIXED = ("index.html", "verdict.html", "scan.json")         # the folder's own files besides per-run ones


class FolderConflict(Exception):
    """The report folder or the store belongs to another archive (the message says how to proceed)."""


def archive_identity(archive: str | os.PathLike, kind: str | None = None) -> dict[str, Any]:
    from forensics.archive.source import location_of
    p = Path(archive)
    ident: dict[str, Any] = {"path": location_of(p), "kind": kind or ("dir" if p.is_dir() else "file")}
    try:
        st = os.stat(p)
        ident.update(device=st.st_dev, inode=st.st_ino)
    except OSError:
        pass
    return ident


def read_marker(out: Path) -> dict[str, Any] | None:
    try:
        d = orjson.loads((out / MARKER).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return d if isinstance(d, dict) else None


def _write_marker(out: Path, ident: dict[str, Any], files: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (MARKER + ".tmp")
    tmp.write_bytes(orjson.dumps({"archive_identity": ident, "files": sorted(set(files))}, option=orjson.OPT_INDENT_2))
    tmp.replace(out / MARKER)


def store_archives(db_path: str) -> set[str]:
    """The archives a store holds rows of (empty for no store yet)."""
    if db_path == ":memory:" or not Path(db_path).is_file():
        return set()
    import duckdb
    try:
        con = duckdb.connect(db_path, read_only=True)
    except duckdb.Error as e:
        raise FolderConflict(f"cannot open the store {db_path}: {e}") from e
    try:
        have = {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}
        out: set[str] = set()
        for t in ("archives", "runs"):
            if t in have:
                out |= {r[0] for r in con.execute(f"select distinct archive from {t}").fetchall() if r[0]}
        return out
    finally:
        con.close()


def _same(a: dict[str, Any] | None, ident: dict[str, Any]) -> bool:
    return not a or a.get("path") == ident["path"]


def _moved(a: dict[str, Any], ident: dict[str, Any]) -> bool:
    return a.get("device") is not None and (a.get("device"), a.get("inode")) == (ident.get("device"), ident.get("inode"))


def claim(out: Path | None, db_path: str, ident: dict[str, Any], replace: bool = False) -> list[str]:
    """Make `out` (None: no report folder) and the store at `db_path` this archive's, before the scan
    writes anything.  Another archive's folder or store: FolderConflict, or with `replace` its files
    removed first.  Returns what was removed (paths as strings)."""
    marker = read_marker(out) if out is not None else None
    owner = (marker or {}).get("archive_identity")
    if owner is None and out is not None:
        try:   # a folder written before the marker existed: its scan.json says which archive
            owner = ((orjson.loads((out / "scan.json").read_bytes()) or {}).get("scan") or {}).get("archive_identity")
        except (OSError, orjson.JSONDecodeError, AttributeError):
            owner = None
    others = store_archives(db_path) - {ident["path"]}
    conflict = None
    if not _same(owner, ident):
        hint = " (the same file or folder, moved or linked)" if _moved(owner, ident) else ""
        conflict = f"{out} holds the report of another archive, {owner.get('path')}{hint}"
    elif others:
        conflict = f"the store {db_path} holds runs of another archive, {sorted(others)[0]}"
    removed: list[str] = []
    if conflict:
        if not replace:
            raise FolderConflict(f"{conflict}; scan into another --out, or add --replace to remove the report "
                                 f"files this tool wrote there first")
        removed = _remove_own(out, db_path, marker, store_has_others=bool(others))
        marker = None
    if out is not None:
        _write_marker(out, ident, list((marker or {}).get("files") or []))
    return removed


def _unlink(p: Path, removed: list[str]) -> None:
    try:
        if p.is_file() and not p.is_symlink():
            p.unlink()
            removed.append(str(p))
    except OSError:
        pass


def _remove_own(out: Path | None, db_path: str, marker: dict[str, Any] | None, store_has_others: bool) -> list[str]:
    """Remove what this tool wrote in `out` (the marker's files, the folder's fixed files, the
    store) and nothing else; folders it made are removed only if left empty."""
    removed: list[str] = []
    if out is not None:
        root = out.resolve()
        for rel in [*((marker or {}).get("files") or []), *FIXED]:
            p = (out / rel)
            try:
                if not p.resolve().is_relative_to(root):
                    continue                  # a marker naming a file outside the folder is not followed
            except (OSError, ValueError):
                continue
            _unlink(p, removed)
    if db_path != ":memory:" and (store_has_others or (out is not None and Path(db_path).resolve().parent == out.resolve())):
        for p in (Path(db_path), Path(db_path + ".wal")):
            _unlink(p, removed)
    if out is not None:
        _unlink(out / MARKER, removed)
        for d in ("runs", "annotations", "pages"):
            try:
                (out / d).rmdir()             # only if empty: files the tool did not write stay
            except OSError:
                pass
    return removed


def report_files(out: Path, page_names: dict[str, str]) -> list[str]:
    """The per-run files of a report with these page names, and the index's pages past the first
    (relative to OUT)."""
    from forensics.report.html import index_files
    files = []
    for pn in page_names.values():
        files += [f"runs/{pn}.html", f"runs/{pn}.timeline.png", f"annotations/{pn}.yaml"]
    return files + index_files(len(page_names))      # the runs table's further pages, the search index


def expect(out: Path, ident: dict[str, Any], page_names: dict[str, str]) -> None:
    """Before the report is written: list its files in the marker (an interrupted scan's files stay known)."""
    marker = read_marker(out) or {}
    _write_marker(out, ident, list(marker.get("files") or []) + report_files(out, page_names) + list(FIXED))


def prune(out: Path, ident: dict[str, Any], page_names: dict[str, str]) -> list[str]:
    """After the report is written: remove the files the tool wrote for runs no longer in this
    archive (or under a name no longer used) and list exactly what the folder now holds."""
    marker = read_marker(out) or {}
    want = set(report_files(out, page_names)) | set(FIXED)
    removed: list[str] = []
    root = out.resolve()
    for rel in set(marker.get("files") or []) - want:
        p = out / rel
        try:
            if p.resolve().is_relative_to(root):
                _unlink(p, removed)
        except (OSError, ValueError):
            continue
    _write_marker(out, ident, [f for f in want if (out / f).is_file()])
    return removed
