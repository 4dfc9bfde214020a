"""`forensics bench ingest`: end-to-end ingest throughput beside two baselines measured in the
same run on the same files:

* bare parse: read every line of every transcript source and `orjson.loads` it (one core);
* DuckDB's own `read_json` of the same files (newline-delimited, errors ignored);

and the ingest's peak RSS (measured in a child process so the baselines do not pollute it).
Each figure has its wall time and its CPU time (user + system, workers included): on a shared
machine the CPU ratio is the steadier one.  The archive is generated with `forensics corpus
generate` unless --archive is given.
"""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import orjson

from forensics.archive.discover import discover_runs
from forensics.archive.source import open_source
from forensics.store.ingest import transcript_sources


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _generate(out: Path, runs: int, seed: int) -> None:
    subprocess.run([sys.executable, "-m", "forensics.cli", "corpus", "generate", str(out), "--runs", str(runs),
                    "--seed", str(seed)], check=True, stdout=subprocess.DEVNULL)


def ensure_archive(work: Path, target_bytes: int, seed: int) -> Path:
    """Generate an archive of at least target_bytes (probing the generator's run size first)."""
    arch = work / f"bench-ingest-{seed}-{target_bytes}"
    if arch.exists() and _tree_bytes(arch) >= target_bytes:
        return arch
    probe = work / f"probe-{seed}"
    if not probe.exists():
        _generate(probe, 20, seed)
    per_run = max(1, _tree_bytes(probe) // 20)
    runs = int(target_bytes / per_run * 1.1) + 1
    if arch.exists():
        import shutil
        shutil.rmtree(arch)
    _generate(arch, runs, seed)
    return arch


def transcript_files(archive: Path) -> list[Path]:
    src = open_source(archive)
    out = []
    for run in discover_runs(src):
        files = run.rel_files()
        for rel in transcript_sources(files):
            out.append(Path(src.location) / run.run_path / rel)
    return out


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def bare_parse(files: list[Path]) -> dict:
    c0 = _cpu()
    t0 = time.perf_counter()
    n_lines = n_bytes = n_bad = 0
    for p in files:
        with open(p, "rb") as f:
            head = f.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(p, "rb") as f:
            for line in f:
                n_bytes += len(line)
                if not line.strip():
                    continue
                n_lines += 1
                try:
                    orjson.loads(line)
                except orjson.JSONDecodeError:
                    n_bad += 1
    dt = time.perf_counter() - t0
    return {"seconds": dt, "cpu_seconds": _cpu() - c0, "lines": n_lines, "bytes": n_bytes, "invalid": n_bad}


def duckdb_read_json(files: list[Path]) -> dict:
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads=1")
    c0 = _cpu()
    t0 = time.perf_counter()
    n = 0
    for p in files:
        try:
            n += con.execute("select count(*) from read_json(?, format='newline_delimited', ignore_errors=true, "
                             "maximum_object_size=268435456, union_by_name=true)", [str(p)]).fetchone()[0]
        except duckdb.Error:
            pass  # plain-text transcripts are not JSON at all
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": _cpu() - c0, "rows": n}


def ingest_child(archive: Path, db: Path, jobs: int) -> dict:
    """Run the ingest in a child process and report its wall time and peak RSS."""
    code = (
        "import json,resource,sys,time\n"
        "from forensics.store.db import Store\n"
        "from forensics.store.ingest import ingest_archive\n"
        "def cpu(who):\n"
        "    r=resource.getrusage(who); return r.ru_utime+r.ru_stime\n"
        "c=cpu(resource.RUSAGE_SELF)\n"
        "t=time.perf_counter()\n"
        "s=Store(sys.argv[2])\n"
        "r=ingest_archive(s, sys.argv[1], jobs=int(sys.argv[3]))\n"
        "s.close()\n"
        "d=r.to_dict(); d['wall']=time.perf_counter()-t\n"
        "d['cpu_seconds']=cpu(resource.RUSAGE_SELF)-c+cpu(resource.RUSAGE_CHILDREN)\n"
        "d['maxrss_mb']=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024\n"
        "d['children_maxrss_mb']=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024\n"
        "print(json.dumps(d))\n")
    if db.exists():
        db.unlink()
    out = subprocess.run([sys.executable, "-c", code, str(archive), str(db), str(jobs)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_bench(archive: Path | None, size_gb: float, seed: int, work: Path, jobs: int) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    if archive is None:
        archive = ensure_archive(work, int(size_gb * (1 << 30)), seed)
    files = transcript_files(archive)
    total = _tree_bytes(archive)
    tbytes = sum(p.stat().st_size for p in files)
    bare = bare_parse(files)
    duck = duckdb_read_json(files)
    ing = ingest_child(archive, work / "bench-ingest.duckdb", 1)
    res = {
        "archive": str(archive), "archive_bytes": total, "transcript_files": len(files), "transcript_bytes": tbytes,
        "bare_parse": bare, "duckdb_read_json": duck, "ingest_1core": ing,
        "ratios": {
            "ingest_over_bare_parse": ing["wall"] / bare["seconds"],
            "ingest_over_duckdb_read_json": ing["wall"] / duck["seconds"] if duck["seconds"] else None,
            "ingest_cpu_over_bare_parse_cpu": ing["cpu_seconds"] / bare["cpu_seconds"],
        },
        "throughput": {
            "ingest_MBps": tbytes / 1e6 / ing["wall"],
            "ingest_records_per_s": ing["rows"].get("records", 0) / ing["wall"],
            "bare_MBps": tbytes / 1e6 / bare["seconds"],
        },
    }
    if jobs > 1:
        ingj = ingest_child(archive, work / "bench-ingest-j.duckdb", jobs)
        res[f"ingest_{jobs}jobs"] = ingj
        res["ratios"][f"ingest_{jobs}jobs_over_bare_parse"] = ingj["wall"] / bare["seconds"]
        res["ratios"][f"ingest_{jobs}jobs_cpu_over_bare_parse_cpu"] = ingj["cpu_seconds"] / bare["cpu_seconds"]
    return res


@click.command("ingest")
@click.option("--archive", type=click.Path(exists=True, path_type=Path), default=None,
              help="Existing archive to measure (default: generate one).")
@click.option("--size-gb", default=1.0, show_default=True, help="Size of the generated archive.")
@click.option("--seed", default=7, show_default=True, help="Generator seed.")
@click.option("--work", type=click.Path(path_type=Path), default=Path(tempfile.gettempdir()) / "forensics-bench",
              show_default=True, help="Where the generated archive and stores go.")
@click.option("--jobs", default=2, show_default=True, help="Also measure a parallel ingest with this many workers.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_ingest(archive, size_gb, seed, work, jobs, as_json) -> None:
    """End-to-end ingest vs bare read+orjson parse vs DuckDB read_json, on the same files."""
    res = run_bench(archive, size_gb, seed, work, jobs)
    if as_json:
        click.echo(json.dumps(res, indent=2, default=str))
        return
    b, d, i = res["bare_parse"], res["duckdb_read_json"], res["ingest_1core"]
    mb = res["transcript_bytes"] / 1e6
    click.echo(f"archive: {res['archive']}  ({res['archive_bytes'] / 1e9:.2f} GB total, "
               f"{res['transcript_files']} transcript files, {mb:.0f} MB of transcripts)")
    click.echo(f"bare read+orjson (1 core): {b['seconds']:.1f} s (CPU {b['cpu_seconds']:.1f} s)  {mb / b['seconds']:.0f} MB/s  "
               f"{b['lines'] / b['seconds']:,.0f} lines/s")
    click.echo(f"duckdb read_json (1 thread): {d['seconds']:.1f} s (CPU {d['cpu_seconds']:.1f} s)  ({d['rows']:,} rows)")
    click.echo(f"ingest end-to-end (1 core): {i['wall']:.1f} s (CPU {i['cpu_seconds']:.1f} s)  {mb / i['wall']:.0f} MB/s  "
               f"{res['throughput']['ingest_records_per_s']:,.0f} records/s  peak RSS {i['maxrss_mb']:.0f} MB")
    click.echo(f"ratio ingest/bare parse: {res['ratios']['ingest_over_bare_parse']:.2f}x wall, "
               f"{res['ratios']['ingest_cpu_over_bare_parse_cpu']:.2f}x CPU   "
               f"ingest/duckdb read_json: {res['ratios']['ingest_over_duckdb_read_json']:.2f}x")
    for k, v in res.items():
        if k.startswith("ingest_") and k.endswith("jobs"):
            click.echo(f"{k}: {v['wall']:.1f} s (CPU {v['cpu_seconds']:.1f} s)  peak RSS parent {v['maxrss_mb']:.0f} MB, "
                       f"workers {v['children_maxrss_mb']:.0f} MB")
