"""`forensics bench scan --runs 5000,20000 [--tiny]`: how the ingest and the scan scale in runs.

For each archive size N (generated: `forensics corpus generate [--tiny]`, cached under --workdir),
in the same run and on the same files:

* bare parse: every file of the archive's runs read (those under ``outputs/`` where it has one), every
  line of a ``*.jsonl`` file and every ``*.json`` file given to `orjson.loads` (os.walk, no discovery,
  no store): the floor;
* ingest only: `ingest_archive` into a fresh store;
* scan (no replay): `forensics.pipeline.scan` into a fresh folder, reports included unless
  ``--no-reports``.

Each measurement is a fresh process (`sys.executable -c`, the tree's code on its PYTHONPATH), so
its peak RSS is its own (the workers' largest apart, with --jobs > 1).  Reported per N: wall
seconds, runs/s, milliseconds per run, peak RSS, store size (and report size), and the ratio of
the time per run at N to the time per run at the smallest N: 1.0 is linear.  With ``--baseline
DIR`` (a checkout of other code, e.g. ``git archive main | tar -x -C DIR``) the ingest and the scan
are measured with that code too, the two trees taking turns going first.  ``--profile DIR`` writes
a cProfile of every ingest and scan in CPU seconds of the process (``<tree>-<what>-<N>.prof``; it
slows them several times), ``--py-spy DIR`` py-spy's samples of each (``<tree>-<what>-<N>.txt``, the
collapsed stacks; ``pip install py-spy``; a few percent); ``--clean`` removes each generated
archive once measured (they are cached otherwise).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import orjson

# one measurement in a fresh process: argv = what, archive, dest, jobs, reports, profile
_CHILD = r"""
import os, resource, sys, time
what, archive, dest, jobs, reports, prof = sys.argv[1:7]
jobs = int(jobs)

