"""A record of a type its (known) format's parser does not list still gives up the tool calls and
results it holds in the model APIs' own shapes (`Parser.unknown` runs `structural.recover` on it).
Mechanism: today's agent CLIs add record types faster than the parsers list them, and a call in
such a record was lost without a trace; the API shapes (Anthropic ``tool_use``/``tool_result``,
OpenAI ``tool_calls`` + ``role: tool``, Responses ``function_call``/``_output``, Gemini
``functionCall``/``functionResponse``) are the same whatever the CLI.  The recovered call is cited
at the record's line, the ParseError ``unknown_record`` stays and says what was recovered, and an
echo (a call or result a known record holds too) is kept once, in the parser and at ingest.
Look-alikes: a pure metadata record, a tools schema list, a Hermes ``<tool_call>`` quoted in text."""

from __future__ import annotations

import json

from forensics.transcripts.events import ParseError, Record, ToolCall, ToolResult
from forensics.transcripts.parse import parse_source
from test_transcripts_store import ME, _ingest


def _lines(*objs) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


def _parse(data: bytes, harness: str):
    ev = list(parse_source(data, "transcript.jsonl", harness))
    return (ev, [e for e in ev if isinstance(e, ToolCall)], [e for e in ev if isinstance(e, ToolResult)],
            [e for e in ev if isinstance(e, ParseError)])


def _rec(ev, line: int) -> Record:
    (rec,) = [e for e in ev if isinstance(e, Record) and e.line == line]
    return rec


CLAUDE_INIT = {"type": "system", "subtype": "init", "cwd": "/w/p", "session_id": "s1", "claude_code_version": "2.1.90"}
CODEX_META = {"timestamp": "2026-07-21T09:00:00.000Z", "type": "session_meta",
              "payload": {"id": "sess", "cwd": "/w/p", "originator": "codex_exec", "cli_version": "0.40.0"}}


def _claude_assistant(i: int, content: list) -> dict:
    return {"type": "assistant", "message": {"id": f"msg_{i}", "role": "assistant", "content": content},
            "session_id": "s1", "uuid": f"u{i}"}


def _claude_user(i: int, content: list) -> dict:
    return {"type": "user", "message": {"role": "user", "content": content}, "session_id": "s1", "uuid": f"u{i}"}


TOOL_USE = {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "cat /w/p/ref.py"}}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "toolu_9", "content": "import torch", "is_error": False}


# ------------------------------------------------------------------------ positive, per format
def test_claude_unknown_record_with_a_tool_use_block_yields_the_call_and_its_result():
    ev, calls, results, errs = _parse(_lines(
        CLAUDE_INIT,
        {"type": "tool_event", "event": {"message": {"content": [TOOL_USE]}}},
        {"type": "tool_event", "event": {"message": {"content": [TOOL_RESULT]}}}), "claude")
    assert ev[-1].format == "claude"
    assert [(c.line, c.call_id, c.tool, c.kind, c.command, c.cwd, c.recovered) for c in calls] == [
        (2, "toolu_9", "Bash", "exec", "cat /w/p/ref.py", "/w/p", True)]
    assert [(r.line, r.call_id, r.text, r.is_error, r.recovered) for r in results] == [
        (3, "toolu_9", "import torch", False, True)]
    assert [(e.reason, e.line, e.detail) for e in errs] == [
        ("unknown_record", 2, "unknown claude record type 'tool_event': 1 tool call recovered from the model API shapes"),
        ("unknown_record", 3, "unknown claude record type 'tool_event': 1 result recovered from the model API shapes")]
    assert (_rec(ev, 2).rtype, _rec(ev, 2).n_tool_calls, _rec(ev, 2).n_tool_results) == ("tool_event", 1, 0)
    assert (_rec(ev, 3).n_tool_calls, _rec(ev, 3).n_tool_results) == (0, 1)


