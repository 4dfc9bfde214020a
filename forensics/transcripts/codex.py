"""Codex rollout (``codex_session.jsonl``, spec §5.3) and the plain-text Codex transcript.

Rollout lines are ``{"timestamp", "type", "payload"}``.  ``response_item`` function_call /
custom_tool_call / local_shell_call become ToolCalls; their outputs ToolResults with the exec
envelope stripped.  ``event_msg`` UI duplicates (user_message, agent_message, agent_reasoning,
exec_command_begin/end, ...) are kept as Records and never as tool events.  Terminal marker:
``event_msg/task_complete``.  Usage: sum of ``info.last_token_usage`` over token_count events.

A ``write_stdin`` result continues a running process: its ToolResult.running_session is the
process session id the call wrote to, so the output chain of a check run can be followed.
"""

from __future__ import annotations


from . import envelope
from .base import Parser, add_usage, dumps_text, text_of, ts_iso
from .events import Record, ToolResult

_EVENT_TYPES = frozenset((
    "task_started", "task_complete", "token_count", "user_message", "agent_message",
    "agent_reasoning", "agent_reasoning_raw_content", "agent_reasoning_section_break",
    "exec_command_begin", "exec_command_end", "exec_command_output_delta", "patch_apply_begin",
    "patch_apply_end", "turn_aborted", "error", "stream_error", "background_event", "turn_diff",
    "mcp_tool_call_begin", "mcp_tool_call_end", "web_search_begin", "web_search_end",
    "plan_update", "entered_review_mode", "exited_review_mode", "get_history_entry_response",
    "session_configured", "shutdown_complete", "conversation_path", "list_custom_prompts_response",
    "view_image_tool_call", "item_started", "item_completed", "context_compacted", "warning",
    "deprecation_notice", "undo_started", "undo_completed", "turn_context",
))
_ITEM_TYPES = frozenset(("message", "reasoning", "function_call", "function_call_output",
                         "custom_tool_call", "custom_tool_call_output", "local_shell_call",
                         "web_search_call", "ghost_snapshot", "compaction", "compaction_summary",
                         "other", "tool_search_call", "tool_search_output", "image_generation_call"))
_TOP_TYPES = frozenset(("session_meta", "turn_context", "response_item", "event_msg", "compacted"))


