"""Codex rollout (``codex_session.jsonl``, spec §5.3) and the plain-text Codex transcript.

Rollout lines are ``{"timestamp", "type", "payload"}``.  ``response_item`` function_call /
custom_tool_call / local_shell_call become ToolCalls; their outputs ToolResults with the exec
envelope stripped.  ``event_msg`` UI duplicates (user_message, agent_message, agent_reasoning,
exec_command_begin/end, ...) are kept as Records and never as tool events.  Terminal marker:
``event_msg/task_complete``.  Usage: sum of ``info.last_token_usage`` over token_count events.

A ``write_stdin`` result continues a running process: its ToolResult.running_session is the
process session id the call wrote to, so the output chain of a check run can be followed.

Server-side and MCP tools (rollouts 0.125-0.146): ``response_item`` ``web_search_call``,
``tool_search_call`` (its ``tool_search_output`` is the result) and ``image_generation_call`` are
tool calls; MCP calls appear only as ``event_msg`` ``mcp_tool_call_begin`` (the call, tool
``mcp__<server>__<tool>``) / ``mcp_tool_call_end`` (the result).  Newer metadata (top-level
``world_state``, ``inter_agent_communication_metadata``; ``event_msg`` ``guardian_assessment``,
``collab_*``, ``thread_*``, ``dynamic_tool_call_*``, ``sub_agent_activity``; ``response_item``
``agent_message``) are records.
"""

from __future__ import annotations


from typing import Any

from . import envelope
from .base import Parser, add_usage, dumps_text, parse_args, text_of, ts_iso
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
    "guardian_assessment", "thread_goal_updated", "sub_agent_activity",
))
_EVENT_PREFIXES = ("collab_", "thread_", "dynamic_tool_call_")
_ITEM_TYPES = frozenset(("message", "reasoning", "function_call", "function_call_output",
                         "custom_tool_call", "custom_tool_call_output", "local_shell_call",
                         "web_search_call", "ghost_snapshot", "compaction", "compaction_summary",
                         "other", "tool_search_call", "tool_search_output", "image_generation_call",
                         "agent_message"))