def test_codex_unknown_records_with_responses_function_call_items_yield_the_call_and_its_result():
    call = {"type": "function_call", "call_id": "call_Z", "name": "exec_command",
            "arguments": "{\"cmd\": \"cat /w/p/ref.py\"}"}
    out = {"type": "function_call_output", "call_id": "call_Z", "output": "import torch"}
    ev, calls, results, errs = _parse(_lines(
        CODEX_META,
        {"timestamp": "2026-07-21T09:00:01.000Z", "type": "event_msg",
         "payload": {"type": "raw_response_item", "item": call}},             # unknown payload type
        {"timestamp": "2026-07-21T09:00:02.000Z", "type": "response_delta", "payload": {"items": [out]}}), "codex")
    assert ev[-1].format == "codex"
    assert [(c.line, c.call_id, c.tool, c.kind, c.command) for c in calls] == [
        (2, "call_Z", "exec_command", "exec", "cat /w/p/ref.py")]
    assert [(r.line, r.call_id, r.text) for r in results] == [(3, "call_Z", "import torch")]
    assert [e.detail for e in errs] == [
        "unknown codex record payload type 'event_msg/raw_response_item': 1 tool call recovered from the model API shapes",
        "unknown codex record type 'response_delta': 1 result recovered from the model API shapes"]
    assert (_rec(ev, 2).subtype, _rec(ev, 2).n_tool_calls) == ("raw_response_item", 1)


def test_kimi_unknown_role_with_a_tool_calls_list_yields_the_call_and_its_result():
    ev, calls, results, errs = _parse(_lines(
        {"role": "user", "content": "Write solution.py"},
        {"role": "assistant_draft", "content": "reading", "tool_calls": [
            {"type": "function", "id": "ReadFile:7", "function": {"name": "ReadFile",
                                                                  "arguments": "{\"path\": \"/w/p/ref.py\"}"}}]},
        {"role": "_replay", "messages": [{"role": "tool", "tool_call_id": "ReadFile:7", "content": "import torch"}]},
        {"role": "tool", "tool_call_id": "ReadFile:7", "content": "import torch"}), "kimi")
    assert ev[-1].format == "kimi"
    assert [(c.line, c.call_id, c.tool, c.kind, c.paths) for c in calls] == [
        (2, "ReadFile:7", "ReadFile", "read", ["/w/p/ref.py"])]
    # the recovered result (line 3) and the known record's (line 4): the ingest keeps the known one
    assert [(r.line, r.call_id, r.recovered) for r in results] == [(3, "ReadFile:7", True), (4, "ReadFile:7", False)]
    assert [e.detail for e in errs] == [
        "unknown kimi record role 'assistant_draft/None': 1 tool call recovered from the model API shapes",
        "unknown kimi record role '_replay/None': 1 result recovered from the model API shapes"]


def test_gemini_unknown_record_with_function_call_parts_yields_the_call_and_its_result():
    ev, calls, results, errs = _parse(_lines(
        {"type": "init", "timestamp": "2026-07-22T08:00:00.000Z", "session_id": "gem-1", "model": "gemini-2.5-pro"},
        {"type": "model_turn", "parts": [{"functionCall": {"id": "g7", "name": "read_file",
                                                           "args": {"absolute_path": "/w/p/ref.py"}}}]},
        {"type": "model_turn", "parts": [{"functionResponse": {"id": "g7", "name": "read_file",
                                                               "response": {"output": "import torch"}}}]},
        {"type": "result", "timestamp": "2026-07-22T08:00:12.000Z", "status": "success"}), "gemini")
    assert ev[-1].format == "gemini"
    assert [(c.line, c.call_id, c.tool, c.paths) for c in calls] == [(2, "g7", "read_file", ["/w/p/ref.py"])]
    assert [(r.line, r.call_id, r.text) for r in results] == [(3, "g7", "import torch")]
    assert [e.detail.split(": ", 1)[1] for e in errs] == ["1 tool call recovered from the model API shapes",
                                                         "1 result recovered from the model API shapes"]


def test_several_calls_in_one_unknown_record_are_counted_in_the_detail():
    two = [TOOL_USE, dict(TOOL_USE, id="toolu_10", input={"command": "ls"}), TOOL_RESULT]
    ev, calls, results, errs = _parse(_lines(CLAUDE_INIT, {"type": "batch", "content": two}), "claude")
    assert [(c.line, c.call_id) for c in calls] == [(2, "toolu_9"), (2, "toolu_10")]
    assert errs[0].detail == "unknown claude record type 'batch': 2 tool calls and 1 result recovered from the model API shapes"
    assert (_rec(ev, 2).n_tool_calls, _rec(ev, 2).n_tool_results) == (2, 1)


