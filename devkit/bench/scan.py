"""`forensics bench scan`: `forensics scan` without replay over a generated archive, beside the
ingest-only time of the same archive measured in the same run; optionally the agreement of the
scan's verdict fields with the archive's labels.

    forensics bench scan --runs 1000 --jobs 2            # generate (cached), ingest only, full scan
    forensics bench scan --archive corpus/fixtures/archive --agreement   # agreement on the fixture
    forensics bench scan --runs 200 --engine ray --workers 1,2   # Ray engine vs local, 1 and 2 workers
    forensics bench scan --archive corpus/fixtures/archive --rescan 5 --baseline /tmp/main   # resume cost
    forensics bench scan --runs 5000,20000 --tiny --jobs 1   # the curve: per-run time, peak RSS, store size by N

With several ``--runs`` (or ``--tiny``) the bench measures how the tool scales in runs: a bare parse
of the files, the ingest only and the scan at each size, each in a fresh process, with the time per
run against the smallest size's, peak RSS and store size (devkit/bench/scale.py; ``--baseline DIR``
measures other code beside it).

With ``--rescan ROUNDS`` the bench measures what a resume costs: per round, a full scan of the
archive into a fresh folder, then ``--rescans`` scans of the unchanged archive into it (each a new
process, as `forensics scan` is run), timed as the process's wall clock and as the `scan()` call
inside it; with ``--baseline DIR`` (a checkout of other code, e.g. ``git archive main``) the same
with that code, alternating with this one in every round (each going first in turn), and the ratio
of the medians.

With ``--engine ray`` the bench scans the archive (no reports, no replay) with the local engine
and with a local Ray of the same number of worker CPUs, for each ``--workers`` count, alternating,
in the same run: throughput (runs/s), the Ray engine's overhead per run against the local engine
(wall-clock difference / runs) and the scaling from the fewest to the most workers.  Ray's own
start-up is measured apart (it is paid once per scan, not per run).  The two engines' stores of the
first round are compared table by table (`forensics.engine.compare.diff_stores`): identical, or the
tables that differ.  With ``--engine ray --baseline DIR`` it is this code's Ray engine against the
code in DIR's, each scan a fresh process (`run_engine_baseline_bench`).

The generated archive is cached under --workdir keyed by (runs, seed), so a second bench does
not regenerate.  Both measurements start from an empty store.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import orjson

TARGET_S = 300.0


def _du(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            pass
    return total


def generate(dest: Path, runs: int, seed: int) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "forensics.cli", "corpus", "generate", str(dest), "--runs", str(runs),
                        "--seed", str(seed)], capture_output=True, text=True)
    if r.returncode != 0:
        raise click.ClickException(f"corpus generate failed: {r.stderr[-800:]}")
    return time.perf_counter() - t0


def find_labels(archive: Path) -> Path | None:
    for p in (archive / "labels.json", archive.parent / "labels.json"):
        if p.is_file():
            return p
    return None


def run_bench(archive: Path, work: Path, jobs: int, agreement: bool, labels: Path | None,
              skip_ingest: bool = False) -> dict[str, Any]:
    from forensics.pipeline import scan
    from forensics.store.db import Store
    from forensics.store.ingest import ingest_archive
    out: dict[str, Any] = {"archive": str(archive), "bytes": _du(archive), "jobs": jobs}
    if not skip_ingest:
        db = work / "ingest-only.duckdb"
        db.unlink(missing_ok=True)
        t0 = time.perf_counter()
        with Store(db) as st:
            rep = ingest_archive(st, archive, jobs=jobs, progress=False)
        out["ingest_only_s"] = round(time.perf_counter() - t0, 2)
        out["runs"] = len(rep.run_ids)
        db.unlink(missing_ok=True)
    rdir = work / "report"
    shutil.rmtree(rdir, ignore_errors=True)
    t0 = time.perf_counter()
    res = scan(archive, out=rdir, jobs=jobs, progress=False)
    out["scan_s"] = round(time.perf_counter() - t0, 2)
    out["runs"] = len(res.run_ids)
    out["scan_timings"] = res.timings
    out["coverage"] = res.coverage
    counts: dict[str, int] = {}
    for v in res.verdicts:
        counts[str(v["verdict"])] = counts.get(str(v["verdict"]), 0) + 1
    out["verdict_counts"] = counts
    if out.get("ingest_only_s"):
        out["scan_over_ingest"] = round(out["scan_s"] / out["ingest_only_s"], 2)
    out["target_s"] = TARGET_S
    out["within_target"] = out["scan_s"] < TARGET_S
    if agreement and labels is not None:
        from devkit.bench.agreement import agreement as agree
        with Store(res.db, read_only=True) as st:
            out["agreement"] = agree(st, labels)
    return out


# one scan in a fresh process with the code of one tree (its PYTHONPATH, its cwd): what a user's
# `forensics scan` costs, the interpreter's start and the imports included
_SCAN_ONCE = """
import sys, time
t0 = time.perf_counter()
import orjson
from forensics.pipeline import scan
t1 = time.perf_counter()
kw = {"engine": sys.argv[4], "reports": sys.argv[5] == "1"} if len(sys.argv) > 5 else {}
r = scan(sys.argv[1], out=sys.argv[2], jobs=int(sys.argv[3]), progress=False, **kw)
t2 = time.perf_counter()
print(orjson.dumps({"import_s": t1 - t0, "call_s": t2 - t1, "runs": len(r.run_ids), "analyzed": len(r.analyzed),
                    "timings": r.timings}).decode())