class CodexParser(Parser):
    fmt = "codex"
    has_marker = True

    def __init__(self, source: str, harness: str | None = None):
        super().__init__(source, harness)
        self.stdin_session: dict[str, str] = {}   # write_stdin call_id -> process session id
        self.tok: dict[str, int] | None = None

    def handle(self, o: dict, ln: int, off: int, nb: int):
        t = o.get("type")
        if t is not None and t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        ts = None
        v = o.get("timestamp")
        if v is not None:
            ts = ts_iso(v)
            self.see_ts(ts)
        p = o.get("payload")
        if t == "response_item":
            return self._item(p if isinstance(p, dict) else {}, ln, off, nb, ts)
        if t == "event_msg":
            return self._event(p if isinstance(p, dict) else {}, ln, off, nb, ts)
        if t == "session_meta" or t == "turn_context":
            if isinstance(p, dict):
                cwd = p.get("cwd")
                if isinstance(cwd, str):
                    self.cwd = cwd
                sid = p.get("id") if t == "session_meta" else None
                if isinstance(sid, str):
                    self.sessions.add(sid)
            return Record(self.source, ln, off, nb, self.fmt, t, None, None, None, ts)
        if t == "compacted":
            text = p.get("message") if isinstance(p, dict) else None
            return Record(self.source, ln, off, nb, self.fmt, t, None, None, None, ts,
                          text if isinstance(text, str) else None)
        if p is None and t in _ITEM_TYPES:
            # early rollouts wrote response items without the envelope
            return self._item(o, ln, off, nb, ts)
        if p is None and t is None and ("instructions" in o or "id" in o) and ln <= 3:
            return Record(self.source, ln, off, nb, self.fmt, "session_meta", None, None, None, ts)
        if t == "task_started" or t == "task_complete":
            return self._event(p if isinstance(p, dict) else {"type": t}, ln, off, nb, ts)
        return self.unknown(o, t, ln, off, nb)

    def _item(self, p: dict, ln: int, off: int, nb: int, ts):
        pt = p.get("type")
        if pt.__class__ is not str:
            return self.unknown(p, "response_item", ln, off, nb, "payload type", pt)
        src, fmt = self.source, self.fmt
        if pt == "message":
            role = p.get("role")
            role = role if isinstance(role, str) else None
            text = text_of(p.get("content"))
            if role == "assistant":
                self.n_assistant += 1
                self.last_activity = ln
            return Record(src, ln, off, nb, fmt, "response_item", "message", role, None, ts, text)
        if pt == "reasoning":
            text = text_of(p.get("summary"))
            if text is None:
                text = text_of(p.get("content"))
            return Record(src, ln, off, nb, fmt, "response_item", "reasoning", "assistant", None, ts, text)
        if pt == "function_call":
            cid = p.get("call_id") or p.get("id")
            call = self.call(ln, cid, p.get("name"), p.get("arguments"), ts)
            if call.tool == "write_stdin" and call.call_id:
                sess = call.args.get("session_id")
                if sess is not None:
                    self.stdin_session[call.call_id] = str(sess)
            return [Record(src, ln, off, nb, fmt, "response_item", "function_call", "assistant", None, ts,
                           None, 1), call]
        if pt == "custom_tool_call":
            cid = p.get("call_id") or p.get("id")
            inp = p.get("input")
            args = inp if isinstance(inp, dict) else {"input": inp if isinstance(inp, str) else dumps_text(inp)}
            call = self.call(ln, cid, p.get("name"), args, ts)
            return [Record(src, ln, off, nb, fmt, "response_item", "custom_tool_call", "assistant", None, ts,
                           None, 1), call]
        if pt == "local_shell_call":
            cid = p.get("call_id") or p.get("id")
            action = p.get("action") if isinstance(p.get("action"), dict) else {}
            args = {"command": action.get("command"), "workdir": action.get("working_directory")}
            call = self.call(ln, cid, "local_shell", args, ts)
            return [Record(src, ln, off, nb, fmt, "response_item", "local_shell_call", "assistant", None, ts,
                           None, 1), call]
        if pt == "function_call_output" or pt == "custom_tool_call_output":
            cid = p.get("call_id")
            cid = cid if isinstance(cid, str) or cid is None else str(cid)
            out = p.get("output")
            success = None
            if isinstance(out, dict):
                s = out.get("success")
                success = s if isinstance(s, bool) else None
                out = out.get("content") if "content" in out else dumps_text(out)
                if isinstance(out, list):
                    out = text_of(out) or ""
            text = out if isinstance(out, str) else dumps_text(out)
            env = envelope.codex(text)
            is_error = None if success is None else not success
            tool = self.call_tools.get(cid) if cid else None
            if tool == "apply_patch" or pt == "custom_tool_call_output":
                low = env.text[:300]
                if "verification failed" in low or low.startswith("error") or "Failed to" in low[:40]:
                    is_error = True
                elif low.startswith("Success."):
                    is_error = False
            running = env.running_session
            if tool == "write_stdin" and running is None:
                running = self.stdin_session.get(cid)   # the process this output belongs to
            status = env.status
            if env.exit_code is not None:
                status = "exited"
            return [Record(src, ln, off, nb, fmt, "response_item", pt, "tool", None, ts, None, 0, 1),
                    ToolResult(src, ln, cid, env.text, env.exit_code, is_error, status, ts, running)]
        if pt in _ITEM_TYPES:
            return Record(src, ln, off, nb, fmt, "response_item", pt, None, None, ts)
        return self.unknown(p, "response_item", ln, off, nb, "payload type", pt)

    def _event(self, p: dict, ln: int, off: int, nb: int, ts):
        pt = p.get("type")
        if pt.__class__ is not str:
            return self.unknown(p, "event_msg", ln, off, nb, "payload type", pt)
        src, fmt = self.source, self.fmt
        text = None
        is_err = False
        if pt == "token_count":
            info = p.get("info")
            if isinstance(info, dict):
                u = info.get("last_token_usage")
                if isinstance(u, dict):
                    self.tok = add_usage(self.tok, input=u.get("input_tokens"),
                                         output=u.get("output_tokens"),
                                         cache_read=u.get("cached_input_tokens"),
                                         reasoning=u.get("reasoning_output_tokens"))
            return Record(src, ln, off, nb, fmt, "event_msg", pt, None, None, ts)
        if pt == "task_complete":
            self.term_line = ln
            self.term_type = "task_complete"
            self.term_subtype = None
            self.term_is_error = False
            m = p.get("last_agent_message")
            text = m if isinstance(m, str) else None
        elif pt in ("user_message", "agent_message"):
            m = p.get("message")
            text = m if isinstance(m, str) else None
        elif pt in ("agent_reasoning", "agent_reasoning_raw_content"):
            m = p.get("text")
            text = m if isinstance(m, str) else None
        elif pt == "error" or pt == "stream_error":
            m = p.get("message")
            text = m if isinstance(m, str) else dumps_text(p)
            is_err = True
            self.api_error(ln, text)
        elif pt == "turn_aborted":
            r = p.get("reason")
            text = r if isinstance(r, str) else None
        elif pt not in _EVENT_TYPES:
            return self.unknown(p, "event_msg", ln, off, nb, "payload type", pt)
        role = None
        if pt == "user_message":
            role = "user"
        elif pt in ("agent_message", "agent_reasoning", "agent_reasoning_raw_content"):
            role = "assistant"
        return Record(src, ln, off, nb, fmt, "event_msg", pt if isinstance(pt, str) else None, role, None,
                      ts, text, 0, 0, None, False, is_err)

    def finish(self, se, truncated):
        if self.tok is not None:
            self.usage = self.tok
            self.usage_source = "token_count_events"
        super().finish(se, truncated)


# The NGC container banner (spec 5.0/5.3): a '====' rule then a '== <image> ==' title, 32 lines.
NGC_BANNER_LINES = 32


class CodexTextParser(Parser):
    """Plain text (no JSON): one Record per non-empty line, rtype 'text'.  A container run's file
    starts with the NGC image banner (and often holds nothing else): its 32 lines are 'banner'."""

    fmt = "codex_text"
    has_marker = False
    _banner_until = None  # last physical line of the banner, once recognised; 0 = no banner

    def handle(self, o, ln, off, nb):  # pragma: no cover - text lines go through handle_text
        return Record(self.source, ln, off, nb, self.fmt, "text")

    def handle_text(self, raw: bytes, ln: int, off: int, nb: int):
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if self._banner_until is None:
            s = text.strip()
            self._banner_until = NGC_BANNER_LINES if (ln <= 3 and len(s) >= 10 and set(s) == {"="}) else 0
        if ln <= self._banner_until:
            return Record(self.source, ln, off, nb, self.fmt, "banner", None, None, None, None, text)
        return Record(self.source, ln, off, nb, self.fmt, "text", None, None, None, None, text)
