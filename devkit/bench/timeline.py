"""`forensics bench timeline`: the timeline analyzer on one large generated run, beside the time
to merely parse the same transcript.

The run is a Claude stream-json session written by the corpus RunBuilder: one Write of a
~300-line solution.py, then EDITS edits (Edit, MultiEdit, here-doc rewrites, sed -i, apply_patch
through Bash), CHECKS check.py runs in between (some in the background, collected with
TaskOutput, some benchmark runs), and `task_progress` heartbeat lines so that the transcript
has RECORDS records, as real Claude transcripts do (spec 5.2).  It is ingested once into an
in-memory store; then, measured in the same process:

* `analyze`: `forensics.analyze.timeline.analyze(store, [run_id])` - store reads of tool_calls,
  tool_results, runs and session_end, rebuilding every version, check detection, and the
  writes of file_versions / check_runs / findings;
* `parse`: `forensics.transcripts.parse_source` over the transcript file, every event consumed.

The reported ratio is analyze / parse (median of --repeat runs each).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import click
import orjson


def _solution(n: int) -> str:
    body = "".join(f"        c{i} = x * {i}\n" for i in range(n))
    return ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n\n    def forward(self, x):\n" + body + "        return x\n")


def build_run(out: Path, records: int, edits: int, checks: int, pad: int | None = None) -> tuple[Path, dict]:
    from devkit.generator.run import RunBuilder

    b = RunBuilder("hard", "01_fp8_gemm", "claude", "E4", "20260803_194356", "claude-opus-4-8", seed=5)
    s = b.session
    nlines = 300
    src = _solution(nlines)
    s.read("PROMPT.txt", b.template("PROMPT.txt"))
    s.write("solution.py", src)
    every = max(1, edits // max(1, checks))
    per_gap = 0 if pad is None else pad // (edits + 1)
    cur = {i: f"x * {i}" for i in range(nlines)}
    n_checks = 0
    for k in range(edits):
        i = (k * 37) % nlines
        old = f"        c{i} = {cur[i]}\n"
        new_expr = f"{cur[i]} + {k}"
        new = f"        c{i} = {new_expr}\n"
        kind = k % 10
        if kind == 3:
            j = (i + 1) % nlines
            old2, new2 = f"        c{j} = {cur[j]}\n", f"        c{j} = {cur[j]} - {k}\n"
            if j > i:
                s.multiedit("solution.py", [(old, new), (old2, new2)])
            else:
                s.multiedit("solution.py", [(old2, new2), (old, new)])
            cur[j] = f"{cur[j]} - {k}"
        elif kind == 5:
            s.apply_patch("solution.py", [(old, new)])
        elif kind == 7:
            full = s.content("solution.py").replace(old, new)
            s.heredoc("solution.py", full)
        else:
            s.edit("solution.py", old, new)
        cur[i] = new_expr
        s.bash("ls -la", "total 64\n", 0)
        if per_gap:
            s.progress(per_gap)
        if (k + 1) % every == 0 and n_checks < checks:
            n_checks += 1
            if n_checks % 4 == 0:
                b.benchmark(target=0.1 + n_checks / 400)
            elif n_checks % 7 == 0:
                seq = b.check(style="plain", background=True)
                s.task_output(seq)
            else:
                b.check(style="tail")
    if pad:
        s.progress(pad - per_gap * edits)
    s.end("Done.")
    b.grade("PASS", peak_fraction=0.2)
    b.write(out)
    run_dir = next((out / "outputs" / "runs").iterdir())
    return run_dir, {"checks": n_checks, "edits": edits}


def _count_lines(p: Path) -> int:
    with open(p, "rb") as f:
        return sum(1 for ln in f if ln.strip())


def run_bench(records: int, edits: int, checks: int, repeat: int, work: Path | None) -> dict:
    from forensics.analyze.timeline import analyze
    from forensics.store.db import Store
    from forensics.store.ingest import ingest_path
    from forensics.transcripts import parse_source

    if work is None:
        with tempfile.TemporaryDirectory(prefix="fx-bench-timeline-") as d:
            return run_bench(records, edits, checks, repeat, Path(d))
    tmp = Path(work)
    probe, _ = build_run(tmp / "probe", records, edits, checks, pad=0)
    base = _count_lines(probe / "transcript.jsonl")
    pad = max(0, records - base)
    for attempt in range(3):
        run_dir, info = build_run(tmp / f"run{attempt}", records, edits, checks, pad=pad)
        transcript = run_dir / "transcript.jsonl"
        n_records = _count_lines(transcript)
        if n_records >= records:
            break
        pad += records - n_records

    store = Store(":memory:")
    t0 = time.perf_counter()
    ingest_path(store, run_dir)
    t_ingest = time.perf_counter() - t0
    rid = store.run_ids()[0]

    t_analyze, t_parse = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n_find = analyze(store, [rid])
        t_analyze.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        n_ev = 0
        with open(transcript, "rb") as f:
            for _ev in parse_source(f, source="transcript.jsonl", harness="claude"):
                n_ev += 1
        t_parse.append(time.perf_counter() - t0)
    sol = store.query("select count(*) n, sum(case when gap then 1 else 0 end) gaps from file_versions "
                      "where run_id = ? and is_solution", [rid])[0]
    cr = store.query("select count(*) n from check_runs where run_id = ?", [rid])[0]
    med_a, med_p = statistics.median(t_analyze), statistics.median(t_parse)
    return {
        "transcript": str(transcript.relative_to(tmp)), "transcript_bytes": transcript.stat().st_size, "records": n_records,
        "tool_calls": store.scalar("select count(*) from tool_calls where run_id = ?", [rid]),
        "edits_requested": edits, "checks_requested": checks,
        "solution_versions": sol["n"], "gaps": sol["gaps"], "check_runs": cr["n"], "findings": n_find,
        "ingest_seconds": round(t_ingest, 4),
        "analyze_seconds": {"median": round(med_a, 4), "min": round(min(t_analyze), 4), "all": [round(x, 4) for x in t_analyze]},
        "parse_seconds": {"median": round(med_p, 4), "min": round(min(t_parse), 4), "all": [round(x, 4) for x in t_parse],
                          "events": n_ev},
        "ratio_analyze_over_parse": round(med_a / med_p, 3) if med_p else None,
        "target_seconds": 1.0, "under_target": med_a < 1.0,
    }


@click.command("timeline")
@click.option("--records", default=50_000, show_default=True, help="Records in the generated transcript.")
@click.option("--edits", default=200, show_default=True, help="Edits of solution.py.")
@click.option("--checks", default=40, show_default=True, help="In-session check/benchmark runs.")
@click.option("--repeat", default=3, show_default=True, help="Timed repetitions (the median is reported).")
@click.option("--work", type=click.Path(file_okay=False), default=None, help="Where to write the generated run.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
def bench_timeline(records: int, edits: int, checks: int, repeat: int, work: str | None, as_json: bool) -> None:
    """Timeline rebuild of a large transcript (default 50k records, 200 edits, 40 checks) vs bare parse."""
    r = run_bench(records, edits, checks, repeat, Path(work) if work else None)
    if as_json:
        click.echo(orjson.dumps(r, option=orjson.OPT_INDENT_2).decode())
        return
    click.echo(f"transcript: {r['records']} records, {r['transcript_bytes'] / 1e6:.1f} MB, {r['tool_calls']} tool calls")
    click.echo(f"rebuilt: {r['solution_versions']} solution versions ({r['gaps']} gaps), {r['check_runs']} check runs, "
               f"{r['findings']} findings")
    click.echo(f"analyze (store reads + rebuild + writes): {r['analyze_seconds']['median']:.3f} s median "
               f"(target < 1 s: {'yes' if r['under_target'] else 'NO'})")
    click.echo(f"parse_source of the same transcript:      {r['parse_seconds']['median']:.3f} s median")
    click.echo(f"ratio analyze / parse: {r['ratio_analyze_over_parse']}")
    click.echo(f"(one-off ingest into the store: {r['ingest_seconds']:.2f} s)")
