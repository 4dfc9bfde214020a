"""The CLI's conventions (docs/cli.md): exit codes 0/1/2 with one-line `Error: ...`
and no traceback; what was unreadable said at the end of every scan; output that can be pasted and
piped (whole run ids, uncut cells off a terminal, csv/json/jsonl/markdown, SQL on stdin, no `\\r`
progress frames, colour only on a terminal); help for every option; `lint` exit codes and problem;
`similar` leaving out only the files it cannot place."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import click
import orjson
import pytest
from click.testing import CliRunner

from conftest import FIXTURE_ARCHIVE, REPO
from forensics.cli import main

RUNS = FIXTURE_ARCHIVE / "outputs" / "runs"
# four fixture runs: two with parse errors (a cut last line, invalid UTF-8), two long ids (68, 77 characters)
PICK = ("20260427_135646_claude_claude-opus-4-6_03_paged_attention",
        "20260706_101500_opencode_openrouter-pinned_minimax_minimax-m2.7_07_w4a16_gemm",
        "20260804_020000_or-fable_anthropic_claude-fable-5_03_paged_attention",
        "20260809_140000_gemini_gemini-3.1-pro_05_topk_bitonic")


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("small") / "archive"
    for rid in PICK:
        shutil.copytree(RUNS / rid, root / "outputs" / "runs" / rid, symlinks=True)
    return root


def _invoke(args: list[str], **kw) -> click.testing.Result:
    return CliRunner().invoke(main, args, catch_exceptions=False, **kw)


def _one_line_error(r, *needles: str) -> None:
    assert r.exit_code == 2, (r.exit_code, r.output[-2000:])
    err = r.stderr.strip()
    assert err.startswith("Error: ") and "Traceback" not in r.output and err.count("\n") == 0, err
    for n in needles:
        assert n in err, err


@pytest.fixture(scope="module")
def scanned(small, tmp_path_factory) -> tuple[Path, click.testing.Result]:
    out = tmp_path_factory.mktemp("scan") / "report"
    r = _invoke(["scan", str(small), "--out", str(out)])
    assert r.exit_code == 0, r.output[-3000:]
    return out, r


# ------------------------------------------------------------------------------ item 5: one-line errors
def test_unwritable_out_and_db_are_one_line_errors(small, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    r = _invoke(["scan", str(small), "--out", str(blocker / "report"), "--no-progress"])
    _one_line_error(r, "cannot write --out", str(blocker / "report"))
    r = _invoke(["scan", str(small), "--out", str(tmp_path / "r"), "--db", str(blocker / "x.duckdb"), "--no-progress"])
    _one_line_error(r, "cannot open the store", "x.duckdb")
    r = _invoke(["ingest", str(small), "--db", str(blocker / "x.duckdb"), "--no-progress"])
    _one_line_error(r, "cannot open the store")
    if Path("/proc/self").is_dir():   # a file system nobody may create files in, even as root
        r = _invoke(["scan", str(small), "--out", "/proc/forensics-report", "--no-progress"])
        _one_line_error(r, "cannot write --out /proc/forensics-report")


def test_an_os_error_anywhere_in_a_command_is_one_line(small, tmp_path):
    """The CLI's safety net: a file a command cannot write, past its own checks (here the timeline
    plot's folder is a file), is `Error: <reason>: <path>`, exit 2."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    r = _invoke(["timeline", str(RUNS / PICK[3]), "--plot", str(blocker / "plot.png")])
    _one_line_error(r, str(blocker))


@pytest.mark.parametrize("sql", ["", ";", " ; ;\n"])
def test_empty_sql_is_a_usage_error(scanned, sql):
    out, _ = scanned
    r = _invoke(["sql", sql, "--db", str(out / "audit.duckdb")])
    _one_line_error(r, "no SQL statement")


def test_bad_sql_is_one_line(scanned):
    out, _ = scanned
    r = _invoke(["sql", "selec 1", "--db", str(out / "audit.duckdb")])
    _one_line_error(r, "syntax error")


