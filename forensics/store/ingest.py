"""Ingest: archive -> DuckDB store.

    report = ingest_archive(store, "outputs/runs", jobs=2, progress=True)

For every run folder the archive holds (forensics.archive.discover), one pass reads its files
read-only, parses result.json, the runner logs and every transcript source, and writes the rows
of ``runs, files, record_rows, record_spans, tool_calls, tool_results, file_accesses,
session_end, parse_errors, check_log_lines, archived_probes, deck_hardware`` for that run in ONE
transaction (old rows of the run deleted first).  The last two are the archive's own records the
verdict reads (the auditors' probe logs, the deck's hardware), parsed by forensics/store/archived.py.  Transcript records go to the ``records`` view: runs of consecutive heartbeat
lines as one ``record_spans`` row each, every other record as a ``record_rows`` row.  So:

* re-ingesting adds no duplicate rows, and a run whose files are unchanged (same fingerprint of
  paths, sizes and mtimes) is skipped;
* an ingest killed at any point (even SIGKILL) leaves every run either fully written or absent;
  running it again finishes the job and ends with the same store as an uninterrupted run;
* bad input never stops the ingest: each problem becomes a ``parse_errors`` row.

With ``jobs > 1`` worker processes parse runs into Arrow batches and the parent (DuckDB's single
writer) commits them; with ``engine=`` (forensics.engine) Ray tasks do the parsing instead.
"""

from __future__ import annotations

import array
import hashlib
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click
import duckdb
import orjson
import pyarrow as pa

from forensics import __version__
from forensics import limits as LIM
from forensics.archive import logs as L
from forensics.archive.discover import RUN_MARKERS, SKIP_REASONS, DiscoveredRun, SkippedFolder, discover_runs
from forensics.archive.result import infer_era, read_result, result_fields
from forensics.archive.runid import bench_of_problem
from forensics.archive.source import ArchiveError, ArchiveSource, open_source
from forensics.pool import here, maybe_fault, pmap
from forensics.store import archived as A
from forensics.store import schema as S
from forensics.store.db import RowBuffer, Store

BATCH_ROWS = 50_000
SPAN_BATCH_LINES = 1 << 20   # heartbeat lines per record_spans Arrow batch
# Runs of heartbeat lines are stored as record_spans rows; 0 stores one record_rows row per line
# instead (the `records` view reads the same either way; the tests compare the two).
HEARTBEAT_SPANS = os.environ.get("FORENSICS_INGEST_HEARTBEAT_SPANS", "1") != "0"
HASH_SKIP_PREFIXES = ("cache/", "tmp/", "repo/.venv/", ".venv/")
TRANSCRIPT_NAMES = ("transcript.jsonl", "transcript.jsonl.gz", "agent.log")
RUN_FILE_NAMES = RUN_MARKERS | {"result.regrade.json", "codex_session.jsonl"}  # a dir by these names is a parse error
# formats that may carry no tool events (older Grok streams have none): with no call, no tool_source
NO_TOOL_FORMATS = ("grok_stream", "codex_text", "empty", "unknown")
CLAUDE_STORE = "agent_home/.claude/projects/"   # Claude Code session-store copy inside the run folder
# formats of a tool source into which the Claude session-store copy's calls are merged
CLAUDE_MERGE_FORMATS = ("claude", "claude_session", "codex_text", "empty", "unknown", None)


# --------------------------------------------------------------------------- helpers
class HashingReader:
    """Wraps a binary stream, hashing and counting every byte read through it."""

    def __init__(self, raw):
        self.raw = raw
        self.h = hashlib.sha256()
        self.n = 0

    def read(self, n: int = -1) -> bytes:
        b = self.raw.read(n)
        self.h.update(b)
        self.n += len(b)
        return b

    def readinto(self, buf) -> int:
        b = self.read(len(buf))
        buf[: len(b)] = b
        return len(b)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.raw.close()

    @property
    def closed(self) -> bool:
        return getattr(self.raw, "closed", False)

    def finish(self, max_bytes: int | None = None) -> str | None:
        """The sha256 of the whole file: what the parser left unread is drained into it.  None when
        the file is longer than `max_bytes` (forensics.limits.MAX_HASH_BYTES): not hashed."""
        while True:
            if max_bytes is not None and self.n > max_bytes:
                return None
            b = self.raw.read(1 << 20)
            if not b:
                break
            self.h.update(b)
            self.n += len(b)
        if max_bytes is not None and self.n > max_bytes:
            return None
        return self.h.hexdigest()


def categorize(rel: str) -> str:
    """The files-table category of a path inside a run folder."""
    name = rel.rsplit("/", 1)[-1]
    top = rel.split("/", 1)[0]
    if rel in TRANSCRIPT_NAMES or rel == "codex_session.jsonl":
        return "transcript"
    if rel.startswith("agent_home/") and (rel.endswith(".jsonl") and ("sessions/" in rel)):
        return "session_store"
    if rel.startswith(CLAUDE_STORE) and rel.endswith(".jsonl"):
        return "session_store"
    if rel.startswith("agent_home/.gemini/") and "/chats/" in rel and rel.endswith(".json"):
        return "session_store"
    if rel.startswith("grok_session/"):
        return "session_store"
    if rel == "solution.py":
        return "solution"
    if rel in ("result.json", "result.regrade.json", "result.pre_recheck.json", "rebench.json"):
        return "result" if rel == "result.json" else "post_hoc"
    if rel == "stderr.log":
        return "stderr"
    if "gpu_lock" in name and name.endswith(".log"):
        return "gpu_lock_log"
    if "/" not in rel and name.endswith(".log") and "check" in name:
        return "check_log"
    if "/" not in rel and name.endswith(".log") and "bench" in name:
        return "benchmark_log"
    if top == "template_files":
        return "template"
    if top == "trusted_src":
        return "trusted_src"
    if rel.startswith("repo/src/"):
        return "workspace_src"
    if rel.startswith("repo/problems/"):
        return "workspace_problem"
    if top == "scratch":
        return "sidecar" if name.endswith((".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")) else "scratch"
    if top in ("cache", "tmp") or "/.venv/" in f"/{rel}":
        return "cache"
    if "opencode" in top and top.endswith("_config") or name in ("auth.json", ".credentials.json") or rel.startswith("agent_home/.config"):
        return "secret_config"
    if name.endswith(".yaml") and ("annotation" in rel or rel.count("/") == 0):
        return "annotation"
    if name in ("index.html", "index_solution.py.txt", "roofline.png", "template_mutations.log"):
        return "post_hoc"
    return "other"


# categories of files some analyzer (or the report) reads whole: one over its limit is said at ingest
READ_WHOLE_CATEGORIES = frozenset({"solution", "sidecar", "scratch", "result", "post_hoc", "check_log", "benchmark_log",
                                   "gpu_lock_log", "template", "trusted_src", "workspace_src", "workspace_problem",
                                   "annotation"})


def _stream_count(src: ArchiveSource, path: str, max_bytes: int, lines: bool = True
                  ) -> tuple[str, int | None] | str | None:
    """(sha256, lines) of a file read in 1 MiB blocks, never held whole; None when it is longer than
    `max_bytes`; the error text when it cannot be read."""
    h = hashlib.sha256()
    n = nl = 0
    last = b""
    try:
        with src.open(path) as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                n += len(b)
                if n > max_bytes:
                    return None
                h.update(b)
                if lines:
                    nl += b.count(b"\n")
                last = b[-1:]
    except (OSError, FileNotFoundError, PermissionError) as ex:
        return str(ex)
    return h.hexdigest(), (nl + (1 if n and last != b"\n" else 0)) if lines else None


def _excerpt(b: bytes | str, n: int = 200) -> str:
    if isinstance(b, bytes):
        b = b[: n * 4].decode("utf-8", "replace")
    return b[:n]


def _fingerprint(run: DiscoveredRun) -> str:
    """The listing's digest (paths, sizes, mtimes): what an `error:` fingerprint is made of (a run
    whose parse failed is redone by every ingest, whatever it holds)."""
    h = hashlib.sha256(__version__.encode())
    for e in sorted(run.entries, key=lambda e: e.path):
        h.update(f"{e.path}|{e.size}|{e.mtime.timestamp() if e.mtime else ''}|{e.is_symlink}\n".encode())
    return h.hexdigest()