_TOP_TYPES = frozenset(("session_meta", "turn_context", "response_item", "event_msg", "compacted"))
_TOP_META = frozenset(("world_state", "inter_agent_communication_metadata"))


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
        if t in _TOP_META:
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
        if pt == "web_search_call":
            action = p.get("action")
            args = action if isinstance(action, dict) else ({"query": p["query"]} if isinstance(p.get("query"), str) else {})
            return self._server_call(p, ln, off, nb, ts, pt, "web_search", args)
        if pt == "tool_search_call":
            args = p.get("arguments")
            if args is None:
                args = {k: p[k] for k in ("query", "execution") if k in p}
            return self._server_call(p, ln, off, nb, ts, pt, "tool_search", args)
        if pt == "image_generation_call":
            rp = p.get("revised_prompt")
            return self._server_call(p, ln, off, nb, ts, pt, "image_generation",
                                     {"prompt": rp} if isinstance(rp, str) else {})
        if pt == "tool_search_output":
            cid = p.get("call_id")
            cid = cid if isinstance(cid, str) or cid is None else str(cid)
            out = p.get("output")
            if out is None:
                out = p.get("tools")
            text = out if isinstance(out, str) else ("" if out is None else dumps_text(out))
            st = p.get("status")
            st = st if isinstance(st, str) else None
            return [Record(src, ln, off, nb, fmt, "response_item", pt, "tool", None, ts, None, 0, 1),
                    ToolResult(src, ln, cid, text, None, True if st in ("failed", "error") else None, st, ts)]
        if pt == "agent_message":
            text = text_of(p.get("content"))
            if text is None:
                m = p.get("message") if p.get("message") is not None else p.get("text")
                text = m if isinstance(m, str) else text_of(m)
            return Record(src, ln, off, nb, fmt, "response_item", pt, "assistant", None, ts, text)
        if pt in _ITEM_TYPES:
            return Record(src, ln, off, nb, fmt, "response_item", pt, None, None, ts)
        return self.unknown(p, "response_item", ln, off, nb, "payload type", pt)

    def _server_call(self, p: dict, ln: int, off: int, nb: int, ts, pt: str, tool: str, args):
        """A server-side tool (web search, tool search, image generation): the call, and its outcome
        as a result when the item says it finished (these items carry no separate output item,
        except tool_search_call whose tool_search_output links by call_id)."""
        cid = p.get("call_id") or p.get("id")
        call = self.call(ln, cid, tool, args, ts)
        out = [Record(self.source, ln, off, nb, self.fmt, "response_item", pt, "assistant", None, ts, None, 1), call]
        st = p.get("status")
        if pt != "tool_search_call" and isinstance(st, str) and st not in ("in_progress", "searching", "generating"):
            text = ""
            if pt == "image_generation_call" and isinstance(p.get("result"), str):
                text = f"<image: {len(p['result'])} base64 characters>"
            out[0].n_tool_results = 1
            out.append(ToolResult(self.source, ln, call.call_id, text, None, st in ("failed", "error", "incomplete"),
                                  st, ts))
        return out

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
        elif pt == "mcp_tool_call_begin" or pt == "mcp_tool_call_end":
            return self._mcp(p, pt, ln, off, nb, ts)
        elif pt not in _EVENT_TYPES and not pt.startswith(_EVENT_PREFIXES):
            return self.unknown(p, "event_msg", ln, off, nb, "payload type", pt)
        role = None
        if pt == "user_message":
            role = "user"
        elif pt in ("agent_message", "agent_reasoning", "agent_reasoning_raw_content"):
            role = "assistant"
        return Record(src, ln, off, nb, fmt, "event_msg", pt if isinstance(pt, str) else None, role, None,
                      ts, text, 0, 0, None, False, is_err)

    def _mcp(self, p: dict, pt: str, ln: int, off: int, nb: int, ts):
        """MCP tool calls: ``mcp_tool_call_begin`` is the call, ``mcp_tool_call_end`` its result."""
        src, fmt = self.source, self.fmt
        cid = p.get("call_id")
        cid = cid if isinstance(cid, str) or cid is None else str(cid)
        inv = p.get("invocation") if isinstance(p.get("invocation"), dict) else {}
        server, tool = inv.get("server"), inv.get("tool")
        name = f"mcp__{server}__{tool}" if isinstance(server, str) and isinstance(tool, str) else \
            (tool if isinstance(tool, str) else "mcp")
        if pt == "mcp_tool_call_begin":
            if cid and cid in self.call_tools:   # also written as a response_item call
                return Record(src, ln, off, nb, fmt, "event_msg", pt, None, None, ts)
            call = self.call(ln, cid, name, inv.get("arguments"), ts)
            return [Record(src, ln, off, nb, fmt, "event_msg", pt, "assistant", None, ts, None, 1), call]
        if cid and cid not in self.call_tools:   # an end without its begin: the call is known from it
            call = self.call(ln, cid, name, inv.get("arguments"), ts)
            pre = [call]
        else:
            pre = []
        res = p.get("result")
        is_err = None
        if isinstance(res, dict) and ("Ok" in res or "Err" in res):
            if "Err" in res:
                is_err = True
                res = res["Err"]
            else:
                res = res["Ok"]
                is_err = False
        if isinstance(res, dict):
            ie = res.get("isError", res.get("is_error"))
            if isinstance(ie, bool):
                is_err = ie
            c = res.get("content")
            text = text_of(c) if c is not None else dumps_text(res)
            if text is None:
                text = dumps_text(c)
        else:
            text = res if isinstance(res, str) else ("" if res is None else dumps_text(res))
        rec = Record(src, ln, off, nb, fmt, "event_msg", pt, "tool", None, ts, None, len(pre), 1)
        return [rec, *pre, ToolResult(src, ln, cid, text, None, is_err, "error" if is_err else "completed", ts)]

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


