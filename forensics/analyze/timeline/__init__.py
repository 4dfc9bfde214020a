"""Timeline: every version of every file the agent wrote, every in-transcript check and benchmark
run with the solution version it ran on, and what that says about the archived solution.py.

    from forensics.analyze.timeline import analyze, timeline, trajectory_entries
    analyze(store, [run_id])                 # writes file_versions, check_runs, findings (analyzer 'timeline')
    timeline(store, run_id)                  # -> dict (versions, checks, end, findings, trajectory)
    trajectory_entries(store, run_id)        # -> the annotation `trajectory` entries

CLI: ``forensics timeline RUN_DIR [--json] [--plot out.png]``.  See docs/timeline.md.
"""

from __future__ import annotations

import click
import orjson

from forensics.analyze.timeline.core import ANALYZER, analyze, analyze_run
from forensics.archive.runid import run_file_names
from forensics.analyze.timeline.report import plot, render_text, timeline, trajectory_entries

__all__ = ["ANALYZER", "analyze", "analyze_run", "timeline", "trajectory_entries", "render_text", "plot",
           "timeline_cmd"]


@click.command("timeline")
@click.argument("run_dir", type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print the timeline as JSON.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write the trajectory plot (PNG) here; with several runs, the run id is appended.")
@click.option("--x", "x_axis", type=click.Choice(["call", "time"]), default="call", show_default=True,
              help="Plot scores against the tool-call number or the timestamp (where the format has one).")
@click.option("--content/--no-content", default=False, help="Include each version's rebuilt content in --json.")
def timeline_cmd(run_dir: str, as_json: bool, plot_path: str | None, x_axis: str, content: bool) -> None:
    """Versions of the solution and the checks that ran on each, for RUN_DIR (a run folder, or an
    archive of several) ingested into a temporary in-memory store."""
    from forensics.archive import ArchiveError
    from forensics.cliutil import InputError, one_line
    from forensics.store.db import Store
    from forensics.store.ingest import ingest_path, no_runs_message

    store = Store(":memory:")
    try:
        ingest_path(store, run_dir)
    except ArchiveError as e:
        raise InputError(one_line(str(e))) from e
    ids = store.run_ids()
    if not ids:
        raise InputError(no_runs_message(run_dir))
    analyze(store, ids)
    out = []
    names = run_file_names(ids)
    for rid in ids:
        t = timeline(store, rid)
        if content:
            rows = store.query("select path, version, content from file_versions where run_id = ?", [rid])
            by = {(r["path"], r["version"]): r["content"] for r in rows}
            for v in t["solution"]["versions"]:
                v["content"] = by.get((v["path"], v["version"]))
        if plot_path:
            p = plot_path if len(ids) == 1 else plot_path.replace(".png", f".{names[rid]}.png")
            plot(t, p, x=x_axis)
            t["plot"] = p
        out.append(t)
    if as_json:
        click.echo(orjson.dumps(out[0] if len(out) == 1 else out, default=str,
                                option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
    else:
        click.echo("\n\n".join(render_text(t) for t in out))
        if plot_path:
            for t in out:
                click.echo(f"plot: {t['plot']}")
