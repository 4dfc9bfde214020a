"""Transcript format detection (spec §5.0, §5.1).

``detect_format(first_lines, harness, source) -> (format, evidence)``

Both signals are used and recorded in the evidence string:

1. the harness from result.json (and the file name: ``codex_session.jsonl``, ``chat_history.jsonl``)
   gives the *expected* format (§5.1);
2. the content is sniffed with the viewer's rule order (§5.0) over the first JSON object lines
   (leading non-JSON lines, e.g. the container banner, are skipped); the first line that matches
   a rule decides.

A content match that contradicts the harness wins, and the evidence says so.  When no rule
matches, weak evidence (Claude session-store metadata rows, Claude heartbeat lines) decides;
without any, the file is ``unknown`` - never the harness's format nor the viewer's default - and
the parse reports it (ParseError ``unknown_format``).  A file with no JSON line at all is
``codex_text``; a file with no non-blank line is ``empty``.  A JSON document spread over several
lines (not JSON Lines) is ``gemini_chat`` when its head has ``sessionId`` and ``messages`` (the
Gemini CLI chat recording), else ``unknown``; a head that looks like a document is read as JSON
Lines all the same when most of the sampled lines from it on are JSON objects each
(`mostly_objects`).
"""

from __future__ import annotations

import json
import posixpath
import re

import orjson

FORMATS = ("claude", "claude_session", "codex", "codex_text", "codex_exec", "opencode", "cursor", "gemini",
           "gemini_chat", "kimi", "kimi_wire", "droid", "grok_stream", "grok_chat", "empty", "unknown")
DOCUMENT_FORMATS = ("gemini_chat",)   # one JSON document, not JSON Lines

_CLAUDE_H = {"claude", "zai-claude", "minimax-claude", "kimi-claude", "kinetic-claude", "deepseek-claude",
             "qwen-claude", "longcat-claude", "or-fable", "openrouter-fable", "or-opus", "openrouter-opus",
             "ccr-claude", "lfm-claude"}
_OPENCODE_H = {"opencode", "opencode-nemotron", "nvcf-nemotron", "hy3", "hy3-claude", "tinker", "inkling",
               "opencode-inkling", "lfm-opencode", "opencode-or"}
_FAMILY = {"claude": {"claude", "claude_session"}, "claude_session": {"claude", "claude_session"},
           "codex": {"codex", "codex_text", "codex_exec"}, "codex_text": {"codex", "codex_text", "codex_exec"},
           "codex_exec": {"codex", "codex_text", "codex_exec"},
           "gemini": {"gemini", "gemini_chat"}, "gemini_chat": {"gemini", "gemini_chat"},
           "kimi": {"kimi", "kimi_wire"}, "kimi_wire": {"kimi", "kimi_wire"},
           "grok_stream": {"grok_stream", "grok_chat"}, "grok_chat": {"grok_stream", "grok_chat"}}

_CLAUDE_INIT_KEYS = ("claude_code_version", "mcp_servers", "slash_commands", "agents", "skills")
_CODEX_TYPES = {"session_meta", "event_msg", "response_item", "task_started", "turn_context"}
_OPENCODE_TYPES = {"step_start", "step_finish", "tool_use", "text", "text_delta", "error", "reasoning"}
_CURSOR_TYPES = {"tool_call", "result", "user", "assistant"}
_KIMI_WIRE_TYPES = {"config.update", "turn.prompt", "context.append_message", "context.append_loop_event",
                    "usage.record", "context.apply_compaction"}
_CODEX_EXEC_TYPES = {"thread.started", "turn.started", "turn.completed", "turn.failed", "item.started",
                     "item.updated", "item.completed"}
# weak evidence, used only when no rule matches: Claude session-store metadata rows and heartbeats
_CLAUDE_SESSION_META = {"summary", "file-history-snapshot", "custom-title", "ai-title", "mode", "queue-operation",
                        "attachment", "progress", "agent-name", "last-prompt", "tag", "worktree-state", "relocated",
                        "frame-link", "bridge-session", "atis-latch", "started", "permission-mode", "pr-link"}
