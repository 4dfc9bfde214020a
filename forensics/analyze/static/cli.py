"""`forensics lint` and `forensics rules`: thin click skins over lint_source / lint_run_dir / RULES."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from ..findings import SEVERITIES, severity_key
from . import lint_run_dir, lint_source


def _print_report(rep, min_sev: str) -> None:
    d = rep.to_dict()
    click.echo(f"problem={d['problem']} bench={d['bench']} gpu={d['gpu']} files={', '.join(d['files'])}")
    if not d["parse"].get("ok", True):
        click.echo(f"parse: {d['parse'].get('error')}")
    lang = d["language"]
    if lang:
        click.echo(f"language: {lang.get('primary')} ({', '.join(lang.get('languages', []))}); gate: "
                   + ", ".join(f"{k}={v}" for k, v in d["gate"].items()))
    shown = 0
    for f in d["findings"]:
        if severity_key(f["severity"]) > severity_key(min_sev) or f["rule"] == "LANGUAGE":
            continue
        shown += 1
        loc = f"{f['file']}:{f['line_start']}" + (f"-{f['line_end']}" if f.get("line_end") not in (None, f["line_start"]) else "") \
            if f.get("line_start") else f["file"]
        click.echo(f"{f['severity']:>8}  {f['rule']:<22} {loc}  {f['message']}")
        if f.get("probe"):
            click.echo(f"{'':>10}probe: {f['probe']}")
    if not shown:
        click.echo("no findings at or above " + min_sev)


@click.command("lint")
@click.argument("path", type=click.Path(exists=True))
@click.option("--problem", default=None, help="Problem id (the deck folder's name, NN_name): selects forbidden ops and the bench.")
@click.option("--bench", default=None, type=click.Choice(["hard", "cuda", "mega", "mini", "multi"]))
@click.option("--gpu", default=None, help="GPU the solution is meant to run on (for ARCH-MISMATCH).")
@click.option("--min-severity", "min_sev", default="info", type=click.Choice(list(reversed(SEVERITIES))))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def lint_cmd(path: str, problem: str | None, bench: str | None, gpu: str | None, min_sev: str, as_json: bool) -> None:
    """Static audit of a solution file, or of a RUN_DIR (solution, scratch sidecars, grader integrity).

    Reads files only; the solution is parsed, never imported or executed.
    """
    p = Path(path)
    if p.is_dir():
        rep = lint_run_dir(p)
    else:
        rep = lint_source(p.read_bytes(), p.name, problem, bench, gpu)
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(rep.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        _print_report(rep, min_sev)
