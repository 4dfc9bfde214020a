"""Claude Code stream-json (spec §5.2) and the Claude session-store form (parentUuid / uuid /
sessionId / timestamp / isSidechain / toolUseResult; also the HF-converted traces, §5.13).

Usage: the CLI repeats the same ``message.usage`` on every content-block line of one message,
so tokens are kept once per ``message.id`` (last seen wins); the last terminal ``result``
record's usage and ``total_cost_usd`` are preferred when present, as the runner does (§3.4).

Subagents (Claude Code 2.1): a subagent's messages arrive wrapped in ``{"type":"progress","data":
{"type":"agent_progress","agentId","message":{"type":"assistant"|"user","message":{...}}},
"parentToolUseID"}`` records.  Their ``tool_use`` / ``tool_result`` blocks become ToolCalls /
ToolResults of the run, with ``agent_id`` and ``parent_call_id`` (the Agent/Task call that
started the subagent); their usage counts once per message id like any other.  A tool-use id
repeated by a progress record (re-sent, or also written as a sidechain line) is kept once; lines
of the main stream are never dropped.
A ``result`` row carrying ``agentId`` is the subagent's result, not the session's end.
"""

from __future__ import annotations

from typing import Any

from . import envelope
from .base import Parser, add_usage, dumps_text, error_status, is_rate_limit, ts_iso
from .events import Record, ToolResult

# system subtypes that are pure heartbeats / frames: no text, nothing else to extract
_FAST_SYSTEM = frozenset(("task_progress", "status", "task_started", "task_notification", "hook_response",
                          "hook_started", "hook_progress", "api_retry", "informational",
                          "local_command", "turn_duration"))

_STREAM_TYPES = frozenset(("system", "assistant", "user", "result", "tool_progress",
                           "rate_limit_event", "stream_event", "keep_alive", "control_request",
                           "control_response", "auth_status"))
_SESSION_TYPES = frozenset(("summary", "file-history-snapshot", "custom-title", "ai-title", "mode",
                            "queue-operation", "attachment", "progress", "agent-name",
                            "last-prompt", "tag",
                            # Claude Code 2.1.x session-store metadata rows
                            "worktree-state", "relocated", "frame-link", "bridge-session", "atis-latch",
                            "started", "permission-mode", "pr-link"))