@pytest.mark.parametrize("kind", ["empty", "wrong"])
def test_scanning_a_folder_without_runs_says_what_an_archive_is(tmp_path, kind):
    src = tmp_path / "src"
    src.mkdir()
    if kind == "wrong":
        (src / "notes.txt").write_text("hello\n")
        (src / "sub").mkdir()
        (src / "sub" / "data.json").write_text("{}\n")
    out = tmp_path / "report"
    r = _invoke(["scan", str(src), "--out", str(out)])
    _one_line_error(r, f"no runs in {src}", "An archive is a folder", "<YYYYMMDD>_<HHMMSS>_<harness>_<model>_<problem>")
    assert not out.exists()   # nothing left behind: no empty report, no store
    r = _invoke(["ingest", str(src), "--db", str(tmp_path / "s.duckdb")])
    _one_line_error(r, "An archive is a folder")
    assert not (tmp_path / "s.duckdb").exists()
    _one_line_error(_invoke(["timeline", str(src)]), "An archive is a folder")


def test_a_file_that_is_no_archive_is_one_line(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not a tar at all")
    r = _invoke(["scan", str(bad), "--out", str(tmp_path / "r")])
    _one_line_error(r, "cannot read tar archive", "not a gzip file")
    assert not (tmp_path / "r").exists()
    r = _invoke(["ingest", str(bad), "--db", str(tmp_path / "s.duckdb")])
    _one_line_error(r, "cannot read tar archive")
    assert not (tmp_path / "s.duckdb").exists()
    _one_line_error(_invoke(["timeline", str(bad)]), "cannot read tar archive")
    txt = tmp_path / "notes.txt"
    txt.write_text("hello\n")
    _one_line_error(_invoke(["timeline", str(txt)]), "not a directory, .tar, .tar.gz or .zip archive")


# ------------------------------------------------------------------------------ item 6: unreadable, truncated
def test_every_scan_ends_with_what_was_unreadable(scanned):
    out, r = scanned
    text = r.stdout
    tail = text[text.index(" runs ("):]
    assert "unreadable: 2 parse error(s) in 2 run(s)" in tail, tail
    assert f"{PICK[0]}  1  transcript.jsonl:56 truncated_line" in tail
    assert f"{PICK[1]}  1  transcript.jsonl:7 invalid_utf8" in tail
    assert f"forensics query parse-errors --db {out / 'audit.duckdb'}" in tail


def _tgz(small: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w:gz") as tf:
        tf.add(small, arcname="archive")
    return dest


def test_a_truncated_targz_is_scanned_up_to_the_cut_and_exits_2(small, tmp_path):
    whole = _tgz(small, tmp_path / "whole.tar.gz")
    data = whole.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) * 3 // 5])
    r = _invoke(["scan", str(cut), "--out", str(tmp_path / "r"), "--json"])
    assert r.exit_code == 2, r.output[-3000:]
    assert r.stderr.strip().startswith("Error: the archive ends early") and "Traceback" not in r.output
    d = orjson.loads(r.stdout)
    t = d["unreadable"]["truncated"]
    assert 0 < d["runs"] < len(PICK) and t["run"] in {v["run_id"] for v in d["verdicts"]}, d["unreadable"]
    assert t["run"] in r.stderr
    cut_run = next(u for u in d["unreadable"]["runs"] if u["run_id"] == t["run"])
    assert any(f["reason"] == "truncated_archive" for f in cut_run["first"]), cut_run
    assert (tmp_path / "r" / "index.html").is_file()   # the runs before the cut are reported
    # the table says it too, and the query lists the row
    r = _invoke(["scan", str(cut), "--out", str(tmp_path / "r")])
    assert r.exit_code == 2 and "truncated_archive" in r.stdout and "Error: the archive ends early" in r.stderr
    q = _invoke(["query", "parse-errors", "--db", str(tmp_path / "r" / "audit.duckdb"), "-p", "reason=truncated_archive",
                 "--format", "json"])
    rows = orjson.loads(q.stdout)
    assert [x["run_id"] for x in rows] == [t["run"]]
    # ingest agrees: what it read, then the error
    r = _invoke(["ingest", str(cut), "--db", str(tmp_path / "i.duckdb"), "--no-progress"])
    assert r.exit_code == 2 and "parse errors:" in r.stdout and "the archive ends early" in r.stderr


# ------------------------------------------------------------------------------ item 7: replay without torch
NO_TORCH = ("import sys\n"
            "sys.modules['torch'] = None   # as if torch were not installed\n"
            "from forensics.cli import main\n"
            "main(sys.argv[1:], prog_name='forensics')\n")


def _run_no_torch(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", NO_TORCH, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_scan_replay_without_torch_stops_before_scanning(small, tmp_path):
    r = _run_no_torch("scan", str(small), "--out", str(tmp_path / "r"), "--replay")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "`forensics scan --replay` needs torch" in r.stderr and "pip install 'kernel-forensics[replay]'" in r.stderr
    assert not (tmp_path / "r").exists() and r.stdout == ""


@pytest.mark.parametrize("args", [["replay", "--help"], ["kernels", "--help"], ["kernels", "check", "--help"]])
def test_replay_help_prints_without_torch(args):
    r = _run_no_torch(*args)
    assert r.returncode == 0 and r.stdout.startswith("Usage: "), (r.returncode, r.stderr[-2000:])
    assert "replay" in r.stdout.lower() and "extra" in r.stdout


def test_kernels_check_of_an_unknown_problem_is_a_usage_error():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    r = _invoke(["kernels", "check", "nonsense", "--device", "cpu"])
    _one_line_error(r, "unknown problem 'nonsense'", "05_topk_bitonic")


# ------------------------------------------------------------------------------ item 8: output
def test_scan_table_prints_run_ids_whole(scanned):
    _, r = scanned
    for rid in PICK:
        assert rid in r.stdout, rid
    assert "…" not in "".join(line.split("  ")[0] for line in r.stdout.splitlines())


def test_sql_cells_are_whole_off_a_terminal_and_cut_on_request(scanned):
    out, _ = scanned
    db = str(out / "audit.duckdb")
    q = "select run_id, detail from parse_errors order by run_id"
    r = _invoke(["sql", q, "--db", db])   # CliRunner's stdout is no terminal
    assert r.exit_code == 0 and PICK[0] in r.stdout and "…" not in r.stdout, r.stdout
    r = _invoke(["sql", q, "--db", db, "--max-width", "20"])
    assert PICK[0] not in r.stdout and PICK[0][:19] + "…" in r.stdout


def test_sql_formats_and_stdin(scanned):
    out, _ = scanned
    db = str(out / "audit.duckdb")
    q = "select run_id, reason, line from parse_errors order by run_id"
    rows = orjson.loads(_invoke(["sql", q, "--db", db, "--format", "json"]).stdout)
    assert rows == orjson.loads(_invoke(["sql", q, "--db", db, "--json"]).stdout)
    assert [x["run_id"] for x in rows] == sorted(PICK[:2])
    jl = _invoke(["sql", q, "--db", db, "--format", "jsonl"]).stdout.splitlines()
    assert [orjson.loads(x) for x in jl] == rows
    import csv
    got = list(csv.DictReader(io.StringIO(_invoke(["sql", q, "--db", db, "--format", "csv"]).stdout)))
    assert [dict(x) for x in got] == [{k: str(v) for k, v in x.items()} for x in rows]
    md = _invoke(["sql", q, "--db", db, "--format", "markdown"]).stdout.splitlines()
    assert md[0] == "| run_id | reason | line |" and md[1] == "|---|---|---|" and len(md) == 2 + len(rows)
    r = _invoke(["sql", "-", "--db", db, "--format", "csv"], input="select count(*) as n from runs;\n")
    assert r.exit_code == 0 and r.stdout.split() == ["n", str(len(PICK))]
    r = _invoke(["query", "parse-errors", "--db", db, "--format", "csv"])
    assert r.exit_code == 0 and r.stdout.startswith("run_id,source,line,")


def test_csv_and_json_shorthands_and_their_conflicts(scanned):
    """--csv as sqlite-utils and the duckdb CLI spell it, beside --json; two flags asking for
    different formats are one usage error, never one silently winning."""
    out, _ = scanned
    db = str(out / "audit.duckdb")
    q = "select run_id, reason, line from parse_errors order by run_id"
    csv_out = _invoke(["sql", q, "--db", db, "--format", "csv"]).stdout
    assert _invoke(["sql", q, "--db", db, "--csv"]).stdout == csv_out
    assert _invoke(["sql", q, "--db", db, "--csv", "--format", "csv"]).stdout == csv_out
    r = _invoke(["query", "parse-errors", "--db", db, "--csv"])
    assert r.exit_code == 0 and r.stdout.startswith("run_id,source,line,")
    for args, said in ((["--csv", "--json"], "--json and --csv"), (["--format", "table", "--csv"], "--csv and --format table"),
                       (["--format", "markdown", "--json"], "--json and --format markdown")):
        r = _invoke(["sql", q, "--db", db, *args])
        assert r.exit_code == 2 and r.stdout == "", (args, r.stdout)
        assert r.stderr.strip() == f"Error: {said} ask for different output formats; give one", r.stderr


def test_markdown_escapes_pipes_and_newlines():
    from forensics.store.queries import render
    text = render(["a", "b"], [("x|y", "1\n2"), (None, 3)], "markdown")
    assert text.splitlines() == ["| a | b |", "|---|---|", "| x\\|y | 1<br>2 |", "|  | 3 |"]


def _commands():
    ctx = click.Context(main)

    def walk(cmd, name):
        if isinstance(cmd, click.Group):
            for n in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, n), f"{name} {n}")
        else:
            yield name, cmd
    return list(walk(main, "forensics"))


