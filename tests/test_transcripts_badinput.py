"""Bad input loses nothing and stops nothing: every problem is a ParseError with its line number,
the parse always ends with exactly one SessionEnd, and nothing raises (fuzzed)."""

from __future__ import annotations

import gzip
import io
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.transcripts import parse_source
from forensics.transcripts.events import ParseError, Record, SessionEnd, ToolCall
from forensics.transcripts.reader import HUGE_LINE

DATA = Path(__file__).parent / "data" / "transcripts"
INIT = b'{"type":"system","subtype":"init","claude_code_version":"2.1","cwd":"/w"}'
PROGRESS = b'{"type":"system","subtype":"task_progress","task_id":"b1"}'


def run(data: bytes, harness: str | None = "claude", source: str = "transcript.jsonl", stream=None):
    events = list(parse_source(stream if stream is not None else io.BytesIO(data), source=source, harness=harness))
    assert isinstance(events[-1], SessionEnd)
    assert sum(isinstance(e, SessionEnd) for e in events) == 1
    return events


def errors(events):
    return [(e.reason, e.line) for e in events if isinstance(e, ParseError)]


def test_empty_file():
    ev = run(b"")
    assert errors(ev) == [("empty_file", None)]
    assert ev[-1].end_reason == "empty" and ev[-1].format == "empty" and ev[-1].last_line is None
    ev = run(b"\n\n  \n")
    assert errors(ev) == [("empty_file", None)] and ev[-1].end_reason == "empty" and ev[-1].last_line == 3


def test_invalid_json_and_non_object_and_truncated_lines_keep_their_line_numbers():
    data = b"\n".join([INIT, b'{"type": "assistant", oops}', b"[1, 2]", b"", b"plain stdout noise", PROGRESS,
                       b'{"type":"result","subtype":"succ'])
    ev = run(data)
    assert errors(ev) == [("invalid_json", 2), ("bad_record", 3), ("invalid_json", 5), ("truncated_line", 7)]
    recs = {r.line: r for r in ev if isinstance(r, Record)}
    assert sorted(recs) == [1, 2, 3, 5, 6, 7]          # blank line 4 is not a record
    assert recs[2].rtype == "invalid" and recs[3].rtype == "non_object" and recs[5].text == "plain stdout noise"
    pe = [e for e in ev if isinstance(e, ParseError)]
    assert pe[0].excerpt == '{"type": "assistant", oops}' and pe[0].byte_offset == len(INIT) + 1
    end = ev[-1]
    assert end.truncated_last_line and end.cut_off and end.end_reason == "cut_off" and end.last_line == 7


def test_invalid_utf8_is_replaced_and_reported():
    bad = b'{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"caf\xe9 \xff"}]}}'
    ev = run(b"\n".join([INIT, bad, PROGRESS]) + b"\n")
    assert errors(ev) == [("invalid_utf8", 2)]
    (rec,) = [r for r in ev if isinstance(r, Record) and r.line == 2]
    assert rec.text == "caf\ufffd \ufffd" and rec.rtype == "assistant"


def test_invalid_utf8_in_plain_text():
    ev = run(b"hello\n\xff\xfeworld\n", harness="codex")
    assert errors(ev) == [("invalid_utf8", 2)]
    assert [r.text for r in ev if isinstance(r, Record)] == ["hello", "\ufffd\ufffdworld"]


def test_unknown_record_type_in_known_format():
    ev = run(b"\n".join([INIT, b'{"type":"brand_new_thing","x":1}', PROGRESS]) + b"\n")
    (pe,) = [e for e in ev if isinstance(e, ParseError)]
    assert (pe.reason, pe.line) == ("unknown_record", 2) and "brand_new_thing" in pe.detail
    assert [r.rtype for r in ev if isinstance(r, Record)] == ["system", "brand_new_thing", "system"]


def test_bad_field_shapes_do_not_raise():
    lines = [INIT,
             b'{"type":"assistant","message":"not a dict"}',
             b'{"type":"assistant","message":{"content":[1,null,{"type":"tool_use","id":7,"name":null,"input":"x"}]}}',
             b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":null,"content":{"a":1}}]}}',
             b'{"type":"result","is_error":"yes","num_turns":"3","usage":[1]}']
    ev = run(b"\n".join(lines) + b"\n")
    assert errors(ev) == []
    (call,) = [e for e in ev if isinstance(e, ToolCall)]
    assert call.call_id == "7" and call.kind == "other" and call.args == {"raw": "x"}
    assert ev[-1].terminal_line == 5


