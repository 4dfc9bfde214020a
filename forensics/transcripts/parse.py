"""``parse_source``: the streaming parse loop shared by every format.

Order of work for one source:

1. open the stream (gzip by magic bytes), read the first batches and detect the format from
   content plus the harness hint (``sniff.detect_format``);
2. run every line through the format parser: the common case is one ``orjson.loads`` and one
   dict lookup per line, no regex, no decoding to ``str``; all failure handling (blank lines,
   banner, invalid UTF-8, invalid/truncated JSON, non-object JSON) is off the hot path, in
   ``_slow``;
3. yield exactly one ``SessionEnd`` last.

Nothing raises out of ``parse_source``: an unexpected internal error becomes a ParseError
``internal_error`` followed by the SessionEnd.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import chain
from typing import IO, Iterator

import orjson

from . import reader, structural
from .base import Parser, text_of
from .claude import ClaudeParser
from .codex import CodexExecParser, CodexParser, CodexTextParser
from .cursor import CursorParser
from .droid import DroidParser
from .events import Heartbeat, HeartbeatRun, ParseError, Record, SessionEnd
from .gemini import GeminiChatParser, GeminiParser
from .grok import GrokChatParser, GrokStreamParser
from .kimi import KimiParser, KimiWireParser
from .opencode import OpenCodeParser
from .sniff import (DOCUMENT_FORMATS, FORMATS, RUNNER_LINE, SNIFF_OBJECTS, detect_format, document_head, expected_format,
                    mostly_objects)

Event = object

SNIFF_LINES = 400      # non-blank lines looked at for detection
SNIFF_JSON = SNIFF_OBJECTS   # JSON-looking lines looked at for detection
DOC_MAX = 256 << 20    # bytes of a one-document format (Gemini chat recording) decoded at most
SNIFF_BATCHES = 128     # read batches held for detection (<= 8 MiB)
RUN_MAX = 1 << 16       # heartbeat lines held in one HeartbeatRun at most (checked per read batch)


class GenericParser(Parser):
    """Formats we cannot interpret (hermes, pi, forced 'unknown'): one Record per line with its
    type/role and any text, plus the tool calls and results found in the model APIs' own shapes
    (`structural.recover`: cited at their line; a one-document file at the line of the call's id);
    end_reason 'unknown'.  Nothing says the recovered calls are all of them: the timeline's
    `transcript-format-unknown` finding stays (with their count)."""

    fmt = "unknown"

    def handle(self, o, ln, off, nb):
        t = o.get("type", o.get("role"))
        t = t if isinstance(t, str) else None
        role = o.get("role")
        if role.__class__ is not str:
            role = None
        cwd = o.get("cwd")
        if cwd.__class__ is str and cwd.startswith("/"):
            self.cwd = cwd       # a session header's working directory: relative paths of later calls
        rec = Record(self.source, ln, off, nb, self.fmt, t, None, role if isinstance(role, str) else None,
                     None, None, text_of(o.get("content")) or text_of(o.get("text")))
        found = structural.recover(o)
        if not found:
            return rec
        return [rec, *self.recovered(rec, found, lambda _cid: ln)]

    def handle_document(self, doc, data: bytes) -> list:
        keys = ", ".join(list(doc)[:8]) if isinstance(doc, dict) else type(doc).__name__
        rec = Record(self.source, 1, 0, len(data), self.fmt, "document", None, None, None, None, f"keys: {keys}")
        loc = _IdLocator(data)
        return [rec, *self.recovered(rec, structural.recover(doc), loc.line_of)]

    def finish(self, se, truncated):
        super().finish(se, truncated)
        se.end_reason = "unknown" if not se.n_api_errors else se.end_reason


class _IdLocator:
    """The line of a call's id in a one-document file, scanning forward (calls come in order);
    the line of the last one found where an id is missing or not found."""

    def __init__(self, data: bytes):
        self.data, self.pos, self.line = data, 0, 1

    def line_of(self, ident) -> int:
        if isinstance(ident, (str, int)) and not isinstance(ident, bool) and str(ident):
            i = self.data.find(orjson.dumps(str(ident)) if isinstance(ident, str) else str(ident).encode(), self.pos)
            if i >= 0:
                self.line += self.data.count(b"\n", self.pos, i)
                self.pos = i
        return self.line


def make_parser(fmt: str, source: str, harness: str | None) -> Parser:
    if fmt == "claude":
        return ClaudeParser(source, harness)
    if fmt == "claude_session":
        return ClaudeParser(source, harness, session_form=True)
    cls = {"codex": CodexParser, "codex_text": CodexTextParser, "codex_exec": CodexExecParser,
           "opencode": OpenCodeParser, "cursor": CursorParser, "gemini": GeminiParser,
           "gemini_chat": GeminiChatParser, "kimi": KimiParser, "kimi_wire": KimiWireParser,
           "droid": DroidParser, "grok_stream": GrokStreamParser, "grok_chat": GrokChatParser}.get(fmt, GenericParser)
    return cls(source, harness)


def parse_source(stream: IO[bytes] | bytes, source: str = "transcript.jsonl", harness: str | None = None,
                 fmt: str | None = None, heartbeat_runs: bool = False, max_bytes: int | None = None) -> Iterator[Event]:
    """Parse one transcript source into normalized events (see ``forensics.transcripts``).

    With ``heartbeat_runs`` consecutive heartbeat lines of one subtype come as one
    `HeartbeatRun` (yielded before the next event of the source, at most RUN_MAX lines each)
    instead of one `Heartbeat` per line; everything else is the same.  With ``max_bytes`` the
    source is read up to that many decompressed bytes (forensics.limits.MAX_TRANSCRIPT_BYTES): past
    it, a ParseError ``over_limit`` and the SessionEnd (whose end is then unknown)."""
    st = _State()
    try:
        ctx = _open(stream, source, harness, fmt, max_bytes)
        if ctx.__class__ is list:           # the stream could not even be opened
            st.ended = True
            yield from ctx
            return
        it, parser, fmt, evidence, doc, bom = ctx
        if bom:  # offsets stay offsets into the file: line 1 starts after the mark
            st.off = bom
            yield ParseError(source, 1, "utf8_bom", f"UTF-8 byte order mark ({bom} bytes) at the start of the "
                             "file; skipped", "", 0)
        if fmt == "unknown" and not evidence.startswith("format given"):
            # never a misleading format: say why nothing known matched (the records are still kept)
            yield ParseError(source, None, "unknown_format", evidence[:2000])
        if fmt == "codex_text" or fmt == "empty":
            yield from _text_loop(it, parser, source, st)
        elif doc:
            yield from _doc_loop(it, parser, source, st)
        else:
            yield from _json_loop(it, parser, source, st, heartbeat_runs)
        se = _session_end(parser, fmt, evidence, source, harness, st)
        if se.__class__ is ParseError:
            yield se
            se = _empty_end(parser, fmt, evidence, source, st)
        st.ended = True
        yield se
    except Exception as e:  # noqa: BLE001 - bad evidence must never stop the ingest
        yield ParseError(source, st.ln or None, "internal_error", f"{type(e).__name__}: {e}"[:500])
        if not st.ended:
            yield SessionEnd(source, end_reason="unknown", format=fmt or "unknown",
                             format_evidence=f"parser failed: {type(e).__name__}", last_line=st.ln or None)


def _open(stream, source: str, harness: str | None, fmt: str | None, max_bytes: int | None = None):
    """Open the stream, read the detection sample, choose the format and build its parser.

    Returns ``(batches, parser, fmt, evidence)``, or a list of final events if unreadable."""
    try:
        src = reader.Source(stream, max_bytes, "MAX_TRANSCRIPT_BYTES")
    except Exception as e:  # noqa: BLE001
        return [ParseError(source, None, "unreadable", f"{type(e).__name__}: {e}"[:500]),
                SessionEnd(source, end_reason="unknown", format=fmt or "unknown",
                           format_evidence="stream could not be read")]
    batches = reader.iter_batches(src)
    consumed: list = []
    sample: list[bytes] = []
    n_jsonish = 0
    exhausted = True
    for kind, payload in batches:
        consumed.append((kind, payload))
        if kind == reader.LINES or kind == reader.LAST:
            for raw in payload:
                if raw and not raw.isspace():
                    sample.append(raw)
                    if raw.lstrip()[:1] in (b"{", b"["):
                        n_jsonish += 1
                    if len(sample) >= SNIFF_LINES or n_jsonish >= SNIFF_JSON:
                        break
        elif kind == reader.HUGE:
            n_jsonish += 1
        if len(sample) >= SNIFF_LINES or n_jsonish >= SNIFF_JSON or len(consumed) >= SNIFF_BATCHES:
            exhausted = False
            break
    if fmt:
        evidence = "format given by the caller"
        if fmt not in FORMATS:
            evidence += f" ({fmt!r} is not a known format; read as unknown)"
            fmt = "unknown"
    else:
        fmt, evidence = detect_format(sample, harness, source)
        if fmt == "empty" and not exhausted:
            exp, why = expected_format(harness, source)
            fmt = exp if exp and exp not in ("codex_text", "empty") else "claude"
            evidence = f"no content in the first {len(consumed)} blocks; {why}; reading as {fmt}"
    if src.compressed:
        evidence += "; gzip-compressed"
    if src.bom:
        evidence += "; UTF-8 BOM skipped"
    parser = make_parser(fmt if fmt != "empty" else "unknown", source, harness)
    if fmt == "empty":
        parser.fmt = "empty"
    body = [r for r in sample if not RUNNER_LINE.match(r.lstrip())]
    doc = fmt in DOCUMENT_FORMATS or (fmt == "unknown" and document_head(body[:2]) and not mostly_objects(body))
    return chain(consumed, batches), parser, fmt, evidence, doc, src.bom


def _session_end(parser: Parser, fmt: str, evidence: str, source: str, harness: str | None, st):
    if not st.content:
        return ParseError(source, None, "empty_file",
                          "file is empty" if st.ln == 0 else f"{st.ln} blank lines only")
    se = SessionEnd(source)
    parser.finish(se, st.truncated)
    if fmt == "codex_text":
        exp, _why = expected_format(harness, source)
        if exp in ("claude", "cursor", "gemini", "grok_stream"):
            # a harness whose transcript should end with a terminal record produced no JSON at all
            se.cut_off = True
            se.end_reason = "cut_off"
    se.last_line = st.ln
    se.format = fmt
    se.format_evidence = evidence
    return se


def _empty_end(parser, fmt, evidence, source, st) -> SessionEnd:
    return SessionEnd(source, end_reason="empty", format="empty",
                      format_evidence=evidence if fmt == "empty" else f"{evidence}; no content",
                      last_line=st.ln or None)


NO_OBJECT = object()


class _State:
    __slots__ = ("ln", "off", "started", "content", "truncated", "ended")

    def __init__(self):
        self.ln = 0
        self.off = 0
        self.started = False     # a JSON line has been seen (banner region is over)
        self.content = False     # any non-blank line
        self.truncated = False
        self.ended = False


def _huge(h: reader.Oversize, ln: int, off: int, source: str, fmt: str, st: _State) -> list:
    st.content = True
    head = h.head.lstrip()
    if not h.terminated and head[:1] in (b"{", b"["):
        st.truncated = True
    detail = f"line of {h.nbytes} bytes exceeds {reader.HUGE_LINE} bytes; measured, not decoded"
    if not h.terminated:
        detail += " (no final newline)"
    return [ParseError(source, ln, "huge_line", detail, reader.excerpt(h.head), off),
            Record(source, ln, off, h.nbytes, fmt, "oversize")]


def _slow(raw: bytes, ln: int, off: int, n: int, last: bool, st: _State, source: str, fmt: str):
    """Failure path of the hot loop: (object or NO_OBJECT, events)."""
    if raw.isspace():
        return NO_OBJECT, ()
    st.content = True
    evs: list = []
    try:
        text = raw.decode("utf-8")
        bad_utf8 = False
    except UnicodeDecodeError as e:
        text = raw.decode("utf-8", "replace")
        bad_utf8 = True
        evs.append(ParseError(source, ln, "invalid_utf8", f"byte {e.start}: {e.reason}; decoded with replacement",
                              reader.excerpt(raw), off))
    s = text.lstrip()
    looks_json = s[:1] in ("{", "[")
    err: Exception | None = None
    if looks_json or st.started:
        try:
            o = json.loads(text)   # stdlib: also accepts NaN/Infinity, lone surrogates
        except Exception as e:  # noqa: BLE001
            err = e
        else:
            if _SURROGATE_ESC.search(text):
                o, n_bad = _escape_surrogates(o)
                if n_bad:
                    evs.append(ParseError(source, ln, "lone_surrogate",
                                          f"{n_bad} string(s) hold a lone surrogate escape (valid JSON, not "
                                          "encodable as UTF-8); stored with the escape as text",
                                          reader.excerpt(raw), off))
            return o, evs
    if (not st.started and not looks_json) or (s[:1] == "[" and RUNNER_LINE.match(raw.lstrip())):
        # the container banner, or a runner's log line ("[2026-08-14 14:08:40] iter 1: spawning grok")
        # before or between the agent's streams: text kept, not an error
        evs.append(Record(source, ln, off, n, fmt, "banner", None, None, None, None, text.rstrip("\r")))
        return NO_OBJECT, evs
    if last:
        evs.append(ParseError(source, ln, "truncated_line",
                              f"last line has no newline and is not valid JSON ({type(err).__name__}: {str(err)[:200]})",
                              reader.excerpt(raw), off))
        st.truncated = True
    else:
        evs.append(ParseError(source, ln, "invalid_json",
                              f"{type(err).__name__}: {str(err)[:200]}" if looks_json else
                              "non-JSON text line after the JSON stream started",
                              reader.excerpt(raw), off))
    evs.append(Record(source, ln, off, n, fmt, "invalid", None, None, None, None,
                      None if looks_json else text.rstrip("\r")[:65536]))
    return NO_OBJECT, evs


_SURROGATE_ESC = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _escape_surrogates(o):
    """`o` with every string (and key) holding a lone surrogate written with the escape as text
    ('\\ud83d'), and how many strings changed; valid pairs were already joined by json.loads."""
    n = 0

    def fix(s: str) -> str:
        nonlocal n
        try:
            s.encode("utf-8")
            return s
        except UnicodeEncodeError:
            n += 1
            return s.encode("utf-8", "backslashreplace").decode("utf-8")

    def walk(x, depth=0):
        if x.__class__ is str:
            return fix(x)
        if depth > 500:  # deeper strings are escaped by the store writer (forensics.store.db)
            return x
        if x.__class__ is dict:
            return {fix(k) if k.__class__ is str else k: walk(v, depth + 1) for k, v in x.items()}
        if x.__class__ is list:
            return [walk(v, depth + 1) for v in x]
        return x

    return walk(o), n


def _non_object(o, ln, off, n, source, fmt) -> list:
    return [ParseError(source, ln, "bad_record", f"JSON value is a {type(o).__name__}, not an object",
                       reader.excerpt(orjson.dumps(o) if not isinstance(o, (bytes, str)) else str(o).encode()),
                       off),
            Record(source, ln, off, n, fmt, "non_object")]


def _json_loop(it, parser: Parser, source: str, st: _State, runs: bool = False) -> Iterator[Event]:
    handle = parser.handle
    loads = orjson.loads
    fmt = parser.fmt
    Rec = Record
    HB = Heartbeat
    LINES, LAST, HUGE, BLANK = reader.LINES, reader.LAST, reader.HUGE, reader.BLANK
    fast = parser.FAST_SYSTEM   # Claude heartbeat subtypes: Record(rtype='system') and nothing else
    fast_types = parser.FAST_TYPES
    started = st.started
    prefix = parser.FAST_PREFIX
    plen = len(prefix) if prefix else 0
    fast_b = {x.encode(): x for x in fast} if fast else {}
    prefix_tp = (prefix or b"") + b'task_progress"'
    ln = st.ln
    off = st.off
    # the open heartbeat run (runs=True): subtype, first line, next line, offsets, end offset
    r_sub = None
    r_first = r_next = r_end = 0
    r_offs = None
    r_app = None
    HBR = HeartbeatRun
    for kind, payload in it:
        if r_offs is not None and len(r_offs) >= RUN_MAX:
            yield HBR(source, fmt, "system", r_sub, r_first, r_offs, r_end)
            r_offs = r_sub = None
        if kind == LINES or kind == LAST:
            last = kind == LAST
            for raw in payload:
                ln += 1
                n = len(raw)
                if n:
                    if prefix is not None:
                        # Claude heartbeat line ({"type":"system","subtype":"task_progress",...}):
                        # recognised by its leading bytes and checked structurally (a complete
                        # line, ASCII only, ending in the closing brace) instead of decoded.
                        if raw.startswith(prefix_tp):  # the commonest first: one test
                            t = "task_progress"
                        elif raw.startswith(prefix):
                            j = raw.find(b'"', plen, plen + 40)
                            t = fast_b.get(raw[plen:j])
                        else:
                            t = None
                        if t is not None and not last and raw[-1] == 125 and raw.isascii():
                            if not started:
                                started = st.started = st.content = True
                            if not runs:
                                yield HB(source, ln, off, n, fmt, "system", t)
                            elif ln == r_next and t == r_sub:
                                r_app(off)
                                r_next += 1
                                r_end = off + n
                            else:
                                if r_offs is not None:
                                    yield HBR(source, fmt, "system", r_sub, r_first, r_offs, r_end)
                                r_sub, r_first, r_next, r_end = t, ln, ln + 1, off + n
                                r_offs = array("q", (off,))
                                r_app = r_offs.append
                            off += n + 1
                            continue
                    if r_offs is not None:  # any other line ends the open run (events stay in line order)
                        yield HBR(source, fmt, "system", r_sub, r_first, r_offs, r_end)
                        r_offs = r_sub = None
                    try:
                        o = loads(raw)
                    except Exception:  # noqa: BLE001
                        o, evs = _slow(raw, ln, off, n, last, st, source, fmt)
                        if evs:
                            yield from evs
                        if o is NO_OBJECT:
                            off += n + 1
                            continue
                    if o.__class__ is dict:
                        if not started:
                            started = st.started = st.content = True
                        if fast is not None:
                            t = o.get("type")
                            if t == "system":
                                t = o.get("subtype")
                                if t.__class__ is str and t in fast:
                                    if runs:  # a heartbeat the byte test missed (keys reordered, non-ASCII)
                                        r_sub, r_first, r_next, r_end = t, ln, ln + 1, off + n
                                        r_offs = array("q", (off,))
                                        r_app = r_offs.append
                                    else:
                                        yield HB(source, ln, off, n, fmt, "system", t)
                                    off += n + 1
                                    continue
                            elif t.__class__ is str and t in fast_types:
                                yield Rec(source, ln, off, n, fmt, t)
                                off += n + 1
                                continue
                        try:
                            r = handle(o, ln, off, n)
                        except Exception as e:  # noqa: BLE001 - a record shape we did not foresee
                            r = [Rec(source, ln, off, n, fmt, _rtype(o)),
                                 ParseError(source, ln, "bad_field", f"{type(e).__name__}: {e}"[:300],
                                            reader.excerpt(raw), off)]
                        if r.__class__ is Rec:
                            yield r
                        else:
                            yield from r
                    else:
                        started = st.started = st.content = True
                        yield from _non_object(o, ln, off, n, source, fmt)
                off += n + 1
            if last:
                off -= 1
        elif kind == HUGE:
            if r_offs is not None:
                yield HBR(source, fmt, "system", r_sub, r_first, r_offs, r_end)
                r_offs = r_sub = None
            ln += 1
            started = st.started = True
            yield from _huge(payload, ln, off, source, fmt, st)
            off += payload.nbytes + (1 if payload.terminated else 0)
        elif kind == BLANK:   # blank lines, counted: nothing to parse
            ln += payload
            off += payload
        else:  # FAIL
            if r_offs is not None:
                yield HBR(source, fmt, "system", r_sub, r_first, r_offs, r_end)
                r_offs = r_sub = None
            reason, detail = payload
            st.truncated = reason != reader.OVER_LIMIT   # a cap is not a cut: the session's end is unknown
            yield ParseError(source, ln + 1, reason, detail, "", off)
    if r_offs is not None:
        yield HBR(source, fmt, "system", r_sub, r_first, r_offs, r_end)
    st.ln = ln
    st.off = off


def _doc_loop(it, parser: Parser, source: str, st: _State) -> Iterator[Event]:
    """One-document formats (Gemini chat recording, an unknown multi-line JSON document): the
    whole stream is decoded at once (at most DOC_MAX bytes) and handed to the parser's
    ``handle_document`` (a GenericParser gets one Record of the document)."""
    parts: list[bytes] = []
    size = 0
    ln = 0
    too_big = False
    errs: list = []
    for kind, payload in it:
        if kind == reader.LINES or kind == reader.LAST:
            for raw in payload:
                ln += 1
                if not too_big:
                    parts.append(raw)
                    size += len(raw) + 1
                    if size > DOC_MAX:
                        too_big = True
                        parts = []
            if kind == reader.LAST:
                st.truncated = True   # a document's last line normally ends with a newline; checked below
        elif kind == reader.HUGE:
            ln += 1
            too_big = True
            parts = []
            size += payload.nbytes + 1
        elif kind == reader.BLANK:
            ln += payload
            size += payload
            if not too_big:
                if size > DOC_MAX:
                    too_big = True
                    parts = []
                else:
                    parts.append(b"\n" * (payload - 1))   # joined with newlines: `payload` blank lines
        else:
            reason, detail = payload
            errs.append(ParseError(source, ln + 1, reason, detail, "", size))
            st.truncated = reason != reader.OVER_LIMIT
    st.ln = ln
    st.content = True
    st.started = True
    yield from errs
    if too_big:
        st.truncated = False
        yield ParseError(source, 1, "huge_document", f"document of {size} bytes exceeds {DOC_MAX} bytes; not decoded")
        yield Record(source, 1, 0, size, parser.fmt, "oversize")
        return
    data = b"\n".join(parts)
    st.off = len(data)
    try:
        doc = orjson.loads(data)
        st.truncated = False
    except Exception:  # noqa: BLE001
        try:
            doc = json.loads(data.decode("utf-8", "replace"))
            st.truncated = False
        except Exception as e:  # noqa: BLE001
            end = data.rstrip()[-1:]
            cut = end not in (b"}", b"]")
            st.truncated = cut
            yield ParseError(source, 1, "truncated_document" if cut else "invalid_json",
                             f"the JSON document does not decode ({type(e).__name__}: {str(e)[:200]})"
                             + ("; it ends before its closing brace (cut off)" if cut else ""),
                             reader.excerpt(data), 0)
            yield Record(source, 1, 0, len(data), parser.fmt, "invalid")
            return
    handle_doc = getattr(parser, "handle_document", None)
    if handle_doc is None:
        keys = ", ".join(list(doc)[:8]) if isinstance(doc, dict) else type(doc).__name__
        yield Record(source, 1, 0, len(data), parser.fmt, "document", None, None, None, None, f"keys: {keys}")
        return
    try:
        evs = handle_doc(doc, data)
    except Exception as e:  # noqa: BLE001 - a document shape we did not foresee
        evs = [Record(source, 1, 0, len(data), parser.fmt, "document"),
               ParseError(source, 1, "bad_field", f"{type(e).__name__}: {e}"[:300], reader.excerpt(data), 0)]
    yield from evs


def _rtype(o: dict):
    t = o.get("type", o.get("role"))
    return t if isinstance(t, str) else None


def _text_loop(it, parser, source: str, st: _State) -> Iterator[Event]:
    handle_text = getattr(parser, "handle_text", None)
    fmt = parser.fmt
    ln = 0
    off = st.off
    for kind, payload in it:
        if kind == reader.LINES or kind == reader.LAST:
            for raw in payload:
                ln += 1
                n = len(raw)
                if n and not raw.isspace():
                    st.content = True
                    try:
                        raw.decode("utf-8")
                    except UnicodeDecodeError as e:
                        yield ParseError(source, ln, "invalid_utf8",
                                         f"byte {e.start}: {e.reason}; decoded with replacement",
                                         reader.excerpt(raw), off)
                    if handle_text is not None:
                        yield handle_text(raw, ln, off, n)
                    else:
                        yield Record(source, ln, off, n, fmt, "text", None, None, None, None,
                                     raw.decode("utf-8", "replace").rstrip("\r"))
                off += n + 1
            if kind == reader.LAST:
                off -= 1
        elif kind == reader.HUGE:
            ln += 1
            yield from _huge(payload, ln, off, source, fmt, st)
            st.truncated = False  # plain text has no notion of a truncated JSON line
            off += payload.nbytes + (1 if payload.terminated else 0)
        elif kind == reader.BLANK:
            ln += payload
            off += payload
        else:
            reason, detail = payload
            st.truncated = reason != reader.OVER_LIMIT
            yield ParseError(source, ln + 1, reason, detail, "", off)
    st.ln = ln
    st.off = off