"""


def _scan_process(tree: Path, archive: Path, out: Path, jobs: int, engine: str | None = None,
                  reports: bool = True) -> dict[str, Any]:
    import os
    t0 = time.perf_counter()
    extra = [engine, "1" if reports else "0"] if engine else []
    p = subprocess.run([sys.executable, "-c", _SCAN_ONCE, str(archive.resolve()), str(out), str(jobs), *extra],
                       cwd=str(tree), env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise click.ClickException(f"scan with the code of {tree} failed: {p.stderr[-1500:]}")
    d = orjson.loads(p.stdout.strip().splitlines()[-1])
    d["wall_s"] = wall
    return d


def run_rescan_bench(archive: Path, work: Path, jobs: int, rounds: int, rescans: int,
                     baseline: Path | None) -> dict[str, Any]:
    """Full scan, then `rescans` scans of the unchanged archive, per round, for this code and
    `baseline`'s, alternating; medians and ratios (this / baseline)."""
    import statistics
    from devkit.paths import REPO
    trees = {"current": REPO}
    if baseline is not None:
        trees["baseline"] = baseline.resolve()
    samples: dict[str, dict[str, list[float]]] = {k: {"full_s": [], "rescan_s": [], "rescan_call_s": []} for k in trees}
    runs = 0
    for i in range(rounds):
        # the trees take turns going first (a round's first scan meets colder caches)
        for name, tree in (list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]):
            out = work / f"rescan-{name}"
            shutil.rmtree(out, ignore_errors=True)
            d = _scan_process(tree, archive, out, jobs)
            samples[name]["full_s"].append(d["wall_s"])
            runs = d["runs"]
            for _ in range(rescans):
                d = _scan_process(tree, archive, out, jobs)
                if d["analyzed"]:
                    raise click.ClickException(f"{name}: a rescan of the unchanged archive analysed {d['analyzed']} runs")
                samples[name]["rescan_s"].append(d["wall_s"])
                samples[name]["rescan_call_s"].append(d["call_s"])
            shutil.rmtree(out, ignore_errors=True)
    o: dict[str, Any] = {"archive": str(archive), "runs": runs, "jobs": jobs, "rounds": rounds, "rescans": rescans,
                         "trees": {k: str(v) for k, v in trees.items()}, "median": {}, "all": {}}
    for name, ss in samples.items():
        o["median"][name] = {k: round(statistics.median(v), 3) for k, v in ss.items()}
        o["all"][name] = {k: [round(x, 3) for x in v] for k, v in ss.items()}
    if baseline is not None:
        c, b = o["median"]["current"], o["median"]["baseline"]
        o["ratio"] = {k: round(c[k] / b[k], 3) for k in c}
    return o


def render_rescan(o: dict[str, Any]) -> str:
    lines = [f"archive {o['archive']}: {o['runs']} runs, jobs={o['jobs']}; median of {o['rounds']} round(s) "
             f"x {o['rescans']} rescan(s), each scan a new process"
             + (", the two trees alternating" if "ratio" in o else ""),
             f"  {'code':<9}  {'full scan s':>11}  {'rescan s':>9}  {'scan() s':>9}"]
    for name, m in o["median"].items():
        lines.append(f"  {name:<9}  {m['full_s']:>11.2f}  {m['rescan_s']:>9.3f}  {m['rescan_call_s']:>9.3f}")
    if "ratio" in o:
        r = o["ratio"]
        lines.append(f"  current / baseline: full {r['full_s']:.3f}x, rescan {r['rescan_s']:.3f}x, "
                     f"rescan scan() call {r['rescan_call_s']:.3f}x")
    for name, t in o["trees"].items():
        lines.append(f"  {name}: {t}")
    return "\n".join(lines)