def test_gzip_transcript_detected_by_magic_bytes():
    raw = (DATA / "claude.jsonl").read_bytes()
    ev = run(gzip.compress(raw), source="transcript.jsonl")
    plain = run(raw)
    assert len(ev) == len(plain) and ev[-1].end_reason == "api_error"
    assert "gzip-compressed" in ev[-1].format_evidence
    assert [type(e).__name__ for e in ev] == [type(e).__name__ for e in plain]


def test_corrupt_gzip_stops_with_an_error_not_an_exception():
    blob = gzip.compress((DATA / "claude.jsonl").read_bytes() * 50)
    ev = run(blob[: len(blob) // 2])
    reasons = [r for r, _ in errors(ev)]
    assert reasons[-1] == "compressed"
    assert sum(isinstance(e, Record) for e in ev) > 25


class _NonSeekable(io.RawIOBase):
    """A stream that can only be read forward in small pieces (like a tar member)."""

    def __init__(self, data: bytes, piece: int = 7):
        self._b = io.BytesIO(data)
        self._piece = piece

    def readable(self):
        return True

    def seekable(self):
        return False

    def read(self, n=-1):
        return self._b.read(min(self._piece, n) if n and n > 0 else self._piece)


def test_non_seekable_stream_in_small_pieces():
    raw = (DATA / "claude.jsonl").read_bytes()
    a = run(b"", stream=_NonSeekable(raw))
    b = run(raw)
    assert [(type(e).__name__, getattr(e, "line", None)) for e in a] == \
        [(type(e).__name__, getattr(e, "line", None)) for e in b]
    gz = run(b"", stream=_NonSeekable(gzip.compress(raw), 5))
    assert len(gz) == len(b)


def test_crlf_line_endings():
    raw = (DATA / "gemini.jsonl").read_bytes().replace(b"\n", b"\r\n")
    ev = run(raw, harness="gemini")
    assert errors(ev) == [] and ev[-1].end_reason == "success" and ev[-1].last_line == 10


HEAD = b'{"type":"user","message":{"content":"'
TAIL = b'"}}'


def test_huge_line_is_measured_with_bounded_memory(tmp_path):
    path = tmp_path / "huge.jsonl"
    size = 100 * 1024 * 1024
    with path.open("wb") as f:
        f.write(INIT + b"\n")
        f.write(HEAD)
        chunk = b"x" * (1 << 20)
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.write(TAIL + b"\n")
        f.write(PROGRESS + b"\n")
    tracemalloc.start()
    try:
        with path.open("rb") as f:
            ev = run(b"", stream=f)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024
    assert errors(ev) == [("huge_line", 2)]
    (pe,) = [e for e in ev if isinstance(e, ParseError)]
    assert pe.excerpt.startswith('{"type":"user"') and len(pe.excerpt) == 200
    recs = [r for r in ev if isinstance(r, Record)]
    assert [(r.line, r.rtype) for r in recs] == [(1, "system"), (2, "oversize"), (3, "system")]
    assert recs[1].nbytes == len(HEAD) + size + len(TAIL) > HUGE_LINE
    assert recs[2].byte_offset == len(INIT) + 1 + recs[1].nbytes + 1
    assert ev[-1].last_line == 3


def test_line_just_below_the_limit_is_decoded(tmp_path):
    body = b'{"type":"user","message":{"content":"' + b"y" * (HUGE_LINE - 100) + b'"}}'
    ev = run(INIT + b"\n" + body + b"\n")
    assert errors(ev) == []
    (rec,) = [r for r in ev if isinstance(r, Record) and r.line == 2]
    assert rec.rtype == "user" and len(rec.text) == HUGE_LINE - 100


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=2048), harness=st.sampled_from([None, "claude", "codex", "opencode", "kimi", "grok"]))
def test_fuzz_arbitrary_bytes_never_raise(data, harness):
    ev = run(data, harness=harness)
    assert all(isinstance(e, (Record, ToolCall, ParseError, SessionEnd)) or type(e).__name__ == "ToolResult"
               for e in ev)


