"""Transcript parsers, per format, on small hand-written fixtures (tests/data/transcripts/)
following the shapes of spec/archive-format.md §5."""

from __future__ import annotations

import io
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from forensics.transcripts import detect_format, parse_source
from forensics.transcripts.events import ParseError, Record, SessionEnd, ToolCall, ToolResult

DATA = Path(__file__).parent / "data" / "transcripts"
UTC = timezone.utc


class Parsed:
    def __init__(self, events: list):
        self.events = events
        self.records = [e for e in events if isinstance(e, Record)]
        self.calls = [e for e in events if isinstance(e, ToolCall)]
        self.results = [e for e in events if isinstance(e, ToolResult)]
        self.errors = [e for e in events if isinstance(e, ParseError)]
        assert isinstance(events[-1], SessionEnd)
        assert sum(isinstance(e, SessionEnd) for e in events) == 1
        self.end: SessionEnd = events[-1]

    def kinds(self) -> Counter:
        return Counter(c.kind for c in self.calls)

    def result(self, call_id: str) -> ToolResult:
        (r,) = [r for r in self.results if r.call_id == call_id]
        return r

    def call(self, call_id: str) -> ToolCall:
        (c,) = [c for c in self.calls if c.call_id == call_id]
        return c


def parse(name: str, harness: str | None = None, source: str | None = None, data: bytes | None = None) -> Parsed:
    raw = data if data is not None else (DATA / name).read_bytes()
    return Parsed(list(parse_source(io.BytesIO(raw), source=source or name, harness=harness)))


# ---------------------------------------------------------------------------------- claude
def test_claude_stream_json_full_session():
    p = parse("claude.jsonl", "claude")
    assert len(p.records) == 25 and [r.line for r in p.records] == list(range(1, 26))
    assert p.errors == []
    assert Counter(r.rtype for r in p.records) == {"assistant": 10, "user": 7, "system": 5, "tool_progress": 1,
                                                   "rate_limit_event": 1, "result": 1}
    assert [c.tool for c in p.calls] == ["Read", "Bash", "TaskOutput", "Edit", "Bash", "Agent", "Glob"]
    assert p.kinds() == {"read": 1, "exec": 2, "task": 2, "edit": 1, "list": 1}
    assert len(p.results) == 7
    # every result links to a call
    assert {r.call_id for r in p.results} == {c.call_id for c in p.calls}
    bg = p.call("toolu_02")
    assert bg.background and bg.command == "uv run python check.py 2>&1 | tail -5"
    assert bg.cwd == "/workspace/problems/01_fp8_gemm"  # session cwd from system/init
    assert p.result("toolu_02").running_session == "bash_1"
    out = p.result("toolu_03")  # TaskOutput envelope
    assert (out.exit_code, out.status, out.text) == (0, "completed", "shape=0 ok\nPASS")
    fail = p.result("toolu_05")  # Bash failure: leading "Exit code N"
    assert (fail.exit_code, fail.is_error) == (1, True)
    assert fail.text == "FAIL: shape 0 mismatch (max_abs_diff=0.5)"
    assert p.call("toolu_01").paths == ["/workspace/problems/01_fp8_gemm/reference.py"]
    # subagent lines
    glob = p.call("toolu_07")
    assert glob.parent_id == "toolu_06" and glob.paths == ["/workspace", "**/*.py"]
    sub = [r for r in p.records if r.is_sidechain]
    assert [r.line for r in sub] == [19, 20]
    # text / thinking / compact summary; progress frames carry no text
    by_line = {r.line: r for r in p.records}
    assert by_line[4].text == "I'll read the reference first." and by_line[3].text is None
    assert by_line[22].subtype == "compact_boundary" and by_line[22].text.startswith("Conversation compacted")
    assert by_line[9].text is None and by_line[9].subtype == "task_progress"
    assert by_line[24].is_api_error and by_line[24].text == "API Error: 402 Insufficient credits"
    assert by_line[3].msg_id == by_line[5].msg_id == "msg_01"
    e = p.end
    assert (e.terminal_type, e.terminal_line, e.subtype, e.is_error) == ("result", 25, "success", True)
    assert (e.terminal_reason, e.api_error_status, e.end_reason) == ("api_error", 402, "api_error")
    assert e.stop_reason == "stop_sequence" and e.num_turns == 9 and e.n_assistant_messages == 7
    assert e.n_api_errors == 2 and e.api_error_line == 25 and not e.rate_limited and not e.cut_off
    # the terminal record's usage is preferred
    assert (e.input_tokens, e.output_tokens, e.cache_read_tokens, e.cache_creation_tokens) == (36, 310, 7000, 70)
    assert e.cost_usd == pytest.approx(0.42) and e.usage_source == "terminal_record"
    assert e.format == "claude" and "content agrees" in e.format_evidence and e.last_line == 25


