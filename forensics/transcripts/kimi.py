"""Kimi CLI stream-json (spec §5.8): role-based lines with no ``type``.

Assistant content blocks ``think`` / ``text``; ``tool_calls[].function.arguments`` is a JSON
string that may be PARTIAL (kept as ``{"raw": ...}`` plus best-effort known keys).  Tool results
are ``role:"tool"`` lines with ``tool_call_id``; their ``<system>…</system>`` preamble is stripped
and ``ERROR: Command failed with exit code: N.`` gives the exit code.  No timestamps, no
terminal marker.
"""

from __future__ import annotations

from . import envelope
from .base import Parser, dumps_text, text_of
from .events import Record, ToolResult

_ROLES = frozenset(("assistant", "tool", "user", "system"))


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
        if role in _ROLES:
            return Record(src, ln, off, nb, fmt, role, None, role, None, None, text_of(o.get("content")))
        return self.unknown(o, role, ln, off, nb, "role")