def test_cli_event_shapes_in_unknown_records_yield_the_call_and_its_result():
    """A CLI's own event shape inside a record type its parser does not list: Codex protocol
    events under a new envelope, Gemini stream-json tool_use/tool_result under a new type."""
    ev, calls, results, errs = _parse(_lines(
        CODEX_META,
        {"timestamp": "2026-07-21T09:00:01.000Z", "type": "protocol_event", "payload": {"msg": {
            "type": "exec_command_begin", "call_id": "call_E", "command": ["bash", "-lc", "cat /w/q/solution.py"],
            "cwd": "/w/p"}}},
        {"timestamp": "2026-07-21T09:00:02.000Z", "type": "protocol_event", "payload": {"msg": {
            "type": "exec_command_end", "call_id": "call_E", "aggregated_output": "import triton", "exit_code": 0}}},
        {"timestamp": "2026-07-21T09:00:03.000Z", "type": "protocol_event", "payload": {"msg": {
            "type": "mcp_tool_call_begin", "call_id": "call_M",
            "invocation": {"server": "fs", "tool": "read_file", "arguments": {"path": "/w/q/solution.py"}}}}},
        {"timestamp": "2026-07-21T09:00:04.000Z", "type": "protocol_event", "payload": {"msg": {
            "type": "mcp_tool_call_end", "call_id": "call_M", "result": {"Err": "denied"}}}}), "codex")
    assert ev[-1].format == "codex"
    assert [(c.line, c.call_id, c.tool, c.kind, c.command, c.recovered) for c in calls] == [
        (2, "call_E", "shell", "exec", "cat /w/q/solution.py", True),
        (4, "call_M", "mcp__fs__read_file", calls[1].kind, None, True)]
    assert calls[1].args == {"path": "/w/q/solution.py"}
    assert [(r.line, r.call_id, r.text, r.is_error) for r in results] == [
        (3, "call_E", "import triton", False), (5, "call_M", '{"Err":"denied"}', None)]
    assert len(errs) == 4

    ev, calls, results, errs = _parse(_lines(
        {"type": "init", "timestamp": "2026-07-22T08:00:00.000Z", "session_id": "gem-1", "model": "gemini-2.5-pro"},
        {"type": "subagent", "event": {"type": "tool_use", "tool_name": "read_file", "tool_id": "rf-1",
                                       "parameters": {"absolute_path": "/w/p/ref.py"}}},
        {"type": "subagent", "event": {"type": "tool_result", "tool_id": "rf-1", "status": "error",
                                       "error": {"type": "FILE_NOT_FOUND", "message": "no such file"}}},
        {"type": "result", "timestamp": "2026-07-22T08:00:12.000Z", "status": "success"}), "gemini")
    assert ev[-1].format == "gemini"
    assert [(c.line, c.call_id, c.tool, c.paths) for c in calls] == [(2, "rf-1", "read_file", ["/w/p/ref.py"])]
    assert [(r.line, r.call_id, r.is_error) for r in results] == [(3, "rf-1", True)]
    assert "no such file" in results[0].text


# ------------------------------------------------------------------------------- look-alikes
def test_pure_metadata_unknown_record_recovers_nothing_and_keeps_the_plain_detail():
    ev, calls, results, errs = _parse(_lines(
        CODEX_META, {"type": "file-history-snapshot", "snapshot": {"name": "x", "files": [{"name": "a.py"}]}}), "codex")
    assert calls == [] and results == []
    assert [(e.reason, e.line, e.detail) for e in errs] == [
        ("unknown_record", 2, "unknown codex record type 'file-history-snapshot'")]
    assert (_rec(ev, 2).n_tool_calls, _rec(ev, 2).n_tool_results) == (0, 0)
    ev, calls, results, errs = _parse(_lines(
        CLAUDE_INIT, {"type": "workspace-snapshot", "snapshot": {"name": "x"}, "model": {"name": "m"}}), "claude")
    assert calls == [] and results == [] and errs[0].detail == "unknown claude record type 'workspace-snapshot'"