def test_claude_usage_dedup_by_message_id_and_truncated_tail():
    p = parse("claude_cut.jsonl", "claude")
    assert len(p.records) == 9
    (err,) = p.errors
    assert (err.reason, err.line) == ("truncated_line", 9)
    assert err.excerpt.startswith('{"type":"assistant"')
    e = p.end
    # msg_a repeated on 3 lines and msg_b on 2: each counted once
    assert (e.input_tokens, e.output_tokens, e.cache_read_tokens, e.cache_creation_tokens) == (11, 22, 100, 5)
    assert e.usage_source == "dedup_messages" and e.n_assistant_messages == 2 and e.cost_usd is None
    assert e.cut_off and e.truncated_last_line and e.end_reason == "cut_off" and e.terminal_type == "none"
    mon = p.call("toolu_m")
    assert (mon.kind, mon.background, mon.command) == ("exec", True, "uv run python benchmark.py")
    assert p.call("toolu_w").kind == "write"


def test_claude_container_banner_is_records_not_errors():
    banner = b"\n".join([b"=============", b"== PyTorch ==", b"=============", b"",
                         b"NVIDIA Release 25.01 (build 1)", b"PyTorch Version 2.6.0"]) + b"\n"
    body = (DATA / "claude.jsonl").read_bytes()
    p = parse("claude.jsonl", "claude", data=banner + body)
    banners = [r for r in p.records if r.rtype == "banner"]
    assert [r.line for r in banners] == [1, 2, 3, 5, 6] and banners[1].text == "== PyTorch =="
    assert p.errors == []
    assert p.end.terminal_line == 31 and p.end.last_line == 31 and p.end.end_reason == "api_error"
    assert "skipped 5 leading non-JSON lines" in p.end.format_evidence


def test_claude_rate_limit_rejected_without_result():
    lines = [b'{"type":"system","subtype":"init","claude_code_version":"2.1","cwd":"/w"}',
             b'{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}]}}',
             b'{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1785000000,'
             b'"rateLimitType":"five_hour","overageStatus":"rejected","overageDisabledReason":"out_of_credits"}}',
             b'{"type":"assistant","message":{"id":"m2","model":"<synthetic>","content":[{"type":"text",'
             b'"text":"You\'ve hit your session limit \xc2\xb7 resets 2:20pm (UTC)"}]}}']
    p = parse("t.jsonl", "claude", data=b"\n".join(lines) + b"\n")
    e = p.end
    assert e.rate_limited and e.n_api_errors == 2 and e.api_error_line == 4
    assert e.end_reason == "rate_limited" and e.cut_off and e.terminal_type == "none"
    assert [r.line for r in p.records if r.is_api_error] == [3, 4]


def test_claude_fixture_error_form_and_429_status():
    lines = [b'{"type":"system","subtype":"init","claude_code_version":"2.1"}',
             b'{"type":"assistant","is_api_error_message":true,"error":"model_not_found"}',
             b'{"type":"result","subtype":"success","is_error":true,"num_turns":1,"result":"API Error: 429 rate limited"}']
    e = parse("t.jsonl", "claude", data=b"\n".join(lines) + b"\n").end
    assert e.api_error_status == 429 and e.rate_limited and e.end_reason == "rate_limited"
    assert e.num_turns == 1 and e.usage_source == "none"


