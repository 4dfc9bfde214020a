"""OpenCode ``--format json`` (spec §5.4): ``{"type","timestamp"(epoch ms),"sessionID","part"}``.

A ``tool_use`` record carries the call and its result: it yields a ToolCall and (when the tool
finished: state.status completed/error) a ToolResult with the same call_id (``part.callID``).
``step_finish`` tokens are summed for usage.  There is no terminal marker.  hy3/tinker append
several ``opencode run`` streams to one file: each new sessionID is counted (SessionEnd.n_sessions).
"""

from __future__ import annotations

from .base import Parser, add_usage, dumps_text, ts_epoch
from .events import Record, ToolResult

_TYPES = frozenset(("step_start", "step_finish", "tool_use", "text", "text_delta", "reasoning",
                    "error", "file", "patch", "snapshot", "agent", "retry", "compaction", "subtask"))


class OpenCodeParser(Parser):
    fmt = "opencode"
    has_marker = False

    def __init__(self, source, harness=None):
        super().__init__(source, harness)
        self.tok = None
        self._sid = None

    def handle(self, o, ln, off, nb):
        t = o.get("type")
        if t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        part = o.get("part")
        if not isinstance(part, dict):
            part = {}
        ts = ts_epoch(o.get("timestamp"))
        if ts is None:
            tm = part.get("time")
            if isinstance(tm, dict):
                ts = ts_epoch(tm.get("start"))
        self.see_ts(ts)
        sid = o.get("sessionID") or part.get("sessionID")
        if isinstance(sid, str) and sid != self._sid:
            self._sid = sid
            self.sessions.add(sid)
        src, fmt = self.source, self.fmt
        if t == "tool_use":
            state = part.get("state")
            if not isinstance(state, dict):
                state = {}
            cid = part.get("callID") or part.get("id")
            call = self.call(ln, cid, part.get("tool"), state.get("input"), ts)
            out = [Record(src, ln, off, nb, fmt, t, None, "assistant", None, ts, None, 1, 0), call]
            status = state.get("status")
            if status in ("completed", "error") or "output" in state:
                is_err = status == "error"
                res = state.get("output")
                if res is None and is_err:
                    res = state.get("error")
                text = dumps_text(res)
                md = state.get("metadata")
                ec = None
                if isinstance(md, dict):
                    for k in ("exit", "exitCode", "exit_code"):
                        v = md.get(k)
                        if isinstance(v, int) and not isinstance(v, bool):
                            ec = v
                            break
                tm = state.get("time")
                rts = ts_epoch(tm.get("end")) if isinstance(tm, dict) else None
                out[0].n_tool_results = 1
                out.append(ToolResult(src, ln, call.call_id, text, ec, is_err,
                                      status if isinstance(status, str) else None, rts or ts))
            return out
        if t == "step_finish":
            tk = part.get("tokens")
            if isinstance(tk, dict):
                cache = tk.get("cache") if isinstance(tk.get("cache"), dict) else {}
                self.tok = add_usage(self.tok, input=tk.get("input"), output=tk.get("output"),
                                     reasoning=tk.get("reasoning"), cache_read=cache.get("read"),
                                     cache_write=cache.get("write"))
            c = part.get("cost")
            if isinstance(c, (int, float)) and not isinstance(c, bool):
                self.cost = (self.cost or 0.0) + float(c)
            r = part.get("reason")
            return Record(src, ln, off, nb, fmt, t, r if isinstance(r, str) else None, None, None, ts)
        if t in ("text", "text_delta", "reasoning"):
            s = part.get("text")
            if t != "reasoning":
                self.n_assistant += 1
            self.last_activity = ln
            return Record(src, ln, off, nb, fmt, t, None, "assistant", None, ts,
                          s if isinstance(s, str) else None)
        if t == "error":
            err = o.get("error")
            text = None
            status = None
            if isinstance(err, dict):
                data = err.get("data")
                if isinstance(data, dict):
                    m = data.get("message")
                    text = m if isinstance(m, str) else None
                    sc = data.get("statusCode")
                    if isinstance(sc, int) and not isinstance(sc, bool):
                        status = sc
                if text is None:
                    m = err.get("message")
                    text = m if isinstance(m, str) else None
                name = err.get("name")
                if text is None:
                    text = dumps_text(err)
                elif isinstance(name, str) and name not in text:
                    text = f"{name}: {text}"
            elif isinstance(err, str):
                text = err
            else:
                text = dumps_text(o)
            self.api_error(ln, text, status)
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts, text, 0, 0, None, False, True)
        if t in _TYPES:
            return Record(src, ln, off, nb, fmt, t, None, None, None, ts)
        return self.unknown(o, t, ln, off, nb)

    def finish(self, se, truncated):
        if self.tok is not None:
            self.usage = self.tok
            self.usage_source = "step_finish"
        super().finish(se, truncated)