# ------------------------------------------------------------------------- codex exec --json
_EXEC_TOP = frozenset(("thread.started", "turn.started", "turn.completed", "turn.failed",
                       "item.started", "item.updated", "item.completed", "error"))
_EXEC_TOOL_ITEMS = frozenset(("command_execution", "file_change", "mcp_tool_call", "web_search", "todo_list"))
_EXEC_TEXT_ITEMS = frozenset(("agent_message", "reasoning", "error"))


class CodexExecParser(Parser):
    """``codex exec --json`` (the JSONL event stream on stdout).

    * ``thread.started{thread_id}``; ``turn.started``; ``turn.completed{usage:{input_tokens,
      cached_input_tokens, output_tokens, reasoning_output_tokens}}`` (terminal marker; usage
      summed over turns); ``turn.failed{error}`` (terminal, an error); top-level ``error{message}``
      (a provider/stream error).  A ``turn.started`` after the last completion re-opens the
      session: a stream that ends inside a turn is cut off.
    * ``item.started`` / ``item.updated`` / ``item.completed`` carry ``item{id, type, ...}``.  Tool
      items, one ToolCall per item id (at its first event) and one ToolResult (at ``item.completed``):
      ``command_execution{command, aggregated_output, exit_code, status}`` (exec),
      ``file_change{changes[{path, kind}], status}`` (edit), ``mcp_tool_call{server, tool,
      arguments, result, error, status}`` (``mcp__<server>__<tool>``), ``web_search{query}``,
      ``todo_list{items}``.  ``agent_message{text}``, ``reasoning{text}`` and ``error{message}``
      items are records with their text.

    The stream's earlier form (codex exec --json before the item events, 2025): lines
    ``{"id", "msg": {"type", ...}}`` whose ``msg`` is an event of the rollout's ``event_msg``
    vocabulary, after a config line and a ``{"prompt"}`` line.  There no response item carries
    the calls, so the events are the tool calls: ``exec_command_begin{call_id, command, cwd}`` /
    ``exec_command_end{call_id, stdout, stderr, aggregated_output, exit_code}`` (exec),
    ``patch_apply_begin{call_id, changes{path: {add{content}} | {update{unified_diff, move_path}} |
    {delete}}}`` (an ``apply_patch`` call whose patch text is rebuilt from the changes, so the
    timeline applies it like any Codex patch) / ``patch_apply_end{stdout, stderr, success}``,
    ``mcp_tool_call_begin`` / ``_end``; ``token_count`` usage (flat or ``info.last_token_usage``),
    ``task_complete`` the terminal marker, ``error`` a provider error; the rest records.
    """

    fmt = "codex_exec"
    has_marker = True

    def __init__(self, source, harness=None):
        super().__init__(source, harness)
        self.items: set[str] = set()       # item ids whose call was emitted
        self.done: set[str] = set()        # item ids whose result was emitted
        self.tok: dict | None = None
        self.n_objects = 0                 # JSON objects handled so far (not lines: a banner may precede)

    def handle(self, o, ln, off, nb):
        t = o.get("type")
        self.n_objects += 1
        if t is None and isinstance(o.get("msg"), dict):
            return self._legacy(o["msg"], ln, off, nb)
        if t is None and self.n_objects <= 3 and ("prompt" in o or "model" in o or "sandbox" in o or "workdir" in o):
            # the earlier stream's config summary and prompt lines
            text = o.get("prompt") if isinstance(o.get("prompt"), str) else None
            return Record(self.source, ln, off, nb, self.fmt, "prompt" if text is not None else "config",
                          None, "user" if text is not None else None, None, None, text)
        if t.__class__ is not str:
            return self.unknown(o, t, ln, off, nb)
        src, fmt = self.source, self.fmt
        if t.startswith("item."):
            if t not in _EXEC_TOP:
                return self.unknown(o, t, ln, off, nb)
            it = o.get("item")
            return self._item(it if isinstance(it, dict) else {}, t, ln, off, nb)
        if t == "thread.started":
            th = o.get("thread_id")
            if isinstance(th, str):
                self.sessions.add(th)
            return Record(src, ln, off, nb, fmt, t)
        if t == "turn.started":
            self.term_line = None
            self.term_type = "none"
            return Record(src, ln, off, nb, fmt, t)
        if t == "turn.completed":
            u = o.get("usage")
            if isinstance(u, dict):
                self.tok = add_usage(self.tok, input=u.get("input_tokens"), output=u.get("output_tokens"),
                                     cache_read=u.get("cached_input_tokens"),
                                     reasoning=u.get("reasoning_output_tokens"))
            self.term_line, self.term_type, self.term_is_error, self.term_subtype = ln, "turn.completed", False, None
            return Record(src, ln, off, nb, fmt, t, None, None, None, None, None, 0, 0, None, False, False,
                          u if isinstance(u, dict) else None)
        if t == "turn.failed" or t == "error":
            e = o.get("error") if t == "turn.failed" else o
            m = e.get("message") if isinstance(e, dict) else e
            text = m if isinstance(m, str) else dumps_text(e)
            self.api_error(ln, text)
            if t == "turn.failed":
                self.term_line, self.term_type, self.term_is_error, self.term_subtype = ln, "turn.failed", True, "error"
            return Record(src, ln, off, nb, fmt, t, None, None, None, None, text, 0, 0, None, False, True)
        return self.unknown(o, t, ln, off, nb)

    def _item(self, it, t, ln, off, nb):
        src, fmt = self.source, self.fmt
        ity = it.get("type")
        if ity.__class__ is not str:
            return self.unknown(it, t, ln, off, nb, "item type", ity)
        iid = it.get("id")
        iid = iid if isinstance(iid, str) or iid is None else str(iid)
        if ity in _EXEC_TEXT_ITEMS:
            text = it.get("text") if ity != "error" else it.get("message")
            text = text if isinstance(text, str) else None
            role = "assistant" if ity != "error" else None
            if ity == "agent_message" and t == "item.completed":
                self.n_assistant += 1
                self.last_activity = ln
            return Record(src, ln, off, nb, fmt, t, ity, role, iid, None, text)
        if ity not in _EXEC_TOOL_ITEMS:
            return self.unknown(it, t, ln, off, nb, "item type", ity)
        out: list = [Record(src, ln, off, nb, fmt, t, ity, "assistant", iid)]
        if iid is None or iid not in self.items:
            if iid is not None:
                self.items.add(iid)
            name, args = self._tool(it, ity)
            out.append(self.call(ln, iid, name, args))
            out[0].n_tool_calls = 1
        if t == "item.completed" and (iid is None or iid not in self.done):
            if iid is not None:
                self.done.add(iid)
            out.append(self._result(it, ity, iid, ln))
            out[0].n_tool_results = 1
        return out if len(out) > 1 else out[0]

    @staticmethod
    def _tool(it: dict, ity: str) -> tuple[str, dict]:
        if ity == "command_execution":
            return "command_execution", {"command": it.get("command")}
        if ity == "file_change":
            ch = it.get("changes")
            return "file_change", {"changes": ch if isinstance(ch, list) else []}
        if ity == "mcp_tool_call":
            server, tool = it.get("server"), it.get("tool")
            name = f"mcp__{server}__{tool}" if isinstance(server, str) and isinstance(tool, str) else \
                (tool if isinstance(tool, str) else "mcp_tool_call")
            a = it.get("arguments")
            return name, parse_args(a)
        if ity == "web_search":
            q = it.get("query")
            return "web_search", {"query": q} if isinstance(q, str) else {}
        items = it.get("items")
        return "todo_list", {"items": items if isinstance(items, list) else []}

    def _result(self, it: dict, ity: str, iid, ln: int) -> ToolResult:
        st = it.get("status")
        st = st if isinstance(st, str) else "completed"
        if ity == "command_execution":
            out = it.get("aggregated_output")
            ec = it.get("exit_code")
            ec = ec if isinstance(ec, int) and not isinstance(ec, bool) else None
            err = (ec is not None and ec != 0) or st in ("failed", "declined")
            return ToolResult(self.source, ln, iid, out if isinstance(out, str) else "", ec, err, st)
        if ity == "mcp_tool_call":
            e = it.get("error")
            if e:
                m = e.get("message") if isinstance(e, dict) else e
                return ToolResult(self.source, ln, iid, m if isinstance(m, str) else dumps_text(e), None, True,
                                  st if st != "completed" else "failed")
            r = it.get("result")
            text = text_of(r.get("content")) if isinstance(r, dict) and r.get("content") is not None else None
            if text is None:
                text = "" if r is None else dumps_text(r)
            return ToolResult(self.source, ln, iid, text, None, st == "failed", st)
        if ity == "file_change":
            ch = it.get("changes")
            text = "\n".join(f"{c.get('kind')} {c.get('path')}" for c in ch if isinstance(c, dict)) \
                if isinstance(ch, list) else ""
            return ToolResult(self.source, ln, iid, text, None, st == "failed", st)
        return ToolResult(self.source, ln, iid, "", None, st == "failed", st)

    # -- the earlier stream: {"id", "msg": {event}} ------------------------------------------------
    def _legacy(self, p: dict, ln: int, off: int, nb: int):
        pt = p.get("type")
        if pt.__class__ is not str:
            return self.unknown(p, "msg", ln, off, nb, "msg type", pt)
        src, fmt = self.source, self.fmt
        cid = p.get("call_id")
        cid = cid if isinstance(cid, str) or cid is None else str(cid)
        if pt == "exec_command_begin":
            cwd = p.get("cwd")
            call = self.call(ln, cid, "shell", {"command": p.get("command"),
                                                "workdir": cwd if isinstance(cwd, str) else None})
            return [Record(src, ln, off, nb, fmt, "msg", pt, "assistant", None, None, None, 1), call]
        if pt == "exec_command_end":
            out = p.get("aggregated_output")
            if not isinstance(out, str):
                out = p.get("formatted_output")
            if not isinstance(out, str):
                out = "".join(x for x in (p.get("stdout"), p.get("stderr")) if isinstance(x, str))
            ec = p.get("exit_code")
            ec = ec if isinstance(ec, int) and not isinstance(ec, bool) else None
            return [Record(src, ln, off, nb, fmt, "msg", pt, "tool", None, None, None, 0, 1),
                    ToolResult(src, ln, cid, out, ec, None if ec is None else ec != 0, "exited" if ec is not None else None)]
        if pt == "patch_apply_begin":
            call = self.call(ln, cid, "apply_patch", {"input": legacy_patch_text(p.get("changes"))})
            return [Record(src, ln, off, nb, fmt, "msg", pt, "assistant", None, None, None, 1), call]
        if pt == "patch_apply_end":
            ok = p.get("success")
            text = "".join(x for x in (p.get("stdout"), p.get("stderr")) if isinstance(x, str))
            return [Record(src, ln, off, nb, fmt, "msg", pt, "tool", None, None, None, 0, 1),
                    ToolResult(src, ln, cid, text, None, None if not isinstance(ok, bool) else not ok,
                               "completed" if ok is not False else "failed")]
        if pt == "mcp_tool_call_begin" or pt == "mcp_tool_call_end":
            return CodexParser._mcp(self, p, pt, ln, off, nb, None)
        if pt == "token_count":
            u = p.get("info", {}).get("last_token_usage") if isinstance(p.get("info"), dict) else p
            if isinstance(u, dict):
                self.tok = add_usage(self.tok, input=u.get("input_tokens"), output=u.get("output_tokens"),
                                     cache_read=u.get("cached_input_tokens"),
                                     reasoning=u.get("reasoning_output_tokens"))
            return Record(src, ln, off, nb, fmt, "msg", pt)
        text, role, is_err = None, None, False
        if pt == "task_complete":
            self.term_line, self.term_type, self.term_is_error, self.term_subtype = ln, "task_complete", False, None
            m = p.get("last_agent_message")
            text = m if isinstance(m, str) else None
        elif pt == "task_started":
            self.term_line, self.term_type = None, "none"
        elif pt in ("agent_message", "user_message"):
            m = p.get("message")
            text, role = (m if isinstance(m, str) else None), ("assistant" if pt == "agent_message" else "user")
            if pt == "agent_message":
                self.n_assistant += 1
                self.last_activity = ln
        elif pt in ("agent_reasoning", "agent_reasoning_raw_content"):
            m = p.get("text")
            text, role = (m if isinstance(m, str) else None), "assistant"
        elif pt in ("error", "stream_error"):
            m = p.get("message")
            text, is_err = (m if isinstance(m, str) else dumps_text(p)), True
            self.api_error(ln, text)
        elif pt not in _EVENT_TYPES and not pt.startswith(_EVENT_PREFIXES):
            return self.unknown(p, "msg", ln, off, nb, "msg type", pt)
        return Record(src, ln, off, nb, fmt, "msg", pt, role, None, None, text, 0, 0, None, False, is_err)

    def finish(self, se, truncated):
        if self.tok is not None:
            self.usage = self.tok
            self.usage_source = "turn_completed" if self.term_type != "task_complete" else "token_count_events"
        super().finish(se, truncated)


