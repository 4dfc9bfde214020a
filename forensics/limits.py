"""What one run may cost a scan: per-file and per-run limits, declared once.

A scan streams what can be streamed (hashing, transcripts, a run of blank lines) and caps what
cannot (a file parsed or read whole, the records a run keeps), so that no single file of an
archive - a 1 GiB ``solution.py`` that zips to 1 MB, a 30-million-record transcript, a sparse
sidecar of 64 GiB - can take the scan's memory or time, or cost another run anything.

A cap that bites is said, never silent: the ingest writes a ``parse_errors`` row with reason
``over_limit`` naming the file, its size, the limit and the variable that raises it, and the
pipeline turns each such row into an ``input-over-limit`` finding citing the file; the verdict
fields that depend on that file are then ``unknown`` with the reason (decision rule K1), unless a
decisive finding already settles them.

Each limit can be overridden by its environment variable (an integer, optionally with a K, M or G
suffix: ``FORENSICS_MAX_FILE_BYTES=64M``).  The values in force are part of the ingest's resume
fingerprint: changing one re-ingests the runs.  Standard library only (every layer may use it).
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Limit:
    name: str          # the constant's name (docs, messages)
    env: str           # the environment variable that overrides it
    default: int
    unit: str          # "bytes" or "records"
    what: str          # what it bounds, one line

    def value(self) -> int:
        if self.env in _FORCED:
            return _FORCED[self.env]
        raw = os.environ.get(self.env)
        if not raw:
            return self.default
        v = parse_size(raw)
        if v is None or v <= 0:
            raise ValueError(f"{self.env}={raw!r} is not a positive integer (optionally with a K, M or G suffix)")
        return v

    def says(self, size: int | None = None, what: str = "") -> str:
        """The detail of a parse_errors row: what went over, by how much, and how to raise it."""
        n = self.value()
        head = f"{what} " if what else ""
        got = f"{_fmt(size, self.unit)} " if size is not None else ""
        return f"{head}{got}over {self.name} ({_fmt(n, self.unit)}; set {self.env} to raise it)".strip()


def _fmt(n: int, unit: str) -> str:
    if unit != "bytes":
        return f"{n:,} {unit}"
    for div, suf in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n >= div:
            return f"{n / div:.1f} {suf} ({n:,} bytes)" if n % div else f"{n // div} {suf}"
    return f"{n:,} bytes"


def parse_size(raw: str) -> int | None:
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(?:i?[bB])?\s*", raw)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "k": KiB, "m": MiB, "g": GiB}[m.group(2).lower()]


#: a file read whole: solution.py, sidecars, result.json and other JSON records, YAML, template and
#: workspace sources.  Real ones are kilobytes; a 1 GiB solution.py (1 MB zipped) is a bomb.
MAX_FILE_BYTES = Limit("MAX_FILE_BYTES", "FORENSICS_MAX_FILE_BYTES", 16 * MiB, "bytes",
                       "a file read whole (solution.py, sidecars, result.json, YAML, template and workspace sources)")
#: a runner or auditor log parsed whole (check.log, benchmark.log, gpu_lock.log, audit_*.log)
MAX_LOG_BYTES = Limit("MAX_LOG_BYTES", "FORENSICS_MAX_LOG_BYTES", 64 * MiB, "bytes",
                      "a log parsed whole (check.log, benchmark.log, gpu_lock.log, the auditors' probe logs)")
#: a file hashed (sha256, streamed) for the files table; a larger one (a sparse file of 64 GiB
#: apparent size) keeps its size and gets no hash
MAX_HASH_BYTES = Limit("MAX_HASH_BYTES", "FORENSICS_MAX_HASH_BYTES", 2 * GiB, "bytes",
                       "a file hashed for the files table (streamed)")
#: decompressed bytes of one transcript source parsed (streamed; blank lines cost nothing)
MAX_TRANSCRIPT_BYTES = Limit("MAX_TRANSCRIPT_BYTES", "FORENSICS_MAX_TRANSCRIPT_BYTES", 8 * GiB, "bytes",
                             "decompressed bytes of one transcript source parsed (streamed)")
#: transcript records one run keeps (a run's rows are written in one transaction, so they are held)
MAX_RECORDS = Limit("MAX_RECORDS", "FORENSICS_MAX_RECORDS", 2_000_000, "records",
                    "transcript records (lines) one run keeps, over all its transcript sources")

LIMITS: tuple[Limit, ...] = (MAX_FILE_BYTES, MAX_LOG_BYTES, MAX_HASH_BYTES, MAX_TRANSCRIPT_BYTES, MAX_RECORDS)

#: the parse_errors reason of a cap that bit
OVER_LIMIT = "over_limit"


_FORCED: dict[str, int] = {}


@contextmanager
def using(values: dict[str, int] | None):
    """The limits `values` ({variable: value}, as the process that started the scan had them) in
    force inside the block, whatever this process's environment says (a Ray worker's is its own)."""
    if not values:
        yield
        return
    old = dict(_FORCED)
    _FORCED.update(values)
    try:
        yield
    finally:
        _FORCED.clear()
        _FORCED.update(old)


def read_limit(rel: str) -> Limit:
    """The limit on reading the run file `rel` whole: logs have their own."""
    return MAX_LOG_BYTES if rel.endswith(".log") else MAX_FILE_BYTES


def signature() -> str:
    """The values in force, for resume fingerprints (a changed limit changes what is read)."""
    return ",".join(f"{lim.name}={lim.value()}" for lim in LIMITS)


def markdown() -> str:
    """The limits as a Markdown table (docs)."""
    rows = ["| limit | default | variable | bounds |", "|---|---|---|---|"]
    for lim in LIMITS:
        rows.append(f"| `{lim.name}` | {_fmt(lim.default, lim.unit)} | `{lim.env}` | {lim.what} |")
    return "\n".join(rows)


__all__ = ["LIMITS", "Limit", "MAX_FILE_BYTES", "MAX_HASH_BYTES", "MAX_LOG_BYTES", "MAX_RECORDS",
           "MAX_TRANSCRIPT_BYTES", "OVER_LIMIT", "markdown", "parse_size", "read_limit", "signature", "using"]