class ClaudeParser(Parser):
    fmt = "claude"
    has_marker = True
    FAST_SYSTEM = _FAST_SYSTEM
    FAST_TYPES = frozenset(("tool_progress", "keep_alive"))
    FAST_PREFIX = b'{"type":"system","subtype":"'

    def __init__(self, source: str, harness: str | None = None, session_form: bool = False):
        super().__init__(source, harness)
        self.session_form = session_form
        if session_form:
            self.fmt = "claude_session"
            self.has_marker = False
            self.FAST_SYSTEM = None
            self.FAST_PREFIX = None
        self.msg_usage: dict[str, dict] = {}
        self.anon_usage: dict[str, int] | None = None
        self.term_usage: dict | None = None
        self.term_cost: float | None = None
        self.assistant_ids: set[str] = set()
        self.n_anon_assistant = 0
        # tool-use ids emitted; a subagent's call or result repeated in a progress record (or also
        # written as a sidechain line) is kept once.  Main-stream lines are never dropped.
        self.seen_calls: set[str] = set()
        self.seen_results: set[str] = set()
        self.progress_ids: set[str] = set()
        self._in_progress = False

    def handle(self, o: dict, ln: int, off: int, nb: int):
        t = o.get("type")
        if t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        if t == "system":
            st = o.get("subtype")
            if st.__class__ is not str:
                st = None
            if st in _FAST_SYSTEM and not self.session_form:
                return Record(self.source, ln, off, nb, "claude", "system", st)
            return self._system(o, st, ln, off, nb)
        if t == "assistant":
            return self._assistant(o, ln, off, nb)
        if t == "user":
            return self._user(o, ln, off, nb)
        if t == "tool_progress" or t == "stream_event" or t == "keep_alive":
            return Record(self.source, ln, off, nb, self.fmt, t, None, None, None, self._ts(o))
        if t == "result":
            if o.get("agentId") is not None:
                return self._subagent_result(o, ln, off, nb)
            return self._result(o, ln, off, nb)
        if t == "progress":
            return self._progress(o, ln, off, nb)
        if t == "rate_limit_event":
            return self._rate(o, ln, off, nb)
        if t in _STREAM_TYPES or t in _SESSION_TYPES:
            text = None
            if t == "summary":
                s = o.get("summary")
                text = s if isinstance(s, str) else None
            elif t in ("custom-title", "ai-title"):
                s = o.get("customTitle") or o.get("aiTitle") or o.get("title")
                text = s if isinstance(s, str) else None
            return Record(self.source, ln, off, nb, self.fmt, t, None, None, None, self._ts(o), text,
                          0, 0, o.get("parentUuid") if self.session_form else None,
                          bool(o.get("isSidechain")))
        return self.unknown(o, t, ln, off, nb)

    # ------------------------------------------------------------------------------
    def _ts(self, o: dict):
        v = o.get("timestamp")
        if v is None:
            return None
        ts = ts_iso(v)
        self.see_ts(ts)
        return ts

    def _common(self, o: dict):
        """(ts, parent_id, is_sidechain) for a message line."""
        ts = self._ts(o)
        if self.session_form:
            parent = o.get("parentUuid")
            side = bool(o.get("isSidechain"))
        else:
            parent = o.get("parent_tool_use_id")
            side = parent is not None
        if parent is not None and not isinstance(parent, str):
            parent = str(parent)
        sid = o.get("session_id") or o.get("sessionId")
        if isinstance(sid, str) and sid not in self.sessions:
            self.sessions.add(sid)
        return ts, parent, side

    def _system(self, o: dict, st: Any, ln: int, off: int, nb: int):
        ts, parent, side = self._common(o)
        text = None
        if st == "init":
            cwd = o.get("cwd")
            if isinstance(cwd, str):
                self.cwd = cwd
        elif st == "compact_boundary":
            m = o.get("message")
            s = (m.get("summary") if isinstance(m, dict) else None) or o.get("summary")
            text = s if isinstance(s, str) else None
        elif self.session_form:
            c = o.get("content")
            text = c if isinstance(c, str) else None
        if self.session_form:
            cwd = o.get("cwd")
            if isinstance(cwd, str):
                self.cwd = cwd
        return Record(self.source, ln, off, nb, self.fmt, "system",
                      st if isinstance(st, str) else None, "system", None, ts, text, 0, 0, parent, side)

    def _call_block(self, b: dict, ln: int, ts, parent, agent, parent_call):
        """A tool_use block as a ToolCall, or None when its id was already emitted."""
        cid = b.get("id")
        if isinstance(cid, str) and cid:
            if cid in self.seen_calls and (self._in_progress or cid in self.progress_ids):
                return None
            self.seen_calls.add(cid)
            if self._in_progress:
                self.progress_ids.add(cid)
        return self.call(ln, cid, b.get("name"), b.get("input"), ts, parent, agent, parent_call)

    def _assistant(self, o: dict, ln: int, off: int, nb: int, agent=None, parent_call=None, ts_parent=None):
        ts, parent, side = self._common(o)
        if ts is None:
            ts = ts_parent
        if self.session_form:
            cwd = o.get("cwd")
            if isinstance(cwd, str):
                self.cwd = cwd
        m = o.get("message")
        if not isinstance(m, dict):
            m = {}
        mid = m.get("id")
        if mid is not None and not isinstance(mid, str):
            mid = str(mid)
        content = m.get("content")
        out: list = []
        texts: list[str] = []
        ncalls = 0
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    continue
                bt = b.get("type")
                if bt == "text":
                    s = b.get("text")
                    if isinstance(s, str):
                        texts.append(s)
                elif bt == "thinking":
                    s = b.get("thinking")
                    if isinstance(s, str) and s:
                        texts.append(s)
                elif bt == "redacted_thinking":
                    pass
                elif bt == "tool_use" or bt == "server_tool_use":
                    if agent is None and not self._in_progress:   # a sidechain / subagent line
                        agent = o.get("agentId")
                        parent_call = o.get("parent_tool_use_id")
                    c = self._call_block(b, ln, ts, parent, agent, parent_call)
                    if c is not None:
                        out.append(c)
                        ncalls += 1
        text = "\n".join(texts) if texts else None
        usage = m.get("usage")
        if not isinstance(usage, dict):
            usage = None
        model = m.get("model")
        api_err = (model == "<synthetic>" or o.get("is_api_error_message") is True
                   or (o.get("error") is not None and o.get("error") is not False))
        if usage is not None:
            if mid:
                self.msg_usage[mid] = usage
            else:
                self.anon_usage = _add_claude(self.anon_usage, usage)
        if mid:
            self.assistant_ids.add(mid)
        else:
            self.n_anon_assistant += 1
        if api_err:
            err = o.get("error")
            etext = text or (dumps_text(err) if err is not None else None) or "synthetic error turn"
            st = error_status(etext)
            if st is None and isinstance(err, str):
                st = error_status(err)
            self.api_error(ln, etext, st, is_rate_limit(etext, st) or err == "rate_limit")
        else:
            self.last_activity = ln
        rec = Record(self.source, ln, off, nb, self.fmt, "assistant", None, "assistant", mid, ts, text,
                     ncalls, 0, parent, side, api_err, usage)
        if out:
            out.insert(0, rec)
            return out
        return rec

    def _user(self, o: dict, ln: int, off: int, nb: int, ts_parent=None):
        ts, parent, side = self._common(o)
        if ts is None:
            ts = ts_parent
        if self.session_form:
            cwd = o.get("cwd")
            if isinstance(cwd, str):
                self.cwd = cwd
        m = o.get("message")
        content = m.get("content") if isinstance(m, dict) else None
        tur = o.get("tool_use_result")
        if tur is None:
            tur = o.get("toolUseResult")
        texts: list[str] = []
        out: list = []
        nres = 0
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    continue
                bt = b.get("type")
                if bt == "text":
                    s = b.get("text")
                    if isinstance(s, str):
                        texts.append(s)
                elif bt == "tool_result":
                    rid = b.get("tool_use_id")
                    if isinstance(rid, str) and rid:
                        if rid in self.seen_results and (self._in_progress or rid in self.progress_ids):
                            continue
                        self.seen_results.add(rid)
                        if self._in_progress:
                            self.progress_ids.add(rid)
                    out.append(self._tool_result(b, tur, ln, ts))
                    nres += 1
        rec = Record(self.source, ln, off, nb, self.fmt, "user", None, "user", None, ts,
                     "\n".join(texts) if texts else None, 0, nres, parent, side)
        if out:
            out.insert(0, rec)
            return out
        return rec

    def _tool_result(self, b: dict, tur: Any, ln: int, ts) -> ToolResult:
        cid = b.get("tool_use_id")
        if cid is not None and not isinstance(cid, str):
            cid = str(cid)
        c = b.get("content")
        if isinstance(c, str):
            text = c
        elif isinstance(c, list):
            parts = []
            for x in c:
                if isinstance(x, dict):
                    s = x.get("text")
                    if isinstance(s, str):
                        parts.append(s)
                elif isinstance(x, str):
                    parts.append(x)
            text = "\n".join(parts)
        elif c is None:
            text = ""
        else:
            text = dumps_text(c)
        ie = b.get("is_error")
        is_error = ie if isinstance(ie, bool) else None
        tool = self.call_tools.get(cid) if cid else None
        if tool == "TaskOutput" or text.startswith("<retrieval_status>"):
            env = envelope.task_output(text, is_error)
        else:
            env = envelope.claude(text, is_error)
        running = env.running_session
        if isinstance(tur, dict):
            if not env.text:
                so = tur.get("stdout")
                se = tur.get("stderr")
                if isinstance(so, str) or isinstance(se, str):
                    env.text = "\n".join(x for x in (so, se) if isinstance(x, str) and x)
            bg = tur.get("backgroundTaskId")
            if isinstance(bg, str) and bg and running is None:
                running = bg
        status = env.status
        if status is None and is_error is not None:
            status = "error" if is_error else None
        return ToolResult(self.source, ln, cid, env.text, env.exit_code, env.is_error, status, ts, running)

    def _progress(self, o: dict, ln: int, off: int, nb: int):
        """A ``progress`` record; ``agent_progress`` ones carry a subagent's message (see module doc)."""
        ts = self._ts(o)
        data = o.get("data")
        sub = data.get("type") if isinstance(data, dict) else None
        sub = sub if isinstance(sub, str) else None
        parent = o.get("parentUuid") if self.session_form else o.get("parent_tool_use_id")
        parent = parent if isinstance(parent, str) else None
        sid = o.get("sessionId") or o.get("session_id")
        if isinstance(sid, str):
            self.sessions.add(sid)
        if self.session_form:
            cwd = o.get("cwd")
            if isinstance(cwd, str):
                self.cwd = cwd
        if sub != "agent_progress" or not isinstance(data.get("message"), dict):
            return Record(self.source, ln, off, nb, self.fmt, "progress", sub, None, None, ts, None, 0, 0,
                          parent, bool(o.get("isSidechain")))
        agent = data.get("agentId")
        if agent is None:
            agent = o.get("agentId")
        parent_call = o.get("parentToolUseID")
        if parent_call is None:
            parent_call = data.get("parentToolUseID")
        wrapper = data["message"]
        inner = wrapper if isinstance(wrapper.get("message"), dict) else {"message": wrapper}
        role = inner["message"].get("role") or wrapper.get("type")
        if "type" not in inner:
            inner = dict(inner, type=role)
        self._in_progress = True
        try:
            if role == "assistant":
                evs = self._assistant(inner, ln, off, nb, agent, parent_call, ts)
            elif role == "user":
                evs = self._user(inner, ln, off, nb, ts)
            else:
                evs = None
        finally:
            self._in_progress = False
        if evs is None:
            return Record(self.source, ln, off, nb, self.fmt, "progress", sub, None, None, ts, None, 0, 0,
                          parent, True)
        evs = evs if isinstance(evs, list) else [evs]
        rec = evs[0]
        rec.rtype = "progress"
        rec.subtype = sub
        rec.parent_id = parent
        rec.is_sidechain = True
        return evs if len(evs) > 1 else rec

    def _subagent_result(self, o: dict, ln: int, off: int, nb: int):
        """``{"type":"result","agentId":..}`` inside the file: a subagent finished (not the session)."""
        ts, parent, side = self._common(o)
        res = o.get("result")
        st = o.get("subtype")
        return Record(self.source, ln, off, nb, self.fmt, "result", st if isinstance(st, str) else "subagent",
                      None, None, ts, res if isinstance(res, str) else None, 0, 0, parent, True)

    def _result(self, o: dict, ln: int, off: int, nb: int):
        ts, parent, side = self._common(o)
        self.term_line = ln
        self.term_type = "result"
        st = o.get("subtype")
        self.term_subtype = st if isinstance(st, str) else None
        ie = o.get("is_error")
        self.term_is_error = ie if isinstance(ie, bool) else None
        sr = o.get("stop_reason")
        self.term_stop = sr if isinstance(sr, str) else None
        tr = o.get("terminal_reason")
        self.term_reason = tr if isinstance(tr, str) else None
        aes = o.get("api_error_status")
        status = aes if isinstance(aes, int) and not isinstance(aes, bool) else None
        res = o.get("result")
        text = res if isinstance(res, str) else None
        if status is None and self.term_is_error and text:
            status = error_status(text)
        self.term_status = status
        nt = o.get("num_turns")
        if isinstance(nt, int) and not isinstance(nt, bool):
            self.num_turns = nt
        u = o.get("usage")
        if isinstance(u, dict):
            self.term_usage = u
        c = o.get("total_cost_usd")
        if isinstance(c, (int, float)) and not isinstance(c, bool):
            self.term_cost = float(c)
        if self.term_is_error and (status is not None or self.term_reason == "api_error"):
            self.api_error(ln, text or f"result is_error terminal_reason={self.term_reason}", status)
        return Record(self.source, ln, off, nb, self.fmt, "result", self.term_subtype, None, None, ts,
                      text, 0, 0, parent, side, bool(self.term_is_error and status is not None),
                      u if isinstance(u, dict) else None)

    def _rate(self, o: dict, ln: int, off: int, nb: int):
        ts, parent, side = self._common(o)
        info = o.get("rate_limit_info")
        status = info.get("status") if isinstance(info, dict) else None
        rejected = status == "rejected"
        if rejected:
            kind = info.get("rateLimitType")
            why = info.get("overageDisabledReason")
            self.api_error(ln, f"rate_limit_event rejected ({kind}; overage {info.get('overageStatus')}: {why})",
                           None, True)
        return Record(self.source, ln, off, nb, self.fmt, "rate_limit_event",
                      status if isinstance(status, str) else None, None, None, ts, None, 0, 0,
                      parent, side, rejected)

    def finish(self, se, truncated):
        n_msgs = len(self.assistant_ids) + self.n_anon_assistant
        self.n_assistant = n_msgs
        if self.term_usage is not None:
            self.usage = _claude_usage(self.term_usage)
            self.usage_source = "terminal_record"
            self.cost = self.term_cost
        elif self.msg_usage or self.anon_usage:
            acc = dict(self.anon_usage or {})
            for u in self.msg_usage.values():
                acc = _add_claude(acc, u)
            self.usage = acc
            self.usage_source = "dedup_messages"
            self.cost = self.term_cost
        elif self.term_cost is not None:
            self.cost = self.term_cost
            self.usage_source = "terminal_record"
        super().finish(se, truncated)


def _claude_usage(u: dict) -> dict:
    return _add_claude(None, u)


def _add_claude(acc, u: dict):
    return add_usage(acc, input=u.get("input_tokens"), output=u.get("output_tokens"),
                     cache_read=u.get("cache_read_input_tokens"),
                     cache_write=u.get("cache_creation_input_tokens"))
