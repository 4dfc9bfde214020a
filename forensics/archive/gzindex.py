"""A gzip file that seeks backwards in bounded time: the decompressor's state is saved at
checkpoints on the way forward, and a backward seek restarts from the nearest one.

Python's `gzip.GzipFile` seeks backwards by decompressing again from the start of the file.  A
.tar.gz archive is read that way (`tarfile` seeks to each member it opens), so one 1 GiB member
(1 MB compressed) made every later read of an *earlier* member pay for decompressing the whole
gigabyte again: a bomb in one run slowed every run read after it (45 s of CPU instead of 2 for a
scan of nine runs).  Here a seek - backwards, or forwards past a checkpoint - restarts from the
nearest checkpoint at or before its target.

Checkpoints (a copy of the `zlib` decompressor: its 32 KiB window and state, about 40 KB) are
taken every ``max(MIN_SPACING, position / SPACING_DIVISOR)`` decompressed bytes: 128 of them up to
512 MiB, about ``128 * (1 + ln(size / 512 MiB))`` beyond (some 1,100, 45 MB, for a terabyte), and a
seek decompresses at most ``max(MIN_SPACING, target / SPACING_DIVISOR)`` bytes it does not hand
out.  Concatenated gzip members are read in turn; damaged data raises as `gzip` does (OSError /
EOFError).
"""

from __future__ import annotations

import bisect
import io
import zlib
from typing import BinaryIO

MIN_SPACING = 4 << 20       # decompressed bytes between two checkpoints at least
SPACING_DIVISOR = 128       # ... and at least 1/128 of the position (bounds their number)
IN_CHUNK = 1 << 16          # compressed bytes read at a time
OUT_CHUNK = 1 << 20         # decompressed bytes produced per step


class _Checkpoint:
    __slots__ = ("out_pos", "file_pos", "pending", "dobj", "member_start")

    def __init__(self, out_pos: int, file_pos: int, pending: bytes, dobj, member_start: bool):
        self.out_pos, self.file_pos, self.pending, self.dobj = out_pos, file_pos, pending, dobj
        self.member_start = member_start


class IndexedGzipReader(io.RawIOBase):
    """A read-only, seekable raw stream of the decompressed contents of a gzip file."""

    def __init__(self, fileobj: BinaryIO):
        self._f = fileobj
        self._f.seek(0)
        self._cps: list[_Checkpoint] = []
        self._keys: list[int] = []
        self._start_member(0, b"")
        self._save(force=True)

    # -- state -----------------------------------------------------------------------------
    def _start_member(self, out_pos: int, pending: bytes) -> None:
        self._d = zlib.decompressobj(31)
        self._pending = pending          # compressed bytes read but not yet given to the decompressor
        self._pos = out_pos              # decompressed position of the next byte out
        self._buf = b""                  # decompressed bytes produced ...
        self._off = 0                    # ... of which self._buf[self._off:] are not yet handed out
        self._eof = False
        self._fresh = True               # no byte of this member decompressed yet

    def _save(self, force: bool = False) -> None:
        """A checkpoint at the current position (the start of self._buf is at self._pos)."""
        if self._off < len(self._buf):
            return                      # only between steps, with nothing produced and unread
        last = self._keys[-1] if self._keys else -1
        if not force and self._pos - last < max(MIN_SPACING, self._pos // SPACING_DIVISOR):
            return
        if self._keys and self._pos <= last:
            return
        cp = _Checkpoint(self._pos, self._f.tell(), self._pending,
                         None if self._fresh else self._d.copy(), self._fresh)
        self._cps.append(cp)
        self._keys.append(self._pos)

    def _step(self) -> bool:
        """Decompress up to OUT_CHUNK bytes into self._buf; False at the end of the data."""
        while True:
            if self._eof:
                return False
            if not self._pending:
                self._pending = self._f.read(IN_CHUNK)
                if not self._pending:
                    if self._fresh:          # no further member: the end
                        self._eof = True
                        return False
                    self._eof = True
                    if not self._d.eof:
                        raise EOFError("compressed file ended before the end-of-stream marker was reached")
                    return False
            if self._fresh and self._pending.lstrip(b"\x00") == b"":   # trailing zero padding
                self._pending = b""
                continue
            try:
                out = self._d.decompress(self._pending, OUT_CHUNK)
            except zlib.error as e:   # damaged data: an OSError, as gzip.BadGzipFile is
                raise OSError(f"bad gzip data: {e}") from e
            self._fresh = False
            self._pending = self._d.unconsumed_tail
            if self._d.eof:                      # this member ends: the next one, if any, starts fresh
                rest = self._d.unused_data   # (unconsumed_tail may repeat it: not added)
                produced = out
                self._start_member(self._pos, rest)
                if produced:
                    self._buf, self._off = produced, 0
                    return True
                continue
            if out:
                self._buf, self._off = out, 0
                return True

    # -- RawIOBase -------------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def readinto(self, b) -> int:
        if self._off >= len(self._buf):
            self._save()
            if not self._step():
                return 0
        o = self._off
        n = min(len(b), len(self._buf) - o)
        b[:n] = memoryview(self._buf)[o:o + n]
        self._off = o + n
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            while self._skip(OUT_CHUNK):
                pass
            offset += self._pos
        if offset < 0:
            raise ValueError("negative seek position")
        i = bisect.bisect_right(self._keys, offset) - 1
        if offset < self._pos or self._keys[i] > self._pos:   # back, or forward past a checkpoint: jump
            cp = self._cps[i]
            self._f.seek(cp.file_pos)
            self._start_member(cp.out_pos, cp.pending)
            if not cp.member_start:
                self._d = cp.dobj.copy()
                self._fresh = False
        while self._pos < offset and self._skip(offset - self._pos):
            pass
        return self._pos

    def _skip(self, n: int) -> int:
        """Move forward up to n bytes without handing them out; 0 at the end."""
        if self._off >= len(self._buf):
            self._save()
            if not self._step():
                return 0
        k = min(n, len(self._buf) - self._off)
        self._off += k
        self._pos += k
        return k

    def close(self) -> None:
        try:
            self._f.close()
        finally:
            super().close()


def open_indexed(fileobj: BinaryIO) -> io.BufferedReader:
    """`fileobj` (a gzip file opened for reading) as a buffered, cheaply seekable stream."""
    return io.BufferedReader(IndexedGzipReader(fileobj), buffer_size=1 << 16)


__all__ = ["IndexedGzipReader", "open_indexed"]