def legacy_patch_text(changes: Any) -> str:
    """The earlier codex exec stream's ``changes`` ({path: {add: {content}} | {update: {unified_diff,
    move_path}} | {delete: {}}}) as the ``*** Begin Patch`` text the Codex apply_patch tool takes.
    A unified diff's hunk headers (``@@ -a,b +c,d @@``) become bare ``@@`` (the hunk is found by its
    context lines); its file headers (before the first hunk) and no-newline markers are dropped."""
    out = ["*** Begin Patch"]
    for path, ch in (changes.items() if isinstance(changes, dict) else ()):
        if not isinstance(path, str) or not isinstance(ch, dict):
            continue
        # {"add": {...}} (externally tagged) or {"type": "add", ...}
        kind = ch.get("type") if isinstance(ch.get("type"), str) else next(iter(ch), None)
        body = ch.get(kind) if isinstance(ch.get(kind), dict) else ch
        if kind == "add":
            content = body.get("content")
            lines = content.split("\n") if isinstance(content, str) else []
            if lines and lines[-1] == "":
                lines.pop()
            out.append(f"*** Add File: {path}")
            out += ["+" + ln for ln in lines]
        elif kind == "delete":
            out.append(f"*** Delete File: {path}")
        elif kind == "update":
            out.append(f"*** Update File: {path}")
            mv = body.get("move_path")
            if isinstance(mv, str) and mv:
                out.append(f"*** Move to: {mv}")
            diff = body.get("unified_diff")
            lines = (diff if isinstance(diff, str) else "").split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            in_hunk = False
            for ln in lines:
                if ln.startswith("@@"):
                    in_hunk = True
                    out.append("@@")
                elif in_hunk and not ln.startswith("\\"):   # "\ No newline at end of file"
                    out.append(ln)
                # before the first hunk: the diff's file headers (---, +++, diff, index)
    out.append("*** End Patch")
    return "\n".join(out)
