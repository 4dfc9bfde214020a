"""Tool calls of a transcript in no known format, recovered from the model APIs' own shapes
(forensics.transcripts.structural).  Mechanism: whatever the harness, its log carries what the
model API sent: Anthropic tool_use/tool_result blocks, OpenAI tool_calls and role=tool messages,
Responses function_call/function_call_output items, Gemini functionCall/functionResponse parts,
camel-case toolCall/toolResult (pi and other agent SDKs), Hermes <tool_call> tags.  The format
stays `unknown` (never guessed) and the timeline's transcript-format-unknown finding stays (the
recovered calls may not be all): contamination is `unknown` (CT3) unless a recovered call is
itself a foreign read (CT1).  Look-alikes: a tools schema list, a dict with only a name, a text
that mentions <tool_call> without an object."""

from __future__ import annotations

import json

from forensics.analyze import provenance, timeline
from forensics.transcripts.events import ParseError, Record, ToolCall, ToolResult
from forensics.transcripts.parse import parse_source
from forensics.transcripts.structural import recover
from test_transcripts_store import FOREIGN, HOST, ME, PROBLEM, _ingest


def _lines(*objs) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


def _events(data: bytes, harness: str | None = "pi"):
    ev = list(parse_source(data, "transcript.jsonl", harness))
    return ev, [e for e in ev if isinstance(e, ToolCall)], [e for e in ev if isinstance(e, ToolResult)]


PI = [{"type": "session", "version": 3, "id": "s1", "timestamp": "2026-08-11T09:00:00Z", "cwd": "/w/p"},
      {"type": "message", "id": "m1", "message": {"role": "user", "content": [{"type": "text", "text": "go"}]}},
      {"type": "message", "id": "m2", "message": {"role": "assistant", "content": [
          {"type": "text", "text": "looking"},
          {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "notes.md"}},
          {"type": "toolCall", "id": "c2", "name": "bash", "arguments": {"command": "ls /w"}}]}},
      {"type": "message", "id": "m3", "message": {"role": "toolResult", "toolCallId": "c1", "toolName": "read",
                                                  "content": [{"type": "text", "text": "# notes"}], "isError": False}},
      {"type": "message", "id": "m4", "message": {"role": "toolResult", "toolCallId": "c2", "toolName": "bash",
                                                  "content": [{"type": "text", "text": "p"}], "isError": True}}]


def test_camel_case_tool_calls_of_an_unknown_format_are_recovered_at_their_lines():
    ev, calls, results = _events(_lines(*PI))
    assert ev[-1].format == "unknown" and any(isinstance(e, ParseError) and e.reason == "unknown_format" for e in ev)
    assert [(c.line, c.call_id, c.tool, c.kind) for c in calls] == [(3, "c1", "read", "read"), (3, "c2", "bash", "exec")]
    assert calls[0].paths == ["notes.md"] and calls[0].cwd == "/w/p" and calls[1].command == "ls /w"   # the header cwd
    assert [(r.line, r.call_id, r.text, r.is_error) for r in results] == [(4, "c1", "# notes", False), (5, "c2", "p", True)]
    (rec,) = [e for e in ev if isinstance(e, Record) and e.line == 3]
    assert (rec.n_tool_calls, rec.n_tool_results) == (2, 0)


def test_every_api_shape_is_recovered_inside_an_unknown_envelope():
    def wrap(payload):
        return {"event": "llm", "payload": payload}
    data = _lines(
        wrap({"content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/w/a.py"}}]}),
        wrap({"content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1", "is_error": False}]}),
        wrap({"choices": [{"message": {"tool_calls": [{"id": "call_9", "type": "function", "function": {
            "name": "shell", "arguments": "{\"cmd\": [\"cat\", \"/w/b.py\"]}"}}]}}]}),
        wrap({"messages": [{"role": "tool", "tool_call_id": "call_9", "content": "y = 2"}]}),
        wrap({"output": [{"type": "function_call", "call_id": "fc_1", "name": "exec_command",
                          "arguments": "{\"cmd\": \"ls\"}"}]}),
        wrap({"input": [{"type": "function_call_output", "call_id": "fc_1", "output": "a.py"}]}),
        wrap({"parts": [{"functionCall": {"name": "read_file", "args": {"absolute_path": "/w/c.py"}, "id": "g1"}}]}),
        wrap({"parts": [{"functionResponse": {"name": "read_file", "id": "g1", "response": {"output": "z"}}}]}),
        wrap({"part": {"type": "tool-call", "toolCallId": "ai1", "toolName": "grep", "args": {"pattern": "k"}}}),
        {"from": "gpt", "value": "thinking\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": "
                                 "{\"command\": \"nvidia-smi\"}}\n</tool_call>"},
        {"from": "tool", "value": "<tool_response>\n{\"exit_code\": 0}\n</tool_response>"})
    ev, calls, results = _events(data, None)
    assert ev[-1].format == "unknown"
    assert [(c.line, c.call_id, c.tool) for c in calls] == [
        (1, "toolu_1", "Read"), (3, "call_9", "shell"), (5, "fc_1", "exec_command"), (7, "g1", "read_file"),
        (9, "ai1", "grep"), (10, None, "terminal")]
    assert calls[0].paths == ["/w/a.py"] and calls[5].command == "nvidia-smi"
    assert [(r.line, r.call_id) for r in results] == [(2, "toolu_1"), (4, "call_9"), (6, "fc_1"), (8, "g1"), (11, None)]
    assert [r.text for r in results] == ["x = 1", "y = 2", "a.py", "z", '{"exit_code": 0}']


