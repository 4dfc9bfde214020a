"""Transcript format detection (spec §5.0, §5.1).

``detect_format(first_lines, harness, source) -> (format, evidence)``

Both signals are used and recorded in the evidence string:

1. the harness from result.json (and the file name: ``codex_session.jsonl``, ``chat_history.jsonl``)
   gives the *expected* format (§5.1);
2. the content is sniffed with the viewer's rule order (§5.0) over the first JSON object lines
   (leading non-JSON lines, e.g. the container banner, are skipped); the first line that matches
   a rule decides.

A content match that contradicts the harness wins, and the evidence says so.  When no rule
matches, the harness decides; with no harness either, the viewer's default (claude).  A file
with no JSON line at all is ``codex_text``; a file with no non-blank line is ``empty``.
"""

from __future__ import annotations

import json
import posixpath

import orjson

FORMATS = ("claude", "claude_session", "codex", "codex_text", "opencode", "cursor", "gemini", "kimi",
           "droid", "grok_stream", "grok_chat", "empty", "unknown")

_CLAUDE_H = {"claude", "zai-claude", "minimax-claude", "kimi-claude", "kinetic-claude", "deepseek-claude",
             "qwen-claude", "longcat-claude", "or-fable", "openrouter-fable", "or-opus", "openrouter-opus",
             "ccr-claude", "lfm-claude"}
_OPENCODE_H = {"opencode", "opencode-nemotron", "nvcf-nemotron", "hy3", "hy3-claude", "tinker", "inkling",
               "opencode-inkling", "lfm-opencode", "opencode-or"}
_FAMILY = {"claude": {"claude", "claude_session"}, "claude_session": {"claude", "claude_session"},
           "codex": {"codex", "codex_text"}, "codex_text": {"codex", "codex_text"},
           "grok_stream": {"grok_stream", "grok_chat"}, "grok_chat": {"grok_stream", "grok_chat"}}

_CLAUDE_INIT_KEYS = ("claude_code_version", "mcp_servers", "slash_commands", "agents", "skills")
_CODEX_TYPES = {"session_meta", "event_msg", "response_item", "task_started", "turn_context"}
_OPENCODE_TYPES = {"step_start", "step_finish", "tool_use", "text", "text_delta", "error", "reasoning"}
_CURSOR_TYPES = {"tool_call", "result", "user", "assistant"}


def expected_format(harness: str | None, source: str | None) -> tuple[str | None, str]:
    """Format the harness (and the file name) implies, with the reason."""
    name = posixpath.basename((source or "").replace("\\", "/")).lower()
    if name.startswith("codex_session") or name.startswith("rollout-") or "/.codex/sessions/" in (source or ""):
        return "codex", f"file {name} is a Codex rollout"
    if name.startswith("chat_history"):
        return "grok_chat", f"file {name} is a Grok chat_history"
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
    # beyond the viewer's rules: shapes it would have mislabeled as claude
    if t in ("system", "user", "assistant") and "content" in o and "message" not in o and "session_id" not in o:
        return "grok_chat", f"type={t} with top-level content (chat_history row)"
    if t in ("message", "function_call", "function_call_output", "reasoning") and "payload" not in o and (
            "call_id" in o or "role" in o):
        return "codex", f"type={t} response item without envelope (early rollout)"
    if t in ("assistant", "user", "result") and ("message" in o or "parent_tool_use_id" in o or "num_turns" in o):
        return "claude", f"type={t} with message/parent_tool_use_id"
    return None


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
    for raw in nonblank:
        s = raw.lstrip()
        if not objs and not s.startswith((b"{", b"[")):
            n_lead += 1
            continue
        o = _loads(raw)
        if isinstance(o, dict):
            objs.append(o)
        if len(objs) >= 8:
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
        t0 = objs[0].get("type", objs[0].get("role"))
        if exp is not None:
            return exp, f"{why}; content inconclusive (first type={t0!r}){lead}"
        return "claude", f"no sniff rule matched (first type={t0!r}); default claude (§5.0 rule 11){lead}"
    fmt, reason = hit
    if exp is None:
        return fmt, f"content: {reason}; {why}{lead}"
    if fmt == exp or fmt in _FAMILY.get(exp, ()):
        return fmt, f"{why}; content agrees: {reason}{lead}"
    if exp == "unknown":
        return fmt, f"{why}; content: {reason}{lead}"
    return fmt, f"content contradicts {why}: {reason} -> {fmt}{lead}"
