"""Streaming line reader for transcript sources.

Reads a binary stream (possibly non-seekable: a tar or zip member) in fixed-size blocks and
hands out *batches* of complete lines, so the parse loop pays one generator step per block,
not per line.  Properties:

* gzip is detected by its magic bytes and decompressed on the fly;
* memory stays bounded: a line longer than ``HUGE_LINE`` bytes is never assembled — it is
  measured while being skipped, keeping only an excerpt of its first bytes;
* read errors (a corrupt gzip member, an I/O error) end the stream with an error batch instead
  of an exception;
* a UTF-8 byte order mark at the start of the (decompressed) stream is skipped, and
  ``Source.bom`` says how many bytes were (the parser starts its byte offsets there).

Batch kinds yielded by :func:`iter_batches`:

``(LINES, [bytes, ...])``     complete lines, newline stripped (may be ``b""`` for blank lines)
``(LAST, [bytes])``           the final line, which had no terminating newline
``(HUGE, Oversize)``          one oversize line (``Oversize.terminated`` says if a newline ended it)
``(BLANK, n)``                ``n`` consecutive blank lines (empty, between two newlines) counted,
                              never split: a run of at least ``BLANK_RUN`` newlines costs a regex
                              match, not a bytes object per line (a 2 MiB .gz of 2 GiB of newlines)
``(FAIL, (reason, detail))``  reading stopped: ``compressed`` (bad gzip data), ``unreadable``, or
                              ``over_limit`` (more than ``Source.max_bytes`` decompressed bytes)
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from itertools import chain
from dataclasses import dataclass
from typing import IO, Iterator

BLOCK = 1 << 16            # bytes read per call (small blocks keep the split lines cache-hot)
HUGE_LINE = 16 << 20       # lines longer than this are measured, never decoded
EXCERPT = 200              # characters kept from a bad / oversize line

BLANK_RUN = 64             # newlines in a row counted as one BLANK batch instead of split

LINES, LAST, HUGE, FAIL, BLANK = 0, 1, 2, 3, 4
OVER_LIMIT = "over_limit"   # the FAIL reason of a source cut at Source.max_bytes
_BLANKS = re.compile(b"\n{%d,}" % BLANK_RUN)

GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"    # a UTF-8 byte order mark: skipped at the start of a (decompressed) stream


@dataclass(slots=True)
class Oversize:
    nbytes: int
    head: bytes            # first bytes of the line (for the excerpt)
    terminated: bool = True


class OverLimit(OSError):
    """More decompressed bytes than the source may yield (`Source.max_bytes`)."""


def _as_bytes(chunk) -> bytes:
    if chunk is None:
        return b""
    if isinstance(chunk, str):  # a text stream handed in by mistake: keep going
        return chunk.encode("utf-8", "surrogateescape")
    return bytes(chunk) if not isinstance(chunk, bytes) else chunk


class Source:
    """Opens a binary stream for block reading; records whether it was gzip-compressed.

    gzip is decompressed incrementally with bounded output per step (a small, highly
    compressible member cannot expand into one huge block); concatenated members are read in
    turn; a truncated or corrupt member yields everything decoded before the damage and then
    raises (reported by iter_batches as a ``compressed`` error)."""

    def __init__(self, stream: IO[bytes] | bytes, max_bytes: int | None = None, limit_name: str = "the limit"):
        self.compressed = False
        self.bom = 0            # bytes of a leading UTF-8 BOM skipped (known once blocks() started)
        self.max_bytes = max_bytes   # decompressed bytes yielded at most (None: no cap)
        self.limit_name = limit_name
        self.nbytes = 0
        if isinstance(stream, (bytes, bytearray, memoryview)):
            stream = io.BytesIO(bytes(stream))
        raw_read = stream.read
        self._raw_read = lambda n: _as_bytes(raw_read(n))
        self._first = self._raw_read(BLOCK)
        if self._first[:2] == GZIP_MAGIC:
            self.compressed = True

    def blocks(self) -> Iterator[bytes]:
        """Yields non-empty blocks, a leading BOM removed; raises on read errors (handled by
        iter_batches)."""
        it = self._gunzip() if self.compressed else self._plain()
        head = b""
        for b in it:
            head += b
            if len(head) >= len(BOM):
                break
        if head.startswith(BOM):
            self.bom = len(BOM)
            head = head[len(BOM):]
        cap = self.max_bytes
        if cap is None:
            if head:
                yield head
            yield from it
            return
        for b in chain((head,), it):
            if not b:
                continue
            self.nbytes += len(b)
            if self.nbytes > cap:   # what fits is yielded, then the read stops
                keep = len(b) - (self.nbytes - cap)
                if keep > 0:
                    yield b[:keep]
                raise OverLimit(f"stopped after {cap:,} decompressed bytes ({self.limit_name})")
            yield b

    def _plain(self) -> Iterator[bytes]:
        if self._first:
            b, self._first = self._first, b""
            yield b
        read = self._raw_read
        while True:
            b = read(BLOCK)
            if not b:
                return
            yield b

    def _gunzip(self) -> Iterator[bytes]:
        read = self._raw_read
        d = zlib.decompressobj(31)
        buf, self._first = self._first, b""
        while True:
            if not buf:
                buf = read(BLOCK)
                if not buf:
                    break
            out = d.decompress(buf, BLOCK)
            buf = d.unconsumed_tail
            if out:
                yield out
            if d.eof:
                rest = d.unused_data
                if not rest:
                    rest = read(BLOCK)
                    if not rest:
                        return
                if rest[:2] != GZIP_MAGIC:
                    raise OSError(f"trailing garbage after gzip member ({len(rest)}+ bytes)")
                d = zlib.decompressobj(31)
                buf = rest
        tail = d.flush()
        if tail:
            yield tail
        if not d.eof:
            raise EOFError("gzip stream ends before its end-of-stream marker (truncated)")


def iter_batches(src: Source) -> Iterator[tuple[int, object]]:
    """Split the source into line batches (see module doc).  Never raises."""
    parts: list[bytes] = []   # pieces of the current unterminated line
    plen = 0
    huge: Oversize | None = None
    blocks = src.blocks()
    while True:
        try:
            buf = next(blocks)
        except StopIteration:
            break
        except (EOFError, OSError, zlib.error, gzip.BadGzipFile) as e:
            # flush what we have as an unterminated line, then report
            if huge is not None:
                huge.terminated = False
                yield HUGE, huge
            elif parts:
                yield LAST, [b"".join(parts)]
            if isinstance(e, OverLimit):
                yield FAIL, (OVER_LIMIT, str(e))
            else:
                yield FAIL, ("compressed" if src.compressed else "unreadable", f"{type(e).__name__}: {e}")
            return
        except Exception as e:  # noqa: BLE001 - evidence reading must never crash the ingest
            if huge is not None:
                huge.terminated = False
                yield HUGE, huge
            elif parts:
                yield LAST, [b"".join(parts)]
            yield FAIL, ("unreadable", f"{type(e).__name__}: {e}")
            return
        # a run of BLANK_RUN or more newlines: its first newline ends the line in progress, the
        # others are blank lines, counted (one BLANK batch) instead of split into empty lines
        segs = [(buf, 0)]
        if b"\n\n" in buf:
            segs = []
            m = _BLANKS.search(buf)
            while m is not None:
                segs.append((buf[:m.start() + 1], m.end() - m.start() - 1))
                buf = buf[m.end():]
                m = _BLANKS.search(buf)
            segs.append((buf, 0))
        for buf, nblank in segs:
            while buf:
                if huge is not None:
                    i = buf.find(b"\n")
                    if i < 0:
                        huge.nbytes += len(buf)
                        buf = b""
                        break
                    huge.nbytes += i
                    yield HUGE, huge
                    huge = None
                    buf = buf[i + 1:]
                    continue
                j = buf.rfind(b"\n")
                if j < 0:
                    parts.append(buf)
                    plen += len(buf)
                    buf = b""
                    if plen > HUGE_LINE:
                        huge = Oversize(plen, _head(parts))
                        parts = []
                        plen = 0
                    break
                if parts:
                    k = buf.find(b"\n")
                    first = b"".join(parts) + buf[:k]
                    parts = []
                    plen = 0
                    if len(first) > HUGE_LINE:
                        yield HUGE, Oversize(len(first), first[: EXCERPT * 4])
                        del first
                        lines = buf[k + 1:j].split(b"\n") if j > k else []
                    else:
                        lines = buf[k + 1:j].split(b"\n") if j > k else []
                        lines.insert(0, first)
                else:
                    lines = buf[:j].split(b"\n")
                if lines:
                    yield LINES, lines
                rest = buf[j + 1:]
                if rest:
                    parts.append(rest)
                    plen = len(rest)
                buf = b""
            if nblank:
                yield BLANK, nblank
    if huge is not None:
        huge.terminated = False
        yield HUGE, huge
    elif parts:
        last = b"".join(parts)
        if len(last) > HUGE_LINE:
            yield HUGE, Oversize(len(last), last[: EXCERPT * 4], terminated=False)
        else:
            yield LAST, [last]


def _head(parts: list[bytes]) -> bytes:
    """First bytes of a line held as pieces, without joining the whole line."""
    out = b""
    for p in parts:
        out += p[: EXCERPT * 4 - len(out)]
        if len(out) >= EXCERPT * 4:
            break
    return out


def excerpt(raw: bytes) -> str:
    """First EXCERPT characters of a line, decoded leniently."""
    return raw[: EXCERPT * 4].decode("utf-8", "replace")[:EXCERPT]