_CLAUDE_SESSION_KEYS = ("sessionId", "leafUuid", "messageId", "uuid", "parentUuid")
_CLAUDE_HEARTBEATS = {"task_progress", "status", "task_started", "task_notification", "hook_response",
                      "hook_started", "hook_progress", "api_retry", "compact_boundary"}
SNIFF_OBJECTS = 32   # JSON objects looked at for detection
# a runner's log line before (or between) agent streams: "[2026-08-14 14:08:40] iter 1: spawning grok"
RUNNER_LINE = re.compile(rb"\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?[^\]\n]{0,40}\]\s")
_DOC_SESSION = re.compile(rb'"sessionId"\s*:')
_DOC_MESSAGES = re.compile(rb'"messages"\s*:\s*\[')


def expected_format(harness: str | None, source: str | None) -> tuple[str | None, str]:
    """Format the harness (and the file name) implies, with the reason."""
    path = (source or "").replace("\\", "/")
    name = posixpath.basename(path).lower()
    if name.startswith("codex_session") or name.startswith("rollout-") or "/.codex/sessions/" in path:
        return "codex", f"file {name} is a Codex rollout"
    if name.startswith("chat_history"):
        return "grok_chat", f"file {name} is a Grok chat_history"
    if "/.claude/projects/" in "/" + path and name.endswith(".jsonl"):
        return "claude_session", f"file {name} is in a Claude session store"
    if name == "wire.jsonl":
        return "kimi_wire", f"file {name} is a Kimi wire log"
    if "/.gemini/" in "/" + path and "/chats/" in path and name.endswith(".json"):
        return "gemini_chat", f"file {name} is a Gemini CLI chat recording"
    h = (harness or "").strip().lower()
    if not h:
        return None, "no harness"
    if h in _OPENCODE_H:
        return "opencode", f"harness {h} -> opencode (§5.1)"
    if h in _CLAUDE_H or h.endswith("-claude") or h.startswith(("or-", "openrouter-")):
        return "claude", f"harness {h} -> claude stream-json (§5.1)"
    if h == "codex":
        return "codex_text", "harness codex -> plain-text transcript (§5.3)"
    if h in ("cursor", "gemini", "kimi", "droid"):
        return h, f"harness {h} -> {h} (§5.1)"
    if h in ("grok", "lfm-grok"):
        return "grok_stream", f"harness {h} -> grok streaming-json (§5.7)"
    if h in ("hermes", "pi"):
        return "unknown", f"harness {h}: format unknown (§5.10)"
    return None, f"harness {h} not in the §5.1 table"


