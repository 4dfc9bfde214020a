"""Normalized events every transcript parser emits.

A parser reads one source file line by line (see `forensics.transcripts.reader`) and yields
these events; the ingest turns them into rows of `records`, `tool_calls`, `tool_results`,
`session_end` and `parse_errors` (schema in `forensics.store.schema`).  Every event keeps the
source line number it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# Normalized tool kinds (tool_calls.kind).
KINDS = ("read", "write", "edit", "exec", "list", "search", "task", "other")


@dataclass(slots=True)
class Record:
    source: str
    line: int
    byte_offset: int
    nbytes: int
    format: str
    rtype: str | None = None
    subtype: str | None = None
    role: str | None = None
    msg_id: str | None = None
    ts: datetime | None = None
    text: str | None = None
    n_tool_calls: int = 0
    n_tool_results: int = 0
    parent_id: str | None = None
    is_sidechain: bool = False
    is_api_error: bool = False
    # usage carried by the record (deduplicated by msg_id at session end); not a column
    usage: dict[str, Any] | None = None


@dataclass(slots=True)
class Heartbeat(Record):
    """A Record the parser recognised from its leading bytes without decoding it: a Claude
    ``system`` heartbeat (``task_progress`` and its kin), tens of thousands per transcript.  Only
    source, line, offset, size, format, rtype and subtype are meaningful; the ingest stores these
    in bulk."""


@dataclass(slots=True)
class HeartbeatRun:
    """Consecutive heartbeat lines of one subtype, as one event: what ``parse_source(...,
    heartbeat_runs=True)`` yields instead of one `Heartbeat` per line.  Line ``first_line + i``
    starts at byte ``offsets[i]``; the lines are consecutive (no blank line between them), so
    line i is ``offsets[i + 1] - offsets[i] - 1`` bytes long and the last one ends at
    ``end_offset``.  Expanded, it is exactly the `Heartbeat` records of those lines."""

    source: str
    format: str
    rtype: str
    subtype: str
    first_line: int
    offsets: Any          # array('q') of byte offsets, one per line
    end_offset: int       # offset just past the last line's last byte (before its newline)

    def expand(self) -> list[Heartbeat]:
        """The per-line records this run stands for."""
        ends = [o - 1 for o in self.offsets[1:]] + [self.end_offset]
        return [Heartbeat(self.source, self.first_line + i, o, e - o, self.format, self.rtype, self.subtype)
                for i, (o, e) in enumerate(zip(self.offsets, ends))]


@dataclass(slots=True)
class ToolCall:
    source: str
    line: int
    call_id: str | None
    tool: str
    kind: str
    args: dict[str, Any]
    command: str | None = None
    paths: list[str] = field(default_factory=list)
    cwd: str | None = None
    ts: datetime | None = None
    parent_id: str | None = None
    background: bool = False
    call_seq: int = 0  # assigned by the ingest
    # a call made by a subagent: the subagent's id (Claude ``agentId``) and the tool-use id of the
    # call that started it (Claude ``parentToolUseID`` / ``parent_tool_use_id``)
    agent_id: str | None = None
    parent_call_id: str | None = None
    # found by `structural.recover` in the model APIs' own shapes (a file in no known format, or a
    # record of a type its format's parser does not know); a known record's call of the same id
    # replaces it at ingest
    recovered: bool = False


@dataclass(slots=True)
class ToolResult:
    source: str
    line: int
    call_id: str | None
    text: str
    exit_code: int | None = None
    is_error: bool | None = None
    status: str | None = None
    ts: datetime | None = None
    running_session: str | None = None
    call_seq: int | None = None  # assigned by the ingest
    # found by `structural.recover` (see ToolCall.recovered): the ingest keeps a known record's
    # result of the same call id instead of it
    recovered: bool = False


@dataclass(slots=True)
class SessionEnd:
    source: str
    terminal_line: int | None = None
    terminal_type: str = "none"
    subtype: str | None = None
    is_error: bool | None = None
    stop_reason: str | None = None
    terminal_reason: str | None = None
    api_error_status: int | None = None
    api_error_text: str | None = None
    api_error_line: int | None = None
    n_api_errors: int = 0
    rate_limited: bool = False
    cut_off: bool = False
    truncated_last_line: bool = False
    end_reason: str = "unknown"
    num_turns: int | None = None
    n_assistant_messages: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    usage_source: str = "none"
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    last_line: int | None = None
    # Added by the transcript parsers (optional, additive): the format the source was read as,
    # why (harness hint / content sniff / contradiction), and distinct session ids seen
    # (several for appended opencode streams).
    format: str | None = None
    format_evidence: str | None = None
    n_sessions: int | None = None
    # tokens in the model context at the end (Kimi context ``_usage.token_count``, last value):
    # a context size, not tokens consumed, so kept apart from input/output tokens
    context_tokens: int | None = None


@dataclass(slots=True)
class ParseError:
    source: str
    line: int | None
    reason: str
    detail: str = ""
    excerpt: str = ""
    byte_offset: int | None = None
