"""Tool-kind normalization (kinds.py) and result envelopes (envelope.py)."""

from __future__ import annotations

import pytest

from forensics.transcripts import envelope
from forensics.transcripts.base import error_status, parse_args
from forensics.transcripts.kinds import normalize, patch_paths

KIND_CASES = [
    # claude
    ("Bash", {"command": "ls"}, "exec"), ("Read", {"file_path": "a"}, "read"), ("Write", {"file_path": "a"}, "write"),
    ("Edit", {"file_path": "a"}, "edit"), ("MultiEdit", {"file_path": "a", "edits": []}, "edit"),
    ("Glob", {"pattern": "*.py"}, "list"), ("Grep", {"pattern": "x", "path": "."}, "search"),
    ("TodoWrite", {"todos": []}, "other"), ("Agent", {"prompt": "x"}, "task"), ("Task", {"prompt": "x"}, "task"),
    ("TaskCreate", {"subject": "s"}, "task"), ("TaskUpdate", {"taskId": "1"}, "task"),
    ("TaskOutput", {"task_id": "b"}, "task"), ("TaskStop", {"task_id": "b"}, "task"),
    ("Monitor", {"command": "x"}, "exec"), ("ToolSearch", {"query": "q"}, "other"),
    ("WebFetch", {"url": "u"}, "other"), ("WebSearch", {"query": "q"}, "other"),
    ("NotebookEdit", {"notebook_path": "n.ipynb"}, "edit"),
    # codex
    ("exec_command", {"cmd": "ls"}, "exec"), ("shell", {"command": ["ls"]}, "exec"),
    ("write_stdin", {"session_id": 1}, "exec"), ("apply_patch", {"input": "*** Begin Patch"}, "edit"),
    ("update_plan", {"plan": []}, "other"),
    # opencode
    ("bash", {"command": "ls"}, "exec"), ("read", {"filePath": "a"}, "read"), ("write", {"filePath": "a"}, "write"),
    ("edit", {"filePath": "a"}, "edit"), ("glob", {"pattern": "*"}, "list"), ("grep", {}, "search"),
    ("list", {"path": "."}, "list"), ("todowrite", {"todos": []}, "other"), ("task", {"prompt": "p"}, "task"),
    ("skill", {"name": "n"}, "other"), ("webfetch", {"url": "u"}, "other"), ("invalid", {"tool": "x"}, "other"),
    # cursor
    ("shell", {"command": "ls"}, "exec"), ("ls", {"path": "."}, "list"), ("delete", {"path": "a"}, "write"),
    ("readLints", {"paths": ["a"]}, "other"), ("updateTodos", {}, "other"),
    # gemini
    ("run_shell_command", {"command": "ls"}, "exec"), ("read_file", {"absolute_path": "/a"}, "read"),
    ("read_many_files", {"paths": ["a", "b"]}, "read"), ("write_file", {"file_path": "a"}, "write"),
    ("replace", {"file_path": "a"}, "edit"), ("search_file_content", {"pattern": "x"}, "search"),
    ("list_directory", {"path": "/"}, "list"),
    # kimi
    ("Shell", {"command": "ls"}, "exec"), ("ReadFile", {"path": "a"}, "read"), ("WriteFile", {"path": "a"}, "write"),
    ("StrReplaceFile", {"path": "a"}, "edit"), ("SetTodoList", {"todos": []}, "other"),
    # grok chat / droid
    ("search_replace", {"file_path": "a"}, "edit"), ("run_terminal_cmd", {"command": "ls"}, "exec"),
    ("Execute", {"command": "ls"}, "exec"), ("LS", {"directory_path": "/"}, "list"), ("Create", {"file_path": "a"}, "write"),
    # unknown / odd
    ("frobnicate", {}, "other"), ("", {}, "other"), (None, None, "other"), ("mcp__fs__read_file", {"path": "a"}, "read"),
]


@pytest.mark.parametrize("tool,args,kind", KIND_CASES)
def test_kind_of_every_spec_tool(tool, args, kind):
    assert normalize(tool, args)[0] == kind


def test_exec_fields():
    assert normalize("Bash", {"command": "uv run python check.py", "run_in_background": True}) == \
        ("exec", "uv run python check.py", [], None, True)
    assert normalize("exec_command", {"cmd": "uv run check.py", "workdir": "/w"}) == \
        ("exec", "uv run check.py", [], "/w", False)
    assert normalize("shell", {"command": ["bash", "-lc", "python check.py | tail"], "workdir": "/w"})[1:4] == \
        ("python check.py | tail", [], "/w")
    assert normalize("shell", {"command": ["python3", "check.py", "a b"]})[1] == "python3 check.py 'a b'"
    assert normalize("Monitor", {"command": "tail -f log"})[4] is True
    assert normalize("run_shell_command", {"command": "ls", "directory": "/p"})[3] == "/p"
    assert normalize("bash", {"command": "sleep 9", "is_background": True})[4] is True


