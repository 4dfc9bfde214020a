"""Kimi CLI stream-json (spec §5.8): role-based lines with no ``type``.

Assistant content blocks ``think`` / ``text``; ``tool_calls[].function.arguments`` is a JSON
string that may be PARTIAL (kept as ``{"raw": ...}`` plus best-effort known keys).  Tool results
are ``role:"tool"`` lines with ``tool_call_id``; their ``<system>…</system>`` preamble is stripped
and ``ERROR: Command failed with exit code: N.`` gives the exit code.  No timestamps, no
terminal marker.

Kimi CLI context files (``context.jsonl`` of the session store) hold the same rows plus
bookkeeping: ``{"role":"_checkpoint","id":N}`` (a checkpoint marker) and ``{"role":"_usage",
"token_count":N}`` (the context size after a step).  Both are records, not errors; the last
``token_count`` is the session's ``context_tokens``.
"""

from __future__ import annotations

from . import envelope
from .base import Parser, add_usage, dumps_text, sid, text_of, ts_epoch, ts_iso
from .events import Record, ToolResult

_ROLES = frozenset(("assistant", "tool", "user", "system"))
_BOOKKEEPING = frozenset(("_checkpoint", "_usage"))


class KimiParser(Parser):
    fmt = "kimi"
    has_marker = False

    def handle(self, o, ln, off, nb):
        role = o.get("role")
        if role.__class__ is not str:
            return self.unknown(o, role, ln, off, nb, "role")
        src, fmt = self.source, self.fmt
        if role == "assistant":
            content = o.get("content")
            text = text_of(content, ("text", "think"))
            out = [Record(src, ln, off, nb, fmt, "assistant", None, "assistant", None, None, text)]
            tcs = o.get("tool_calls")
            if isinstance(tcs, list):
                for tc in tcs:
                    if not isinstance(tc, dict):
                        continue
                    f = tc.get("function")
                    f = f if isinstance(f, dict) else {}
                    out.append(self.call(ln, tc.get("id"), f.get("name"), f.get("arguments")))
            out[0].n_tool_calls = len(out) - 1
            self.n_assistant += 1
            self.last_activity = ln
            return out if len(out) > 1 else out[0]
        if role == "tool":
            c = o.get("content")
            text = text_of(c) if not isinstance(c, str) else c
            if text is None:
                text = dumps_text(c)
            env = envelope.kimi(text)
            cid = o.get("tool_call_id")
            cid = cid if isinstance(cid, str) or cid is None else str(cid)
            return [Record(src, ln, off, nb, fmt, "tool", None, "tool", None, None, None, 0, 1),
                    ToolResult(src, ln, cid, env.text, env.exit_code, env.is_error, env.status)]
        if role in _BOOKKEEPING:
            sub = None
            if role == "_usage":
                n = o.get("token_count")
                if isinstance(n, int) and not isinstance(n, bool):
                    self.context_tokens = n
                    self.usage_source = "context_usage_rows"
            else:
                i = o.get("id")
                sub = str(i) if isinstance(i, (int, str)) and not isinstance(i, bool) else None
            return Record(src, ln, off, nb, fmt, role, sub)
        if role in _ROLES:
            return Record(src, ln, off, nb, fmt, role, None, role, None, None, text_of(o.get("content")))
        return self.unknown(o, role, ln, off, nb, "role")


# ------------------------------------------------------------------------------ wire.jsonl
_WIRE_TYPES = frozenset(("metadata", "config.update", "turn.prompt", "context.append_message",
                         "context.append_loop_event", "usage.record", "context.apply_compaction"))
_LOOP_TYPES = frozenset(("step.begin", "content.part", "step.end", "tool.call", "tool.result"))


