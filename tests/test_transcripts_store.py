"""Issue 19 end to end: what the new transcript shapes put in the store, and what the analyzers
then say.  Run folders are written here from hand-written lines (no real transcript copied)."""

from __future__ import annotations

import json
from pathlib import Path

from forensics.analyze import provenance
from forensics.analyze import timeline
from forensics.store.db import Store
from forensics.store.ingest import ingest_archive

HOST = "/home/benchuser/kb/outputs/runs"
FOREIGN = "20260810_080000_codex_gpt-5.5_04_kahan_softmax"
ME = "20260811_090000_claude_claude-opus-4-8_04_kahan_softmax"
PROBLEM = "04_kahan_softmax"
SID = "d00d0000-0000-4000-8000-00000000000a"


def _j(o) -> str:
    return json.dumps(o, separators=(",", ":"))


def _run(root: Path, rid: str, files: dict[str, str | bytes], harness: str = "claude") -> Path:
    d = root / rid
    (d / "repo" / "problems" / PROBLEM).mkdir(parents=True)
    (d / "solution.py").write_text("import torch\n")
    res = {"run_id": rid, "problem": PROBLEM, "harness": harness, "model": "m", "has_solution": True,
           "correct": True, "failure_reason": "pass", "peak_fraction": 0.2, "session_complete": True,
           "harness_exit_code": 0}
    (d / "result.json").write_text(json.dumps(res))
    for rel, body in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body if isinstance(body, bytes) else body.encode())
    return d


def _msg(i: int, kind: str, content: list, parent: str | None, **extra) -> dict:
    """A Claude session-store message line."""
    o = {"parentUuid": parent, "isSidechain": False, "cwd": f"/workspace/problems/{PROBLEM}", "sessionId": SID,
         "version": "2.1.20", "type": kind, "uuid": f"u{i}", "timestamp": f"2026-08-11T09:00:{i:02d}.000Z"}
    if kind == "assistant":
        o["message"] = {"id": f"msg_{i}", "role": "assistant", "model": "claude-opus-4-8", "content": content,
                        "usage": {"input_tokens": 10, "output_tokens": i, "cache_read_input_tokens": 100,
                                  "cache_creation_input_tokens": 1}}
    else:
        o["message"] = {"role": "user", "content": content}
    o.update(extra)
    return o


def _sub(i: int, role: str, content: list) -> dict:
    """A Claude 2.1 agent_progress record of subagent a77 started by call toolu_task."""
    inner = {"role": role, "content": content}
    if role == "assistant":
        inner["id"] = f"msg_sub{i}"
        inner["usage"] = {"input_tokens": 2, "output_tokens": 3}
    return {"parentUuid": f"u{i - 1}", "isSidechain": False, "sessionId": SID, "type": "progress",
            "data": {"type": "agent_progress", "agentId": "a77",
                     "message": {"type": role, "message": inner, "timestamp": f"2026-08-11T09:00:{i:02d}.000Z"}},
            "parentToolUseID": "toolu_task", "uuid": f"u{i}", "timestamp": f"2026-08-11T09:00:{i:02d}.000Z"}


def _session(foreign_read: bool = True) -> list[str]:
    tu = lambda i, name, inp: {"type": "tool_use", "id": i, "name": name, "input": inp}  # noqa: E731
    tr = lambda i, text: {"type": "tool_result", "tool_use_id": i, "content": text}  # noqa: E731
    target = f"{HOST}/{FOREIGN}/solution.py" if foreign_read else f"/workspace/problems/{PROBLEM}/reference.py"
    L = [_msg(1, "user", [{"type": "text", "text": "Write softmax."}], None),
         _msg(2, "assistant", [tu("toolu_task", "Task", {"description": "look", "prompt": "find prior work",
                                                          "subagent_type": "Explore"})], "u1"),
         _sub(3, "assistant", [tu("toolu_s1", "Bash", {"command": f"ls {HOST}"})]),
         _sub(4, "user", [tr("toolu_s1", FOREIGN)]),
         _sub(5, "assistant", [tu("toolu_s2", "Read", {"file_path": target})]),
         _sub(6, "user", [tr("toolu_s2", "     1\timport torch\n     2\tdef kahan_softmax(x): ...")]),
         _msg(7, "user", [tr("toolu_task", "found one")], "u6"),
         _msg(8, "assistant", [tu("toolu_w", "Write", {"file_path": f"/workspace/problems/{PROBLEM}/solution.py",
                                                       "content": "import torch\n"})], "u7"),
         _msg(9, "user", [tr("toolu_w", "File created successfully")], "u8")]
    return [_j(o) for o in L]