_pieces = st.sampled_from([
    INIT, PROGRESS, b'{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"Bash",'
    b'"input":{"command":"ls"}}]}}', b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t",'
    b'"content":"Exit code 2\\nx","is_error":true}]}}', b'{"type":"result","is_error":false}', b"{", b"\xff\xfe",
    b'{"timestamp":"2026-07-01T00:00:00Z","type":"event_msg","payload":{"type":"task_complete"}}',
    b'{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"Shell","arguments":"{\\"comm"}}]}',
    b'{"type":"tool_use","part":{"tool":"bash","state":{"status":"error"}}}', b"null", b"== banner ==", b"",
    b"\x1f\x8b", b'{"type":"tool_call","subtype":"completed","tool_call":{"xToolCall":{"result":7}}}'])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_pieces, max_size=30), sep=st.sampled_from([b"\n", b"\r\n"]), tail=st.booleans())
def test_fuzz_structured_lines_never_raise(parts, sep, tail):
    data = sep.join(parts) + (sep if tail else b"")
    ev = run(data)
    n_lines = len(data.split(b"\n")) - (1 if data.endswith(b"\n") else 0) if data else 0
    for e in ev:
        if isinstance(e, (Record, ParseError)) and e.line is not None:
            assert 1 <= e.line <= max(n_lines, 1)


_KEYS = ["type", "subtype", "role", "message", "content", "id", "model", "usage", "tool_use_id", "is_error", "result",
         "num_turns", "payload", "timestamp", "part", "state", "tool", "callID", "tool_call", "call_id", "tool_calls",
         "function", "arguments", "tool_name", "tool_id", "parameters", "status", "stats", "output", "error", "data",
         "stopReason", "text", "summary", "info", "last_token_usage", "tokens", "cache", "input", "name", "session_id",
         "sessionID", "parentUuid", "uuid", "sessionId", "rate_limit_info", "parent_tool_use_id", "tool_use_result",
         "toolUseResult", "isSidechain", "cwd", "success", "exitCode", "metadata", "exit", "delta", "think", "args",
         "tool_call_id", "last_agent_message", "api_error_status", "terminal_reason", "total_cost_usd", "value",
         "isError", "toolName", "numTurns", "timestamp_ms", "readToolCall", "shellToolCall"]
_TYPES = ["system", "assistant", "user", "result", "tool_progress", "rate_limit_event", "response_item", "event_msg",
          "session_meta", "turn_context", "function_call", "function_call_output", "custom_tool_call", "message",
          "custom_tool_call_output", "reasoning", "token_count", "task_complete", "step_finish", "tool_use", "text",
          "error", "tool_call", "init", "tool_result", "thought", "end", "completion", "completed", "thinking",
          "task_progress", "compact_boundary", "Bash", "exec_command", "apply_patch", "shell"]
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**13), st.floats(allow_nan=False),
                  st.sampled_from(_TYPES), st.text(max_size=20))
_val = st.recursive(_leaf, lambda c: st.one_of(st.lists(c, max_size=4),
                                               st.dictionaries(st.sampled_from(_KEYS + _TYPES), c, max_size=5)),
                    max_leaves=10)
_obj = st.dictionaries(st.sampled_from(_KEYS), _val, max_size=8)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(objs=st.lists(_obj, min_size=1, max_size=4),
       fmt=st.sampled_from(["claude", "claude_session", "codex", "codex_text", "opencode", "cursor", "gemini", "kimi",
                            "droid", "grok_stream", "grok_chat", "unknown"]))
def test_fuzz_field_shapes_every_parser_handles_without_bad_field(objs, fmt):
    """Records of the right keys with values of any shape: no parser trips over them."""
    import orjson

    data = b"\n".join(orjson.dumps(o) for o in objs) + b"\n"
    ev = list(parse_source(io.BytesIO(data), source="x", fmt=fmt))
    assert isinstance(ev[-1], SessionEnd) and ev[-1].format == fmt
    assert not [e for e in ev if isinstance(e, ParseError) and e.reason in ("bad_field", "internal_error")]
    assert sum(isinstance(e, Record) for e in ev) == len(objs)
