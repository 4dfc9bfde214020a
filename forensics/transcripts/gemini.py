"""Gemini CLI stream-json (spec §5.6): init, message (delta chunks), tool_use{tool_name, tool_id,
parameters}, tool_result{tool_id, status, output, error}, error, result{status, stats}
(terminal marker; usage from stats.input_tokens/output_tokens/cached)."""

from __future__ import annotations

from .base import Parser, add_usage, dumps_text, text_of, ts_iso
from .events import Record, ToolResult

_TYPES = frozenset(("init", "message", "tool_use", "tool_result", "error", "result", "thought"))


class GeminiParser(Parser):
    fmt = "gemini"
    has_marker = True

    def __init__(self, source, harness=None):
        super().__init__(source, harness)
        self.stats = None

    def handle(self, o, ln, off, nb):
        t = o.get("type")
        if t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        ts = ts_iso(o.get("timestamp")) if o.get("timestamp") is not None else None
        self.see_ts(ts)
        src, fmt = self.source, self.fmt
        if t == "message":
            role = o.get("role")
            role = role if isinstance(role, str) else None
            text = text_of(o.get("content"))
            if role == "assistant":
                if not o.get("delta") or self.last_activity != ln - 1:
                    self.n_assistant += 1
                self.last_activity = ln
            return Record(src, ln, off, nb, fmt, t, "delta" if o.get("delta") else None, role, None, ts, text)
        if t == "tool_use":
            call = self.call(ln, o.get("tool_id"), o.get("tool_name"), o.get("parameters"), ts)
            return [Record(src, ln, off, nb, fmt, t, None, "assistant", None, ts, None, 1), call]
        if t == "tool_result":
            status = o.get("status")
            status = status if isinstance(status, str) else None
            is_err = None if status is None else status != "success"
            out = o.get("output")
            if out is None and is_err:
                out = o.get("error")
                if isinstance(out, dict):
                    out = out.get("message") or dumps_text(out)
            cid = o.get("tool_id")
            cid = cid if isinstance(cid, str) or cid is None else str(cid)
            return [Record(src, ln, off, nb, fmt, t, status, "tool", None, ts, None, 0, 1),
                    ToolResult(src, ln, cid, dumps_text(out), None, is_err, status, ts)]
        if t == "init":
            sid = o.get("session_id")
            if isinstance(sid, str):
                self.sessions.add(sid)
            cwd = o.get("cwd")
            if isinstance(cwd, str):
                self.cwd = cwd
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts)
        if t == "error":
            m = o.get("message")
            if m is None:
                m = o.get("error")
            if isinstance(m, dict):
                m = m.get("message") or dumps_text(m)
            text = m if isinstance(m, str) else dumps_text(o)
            self.api_error(ln, text)
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts, text, 0, 0, None, False, True)
        if t == "result":
            self.term_line = ln
            self.term_type = "result"
            status = o.get("status")
            self.term_subtype = status if isinstance(status, str) else None
            self.term_is_error = status is not None and status != "success"
            st = o.get("stats")
            if isinstance(st, dict):
                self.stats = st
            err = o.get("error")
            if self.term_is_error and err is not None:
                self.api_error(ln, err.get("message") if isinstance(err, dict) else dumps_text(err))
            return Record(src, ln, off, nb, fmt, t, self.term_subtype, None, None, ts)
        if t in _TYPES:
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts, text_of(o.get("content")))
        return self.unknown(o, t, ln, off, nb)

    def finish(self, se, truncated):
        st = self.stats
        if st is not None:
            self.usage = add_usage(None, input=st.get("input_tokens"), output=st.get("output_tokens"),
                                   cache_read=st.get("cached"))
            self.usage_source = "terminal_record"
        super().finish(se, truncated)
