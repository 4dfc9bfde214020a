"""Factory Droid stream-json (spec §5.9): system init, message, error; and, defensively, the
tool_call / tool_result / completion events the CLI may emit (§13.6: field names unconfirmed, so
several spellings are read).  No terminal marker for session_complete; a ``completion`` record
is still reported as terminal_type 'completion'."""

from __future__ import annotations

from .base import Parser, add_usage, dumps_text, text_of, ts_epoch
from .events import Record, ToolResult

_TYPES = frozenset(("system", "message", "error", "tool_call", "tool_result", "completion", "reasoning"))


def _first(o, *keys):
    for k in keys:
        v = o.get(k)
        if v is not None:
            return v
    return None


class DroidParser(Parser):
    fmt = "droid"
    has_marker = False

    def __init__(self, source, harness=None):
        super().__init__(source, harness)
        self.cusage = None

    def handle(self, o, ln, off, nb):
        t = o.get("type")
        if t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        ts = ts_epoch(o.get("timestamp")) if o.get("timestamp") is not None else None
        self.see_ts(ts)
        sid = o.get("session_id")
        if isinstance(sid, str):
            self.sessions.add(sid)
        src, fmt = self.source, self.fmt
        if t == "message":
            role = o.get("role")
            role = role if isinstance(role, str) else None
            text = o.get("text")
            if not isinstance(text, str):
                text = text_of(o.get("content"))
            mid = o.get("id")
            if role == "assistant":
                self.n_assistant += 1
                self.last_activity = ln
            return Record(src, ln, off, nb, fmt, t, None, role, mid if isinstance(mid, str) else None, ts, text)
        if t == "tool_call":
            name = _first(o, "toolName", "tool_name", "name", "toolId")
            args = _first(o, "parameters", "input", "args", "arguments")
            cid = _first(o, "id", "toolCallId", "tool_call_id", "callId", "call_id")
            call = self.call(ln, cid, name, args, ts)
            return [Record(src, ln, off, nb, fmt, t, None, "assistant", None, ts, None, 1), call]
        if t == "tool_result":
            cid = _first(o, "id", "toolCallId", "tool_call_id", "callId", "call_id")
            cid = cid if isinstance(cid, str) or cid is None else str(cid)
            val = _first(o, "value", "result", "output", "content")
            text = val if isinstance(val, str) else (text_of(val) if isinstance(val, list) else dumps_text(val))
            ie = _first(o, "isError", "is_error", "error")
            is_err = ie if isinstance(ie, bool) else (True if isinstance(ie, str) and ie else None)
            ec = _first(o, "exitCode", "exit_code")
            ec = ec if isinstance(ec, int) and not isinstance(ec, bool) else None
            return [Record(src, ln, off, nb, fmt, t, None, "tool", None, ts, None, 0, 1),
                    ToolResult(src, ln, cid, text or "", ec, is_err, None, ts)]
        if t == "error":
            m = _first(o, "message", "error")
            text = m if isinstance(m, str) else dumps_text(m)
            self.api_error(ln, text)
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts, text, 0, 0, None, False, True)
        if t == "completion":
            self.term_line = ln
            self.term_type = "completion"
            self.term_is_error = False
            nt = _first(o, "numTurns", "num_turns")
            if isinstance(nt, int) and not isinstance(nt, bool):
                self.num_turns = nt
            u = o.get("usage")
            if isinstance(u, dict):
                self.cusage = u
            ft = _first(o, "finalText", "result", "text")
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts, ft if isinstance(ft, str) else None)
        if t == "system":
            st = o.get("subtype")
            if st == "init":
                cwd = o.get("cwd")
                if isinstance(cwd, str):
                    self.cwd = cwd
            return Record(src, ln, off, nb, fmt, t, st if isinstance(st, str) else None, "system", None, ts)
        if t in _TYPES:
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts, text_of(o.get("text")))
        return self.unknown(o, t, ln, off, nb)

    def finish(self, se, truncated):
        u = self.cusage
        if u is not None:
            self.usage = add_usage(None, input=_first(u, "inputTokens", "input_tokens"),
                                   output=_first(u, "outputTokens", "output_tokens"),
                                   cache_read=_first(u, "cacheReadTokens", "cache_read_input_tokens"),
                                   cache_write=_first(u, "cacheWriteTokens", "cache_creation_input_tokens"))
            self.usage_source = "terminal_record"
        super().finish(se, truncated)
