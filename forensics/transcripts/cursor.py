"""Cursor Agent stream-json (spec §5.5).

``tool_call`` records come as ``started`` / ``completed`` pairs sharing ``call_id``; the tool is
the wrapper key minus ``ToolCall`` (``shellToolCall`` -> ``shell``).  ``started`` yields the
ToolCall, ``completed`` the ToolResult (``result.success.{content | stdout, stderr, exitCode}``
or ``result.error``); a ``completed`` without a ``started`` yields both.  Terminal marker:
``result`` (usage camelCase inputTokens/outputTokens/cacheReadTokens/cacheWriteTokens).
"""

from __future__ import annotations

from .base import Parser, add_usage, dumps_text, text_of, ts_epoch, ts_iso
from .events import Record, ToolResult

_TYPES = frozenset(("system", "user", "assistant", "tool_call", "result", "thinking", "interaction_query",
                    "connection", "retry", "status"))


def _unwrap(tc):
    """(name, body) of a ``{"<name>ToolCall": {...}}`` wrapper."""
    if not isinstance(tc, dict):
        return "", {}
    for k, v in tc.items():
        if isinstance(k, str) and k.endswith("ToolCall"):
            return k[:-8], v if isinstance(v, dict) else {}
    if "function" in tc and isinstance(tc["function"], dict):  # generic function form
        f = tc["function"]
        return str(f.get("name") or ""), {"args": f.get("arguments")}
    for k, v in tc.items():
        return str(k), v if isinstance(v, dict) else {}
    return "", {}


class CursorParser(Parser):
    fmt = "cursor"
    has_marker = True

    def __init__(self, source, harness=None):
        super().__init__(source, harness)
        self.started: set[str] = set()
        self.term_usage = None

    def handle(self, o, ln, off, nb):
        t = o.get("type")
        if t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        ts = None
        v = o.get("timestamp_ms")
        if v is not None:
            ts = ts_epoch(v)
        elif o.get("timestamp") is not None:
            ts = ts_iso(o.get("timestamp"))
        self.see_ts(ts)
        sid = o.get("session_id")
        if isinstance(sid, str):
            self.sessions.add(sid)
        src, fmt = self.source, self.fmt
        st = o.get("subtype")
        st = st if isinstance(st, str) else None
        if t == "tool_call":
            name, body = _unwrap(o.get("tool_call"))
            cid = o.get("call_id")
            cid = cid if isinstance(cid, str) or cid is None else str(cid)
            out = [Record(src, ln, off, nb, fmt, t, st, "assistant", None, ts)]
            if st != "completed" or cid not in self.started:
                out.append(self.call(ln, cid, name, body.get("args"), ts))
                out[0].n_tool_calls = 1
                if cid:
                    self.started.add(cid)
            if st == "completed":
                out[0].n_tool_results = 1
                out.append(self._result(body.get("result"), cid, ln, ts))
            return out
        if t == "result":
            self.term_line = ln
            self.term_type = "result"
            self.term_subtype = st
            ie = o.get("is_error")
            self.term_is_error = ie if isinstance(ie, bool) else (st is not None and st != "success")
            u = o.get("usage")
            if isinstance(u, dict):
                self.term_usage = u
            r = o.get("result")
            text = r if isinstance(r, str) else None
            if self.term_is_error and text:
                self.api_error(ln, text)
            return Record(src, ln, off, nb, fmt, t, st, None, None, ts, text)
        if t in ("user", "assistant", "thinking"):
            m = o.get("message")
            text = text_of(m.get("content")) if isinstance(m, dict) else None
            if text is None:
                s = o.get("text")
                text = s if isinstance(s, str) else None
            if t == "assistant":
                self.n_assistant += 1
                self.last_activity = ln
            return Record(src, ln, off, nb, fmt, t, st, "assistant" if t == "thinking" else t, None, ts, text)
        if t == "system":
            if st == "init":
                cwd = o.get("cwd")
                if isinstance(cwd, str):
                    self.cwd = cwd
            return Record(src, ln, off, nb, fmt, t, st, "system", None, ts)
        if t == "error":
            m = o.get("message") or o.get("error")
            text = dumps_text(m)
            self.api_error(ln, text)
            return Record(src, ln, off, nb, fmt, t, st, None, None, ts, text, 0, 0, None, False, True)
        if t in _TYPES:
            return Record(src, ln, off, nb, fmt, t, st, None, None, ts)
        return self.unknown(o, t, ln, off, nb)

    def _result(self, r, cid, ln, ts):
        if not isinstance(r, dict):
            return ToolResult(self.source, ln, cid, dumps_text(r), None, None, None, ts)
        if "success" in r:
            s = r.get("success")
            ec = None
            text = ""
            if isinstance(s, dict):
                v = s.get("exitCode")
                if v is None:
                    v = s.get("exit_code")
                ec = v if isinstance(v, int) and not isinstance(v, bool) else None
                c = s.get("content")
                if isinstance(c, str):
                    text = c
                elif "stdout" in s or "stderr" in s:
                    text = "\n".join(x for x in (s.get("stdout"), s.get("stderr")) if isinstance(x, str) and x)
                elif c is not None:
                    text = text_of(c) or dumps_text(c)
                else:
                    text = dumps_text(s)
            else:
                text = dumps_text(s)
            return ToolResult(self.source, ln, cid, text, ec, False, "success", ts)
        if "error" in r:
            e = r.get("error")
            if isinstance(e, dict):
                m = e.get("message") or e.get("error")
                text = m if isinstance(m, str) else dumps_text(e)
                v = e.get("exitCode")
                ec = v if isinstance(v, int) and not isinstance(v, bool) else None
            else:
                text, ec = dumps_text(e), None
            return ToolResult(self.source, ln, cid, text, ec, True, "error", ts)
        key = next(iter(r), None)
        return ToolResult(self.source, ln, cid, dumps_text(r), None, None,
                          key if isinstance(key, str) else None, ts)

    def finish(self, se, truncated):
        u = self.term_usage
        if u is not None:
            self.usage = add_usage(None, input=u.get("inputTokens"), output=u.get("outputTokens"),
                                   cache_read=u.get("cacheReadTokens"), cache_write=u.get("cacheWriteTokens"))
            self.usage_source = "terminal_record"
        super().finish(se, truncated)