def test_claude_session_store_form():
    p = parse("claude_session.jsonl", "claude")
    assert p.end.format == "claude_session"
    assert len(p.records) == 6 and p.errors == []
    assert [c.tool for c in p.calls] == ["Bash", "Read"]
    r = p.result("toolu_s1")
    assert r.text == "20260719_101010_claude_opus_01\n" and r.ts == datetime(2026, 7, 20, 10, 0, 6, tzinfo=UTC)
    read = p.call("toolu_s2")
    assert read.parent_id == "a3" and read.cwd == "/home/agent/run/repo/problems/01"
    side = [rec.line for rec in p.records if rec.is_sidechain]
    assert side == [5]
    e = p.end
    assert e.first_ts == datetime(2026, 7, 20, 10, 0, tzinfo=UTC)
    assert e.last_ts == datetime(2026, 7, 20, 10, 0, 9, tzinfo=UTC)
    assert e.end_reason == "no_marker_format" and not e.cut_off
    assert (e.input_tokens, e.output_tokens) == (7, 11) and e.usage_source == "dedup_messages"


# ----------------------------------------------------------------------------------- codex
def test_codex_rollout():
    p = parse("codex_session.jsonl", "codex", source="codex_session.jsonl")
    assert p.end.format == "codex" and len(p.records) == 22
    assert [c.tool for c in p.calls] == ["exec_command", "write_stdin", "apply_patch", "shell", "update_plan"]
    assert p.kinds() == {"exec": 3, "edit": 1, "other": 1}
    ex = p.call("call_A")
    assert (ex.command, ex.cwd) == ("uv run check.py", "/workspace/problems/03_topk")
    assert ex.ts == datetime(2026, 7, 21, 9, 0, 3, tzinfo=UTC)
    a = p.result("call_A")
    assert (a.exit_code, a.running_session, a.text) == (None, "4242", "building...\n")
    b = p.result("call_B")  # write_stdin continues process 4242 and reports its exit
    assert (b.exit_code, b.running_session, b.text) == (0, "4242", "shape=0 ok\nPASS\n")
    assert p.call("call_C").paths == ["solution.py", "notes.md"]
    assert p.result("call_C").is_error is False
    sh = p.call("call_D")  # old argv form
    assert sh.command == "cat ../../outputs/runs/old/solution.py" and sh.kind == "exec"
    d = p.result("call_D")  # old JSON output form
    assert (d.exit_code, d.text) == (1, "cat: no such file\n")
    # UI duplicates stay records, never tool events
    dup = [r for r in p.records if r.rtype == "event_msg" and r.subtype == "agent_message"]
    assert len(dup) == 1 and dup[0].text == "Done: check passes."
    (err,) = p.errors
    assert (err.reason, err.line) == ("unknown_record", 21) and "hologram_frame" in err.detail
    assert [(r.rtype, r.subtype) for r in p.records if r.line == 21] == [("event_msg", "hologram_frame")]
    e = p.end
    assert (e.terminal_type, e.terminal_line, e.end_reason) == ("task_complete", 22, "success")
    # sum of last_token_usage over token_count events
    assert (e.input_tokens, e.output_tokens, e.cache_read_tokens, e.reasoning_tokens) == (2200, 80, 1900, 25)
    assert e.usage_source == "token_count_events" and e.n_sessions == 1
    assert e.first_ts == datetime(2026, 7, 21, 9, 0, tzinfo=UTC)


def test_codex_rollout_without_task_complete_is_cut_off():
    raw = b"\n".join((DATA / "codex_session.jsonl").read_bytes().split(b"\n")[:10]) + b"\n"
    e = parse("codex_session.jsonl", "codex", data=raw).end
    assert e.cut_off and e.end_reason == "cut_off" and not e.truncated_last_line