def _wire_usage(acc, u) -> dict | None:
    """Add one Kimi usage object: kosong's ``input_other / input_cache_read / input_cache_creation /
    output`` or the OpenAI-style ``input_tokens / output_tokens / cached_tokens`` spelling."""
    if not isinstance(u, dict):
        return acc
    if "input_other" in u or "input_cache_read" in u:
        return add_usage(acc, input=u.get("input_other"), output=u.get("output"),
                         cache_read=u.get("input_cache_read"), cache_write=u.get("input_cache_creation"))
    return add_usage(acc, input=u.get("input_tokens", u.get("inputTokens", u.get("prompt_tokens"))),
                     output=u.get("output_tokens", u.get("outputTokens", u.get("completion_tokens"))),
                     cache_read=u.get("cache_read_input_tokens", u.get("cached_tokens", u.get("cachedTokens"))))


class KimiWireParser(Parser):
    """Kimi CLI ``wire.jsonl`` (the session store's event log): one typed event a line.

    * ``metadata``, ``config.update``, ``permission.*``, ``context.apply_compaction``: records;
    * ``turn.prompt``: the user prompt (a user record);
    * ``context.append_message{message:{role, content, tool_calls?, tool_call_id?}}``: a message row
      of the context (the role-based shape of the context file);
    * ``context.append_loop_event{event:{type,...}}``: ``step.begin``; ``content.part{part:{type:
      text|think}}`` (assistant text); ``step.end{usage}``; ``tool.call{toolCallId, name, args}``
      (a ToolCall; args a JSON string or object); ``tool.result{toolCallId, result:{output,
      is_error|isError}}`` (its ToolResult, Kimi ``<system>`` envelope stripped);
    * ``usage.record{usage}``.

    A call or result whose id was already seen (the same call as a loop event and as a context
    message) is kept once.  Usage: the ``usage.record`` rows when the file has any, else the
    ``step.end`` usages, summed (never both: they account for the same steps).  No terminal marker.
    """

    fmt = "kimi_wire"
    has_marker = False

    def __init__(self, source, harness=None):
        super().__init__(source, harness)
        self.seen_calls: set[str] = set()
        self.seen_results: set[str] = set()
        self.step_usage: dict | None = None
        self.rec_usage: dict | None = None

    def _ts(self, o):
        v = o.get("timestamp")
        if v is None:
            return None
        ts = ts_epoch(v) if isinstance(v, (int, float)) else ts_iso(v)
        self.see_ts(ts)
        return ts

    def _call(self, ln, cid, name, args, ts):
        cid = sid(cid)
        if cid:
            if cid in self.seen_calls:
                return None
            self.seen_calls.add(cid)
        return self.call(ln, cid, name, args, ts)

    def _result(self, ln, cid, out, is_err, ts):
        cid = sid(cid)
        if cid:
            if cid in self.seen_results:
                return None
            self.seen_results.add(cid)
        text = out if isinstance(out, str) else (text_of(out) if out is not None else "")
        if text is None:
            text = dumps_text(out)
        env = envelope.kimi(text)
        ie = is_err if isinstance(is_err, bool) else env.is_error
        return ToolResult(self.source, ln, cid, env.text, env.exit_code, ie, env.status or ("error" if ie else None), ts)

    def handle(self, o, ln, off, nb):
        t = o.get("type")
        if t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        src, fmt = self.source, self.fmt
        ts = self._ts(o)
        if t == "context.append_loop_event":
            ev = o.get("event")
            if not isinstance(ev, dict):
                return self.unknown(o, t, ln, off, nb, "event type", None)
            return self._loop(ev, ln, off, nb, ts)
        if t == "context.append_message":
            m = o.get("message")
            return self._message(m if isinstance(m, dict) else {}, ln, off, nb, ts)
        if t == "turn.prompt":
            p = o.get("prompt", o.get("content", o.get("user_input")))
            text = p if isinstance(p, str) else text_of(p)
            return Record(src, ln, off, nb, fmt, t, None, "user", None, ts, text)
        if t == "usage.record":
            self.rec_usage = _wire_usage(self.rec_usage, o.get("usage", o.get("token_usage")))
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts)
        if t == "metadata":
            s = o.get("session_id", o.get("sessionId"))
            if isinstance(s, str):
                self.sessions.add(s)
            cwd = o.get("cwd", o.get("work_dir"))
            if isinstance(cwd, str):
                self.cwd = cwd
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts)
        if t in _WIRE_TYPES or t.startswith("permission."):
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts)
        return self.unknown(o, t, ln, off, nb)

    def _loop(self, ev, ln, off, nb, ts):
        src, fmt = self.source, self.fmt
        et = ev.get("type")
        if et.__class__ is not str or et not in _LOOP_TYPES:
            return self.unknown(ev, "context.append_loop_event", ln, off, nb, "event type", et)
        if ts is None:
            ts = self._ts(ev)
        rt = "context.append_loop_event"
        if et == "tool.call":
            c = self._call(ln, ev.get("toolCallId", ev.get("id")), ev.get("name"),
                           ev.get("args", ev.get("arguments")), ts)
            rec = Record(src, ln, off, nb, fmt, rt, et, "assistant", None, ts, None, 1 if c else 0)
            return [rec, c] if c else rec
        if et == "tool.result":
            res = ev.get("result")
            if isinstance(res, dict):
                out = res.get("output", res.get("content", res.get("message")))
                ie = res.get("is_error", res.get("isError"))
            else:
                out, ie = res, ev.get("is_error")
            r = self._result(ln, ev.get("toolCallId", ev.get("id")), out, ie, ts)
            rec = Record(src, ln, off, nb, fmt, rt, et, "tool", None, ts, None, 0, 1 if r else 0)
            return [rec, r] if r else rec
        if et == "content.part":
            part = ev.get("part", ev.get("content"))
            text = text_of([part] if isinstance(part, dict) else part, ("text", "think"))
            self.last_activity = ln
            return Record(src, ln, off, nb, fmt, rt, et, "assistant", None, ts, text)
        if et == "step.end":
            u = ev.get("usage", ev.get("token_usage"))
            self.step_usage = _wire_usage(self.step_usage, u)
            return Record(src, ln, off, nb, fmt, rt, et, None, None, ts, None, 0, 0, None, False, False,
                          u if isinstance(u, dict) else None)
        self.n_assistant += 1   # step.begin: one model step
        return Record(src, ln, off, nb, fmt, rt, et, None, None, ts)

    def _message(self, m, ln, off, nb, ts):
        src, fmt = self.source, self.fmt
        role = m.get("role")
        role = role if isinstance(role, str) else None
        rt = "context.append_message"
        if role == "assistant":
            out = [Record(src, ln, off, nb, fmt, rt, role, role, None, ts, text_of(m.get("content"), ("text", "think")))]
            tcs = m.get("tool_calls")
            for tc in tcs if isinstance(tcs, list) else ():
                if isinstance(tc, dict):
                    f = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                    c = self._call(ln, tc.get("id"), f.get("name", tc.get("name")),
                                   f.get("arguments", tc.get("arguments")), ts)
                    if c:
                        out.append(c)
            out[0].n_tool_calls = len(out) - 1
            self.last_activity = ln
            return out if len(out) > 1 else out[0]
        if role == "tool":
            r = self._result(ln, m.get("tool_call_id"), m.get("content"), None, ts)
            rec = Record(src, ln, off, nb, fmt, rt, role, role, None, ts, None, 0, 1 if r else 0)
            return [rec, r] if r else rec
        c = m.get("content")
        return Record(src, ln, off, nb, fmt, rt, role, role, None, ts, c if isinstance(c, str) else text_of(c))

    def finish(self, se, truncated):
        if self.rec_usage is not None:
            self.usage, self.usage_source = self.rec_usage, "usage_record"
        elif self.step_usage is not None:
            self.usage, self.usage_source = self.step_usage, "step_end"
        super().finish(se, truncated)