def _stream(session: list[str], upto: int | None = None) -> str:
    """The same session as Claude stream-json (transcript.jsonl), optionally cut after `upto` lines."""
    out = [_j({"type": "system", "subtype": "init", "cwd": f"/workspace/problems/{PROBLEM}", "session_id": SID,
               "claude_code_version": "2.1.20", "mcp_servers": []})]
    for raw in session:
        o = json.loads(raw)
        if o["type"] == "progress":
            out.append(_j({k: o[k] for k in ("type", "data", "parentToolUseID")} | {"session_id": SID}))
        else:
            out.append(_j({"type": o["type"], "message": o["message"], "parent_tool_use_id": None, "session_id": SID}))
    out.append(_j({"type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "session_id": SID,
                   "usage": {"input_tokens": 1, "output_tokens": 2}}))
    if upto is not None:
        out = out[:upto]
    return "\n".join(out) + "\n"


STORE = f"agent_home/.claude/projects/-workspace-problems-{PROBLEM}/{SID}.jsonl"


def _ingest(tmp_path: Path, files: dict, foreign: bool = True) -> Store:
    root = tmp_path / "outputs" / "runs"
    root.mkdir(parents=True, exist_ok=True)
    if foreign:
        _run(root, FOREIGN, {"transcript.jsonl": "codex\n"}, harness="codex")
    _run(root, ME, files)
    st = Store(":memory:")
    ingest_archive(st, root)
    return st


# ----------------------------------------------- a subagent's foreign read is a foreign read
def test_subagent_reading_another_runs_solution_is_a_deliberate_foreign_read(tmp_path):
    st = _ingest(tmp_path, {STORE: "\n".join(_session()) + "\n"})
    calls = st.query("select call_seq, tool, agent_id, parent_call_id, source from tool_calls where run_id = ? "
                     "order by call_seq", [ME])
    assert [(c["tool"], c["agent_id"], c["parent_call_id"]) for c in calls] == [
        ("Task", None, None), ("Bash", "a77", "toolu_task"), ("Read", "a77", "toolu_task"), ("Write", None, None)]
    acc = st.query("select * from file_accesses where run_id = ? and owner = 'foreign' and access = 'read'", [ME])
    assert [(a["call_seq"], a["foreign_run_id"], a["foreign_file"]) for a in acc] == [(3, FOREIGN, "solution.py")]
    provenance.analyze(st, [ME])
    refs = st.query("select classification, artifact, call_seq from foreign_refs where run_id = ? and "
                    "classification = 'deliberate_read'", [ME])
    assert refs == [{"classification": "deliberate_read", "artifact": "solution", "call_seq": 3}]
    (f,) = st.query("select * from findings where run_id = ? and rule = 'foreign-read'", [ME])
    assert f["severity"] == "high" and f["call_seq"] == 3 and f["file"] == STORE
    # the same session without the foreign read: no such finding
    st2 = _ingest(tmp_path / "b", {STORE: "\n".join(_session(foreign_read=False)) + "\n"})
    provenance.analyze(st2, [ME])
    assert not st2.query("select * from findings where run_id = ? and rule = 'foreign-read'", [ME])


# --------------------------------------------------------------- the session-store copy
def test_store_copy_is_the_evidence_when_the_transcript_is_absent(tmp_path):
    st = _ingest(tmp_path, {STORE: "\n".join(_session()) + "\n"}, foreign=False)
    run = st.query("select transcript_format, tool_source, n_tool_calls from runs where run_id = ?", [ME])[0]
    assert run == {"transcript_format": "claude_session", "tool_source": STORE, "n_tool_calls": 4}
    cat = st.scalar("select category from files where run_id = ? and path = ?", [ME, STORE])
    assert cat == "session_store"
    end = st.query("select * from session_end where run_id = ?", [ME])[0]
    assert end["source"] == STORE and end["end_reason"] == "no_marker_format"
    assert (end["input_tokens"], end["output_tokens"]) == (24, 16)   # 2 main + 2 subagent messages, once each
    reasons = [r["reason"] for r in st.query("select reason from parse_errors where run_id = ?", [ME])]
    assert reasons == ["missing_file"]


