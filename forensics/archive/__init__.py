"""Archive discovery and read-only access to archived runs.

`RunFiles` is how every analyzer reads a run's files (solution.py, sidecars, logs, templates),
whatever the archive is: a directory, a single run folder, a .tar/.tar.gz or a .zip.
"""

from __future__ import annotations

import threading
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from forensics.archive.source import ArchiveError, ArchiveSource, DirSource, Entry, open_source
from forensics.limits import read_limit

__all__ = ["RunFiles", "ArchiveError", "open_source", "get_source"]

_SOURCES: dict[str, ArchiveSource] = {}
_LOCK = threading.Lock()


def get_source(location: str) -> ArchiveSource:
    """An open (cached) read-only source for an archive location."""
    with _LOCK:
        src = _SOURCES.get(location)
        if src is None:
            src = open_source(location)
            _SOURCES[location] = src
        return src


class RunFiles:
    """Read-only view of one run folder inside an archive."""

    def __init__(self, source: ArchiveSource, run_path: str, entries: list[Entry] | None = None):
        self.source = source
        self.run_path = run_path.strip("/")
        if entries is None:
            pre = self.run_path + "/" if self.run_path else ""
            entries = [Entry(e.path[len(pre):], e.size, e.mtime, e.is_dir, e.is_symlink, e.link_target)
                       for e in source.entries() if e.path.startswith(pre)]
        self._entries = {e.path: e for e in entries}

    @classmethod
    def from_store(cls, store, run_id: str) -> "RunFiles":
        row = store.con.execute("select archive, run_path from runs where run_id = ?", [run_id]).fetchone()
        if row is None:
            raise KeyError(f"run {run_id!r} is not in the store")
        # the ingest's `files` rows list the run's entries: no scan of the whole archive listing
        entries = [Entry(p, size or 0, mtime, False, bool(link), target) for p, size, mtime, link, target in
                   store.con.execute("select path, size, mtime, is_symlink, link_target from files "
                                     "where run_id = ?", [run_id]).fetchall()]
        return cls(get_source(row[0]), row[1] or "", entries or None)

    @classmethod
    def from_dir(cls, path: str | Path) -> "RunFiles":
        return cls(DirSource(Path(path)), "")

    def _full(self, rel: str) -> str:
        rel = str(PurePosixPath(rel))
        return f"{self.run_path}/{rel}" if self.run_path else rel

    def exists(self, rel: str) -> bool:
        e = self._entries.get(str(PurePosixPath(rel)))
        return e is not None and not e.is_dir

    def entry(self, rel: str) -> Entry | None:
        return self._entries.get(str(PurePosixPath(rel)))

    def list(self, prefix: str = "") -> list[str]:
        pre = prefix.rstrip("/") + "/" if prefix else ""
        return sorted(p for p, e in self._entries.items() if p.startswith(pre) and not e.is_dir)

    def open(self, rel: str) -> BinaryIO:
        e = self._entries.get(str(PurePosixPath(rel)))
        if e is None or e.is_dir or e.is_symlink:
            raise FileNotFoundError(rel)
        return self.source.open(self._full(rel))

    def read_bytes(self, rel: str, limit: int | None = None) -> bytes | None:
        """The file's bytes (its first `limit` bytes), None when it cannot be read.  Read whole (no
        `limit`), a file over its limit (forensics.limits.read_limit: a 1 GiB solution.py, a sparse
        64 GiB sidecar) is not read either: None, as the ingest said in an ``over_limit`` row."""
        cap = None
        if limit is None:
            cap = read_limit(rel).value()
            e = self._entries.get(str(PurePosixPath(rel)))
            if e is not None and (e.size or 0) > cap:
                return None
        try:
            with self.open(rel) as f:
                data = f.read(limit if cap is None else cap + 1)
        except (FileNotFoundError, PermissionError, IsADirectoryError, OSError):
            return None
        return None if cap is not None and len(data) > cap else data

    def read_text(self, rel: str, limit: int | None = None) -> str | None:
        data = self.read_bytes(rel, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def local_dir(self) -> Path | None:
        """The run folder on disk for directory archives (read-only use!), else None."""
        if isinstance(self.source, DirSource):
            return self.source.local_path(self.run_path) if self.run_path else self.source.root
        return None