def sniff_obj(o: dict) -> tuple[str, str] | None:
    """Apply the §5.0 rule order to one JSON object; (format, reason) or None."""
    t = o.get("type")
    if t is None and isinstance(o.get("messages"), list) and ("sessionId" in o or "projectHash" in o):
        return "gemini_chat", "one JSON object with sessionId/projectHash and messages[] (Gemini chat recording)"
    if t in _KIMI_WIRE_TYPES or (isinstance(t, str) and t.startswith("permission.")):
        return "kimi_wire", f"type={t} (Kimi wire event)"
    if t in _CODEX_EXEC_TYPES:
        return "codex_exec", f"type={t} (codex exec --json event)"
    m = o.get("msg")
    if t is None and isinstance(m, dict) and "id" in o and isinstance(m.get("type"), str):
        return "codex_exec", f"id + msg/{m['type']} (the earlier codex exec --json stream)"
    if t == "reasoning" and ("encrypted_content" in o or isinstance(o.get("summary"), list)):
        return "grok_chat", "type=reasoning with encrypted_content/summary list"
    if t == "tool_result" and "tool_call_id" in o:
        return "grok_chat", "type=tool_result with tool_call_id"
    if t == "init" and "model" in o and "session_id" in o:
        return "gemini", "type=init with model and session_id"
    if t == "system" and o.get("subtype") == "init":
        if "reasoning_effort" in o and "tools" in o and "mcp_servers" not in o:
            return "droid", "system/init with reasoning_effort and tools, no mcp_servers"
        for k in _CLAUDE_INIT_KEYS:
            if k in o:
                return "claude", f"system/init with {k}"
        if "apiKeySource" in o or "permissionMode" in o:
            return "cursor", "system/init with apiKeySource/permissionMode and no claude keys"
        return "claude", "system/init (no distinguishing keys)"
    if "payload" in o and t in _CODEX_TYPES:
        return "codex", f"type={t} with payload"
    if "parentUuid" in o or ("uuid" in o and "sessionId" in o):
        return "claude_session", "parentUuid / uuid+sessionId"
    if "role" in o and "type" not in o:
        return "kimi", "top-level role and no type"
    if t in _CURSOR_TYPES and "session_id" in o and "parent_tool_use_id" not in o and "uuid" not in o:
        return "cursor", f"type={t} with session_id"
    if t == "message" and "session_id" in o:
        return "droid", "type=message with session_id"
    if t in _OPENCODE_TYPES and ("sessionID" in o or "part" in o):
        return "opencode", f"type={t} with sessionID/part"
    if t in ("thought", "text", "end") and ("data" in o or "stopReason" in o):
        return "grok_stream", f"type={t} with data/stopReason"
    if t in ("tool_call", "tool_call_update") and "toolCallId" in o:
        return "grok_stream", f"type={t} with toolCallId"
    if t in ("available_commands", "available_commands_update"):
        return "grok_stream", f"type={t}"
    if t == "backend_tool_call" and isinstance(o.get("kind"), dict):
        return "grok_chat", "type=backend_tool_call with kind"
    # beyond the viewer's rules: shapes it would have mislabeled as claude
    if t in ("system", "user", "assistant") and "content" in o and "message" not in o and "session_id" not in o:
        return "grok_chat", f"type={t} with top-level content (chat_history row)"
    if t in ("message", "function_call", "function_call_output", "reasoning") and "payload" not in o and (
            "call_id" in o or "role" in o):
        return "codex", f"type={t} response item without envelope (early rollout)"
    if t in ("assistant", "user", "result") and ("message" in o or "parent_tool_use_id" in o or "num_turns" in o):
        return "claude", f"type={t} with message/parent_tool_use_id"
    return None


def weak_obj(o: dict) -> tuple[str, str] | None:
    """Evidence too weak to override a rule but better than nothing: (format, reason) or None."""
    t = o.get("type")
    if t in _CLAUDE_SESSION_META and any(k in o for k in _CLAUDE_SESSION_KEYS):
        return "claude_session", f"type={t} Claude session-store metadata row"
    if t == "system" and o.get("subtype") in _CLAUDE_HEARTBEATS:
        return "claude", f"system/{o.get('subtype')} (Claude heartbeat)"
    return None


def mostly_objects(lines: list[bytes]) -> bool:
    """Most lines of the sample that start with ``{`` parse, each on its own, as a JSON object:
    JSON Lines (a banner's text lines are neither).  A document spread over several lines has
    almost none (its object lines are a lone ``{`` or items followed by commas), so line-oriented
    reading wins whenever this holds."""
    ls = [ln for ln in lines if ln.lstrip()[:1] == b"{"]
    return sum(1 for ln in ls if isinstance(_loads(ln), dict)) * 2 > len(ls) > 0


_KEY_LINE = re.compile(rb'\s*"(?:[^"\\]|\\.)*"\s*:')


def document_head(first_lines: list[bytes]) -> bool:
    """The sample starts a JSON document spread over several lines (a lone ``{`` / ``[`` line, or an
    object line that does not parse followed by a ``"key":`` line).  Callers check
    `mostly_objects` too: a broken first line followed by a JSON string is not a document when the
    lines after it are JSON objects (it turned a whole transcript into one unknown document)."""
    lines = [ln.strip() for ln in first_lines if ln.strip()]
    if len(lines) < 2:
        return False
    a, b = lines[0], lines[1]
    if a in (b"{", b"["):
        return True
    return a.startswith(b"{") and _KEY_LINE.match(b) is not None and _loads(a) is None


