"""Unit tests of the timeline's pure parts: shell reading, edits, apply_patch, sed, python writes,
check outcomes, and the rebuild over hand-written normalized rows (including a real Store)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analyze.timeline import analyze, timeline
from forensics.analyze.timeline import shell
from forensics.analyze.timeline.edits import (Replace, apply_replaces, apply_update, parse_patch, python_writes,
                                               reverse_replaces, sed_script)
from forensics.analyze.timeline.outcome import parse_output, split_task_output
from forensics.analyze.timeline.rebuild import Rebuilder, anchor_with_final
from forensics.store.db import Store

WS = "/w/repo/problems/01_fp8_gemm"


# ---------------------------------------------------------------------- shell

def test_shell_prefixes_cd_pipes_and_env():
    cmds = shell.parse("cd /w/p && KBH_NUMERIC_STRESS=0 timeout -k 5 600 uv run --with x python -u check.py 2>&1 | tail -5")
    assert [c.argv0 for c in cmds] == ["cd", "timeout", "tail"]
    run = cmds[1]
    assert run.cwd == "/w/p" and run.env == {"KBH_NUMERIC_STRESS": "0"} and run.pipe_out
    assert shell.unwrap(run.words) == ["python", "-u", "check.py"]
    assert shell.python_script(shell.unwrap(run.words)) == ("check.py", [])


def test_shell_heredoc_quoting_and_loops():
    cmds = shell.parse("cat > s.py <<'EOF'\nx = \"<<EOF\"\n$HOME\nEOF\nfor i in 1 2; do uv run benchmark.py; done")
    hd = cmds[0].heredoc()
    assert hd.target == "x = \"<<EOF\"\n$HOME\n" and hd.quoted
    assert cmds[0].stdout_files() == [("s.py", False)]
    assert shell.unwrap(cmds[1].words) == ["benchmark.py"]
    un = shell.parse("cat <<EOF >> log.txt\n$X\nEOF")[0]
    assert not un.heredoc().quoted and un.stdout_files() == [("log.txt", True)]


def test_shell_bash_c_and_inspections():
    cmds = shell.parse("bash -lc 'cd sub && python3 /abs/check.py > out.log'", "/home")
    assert cmds[-1].cwd == "/home/sub" and cmds[-1].stdout_files() == [("out.log", False)]
    assert shell.python_script(["sed", "-n", "1,20p", "check.py"]) == (None, [])
    assert shell.python_script(["python", "-c", "import check"]) == (None, [])
    assert shell.join_path("/a/b", "../c/./d.py") == "/a/c/d.py"


# ---------------------------------------------------------------------- edits

def test_replaces_unique_all_and_errors():
    assert apply_replaces("a b a", [Replace("b", "c")]) == ("a c a", None)
    assert apply_replaces("a b a", [Replace("a", "z", replace_all=True)]) == ("z b z", None)
    c, why = apply_replaces("a b a", [Replace("a", "z")])
    assert c is None and "2 times" in why
    c, why = apply_replaces("abc", [Replace("q", "z")])
    assert c is None and "not found" in why
    c, why = apply_replaces(None, [Replace("q", "z")])
    assert c is None and why.startswith("unknown base")
    assert apply_replaces(None, [Replace("", "new file")]) == ("new file", None)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "x = 1", "y = 2", "\n"]), min_size=3, max_size=30),
       st.integers(0, 1000))
def test_reverse_replaces_roundtrip(parts, k):
    before = "".join(parts) + "ANCHOR%d\n" % k
    e = [Replace("ANCHOR%d" % k, "CHANGED%d" % k)]
    after, _ = apply_replaces(before, e)
    assert reverse_replaces(after, e) == (before, None)


def test_patch_parse_and_apply():
    base = "def f():\n    a = 1\n    b = 2\n    return a + b\n\n\ndef g():\n    return 0\n"
    patch = ("*** Begin Patch\n*** Update File: sol.py\n@@ def f():\n     a = 1\n-    b = 2\n+    b = 3\n"
             "@@ def g():\n-    return 0\n+    return 1\n*** Add File: new.py\n+print(1)\n+print(2)\n"
             "*** Delete File: old.py\n*** End Patch")
    ops, err = parse_patch(patch)
    assert err is None and [o.action for o in ops] == ["update", "add", "delete"]
    assert ops[1].add_content == "print(1)\nprint(2)\n"
    new, why = apply_update(base, ops[0])
    assert why is None and new == base.replace("b = 2", "b = 3").replace("return 0", "return 1")
    bad, why = apply_update("unrelated\n", ops[0])
    assert bad is None and "not found" in why


def test_sed_substitutions():
    assert sed_script(["s/x \\* 6/x * 7/"], "y = x * 6\n", False) == ("y = x * 7\n", None)
    assert sed_script(["s|a\\(b\\)|\\1\\1|g"], "ab ab\n", False) == ("bb bb\n", None)
    assert sed_script(["s/(a+)/<\\1>/"], "aa\n", True) == ("<aa>\n", None)
    assert sed_script(["s/a/b/; s/b/c/"], "a\n", False) == ("c\n", None)
    c, why = sed_script(["3d"], "a\nb\nc\n", False)
    assert c is None and "not supported" in why


def test_python_writes_literal_replace_and_unknown():
    ws, err = python_writes("open('a.py','w').write('x = 1\\n')\n"
                            "from pathlib import Path\n"
                            "p = Path('b.py')\n"
                            "p.write_text(p.read_text().replace('old', 'new'))\n"
                            "with open('c.py', 'w') as f:\n    f.write('l1\\n')\n    f.write('l2\\n')\n"
                            "open('d.py', 'w').write(make())\n")
    assert err is None
    by = {}
    for w in ws:
        by.setdefault(w.path, []).append(w)
    assert by["a.py"][0].content == "x = 1\n"
    assert by["b.py"][0].source_path == "b.py" and by["b.py"][0].replaces[0].old == "old"
    assert "".join(w.content for w in by["c.py"]) == "l1\nl2\n"
    assert by["d.py"][0].content is None and by["d.py"][0].reason


# ---------------------------------------------------------------------- outcomes

def test_outcome_pass_fail_unknown_and_unanchored():
    assert parse_output("build...\nPASS\n", "check", 0, None, True).outcome == "PASS"
    assert parse_output("kv_cache=0x7PASS\n", "check", 0, None, True).outcome == "UNKNOWN"
    o = parse_output("FAIL: shape 0 seed 42 case nominal: solution contains NaN\nPASS\n", "check", 0, None, True)
    assert o.outcome == "FAIL" and o.fail_reason.startswith("FAIL: shape 0")
    assert parse_output("PASS\n", "check", 1, None, True).outcome == "ERROR"
    assert parse_output("shape=0 variant=solution ms=1\n", "check", 0, "grep", True).outcome == "UNKNOWN"
    assert parse_output("", "check", 124, None, True).outcome == "TIMEOUT"
    assert parse_output("Traceback (most recent call last):\nValueError: bad\n", "check", 1, None, True).outcome == "ERROR"
    assert parse_output("", "check", None, None, False).outcome == "UNKNOWN"
    b = parse_output("shape=0 variant=solution tflops=1.5 gbps=2.0 ms=0.080\nshape=0 solution_peak_fraction=0.1335\n"
                     "peak_fraction: 0.1162\nRESULT: OK\n", "benchmark", 0, None, True)
    assert b.outcome == "OK" and b.peak_fraction == 0.1162 and b.result_labels == ["OK"]
    assert b.shape_lines[0] == {"shape": 0, "variant": "solution", "tflops": 1.5, "gbps": 2.0, "ms": 0.08}


def test_task_output_xml():
    out, ec, status = split_task_output("<retrieval_status>success</retrieval_status><task_id>b1</task_id>"
                                        "<status>completed</status><exit_code>0</exit_code><output>\nPASS\n</output>")
    assert out.strip() == "PASS" and ec == 0 and status == "completed"
    assert split_task_output("plain") == ("plain", None, None)


# ---------------------------------------------------------------------- rebuild over rows

def _call(seq, tool, args, command=None, cwd=WS, kind=None, background=False):
    return {"call_seq": seq, "line": seq * 2, "tool": tool, "kind": kind, "command": command, "paths": [],
            "cwd": cwd, "args": args, "ts": None, "background": background, "source": "transcript.jsonl"}


def _res(seq, text, exit_code=None, is_error=False, running=None):
    return {"call_seq": seq, "line": seq * 2 + 1, "text": text, "exit_code": exit_code, "is_error": is_error,
            "running_session": running, "status": None}


def test_rebuilder_shell_ops_and_codex_continuation():
    calls = [
        _call(1, "exec_command", {"cmd": "x"}, "cat > solution.py <<'EOF'\na = 1\nb = 2\nEOF", kind="exec"),
        _call(2, "exec_command", {}, "sed -i 's/a = 1/a = 5/' solution.py && cp solution.py /tmp/bak.py", kind="exec"),
        _call(3, "exec_command", {}, "python3 -c \"open('solution.py','w').write('a = 9\\n')\"", kind="exec"),
        _call(4, "exec_command", {}, "KBH_NUMERIC_STRESS=0 uv run check.py", kind="exec"),
        _call(5, "write_stdin", {"session_id": 777, "chars": ""}),
        _call(6, "exec_command", {}, "mv /tmp/bak.py solution.py && rm -f scratch.txt", kind="exec"),
        _call(7, "Edit", {"file_path": WS + "/solution.py", "old_string": "missing", "new_string": "z"}),
    ]
    results = {4: [_res(4, "compiling", running="777")], 5: [_res(5, "PASS\n", exit_code=0)],
               7: [_res(7, "<tool_use_error>String to replace not found", is_error=True)]}
    reb = Rebuilder(calls, results, "01_fp8_gemm").run()
    sol = reb.versions[WS + "/solution.py"]
    assert [v.op for v in sol] == ["heredoc", "sed_i", "python_write", "mv"]
    assert sol[1].content == "a = 5\nb = 2\n" and sol[2].content == "a = 9\n" and sol[3].content == sol[1].content
    assert reb.versions["/tmp/bak.py"][-1].deleted
    (cr,) = reb.checks
    assert cr.background and cr.env == {"KBH_NUMERIC_STRESS": "0"} and len(cr.results) == 2


def test_anchor_does_not_guess():
    calls = [_call(1, "Edit", {"file_path": WS + "/solution.py", "old_string": "b", "new_string": "c"}),
             _call(2, "Edit", {"file_path": WS + "/solution.py", "old_string": "c", "new_string": "dd"})]
    reb = Rebuilder(calls, {}, "01_fp8_gemm").run()
    vs = reb.versions[WS + "/solution.py"]
    assert all(v.gap for v in vs)
    assert anchor_with_final(vs, "no match here") == 0 and all(v.gap for v in vs)
    assert anchor_with_final(vs, "a dd e") == 2
    assert [v.content for v in vs] == ["a c e", "a dd e"] and {v.basis for v in vs} == {"anchor"}


def _store_with(calls, results, final_sha=None, end=None):
    s = Store(":memory:")
    rid = "20260803_194356_claude_m_01_fp8_gemm"
    s.insert_rows("runs", [{"run_id": rid, "problem": "01_fp8_gemm", "harness": "cursor", "solution_sha256": final_sha,
                            "check_verdict": "PASS", "correct": True, "peak_fraction": 0.2}])
    rows = []
    for c in calls:
        r = dict(c, run_id=rid)
        rows.append(r)
    s.insert_rows("tool_calls", rows)
    s.insert_rows("tool_results", [dict(r, run_id=rid) for rs in results.values() for r in rs])
    if end:
        s.insert_rows("session_end", [dict(end, run_id=rid)])
    return s, rid


def test_analyze_on_filled_store_cursor_stream_content_and_wrapper():
    v1 = "import torch\nx = 1\n"
    v2 = "import torch\nx = 2\n"
    calls = [
        _call(1, "write", {"path": WS + "/solution.py", "fileText": v1}),
        _call(2, "shell", {"command": "python check.py"}, "python check.py", kind="exec"),
        _call(3, "edit", {"path": WS + "/solution.py", "streamContent": v2}),
        _call(4, "write", {"path": WS + "/run_all.sh", "fileText": "uv run python check.py\nuv run python benchmark.py\n"}),
        _call(5, "shell", {"command": "bash run_all.sh"}, "bash run_all.sh", kind="exec"),
    ]
    results = {2: [_res(2, "PASS\n", 0)], 5: [_res(5, "PASS\npeak_fraction: 0.2\nRESULT: OK\n", 0)]}
    final_sha = hashlib.sha256(v2.encode()).hexdigest()
    store, rid = _store_with(calls, results, final_sha,
                             {"end_reason": "success", "terminal_line": 20, "last_line": 20})
    n = analyze(store, [rid])
    assert n >= 3
    t = timeline(store, rid)
    vs = t["solution"]["versions"]
    assert [v["basis"] for v in vs] == ["exact", "assumed"] and t["solution"]["final_version"] == 2
    assert [(c["script"], c["outcome"], c["solution_version"], c["superseded"]) for c in t["checks"]] == [
        ("check", "PASS", 1, True), ("wrapper", "PASS", 2, False)]
    rules = {f["rule"] for f in t["findings"]}
    assert {"final-version", "final-version-passed"} <= rules
    assert "superseded-pass" not in rules       # the last PASS ran on the final; the first one is in check_runs
    # re-running replaces rather than duplicates
    analyze(store, [rid])
    assert store.scalar("select count(*) from check_runs where run_id = ?", [rid]) == 2


def test_claude_bash_keeps_its_cwd_between_calls():
    calls = [_call(1, "Bash", {"command": "cd sub"}, "cd sub", kind="exec"),
             _call(2, "Bash", {}, "cat > x.py <<'EOF'\nx = 1\nEOF", kind="exec"),
             _call(3, "bash", {}, "cat > y.py <<'EOF'\ny = 1\nEOF", kind="exec")]   # opencode: no persistence
    reb = Rebuilder(calls, {}, "01_fp8_gemm").run()
    assert set(reb.versions) == {WS + "/sub/x.py", WS + "/y.py"}
    calls = [_call(1, "Bash", {"command": "cd sub"}, "cd sub", kind="exec"),
             _call(2, "Bash", {}, "cd /tmp", kind="exec"),
             _call(3, "Bash", {}, "cat > x.py <<'EOF'\nx = 1\nEOF", kind="exec")]
    res = {2: [_res(2, "Shell cwd was reset to " + WS)]}
    reb = Rebuilder(calls, res, "01_fp8_gemm").run()
    assert set(reb.versions) == {WS + "/x.py"}


def test_run_without_tool_calls_is_unavailable_not_clean():
    store, rid = _store_with([], {}, "ab" * 32, {"end_reason": "success", "last_line": 9})
    analyze(store, [rid])
    rules = [r["rule"] for r in store.query("select rule from findings where run_id = ?", [rid])]
    assert rules == ["timeline-unavailable"]


def test_copy_of_a_file_only_shown_by_cat_or_read():
    foreign = "/runs/other/solution.py"
    calls = [_call(1, "Bash", {}, f"cat {foreign}", kind="exec"),
             _call(2, "Bash", {}, f"cp {foreign} solution.py", kind="exec"),
             _call(3, "Read", {"file_path": "/runs/x/helper.py"}),
             _call(4, "Bash", {}, "cp /runs/x/helper.py h.py && cp /runs/unseen.py u.py", kind="exec")]
    res = {1: [_res(1, "import torch\nX = 1")], 2: [_res(2, "(Bash completed with no output)")],
           3: [_res(3, "     1\tdef f():\n     2\t    return 1\n")]}
    reb = Rebuilder(calls, res, "01_fp8_gemm").run()
    (v,) = reb.versions[WS + "/solution.py"]
    assert v.content == "import torch\nX = 1\n" and v.basis == "assumed" and v.op == "cp"
    assert reb.versions[WS + "/h.py"][0].content == "def f():\n    return 1\n"
    assert WS + "/u.py" not in reb.versions      # nothing known about the source: no version invented


def test_under_timeout_reads_the_parsed_command():
    """A 137/143 exit counts as a timeout only when a simple command of the call ran under
    `timeout` (any path, behind sudo/env, inside bash -c), not when the word appears elsewhere."""
    from forensics.analyze.timeline.core import _under_timeout
    for cmd in ("timeout 60 python check.py", "/usr/bin/timeout -k 5 60 python check.py",
                "sudo timeout 5 env X=1 python benchmark.py", "cd p && timeout 10s python check.py 2>&1 | tail -3",
                "bash -c 'timeout 5 python check.py'"):
        assert _under_timeout(cmd), cmd
    for cmd in ("grep timeout log.txt", "echo 'timeout 5'", "python check.py --timeout 5", "", None):
        assert not _under_timeout(cmd), cmd


def test_rebuilder_here_strings():
    """`cat <<< WORD > f` and `tee f <<< WORD` write WORD and a newline; a word with an expansion
    outside single quotes is a gap, not a guess; the last stdin redirection wins."""
    calls = [
        _call(1, "exec_command", {}, "cat <<< 'x = \"$HOME\"' > solution.py", kind="exec"),
        _call(2, "exec_command", {}, "tee -a solution.py <<< y=2 >/dev/null", kind="exec"),
        _call(3, "exec_command", {}, 'cat > other.py <<< "v=$V"', kind="exec"),
        _call(4, "exec_command", {}, "cat <<'EOF' <<< 'last = 1' > third.py\nfirst = 1\nEOF", kind="exec"),
    ]
    reb = Rebuilder(calls, {}, "01_fp8_gemm").run()
    sol = reb.versions[WS + "/solution.py"]
    assert [v.op for v in sol] == ["heredoc", "tee"]
    assert sol[0].content == 'x = "$HOME"\n' and sol[1].content == 'x = "$HOME"\ny=2\n'
    (other,) = reb.versions[WS + "/other.py"]
    assert other.content is None and "here-string" in (other.gap_reason or "")
    assert reb.versions[WS + "/third.py"][-1].content == "last = 1\n"