@dataclass
class IngestContext:
    """What a worker needs besides the run: the other runs' names (`known`: access resolution of
    globs over run folders), the stored fingerprints (`previous`: a run whose fingerprint is
    unchanged is not parsed again, unless `force`), the ingest stage's code digest (`key`) and the
    limits in force where the ingest was started (a worker applies those, wherever it runs)."""

    known: dict[str, str | None]
    previous: dict[str, str] = field(default_factory=dict)
    force: bool = False
    key: str = ""
    limits: dict[str, int] = field(default_factory=dict)

    def for_run(self, run_id: str) -> "IngestContext":
        """The context a worker parsing one run needs (the stored fingerprint of that run only:
        what is pickled per task stays the size of the other runs' names)."""
        p = self.previous.get(run_id)
        out = IngestContext(self.known, {run_id: p} if p is not None else {}, self.force, self.key, self.limits)
        if "_kd" in self.__dict__:
            out.__dict__["_kd"] = self.__dict__["_kd"]
        return out

    def with_previous(self, run_id: str, fingerprint: str | None) -> "IngestContext":
        """This context for one run whose stored fingerprint is `fingerprint` (None: none stored)."""
        out = IngestContext(self.known, {run_id: fingerprint} if fingerprint is not None else {}, self.force,
                            self.key, self.limits)
        if "_kd" in self.__dict__:
            out.__dict__["_kd"] = self.__dict__["_kd"]
        return out

    def known_digest(self) -> str:
        d = self.__dict__.get("_kd")
        if d is None:
            d = self.__dict__["_kd"] = hashlib.sha256(orjson.dumps(sorted(self.known.items()))).hexdigest()
        return d


def ingest_key(code: str | None = None) -> str:
    """The ingest stage's code digest (`code`, else computed: forensics.analyze.registry INGEST) and
    the limits in force."""
    if code is None:
        from forensics.analyze.registry import INGEST, code_digest
        code = code_digest(INGEST)
    return f"{code}|{LIM.signature()}|spans={int(HEARTBEAT_SPANS)}"


def listing_stamps(src: ArchiveSource, run: DiscoveredRun, ctx: IngestContext) -> tuple[str, str] | None:
    """The run's listing stamps, without and with the other runs' names (as `run_fingerprint`'s
    two fingerprints): the ingest key and each entry's size, mtime, link target and change stamp
    (`ArchiveSource.stamp`: inode, ctime, mtime, size).  None when some file's stamp cannot vouch for
    its content (changed just before the listing): then the run's files are hashed.

    A run whose stamp equals the one stored when its fingerprint was taken is unchanged without a
    byte of it being read: what keeps a rescan of an unchanged archive as cheap as a listing."""
    pre = run.run_path + "/" if run.run_path else ""
    h = hashlib.sha256(f"{ctx.key}\n".encode())
    for e in sorted(run.entries, key=lambda e: e.path):
        st = None
        if not e.is_dir:
            st = src.stamp(pre + e.path)
            if st is None:
                return None
        mt = e.mtime.timestamp() if e.mtime else ""
        h.update(f"{e.path}|{e.size}|{mt}|{int(e.is_dir)}|{int(e.is_symlink)}|{e.link_target or ''}|{st}\n".encode())
    plain = h.hexdigest()
    return plain, hashlib.sha256(f"{plain}|known:{ctx.known_digest()}".encode()).hexdigest()


def run_fingerprint(src: ArchiveSource, run: DiscoveredRun, ctx: IngestContext, known: dict[str, str] | None = None
                    ) -> tuple[str, str, dict[str, str]]:
    """The run's resume fingerprint, without and with the other runs' names (the second is the one
    of a run whose commands globbed over run folders), and {path: sha256} of the files hashed.

    Over the *contents* of its files (sha256, streamed; a file edited in place with the same size
    and mtime changes it), plus what the ingest records of each entry (size, mtime, link target:
    the store equals a fresh ingest), the ingest's code and the limits (`ctx.key`).  Files under
    cache/, tmp/ and .venv/ are never read by the tool: their size and mtime stand for them; a
    file over MAX_HASH_BYTES is not read either.  `known`: {path: sha256} of files already hashed
    whole (by the parse that just read them): not read again."""
    pre = run.run_path + "/" if run.run_path else ""
    max_hash = LIM.MAX_HASH_BYTES.value()
    h = hashlib.sha256(f"{ctx.key}\n".encode())
    hashes: dict[str, str] = {}
    for e in sorted(run.entries, key=lambda e: e.path):
        rel = e.path
        what = ""
        if not (e.is_dir or e.is_symlink or rel.startswith(HASH_SKIP_PREFIXES) or "/.venv/" in f"/{rel}"):
            if (e.size or 0) > max_hash:
                what = "unhashed"
            elif known and rel in known:
                what = hashes[rel] = known[rel]
            else:
                got = _stream_count(src, pre + rel, max_hash, lines=False)
                if isinstance(got, tuple):
                    what = hashes[rel] = got[0]
                else:
                    what = "unhashed" if got is None else f"unreadable:{got}"
        mt = e.mtime.timestamp() if e.mtime else ""
        h.update(f"{rel}|{e.size}|{mt}|{int(e.is_dir)}|{int(e.is_symlink)}|{e.link_target or ''}|{what}\n".encode())
    plain = h.hexdigest()
    return plain, hashlib.sha256(f"{plain}|known:{ctx.known_digest()}".encode()).hexdigest(), hashes


# The runner's provider classifier (spec archive-format 3.3), applied to stderr.log's tail.
_CREDIT = re.compile(r"insufficient[_ -]?credits|out[_ -]?of[_ -]?credits|credits? (?:balance|remaining)|payment required|account overage|add more using", re.I)
_RATE = re.compile(r"rate[_ -]?limit|\b429\b|quota|resource_exhausted|session limit", re.I)
_UNAVAIL = re.compile(r"model_not_found|selected model .* may not exist|no endpoints? found|temporarily unavailable", re.I)
_STATUS = re.compile(r"\b(40[0-9]|429|5[0-9][0-9])\b")


def _stderr_provider_error(data: bytes | None) -> tuple[int | None, str, int] | None:
    """(status, text, line) of the last provider-error line in the last 200 kB of stderr.log."""
    if not data:
        return None
    tail = data[-200_000:]
    first_line = data[: len(data) - len(tail)].count(b"\n") + 1
    found = None
    for i, raw in enumerate(tail.decode("utf-8", "replace").splitlines()):
        for rx, default in ((_CREDIT, 402), (_RATE, 429), (_UNAVAIL, 404)):
            if rx.search(raw):
                m = _STATUS.search(raw)
                found = (int(m.group(1)) if m else default, raw.strip()[:500], first_line + i)
                break
    return found


def transcript_sources(files: dict[str, Any]) -> list[str]:
    """Transcript files of a run, the primary first."""
    out: list[str] = []
    for n in TRANSCRIPT_NAMES:
        if n in files:
            out.append(n)
    if "codex_session.jsonl" in files:
        out.append("codex_session.jsonl")
    chats = sorted((p for p in files if p.endswith("chat_history.jsonl")
                    and (p.startswith("agent_home/.grok/") or p.startswith("grok_session/"))),
                   key=lambda p: (-files[p].size, p))
    if chats:
        out.append(chats[0])  # the spec's rule: pick the largest session store
    if "codex_session.jsonl" not in files:
        rollouts = sorted((p for p in files if p.startswith("agent_home/.codex/sessions/") and p.endswith(".jsonl")),
                          key=lambda p: (-files[p].size, p))
        if rollouts:
            out.append(rollouts[0])
    out.extend(claude_store_sources(files))
    out.extend(store_fallback_sources(files))
    return out


def claude_store_sources(files: dict[str, Any]) -> list[str]:
    """The Claude session-store copy (``agent_home/.claude/projects/**/*.jsonl``): session files,
    the largest first, then subagent files (``.../subagents/agent-*.jsonl``)."""
    return sorted((p for p in files if p.startswith(CLAUDE_STORE) and p.endswith(".jsonl")),
                  key=lambda p: ("/subagents/" in p, -files[p].size, p))


def store_fallback_sources(files: dict[str, Any]) -> list[str]:
    """Other session-store copies whose tool calls are used only when the run's tool source has
    none: Kimi ``agent_home/.kimi/sessions/**/{context,wire}.jsonl`` and Gemini chat recordings
    ``agent_home/.gemini/tmp/*/chats/*.json`` (their call ids need not match the transcript's,
    so they are never merged with it)."""
    kimi = sorted((p for p in files if p.startswith("agent_home/.kimi/") and p.rsplit("/", 1)[-1] in
                   ("context.jsonl", "wire.jsonl")), key=lambda p: (-files[p].size, p))
    gem = sorted((p for p in files if p.startswith("agent_home/.gemini/") and "/chats/" in p and p.endswith(".json")),
                 key=lambda p: (-files[p].size, p))
    return kimi + gem


def _tool_and_end_sources(sources: list[str]) -> tuple[str | None, str | None]:
    """(source to take tool calls from, source whose terminal marker decides the session end)."""
    if not sources:
        return None, None
    codex = next((s for s in sources if s == "codex_session.jsonl" or s.startswith("agent_home/.codex/")), None)
    chat = next((s for s in sources if s.endswith("chat_history.jsonl")), None)
    main = next((s for s in sources if s in TRANSCRIPT_NAMES), None)
    if codex:
        return codex, codex
    if chat:
        return chat, main or chat
    first = main or sources[0]
    return first, first