def test_an_unknown_record_holding_a_tools_schema_list_recovers_nothing():
    tools = [{"type": "function", "function": {"name": "exec_command", "description": "run",
                                               "parameters": {"type": "object", "properties": {"cmd": {}}}}},
             {"name": "Bash", "input_schema": {"type": "object"}}]
    ev, calls, results, errs = _parse(_lines(CODEX_META, {"type": "tools_update", "payload": {"tools": tools}}), "codex")
    assert calls == [] and results == [] and errs[0].detail == "unknown codex record type 'tools_update'"
    ev, calls, results, errs = _parse(_lines(CLAUDE_INIT, {"type": "tool_registry", "tools": tools}), "claude")
    assert calls == [] and results == []


def test_cli_event_look_alikes_are_not_calls():
    """A tool-usage stats row that names a tool (no id), a begin event without its command or
    invocation, an end event without a call id: none is a call or a result."""
    from forensics.transcripts.structural import recover
    assert recover({"stats": [{"type": "tool_use", "tool_name": "read_file", "count": 3}]}) == []
    assert recover({"type": "exec_command_begin", "call_id": "c1"}) == []
    assert recover({"type": "mcp_tool_call_begin", "call_id": "c1", "invocation": {"server": "fs"}}) == []
    assert recover({"type": "exec_command_end", "aggregated_output": "x", "exit_code": 0}) == []
    ev, calls, results, errs = _parse(_lines(
        CODEX_META, {"timestamp": "2026-07-21T09:00:01.000Z", "type": "usage_report",
                     "payload": {"tools": [{"type": "tool_use", "tool_name": "shell", "calls": 12}]}}), "codex")
    assert calls == [] and results == [] and errs[0].detail == "unknown codex record type 'usage_report'"


def test_a_hermes_tag_quoted_in_an_unknown_record_of_a_known_format_is_not_a_call():
    text = 'the model may write <tool_call>{"name": "bash", "arguments": {"cmd": "ls"}}</tool_call>'
    ev, calls, results, errs = _parse(_lines(CLAUDE_INIT, {"type": "note", "text": text}), "claude")
    assert calls == [] and results == [] and errs[0].detail == "unknown claude record type 'note'"


def test_an_unknown_record_echoing_a_known_call_keeps_it_once():
    ev, calls, results, errs = _parse(_lines(
        CLAUDE_INIT,
        _claude_assistant(2, [TOOL_USE]),
        _claude_user(3, [TOOL_RESULT]),
        {"type": "turn_digest", "content": [TOOL_USE, TOOL_RESULT]}), "claude")
    assert [(c.line, c.call_id, c.recovered) for c in calls] == [(2, "toolu_9", False)]
    # the result echo is left to the ingest, which keeps the known record's (see the ingest test)
    assert [(r.line, r.recovered) for r in results] == [(3, False), (4, True)]
    assert errs[0].detail == "unknown claude record type 'turn_digest': 1 result recovered from the model API shapes"
    assert (_rec(ev, 4).n_tool_calls, _rec(ev, 4).n_tool_results) == (0, 1)


def test_a_call_and_result_repeated_in_several_unknown_records_are_recovered_once():
    ev, calls, results, errs = _parse(_lines(
        CLAUDE_INIT,
        {"type": "tool_event", "content": [TOOL_USE]},
        {"type": "tool_event", "content": [TOOL_USE, TOOL_RESULT]},
        {"type": "tool_event", "content": [TOOL_RESULT]}), "claude")
    assert [(c.line, c.call_id) for c in calls] == [(2, "toolu_9")]
    assert [(r.line, r.call_id) for r in results] == [(3, "toolu_9")]
    assert [e.detail.partition(": ")[2] for e in errs] == [
        "1 tool call recovered from the model API shapes", "1 result recovered from the model API shapes", ""]


