"""Read-only access to an archive: a directory tree, a single run folder, or a .tar/.tar.gz/.zip
read in place.

The archive is evidence.  Every access here opens files read-only; nothing is extracted, moved,
touched or created inside it.  Symbolic links are recorded, never followed out of the archive.
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import BinaryIO


class ArchiveError(Exception):
    """The archive cannot be opened at all (missing path, unreadable, not an archive)."""


class NotRegularFile(OSError):
    """An archive path that is a named pipe, socket or device, not a file: it is not read.

    Opening a FIFO for reading blocks until some process writes to it, so one named pipe in a run
    folder (left by a harness, or planted) hung the whole scan at its first read; a device such as
    a character device could stream forever.  Callers catch OSError already (a `parse_errors` row
    ``unreadable`` naming the path and what it is)."""


def _what(mode: int) -> str:
    return ("named pipe" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else
            "character device" if stat.S_ISCHR(mode) else "block device" if stat.S_ISBLK(mode) else
            "directory" if stat.S_ISDIR(mode) else "special file")


def open_regular(full: str, shown: str) -> BinaryIO:
    """`full` opened for reading if it is a regular file (NotRegularFile if not).

    Checked before the open (a named pipe is never opened, so a writer waiting on it is not woken)
    and again on the open descriptor, which is opened non-blocking: a path swapped for a pipe
    between the two cannot block the read."""
    st = os.stat(full)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(f"{shown} is a {_what(st.st_mode)}, not a regular file: not read")
    fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{shown} is a {_what(st.st_mode)}, not a regular file: not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@dataclass(frozen=True)
class Entry:
    path: str               # posix path relative to the archive root
    size: int
    mtime: datetime | None
    is_dir: bool = False
    is_symlink: bool = False
    link_target: str | None = None


def _ts(t: float | None) -> datetime | None:
    if t is None:
        return None
    try:
        return datetime.fromtimestamp(t, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


class ArchiveSource:
    """Uniform read-only view of an archive's files."""

    kind: str = "?"
    location: str = ""

    def entries(self) -> list[Entry]:
        raise NotImplementedError

    def open(self, path: str) -> BinaryIO:
        raise NotImplementedError

    def read(self, path: str, limit: int | None = None) -> bytes:
        with self.open(path) as f:
            return f.read() if limit is None else f.read(limit)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def location_of(path: str | os.PathLike) -> str:
    """The name a source gives the archive at `path` (its `location`, the store's `archive`): the
    resolved path, but a directory given through a symlink keeps the link's absolute path (the
    name the user knows)."""
    p = Path(path)
    return str(p.absolute() if p.is_dir() and p.is_symlink() else p.resolve())


class DirSource(ArchiveSource):
    kind = "dir"

    def __init__(self, root: Path):
        # `location` names the archive as given (a symlinked path stays the name the user knows);
        # containment is checked against the real directory it resolves to, so a file of the
        # archive is never refused as "outside" because the path to the archive is a link.
        self.root = root.resolve() if not root.is_symlink() else root.absolute()
        self.location = str(self.root)
        self._real_root = os.path.realpath(self.root)
        self._entries: list[Entry] | None = None
        self._real_dirs: dict[str, str] = {}

    def entries(self) -> list[Entry]:
        if self._entries is not None:
            return self._entries
        out: list[Entry] = []
        root = self.root
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
            for name in list(dirnames):
                full = os.path.join(dirpath, name)
                if os.path.islink(full):  # a symlinked dir: record it, do not descend
                    dirnames.remove(name)
                    out.append(self._entry(full, f"{rel_dir}/{name}" if rel_dir else name))
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                out.append(self._entry(full, f"{rel_dir}/{name}" if rel_dir else name))
            for name in dirnames:
                full = os.path.join(dirpath, name)
                rel = f"{rel_dir}/{name}" if rel_dir else name
                try:
                    st = os.lstat(full)
                    out.append(Entry(rel, 0, _ts(st.st_mtime), is_dir=True))
                except OSError:
                    pass
        self._entries = out
        return out

    @staticmethod
    def _entry(full: str, rel: str) -> Entry:
        try:
            st = os.lstat(full)
        except OSError:
            return Entry(rel, 0, None)
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(full)
            except OSError:
                target = None
            return Entry(rel, 0, _ts(st.st_mtime), is_symlink=True, link_target=target)
        return Entry(rel, st.st_size, _ts(st.st_mtime))

    def _full(self, path: str) -> str:
        p = os.path.join(self.location, path)
        # refuse anything that escapes the root (no following links out of the archive); the
        # resolved directories are cached, so a file costs one lstat instead of one per component
        d, name = os.path.split(p)
        if name in ("", ".", ".."):
            rp = os.path.realpath(p)
        else:
            rd = self._real_dirs.get(d)
            if rd is None:
                rd = self._real_dirs[d] = os.path.realpath(d)
            rp = os.path.join(rd, name)
            if os.path.islink(rp):
                rp = os.path.realpath(rp)
        root = self._real_root
        if not (rp == root or rp.startswith(root.rstrip(os.sep) + os.sep)):
            raise PermissionError(f"{path} resolves outside the archive")
        return p

    def open(self, path: str) -> BinaryIO:
        return open_regular(self._full(path), path)  # read-only, always; never a pipe or a device

    def local_path(self, path: str) -> Path:
        return Path(self._full(path))