def run_engine_baseline_bench(archive: Path, work: Path, workers: int, rounds: int, baseline: Path) -> dict[str, Any]:
    """The Ray engine of this code against the Ray engine of `baseline` (a checkout of other code),
    each scan (no reports, no replay) a fresh process starting its own local Ray of `workers` CPUs,
    alternating round by round (each going first in turn); the medians, their ratio (this / baseline)
    and whether the first round's two stores are identical, table by table."""
    import statistics
    from devkit.paths import REPO
    trees = {"this": REPO, "baseline": baseline.resolve()}
    out: dict[str, Any] = {"archive": str(archive), "bytes": _du(archive), "workers": workers, "rounds": rounds,
                           "engine": "ray", "what": "scan without reports or replay, a process per scan",
                           "trees": {k: str(v) for k, v in trees.items()}, "rows": {}, "identical": None}
    samples: dict[str, list[dict[str, Any]]] = {"this": [], "baseline": []}
    for i in range(rounds):
        for name in (("baseline", "this") if i % 2 == 0 else ("this", "baseline")):
            dest = work / f"engine-ray-{name}"
            shutil.rmtree(dest, ignore_errors=True)
            d = _scan_process(trees[name], archive, dest, workers, engine="ray", reports=False)
            samples[name].append({"wall_s": d["wall_s"], "scan_s": d["call_s"], "runs": d["runs"],
                                  "ingest_s": (d.get("timings") or {}).get("ingest"),
                                  "analyze_s": (d.get("timings") or {}).get("analyze")})
        if out["identical"] is None:
            from forensics.engine.compare import diff_stores
            out["identical"] = {t: list(v) for t, v in diff_stores(work / "engine-ray-baseline" / "audit.duckdb",
                                                                   work / "engine-ray-this" / "audit.duckdb").items()}
        for name in trees:
            shutil.rmtree(work / f"engine-ray-{name}", ignore_errors=True)
    for name, ss in samples.items():
        out["rows"][name] = {k: round(statistics.median(float(x[k] or 0.0) for x in ss), 3)
                             for k in ("wall_s", "scan_s", "ingest_s", "analyze_s")}
        out["rows"][name]["all_scan_s"] = [round(x["scan_s"], 2) for x in ss]
        out["rows"][name]["runs"] = ss[0]["runs"]
    a, b = out["rows"]["this"], out["rows"]["baseline"]
    out["ratio"] = {k: round(a[k] / b[k], 3) if b[k] else None for k in ("wall_s", "scan_s", "ingest_s", "analyze_s")}
    return out


def render_engine_baseline(o: dict[str, Any]) -> str:
    lines = [f"bench scan --engine ray --baseline: {o['archive']} ({o['rows']['this']['runs']} runs), "
             f"{o['workers']} worker CPU(s), median of {o['rounds']} round(s), alternating, a process per scan",
             f"  {'code':<9} {'wall s':>8} {'scan s':>8} {'ingest s':>9} {'analyze s':>10}  all scans"]
    for name in ("baseline", "this"):
        r = o["rows"][name]
        lines.append(f"  {name:<9} {r['wall_s']:>8.1f} {r['scan_s']:>8.1f} {r['ingest_s']:>9.1f} {r['analyze_s']:>10.1f}  "
                     f"{r['all_scan_s']}")
    lines.append("  this / baseline: " + ", ".join(f"{k} {v}" for k, v in o["ratio"].items()))
    lines.append("  stores identical: " + ("yes" if not o["identical"] else f"no: {o['identical']}"))
    return "\n".join(lines)