def _document(first_lines: list[bytes], exp: str | None, why: str) -> tuple[str, str]:
    head = b"\n".join(first_lines[:400])
    if _DOC_SESSION.search(head) and _DOC_MESSAGES.search(head):
        ev = "one JSON document over several lines with sessionId and messages[] (Gemini CLI chat recording)"
        return "gemini_chat", ev + (f"; {why}" if exp else "")
    return "unknown", ("a JSON document over several lines (not JSON Lines) of no known format"
                       + (f"; {why}" if exp else ""))


def _loads(raw: bytes):
    try:
        return orjson.loads(raw)
    except Exception:  # noqa: BLE001
        pass
    try:
        return json.loads(raw.decode("utf-8", "replace"))
    except Exception:  # noqa: BLE001
        return None


def _banner_note(lines: list[bytes]) -> str:
    blob = b"\n".join(lines[:40])
    if b"NVIDIA" in blob and (b"Container" in blob or b"container" in blob or b"==" in blob):
        return " (looks like the NGC container banner only)"
    return ""


def detect_format(first_lines: list[bytes], harness: str | None = None, source: str = "") -> tuple[str, str]:
    """Choose the format of a source from its first lines (raw bytes, newline optional)."""
    try:
        return _detect(first_lines, harness, source)
    except Exception as e:  # noqa: BLE001 - detection must never raise
        exp, why = expected_format(harness, source)
        return exp or "unknown", f"detection failed ({type(e).__name__}); {why}"


def _detect(first_lines: list[bytes], harness: str | None, source: str) -> tuple[str, str]:
    exp, why = expected_format(harness, source)
    nonblank = [ln for ln in first_lines if ln.strip()]
    if not nonblank:
        return "empty", "no non-blank line" + (f"; {why}" if exp else "")
    objs = []
    n_lead = 0
    for i, raw in enumerate(nonblank):
        s = raw.lstrip()
        if not objs and (not s.startswith((b"{", b"[")) or RUNNER_LINE.match(s)):
            n_lead += 1
            continue
        if not objs and document_head(nonblank[i:i + 2]) and not mostly_objects(nonblank[i:]):
            fmt, ev = _document(nonblank[i:], exp, why)
            return fmt, ev + (f"; skipped {n_lead} leading non-JSON lines" if n_lead else "")
        o = _loads(raw)
        if isinstance(o, dict):
            objs.append(o)
        if len(objs) >= SNIFF_OBJECTS:
            break
    if not objs:
        ev = f"no JSON object in the first {len(nonblank)} non-blank lines{_banner_note(nonblank)}"
        if exp and exp not in ("codex_text", "codex"):
            ev += f"; harness expected {exp} ({why})"
        return "codex_text", ev
    lead = f"; skipped {n_lead} leading non-JSON lines" if n_lead else ""
    hit = None
    for i, o in enumerate(objs):
        hit = sniff_obj(o)
        if hit:
            hit = (hit[0], f"JSON line {i + 1}: {hit[1]}")
            break
    if hit is None:
        for i, o in enumerate(objs):
            hit = weak_obj(o)
            if hit:
                hit = (hit[0], f"JSON line {i + 1}: {hit[1]} (weak; no rule matched)")
                break
    if hit is None:
        types = sorted({str(o.get("type", o.get("role"))) for o in objs})[:6]
        return "unknown", (f"no known format matches the first {len(objs)} JSON lines (types {', '.join(types)})"
                           + (f"; {why}, not read as that" if exp else "") + lead)
    fmt, reason = hit
    if exp is None:
        return fmt, f"content: {reason}; {why}{lead}"
    if fmt == exp or fmt in _FAMILY.get(exp, ()):
        return fmt, f"{why}; content agrees: {reason}{lead}"
    if exp == "unknown":
        return fmt, f"{why}; content: {reason}{lead}"
    return fmt, f"content contradicts {why}: {reason} -> {fmt}{lead}"