def test_paths():
    assert normalize("Read", {"file_path": "/a/b.py", "offset": 3})[2] == ["/a/b.py"]
    assert normalize("Glob", {"pattern": "**/*.py", "path": "/w"})[2] == ["/w", "**/*.py"]
    assert normalize("Grep", {"pattern": "TODO", "path": "/w"})[2] == ["/w"]
    assert normalize("read_many_files", {"paths": ["a.py", "b/*.py"]})[2] == ["a.py", "b/*.py"]
    assert normalize("glob", {"targetDirectory": "/w", "globPattern": "*.cu"})[2] == ["/w", "*.cu"]
    assert normalize("list_directory", {"directory": "/x"})[2:4] == (["/x"], None)
    assert normalize("MultiEdit", {"file_path": "a", "edits": [{"old_string": "x", "new_string": "y"}]})[2] == ["a"]


def test_apply_patch_paths_and_exec_heredoc():
    patch = ("*** Begin Patch\n*** Update File: src/a.py\n*** Move to: src/b.py\n@@\n-x\n+y\n"
             "*** Add File: new.py\n+z\n*** Delete File: old.py\n*** End Patch")
    assert patch_paths(patch) == ["src/a.py", "src/b.py", "new.py", "old.py"]
    assert normalize("apply_patch", {"input": patch})[:3] == ("edit", None, ["src/a.py", "src/b.py", "new.py", "old.py"])
    k, cmd, paths, _cwd, _bg = normalize("exec_command", {"cmd": "apply_patch <<'EOF'\n" + patch + "\nEOF"})
    assert k == "edit" and paths == ["src/a.py", "src/b.py", "new.py", "old.py"] and cmd.startswith("apply_patch")


def test_normalize_never_raises_on_odd_arguments():
    for args in ({"command": 5}, {"file_path": ["a", 3, {"path": "b"}]}, {"paths": "x"}, [], "str", 7):
        normalize("Bash", args)
        normalize("Read", args)
    assert normalize("Read", {"file_path": ["a", 3, {"path": "b"}]})[2] == ["a", "b"]


def test_parse_args_partial_json():
    assert parse_args('{"command": "ls -la", "timeout": 5}') == {"command": "ls -la", "timeout": 5}
    got = parse_args('{"command": "python check.py && echo \\"ok')
    assert got["raw"] == '{"command": "python check.py && echo \\"ok' and got["command"] == 'python check.py && echo "ok'
    assert parse_args("[1, 2]") == {"value": [1, 2]}
    assert parse_args("") == {} and parse_args(None) == {}


def test_codex_envelope():
    e = envelope.codex("Chunk ID: 1\nWall time: 0.7 seconds\nProcess exited with code 2\n"
                       "Original token count: 9\nOutput:\nTraceback\n")
    assert (e.text, e.exit_code, e.running_session) == ("Traceback\n", 2, None)
    e = envelope.codex("Chunk ID: 1\nWall time: 10 seconds\nProcess running with session ID 12345\n"
                       "Original token count: 1\nOutput:\n")
    assert (e.text, e.exit_code, e.running_session, e.status) == ("", None, "12345", "running")
    e = envelope.codex("Exit code: 0\nWall time: 1.2 seconds\nTotal output lines: 1\nOutput:\nPASS")
    assert (e.text, e.exit_code) == ("PASS", 0)
    assert envelope.codex("plain output").text == "plain output"
    assert envelope.codex('{"output":"x","metadata":{"exit_code":3}}').exit_code == 3


def test_claude_envelopes():
    e = envelope.claude("Exit code 143\nCommand timed out after 10m 0s", True)
    assert (e.text, e.exit_code, e.is_error) == ("Command timed out after 10m 0s", 143, True)
    assert envelope.claude("Exit codes are fine", False).exit_code is None
    e = envelope.claude("Command running in background with ID: b7x.", False)
    assert e.running_session == "b7x"
    e = envelope.task_output("<retrieval_status>success</retrieval_status><task_id>b1</task_id>"
                             "<task_type>local_bash</task_type><status>failed</status><exit_code>1</exit_code>"
                             "<output>\nFAIL: x\n</output>", None)
    assert (e.text, e.exit_code, e.status, e.is_error) == ("FAIL: x", 1, "failed", True)
    e = envelope.task_output("<retrieval_status>timeout</retrieval_status><task_id>b2</task_id>"
                             "<status>running</status><output>\npartial", None)
    assert (e.text, e.status, e.running_session) == ("partial", "running", "b2")


def test_kimi_envelope():
    e = envelope.kimi("<system>ERROR: Command failed with exit code: 127.</system>\nsh: foo: not found")
    assert (e.text, e.exit_code, e.is_error) == ("sh: foo: not found", 127, True)
    e = envelope.kimi("<system>Command executed successfully.</system>\nok")
    assert (e.text, e.exit_code, e.is_error) == ("ok", 0, False)
    assert envelope.kimi("no preamble").text == "no preamble"


def test_error_status():
    assert error_status("API Error: 402 Insufficient credits") == 402
    assert error_status("429 resource_exhausted: rate limit exceeded") == 429
    assert error_status('{"statusCode": 500, "message": "x"}') == 500
    assert error_status("APIError: 401 unauthorized") == 401
    assert error_status("took 12.429 seconds") is None
    assert error_status("stream hiccup") is None and error_status(None) is None