def run_engine_bench(archive: Path, work: Path, workers: list[int], rounds: int = 1) -> dict[str, Any]:
    """Local engine vs Ray engine (a local Ray of k CPUs) at each worker count k, same archive."""
    import logging
    import statistics

    import ray

    from forensics.pipeline import scan
    out: dict[str, Any] = {"archive": str(archive), "bytes": _du(archive), "workers": workers, "rounds": rounds,
                           "what": "scan without reports or replay", "rows": [], "identical": {}}
    samples: dict[tuple[str, int], list[dict[str, Any]]] = {}
    if ray.is_initialized():
        raise click.ClickException("bench scan --engine ray starts its own local Ray: run it outside one")
    for _ in range(rounds):
        for k in workers:
            for engine in ("local", "ray"):
                dest = work / f"engine-{engine}-{k}"
                shutil.rmtree(dest, ignore_errors=True)
                start_s = None
                if engine == "ray":
                    t0 = time.perf_counter()
                    ray.init(num_cpus=k, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
                    start_s = time.perf_counter() - t0
                try:
                    t0 = time.perf_counter()
                    res = scan(archive, out=dest, jobs=k, progress=False, reports=False, engine=engine)
                    secs = time.perf_counter() - t0
                finally:
                    if engine == "ray":
                        ray.shutdown()
                if engine == "ray" and str(k) not in out["identical"]:
                    # the first round's two stores, table by table (timing columns left out)
                    from forensics.engine.compare import diff_stores
                    out["identical"][str(k)] = {t: list(v) for t, v in
                                                diff_stores(work / f"engine-local-{k}" / "audit.duckdb", dest / "audit.duckdb").items()}
                if engine == "ray" or str(k) in out["identical"]:
                    shutil.rmtree(work / f"engine-local-{k}", ignore_errors=True)
                    shutil.rmtree(dest, ignore_errors=True)
                n = len(res.run_ids)
                samples.setdefault((engine, k), []).append({
                    "scan_s": secs, "runs": n, "start_s": start_s, "ingest_s": res.timings.get("ingest"),
                    "analyze_s": res.timings.get("analyze"), "failures": len(res.engine.get("failures", [])),
                    "worker_s": {st: v["worker_seconds"] for st, v in res.engine.get("stages", {}).items()}})
    med = {}
    for (engine, k), ss in samples.items():
        m = {key: round(statistics.median(s[key] for s in ss), 3) for key in ("scan_s", "ingest_s", "analyze_s")}
        if engine == "ray":
            m["start_s"] = round(statistics.median(s["start_s"] for s in ss), 3)
        m.update(engine=engine, workers=k, runs=ss[0]["runs"], runs_per_s=round(ss[0]["runs"] / m["scan_s"], 3),
                 failures=sum(s["failures"] for s in ss), all_scan_s=[round(s["scan_s"], 2) for s in ss],
                 worker_s=ss[-1]["worker_s"])
        med[(engine, k)] = m
        out["rows"].append(m)
    out["runs"] = out["rows"][0]["runs"] if out["rows"] else 0
    over = {}
    for k in workers:
        lo, ry = med[("local", k)], med[("ray", k)]
        over[str(k)] = {"ms_per_run": round((ry["scan_s"] - lo["scan_s"]) / max(1, lo["runs"]) * 1000, 2),
                        "ratio": round(ry["scan_s"] / lo["scan_s"], 3)}
    out["ray_overhead"] = over
    if len(workers) > 1:
        a, b = min(workers), max(workers)
        out["scaling"] = {"from": a, "to": b, **{e: round(med[(e, b)]["runs_per_s"] / med[(e, a)]["runs_per_s"], 3)
                                                  for e in ("local", "ray")}}
    return out


def render_engine(o: dict[str, Any]) -> str:
    lines = [f"archive {o['archive']}: {o['runs']} runs, {o['bytes'] / 1e9:.2f} GB; {o['what']}; "
             f"median of {o['rounds']} round(s), engines alternating in the same run",
             f"  {'workers':>7}  {'engine':<6}  {'scan s':>8}  {'runs/s':>7}  {'ingest s':>8}  {'analyze s':>9}  "
             f"{'Ray start s':>11}"]
    for r in o["rows"]:
        st = f"{r['start_s']:>11.1f}" if r.get("start_s") is not None else f"{'-':>11}"
        lines.append(f"  {r['workers']:>7}  {r['engine']:<6}  {r['scan_s']:>8.1f}  {r['runs_per_s']:>7.2f}  "
                     f"{r['ingest_s']:>8.1f}  {r['analyze_s']:>9.1f}  {st}")
    for k, v in o["ray_overhead"].items():
        lines.append(f"  Ray engine vs local, {k} worker(s): {v['ms_per_run']:+.1f} ms per run ({v['ratio']:.2f}x)")
    if "scaling" in o:
        sc = o["scaling"]
        lines.append(f"  scaling {sc['from']} -> {sc['to']} workers: local {sc['local']:.2f}x, ray {sc['ray']:.2f}x")
    for k, d in o.get("identical", {}).items():
        lines.append(f"  stores, local and Ray engine, {k} worker(s): "
                     + ("identical (every table, timing columns left out)" if not d else
                        "DIFFER: " + ", ".join(f"{t} {a} vs {b} rows" for t, (a, b) in d.items())))
    if any(r["failures"] for r in o["rows"]):
        lines.append("  task failures: " + ", ".join(f"{r['engine']}/{r['workers']}: {r['failures']}" for r in o["rows"]))
    return "\n".join(lines)


def render(o: dict[str, Any]) -> str:
    gb = o["bytes"] / 1e9
    lines = [f"archive {o['archive']}: {o['runs']} runs, {gb:.2f} GB, jobs={o['jobs']}"]
    if "generate_s" in o:
        lines.append(f"  generate             {o['generate_s']:>8.1f} s")
    if "ingest_only_s" in o:
        lines.append(f"  ingest only          {o['ingest_only_s']:>8.1f} s   ({gb * 1000 / max(o['ingest_only_s'], 1e-9):.1f} MB/s)")
    lines.append(f"  scan (no replay)     {o['scan_s']:>8.1f} s   target < {o['target_s']:.0f} s: "
                 f"{'yes' if o['within_target'] else 'NO'}")
    if "scan_over_ingest" in o:
        lines.append(f"  scan / ingest-only   {o['scan_over_ingest']:>8.2f} x")
    t = o.get("scan_timings") or {}
    lines.append("  scan stages: " + ", ".join(f"{k} {v:.1f}s" for k, v in t.items()))
    lines.append("  verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(o["verdict_counts"].items())))
    if o.get("coverage", {}).get("missing") or o.get("coverage", {}).get("failed"):
        lines.append(f"  analyzers missing/failed: {o['coverage'].get('missing')} {o['coverage'].get('failed')}")
    if "agreement" in o:
        from devkit.bench.agreement import agreement_table
        lines.append("")
        lines.append("agreement with labels:")
        lines.append(agreement_table(o["agreement"]))
    return "\n".join(lines)


@click.command("scan")
@click.option("--runs", default="1000", show_default=True,
              help="Runs to generate; a comma-separated list (5000,20000) measures the curve: bare parse, ingest "
                   "only and scan at each size, per-run time against the smallest (devkit/bench/scale.py).")
@click.option("--tiny", is_flag=True, help="Generate tiny runs (corpus generate --tiny) and measure the curve.")
@click.option("--no-reports", is_flag=True, help="Curve: scan without writing the reports.")
@click.option("--stages", default="bare,ingest,scan", show_default=True, help="Curve: what to measure.")
@click.option("--profile", "profile_dir", default=None, type=click.Path(file_okay=False),
              help="Curve: write a cProfile of every ingest and scan here.")
@click.option("--clean", is_flag=True, help="Curve: remove each generated archive once measured.")
@click.option("--py-spy", "spy_dir", default=None, type=click.Path(file_okay=False),
              help="Curve: py-spy's sampled stacks of every ingest and scan here (pip install py-spy).")
@click.option("--seed", default=1, show_default=True, help="Generator seed.")
@click.option("--jobs", "-j", default=2, show_default=True, help="Worker processes for ingest and scan.")
@click.option("--workdir", default=None, type=click.Path(file_okay=False), help="Where the generated archive (cached) and the stores go.")
@click.option("--archive", "archive_opt", default=None, type=click.Path(exists=True),
              help="Benchmark an existing archive instead of generating one.")
@click.option("--labels", default=None, type=click.Path(exists=True), help="labels.json (default: beside the archive).")
@click.option("--agreement", is_flag=True, help="Also report agreement of the verdict fields with the labels.")
@click.option("--no-ingest-baseline", is_flag=True, help="Skip the ingest-only measurement.")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="ray: the Ray engine against the local one at each --workers count (same run).")
@click.option("--workers", default=None, help="With --engine ray: worker counts, e.g. 1,2 (default: --jobs).")
@click.option("--rounds", default=1, show_default=True, help="With --engine ray: repetitions (medians reported).")
@click.option("--rescan", "rescan_rounds", default=0, show_default=True,
              help="Rounds of (full scan, --rescans scans of the unchanged archive), each scan a new process.")
@click.option("--rescans", default=3, show_default=True, help="With --rescan: rescans per round.")
@click.option("--baseline", default=None, type=click.Path(exists=True, file_okay=False),
              help="With --rescan, a curve or --engine ray: a checkout of other code (e.g. `git archive main`) "
                   "measured alternately (--engine ray: its Ray engine against this one's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result.")
def bench_scan(runs, tiny, no_reports, stages, profile_dir, clean, spy_dir, seed, jobs, workdir, archive_opt, labels, agreement,
               no_ingest_baseline, engine, workers, rounds, rescan_rounds, rescans, baseline, as_json):
    """Scan (no replay) of a generated N-run archive, beside the ingest-only time (same run); with
    several N or --tiny, the curve (time per run, peak RSS, store size by N); with --engine ray, the
    Ray engine's throughput and per-run overhead against the local engine."""
    work = Path(workdir) if workdir else Path(tempfile.gettempdir()) / "forensics-bench-scan"
    work.mkdir(parents=True, exist_ok=True)
    try:
        sizes = [int(x.replace("_", "")) for x in str(runs).split(",") if x.strip()]
    except ValueError as e:
        raise click.BadParameter(f"--runs: {runs!r} is not a count or a comma-separated list of counts") from e
    if not sizes or min(sizes) < 1:
        raise click.BadParameter("--runs: counts of at least 1")
    if (len(sizes) > 1 or tiny) and not archive_opt:
        from devkit.bench.scale import render_curve, run_curve
        what = tuple(x.strip() for x in stages.split(",") if x.strip())
        if not set(what) <= {"bare", "ingest", "scan"}:
            raise click.BadParameter("--stages: a list of bare, ingest, scan")
        o = run_curve(sizes, seed, tiny, work, jobs, not no_reports, Path(baseline) if baseline else None,
                      Path(profile_dir) if profile_dir else None, what, clean, Path(spy_dir) if spy_dir else None)
        click.echo(orjson.dumps(o, default=str, option=orjson.OPT_INDENT_2).decode() if as_json else render_curve(o))
        return
    runs = sizes[0]
    gen_s = None
    if archive_opt:
        archive = Path(archive_opt)
    else:
        archive = work / f"archive-{runs}-{seed}"
        marker = work / f"archive-{runs}-{seed}.complete"   # outside the archive: the archive is evidence
        if not marker.exists() or not archive.exists():
            shutil.rmtree(archive, ignore_errors=True)
            gen_s = generate(archive, runs, seed)
            marker.write_text("ok")
    if rescan_rounds:
        o = run_rescan_bench(archive, work, jobs, rescan_rounds, max(1, rescans), Path(baseline) if baseline else None)
        click.echo(orjson.dumps(o, default=str, option=orjson.OPT_INDENT_2).decode() if as_json else render_rescan(o))
        return
    if engine == "ray":
        try:
            ks = [int(x) for x in (workers or str(jobs)).split(",") if x.strip()]
        except ValueError as e:
            raise click.BadParameter(f"--workers: {workers!r} is not a comma-separated list of counts") from e
        if not ks or min(ks) < 1:
            raise click.BadParameter("--workers: counts of at least 1")
        try:
            import ray  # noqa: F401
        except ImportError as e:
            from forensics.extras import install_command
            raise click.ClickException(f"--engine ray needs Ray: {install_command('ray')}") from e
        if baseline:   # the Ray engine of this code against another tree's, same archive, alternating
            o = run_engine_baseline_bench(archive, work, max(ks), max(1, rounds), Path(baseline))
            click.echo(orjson.dumps(o, default=str, option=orjson.OPT_INDENT_2).decode() if as_json
                       else render_engine_baseline(o))
            return
        o = run_engine_bench(archive, work, sorted(set(ks)), rounds=max(1, rounds))
        if gen_s is not None:
            o["generate_s"] = round(gen_s, 2)
        click.echo(orjson.dumps(o, default=str, option=orjson.OPT_INDENT_2).decode() if as_json else render_engine(o))
        return
    lab = Path(labels) if labels else find_labels(archive)
    o = run_bench(archive, work, jobs, agreement, lab, skip_ingest=no_ingest_baseline)
    if gen_s is not None:
        o["generate_s"] = round(gen_s, 2)
    if as_json:
        click.echo(orjson.dumps(o, default=str, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(render(o))