# --------------------------------------------------------------------------- per-run parse
@dataclass
class RunRows:
    run_id: str
    fingerprint: str
    batches: dict[str, list[pa.Table]] = field(default_factory=dict)
    counts: Counter = field(default_factory=Counter)
    bytes_read: int = 0
    error: str | None = None
    unchanged: bool = False      # its fingerprint equals the stored one: nothing to write
    used_known: bool = False     # its rows depend on the other runs' names (its fingerprint takes them in)
    output: str | None = None    # the hash of its rows (registry.arrow_digest): the ingest's output digest
    stamp: str | None = None     # its listing stamp (listing_stamps), set by the ingest's parent


_RECORD_COLS = [c for c in S.TABLE_BY_NAME["record_rows"].column_names() if c != "run_id"]
_SPAN_COLS = ("source", "format", "rtype", "subtype", "first_line", "end_offset")
_RECORDS_TABLES = ("record_rows", "record_spans")  # what the `records` view reads


class _ToolEvents:
    """The run's tool calls and results over its transcript sources, each kept once.

    The tool source's events are all kept, numbered by `call_seq` in order.  A merged source (the
    Claude session-store copy) adds only the calls and results of ids not seen yet.  A recovered
    event (structural recovery from an unknown record of a known format, `ToolCall.recovered`) is
    an echo when a known record holds the same id: a known call or result that comes later takes
    the recovered one's place (and its `call_seq`), and a recovered result of an id that a known
    result already answered is dropped.  `call` / `result` return False for an event that is not
    this source's to keep, so the caller may hold it (a fallback source)."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.results: list[ToolResult] = []
        self.id_to_seq: dict[str, int] = {}
        self._result_ids: set[str] = set()
        self._rec_calls: dict[str, int] = {}    # recovered call id -> index in calls
        self._rec_results: dict[str, int] = {}  # recovered result id -> index in results
        self._known_results: set[str] = set()   # ids a known (not recovered) result answered

    def call(self, ev: ToolCall, primary: bool, merge: bool) -> bool:
        cid = ev.call_id
        if cid in self._rec_calls and not ev.recovered and (primary or merge):
            i = self._rec_calls.pop(cid)
            ev.call_seq = self.calls[i].call_seq
            self.calls[i] = ev
            return True
        if not (primary or (merge and cid and cid not in self.id_to_seq)):
            return False
        ev.call_seq = len(self.calls) + 1
        self.calls.append(ev)
        if cid:
            self.id_to_seq.setdefault(cid, ev.call_seq)
            if ev.recovered and self.id_to_seq[cid] == ev.call_seq:
                self._rec_calls[cid] = len(self.calls) - 1
        return True

    def result(self, ev: ToolResult, primary: bool, merge: bool) -> bool:
        cid = ev.call_id
        if cid and (primary or merge):
            if ev.recovered and cid in self._known_results:
                return True                     # an echo of a known result: dropped
            if not ev.recovered and cid in self._rec_results:
                i = self._rec_results.pop(cid)
                ev.call_seq = self.id_to_seq.get(cid)
                self.results[i] = ev
                self._known_results.add(cid)
                return True
        if not (primary or (merge and cid and cid not in self._result_ids)):
            return False
        ev.call_seq = self.id_to_seq.get(cid) if cid else None
        self.results.append(ev)
        if cid:
            self._result_ids.add(cid)
            if not ev.recovered:
                self._known_results.add(cid)
            elif cid not in self._rec_results:
                self._rec_results[cid] = len(self.results) - 1
        return True

    def adopt(self, calls: list[ToolCall], results: list[ToolResult]) -> None:
        """A held fallback source's events, when the tool source had no call (a Kimi / Gemini
        session-store copy): a recovered event whose id a known one of this copy holds is an echo."""
        known = {e.call_id for e in calls if e.call_id and not e.recovered}
        for c in calls:
            if not (c.recovered and c.call_id in known):
                c.call_seq = len(self.calls) + 1
                self.calls.append(c)
                if c.call_id:
                    self.id_to_seq.setdefault(c.call_id, c.call_seq)
        known = {e.call_id for e in results if e.call_id and not e.recovered}
        for r in results:
            if not (r.recovered and r.call_id in known):
                r.call_seq = self.id_to_seq.get(r.call_id) if r.call_id else None
                self.results.append(r)


class _Sink:
    """Per-table row buffers flushed into Arrow batches every BATCH_ROWS rows.

    Records are the bulk, so they skip the dict: the Record objects themselves are kept and
    turned into columns at flush time; heartbeat runs (tens of thousands of progress lines a
    run) are kept as the parser's HeartbeatRun events and become record_spans rows.
    ``counts['records']`` counts records (rows of the `records` view), whichever table holds them.
    """

    def __init__(self, out: RunRows):
        self.out = out
        self.bufs = {t: RowBuffer(t) for t in S.INGEST_TABLES if t not in _RECORDS_TABLES}
        self.n_coerced = 0     # parse_errors rows written for values coerced to fit their column
        self.records: list[Any] = []
        self.spans: list[Any] = []
        self.span_lines = 0
        self._rschema = None
        self._sschema = None

    def add(self, table: str, row: dict[str, Any]) -> None:
        b = self.bufs[table]
        b.add(row)
        if b.n >= BATCH_ROWS:
            self.flush(table)

    def add_span(self, run: Any) -> int:
        """Keep a HeartbeatRun (one record_spans row); returns the records it stands for."""
        n = len(run.offsets)
        self.spans.append(run)
        self.span_lines += n
        if self.span_lines >= SPAN_BATCH_LINES:
            self.flush_spans()
        return n

    def flush_spans(self) -> None:
        spans = self.spans
        if not spans:
            return
        from forensics.store.db import arrow_schema
        if self._sschema is None:
            self._sschema = arrow_schema("record_spans")
        sch = self._sschema
        lens = [len(sp.offsets) for sp in spans]
        ends = array.array("i", [0])
        for n in lens:
            ends.append(ends[-1] + n)
        values = pa.Array.from_buffers(pa.int64(), ends[-1], [None, pa.py_buffer(b"".join(sp.offsets for sp in spans))])
        cols: dict[str, Any] = {"run_id": pa.array([self.out.run_id] * len(spans), pa.string())}
        for c in _SPAN_COLS:
            cols[c] = pa.array(list(map(attrgetter(c), spans)), sch.field(c).type)
        cols["n_lines"] = pa.array(lens, pa.int64())
        cols["offsets"] = pa.ListArray.from_arrays(pa.Array.from_buffers(pa.int32(), len(ends), [None, pa.py_buffer(ends)]),
                                                   values)
        self.out.batches.setdefault("record_spans", []).append(pa.Table.from_pydict(cols, schema=sch))
        self.out.counts["record_spans"] += len(spans)
        self.out.counts["records"] += self.span_lines
        self.spans = []
        self.span_lines = 0

    def add_record(self, rec: Any) -> None:
        self.records.append(rec)
        if len(self.records) >= BATCH_ROWS:
            self.flush_records()

    def flush_records(self) -> None:
        recs = self.records
        if not recs:
            return
        from forensics.store.db import arrow_schema, table_from_columns
        if self._rschema is None:
            self._rschema = arrow_schema("record_rows")
        cols: dict[str, Any] = {"run_id": [self.out.run_id] * len(recs)}
        for c in _RECORD_COLS:  # map(attrgetter) runs the per-record loop in C
            cols[c] = list(map(attrgetter(c), recs))
        problems: list = []
        tbl = table_from_columns("record_rows", cols, self._rschema, problems)
        self.out.batches.setdefault("record_rows", []).append(tbl)
        self._report(problems)
        self.out.counts["record_rows"] += len(recs)
        self.out.counts["records"] += len(recs)
        self.records = []

    def flush(self, table: str) -> None:
        b = self.bufs[table]
        if b.n:
            self.out.batches.setdefault(table, []).append(b.to_arrow())
            self.out.counts[table] += b.n
            problems = b.problems
            b.clear()
            if table != "parse_errors":  # a parse_errors value is coerced silently (no error about an error)
                self._report(problems)

    def _report(self, problems: list) -> None:
        """One parse_errors row per value that had to be changed to fit its column."""
        for p in problems:
            self.n_coerced += 1
            self.add("parse_errors", {"run_id": self.out.run_id, "source": p.source, "line": p.line,
                                      "reason": "value_coerced", "detail": p.detail()[:2000]})

    def close(self) -> None:
        self.flush_records()
        self.flush_spans()
        for t in self.bufs:
            if t != "parse_errors":
                self.flush(t)
        self.flush("parse_errors")  # last: the others add a row per coerced value


def parse_run(src: ArchiveSource, run: DiscoveredRun, archive_location: str,
              known_runs: dict[str, str | None], fingerprints: tuple[str, str] | None = None,
              pre_hashes: dict[str, str] | None = None, ictx: IngestContext | None = None) -> RunRows:
    """Read one run folder and produce all its ingest rows (no store access: safe in a worker).
    `fingerprints`: the run's (plain, with known runs) resume fingerprints, `pre_hashes` the sha256
    of its files they were computed from (run_fingerprint); when not given they are computed after
    the parse from the hashes it took (`ictx`: the ingest's context), so a first ingest reads each
    file once."""
    from forensics.transcripts import parse_source  # late: the parsers are the heavy import
    from forensics.transcripts.events import Heartbeat, HeartbeatRun, ParseError, Record, SessionEnd, ToolCall, ToolResult

    pre_hashes = pre_hashes or {}
    out = RunRows(run.run_id, fingerprints[0] if fingerprints else "")
    shas: dict[str, str] = {}      # what the parse hashed: the fingerprint taken after it (fingerprints None)
    sink = _Sink(out)
    rid = run.run_id
    files = run.rel_files()
    pre = run.run_path + "/" if run.run_path else ""
    parsed = run.parsed
    problem = parsed.problem if parsed else None
    n_parse_errors = 0

    def perr(source: str | None, line: int | None, reason: str, detail: str = "", excerpt: str = "", offset=None):
        nonlocal n_parse_errors
        n_parse_errors += 1
        sink.add("parse_errors", {"run_id": rid, "source": source, "line": line, "byte_offset": offset,
                                  "reason": reason, "detail": detail[:2000], "excerpt": excerpt[:200]})

    whole: dict[str, bytes] = {}  # files read whole for parsing; the files table hashes these bytes
    unreadable: set[str] = set()   # files whose `unreadable` row is written: not opened (nor said) again
    over: set[str] = set()         # files over their whole-read limit (forensics.limits): said once, not read

    def over_limit(rel: str, lim: LIM.Limit, size: int | None, what: str) -> None:
        if rel not in over:
            over.add(rel)
            perr(rel, None, LIM.OVER_LIMIT, lim.says(size, what))

    def read(rel: str, limit: int | None = None) -> bytes | None:
        if rel in whole:
            return whole[rel] if limit is None else whole[rel][:limit]
        if rel in unreadable or (limit is None and rel in over):
            return None
        cap = None
        if limit is None:   # read whole: never more than the file's limit (a 1 GiB result.json is a bomb)
            lim = LIM.read_limit(rel)
            cap = lim.value()
            e = files.get(rel)
            if e is not None and (e.size or 0) > cap:
                over_limit(rel, lim, e.size, f"{rel} is")
                return None
        try:
            data = src.read(pre + rel, limit if cap is None else cap + 1)
        except (OSError, FileNotFoundError, PermissionError) as e:
            perr(rel, None, "unreadable", str(e))
            unreadable.add(rel)
            return None
        if cap is not None and len(data) > cap:   # the entry's size said less than the file holds
            over_limit(rel, LIM.read_limit(rel), None, f"{rel} holds more than its recorded size;")
            return None
        if limit is None:
            whole[rel] = data
        return data

    # ---- names that are not UTF-8: read under their escaped name, and said (forensics.archive.source)
    for path, raw in sorted(getattr(run, "raw_names", {}).items()):
        inside = path[len(pre):] if pre and path.startswith(pre) else (path if not pre else None)
        what = "file or folder" if inside else "run folder" if path == run.run_path else "folder above the run"
        perr(inside, None, "non_utf8_name",
             f"the {what} name {path} is not UTF-8 (bytes {raw!r}); the run is read with each undecodable byte "
             f"shown as \\xNN", raw.decode("utf-8", "replace"))

    # ---- runner files that are not files (a directory, a fifo named result.json ...): said, not skipped
    for e in run.entries:
        if e.is_dir and e.path in RUN_FILE_NAMES:
            perr(e.path, None, "not_a_file", f"{e.path} is a directory, not a file; not read")

    # ---- result.json
    res, res_err = None, None
    if "result.json" in files:
        data = read("result.json")
        if data is not None:
            res, res_err = read_result(data)
            if res_err:
                perr("result.json", None, "bad_result_json", res_err, _excerpt(data))
    rf = result_fields(res)
    if res and isinstance(res.get("problem"), str) and not problem:
        problem = res["problem"]
    harness = (res.get("harness") if res and isinstance(res.get("harness"), str) else None) or (parsed.harness if parsed else None)
    bench = bench_of_problem(problem)
    parts = PurePosixPath(run.run_path).parts
    if "benchmarks" in parts:
        i = parts.index("benchmarks")
        if i + 1 < len(parts):
            bench = parts[i + 1]

    # ---- logs
    check_summary = bench_summary = None
    for rel in sorted(files):
        kind = L.log_kind(rel)
        if kind is None:
            continue
        data = read(rel)
        if data is None:
            continue
        summary = L.PARSERS[kind](data.decode("utf-8", "replace"), rel)
        for r in summary.rows:
            r["run_id"] = rid
            sink.add("check_log_lines", r)
        if rel == "check.log":
            check_summary = summary
        elif rel == "benchmark.log":
            bench_summary = summary

    # ---- the archive's own records: the auditors' probe logs and the deck's hardware (the verdict's
    # facts, read from these tables; store/archived.py knows the formats).  Read with `read`, so the
    # files table hashes the same bytes; a record that cannot be parsed is a parse_errors row.
    try:
        arows, aerrs = A.archived_rows(rid, files, read)
    except Exception as e:  # noqa: BLE001 - a parser bug costs these records, never the run
        arows, aerrs = {}, [{"source": None, "line": None, "reason": "internal",
                             "detail": f"archived records not parsed: {type(e).__name__}: {e}", "excerpt": ""}]
    for t, rows in arows.items():
        for r in rows:
            sink.add(t, r)
    for e in aerrs:
        perr(e["source"], e["line"], e["reason"], e["detail"], e.get("excerpt") or "")

    # ---- transcripts
    sources = transcript_sources(files)
    tool_src, end_src = _tool_and_end_sources(sources)
    if not sources:
        perr("transcript.jsonl", None, "missing_file", "run has no transcript.jsonl / agent.log / session store")
    elif not any(s in TRANSCRIPT_NAMES for s in sources) and sources[0] in claude_store_sources(files):
        perr("transcript.jsonl", None, "missing_file",
             f"run has no transcript.jsonl / agent.log; the session is read from the session-store copy {sources[0]}")
    tools = _ToolEvents()
    claude_store = set(claude_store_sources(files))
    fallback = set(store_fallback_sources(files))
    held: dict[str, tuple[list, list]] = {}     # fallback source -> (calls, results), used if no calls
    msg_usage: dict[str, dict] = {}             # Claude message id -> usage, over transcript + store copy
    ends: dict[str, SessionEnd] = {}
    hashes: dict[str, tuple[str, int]] = {}
    n_records = 0
    primary_lines = 0
    fmt_by_source: dict[str, tuple[str | None, str | None]] = {}
    max_records = LIM.MAX_RECORDS.value()
    max_tbytes = LIM.MAX_TRANSCRIPT_BYTES.value()
    max_hash = LIM.MAX_HASH_BYTES.value()
    capped: dict[str, str] = {}     # source -> why it was not read to its end (a limit)

    def _cap_source(ev: Any, line: int | None) -> None:
        """The run's records reached MAX_RECORDS at `ev`: the rest of its source is not parsed
        (its session end is unknown: the terminal record, if any, is past the cap)."""
        src_ = ev.source
        capped[src_] = "records"
        perr(src_, line, LIM.OVER_LIMIT, LIM.MAX_RECORDS.says(
            None, f"{src_} read up to line {(line or 1) - 1}: the run's transcript records reached"))
        ev_txt = f"parsing stopped before line {line} (MAX_RECORDS); read as {ev.format}"
        ends[src_] = SessionEnd(src_, end_reason="unknown", format=ev.format, format_evidence=ev_txt,
                                last_line=(line or 1) - 1)
        fmt_by_source[src_] = (ev.format, ev_txt)

    for source in sources:
        if n_records >= max_records:   # the run's records are spent: later sources are not parsed
            capped[source] = "not parsed"
            perr(source, None, LIM.OVER_LIMIT, LIM.MAX_RECORDS.says(
                None, f"{source} not parsed: the run's transcript records reached"))
            continue
        is_tool = source == tool_src
        # the session-store copy adds the calls the transcript lacks (a short or cut-off transcript);
        # a call (and a result) is kept once per tool-use id, whichever source holds it first
        merge = source in claude_store and not is_tool and \
            fmt_by_source.get(tool_src, (None,))[0] in CLAUDE_MERGE_FORMATS
        hold = source in fallback and not is_tool
        if hold:
            held[source] = ([], [])
        try:
            raw = src.open(pre + source)
        except (OSError, FileNotFoundError, PermissionError) as e:
            perr(source, None, "unreadable", str(e))
            unreadable.add(source)
            continue
        hr = HashingReader(raw)
        events = parse_source(hr, source=source, harness=harness, heartbeat_runs=HEARTBEAT_SPANS, max_bytes=max_tbytes)
        try:
            # heartbeats are the bulk of a Claude transcript: they come as runs, stored as spans
            for ev in events:
                tev = type(ev)
                if tev is HeartbeatRun:
                    if n_records >= max_records:   # (a run of heartbeats may pass the cap by RUN_MAX lines)
                        _cap_source(ev, ev.first_line)
                        break
                    n_records += sink.add_span(ev)
                elif tev is Record:
                    if n_records >= max_records:
                        _cap_source(ev, ev.line)
                        break
                    n_records += 1
                    sink.add_record(ev)
                    if ev.usage is not None and claude_store and ev.msg_id and ev.format in ("claude", "claude_session"):
                        msg_usage[ev.msg_id] = ev.usage
                elif tev is ToolCall:
                    if not tools.call(ev, is_tool, merge) and hold:
                        held[source][0].append(ev)
                elif tev is ToolResult:
                    if not tools.result(ev, is_tool, merge) and hold:
                        held[source][1].append(ev)
                elif tev is ParseError:
                    if ev.reason == LIM.OVER_LIMIT:   # the reader stopped at MAX_TRANSCRIPT_BYTES
                        capped[source] = ev.detail
                        ev.detail = LIM.MAX_TRANSCRIPT_BYTES.says(None, f"{source} read up to line {ev.line - 1}:")
                    perr(ev.source, ev.line, ev.reason, ev.detail, ev.excerpt, ev.byte_offset)
                elif tev is Heartbeat:  # HEARTBEAT_SPANS off
                    if n_records >= max_records:
                        _cap_source(ev, ev.line)
                        break
                    n_records += 1
                    sink.add_record(ev)
                elif tev is SessionEnd:
                    ends[source] = ev
                    fmt_by_source[source] = (ev.format, ev.format_evidence)
                    if source == sources[0]:
                        primary_lines = ev.last_line or 0
        finally:
            events.close()
            try:
                sha = hr.finish(max_hash)
                if sha is None:
                    over_limit(source, LIM.MAX_HASH_BYTES, None, f"{source} not hashed: longer than")
                hashes[source] = (sha, hr.n)
            except OSError as e:
                perr(source, None, "unreadable", f"while hashing: {e}")
            try:
                raw.close()
            except OSError:
                pass

    for source in capped:   # a source cut at a limit has no known end (its terminal record is past the cut)
        end = ends.get(source)
        if end is not None and end.terminal_line is None:
            end.end_reason, end.cut_off = "unknown", False
        if source == sources[0] and end is not None and end.last_line:
            primary_lines = end.last_line

    if not tools.calls:
        # no call in the tool source: a Kimi / Gemini session-store copy is the evidence
        for source in sorted(held, key=sources.index):
            if held[source][0]:
                tool_src = source
                tools.adopt(*held[source])
                break
    calls, results = tools.calls, tools.results
    for c in calls:
        sink.add("tool_calls", {
            "run_id": rid, "call_seq": c.call_seq, "source": c.source, "line": c.line, "call_id": c.call_id,
            "tool": c.tool, "kind": c.kind, "command": c.command, "paths": list(c.paths or []), "cwd": c.cwd,
            "args": c.args, "ts": c.ts, "parent_id": c.parent_id, "background": c.background,
            "agent_id": c.agent_id, "parent_call_id": c.parent_call_id})
    for r in results:
        sink.add("tool_results", {
            "run_id": rid, "call_seq": r.call_seq, "call_id": r.call_id, "source": r.source, "line": r.line,
            "exit_code": r.exit_code, "is_error": r.is_error, "status": r.status, "text": r.text,
            "text_len": len(r.text) if r.text is not None else None, "ts": r.ts,
            "running_session": r.running_session})

    # ---- file accesses
    try:
        from forensics.transcripts import access
        ctx = access.RunContext.for_run(run_id=rid, run_name=run.name, problem=problem,
                                        run_ts=parsed.timestamp if parsed else None, calls=calls,
                                        known_runs=known_runs, root=run.root or None,
                                        container=True if "agent_home" in {p.split("/", 1)[0] for p in files} else None)
        for row in access.extract_accesses(ctx, calls, results):
            row["run_id"] = rid
            sink.add("file_accesses", row)
        if ctx.used_known:   # its rows depend on the other runs' names: so does its fingerprint
            out.used_known = True
            if fingerprints:
                out.fingerprint = fingerprints[1]
    except ImportError as e:  # the access resolver is part of the package; its absence is a defect
        perr(None, None, "internal", f"file access resolver unavailable: {e}")
    except Exception as e:  # noqa: BLE001 - the run keeps its records and calls; the gap is said
        perr(None, None, "internal", f"file access resolver failed: {type(e).__name__}: {e}"[:2000])

    # ---- session end
    end = ends.get(end_src) if end_src else None
    if end is not None and msg_usage and end.usage_source in ("dedup_messages", "none") and \
            any(s in ends for s in claude_store):
        # no terminal usage: Claude tokens once per message id over the transcript and the store copy
        acc: dict[str, int] = {}
        for u in msg_usage.values():
            for col, key in (("input", "input_tokens"), ("output", "output_tokens"),
                             ("cache_read", "cache_read_input_tokens"), ("cache_write", "cache_creation_input_tokens")):
                v = u.get(key)
                if isinstance(v, int) and not isinstance(v, bool):
                    acc[col] = acc.get(col, 0) + v
        if acc:
            end.input_tokens, end.output_tokens = acc.get("input"), acc.get("output")
            end.cache_read_tokens, end.cache_creation_tokens = acc.get("cache_read"), acc.get("cache_write")
            end.usage_source = "dedup_messages_sources"
    if end is not None:
        row = {k: getattr(end, k) for k in S.TABLE_BY_NAME["session_end"].column_names() if hasattr(end, k)}
        row["run_id"] = rid
        if row.get("api_error_text") is not None:
            row["api_error_source"] = end.source
        elif "stderr.log" in files:
            err = _stderr_provider_error(read("stderr.log"))
            if err is not None:  # Codex/Kimi: the provider error is only in the CLI's stderr
                row.update(api_error_status=err[0], api_error_text=err[1], api_error_line=err[2],
                           api_error_source="stderr.log", n_api_errors=(row.get("n_api_errors") or 0) + 1)
                if row.get("end_reason") in (None, "unknown", "cut_off", "no_marker_format", "error"):
                    row["end_reason"] = "rate_limited" if err[0] == 429 else "api_error"
        sink.add("session_end", row)
    elif not sources:
        sink.add("session_end", {"run_id": rid, "source": None, "terminal_type": "none", "end_reason": "unknown",
                                 "cut_off": None})

    # ---- solution
    sol_sha = sol_lines = None
    streamed: dict[str, str] = {}   # files hashed while streamed here: the files table reuses the hash
    if "solution.py" in files:
        # streamed: its hash and line count need no copy of it (a 1 GiB solution.py zips to 1 MB)
        got = _stream_count(src, pre + "solution.py", max_hash)
        if isinstance(got, str):
            perr("solution.py", None, "unreadable", got)
            unreadable.add("solution.py")
        elif got is None:
            over_limit("solution.py", LIM.MAX_HASH_BYTES, files["solution.py"].size, "solution.py not hashed:")
        else:
            sol_sha, sol_lines = got
            streamed["solution.py"] = sol_sha

    # ---- files table
    for rel, e in sorted(files.items()):
        sha = None
        cat = categorize(rel)
        if not e.is_symlink and cat in READ_WHOLE_CATEGORIES and rel not in over and rel not in unreadable:
            lim = LIM.read_limit(rel)
            if (e.size or 0) > lim.value():   # an analyzer reading it whole would see no file: said here
                over_limit(rel, lim, e.size, f"{rel} is")
        if rel in hashes:
            sha = hashes[rel][0]
        elif rel in whole:
            sha = hashlib.sha256(whole[rel]).hexdigest()
        elif rel in streamed:
            sha = streamed[rel]
        elif rel in pre_hashes:     # hashed for the fingerprint: not read again
            sha = pre_hashes[rel]
        elif not e.is_symlink and rel not in unreadable and not rel.startswith(HASH_SKIP_PREFIXES) \
                and "/.venv/" not in f"/{rel}":
            if (e.size or 0) > max_hash:   # a sparse 64 GiB sidecar is not read to hash it
                perr(rel, None, LIM.OVER_LIMIT, LIM.MAX_HASH_BYTES.says(e.size, f"{rel} not hashed:"))
            else:
                got = _stream_count(src, pre + rel, max_hash, lines=False)
                if isinstance(got, str):
                    perr(rel, None, "unreadable", got)
                elif got is None:
                    perr(rel, None, LIM.OVER_LIMIT, LIM.MAX_HASH_BYTES.says(None, f"{rel} not hashed: longer than"))
                else:
                    sha = got[0]
        sink.add("files", {"run_id": rid, "path": rel, "size": e.size, "sha256": sha,
                           "category": cat, "is_symlink": e.is_symlink,
                           "link_target": e.link_target, "mtime": e.mtime})
        if sha is not None:
            shas[rel] = sha
    out.bytes_read = sum(n for _, n in hashes.values())
    if not fingerprints:   # the fingerprint from the hashes just taken (a file it did not hash is read)
        ictx = ictx or IngestContext(known=dict(known_runs), key=ingest_key())
        plain, with_known, _ = run_fingerprint(src, run, ictx, known=shas)
        out.fingerprint = with_known if out.used_known else plain

    fmt, fmt_ev = fmt_by_source.get(sources[0], (None, None)) if sources else ("missing", "no transcript file")
    era, era_ev = infer_era(set(files) | {e.path for e in run.entries}, res, parsed.timestamp if parsed else None,
                            any(r for r in (check_summary.rows if check_summary else []) if r["kind"] == "property_seed"))
    container = ("agent_home" in {p.split("/", 1)[0] for p in files}) or bool(res and res.get("agent_container") is True)
    gpu_name = rf.pop("gpu_name")
    if gpu_name is None and "gpu" in files:
        g = read("gpu", 200)
        if g:
            gpu_name = g.decode("utf-8", "replace").strip() or None
    if rf["has_solution"] is None:
        rf["has_solution"] = "solution.py" in files
    primary_src = sources[0] if sources else None
    runs_row = {
        "run_id": rid, "run_name": run.name, "archive": archive_location, "run_path": run.run_path,
        "root": run.root, "bench": bench or "unknown",
        "run_ts": parsed.timestamp if parsed else None, "harness": parsed.harness if parsed else harness,
        "model_slug": parsed.model_slug if parsed else None, "problem": problem,
        "collision_suffix": parsed.collision_suffix if parsed else None,
        "era": era, "era_evidence": era_ev, "transcript_format": fmt, "format_evidence": fmt_ev,
        "tool_source": tool_src if calls or fmt_by_source.get(tool_src, (None,))[0] not in NO_TOOL_FORMATS else None,
        "container_mode": container, "has_result": res is not None and res_err is None,
        "result_json": res, "result_error": res_err, **rf, "gpu_name": gpu_name,
        "solution_sha256": sol_sha, "solution_lines": sol_lines,
        "check_verdict": check_summary.verdict if check_summary else None,
        "check_fail_reason": check_summary.fail_reason if check_summary else None,
        "benchmark_peak_fraction": bench_summary.peak_fraction if bench_summary else None,
        "n_peak_fraction_lines": bench_summary.n_peak_lines if bench_summary else None,
        "transcript_bytes": hashes[primary_src][1] if primary_src in hashes else None,
        "transcript_lines": primary_lines or None,
        "n_records": n_records, "n_tool_calls": len(calls), "n_parse_errors": n_parse_errors,
        "fingerprint": out.fingerprint, "ingested_at": None,
    }
    sink.close()  # values coerced to fit their columns leave parse_errors rows, counted here
    runs_row["n_parse_errors"] = n_parse_errors + sink.n_coerced
    problems: list = []
    tbl = _runs_row(runs_row, problems)
    if problems:  # a runs value (result.json's) that did not fit: its rows, and the count, again
        for p in problems:
            if p.column in rf or p.column in ("result_json", "result_error", "has_result"):
                p.source = "result.json"
        sink._report(problems)
        sink.flush("parse_errors")
        runs_row["n_parse_errors"] = n_parse_errors + sink.n_coerced
        tbl = _runs_row(runs_row)
    out.batches["runs"] = [tbl]
    return out


def _runs_row(row: dict[str, Any], problems: list | None = None) -> pa.Table:
    """A one-row Arrow table of the runs table (values that do not fit are coerced, see RowBuffer)."""
    b = RowBuffer("runs")
    b.add(row)
    t = b.to_arrow()
    if problems is not None:
        problems.extend(b.problems)
    return t


# --------------------------------------------------------------------------- writing
class _Writer:
    """Commits parsed runs.  Small runs are grouped into one transaction (up to GROUP_ROWS stored
    rows, GROUP_BYTES of Arrow data or GROUP_RUNS runs) to amortize DuckDB's per-statement and
    per-commit cost; a group is still all-or-nothing, so a killed ingest leaves each run fully
    written or absent.  The byte bound keeps the memory held for a group bounded too."""

    GROUP_ROWS = int(os.environ.get("FORENSICS_INGEST_GROUP_ROWS", 1_000_000))
    GROUP_RUNS = int(os.environ.get("FORENSICS_INGEST_GROUP_RUNS", 128))
    GROUP_BYTES = int(os.environ.get("FORENSICS_INGEST_GROUP_BYTES", 128 << 20))

    def __init__(self, store: Store, present: set[str] | None = None):
        self.store = store
        self.pending: list[RunRows] = []
        self.rows = 0
        self.nbytes = 0
        # run ids that have a runs row (None: asked of the store per group, a scan of `runs` each)
        self.present = present

    def add(self, rows: RunRows) -> None:
        self.pending.append(rows)
        self.rows += sum(n for t, n in rows.counts.items() if t != "records")  # 'records' counts view rows
        self.nbytes += sum(b.nbytes for bs in rows.batches.values() for b in bs)
        if self.rows >= self.GROUP_ROWS or self.nbytes >= self.GROUP_BYTES or len(self.pending) >= self.GROUP_RUNS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        pending = self.pending
        self.pending = []
        self.rows = 0
        self.nbytes = 0
        try:
            self._commit(pending)
        except duckdb.Error:
            if len(pending) == 1 and set(pending[0].batches) <= {"runs", "parse_errors"}:
                raise
            # one run's rows the store refused must not lose the group: commit run by run, and a
            # run refused on its own keeps its runs row and a parse_errors row saying why
            for r in pending:
                try:
                    self._commit([r])
                except duckdb.Error as e:
                    self._commit([_refused_rows(r, e)])

    def _commit(self, pending: list[RunRows]) -> None:
        now = pa.array([datetime.now(timezone.utc)] * len(pending), type=pa.timestamp("us", tz="UTC"))
        ids = [r.run_id for r in pending]
        per_table: dict[str, list[pa.Table]] = {}
        runs_tbls = []
        for r in pending:
            runs_tbls.append(r.batches["runs"][0])
            for t, batches in r.batches.items():
                if t != "runs":
                    per_table.setdefault(t, []).extend(batches)
        runs_tbl = pa.concat_tables(runs_tbls)
        runs_tbl = runs_tbl.set_column(runs_tbl.schema.get_field_index("ingested_at"), "ingested_at", now)
        # the resume state, beside the rows it describes (one transaction: a killed ingest leaves none stale)
        for col in ("stamp", "output"):
            runs_tbl = runs_tbl.set_column(runs_tbl.schema.get_field_index(col), col,
                                           pa.array([getattr(r, col) for r in pending], pa.string()))
        # A run's rows are only ever committed together with its runs row, so a run absent from
        # `runs` has no rows anywhere: skip the (table-scanning) deletes for new runs.
        if self.present is not None:
            old = [i for i in ids if i in self.present]
        else:
            old = [r[0] for r in self.store.con.execute(
                "SELECT run_id FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids]).fetchall()]
        with self.store.transaction():
            if old:
                for t in S.INGEST_TABLES:
                    self.store.con.execute(f"DELETE FROM {t} WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [old])
            for t, batches in per_table.items():
                self.store.insert_arrow(t, pa.concat_tables(batches) if len(batches) > 1 else batches[0])
            self.store.insert_arrow("runs", runs_tbl)  # last: a runs row marks its run complete
        if self.present is not None:
            self.present.update(ids)


def _refused_rows(rows: RunRows, err: Exception) -> RunRows:
    """A run whose rows the store refused: its runs row and one parse_errors row with the reason."""
    out = RunRows(rows.run_id, "error:" + rows.fingerprint)
    b = RowBuffer("parse_errors")
    b.add({"run_id": rows.run_id, "reason": "internal", "detail": f"store refused the run's rows: {type(err).__name__}: {err}"[:2000]})
    out.batches["parse_errors"] = [b.to_arrow()]
    runs = rows.batches["runs"][0]
    runs = runs.set_column(runs.schema.get_field_index("fingerprint"), "fingerprint", pa.array([out.fingerprint], pa.string()))
    out.batches["runs"] = [runs]
    out.output = _output_digest(out)
    return out


# --------------------------------------------------------------------------- orchestration
@dataclass
class IngestReport:
    archive: str
    kind: str
    run_ids: list[str] = field(default_factory=list)
    ingested: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    bytes_read: int = 0
    seconds: float = 0.0
    # a tar archive that ends early: {"error", "members_read", "last_member", "run", "run_file"} (_truncation)
    truncated: dict[str, Any] | None = None
    # folders that look like runs but are not taken as runs, with the reason (discover.SKIP_REASONS)
    skipped_folders: list[SkippedFolder] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"archive": self.archive, "kind": self.kind, "runs": len(self.run_ids),
                "ingested": len(self.ingested), "skipped_unchanged": len(self.skipped),
                "removed": len(self.removed), "rows": dict(sorted(self.counts.items())),
                "parse_errors": self.counts.get("parse_errors", 0), "bytes_read": self.bytes_read,
                "seconds": round(self.seconds, 3), "truncated": self.truncated,
                "skipped_folders": skipped_summary(self.skipped_folders)}


def skipped_summary(folders: Sequence[SkippedFolder], examples: int = 3) -> dict[str, Any]:
    """{"count": N, "by_reason": {reason: n}, "examples": {reason: [{"path", "detail"}, ...]}}: the
    folders an ingest did not take as runs (IngestReport.skipped_folders), the first `examples` of
    each reason in path order; the store's `skipped_folders` table has every one."""
    by: Counter = Counter(f.reason for f in folders)
    ex: dict[str, list[dict[str, str]]] = {}
    for f in folders:
        got = ex.setdefault(f.reason, [])
        if len(got) < examples:
            got.append({"path": f.path, "detail": f.detail})
    return {"count": len(folders), "by_reason": dict(by.most_common()), "examples": ex}


def skipped_lines(summary: dict[str, Any] | None, db: str | None = None) -> list[str]:
    """What a skipped-folders summary (skipped_summary) says, for a person: the count, each reason
    with its meaning and examples, and the query that lists them all."""
    if not summary or not summary.get("count"):
        return []
    out = [f"skipped {summary['count']} folder(s) that look like runs but are not taken as runs:"]
    for reason, n in summary["by_reason"].items():
        out.append(f"  {reason} {n}: {SKIP_REASONS.get(reason, reason)}")
        for e in summary["examples"].get(reason, []):
            out.append(f"    e.g. {e['path']} ({e['detail']})")
    q = "forensics query skipped-folders" + (f" --db {db}" if db and db != ":memory:" else "")
    out.append(f"  all of them: {q}")
    return out


def truncation_message(t: dict[str, Any]) -> str:
    """One line for a truncated archive (IngestReport.truncated)."""
    return (f"the archive ends early ({t['error']}) after {t['members_read']} members: runs after the cut are "
            "not in it as read" + (f", and {t['run']}, the run it ends in, may miss files" if t.get("run") else ""))


def _truncation(src: ArchiveSource, runs: Sequence[DiscoveredRun]) -> dict[str, Any] | None:
    """What a truncated archive (a tar whose listing ended in an error: TarSource.truncated) lost:
    the members read, the last one, and the run it belongs to, whose later files are missing and
    whose last file may be cut short."""
    err = getattr(src, "truncated", None)
    if not err:
        return None
    entries = src.entries()
    last = entries[-1].path if entries else None
    run = rel = None
    if last is not None:
        hit = next((r for r in runs if r.run_path == "" or last == r.run_path or last.startswith(r.run_path + "/")),
                   None)
        if hit is not None:
            run, rel = hit.run_id, last[len(hit.run_path):].lstrip("/") or None
    return {"error": err, "members_read": len(entries), "last_member": last, "run": run, "run_file": rel}


def _mark_cut(rows: RunRows, trunc: dict[str, Any]) -> RunRows:
    """The run a truncated archive ends in gets a parse_errors row saying so (reason
    truncated_archive), counted in its runs row: what it lacks is unreadable, not absent."""
    b = RowBuffer("parse_errors")
    b.add({"run_id": rows.run_id, "source": trunc.get("run_file"), "reason": "truncated_archive",
           "detail": f"the archive ends inside this run ({trunc['error']}): files after "
                     f"{trunc.get('run_file')} are missing and that one may be cut short"})
    rows.batches.setdefault("parse_errors", []).append(b.to_arrow())
    rows.counts["parse_errors"] += 1
    runs = rows.batches.get("runs")
    if runs:
        t = runs[0]
        i = t.schema.get_field_index("n_parse_errors")
        if i >= 0:
            n = [(v or 0) + 1 for v in t.column(i).to_pylist()]
            runs[0] = t.set_column(i, t.schema.field(i), pa.array(n, t.schema.field(i).type))
    return rows


def _output_digest(rows: RunRows) -> str:
    from forensics.analyze.registry import arrow_digest
    return arrow_digest(rows.batches)


def _error_rows(run: DiscoveredRun, location: str, err: str) -> RunRows:
    """A run whose parse crashed still gets a runs row and a parse_errors row (never lost)."""
    rows = RunRows(run.run_id, "error:" + _fingerprint(run))
    b = RowBuffer("parse_errors")
    b.add({"run_id": run.run_id, "reason": "internal", "detail": err[:2000]})
    rows.batches["parse_errors"] = [b.to_arrow()]
    rows.counts["parse_errors"] = 1
    rows.batches["runs"] = [_runs_row({"run_id": run.run_id, "run_name": run.name, "archive": location,
                                            "run_path": run.run_path, "root": run.root, "n_parse_errors": 1,
                                            "fingerprint": rows.fingerprint})]
    rows.output = _output_digest(rows)
    return rows


def failed_rows(run: Any, reason: str) -> Any:
    """The rows of a run whose parse failed: the run is still recorded, with the reason."""
    rows = RunRows(run.run_id, _fingerprint(run))
    rows.error = reason
    return rows


def parse_one(src: Any, run: Any, location: str, known: "IngestContext | dict[str, str | None]") -> Any:
    """Fingerprint the run and parse it unless unchanged (`IngestContext`; a plain dict of known
    runs parses it whatever); never raises: a crash becomes RunRows.error (the run is still recorded)."""
    ctx = known if isinstance(known, IngestContext) else IngestContext(known=dict(known), force=True)
    try:
        with LIM.using(ctx.limits):
            if not ctx.key:
                ctx = IngestContext(ctx.known, ctx.previous, ctx.force, ingest_key(), ctx.limits)
            prev = ctx.previous.get(run.run_id)
            if ctx.force or prev is None:
                # nothing to compare with: parsed at once, fingerprinted from the hashes the parse took
                rows = parse_run(src, run, location, ctx.known, ictx=ctx)
            else:
                plain, with_known, hashes = run_fingerprint(src, run, ctx)
                if prev in (plain, with_known):
                    return RunRows(run.run_id, prev, unchanged=True, used_known=prev == with_known)
                rows = parse_run(src, run, location, ctx.known, (plain, with_known), hashes)
            rows.output = _output_digest(rows)
            return rows
    except Exception as e:  # noqa: BLE001 - one bad run must not stop the ingest
        return failed_rows(run, f"{type(e).__name__}: {e}")


_W: dict[str, Any] = {}


def _worker_init(location: str, base: "IngestContext | None" = None) -> None:
    from forensics.archive.source import open_source
    _W["src"] = open_source(location)
    _W["ctx"] = base


def _worker_parse(args) -> tuple[RunRows, float, dict[str, Any]]:
    run, location, known, fault = args
    maybe_fault(fault, "ingest", [run.run_id])
    if isinstance(known, tuple):    # ("prev", fingerprint or None): the worker's context, this run's stored fingerprint
        base = _W["ctx"]
        known = base.with_previous(run.run_id, known[1])
    t0 = time.perf_counter()
    rows = parse_one(_W["src"], run, location, known)
    return rows, time.perf_counter() - t0, here()


def parse_local(src: Any, location: str, runs: Sequence[DiscoveredRun], known: Any, jobs: int = 1,
                fault: dict | None = None, lost: Callable[[DiscoveredRun, str], None] | None = None
                ) -> Iterator[tuple[RunRows, float, dict[str, Any]]]:
    """(rows, seconds, where it ran) per run, in the runs' order: here when jobs is 1, else in `jobs`
    worker processes (forensics.pool), each opening the archive itself.  A run whose worker died
    even alone is recorded with the reason (and `lost(run, reason)` told), never dropped."""
    if jobs <= 1 or len(runs) <= 1:
        me = here()
        for r in runs:
            t0 = time.perf_counter()
            rows = parse_one(src, r, location, known)
            yield rows, time.perf_counter() - t0, me
        return

    def on_lost(args, reason):
        reason = f"not parsed: {reason}"
        if lost is not None:
            lost(args[0], reason)
        return failed_rows(args[0], reason), 0.0, {}
    # in order: a tar archive's members are read forwards.  The other runs' names go to each worker
    # once (its initializer), a task carries its run and that run's stored fingerprint only: handing
    # every task the whole context pickled the archive's names once per run (quadratic in runs)
    if isinstance(known, IngestContext):
        base = known.for_run("")
        base.known_digest()
        tasks = ((r, location, ("prev", known.previous.get(r.run_id)), fault) for r in runs)
        init: tuple = (location, base)
    else:
        tasks = ((r, location, known, fault) for r in runs)
        init = (location,)
    yield from pmap(_worker_parse, tasks, jobs, initializer=_worker_init, initargs=init, lost=on_lost)


def ingest_archive(store: Store, archive: str | os.PathLike, jobs: int = 1, progress: bool = False,
                   force: bool = False, engine: Any = None, code: str | None = None) -> IngestReport:
    """Parse the archive's new or changed runs (in `engine`'s workers: forensics.engine; default
    ``jobs`` local processes) and commit them here, the store's one writer.  `force`: every run,
    changed or not.  `code`: the ingest's code digest when the caller has it (registry.code_digests).

    Which runs changed: a run whose listing stamp (`listing_stamps`) equals the stored one is
    unchanged without reading it; any other goes to a worker, which hashes its files and parses it
    only when that fingerprint (`run_fingerprint`: contents, not mtimes) differs from the stored one."""
    t0 = time.perf_counter()
    path = Path(archive)
    src = open_source(path)
    location = src.location
    single = path.name
    for suf in (".tar.gz", ".tgz", ".tar", ".zip"):
        if single.endswith(suf):
            single = single[: -len(suf)]
    skipped_folders: list[SkippedFolder] = []
    runs = discover_runs(src, single_name=single, skipped=skipped_folders)
    rep = IngestReport(location, src.kind, [r.run_id for r in runs], skipped_folders=skipped_folders)
    rep.truncated = _truncation(src, runs)
    cut_run = (rep.truncated or {}).get("run")

    stored = {r[0]: (r[1], r[2]) for r in store.con.execute(
        "select run_id, fingerprint, stamp from runs where archive = ?", [location]).fetchall()}
    existing = {k: v[0] for k, v in stored.items()}
    gone = sorted(set(existing) - set(rep.run_ids))
    if gone:
        with store.transaction():   # one statement per table, not one per run and table (each scans it)
            for t in S.INGEST_TABLES:
                store.con.execute(f"DELETE FROM {t} WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [gone])
        rep.removed = gone

    everyone = store.con.execute("select run_id, run_name, problem from runs").fetchall()
    present = {r[0] for r in everyone}
    known: dict[str, str | None] = {r[1]: r[2] for r in everyone}
    del everyone
    known.update({r.name: (r.parsed.problem if r.parsed else None) for r in runs})
    ctx = IngestContext(known=known, previous={k: v for k, v in existing.items() if v}, force=force,
                        key=ingest_key(code), limits={lim.env: lim.value() for lim in LIM.LIMITS})
    # a run whose listing stamp is the stored one is unchanged (nothing of it read); every other run
    # goes to a worker, which hashes its files and parses it only if its fingerprint differs
    todo = []
    stamps: dict[str, tuple[str, str] | None] = {}
    for r in runs:
        st = stamps[r.run_id] = listing_stamps(src, r, ctx)
        fp, was = stored.get(r.run_id, (None, None))
        if not force and st is not None and was is not None and fp and not fp.startswith("error:") and was in st:
            rep.skipped.append(r.run_id)
        else:
            todo.append(r)
    restamp: list[tuple[str, str]] = []
    # stream tar members forward: process runs in archive order
    if hasattr(src, "member_offset"):
        todo.sort(key=lambda r: min((src.member_offset(f"{r.run_path}/{e.path}") for e in r.entries if not e.is_dir), default=0))
    else:
        src.release_listing()    # each run holds its own entries now; the whole listing is not read again

    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), unit="run", desc="ingest", file=sys.stderr, leave=False)

    writer = _Writer(store, present - set(gone))

    def commit(rows: RunRows, run: DiscoveredRun) -> None:
        st = stamps.get(rows.run_id)
        stamp = None if st is None else st[1] if rows.used_known else st[0]
        if rows.unchanged:
            rep.skipped.append(rows.run_id)
            if stamp is not None and stored.get(rows.run_id, (None, None))[1] != stamp:
                restamp.append((stamp, rows.run_id))     # its content was hashed: its stamp vouches for it now
            if bar:
                bar.update(1)
            return
        if rows.error:
            rows = _error_rows(run, location, rows.error)
        else:
            rows.stamp = stamp
        if rows.run_id == cut_run:
            rows = _mark_cut(rows, rep.truncated)
            rows.stamp = None           # the archive ends inside it: its listing vouches for nothing
            rows.output = _output_digest(rows)
        writer.add(rows)
        run.entries = []      # (its rows are written or pending: its listing is not read again)
        rep.ingested.append(rows.run_id)
        rep.counts.update(rows.counts)
        rep.bytes_read += rows.bytes_read
        if bar:
            bar.update(1)

    by_id = {r.run_id: r for r in todo}
    # no engine: `jobs` worker processes of this machine (the pipeline hands in forensics.engine's)
    if engine is not None:
        parsed = engine.parse_runs(src, location, todo, ctx)
    else:
        parsed = (rows for rows, _s, _w in parse_local(src, location, todo, ctx, jobs))
    for rows in parsed:
        commit(rows, by_id[rows.run_id])
    writer.flush()
    if restamp:
        store.update_runs("runs", ["stamp"], [(rid, stamp) for stamp, rid in restamp])
    if bar:
        bar.close()

    now = datetime.now(timezone.utc)
    with store.transaction():
        store.con.execute("DELETE FROM archives WHERE archive = ?", [location])
        store.insert_rows("archives", [{"archive": location, "kind": src.kind, "n_runs": len(runs),
                                        "ingested_at": now, "tool_version": __version__}])
        store.con.execute("DELETE FROM skipped_folders WHERE archive = ?", [location])
        if skipped_folders:
            store.insert_rows("skipped_folders", ({"archive": location, "path": f.path, "reason": f.reason,
                                                   "detail": f.detail} for f in skipped_folders))
    rep.seconds = time.perf_counter() - t0
    return rep


