"""Gemini CLI stream-json (spec §5.6): init, message (delta chunks), tool_use{tool_name, tool_id,
parameters}, tool_result{tool_id, status, output, error}, error, result{status, stats}
(terminal marker; usage from stats.input_tokens/output_tokens/cached).

``gemini_chat``: the CLI's chat recording, one JSON document (see `GeminiChatParser`)."""

from __future__ import annotations

import re
from typing import Any

import orjson

from .base import Parser, add_usage, dumps_text, text_of, ts_iso
from .events import ParseError, Record, ToolResult

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


# ------------------------------------------------------------------------- chat recording
class _Locator:
    """Line numbers and byte offsets of line starts in a JSON document, found by scanning forward
    for the ``"id": "<value>"`` of each message and tool call (the CLI writes them in order)."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0
        self.line = 1

    def find(self, ident: Any) -> tuple[int, int]:
        """(line, byte offset of that line's start) of the next ``"id": "<ident>"``; the current
        position when it is not found."""
        if isinstance(ident, str) and ident:
            m = re.compile(rb'"id"\s*:\s*' + re.escape(orjson.dumps(ident))).search(self.data, self.pos)
            if m:
                self.line += self.data.count(b"\n", self.pos, m.start())
                self.pos = m.start()
        return self.line, self.data.rfind(b"\n", 0, self.pos) + 1


def _response_text(res: Any) -> str:
    """Text of a Gemini tool result: ``[{functionResponse:{response:{output|error|...}}}]``."""
    if isinstance(res, str):
        return res
    parts = res if isinstance(res, list) else [res]
    out: list[str] = []
    for p in parts:
        if not isinstance(p, dict):
            if isinstance(p, str):
                out.append(p)
            continue
        fr = p.get("functionResponse")
        r = fr.get("response") if isinstance(fr, dict) else None
        if isinstance(r, dict):
            for k in ("output", "error", "result", "content"):
                v = r.get(k)
                if isinstance(v, str):
                    out.append(v)
                    break
            else:
                out.append(dumps_text(r))
        elif isinstance(p.get("text"), str):
            out.append(p["text"])
        elif r is not None:
            out.append(dumps_text(r))
    return "\n".join(out)


class GeminiChatParser(Parser):
    """Gemini CLI chat recording (``~/.gemini/tmp/<hash>/chats/session-*.json``): ONE JSON document,
    ``{sessionId, projectHash, startTime, lastUpdated, messages[]}``, not JSON Lines.

    The whole document is decoded (up to `parse.DOC_MAX` bytes) and each message becomes a Record
    (line = the line of its ``"id"``; rtype the message ``type``: user, gemini, info, error,
    warning); a ``gemini`` message's ``toolCalls[{id, name, args, result, status, timestamp}]`` are
    ToolCalls, each with its ToolResult when it has a status or result (``result`` is the list of
    ``functionResponse`` parts; status ``error``/``cancelled`` -> is_error).  Usage: the messages'
    ``tokens{input, output, cached, thoughts, tool, total}`` summed (input, output, cache_read =
    cached, reasoning = thoughts).  ``error`` messages are provider errors.  No terminal marker.
    """

    fmt = "gemini_chat"
    has_marker = False

    def handle(self, o, ln, off, nb):  # pragma: no cover - documents go through handle_document
        return self.handle_document(o, b"")

    def handle_document(self, doc: Any, data: bytes) -> list:
        nbytes = len(data)
        src, fmt = self.source, self.fmt
        if not isinstance(doc, dict):
            return [ParseError(src, 1, "bad_record", f"document is a {type(doc).__name__}, not an object"),
                    Record(src, 1, 0, nbytes, fmt, "non_object")]
        sid = doc.get("sessionId")
        if isinstance(sid, str):
            self.sessions.add(sid)
        st = doc.get("startTime")
        ts0 = ts_iso(st) if st is not None else None
        self.see_ts(ts0)
        loc = _Locator(data)
        msgs = doc.get("messages")
        head_end = data.find(b'"messages"')
        out: list = [Record(src, 1, 0, head_end if head_end > 0 else nbytes, fmt, "session", None, None,
                            sid if isinstance(sid, str) else None, ts0)]
        if not isinstance(msgs, list):
            out.append(ParseError(src, 1, "bad_field", "document has no messages list"))
            return out
        tok = None
        pending: list[Record] = []
        for m in msgs:
            if not isinstance(m, dict):
                continue
            ln, start = loc.find(m.get("id"))
            mt = m.get("type")
            mt = mt if isinstance(mt, str) else None
            ts = ts_iso(m.get("timestamp")) if m.get("timestamp") is not None else None
            self.see_ts(ts)
            content = m.get("content")
            mtext = content if isinstance(content, str) else text_of(content)
            role = "assistant" if mt == "gemini" else ("user" if mt == "user" else None)
            rec = Record(src, ln, start, 0, fmt, mt, None, role, m.get("id") if isinstance(m.get("id"), str) else None,
                         ts, mtext)
            pending.append(rec)
            out.append(rec)
            if mt == "gemini":
                self.n_assistant += 1
                self.last_activity = ln
                t = m.get("tokens")
                if isinstance(t, dict):
                    rec.usage = t
                    tok = add_usage(tok, input=t.get("input"), output=t.get("output"), cache_read=t.get("cached"),
                                    reasoning=t.get("thoughts"))
            elif mt == "error":
                rec.is_api_error = True
                self.api_error(ln, mtext or dumps_text(content))
            tcs = m.get("toolCalls")
            for tc in tcs if isinstance(tcs, list) else ():
                if not isinstance(tc, dict):
                    continue
                cl, _ = loc.find(tc.get("id"))
                tts = ts_iso(tc.get("timestamp")) if tc.get("timestamp") is not None else ts
                self.see_ts(tts)
                call = self.call(cl, tc.get("id"), tc.get("name"), tc.get("args"), tts)
                out.append(call)
                rec.n_tool_calls += 1
                status = tc.get("status")
                status = status if isinstance(status, str) else None
                if status is not None or tc.get("result") is not None:
                    err = None if status is None else status in ("error", "cancelled")
                    out.append(ToolResult(src, cl, call.call_id, _response_text(tc.get("result")), None, err, status, tts))
                    rec.n_tool_results += 1
        # a message record spans from its line's start to the next message's line start
        for a, b in zip(pending, pending[1:] + [None]):
            end = b.byte_offset - 1 if b is not None else nbytes
            a.nbytes = max(0, end - a.byte_offset)
        if tok is not None:
            self.usage = tok
            self.usage_source = "message_tokens"
        return out
