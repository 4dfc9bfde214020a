"""Grok Build CLI (spec §5.7).

``grok_stream``: token deltas ``thought`` / ``text`` (each a Record whose text is the delta),
``end`` (terminal marker, stopReason), ``error``.  No tool events.

``grok_chat``: ``chat_history.jsonl`` from the session store: system / user / reasoning /
assistant (``tool_calls[{id|call_id, name, arguments|args}]``, arguments a JSON string or an
object; the OpenAI ``function`` wrapper is also read) and tool_result (``tool_call_id|call_id``,
``content``, ``is_error|error``).  No terminal marker.
"""

from __future__ import annotations

from .base import Parser, dumps_text, text_of, ts_iso
from .events import Record, ToolResult


class GrokStreamParser(Parser):
    fmt = "grok_stream"
    has_marker = True

    def handle(self, o, ln, off, nb):
        t = o.get("type")
        if t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        if t == "text" or t == "thought":
            d = o.get("data")
            if t == "text":
                self.last_activity = ln
            return Record(self.source, ln, off, nb, "grok_stream", t, None, "assistant", None, None,
                          d if isinstance(d, str) else None)
        if t == "end":
            self.term_line = ln
            self.term_type = "end"
            sr = o.get("stopReason")
            self.term_stop = sr if isinstance(sr, str) else None
            self.term_is_error = False
            sid = o.get("sessionId")
            if isinstance(sid, str):
                self.sessions.add(sid)
            return Record(self.source, ln, off, nb, self.fmt, t, self.term_stop)
        if t == "error":
            m = o.get("message") if o.get("message") is not None else o.get("data", o.get("error"))
            text = m if isinstance(m, str) else dumps_text(m if m is not None else o)
            self.api_error(ln, text)
            return Record(self.source, ln, off, nb, self.fmt, t, None, None, None, None, text, 0, 0,
                          None, False, True)
        return self.unknown(o, t, ln, off, nb)


_CHAT = frozenset(("system", "user", "reasoning", "assistant", "tool_result", "tool"))


class GrokChatParser(Parser):
    fmt = "grok_chat"
    has_marker = False

    def handle(self, o, ln, off, nb):
        t = o.get("type")
        if t is None:
            t = o.get("role")
        if t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        src, fmt = self.source, self.fmt
        ts = ts_iso(o.get("timestamp")) if o.get("timestamp") is not None else None
        self.see_ts(ts)
        if t == "assistant":
            text = text_of(o.get("content"))
            out = [Record(src, ln, off, nb, fmt, t, None, "assistant", None, ts, text)]
            tcs = o.get("tool_calls")
            if isinstance(tcs, list):
                for tc in tcs:
                    if not isinstance(tc, dict):
                        continue
                    f = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                    cid = tc.get("id") or tc.get("call_id")
                    name = tc.get("name") or f.get("name")
                    args = tc.get("arguments")
                    if args is None:
                        args = tc.get("args")
                    if args is None:
                        args = f.get("arguments")
                    out.append(self.call(ln, cid, name, args, ts))
            out[0].n_tool_calls = len(out) - 1
            self.n_assistant += 1
            self.last_activity = ln
            return out if len(out) > 1 else out[0]
        if t == "tool_result" or t == "tool":
            cid = o.get("tool_call_id") or o.get("call_id")
            cid = cid if isinstance(cid, str) or cid is None else str(cid)
            c = o.get("content")
            text = c if isinstance(c, str) else (text_of(c) or dumps_text(c))
            ie = o.get("is_error")
            if ie is None:
                ie = o.get("error")
            is_err = ie if isinstance(ie, bool) else (True if isinstance(ie, str) and ie else None)
            if isinstance(ie, str) and ie and not text:
                text = ie
            return [Record(src, ln, off, nb, fmt, t, None, "tool", None, ts, None, 0, 1),
                    ToolResult(src, ln, cid, text, None, is_err, "error" if is_err else None, ts)]
        if t == "reasoning":
            text = text_of(o.get("summary"), ("text", "summary_text"))
            return Record(src, ln, off, nb, fmt, t, None, "assistant", None, ts, text)
        if t in _CHAT:
            return Record(src, ln, off, nb, fmt, t, None, t, None, ts, text_of(o.get("content")))
        return self.unknown(o, t, ln, off, nb)