def test_store_copy_fills_a_short_transcript_without_double_counting(tmp_path):
    sess = _session()
    # the transcript was cut after the subagent's Bash call: the store holds the rest
    st = _ingest(tmp_path, {"transcript.jsonl": _stream(sess, upto=4), STORE: "\n".join(sess) + "\n"}, foreign=False)
    calls = st.query("select call_seq, call_id, source from tool_calls where run_id = ? order by call_seq", [ME])
    assert [(c["call_id"], c["source"]) for c in calls] == [
        ("toolu_task", "transcript.jsonl"), ("toolu_s1", "transcript.jsonl"), ("toolu_s2", STORE), ("toolu_w", STORE)]
    res = st.query("select call_seq, call_id from tool_results where run_id = ? order by call_seq", [ME])
    assert [r["call_id"] for r in res] == ["toolu_task", "toolu_s1", "toolu_s2", "toolu_w"]
    assert all(r["call_seq"] is not None for r in res)
    end = st.query("select * from session_end where run_id = ?", [ME])[0]
    assert end["source"] == "transcript.jsonl" and end["cut_off"]
    # tokens once per message id over both files (the transcript's 2 messages are also in the store)
    assert (end["input_tokens"], end["output_tokens"], end["usage_source"]) == (24, 16, "dedup_messages_sources")
    # a complete transcript and the same session in the store: each call once, the terminal usage kept
    st2 = _ingest(tmp_path / "b", {"transcript.jsonl": _stream(sess), STORE: "\n".join(sess) + "\n"}, foreign=False)
    assert st2.scalar("select count(*) from tool_calls where run_id = ?", [ME]) == 4
    assert st2.scalar("select count(*) from tool_calls where run_id = ? and source <> 'transcript.jsonl'", [ME]) == 0
    assert st2.scalar("select count(*) from tool_results where run_id = ?", [ME]) == 4
    end2 = st2.query("select input_tokens, usage_source from session_end where run_id = ?", [ME])[0]
    assert end2 == {"input_tokens": 1, "usage_source": "terminal_record"}


def test_kimi_store_copy_is_used_only_when_the_transcript_has_no_calls(tmp_path):
    wire = (Path(__file__).parent / "data" / "transcripts" / "current" / "kimi_wire.jsonl").read_text()
    st = _ingest(tmp_path, {"transcript.jsonl": "", "agent_home/.kimi/sessions/h1/s1/wire.jsonl": wire},
                 foreign=False)
    run = st.query("select tool_source, n_tool_calls from runs where run_id = ?", [ME])[0]
    assert run == {"tool_source": "agent_home/.kimi/sessions/h1/s1/wire.jsonl", "n_tool_calls": 3}
    kimi = '{"role":"assistant","content":"x","tool_calls":[{"type":"function","id":"S:0","function":' \
           '{"name":"Shell","arguments":"{\\"command\\": \\"ls\\"}"}}]}\n'
    st2 = _ingest(tmp_path / "b", {"transcript.jsonl": kimi, "agent_home/.kimi/sessions/h1/s1/wire.jsonl": wire},
                  foreign=False)
    run2 = st2.query("select tool_source, n_tool_calls from runs where run_id = ?", [ME])[0]
    assert run2 == {"tool_source": "transcript.jsonl", "n_tool_calls": 1}


# ------------------------------------------------------------- findings without tool calls
def test_unknown_format_and_cut_off_are_findings_even_without_calls(tmp_path):
    unknown = '{"kind":"frame","n":1}\n{"kind":"frame","n":2}\n'
    st = _ingest(tmp_path, {"transcript.jsonl": unknown}, foreign=False)
    assert st.scalar("select transcript_format from runs where run_id = ?", [ME]) == "unknown"
    assert st.scalar("select count(*) from parse_errors where run_id = ? and reason = 'unknown_format'", [ME]) == 1
    timeline.analyze(st, [ME])
    rules = {r["rule"]: r for r in st.query("select * from findings where run_id = ?", [ME])}
    assert set(rules) == {"timeline-unavailable", "transcript-format-unknown"}
    assert rules["transcript-format-unknown"]["severity"] == "medium"
    assert rules["transcript-format-unknown"]["file"] == "transcript.jsonl"
    # a Claude stream cut off before any tool call
    cut = _j({"type": "system", "subtype": "init", "cwd": "/w", "session_id": "s", "claude_code_version": "2.1.0"}) + \
        "\n" + _j({"type": "assistant", "message": {"id": "m", "role": "assistant", "content": [
            {"type": "text", "text": "Let me start."}]}, "session_id": "s"}) + "\n"
    st2 = _ingest(tmp_path / "b", {"transcript.jsonl": cut}, foreign=False)
    timeline.analyze(st2, [ME])
    rules2 = {r["rule"]: r for r in st2.query("select * from findings where run_id = ?", [ME])}
    assert set(rules2) == {"timeline-unavailable", "session-cut-off"}
    assert rules2["session-cut-off"]["transcript_line"] == 2