def test_codex_plain_text_banner_only():
    p = parse("codex_transcript.txt", "codex", source="transcript.jsonl")
    assert p.end.format == "codex_text" and "NGC container banner" in p.end.format_evidence
    assert [r.line for r in p.records] == [2, 3, 4, 6, 8, 10]
    assert all(r.rtype == "banner" for r in p.records) and p.records[1].text == "== CUDA =="
    assert p.errors == [] and p.calls == []
    assert p.end.end_reason == "no_marker_format" and p.end.last_line == 10


def test_text_only_transcript_of_claude_harness_is_cut_off():
    e = parse("codex_transcript.txt", "claude", source="transcript.jsonl").end
    assert e.format == "codex_text" and "harness expected claude" in e.format_evidence
    assert e.cut_off and e.end_reason == "cut_off"


# -------------------------------------------------------------------------------- opencode
def test_opencode_two_appended_streams():
    p = parse("opencode.jsonl", "hy3")
    assert p.end.format == "opencode" and len(p.records) == 12 and p.errors == []
    assert [c.tool for c in p.calls] == ["read", "write", "bash", "edit", "glob"]
    assert p.kinds() == {"read": 1, "write": 1, "exec": 1, "edit": 1, "list": 1}
    # tool_use carries call + result on one line, same call_id
    assert len(p.results) == 4 and all(r.line == p.call(r.call_id).line for r in p.results)
    b = p.result("call_b1")
    assert (b.is_error, b.status, b.exit_code, b.text) == (True, "error", 1, "Command exited with code 1")
    assert p.call("call_b1").command == "python check.py"
    assert p.call("call_g1").paths == ["**/*.cu"]  # still running: call only
    assert p.call("call_r1").ts == datetime.fromtimestamp(1785000002, UTC)
    e = p.end
    assert e.n_sessions == 2 and e.terminal_type == "none" and not e.cut_off
    assert (e.input_tokens, e.output_tokens, e.reasoning_tokens, e.cache_read_tokens, e.cache_creation_tokens) == \
        (300, 50, 5, 200, 10)
    assert e.usage_source == "step_finish" and e.cost_usd == pytest.approx(0.01)
    assert e.n_api_errors == 1 and e.api_error_status == 429 and e.rate_limited and e.api_error_line == 7
    # the 429 was followed by a second stream: the session did not end on it
    assert e.end_reason == "no_marker_format"


def test_opencode_ending_on_error():
    raw = b"\n".join((DATA / "opencode.jsonl").read_bytes().split(b"\n")[:7]) + b"\n"
    e = parse("opencode.jsonl", "opencode", data=raw).end
    assert e.end_reason == "rate_limited" and e.n_sessions == 1


# ------------------------------------------------------------------------ cursor / gemini
def test_cursor():
    p = parse("cursor.jsonl", "cursor")
    assert p.end.format == "cursor" and len(p.records) == 11 and p.errors == []
    assert [c.tool for c in p.calls] == ["read", "shell", "glob", "edit"]
    assert p.kinds() == {"read": 1, "exec": 1, "list": 1, "edit": 1}
    assert p.result("cc1").text == "import torch\n"
    sh = p.result("cc2")
    assert (sh.exit_code, sh.text, sh.is_error) == (1, "FAIL: shape 1\nwarning: x", False)
    assert p.call("cc3").paths == ["/workspace", "**/*.py"]  # completed without started
    ed = p.result("cc4")
    assert (ed.is_error, ed.status, ed.text) == (True, "error", "file not found")
    assert p.call("cc2").ts == datetime.fromtimestamp(1785000001, UTC)
    e = p.end
    assert (e.terminal_type, e.terminal_line, e.end_reason) == ("result", 11, "success")
    assert (e.input_tokens, e.output_tokens, e.cache_read_tokens, e.cache_creation_tokens) == (500, 60, 400, 7)


