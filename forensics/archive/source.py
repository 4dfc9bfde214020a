"""Read-only access to an archive: a directory tree, a single run folder, or a .tar/.tar.gz/.zip
read in place.

The archive is evidence.  Every access here opens files read-only; nothing is extracted, moved,
touched or created inside it.  Symbolic links are recorded, never followed out of the archive.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tarfile
import time
import zipfile
from collections import defaultdict
from collections.abc import Iterable, Iterator
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


@dataclass(frozen=True, slots=True)     # (slots: an archive listing holds one per file)
class Entry:
    path: str               # posix path relative to the archive root
    size: int
    mtime: datetime | None
    is_dir: bool = False
    is_symlink: bool = False
    link_target: str | None = None


# ----------------------------------------------------------------------------- names not UTF-8
# A file or folder name that is not UTF-8 reaches Python as text with lone surrogates (the
# `surrogateescape` of os and tarfile), which no UTF-8 column, JSON or YAML can hold: one such name
# used to abort the whole scan.  Every source shows such a name with each undecodable byte written
# `\xNN` (the run is analysed under that name and the ingest writes a `parse_errors` row
# `non_utf8_name` citing it); the source maps the shown name back to the bytes on disk.  The map is
# injective: a shown name that would equal a sibling's (a real `a\xff` beside the bytes `a<ff>`)
# gets `~` and 8 hex digits of the SHA-256 of its bytes.
_SURROGATES = re.compile("[\ud800-\udfff]")


def _raw_bytes(name: str) -> bytes:
    try:
        return name.encode("utf-8", "surrogateescape")      # the bytes os / tarfile decoded
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogatepass")


def shown_name(name: str) -> str:
    """`name` (one path segment) with each undecodable byte as `\\xNN` (any other lone surrogate as
    `\\udNNN`); unchanged when it is valid text."""
    if not _SURROGATES.search(name):
        return name
    return _SURROGATES.sub(lambda m: (f"\\x{ord(m.group()) - 0xdc00:02x}" if 0xdc80 <= ord(m.group()) <= 0xdcff
                                      else f"\\u{ord(m.group()):04x}"), name)


def shown_names(names: Iterable[str]) -> dict[str, str]:
    """Sibling names -> the names shown for them (injective over the siblings)."""
    names = set(names)
    out = {n: n for n in names if not _SURROGATES.search(n)}
    used = set(out)
    for n in sorted((n for n in names if n not in out), key=_raw_bytes):
        shown = shown_name(n)
        if shown in used:
            shown = f"{shown}~{hashlib.sha256(_raw_bytes(n)).hexdigest()[:8]}"
        used.add(shown)
        out[n] = shown
    return out


def shown_paths(paths: Iterable[str]) -> tuple[dict[str, str], dict[str, bytes]]:
    """Archive paths ('/'-separated) -> shown paths (segment by segment, `shown_names` among
    siblings), and shown path -> the raw bytes of its last segment, for every path whose last
    segment is shown escaped."""
    paths = list(paths)
    if not any(_SURROGATES.search(p) for p in paths):
        return {p: p for p in paths}, {}
    children: dict[str, set[str]] = defaultdict(set)
    for p in paths:
        parts = p.split("/")
        for i in range(len(parts)):
            children["/".join(parts[:i])].add(parts[i])
    seg = {parent: shown_names(names) for parent, names in children.items()}
    out: dict[str, str] = {}
    raw: dict[str, bytes] = {}
    for p in paths:
        parts = p.split("/")
        shown = []
        for i, part in enumerate(parts):
            shown.append(seg["/".join(parts[:i])][part])
            if shown[-1] != part:
                raw["/".join(shown)] = _raw_bytes(part)
        out[p] = "/".join(shown)
    return out, raw


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
    # shown path -> the raw bytes of its last segment, for every name that is not UTF-8 (see above)
    raw_names: dict[str, bytes] = {}

    def entries(self) -> list[Entry]:
        raise NotImplementedError

    def open(self, path: str) -> BinaryIO:
        raise NotImplementedError

    def read(self, path: str, limit: int | None = None) -> bytes:
        with self.open(path) as f:
            return f.read() if limit is None else f.read(limit)

    def stamp(self, path: str) -> str | None:
        """The change stamp of a listed file: a string that changes whenever its content can have
        changed (what `git status` trusts: inode, ctime, mtime, size), or None where the listing
        cannot vouch for it (then its content is hashed).  A folder's is its own (inode, ctime,
        mtime, size) and a tar or zip's members all take the archive file's, since a member cannot
        change without the file changing.  A file changed within STAMP_SETTLE_NS before the listing
        has none: an edit within the same tick of a coarse clock would not change its ctime (git's
        "racy" case).  Read only by the ingest's resume (forensics.store.ingest)."""
        got = self.__dict__.get("_archive_stamp", False)
        if got is False:
            got = self.__dict__["_archive_stamp"] = (_file_stamp(self.location, time.time_ns())
                                                     if os.path.isfile(self.location) else None)
        return got

    def release_listing(self) -> None:
        """Forget the archive's listing (`entries`, the change stamps) once the caller has what it
        needs of it: an archive of many runs lists millions of files.  Listed again if asked."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: how long ago a file must have last changed for its stat to vouch for its content (see stamp)
STAMP_SETTLE_NS = 2_000_000_000


def _stat_stamp(st: os.stat_result, now_ns: int) -> str | None:
    if st.st_ctime_ns > now_ns - STAMP_SETTLE_NS or st.st_mtime_ns > now_ns - STAMP_SETTLE_NS:
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}:{st.st_mtime_ns}:{st.st_size}"


def _file_stamp(path: str, now_ns: int) -> str | None:
    try:
        return _stat_stamp(os.stat(path), now_ns)
    except OSError:
        return None


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
        self._raw_paths: dict[str, str] = {}       # shown path -> path on disk (names not UTF-8)
        self._dir_maps: dict[str, dict[str, str]] = {}
        self._stamps: dict[str, str | None] = {}   # path on disk -> change stamp (listing time)
        self._released = False
        self.raw_names = {}

    def entries(self) -> list[Entry]:
        if self._entries is not None:
            return self._entries
        out = self._walk()
        shown, self.raw_names = shown_paths(e.path for e in out)
        if self.raw_names:
            fixed = []
            for e in out:
                sp = shown[e.path]
                if sp != e.path:
                    self._raw_paths[sp] = e.path
                tgt = e.link_target
                if tgt is not None and _SURROGATES.search(tgt):
                    tgt = "/".join(shown_name(x) for x in tgt.split("/"))
                fixed.append(Entry(sp, e.size, e.mtime, e.is_dir, e.is_symlink, tgt))
            out = fixed
        self._entries = out
        return out

    def stamp(self, path: str) -> str | None:
        if self._released:
            return None      # (no listing vouches for it any more: its content is hashed)
        if self._entries is None:
            self.entries()
        return self._stamps.get(self._raw_paths.get(path, path))

    def release_listing(self) -> None:
        self._entries = None
        self._stamps = {}
        self._released = True

    def _walk(self) -> list[Entry]:
        out: list[Entry] = []
        root = self.root
        self._now_ns = time.time_ns()
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
        return out

    def _on_disk(self, path: str) -> str:
        """The path on disk of a shown archive path (names that are not UTF-8 mapped back)."""
        raw = self._raw_paths.get(path)
        if raw is not None or "\\" not in path:
            return raw if raw is not None else path
        # a source that did not list the archive (a worker, a store's RunFiles): map segment by
        # segment, from the listing of each folder on the way (the same siblings give the same map)
        parts, done = path.split("/"), []
        for part in parts:
            if "\\" in part:
                parent = "/".join(done)
                m = self._dir_maps.get(parent)
                if m is None:
                    try:
                        names = os.listdir(os.path.join(self.location, parent) if parent else self.location)
                    except OSError:
                        names = []
                    m = self._dir_maps[parent] = {v: k for k, v in shown_names(names).items()}
                part = m.get(part, part)
            done.append(part)
        return "/".join(done)

    def _entry(self, full: str, rel: str) -> Entry:
        try:
            st = os.lstat(full)
        except OSError:
            return Entry(rel, 0, None)
        self._stamps[rel] = _stat_stamp(st, self._now_ns)
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(full)
            except OSError:
                target = None
            return Entry(rel, 0, _ts(st.st_mtime), is_symlink=True, link_target=target)
        return Entry(rel, st.st_size, _ts(st.st_mtime))

    def _full(self, path: str) -> str:
        p = os.path.join(self.location, self._on_disk(path))
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
            with open(path, "rb") as f:
                gz = f.read(2) == b"\x1f\x8b"
            if gz:
                # a member is reached by seeking the decompressed stream: gzip.GzipFile would
                # decompress again from the start for every backward seek (one 1 GiB member made
                # every run read after it pay for it); checkpoints bound that (archive/gzindex.py)
                from forensics.archive.gzindex import open_indexed
                self._tf = tarfile.open(fileobj=open_indexed(open(path, "rb")), mode="r:")
            else:
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
        named: list[tuple[str, tarfile.TarInfo]] = []
        for m in members:
            name = str(PurePosixPath(m.name.lstrip("/")))
            if name.startswith("./"):
                name = name[2:]
            if name in (".", ""):
                continue
            named.append((name, m))
        shown, self.raw_names = shown_paths(n for n, _ in named)
        for name, m in named:
            name = shown[name]
            self._members[name] = m
            target = m.linkname if (m.issym() or m.islnk()) else None
            if target is not None and _SURROGATES.search(target):
                target = "/".join(shown_name(x) for x in target.split("/"))
            out.append(Entry(name, m.size if m.isfile() else 0, _ts(m.mtime), is_dir=m.isdir(),
                             is_symlink=m.issym() or m.islnk(), link_target=target))
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
        f = self._tf.fileobj if self._tf._extfileobj else None   # a stream handed to tarfile: ours to close
        self._tf.close()
        if f is not None:
            f.close()


class _PatchedFile:
    """A read-only file whose bytes at some offsets read as others (`patches`: offset -> bytes)."""

    def __init__(self, f: BinaryIO, patches: dict[int, bytes]):
        self._f, self.patches = f, patches

    def read(self, n: int = -1) -> bytes:
        pos = self._f.tell()
        data = self._f.read(n)
        end = pos + len(data)
        if any(pos < off + len(b) and off < end for off, b in self.patches.items()):
            buf = bytearray(data)
            for off, b in self.patches.items():
                for i, byte in enumerate(b):
                    if pos <= off + i < end:
                        buf[off + i - pos] = byte
            data = bytes(buf)
        return data

    def seek(self, *a):
        return self._f.seek(*a)

    def tell(self) -> int:
        return self._f.tell()

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self._f.close()


_UTF8_FLAG = 0x800


def _bad_utf8_flags(f: BinaryIO) -> tuple[dict[int, bytes], list[int]]:
    """Central-directory entries that say their name is UTF-8 (flag bit 11) but whose bytes are not:
    the patches that clear the flag (so zipfile reads the name as bytes, as for any unflagged name,
    instead of refusing the whole archive) and the entries' indexes."""
    import struct
    endrec = zipfile._EndRecData(f)   # noqa: SLF001 - the end record zipfile itself reads
    if not endrec:
        return {}, []
    size_cd, offset_cd = endrec[zipfile._ECD_SIZE], endrec[zipfile._ECD_OFFSET]   # noqa: SLF001
    concat = endrec[zipfile._ECD_LOCATION] - size_cd - offset_cd                    # noqa: SLF001
    if endrec[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:               # noqa: SLF001
        concat -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator
    start = offset_cd + concat
    f.seek(start)
    cd = f.read(size_cd)
    patches: dict[int, bytes] = {}
    bad: list[int] = []
    pos = idx = 0
    while pos + 46 <= len(cd) and cd[pos:pos + 4] == b"PK\x01\x02":
        flags, = struct.unpack_from("<H", cd, pos + 8)
        n_name, n_extra, n_comment = struct.unpack_from("<3H", cd, pos + 28)
        name = cd[pos + 46:pos + 46 + n_name]
        if flags & _UTF8_FLAG:
            try:
                name.decode("utf-8")
            except UnicodeDecodeError:
                patches[start + pos + 8] = struct.pack("<H", flags & ~_UTF8_FLAG)
                bad.append(idx)
        pos += 46 + n_name + n_extra + n_comment
        idx += 1
    return patches, bad


class ZipSource(ArchiveSource):
    """A .zip read in place.  Names: UTF-8 where the entry says so (flag bit 11); an unflagged name
    is read as UTF-8 when its bytes are UTF-8 (what Linux zip tools write), else shown with `\\xNN`
    escapes (a `parse_errors` row `non_utf8_name`), as in a folder; an entry flagged UTF-8 whose
    bytes are not is read the same way instead of making zipfile refuse the whole archive."""

    kind = "zip"

    def __init__(self, path: Path):
        self.location = str(path.resolve())
        try:
            self._zf = zipfile.ZipFile(path, "r")
        except UnicodeDecodeError:
            self._zf = self._open_patched(path)
        except (zipfile.BadZipFile, OSError) as e:
            raise ArchiveError(f"cannot read zip archive {path}: {e}") from e
        self._entries: list[Entry] | None = None
        self._infos: dict[str, zipfile.ZipInfo] = {}
        self.raw_names = {}

    @staticmethod
    def _open_patched(path: Path) -> zipfile.ZipFile:
        try:
            f = open(path, "rb")
            patches, bad = _bad_utf8_flags(f)
            pf = _PatchedFile(f, patches)
            zf = zipfile.ZipFile(pf, "r")   # type: ignore[arg-type]
            infos = zf.infolist()
            for i in bad:                    # the local headers repeat the flag
                if i < len(infos):
                    f.seek(infos[i].header_offset + 6)
                    local = int.from_bytes(f.read(2), "little")
                    patches[infos[i].header_offset + 6] = (local & ~_UTF8_FLAG).to_bytes(2, "little")
            return zf
        except (zipfile.BadZipFile, OSError, UnicodeDecodeError, ValueError) as e:
            raise ArchiveError(f"cannot read zip archive {path}: {e}") from e

    def entries(self) -> list[Entry]:
        if self._entries is not None:
            return self._entries
        out = []
        named: list[tuple[str, zipfile.ZipInfo]] = []
        for zi in self._zf.infolist():
            name = zi.filename.rstrip("/")
            if not name:
                continue
            if not zi.flag_bits & _UTF8_FLAG and not name.isascii():
                # zipfile read the bytes as cp437 (the format's legacy code page, one char per byte)
                name = name.encode("cp437").decode("utf-8", "surrogateescape")
            named.append((name, zi))
        shown, self.raw_names = shown_paths(n for n, _ in named)
        for name, zi in named:
            name = shown[name]
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
    if _SURROGATES.search(str(p.absolute())):
        # the store names every run by its archive's path: a path it cannot hold as text
        raise ArchiveError(f"the archive's path is not UTF-8 ({shown_name(str(p.absolute()))}): "
                           f"give it through a UTF-8 path (a symlink or a renamed parent folder)")
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