def ingest_path(store: Store, path: str | os.PathLike, **kw) -> IngestReport:
    """Ingest any path: an archive tree, a single run folder, or a .tar/.tar.gz/.zip."""
    return ingest_archive(store, path, **kw)


# --------------------------------------------------------------------------- CLI
def _echo_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj, default=str, option=orjson.OPT_INDENT_2).decode())


def no_runs_message(archive: str | os.PathLike, skipped: dict[str, Any] | None = None) -> str:
    """The usage error for a path that holds no run: what an archive looks like, and the folders that
    looked like runs but were skipped (skipped_summary), if any."""
    said = ""
    if skipped and skipped.get("count"):
        parts = []
        for reason, n in skipped["by_reason"].items():
            e = (skipped["examples"].get(reason) or [{}])[0]
            parts.append(f"{n} {reason} (e.g. {e.get('path')}: {e.get('detail')})")
        said = f" {skipped['count']} folder(s) that look like runs were skipped: " + "; ".join(parts) + "."
    return (f"no runs in {archive}.{said} An archive is a folder, or a .tar/.tar.gz/.zip of one, holding run folders "
            "named <YYYYMMDD>_<HHMMSS>_<harness>_<model>_<problem> (e.g. "
            "20260427_135646_claude_claude-opus-4-6_03_paged_attention), usually under outputs/runs/, each with "
            "the files a run writes (result.json, transcript.jsonl, solution.py, meta.log, ...); a single run "
            "folder is an archive of one run.")