def test_every_option_has_help_and_paths_are_paths():
    missing, text_paths = [], []
    for name, cmd in _commands():
        for p in cmd.params:
            if not isinstance(p, click.Option):
                continue
            if not p.help:
                missing.append(f"{name} {p.opts}")
            long = " ".join(p.opts)
            if isinstance(p.type, click.types.StringParamType) and not p.metavar and any(
                    w in long for w in ("--db", "--out", "dir", "path", "file", "--plot", "include", "jsonl",
                                        "--annotations", "--workdir", "--work", "--from")) and "--workers" not in long:
                text_paths.append(f"{name} {p.opts}")
    assert not missing, missing
    assert not text_paths, text_paths


def test_help_shows_path_metavars():
    r = _invoke(["scan", "--help"])
    assert "--out DIRECTORY" in r.stdout and "--db FILE" in r.stdout and " TEXT" not in r.stdout.split("Options:")[1] \
        .split("--engine")[0]


def test_progress_writes_no_frames_when_stderr_is_not_a_terminal(small, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "forensics.cli", "scan", str(small), "--out", str(tmp_path / "r")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "\r" not in r.stderr and "it/s" not in r.stderr and "run/s" not in r.stderr, r.stderr[-500:]


def test_colour_on_a_terminal_only_and_never_with_no_color(monkeypatch, scanned):
    from forensics import cliutil
    from forensics.pipeline import summary_table

    class Tty(io.StringIO):
        def isatty(self):
            return True
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cliutil.colour(Tty()) is True and cliutil.colour(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert cliutil.colour(Tty()) is False
    _, r = scanned
    assert "\x1b[" not in r.stdout     # CliRunner's stdout is no terminal
    assert "\x1b[" in cliutil.style("high", cliutil.SEVERITY_STYLE["high"], True)


# ------------------------------------------------------------------------------ item 4: lint
TOPK = ("import torch\n\nclass Model(torch.nn.Module):\n    def __init__(self, k):\n        super().__init__()\n"
        "        self.k = k\n\n    def forward(self, x):\n        return torch.topk(x, self.k, dim=-1)\n")
KINETIC = "20260716_145936_kinetic-claude_kinetic-0715_1m__05_topk_bitonic"   # a run id that holds `__`


def test_lint_exits_1_on_a_high_finding_and_reads_the_problem_from_the_run_id(tmp_path):
    f = tmp_path / f"{KINETIC}__v2.py"
    f.write_text(TOPK)
    r = _invoke(["lint", str(f)])
    assert r.exit_code == 1, r.output
    assert "problem=05_topk_bitonic" in r.stdout and f"the run id {KINETIC} in the file name" in r.stdout
    assert "FORBIDDEN-OP" in r.stdout and "at or above high (--fail-on)" in r.stdout
    assert _invoke(["lint", str(f), "--fail-on", "never"]).exit_code == 0
    assert _invoke(["lint", str(f), "--fail-on", "critical"]).exit_code == 0
    d = orjson.loads(_invoke(["lint", str(f), "--json"]).stdout)
    assert d["problem"] == "05_topk_bitonic" and d["failing"] >= 1 and d["fail_on"] == "high"


def test_lint_without_a_problem_says_which_rules_need_one(tmp_path):
    f = tmp_path / "solution.py"
    f.write_text(TOPK)
    r = _invoke(["lint", str(f)])
    assert r.exit_code == 0, r.output
    assert "problem: unknown" in r.stdout and "FORBIDDEN-OP" in r.stdout and "ok=False" not in r.stdout
    assert "gate: not judged without a problem" in r.stdout
    d = orjson.loads(_invoke(["lint", str(f), "--json"]).stdout)
    assert d["problem"] is None and "FORBIDDEN-OP" in d["needs_problem"]
    from forensics.analyze.catalogue import by_id
    from forensics.analyze.static.cli import NEEDS_PROBLEM
    assert set(NEEDS_PROBLEM) <= set(by_id())


def test_lint_unknown_problem_is_a_usage_error(tmp_path):
    f = tmp_path / "solution.py"
    f.write_text(TOPK)
    r = _invoke(["lint", str(f), "--problem", "nonsense"])
    _one_line_error(r, "unknown problem 'nonsense'", "05_topk_bitonic", "01_fp8_gemm")
    r = _invoke(["lint", str(f), "--fail-on", "severe"])
    assert r.exit_code == 2


# ------------------------------------------------------------------------------ item 9: similar
def test_run_ids_in_file_names_follow_the_archive_grammar():
    from forensics.analyze.similarity import infer_problem
    from forensics.archive.runid import run_id_in_name
    assert run_id_in_name(KINETIC).raw == KINETIC
    assert run_id_in_name(f"{KINETIC}__v2").raw == KINETIC
    assert run_id_in_name(f"{KINETIC}__01_notes").problem == "05_topk_bitonic"   # not a run of "01_notes"
    assert run_id_in_name("notes__x") is None and run_id_in_name("solution") is None
    assert infer_problem(Path(f"/x/{KINETIC}__v2.py"), "")[0] == "05_topk_bitonic"
    assert infer_problem(Path(f"/x/{KINETIC}__01_notes.py"), "")[0] == "05_topk_bitonic"


def test_similar_leaves_out_unplaceable_files_and_says_so(tmp_path):
    d = tmp_path / "sols"
    d.mkdir()
    (d / f"{KINETIC}__v2.py").write_text(TOPK)
    (d / "20260809_140000_gemini_gemini-3.1-pro_05_topk_bitonic.py").write_text(TOPK + "\n# same\n")
    (d / "notes.py").write_text("print('hello')\n")
    r = _invoke(["similar", str(d)])
    assert r.exit_code == 0, r.output
    assert f"{KINETIC}__v2.py" in r.stdout and "notes.py" not in r.stdout
    assert r.stderr.startswith("Warning: left out 1 solution(s)") and "notes.py" in r.stderr
    only = tmp_path / "only"
    only.mkdir()
    (only / "notes.py").write_text("print('hello')\n")
    r = _invoke(["similar", str(only)])
    assert r.exit_code == 2 and "cannot tell which problem" in r.stderr


# ------------------------------------------------------------------------------ item 8: --jobs by size
def test_jobs_default_is_sized_by_the_runs_to_do(small, tmp_path):
    from forensics.engine import AUTO_MAX_JOBS, AUTO_MIN_RUNS, LocalEngine, auto_jobs
    assert auto_jobs(AUTO_MIN_RUNS - 1, cpus=16) == 1
    assert auto_jobs(AUTO_MIN_RUNS, cpus=4) == 4 and auto_jobs(10 * AUTO_MIN_RUNS, cpus=1) == 1
    assert auto_jobs(10 * AUTO_MIN_RUNS, cpus=256) == AUTO_MAX_JOBS
    eng = LocalEngine(None)
    eng.fit(3)
    assert eng.jobs == 1
    eng.fit(AUTO_MIN_RUNS)
    assert eng.jobs == auto_jobs(AUTO_MIN_RUNS)
    fixed = LocalEngine(2)
    fixed.fit(10 * AUTO_MIN_RUNS)
    assert fixed.jobs == 2   # a --jobs given is kept
    # the command's default: a small archive runs in one process
    d = orjson.loads(_invoke(["scan", str(small), "--out", str(tmp_path / "r"), "--json"]).stdout)
    assert d["engine"]["jobs"] == 1 and d["engine"].get("jobs_auto") is True
    d = orjson.loads(_invoke(["scan", str(small), "--out", str(tmp_path / "r2"), "--json", "-j", "2"]).stdout)
    assert d["engine"]["jobs"] == 2 and "jobs_auto" not in d["engine"]