def test_gemini():
    p = parse("gemini.jsonl", "gemini")
    assert p.end.format == "gemini" and len(p.records) == 10 and p.errors == []
    assert [c.tool for c in p.calls] == ["run_shell_command", "read_file"]
    sh = p.call("g1")
    assert (sh.kind, sh.command, sh.cwd) == ("exec", "python check.py", "/workspace/p")
    assert p.call("g2").paths == ["/workspace/p/missing.py"]
    assert p.result("g1").text == "PASS" and p.result("g1").is_error is False
    assert (p.result("g2").is_error, p.result("g2").text) == (True, "File not found")
    deltas = [r.text for r in p.records if r.subtype == "delta"]
    assert deltas == ["Let me ", "check."]
    e = p.end
    assert e.end_reason == "success" and e.terminal_line == 10 and e.n_api_errors == 1
    assert (e.input_tokens, e.output_tokens, e.cache_read_tokens) == (800, 100, 300)
    assert e.first_ts == datetime(2026, 7, 22, 8, 0, tzinfo=UTC)


def test_gemini_without_result_is_cut_off():
    raw = b"\n".join((DATA / "gemini.jsonl").read_bytes().split(b"\n")[:6]) + b"\n"
    e = parse("gemini.jsonl", "gemini", data=raw).end
    assert e.cut_off and e.end_reason == "cut_off"


# --------------------------------------------------------------------- kimi / droid / grok
def test_kimi_partial_arguments_and_system_envelope():
    p = parse("kimi.jsonl", "kimi")
    assert p.end.format == "kimi" and len(p.records) == 6 and p.errors == []
    assert [c.tool for c in p.calls] == ["Shell", "ReadFile", "WriteFile"]
    assert p.kinds() == {"exec": 1, "read": 1, "write": 1}
    sh = p.call("Shell:0")
    assert sh.command == "python check.py" and sh.args == {"command": "python check.py", "timeout": 600}
    part = p.call("ReadFile:1")
    assert part.args == {"raw": '{"path": "/workspace/sol', "path": "/workspace/sol"}
    assert part.paths == ["/workspace/sol"]
    r = p.result("Shell:0")
    assert (r.exit_code, r.is_error, r.text) == (1, True, "FAIL: shape 2")
    assert p.result("ReadFile:1").text == "     1\timport torch"
    assert p.records[1].text == "I should check the reference.\nRunning the checker."
    assert p.end.end_reason == "no_marker_format" and p.end.first_ts is None


def test_droid():
    p = parse("droid.jsonl", "droid")
    assert p.end.format == "droid" and len(p.records) == 6 and p.errors == []
    (c,) = p.calls
    assert (c.tool, c.kind, c.command, c.cwd) == ("Execute", "exec", "uv run python check.py", "/workspace/problems/05")
    assert p.result("tc1").text == "PASS" and p.result("tc1").is_error is False
    e = p.end
    assert e.api_error_status == 402 and e.end_reason == "api_error" and e.api_error_line == 6


def test_grok_stream():
    p = parse("grok_stream.jsonl", "grok")
    assert p.end.format == "grok_stream" and len(p.records) == 6 and p.calls == []
    assert "".join(r.text for r in p.records if r.rtype == "thought") == "I will read /workspace/problems/06/solution.py"
    e = p.end
    assert (e.terminal_type, e.stop_reason, e.end_reason, e.n_api_errors) == ("end", "EndTurn", "success", 1)
    raw = b"\n".join((DATA / "grok_stream.jsonl").read_bytes().split(b"\n")[:4]) + b"\n"
    assert parse("grok_stream.jsonl", "grok", data=raw).end.end_reason == "cut_off"


def test_grok_chat_history():
    p = parse("chat_history.jsonl", "grok", source="agent_home/.grok/sessions/x/chat_history.jsonl")
    assert p.end.format == "grok_chat" and len(p.records) == 7 and p.errors == []
    assert [(c.call_id, c.tool, c.kind) for c in p.calls] == [
        ("call-1-9", "write", "write"), ("call-2-9", "bash", "exec"), ("call-3-9", "search_replace", "edit")]
    assert p.call("call-1-9").paths == ["solution.py"] and p.call("call-2-9").command == "python check.py"
    assert p.result("call-2-9").is_error is True and p.result("call-1-9").is_error is False
    assert p.records[2].text == "Look at the file."