# ------------------------------------------------------------------------------------ ingest
def _calls_and_results(st):
    calls = st.query("select call_seq, call_id, tool, line, command from tool_calls where run_id = ? order by call_seq",
                     [ME])
    results = st.query("select call_seq, call_id, line, text from tool_results where run_id = ? order by line", [ME])
    return calls, results


def test_a_recovered_call_and_its_result_land_in_the_store_once(tmp_path):
    data = _lines(
        CLAUDE_INIT,
        _claude_assistant(2, [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                               "input": {"file_path": "/w/p/a.py"}}]),
        _claude_user(3, [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]),
        {"type": "tool_event", "event": {"content": [TOOL_USE]}},                     # recovered
        {"type": "tool_event", "event": {"content": [TOOL_USE, TOOL_RESULT]}},        # its echo + result
        {"type": "turn_digest", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}},
                                            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]},
        {"type": "result", "subtype": "success", "is_error": False, "result": "done"}).decode()
    st = _ingest(tmp_path, {"transcript.jsonl": data}, foreign=False)
    calls, results = _calls_and_results(st)
    assert [(c["call_seq"], c["call_id"], c["tool"], c["line"]) for c in calls] == [
        (1, "toolu_1", "Read", 2), (2, "toolu_9", "Bash", 4)]
    assert calls[1]["command"] == "cat /w/p/ref.py"
    assert [(r["call_seq"], r["call_id"], r["line"], r["text"]) for r in results] == [
        (1, "toolu_1", 3, "a"), (2, "toolu_9", 5, "import torch")]
    errs = st.query("select line, detail from parse_errors where run_id = ? and reason = 'unknown_record' order by line",
                    [ME])
    assert [e["line"] for e in errs] == [4, 5, 6] and "1 tool call recovered" in errs[0]["detail"]


def test_a_known_record_after_a_recovered_one_of_the_same_id_replaces_it_in_the_store(tmp_path):
    """A new streaming record type can carry the call before the assistant message does (with its
    input still empty): the known record's call and result stand, once, at their lines."""
    data = _lines(
        CLAUDE_INIT,
        {"type": "content_block_start", "content_block": dict(TOOL_USE, input={})},
        {"type": "tool_event", "content": [TOOL_RESULT]},
        _claude_assistant(4, [TOOL_USE]),
        _claude_user(5, [TOOL_RESULT]),
        {"type": "result", "subtype": "success", "is_error": False, "result": "done"}).decode()
    st = _ingest(tmp_path, {"transcript.jsonl": data}, foreign=False)
    calls, results = _calls_and_results(st)
    assert [(c["call_seq"], c["call_id"], c["line"], c["command"]) for c in calls] == [
        (1, "toolu_9", 4, "cat /w/p/ref.py")]
    assert [(r["call_seq"], r["call_id"], r["line"]) for r in results] == [(1, "toolu_9", 5)]


def test_an_echo_in_a_kimi_store_copy_used_as_the_tool_source_is_kept_once(tmp_path):
    """The transcript holds no call, so the session-store copy is the evidence: its recovered echo
    of a call and result its known records hold is dropped there too."""
    call = {"type": "function", "id": "ReadFile:7", "function": {"name": "ReadFile",
                                                                 "arguments": "{\"path\": \"/w/p/ref.py\"}"}}
    ctx = _lines(
        {"role": "_replay", "messages": [{"role": "assistant", "tool_calls": [call]},
                                         {"role": "tool", "tool_call_id": "ReadFile:7", "content": "import torch"}]},
        {"role": "assistant", "content": "reading", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "ReadFile:7", "content": "import torch"},
        {"role": "_snapshot", "tool_calls": [dict(call, id="Shell:8", function={"name": "Shell",
                                                                                "arguments": "{\"command\": \"ls\"}"})]},
    ).decode()
    st = _ingest(tmp_path, {"transcript.jsonl": "", "agent_home/.kimi/sessions/h1/s1/context.jsonl": ctx}, foreign=False)
    calls, results = _calls_and_results(st)
    assert [(c["call_id"], c["line"]) for c in calls] == [("ReadFile:7", 2), ("Shell:8", 4)]
    assert [(r["call_id"], r["line"]) for r in results] == [("ReadFile:7", 3)]