@click.command("ingest")
@click.argument("archive", type=click.Path(exists=False))
@click.option("--db", default="audit.duckdb", show_default=True, type=click.Path(dir_okay=False),
              help="DuckDB store to write.")
@click.option("--jobs", "-j", default=1, show_default=True, help="Worker processes for parsing.")
@click.option("--force", is_flag=True, help="Re-ingest runs even when their files are unchanged.")
@click.option("--json", "as_json", is_flag=True, help="Print the ingest report as JSON.")
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr (when it is a terminal).")
def ingest_cmd(archive: str, db: str, jobs: int, force: bool, as_json: bool, progress: bool) -> None:
    """Ingest ARCHIVE (an outputs/runs tree, a run folder, or a .tar/.tar.gz/.zip) into the store.

    Exit codes: 0 ingested; 2 usage or input error: no archive, no run in it, a store that cannot
    be written, or an archive that ends early (a truncated .tar.gz: the runs before the cut are
    ingested and the one it ends in marked, as tar exits 2 after extracting what it could)."""
    from forensics.cliutil import InputError, progress_on
    from forensics.store.queries import open_store, remove_store_files
    if not Path(archive).exists():
        raise InputError(f"archive not found: {archive}")
    new = not Path(db).exists()
    with open_store(db) as store:
        try:
            rep = ingest_archive(store, archive, jobs=jobs, progress=progress_on(progress and not as_json),
                                 force=force)
        except ArchiveError as e:
            from forensics.cliutil import one_line
            if new:
                store.close()
                remove_store_files(db)
            raise InputError(one_line(str(e))) from e
    if not rep.run_ids:
        if new:   # leave nothing behind for a path that was no archive
            remove_store_files(db)
        raise InputError(no_runs_message(archive, skipped_summary(rep.skipped_folders)))
    d = rep.to_dict()
    if as_json:
        _echo_json(d)
    else:
        click.echo(f"{d['archive']} ({d['kind']}): {d['runs']} runs, {d['ingested']} ingested, "
                   f"{d['skipped_unchanged']} unchanged, {d['removed']} removed in {d['seconds']} s")
        rows = d["rows"]
        click.echo("rows: " + ", ".join(f"{k}={v}" for k, v in rows.items() if k != "runs"))
        click.echo(f"parse errors: {d['parse_errors']}" + (f"  (see: forensics query parse-errors --db {db})"
                                                           if d["parse_errors"] else ""))
        for line in skipped_lines(d["skipped_folders"], db):
            click.echo(line)
    if rep.truncated:
        raise InputError(truncation_message(rep.truncated))