class TarSource(ArchiveSource):
    """A .tar / .tar.gz / .tgz / .tar.bz2 / .tar.xz read in place (members streamed, never extracted)."""

    def __init__(self, path: Path):
        self.location = str(path.resolve())
        try:
            self._tf = tarfile.open(path, mode="r:*")
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ArchiveError(f"cannot read tar archive {path}: {e}") from e
        lower = path.name.lower()
        self.kind = "tar" if lower.endswith(".tar") else "tgz"
        self._members: dict[str, tarfile.TarInfo] = {}
        self._entries: list[Entry] | None = None

    def entries(self) -> list[Entry]:
        if self._entries is not None:
            return self._entries
        out = []
        try:
            members = self._tf.getmembers()
        except (tarfile.TarError, OSError, EOFError) as e:  # truncated archive: keep what was read
            members = self._tf.members
            self.truncated = str(e)
        for m in members:
            name = str(PurePosixPath(m.name.lstrip("/")))
            if name.startswith("./"):
                name = name[2:]
            if name in (".", ""):
                continue
            self._members[name] = m
            out.append(Entry(name, m.size if m.isfile() else 0, _ts(m.mtime), is_dir=m.isdir(),
                             is_symlink=m.issym() or m.islnk(),
                             link_target=m.linkname if (m.issym() or m.islnk()) else None))
        self._entries = out
        return out

    def open(self, path: str) -> BinaryIO:
        if not self._members:
            self.entries()
        m = self._members.get(path)
        if m is None or not m.isfile():
            raise FileNotFoundError(path)
        f = self._tf.extractfile(m)
        if f is None:
            raise FileNotFoundError(path)
        return f  # type: ignore[return-value]

    def member_offset(self, path: str) -> int:
        m = self._members.get(path)
        return m.offset_data if m is not None else 0

    def close(self) -> None:
        self._tf.close()


class ZipSource(ArchiveSource):
    kind = "zip"

    def __init__(self, path: Path):
        self.location = str(path.resolve())
        try:
            self._zf = zipfile.ZipFile(path, "r")
        except (zipfile.BadZipFile, OSError) as e:
            raise ArchiveError(f"cannot read zip archive {path}: {e}") from e
        self._entries: list[Entry] | None = None
        self._infos: dict[str, zipfile.ZipInfo] = {}

    def entries(self) -> list[Entry]:
        if self._entries is not None:
            return self._entries
        out = []
        for zi in self._zf.infolist():
            name = zi.filename.rstrip("/")
            if not name:
                continue
            mode = (zi.external_attr >> 16) & 0xFFFF
            is_link = stat.S_ISLNK(mode)
            try:
                mt = datetime(*zi.date_time, tzinfo=timezone.utc)
            except ValueError:
                mt = None
            target = None
            if is_link:
                try:
                    target = self._zf.read(zi).decode("utf-8", "replace")
                except Exception:  # noqa: BLE001 - a broken link entry is still an entry
                    target = None
            self._infos[name] = zi
            out.append(Entry(name, 0 if (zi.is_dir() or is_link) else zi.file_size, mt,
                             is_dir=zi.is_dir(), is_symlink=is_link, link_target=target))
        self._entries = out
        return out

    def open(self, path: str) -> BinaryIO:
        if not self._infos:
            self.entries()
        zi = self._infos.get(path)
        if zi is None or zi.is_dir():
            raise FileNotFoundError(path)
        return self._zf.open(zi, "r")  # type: ignore[return-value]

    def close(self) -> None:
        self._zf.close()


def open_source(path: str | os.PathLike) -> ArchiveSource:
    p = Path(path)
    if not p.exists():
        raise ArchiveError(f"archive not found: {p}")
    if p.is_dir():
        return DirSource(p)
    name = p.name.lower()
    if name.endswith(".zip"):
        return ZipSource(p)
    if any(name.endswith(s) for s in (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")) or tarfile.is_tarfile(p):
        return TarSource(p)
    if zipfile.is_zipfile(p):
        return ZipSource(p)
    raise ArchiveError(f"not a directory, .tar, .tar.gz or .zip archive: {p}")


def iter_prefix(entries: list[Entry], prefix: str) -> Iterator[Entry]:
    pre = prefix.rstrip("/") + "/" if prefix else ""
    for e in entries:
        if e.path.startswith(pre):
            yield e
