"""File-access extraction: shell-like resolution and owner classification."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.text import shell as sh
from forensics.transcripts.access import RunContext, extract_accesses
from forensics.transcripts.events import ToolCall, ToolResult

ME = "20260803_194356_claude_claude-fable-5_06_sonic_moe_swiglu"
OTHER = "20260801_101010_codex_gpt-5.5_06_sonic_moe_swiglu"
OTHER2 = "20260802_000000_kimi_kimi-k3_06_sonic_moe_swiglu"
DIFF = "20260731_120000_grok_grok-5_01_fp8_gemm"
ROOT = "/home/infatoshi/benchmarks/KernelBench-Hard/outputs/runs"
WS = f"{ROOT}/{ME}/repo/problems/06_sonic_moe_swiglu"
KNOWN = {ME: "06_sonic_moe_swiglu", OTHER: "06_sonic_moe_swiglu", OTHER2: "06_sonic_moe_swiglu", DIFF: "01_fp8_gemm"}


def call(seq, cmd=None, kind="exec", tool="Bash", paths=(), args=None, cwd=WS):
    return ToolCall("transcript.jsonl", seq * 10, f"c{seq}", tool, kind, args or {"command": cmd}, cmd,
                    list(paths), cwd, call_seq=seq)


def run(calls, results=(), **kw):
    ctx = RunContext.for_run(run_id=ME, run_name=ME, problem="06_sonic_moe_swiglu", calls=calls,
                             known_runs=KNOWN, **kw)
    return extract_accesses(ctx, calls, list(results))


def foreign(rows):
    return {(r["call_seq"], r["access"], r["foreign_run_id"], r["foreign_file"]) for r in rows if r["owner"] == "foreign"}


def test_cat_of_foreign_solution_by_relative_path_after_cd():
    rows = run([call(1, f"cd {ROOT} && cat ./{OTHER}/solution.py | head -40")])
    assert (1, "read", OTHER, "solution.py") in foreign(rows)
    # the command-text scan does not duplicate the resolved read
    assert sum(1 for r in rows if r["foreign_run_id"] == OTHER) == 1


def test_cd_persists_across_claude_bash_calls_but_not_codex_exec():
    calls = [call(1, "cd ../../../.."), call(2, f"sed -n '1,80p' {OTHER}/result.json")]
    rows = run(calls)
    assert (2, "read", OTHER, "result.json") in foreign(rows)
    codex = [call(1, "cd ../../../..", tool="exec_command"), call(2, f"sed -n '1,80p' {OTHER}/result.json",
                                                                   tool="exec_command")]
    rows = run(codex)
    r2 = [r for r in rows if r["call_seq"] == 2 and r["access"] == "read"]
    assert r2 and r2[0]["resolved_path"] == f"{WS}/{OTHER}/result.json"


def test_subshell_cd_does_not_leak():
    rows = run([call(1, f"(cd {ROOT}/{OTHER} && ls) ; cat solution.py")])
    reads = [r for r in rows if r["access"] == "read"]
    assert reads[0]["resolved_path"] == f"{WS}/solution.py" and reads[0]["owner"] == "self"
    assert (1, "list", OTHER, None) in foreign(rows)


def test_home_variables_and_tilde():
    rows = run([call(1, f"R=$HOME/benchmarks/KernelBench-Hard/outputs/runs; cat $R/{OTHER}/check.log ~/.claude/x")])
    assert (1, "read", OTHER, "check.log") in foreign(rows)
    h = [r for r in rows if r["resolved_path"] == "/home/infatoshi/.claude/x"]
    assert h and h[0]["owner"] == "harness"


def test_glob_matched_against_known_runs():
    rows = run([call(1, f"tail -n 5 {ROOT}/*sonic*/benchmark.log")])
    f = foreign(rows)
    assert (1, "read", OTHER, "benchmark.log") in f and (1, "read", OTHER2, "benchmark.log") in f
    assert (1, "read", DIFF, "benchmark.log") not in f
    assert all(r["is_glob"] for r in rows if r["owner"] == "foreign")
    # a quoted glob is not expanded by the shell
    rows = run([call(1, f"echo '{ROOT}/*sonic*/x'")])
    assert not any(r["is_glob"] for r in rows)


def test_python_c_and_heredoc_open():
    code = f"python -c \"import json; print(json.load(open('{ROOT}/{OTHER}/result.json')))\""
    rows = run([call(1, code)])
    assert any(r["via"] == "python" and r["foreign_file"] == "result.json" for r in rows)
    here = f"uv run python - <<'EOF'\nfrom pathlib import Path\nprint(Path('{ROOT}/{OTHER2}/solution.py').read_text())\nEOF\n"
    rows = run([call(1, here)])
    assert (1, "read", OTHER2, "solution.py") in foreign(rows)


def test_find_exec_and_xargs_and_tar_and_cp():
    rows = run([call(1, f"find {ROOT} -name solution.py -exec cat {{}} \\;")])
    r = [x for x in rows if x["detail"] == "find -exec cat"]
    assert r and r[0]["owner"] == "foreign" and r[0]["is_glob"] and r[0]["foreign_file"] == "solution.py"
    rows = run([call(1, f"ls -d {ROOT}/{OTHER} | xargs -I{{}} cat {{}}/solution.py")])
    assert any(x["access"] == "read" and x["foreign_run_id"] == OTHER for x in rows)
    rows = run([call(1, f"tar -czf /tmp/o.tgz -C / {ROOT[1:]}/{OTHER}/scratch && cp {ROOT}/{OTHER}/solution.py .")])
    f = foreign(rows)
    assert (1, "copy_src", OTHER, "solution.py") in f
    dst = [x for x in rows if x["access"] == "copy_dst"]
    assert dst and dst[0]["owner"] == "self"


def test_results_mention_foreign_runs_only():
    calls = [call(1, "ps aux | grep benchmark"), call(2, "pwd")]
    results = [ToolResult("transcript.jsonl", 15, "c1",
                          f"u 1 python {ROOT}/{OTHER}/repo/problems/06_sonic_moe_swiglu/benchmark.py\n", call_seq=1),
               ToolResult("transcript.jsonl", 25, "c2", WS, call_seq=2)]
    rows = run(calls, results)
    m = [r for r in rows if r["via"] == "result"]
    assert len(m) == 1 and m[0]["foreign_run_id"] == OTHER and m[0]["detail"] == "result of ps"
    assert m[0]["line"] == 15


def test_container_paths_and_owner_classes():
    calls = [call(1, "cat /workspace/problems/06_sonic_moe_swiglu/reference.py /kbh/bin/gpu-lock-exec "
                     "/usr/local/cuda/include/cuda.h /workspace/src/eval/check_util.py > /tmp/o.txt",
                  cwd="/workspace/problems/06_sonic_moe_swiglu")]
    rows = run(calls)
    own = {r["resolved_path"]: r["owner"] for r in rows}
    assert own["/workspace/problems/06_sonic_moe_swiglu/reference.py"] == "self"
    assert own["/kbh/bin/gpu-lock-exec"] == "harness"
    assert own["/workspace/src/eval/check_util.py"] == "harness"
    assert own["/usr/local/cuda/include/cuda.h"] == "system"
    assert own["/tmp/o.txt"] == "system"


def test_structured_read_and_glob_tool():
    calls = [call(1, kind="read", tool="Read", paths=[f"{ROOT}/{OTHER}/transcript.jsonl"],
                  args={"file_path": f"{ROOT}/{OTHER}/transcript.jsonl"}),
             call(2, kind="search", tool="Glob", paths=[ROOT], args={"pattern": "*sonic*/solution.py", "path": ROOT})]
    rows = run(calls)
    f = foreign(rows)
    assert (1, "read", OTHER, "transcript.jsonl") in f
    assert (2, "search", OTHER, "solution.py") in f


def test_collision_root_is_foreign():
    ctx = RunContext(run_id=f"{ME}@runs", root="runs", known_runs=KNOWN)
    owner, rid, ff = ctx.classify(f"/x/outputs/runs-b200/{ME}/solution.py")
    assert owner == "foreign" and rid == f"{ME}@runs-b200" and ff == "solution.py"
    assert ctx.classify(f"/x/outputs/runs/{ME}/solution.py")[0] == "self"


def test_shell_parse_heredoc_and_quotes():
    items = sh.parse("cat > 'my file.py' <<'EOF'\nx = '$HOME'\nEOF\necho \"a b\" | wc -l")
    cmds = [c for k, c in items if k == "cmd"]
    assert cmds[0].heredoc == "x = '$HOME'" and cmds[0].redirs[0][1].text == "my file.py"
    assert cmds[1].argv == ["echo", "a b"] and cmds[2].piped_from_prev


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab/ .*'\"\\$()|;&<>\n#`{}=~-_2", max_size=120))
def test_parser_and_extractor_never_raise(text):
    sh.parse(text)
    run([call(1, text)], [ToolResult("t", 1, "c1", text, call_seq=1)])
