"""`forensics lint`: a thin click skin over lint_source / lint_files.

Exit codes follow ruff and semgrep: 0 no finding at or above `--fail-on` (default high), 1 at
least one, 2 a usage error (an unknown `--problem`, a path that does not exist)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from forensics import problems
from forensics.archive.runid import run_id_in_name
from forensics.cliutil import EXIT_FINDINGS, EXIT_OK, SEVERITY_STYLE, InputError, colour, style

from ..findings import SEVERITIES, SEV_RANK, severity_key
from . import DirFiles, lint_files, lint_source

FAIL_ON = (*SEVERITIES, "never")
# the rules that read the problem (its forbidden ops, its main operation, its bench's language gate,
# its benchmark's L2 flush): without one they do not run, or run as for an unknown deck
NEEDS_PROBLEM = ("FORBIDDEN-OP", "FORBIDDEN-TRIPWIRE", "LIBRARY-DOES-WORK", "WORK-BY-LIBRARY",
                 "LANGUAGE-GATE-FAIL", "L2-EVICT-LAST", "L2-PERSISTING-WINDOW")
RECORD_RULES = ("LANGUAGE",)   # a classification every report carries, not a finding


def counted(findings: list[dict]) -> list[dict]:
    return [f for f in findings if f["rule"] not in RECORD_RULES]


def failing(findings: list[dict], fail_on: str) -> list[dict]:
    """The findings at or above `fail_on` ('never': none)."""
    if fail_on == "never":
        return []
    return [f for f in counted(findings) if SEV_RANK.get(f["severity"], -1) >= SEV_RANK[fail_on]]


def _print_report(d: dict, min_sev: str, problem_from: str | None, fail_on: str) -> None:
    on = colour()
    click.echo(f"problem={d['problem']} bench={d['bench']} gpu={d['gpu']} files={', '.join(d['files'])}"
               + (f"  (problem from {problem_from})" if d["problem"] and problem_from else ""))
    if not d["parse"].get("ok", True):
        click.echo(f"parse: {d['parse'].get('error')}")
    lang = d["language"]
    if not d["problem"]:
        click.echo("problem: unknown (give --problem P, or name the file <run_id>.py); rules that need it did "
                   f"not run: {', '.join(NEEDS_PROBLEM)}")
        if lang:
            click.echo(f"language: {lang.get('primary')} ({', '.join(lang.get('languages', []))}); gate: not "
                       "judged without a problem (only the cuda deck and two mini problems have one)")
    elif lang:
        click.echo(f"language: {lang.get('primary')} ({', '.join(lang.get('languages', []))}); gate: "
                   + ", ".join(f"{k}={v}" for k, v in d["gate"].items()))
    shown = 0
    for f in counted(d["findings"]):
        if severity_key(f["severity"]) > severity_key(min_sev):
            continue
        shown += 1
        loc = f"{f['file']}:{f['line_start']}" + (f"-{f['line_end']}" if f.get("line_end") not in (None, f["line_start"]) else "") \
            if f.get("line_start") else f["file"]
        click.echo(f"{style(f['severity'].rjust(8), SEVERITY_STYLE.get(f['severity']), on)}  {f['rule']:<22} {loc}  "
                   f"{f['message']}")
        if f.get("probe"):
            click.echo(f"{'':>10}probe: {f['probe']}")
    if not shown:
        click.echo("no findings at or above " + min_sev)
    bad = failing(d["findings"], fail_on)
    if bad:
        click.echo(f"{len(bad)} finding(s) at or above {fail_on} (--fail-on): exit 1")


@click.command("lint")
@click.argument("path", type=click.Path(exists=True))
@click.option("--problem", default=None, metavar="PROBLEM",
              help="Problem id (the deck folder's name, NN_name): selects forbidden ops and the bench.  Default: the run "
                   "id in the file's name (<run_id>.py, <run_id>__x.py) or a folder above it, or the run folder's.")
@click.option("--bench", default=None, type=click.Choice(["hard", "cuda", "mega", "mini", "multi"]),
              help="The deck (default: the problem's).")
@click.option("--gpu", default=None, help="GPU the solution is meant to run on (for ARCH-MISMATCH).")
@click.option("--min-severity", "min_sev", default="info", show_default=True,
              type=click.Choice(list(reversed(SEVERITIES))), help="Print findings at or above this severity.")
@click.option("--fail-on", default="high", show_default=True, type=click.Choice(FAIL_ON),
              help="Exit 1 when a finding is at or above this severity ('never': exit 0 whatever is found).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def lint_cmd(path: str, problem: str | None, bench: str | None, gpu: str | None, min_sev: str, fail_on: str,
             as_json: bool) -> None:
    """Static audit of a solution file, or of a RUN_DIR (solution, scratch sidecars, grader integrity).

    Reads files only; the solution is parsed, never imported or executed.  Exit codes: 0 no
    finding at or above --fail-on, 1 at least one, 2 usage error (as ruff and semgrep).
    """
    if problem is not None and problems.find(problem) is None:
        raise InputError(f"unknown problem {problem!r}; known: {', '.join(sorted(problems.ids()))}")
    p = Path(path)
    problem_from = "--problem" if problem else None
    if p.is_dir():
        rep = lint_files(DirFiles(p), p.resolve().name, problem=problem, bench=bench, gpu=gpu)
        problem_from = problem_from or "the run folder"
    else:
        if problem is None:   # as `forensics similar` places a file: a run id in its name, else in a folder above
            for where, name in (("file name", p.stem), *(("folder", q.name) for q in p.resolve().parents)):
                rid = run_id_in_name(name)
                if rid is not None and rid.problem_known:
                    problem, problem_from = rid.problem, f"the run id {rid.raw} in the {where}"
                    break
        rep = lint_source(p.read_bytes(), p.name, problem, bench, gpu)
    d = rep.to_dict()
    if as_json:
        d["problem_from"] = problem_from if d["problem"] else None
        if not d["problem"]:
            d["needs_problem"] = list(NEEDS_PROBLEM)
        d["fail_on"] = fail_on
        d["failing"] = len(failing(d["findings"], fail_on))
        sys.stdout.buffer.write(orjson.dumps(d, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        _print_report(d, min_sev, problem_from, fail_on)
    sys.exit(EXIT_FINDINGS if failing(d["findings"], fail_on) else EXIT_OK)
