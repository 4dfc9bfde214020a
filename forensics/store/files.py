"""A run's files as the store recorded them, read through the archive reader (read-only, any
archive kind): what the verdict and the report read a solution or a log through."""

from __future__ import annotations

from forensics.store.db import Store


def run_files(store: Store, run_id: str):
    """A RunFiles for the run, built from the store's `files` rows (no archive walk per run)."""
    from forensics.archive import RunFiles, get_source
    from forensics.archive.source import Entry
    row = store.query("select archive, run_path from runs where run_id = ?", [run_id])
    if not row:
        raise KeyError(run_id)
    files = store.query("select path, size, mtime, is_symlink, link_target from files where run_id = ?", [run_id])
    src = get_source(row[0]["archive"])
    if not files:
        return RunFiles(src, row[0]["run_path"] or "")
    entries = [Entry(f["path"], f["size"] or 0, f["mtime"], False, bool(f["is_symlink"]), f["link_target"]) for f in files]
    return RunFiles(src, row[0]["run_path"] or "", entries=entries)


__all__ = ["run_files"]