def test_look_alikes_are_not_calls():
    assert recover({"tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]}) == []
    assert recover({"files": [{"name": "solution.py", "size": 3}], "model": {"name": "m"}}) == []
    assert recover({"text": "the agent may answer with <tool_call> tags; none here </tool_call>"}) == []
    assert recover({"type": "tool_use"}) == []                      # no name: not a call
    ev, calls, results = _events(_lines({"kind": "frame", "n": 1}, {"kind": "frame", "n": 2}))
    assert calls == [] and results == []


def test_a_one_document_transcript_cites_each_call_at_the_line_of_its_id():
    doc = json.dumps({"trajectory": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "t1", "type": "function",
                                              "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "a"},
        {"role": "assistant", "tool_calls": [{"id": "t2", "type": "function",
                                              "function": {"name": "bash", "arguments": "{\"command\": \"pwd\"}"}}]}]},
        indent=2).encode()
    ev, calls, results = _events(doc, None)
    assert ev[-1].format == "unknown" and [r.rtype for r in ev if isinstance(r, Record)] == ["document"]
    lines = doc.decode().splitlines()
    assert [c.call_id for c in calls] == ["t1", "t2"] and [r.call_id for r in results] == ["t1"]
    for c in calls:
        assert f'"{c.call_id}"' in lines[c.line - 1]


def _pi_run(target: str) -> str:
    return _lines({"type": "session", "version": 3, "id": "s1", "cwd": f"/workspace/problems/{PROBLEM}"},
                  {"type": "message", "message": {"role": "assistant", "content": [
                      {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": target}}]}},
                  {"type": "message", "message": {"role": "toolResult", "toolCallId": "c1",
                                                  "content": [{"type": "text", "text": "import torch"}]}}).decode()


def test_a_recovered_foreign_read_is_evidence_and_the_rest_stays_unknown(tmp_path):
    from forensics.verdict import decide_contamination, load_facts
    st = _ingest(tmp_path, {"transcript.jsonl": _pi_run(f"{HOST}/{FOREIGN}/solution.py")})
    assert st.scalar("select transcript_format from runs where run_id = ?", [ME]) == "unknown"
    timeline.analyze(st, [ME])
    provenance.analyze(st, [ME])
    (f,) = st.query("select * from findings where run_id = ? and rule = 'transcript-format-unknown'", [ME])
    assert "1 tool calls were recovered" in f["message"]
    refs = st.query("select classification, call_seq from foreign_refs where run_id = ? and "
                    "classification = 'deliberate_read'", [ME])
    assert refs == [{"classification": "deliberate_read", "call_seq": 1}]
    assert decide_contamination(load_facts(st, [ME])[ME]).value == "contaminated"
    # look-alike: the same session reading its own problem's file is not `clean`, it is `unknown`
    st2 = _ingest(tmp_path / "b", {"transcript.jsonl": _pi_run(f"/workspace/problems/{PROBLEM}/reference.py")})
    timeline.analyze(st2, [ME])
    provenance.analyze(st2, [ME])
    facts = load_facts(st2, [ME])[ME]
    facts.coverage = {"ran": ["timeline", "provenance"]}   # both ran above (a scan records this itself)
    d = decide_contamination(facts)
    assert (d.value, d.rule) == ("unknown", "CT3")


def test_tagged_calls_pair_each_closing_tag_with_the_nearest_opening():
    """Hermes-style tags in text: an opening that is never closed (a truncated or quoted tag) does
    not swallow the next real call, and thousands of unclosed openings recover nothing (and are
    read in one pass, not one rescan of the text per opening)."""
    from forensics.transcripts.structural import recover
    call = '<tool_call>{"name": "bash", "arguments": {"cmd": "ls"}}</tool_call>'
    text = '<tool_call> {"name": "cut off' + " filler " + call + "<tool_response>a.py</tool_response>"
    assert recover({"content": text}) == [("call", None, "bash", {"cmd": "ls"}), ("result", None, "a.py", None)]
    assert recover({"content": '<tool_call> {"a": 1} ' * 50_000}) == []
    assert recover({"content": "<tool_response> never closed " * 50_000}) == []
