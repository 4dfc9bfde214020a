"""Grok Build CLI (spec §5.7).

``grok_stream``: token deltas ``thought`` / ``text`` (each a Record whose text is the delta),
``end`` (terminal marker, stopReason), ``error``.  Newer CLIs add tools and usage:
``tool_call{toolCallId, title, kind, status, toolName, rawInput}`` is a ToolCall (the ACP
``kind`` - execute, read, edit, delete, move, search - decides the normalized kind when the tool
name does not); ``tool_call_update{toolCallId, status, rawOutput?|content?}`` with a final status
(completed, failed, error, cancelled) is its ToolResult, one per call; ``usage{usage:{input_tokens,
output_tokens, cache_read_input_tokens}}`` is summed; ``available_commands`` / ``plan`` are records.
A runner line before the stream (``[2026-08-14 14:08:40] iter 1: spawning grok``) is a banner
(see parse._slow).

``grok_chat``: ``chat_history.jsonl`` from the session store: system / user / reasoning /
assistant (``tool_calls[{id|call_id, name, arguments|args}]``, arguments a JSON string or an
object; the OpenAI ``function`` wrapper is also read) and tool_result (``tool_call_id|call_id``,
``content``, ``is_error|error``).  Server-side tools are ``backend_tool_call{kind:{tool_type,
action}, id}`` rows: a ToolCall named by ``tool_type`` with ``action`` as arguments.  No terminal
marker.
"""

from __future__ import annotations

from .base import Parser, add_usage, dumps_text, text_of, ts_iso
from .events import Record, ToolResult

# ACP tool kinds (grok streaming-json ``kind``) -> normalized kinds, used when the tool name is unknown
_ACP_KIND = {"execute": "exec", "read": "read", "edit": "edit", "delete": "write", "move": "edit",
             "search": "search"}
_FINAL = frozenset(("completed", "failed", "error", "cancelled", "canceled", "success"))


def _acp_text(o: dict) -> str:
    """Output text of an ACP tool_call / tool_call_update (rawOutput, or content blocks)."""
    ro = o.get("rawOutput")
    if isinstance(ro, str):
        return ro
    if isinstance(ro, dict):
        for k in ("output", "stdout", "content", "result", "text"):
            v = ro.get(k)
            if isinstance(v, str):
                se = ro.get("stderr")
                return v + ("\n" + se if k == "stdout" and isinstance(se, str) and se else "")
        return dumps_text(ro)
    c = o.get("content")
    if isinstance(c, list):
        parts = []
        for b in c:
            if isinstance(b, dict):
                inner = b.get("content")
                t = text_of(inner) if inner is not None else None
                if t is None:
                    t = b.get("text") if isinstance(b.get("text"), str) else None
                if t is None and isinstance(b.get("newText"), str):
                    t = b["newText"]
                if t:
                    parts.append(t)
        return "\n".join(parts)
    if isinstance(c, str):
        return c
    return ""


class GrokStreamParser(Parser):
    fmt = "grok_stream"
    has_marker = True

    def __init__(self, source, harness=None):
        super().__init__(source, harness)
        self.done: set[str] = set()      # call ids whose final result was emitted
        self.tok: dict | None = None

    def _tool_call(self, o, ln, off, nb):
        cid = o.get("toolCallId")
        cid = cid if isinstance(cid, str) or cid is None else str(cid)
        name = o.get("toolName") or o.get("title")
        call = self.call(ln, cid, name, o.get("rawInput"))
        acp = o.get("kind")
        if call.kind == "other" and isinstance(acp, str) and acp in _ACP_KIND:
            call.kind = _ACP_KIND[acp]
            if call.kind == "exec" and call.command is None:
                c = call.args.get("command", call.args.get("cmd"))
                call.command = c if isinstance(c, str) else (" ".join(map(str, c)) if isinstance(c, list) else None)
        st = o.get("status")
        out = [Record(self.source, ln, off, nb, self.fmt, "tool_call", st if isinstance(st, str) else None,
                      "assistant", None, None, o.get("title") if isinstance(o.get("title"), str) else None, 1), call]
        if isinstance(st, str) and st in _FINAL and cid not in self.done:
            out.append(self._result(o, cid, st, ln))
            out[0].n_tool_results = 1
        return out

    def _result(self, o, cid, st, ln):
        if cid:
            self.done.add(cid)
        err = st not in ("completed", "success")
        return ToolResult(self.source, ln, cid, _acp_text(o), None, err, st)

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
        if t == "tool_call":
            return self._tool_call(o, ln, off, nb)
        if t == "tool_call_update":
            cid = o.get("toolCallId")
            cid = cid if isinstance(cid, str) or cid is None else str(cid)
            st = o.get("status")
            st = st if isinstance(st, str) else None
            rec = Record(self.source, ln, off, nb, self.fmt, t, st)
            if cid and cid not in self.call_tools and (o.get("toolName") or o.get("rawInput") is not None):
                return self._tool_call(o, ln, off, nb)   # an update that introduces its call
            if st in _FINAL and cid not in self.done:
                rec.n_tool_results = 1
                return [rec, self._result(o, cid, st, ln)]
            return rec
        if t == "usage":
            u = o.get("usage")
            if isinstance(u, dict):
                self.tok = add_usage(self.tok, input=u.get("input_tokens"), output=u.get("output_tokens"),
                                     cache_read=u.get("cache_read_input_tokens"),
                                     cache_write=u.get("cache_creation_input_tokens"),
                                     reasoning=u.get("reasoning_tokens"))
            return Record(self.source, ln, off, nb, self.fmt, t, None, None, None, None, None, 0, 0, None,
                          False, False, u if isinstance(u, dict) else None)
        if t in ("available_commands", "available_commands_update", "plan"):
            return Record(self.source, ln, off, nb, self.fmt, t)
        return self.unknown(o, t, ln, off, nb)

    def finish(self, se, truncated):
        if self.tok is not None:
            self.usage = self.tok
            self.usage_source = "usage_events"
        super().finish(se, truncated)


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
        if t == "backend_tool_call":
            k = o.get("kind")
            k = k if isinstance(k, dict) else {}
            name = k.get("tool_type")
            name = name if isinstance(name, str) else "backend_tool"
            action = k.get("action")
            call = self.call(ln, o.get("id"), name, action if isinstance(action, dict) else
                             ({} if action is None else {"value": action}), ts)
            self.last_activity = ln
            return [Record(src, ln, off, nb, fmt, t, name, "assistant", None, ts, None, 1), call]
        if t == "reasoning":
            text = text_of(o.get("summary"), ("text", "summary_text"))
            return Record(src, ln, off, nb, fmt, t, None, "assistant", None, ts, text)
        if t in _CHAT:
            return Record(src, ln, off, nb, fmt, t, None, t, None, ts, text_of(o.get("content")))
        return self.unknown(o, t, ln, off, nb)
