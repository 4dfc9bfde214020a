"""`forensics bench scan`: `forensics scan` without replay over a generated archive, beside the
ingest-only time of the same archive measured in the same run; optionally the agreement of the
scan's verdict fields with the archive's labels.

    forensics bench scan --runs 1000 --jobs 2            # generate (cached), ingest only, full scan
    forensics bench scan --archive corpus/fixtures/archive --agreement   # agreement on the fixture

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
        from forensics.report.agreement import agreement as agree
        with Store(res.db, read_only=True) as st:
            out["agreement"] = agree(st, labels)
    return out


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
        from forensics.report.agreement import agreement_table
        lines.append("")
        lines.append("agreement with labels:")
        lines.append(agreement_table(o["agreement"]))
    return "\n".join(lines)


@click.command("scan")
@click.option("--runs", default=1000, show_default=True, help="Runs to generate.")
@click.option("--seed", default=1, show_default=True, help="Generator seed.")
@click.option("--jobs", "-j", default=2, show_default=True, help="Worker processes for ingest and scan.")
@click.option("--workdir", default=None, help="Where the generated archive (cached) and the stores go.")
@click.option("--archive", "archive_opt", default=None, type=click.Path(exists=True),
              help="Benchmark an existing archive instead of generating one.")
@click.option("--labels", default=None, type=click.Path(exists=True), help="labels.json (default: beside the archive).")
@click.option("--agreement", is_flag=True, help="Also report agreement of the verdict fields with the labels.")
@click.option("--no-ingest-baseline", is_flag=True, help="Skip the ingest-only measurement.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result.")
def bench_scan(runs, seed, jobs, workdir, archive_opt, labels, agreement, no_ingest_baseline, as_json):
    """Scan (no replay) of a generated N-run archive, beside the ingest-only time (same run)."""
    work = Path(workdir) if workdir else Path(tempfile.gettempdir()) / "forensics-bench-scan"
    work.mkdir(parents=True, exist_ok=True)
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
    lab = Path(labels) if labels else find_labels(archive)
    o = run_bench(archive, work, jobs, agreement, lab, skip_ingest=no_ingest_baseline)
    if gen_s is not None:
        o["generate_s"] = round(gen_s, 2)
    if as_json:
        click.echo(orjson.dumps(o, default=str, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(render(o))