def cpu(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime

def size(p):
    if os.path.isfile(p):
        return os.path.getsize(p)
    n = 0
    for d, _, fs in os.walk(p):
        for f in fs:
            try:
                n += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return n

out = {}
t0 = time.perf_counter()
if what == "bare":
    import orjson
    files = lines = nbytes = 0
    # the runs' files: under outputs/ where the archive has one (labels.json beside it is no run's)
    top = os.path.join(archive, "outputs") if os.path.isdir(os.path.join(archive, "outputs")) else archive
    for d, dirs, fs in os.walk(top):
        dirs.sort()
        for f in sorted(fs):
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            files += 1
            with open(p, "rb") as fh:
                if f.endswith(".jsonl"):
                    for line in fh:
                        nbytes += len(line)
                        if line.strip():
                            lines += 1
                            try:
                                orjson.loads(line)
                            except orjson.JSONDecodeError:
                                pass
                else:
                    b = fh.read()
                    nbytes += len(b)
                    if f.endswith(".json"):
                        try:
                            orjson.loads(b)
                        except orjson.JSONDecodeError:
                            pass
    out.update(files=files, lines=lines, bytes=nbytes)
else:
    import cProfile
    pr = cProfile.Profile(time.process_time) if prof else None   # CPU seconds: steady on a shared machine
    if what == "ingest":
        from forensics.store.db import Store
        from forensics.store.ingest import ingest_archive
        db = os.path.join(dest, "ingest.duckdb")
        st = Store(db)
        if pr: pr.enable()
        rep = ingest_archive(st, archive, jobs=jobs)
        st.close()
        if pr: pr.disable()
        out.update(runs=len(rep.run_ids), store_bytes=size(db) + (size(db + ".wal") if os.path.exists(db + ".wal") else 0))
    else:
        from forensics.pipeline import scan
        if pr: pr.enable()
        res = scan(archive, out=dest, jobs=jobs, progress=False, reports=reports == "1")
        if pr: pr.disable()
        db = os.path.join(dest, "audit.duckdb")
        out.update(runs=len(res.run_ids), timings=res.timings, store_bytes=size(db),
                   report_bytes=size(dest) - size(db))
    if pr:
        pr.dump_stats(prof)
out["wall_s"] = time.perf_counter() - t0
try:    # the workers come from a forkserver, which reaps them: stopped and reaped, their CPU is counted
    import multiprocessing.forkserver as _fs
    _fs._forkserver._stop()
except Exception:
    pass
out["cpu_s"] = cpu(resource.RUSAGE_SELF) + cpu(resource.RUSAGE_CHILDREN)
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["workers_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
import json
print("RESULT " + json.dumps(out))
"""


def _measure(tree: Path, what: str, archive: Path, dest: Path, jobs: int, reports: bool,
             prof: Path | None, spy: Path | None = None) -> dict[str, Any]:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-c", _CHILD, what, str(archive), str(dest), str(jobs), "1" if reports else "0", str(prof or "")]
    if spy is not None:       # sampled (20 Hz, CPU only, the workers too): a few percent of overhead
        cmd = ["py-spy", "record", "-r", "20", "--subprocesses", "--format", "raw", "-o", str(spy), "--", *cmd]
    p = subprocess.run(cmd, cwd=str(tree), env=env, capture_output=True, text=True)
    shutil.rmtree(dest, ignore_errors=True)
    if p.returncode != 0:
        raise click.ClickException(f"{what} with the code of {tree} failed: {p.stderr[-2000:]}")
    line = next(ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("RESULT "))
    r = orjson.loads(line[len("RESULT "):])
    # each measurement as it ends (a curve takes hours; what was measured survives an interruption)
    print(f"[{time.strftime('%H:%M:%S')}] {what} {tree.name} {archive.name}: " + orjson.dumps(r).decode(),
          file=sys.stderr, flush=True)
    return r


def ensure_archive(work: Path, runs: int, seed: int, tiny: bool) -> tuple[Path, float | None]:
    """The generated archive of `runs` runs (cached: a marker beside it says it is complete)."""
    from devkit.generator.tiny import VERSION
    name = f"tiny{VERSION}-{runs}-{seed}" if tiny else f"archive-{runs}-{seed}"
    arch, marker = work / name, work / f"{name}.complete"      # the marker outside: the archive is evidence
    if marker.exists() and arch.exists():
        return arch, None
    shutil.rmtree(arch, ignore_errors=True)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "forensics.cli", "corpus", "generate", str(arch), "--runs", str(runs), "--seed", str(seed)]
    r = subprocess.run(cmd + (["--tiny"] if tiny else []), capture_output=True, text=True)
    if r.returncode != 0:
        raise click.ClickException(f"corpus generate failed: {r.stderr[-800:]}")
    marker.write_text("ok")
    return arch, time.perf_counter() - t0


def run_curve(sizes: list[int], seed: int, tiny: bool, work: Path, jobs: int, reports: bool,
              baseline: Path | None = None, profile: Path | None = None, stages: tuple[str, ...] = ("bare", "ingest", "scan"),
              clean: bool = False, spy: Path | None = None) -> dict[str, Any]:
    from devkit.paths import REPO
    trees = {"current": REPO}
    if baseline is not None:
        trees["baseline"] = baseline.resolve()
    for d in (profile, spy):
        if d is not None:
            d.mkdir(parents=True, exist_ok=True)
    o: dict[str, Any] = {"sizes": sizes, "seed": seed, "tiny": tiny, "jobs": jobs, "reports": reports,
                         "trees": {k: str(v) for k, v in trees.items()}, "rows": []}
    for i, n in enumerate(sizes):
        arch, gen_s = ensure_archive(work, n, seed, tiny)
        row: dict[str, Any] = {"runs": n, "archive": str(arch), "generate_s": gen_s}
        if "bare" in stages:
            row["bare"] = _measure(REPO, "bare", arch, work / "m-bare", jobs, reports, None)
        order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]
        for what in ("ingest", "scan"):
            if what not in stages:
                continue
            for name, tree in order:
                prof = profile / f"{name}-{what}-{n}.prof" if profile else None
                sp = spy / f"{name}-{what}-{n}.txt" if spy else None
                row[f"{what}.{name}"] = _measure(tree, what, arch, work / f"m-{what}-{name}", jobs, reports, prof, sp)
        o["rows"].append(row)
        if clean and n not in sizes[i + 1:]:
            shutil.rmtree(arch, ignore_errors=True)
            (work / f"{arch.name}.complete").unlink(missing_ok=True)
    base = o["rows"][0]
    for row in o["rows"]:
        n = row["runs"]
        for k, v in list(row.items()):
            if isinstance(v, dict) and "wall_s" in v:
                v["runs_per_s"] = round(n / v["wall_s"], 2) if v["wall_s"] else None
                v["ms_per_run"] = round(v["wall_s"] / n * 1000, 3)
                v["cpu_ms_per_run"] = round(v["cpu_s"] / n * 1000, 3)
                b = base.get(k)
                if b and b.get("wall_s"):
                    v["per_run_ratio"] = round((v["wall_s"] / n) / (b["wall_s"] / base["runs"]), 3)
                    v["cpu_per_run_ratio"] = round((v["cpu_s"] / n) / (b["cpu_s"] / base["runs"]), 3)
    return o


def render_curve(o: dict[str, Any]) -> str:
    kind = "tiny" if o["tiny"] else "real-sized"
    lines = [f"{kind} generated runs, seed {o['seed']}, jobs={o['jobs']}, reports={'yes' if o['reports'] else 'no'}; "
             f"ratio = time per run / time per run at {o['sizes'][0]:,} runs (1.00 = linear), wall and CPU (user+system, "
             "workers included)",
             f"  {'runs':>8}  {'what':<16}  {'wall s':>8}  {'runs/s':>8}  {'ms/run':>7}  {'ratio':>6}  {'CPU ms/run':>10}  "
             f"{'ratio':>6}  {'peak RSS MB':>11}  "
             f"{'workers MB':>10}  {'store MB':>8}  {'report MB':>9}"]
    for row in o["rows"]:
        for k, v in row.items():
            if not (isinstance(v, dict) and "wall_s" in v):
                continue
            st = f"{v['store_bytes'] / 1e6:>8.1f}" if v.get("store_bytes") is not None else f"{'-':>8}"
            rp = f"{v['report_bytes'] / 1e6:>9.1f}" if v.get("report_bytes") is not None else f"{'-':>9}"
            lines.append(f"  {row['runs']:>8,}  {k:<16}  {v['wall_s']:>8.1f}  {v['runs_per_s']:>8.1f}  {v['ms_per_run']:>7.2f}  "
                         f"{v.get('per_run_ratio', 1.0):>6.2f}  {v['cpu_ms_per_run']:>10.2f}  {v.get('cpu_per_run_ratio', 1.0):>6.2f}  "
                         f"{v['peak_rss_mb']:>11.0f}  {v['workers_peak_rss_mb']:>10.0f}  "
                         f"{st}  {rp}")
        for k, v in row.items():
            if k.startswith("scan.") and v.get("timings"):
                t = v["timings"]
                lines.append(f"  {'':>8}  {k} stages: " + ", ".join(f"{s} {x:.1f}s" for s, x in t.items()
                                                                      if not s.startswith("analyze.") and s != "total")
                             + " | " + ", ".join(f"{s[8:]} {x:.1f}s" for s, x in t.items() if s.startswith("analyze.")))
    for name, t in o["trees"].items():
        lines.append(f"  {name}: {t}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
def spy_inclusive(path: Path) -> tuple[dict[str, int], int]:
    """{function (file): samples in which it is on the stack} and the total, from py-spy's raw
    (collapsed) output."""
    import re
    incl: dict[str, int] = {}
    total = 0
    text = Path(path).read_text()
    # with --subprocesses every stack starts with its process ("process PID:\"COMMAND LINE\""), and
    # a command line may hold newlines (`python -c SCRIPT`): a stack runs to the next "process "
    records = re.split(r"\n(?=process \d+:)", text) if text.startswith("process ") else text.splitlines()
    for rec in records:
        stack, _, n = rec.strip().rpartition(" ")
        if not stack or not n.isdigit():
            continue
        # a process frame (the measured one first, its workers further down) without its pid, and of
        # its command line the first line
        stack = re.sub(r'process \d+:("[^"\n]*)[^"]*"', r'process:\1"', stack)
        total += int(n)
        seen = set()
        for fr in stack.split(";"):
            name = fr.split(" (")[0]
            where = fr.rsplit(" (", 1)[-1].split(":")[0].rsplit("/", 1)[-1] if " (" in fr else ""
            key = f"{name} ({where})" if where else name
            if key not in seen:
                seen.add(key)
                incl[key] = incl.get(key, 0) + int(n)
    return incl, total


def spy_compare(small: Path, n_small: int, big: Path, n_big: int, top: int = 25) -> str:
    """The functions whose samples per run grew most from the small archive to the big one."""
    a, ta = spy_inclusive(small)
    b, tb = spy_inclusive(big)
    lines = [f"samples per run: {ta / n_small:.2f} at {n_small:,} runs, {tb / n_big:.2f} at {n_big:,} "
             f"({(tb / n_big) / max(ta / n_small, 1e-9):.2f}x)",
             f"  {'at ' + format(n_small, ','):>10}  {'at ' + format(n_big, ','):>10}  function (inclusive samples per run, 20 Hz)"]
    for k in sorted(b, key=lambda k: -(b[k] / n_big - a.get(k, 0) / n_small))[:top]:
        lines.append(f"  {a.get(k, 0) / n_small:>10.3f}  {b[k] / n_big:>10.3f}  {k.splitlines()[0][:120]}")
    return "\n".join(lines)


if __name__ == "__main__":     # python -m devkit.bench.scale SMALL.txt N_SMALL BIG.txt N_BIG [TOP]
    print(spy_compare(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]),
                      int(sys.argv[5]) if len(sys.argv) > 5 else 25))
