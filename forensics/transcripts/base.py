"""Shared machinery of the per-format parsers: session accumulators, timestamps, provider-error
detection, tool-call construction and the session-end decision (spec §5.11, §3.4)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

import orjson

from . import kinds, structural
from .events import ParseError, Record, SessionEnd, ToolCall, ToolResult
from .values import dumps_text, text_of  # noqa: F401 - the parsers import them from here

UTC = timezone.utc


def ts_iso(v: Any) -> datetime | None:
    """ISO-8601 string (Z or offset; naive taken as UTC) or epoch number -> aware UTC datetime."""
    if isinstance(v, str):
        try:
            d = datetime.fromisoformat(v)
        except ValueError:
            return None
        if d.tzinfo is None:
            return d.replace(tzinfo=UTC)
        return d.astimezone(UTC)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return ts_epoch(v)
    return None


def ts_epoch(v: Any) -> datetime | None:
    """Epoch number; unit guessed from magnitude (s, ms, us)."""
    if isinstance(v, str):
        return ts_iso(v)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    x = float(v)
    if x != x:
        return None
    a = abs(x)
    if a >= 1e17:
        x /= 1e9
    elif a >= 1e14:
        x /= 1e6
    elif a >= 1e11:
        x /= 1e3
    try:
        return datetime.fromtimestamp(x, UTC)
    except (OverflowError, OSError, ValueError):
        return None


_API_ERR = re.compile(r"API Error:?\s*(\d{3})\b")
_LEAD_STATUS = re.compile(r"\A\W{0,3}(\d{3})\b")
_STATUS_KV = re.compile(r"(?:status(?:_?code)?|statusCode|code)\W{1,4}(\d{3})\b", re.I)
_ANY_STATUS = re.compile(r"(?<![\d.])([45]\d\d)(?![\d.])")
_RATE_WORDS = ("rate limit", "rate_limit", "ratelimit", "session limit", "usage limit",
               "resource_exhausted", "too many requests", "quota")


def error_status(text: str | None) -> int | None:
    """HTTP-like status of a provider error text ('API Error: 402 ...', '429 resource_exhausted')."""
    if not text:
        return None
    head = text[:2000]
    m = (_API_ERR.search(head) or _LEAD_STATUS.match(head) or _STATUS_KV.search(head)
         or _ANY_STATUS.search(head[:200]))
    if m:
        s = int(m.group(1))
        if 100 <= s <= 599:
            return s
    return None


def is_rate_limit(text: str | None, status: int | None) -> bool:
    if status == 429:
        return True
    if not text:
        return False
    low = text[:2000].lower()
    return any(w in low for w in _RATE_WORDS)


_KEY_RE_CACHE: dict[str, re.Pattern] = {}
_KNOWN_ARG_KEYS = ("command", "cmd", "path", "file_path", "filePath", "content", "old_string",
                   "new_string", "old", "new", "pattern", "directory", "workdir", "cwd", "url",
                   "query", "description", "timeout")


def _partial_string(s: str, start: int) -> str:
    """Decode a JSON string body starting at s[start] (after the opening quote), stopping at the
    closing quote or the end of a truncated input."""
    out = []
    i = start
    n = len(s)
    while i < n:
        c = s[i]
        if c == '"':
            break
        if c == "\\" and i + 1 < n:
            e = s[i + 1]
            if e == "u" and i + 5 < n:
                try:
                    out.append(chr(int(s[i + 2:i + 6], 16)))
                except ValueError:
                    pass
                i += 6
                continue
            out.append({"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}.get(e, e))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_args(v: Any) -> dict[str, Any]:
    """Tool arguments: a dict as is; a JSON string parsed; a partial JSON string kept under 'raw'
    with best-effort extraction of known string keys; anything else under 'value'."""
    if isinstance(v, dict):
        return v
    if v is None:
        return {}
    if isinstance(v, str):
        s = v.strip()
        if not s:
            return {}
        try:
            o = orjson.loads(s)
        except Exception:  # noqa: BLE001
            o = _MISSING
        if isinstance(o, dict):
            return o
        if o is not _MISSING:
            return {"value": o}
        out: dict[str, Any] = {"raw": v}
        for k in _KNOWN_ARG_KEYS:
            rx = _KEY_RE_CACHE.get(k)
            if rx is None:
                rx = _KEY_RE_CACHE[k] = re.compile(r'"' + re.escape(k) + r'"\s*:\s*"')
            m = rx.search(s)
            if m:
                out[k] = _partial_string(s, m.end())
        return out
    return {"value": v}


_MISSING = object()


def _sid(v: Any) -> str | None:
    """An id field as a string (None stays None; numbers are stringified)."""
    if v is None or isinstance(v, str):
        return v or None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return None


def sid(v: Any) -> str | None:
    return _sid(v)


class Parser:
    """Base class: one instance per source.  Subclasses implement ``handle``."""

    fmt = "unknown"
    has_marker = False          # the format has a terminal record (§5.11)
    terminal_type = "none"
    FAST_SYSTEM: frozenset | None = None   # see parse._json_loop: subtypes of type=system read as bare Records
    FAST_TYPES: frozenset = frozenset()    # types read as bare Records (only when FAST_SYSTEM is set)
    FAST_PREFIX: bytes | None = None       # byte prefix of FAST_SYSTEM lines (recognised undecoded)

    def __init__(self, source: str, harness: str | None = None):
        self.source = source
        self.harness = harness
        self.cwd: str | None = None
        self.first_ts: datetime | None = None
        self.last_ts: datetime | None = None
        # terminal record
        self.term_line: int | None = None
        self.term_type = "none"
        self.term_subtype: str | None = None
        self.term_is_error: bool | None = None
        self.term_stop: str | None = None
        self.term_reason: str | None = None
        self.term_status: int | None = None
        self.num_turns: int | None = None
        # provider errors
        self.n_api = 0
        self.api_text: str | None = None
        self.api_line: int | None = None
        self.api_status: int | None = None
        self.rate_limited = False
        self.last_activity = 0     # line of the last assistant message / tool call
        # usage
        self.usage: dict[str, Any] | None = None
        self.usage_source = "none"
        self.cost: float | None = None
        self.n_assistant = 0
        self.sessions: set[str] = set()
        self.call_tools: dict[str, str] = {}
        self.recovered_results: set[str] = set()   # call ids of results recovered from unknown records
        self.context_tokens: int | None = None

    # ---- helpers used by subclasses -------------------------------------------------
    def see_ts(self, ts: datetime | None) -> None:
        if ts is not None:
            if self.first_ts is None:
                self.first_ts = ts
            self.last_ts = ts

    def api_error(self, line: int, text: str | None, status: int | None = None,
                  rate_limited: bool | None = None) -> None:
        self.n_api += 1
        self.api_text = (text or "")[:2000] or self.api_text
        self.api_line = line
        st = status if status is not None else error_status(text)
        if st is not None:
            self.api_status = st
        rl = rate_limited if rate_limited is not None else is_rate_limit(text, st)
        if rl:
            self.rate_limited = True

    def call(self, line: int, call_id: Any, tool: Any, args: Any, ts: datetime | None = None,
             parent_id: str | None = None, agent_id: str | None = None,
             parent_call_id: str | None = None) -> ToolCall:
        name = tool if isinstance(tool, str) else ("" if tool is None else str(tool))
        a = parse_args(args)
        kind, command, paths, cwd, bg = kinds.normalize(name, a)
        cid = call_id if isinstance(call_id, str) or call_id is None else str(call_id)
        if cid:
            self.call_tools[cid] = name
        self.last_activity = line
        return ToolCall(self.source, line, cid, name, kind, a, command, paths, cwd or self.cwd, ts,
                        parent_id, bg, 0, _sid(agent_id), _sid(parent_call_id))

    def recovered(self, rec: Record, found: list[tuple], line_of, known: bool = False) -> list:
        """Events of the calls and results `structural.recover` found (``("call", id, name, args)``,
        ``("result", id, text, is_error)``), counted on `rec`: calls through `call`, results as
        ToolResult; both cited at ``line_of(id)`` and marked ``recovered``.  known: they come from an
        unknown record of a known format, so a call whose id a record already emitted, and a second
        result of one call id, are echoes and kept once (the ingest keeps a known record's result
        instead of a recovered one)."""
        out: list = []
        for kind, cid, a, b in found:
            if kind == "call":
                key = sid(cid)
                if known and key is not None and key in self.call_tools:
                    continue
                c = self.call(line_of(cid), cid, a, b)
                c.recovered = True
                out.append(c)
                rec.n_tool_calls += 1
            else:
                key = sid(cid)
                if known and key is not None:
                    if key in self.recovered_results:
                        continue
                    self.recovered_results.add(key)
                out.append(ToolResult(self.source, line_of(cid), key, a if isinstance(a, str) else dumps_text(a),
                                      None, b if isinstance(b, bool) else None, recovered=True))
                rec.n_tool_results += 1
        return out

    def unknown(self, o: dict, rtype: Any, line: int, off: int, nb: int, what: str = "type",
                subtype: Any = None) -> list:
        """Record with the type as written + ParseError unknown_record naming it, and the tool
        calls and results the record holds in the model APIs' own shapes (`structural.recover`,
        cited at its line; the ParseError says how many)."""
        rt = rtype if isinstance(rtype, str) else (None if rtype is None else dumps_text(rtype))
        sub = subtype if isinstance(subtype, str) else (None if subtype is None else dumps_text(subtype))
        name = f"{rt}/{sub}" if sub is not None or what != "type" else rt
        rec = Record(self.source, line, off, nb, self.fmt, rt, sub)
        detail = f"unknown {self.fmt} record {what} {name!r}"
        found = structural.recover(o, tags=False)
        events = self.recovered(rec, found, lambda _cid: line, known=True) if found else []
        nc, nr = rec.n_tool_calls, rec.n_tool_results
        if nc or nr:
            said = [f"{n} {w}{'' if n == 1 else 's'}" for n, w in ((nc, "tool call"), (nr, "result")) if n]
            detail += f": {' and '.join(said)} recovered from the model API shapes"
        return [rec, ParseError(self.source, line, "unknown_record", detail, "", off), *events]

    def handle(self, o: dict, line: int, off: int, nb: int):  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- session end ----------------------------------------------------------------
    def finish(self, se: SessionEnd, truncated: bool) -> None:
        """Fill the format-derived SessionEnd fields and decide end_reason."""
        se.terminal_line = self.term_line
        se.terminal_type = self.term_type
        se.subtype = self.term_subtype
        se.is_error = self.term_is_error
        se.stop_reason = self.term_stop
        se.terminal_reason = self.term_reason
        se.api_error_status = self.term_status if self.term_status is not None else self.api_status
        se.api_error_text = self.api_text
        se.api_error_line = self.api_line
        se.n_api_errors = self.n_api
        se.rate_limited = self.rate_limited or se.api_error_status == 429
        se.num_turns = self.num_turns
        se.n_assistant_messages = self.n_assistant
        se.first_ts = self.first_ts
        se.last_ts = self.last_ts
        se.n_sessions = len(self.sessions) or None
        u = self.usage
        if u:
            se.input_tokens = u.get("input")
            se.output_tokens = u.get("output")
            se.cache_read_tokens = u.get("cache_read")
            se.cache_creation_tokens = u.get("cache_write")
            se.reasoning_tokens = u.get("reasoning")
        se.cost_usd = self.cost
        se.usage_source = self.usage_source if u or self.cost is not None or self.context_tokens is not None else "none"
        se.context_tokens = self.context_tokens
        se.truncated_last_line = truncated
        has_term = self.term_line is not None
        se.cut_off = truncated or (self.has_marker and not has_term)
        # an error that came after the agent's last activity ended the session
        err_last = self.n_api > 0 and (self.api_line or 0) >= self.last_activity
        if has_term:
            if self.term_is_error or (self.term_subtype not in (None, "success") and self.term_subtype.startswith("error")):
                if se.rate_limited and (self.term_status in (None, 429)):
                    se.end_reason = "rate_limited"
                elif self.term_status is not None or self.term_reason == "api_error" or err_last:
                    se.end_reason = "api_error"
                else:
                    se.end_reason = "error"
            else:
                se.end_reason = "success"
        elif err_last:
            se.end_reason = "rate_limited" if se.rate_limited else "api_error"
        elif se.cut_off:
            se.end_reason = "cut_off"
        else:
            se.end_reason = "no_marker_format"


def add_usage(acc: dict[str, int] | None, **vals: Any) -> dict[str, int]:
    """Add integer token counts into acc (None values, non-numbers, NaN and infinities ignored)."""
    if acc is None:
        acc = {}
    for k, v in vals.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and (v.__class__ is not float or v - v == 0):
            acc[k] = acc.get(k, 0) + int(v)
    return acc