# ------------------------------------------------------------------------------ detection
@pytest.mark.parametrize("name,fmt", [
    ("claude.jsonl", "claude"), ("claude_session.jsonl", "claude_session"), ("codex_session.jsonl", "codex"),
    ("codex_transcript.txt", "codex_text"), ("opencode.jsonl", "opencode"), ("cursor.jsonl", "cursor"),
    ("gemini.jsonl", "gemini"), ("kimi.jsonl", "kimi"), ("droid.jsonl", "droid"),
    ("grok_stream.jsonl", "grok_stream"), ("chat_history.jsonl", "grok_chat")])
def test_detect_from_content_without_harness(name, fmt):
    lines = (DATA / name).read_bytes().split(b"\n")[:20]
    got, evidence = detect_format(lines, None, "transcript.jsonl")
    assert got == fmt and evidence


def test_detect_content_contradicting_harness_wins():
    lines = (DATA / "opencode.jsonl").read_bytes().split(b"\n")
    fmt, ev = detect_format(lines, "claude", "transcript.jsonl")
    assert fmt == "opencode" and "contradicts" in ev and "claude" in ev
    p = parse("opencode.jsonl", "claude")
    assert p.end.format == "opencode" and len(p.calls) == 5


def test_detect_inconclusive_content_is_unknown_not_the_harness_format():
    # issue 19: a file no rule matches is unknown, never the harness's format or the viewer default
    fmt, ev = detect_format([b'{"type":"mystery"}'], "kimi", "transcript.jsonl")
    assert fmt == "unknown" and "types mystery" in ev and "harness kimi" in ev
    assert detect_format([b'{"type":"mystery"}'], None, "transcript.jsonl")[0] == "unknown"
    assert detect_format([b'{"type":"mystery"}'], "pi", "transcript.jsonl")[0] == "unknown"
    assert detect_format([b"", b"  "], "claude", "transcript.jsonl")[0] == "empty"


def test_forced_format():
    p = parse("kimi.jsonl", "claude", data=(DATA / "kimi.jsonl").read_bytes())
    assert p.end.format == "kimi"  # content wins over a wrong hint
    events = list(parse_source(io.BytesIO((DATA / "kimi.jsonl").read_bytes()), source="k", fmt="kimi"))
    assert events[-1].format == "kimi" and events[-1].format_evidence.startswith("format given")


def test_hf_converted_trace_headers_then_session_lines():
    lines = [b'{"type":"custom-title","customTitle":"run 01","sessionId":"hf"}',
             b'{"type":"ai-title","aiTitle":"FP8 GEMM","sessionId":"hf"}',
             b'{"type":"mode","mode":"default","sessionId":"hf"}',
             b'{"parentUuid":null,"isSidechain":false,"sessionId":"hf","version":"2.1.181","type":"user",'
             b'"message":{"role":"user","content":"[redacted]"},"uuid":"h1","timestamp":"2026-07-01T00:00:03Z"}',
             b'{"parentUuid":"h1","isSidechain":false,"sessionId":"hf","version":"2.1.181","type":"assistant",'
             b'"message":{"id":"m","role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash",'
             b'"input":{"command":"python check.py"}}]},"uuid":"h2","timestamp":"2026-07-01T00:00:04Z"}']
    p = parse("trace.jsonl", "claude", data=b"\n".join(lines) + b"\n")
    assert p.end.format == "claude_session" and "JSON line 4" in p.end.format_evidence
    assert p.errors == [] and [r.rtype for r in p.records][:3] == ["custom-title", "ai-title", "mode"]
    assert p.records[0].text == "run 01" and p.call("t").command == "python check.py"
    assert p.end.first_ts == datetime(2026, 7, 1, 0, 0, 3, tzinfo=UTC)


def test_unknown_format_harness():
    p = parse("pi.jsonl", "pi", data=b'{"kind":"x","text":"hello"}\n{"kind":"y"}\n')
    assert p.end.format == "unknown" and p.end.end_reason == "unknown" and len(p.records) == 2
    assert p.records[0].text == "hello" and p.calls == []
