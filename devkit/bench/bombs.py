"""`forensics bench bombs`: scan archives holding resource bombs beside ordinary runs, in a child
process, and measure what each bomb costs the scan.

    forensics bench bombs                            # every bomb, 8 ordinary fixture runs beside
    forensics bench bombs --only solution,result --kinds dir,zip,tgz --json
    forensics bench bombs --small                    # the same shapes 1/1024 the size (a smoke test)

The bombs (devkit/generator/bombs.py, written into a temporary folder, never committed): a 1 GiB
``solution.py`` (1 MB zipped; as a plain file and inside a .zip and a .tar.gz archive), a
``transcript.jsonl.gz`` of 30 M records, one of 2 GiB of newlines (2 MiB compressed), sparse
sidecar files in ``scratch/`` (64 GiB apparent each, no blocks) and a 1 GiB ``result.json``.

For each archive kind, the baseline is the same ordinary runs without any bomb, scanned the same
way in the same run; then one archive per bomb (the ordinary runs plus the bombed run) and, for
the directory kind, one archive holding every bomb at once.  Each scan is
``forensics scan ARCHIVE --out OUT --json --no-progress`` in a child process; its process tree's
resident memory is sampled every 0.05 s from /proc (the peak of the sum), beside ru_maxrss of the
child (the largest single process), wall and CPU seconds (user + system of the child and the
workers it waited for).  A scan whose tree passes --kill-rss is killed (the machine is shared) and
reported as such.

Checked per scan: it finished (exit status 0), the bombed run has its verdict and is *marked*
(an ``over_limit`` parse_errors row or an ``input-over-limit`` finding citing the bomb's file,
and the verdict fields that depend on it not silently clean), and every other run is analysed
exactly as in the baseline (same verdict fields, every analyzer ran).  Exits 1 when a scan is
over --max-rss (4 GiB), did not finish, or a check failed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import orjson

from devkit.generator.bombs import BOMB_FILE, BOMBS, Sizes, write_bomb_archive

GiB = 1 << 30
KINDS = ("dir", "zip", "tgz")
#: the parse_errors reason that marks a bombed run: a cap that bit, or (a transcript of blank lines
#: only, read to its end at no cost) the empty file it is
BOMB_MARK = {"newlines": ("empty_file",)}
#: --small: the limits scaled down with the bombs, so the same caps bite (the ordinary fixture runs
#: stay under them)
SMALL_LIMITS = {"FORENSICS_MAX_FILE_BYTES": "256K", "FORENSICS_MAX_RECORDS": "10000", "FORENSICS_MAX_HASH_BYTES": "16M"}
#: the bombs measured inside a .zip / .tar.gz (the sparse one exists only in a folder)
PACKED_BOMBS = ("solution",)


# ------------------------------------------------------------------------------ measuring
def _tree_rss(root: int) -> int:
    """Resident bytes of `root` and every descendant (from /proc)."""
    kids: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rfind(b")") + 2:].split()
        pid, ppid = int(d), int(rest[1])
        kids.setdefault(ppid, []).append(pid)
        rss[pid] = int(rest[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += kids.get(p, [])
    return total


def measure(cmd: list[str], env: dict[str, str], kill_rss: int, timeout: float, log: Path) -> dict[str, Any]:
    """Run `cmd` in a child process (its own session); peak tree RSS, ru_maxrss, wall and CPU."""
    t0 = time.perf_counter()
    with open(log, "wb") as err:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        out = bytearray()
        os.set_blocking(p.stdout.fileno(), False)
        peak, killed = 0, None
        while True:
            chunk = p.stdout.read()
            if chunk:
                out += chunk
            res = os.wait4(p.pid, os.WNOHANG)
            if res[0] == p.pid:
                status, ru = res[1], res[2]
                break
            peak = max(peak, _tree_rss(p.pid))
            if killed is None and peak > kill_rss:
                killed = f"tree RSS {peak / GiB:.2f} GiB passed --kill-rss {kill_rss / GiB:.1f} GiB"
            elif killed is None and time.perf_counter() - t0 > timeout:
                killed = f"ran past {timeout:.0f} s"
            if killed:
                os.killpg(p.pid, signal.SIGKILL)
            time.sleep(0.05)
        rest = p.stdout.read()
        if rest:
            out += rest
        p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    try:
        os.killpg(p.pid, signal.SIGKILL)   # nothing of the scan outlives it
    except ProcessLookupError:
        pass
    try:
        data = orjson.loads(bytes(out)) if out.strip() else None
    except orjson.JSONDecodeError:
        data = None
    return {"rc": p.returncode, "killed": killed, "peak_rss": peak, "maxrss_child": ru.ru_maxrss * 1024,
            "wall_s": round(wall, 2), "cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "result": data,
            "stderr_tail": log.read_bytes()[-1500:].decode("utf-8", "replace")}


def scan_cmd(archive: Path, out: Path, jobs: int) -> list[str]:
    return [sys.executable, "-m", "forensics.cli", "scan", str(archive), "--out", str(out), "--json", "--no-progress",
            "--jobs", str(jobs)]


# ------------------------------------------------------------------------------- checking
def _store_facts(db: Path) -> dict[str, Any]:
    from forensics.store.db import Store
    with Store(db, read_only=True) as s:
        verdicts = {r["run_name"]: r for r in s.query(
            "select r.run_name, v.* from verdicts v join runs r using (run_id)")}
        limits = s.query("select r.run_name, p.source, p.reason, p.detail from parse_errors p join runs r using (run_id) "
                         "where p.reason in ('over_limit', 'empty_file')")
        marks = s.query("select r.run_name, f.file, f.message, f.data from findings f join runs r using (run_id) "
                        "where f.rule = 'input-over-limit'")
        cov = {r["run_name"]: r["data"] for r in s.query(
            "select r.run_name, f.data from findings f join runs r using (run_id) where f.rule = 'analysis-coverage'")}
    return {"verdicts": verdicts, "limits": limits, "marks": marks, "coverage": cov}


FIELDS = ("verdict", "reward_hack", "contamination", "correct", "failure_reason", "measurement_status",
          "publish_grade", "empirical_recompute_required", "exclude_from_denominator")


def check(m: dict[str, Any], out: Path, planted: dict[str, str], base: dict[str, Any] | None) -> list[str]:
    """What is wrong with one scan (empty: the bombed runs are marked, the others analysed as in the
    baseline)."""
    problems: list[str] = []
    if m["killed"] or m["rc"] != 0:
        return [f"scan did not finish: rc {m['rc']}" + (f", killed: {m['killed']}" if m["killed"] else "")
                + f"; stderr: {m['stderr_tail'][-300:]}"]
    db = out / "audit.duckdb"
    facts = _store_facts(db)
    for bomb, name in planted.items():
        v = facts["verdicts"].get(name)
        if v is None:
            problems.append(f"{bomb}: run {name} has no verdict")
            continue
        want = BOMB_FILE[bomb]
        rows = [r for r in facts["limits"] if r["run_name"] == name and (r["source"] or "").startswith(want)
                and r["reason"] in BOMB_MARK.get(bomb, ("over_limit",))]
        marks = [r for r in facts["marks"] if r["run_name"] == name and (r["file"] or "").startswith(want)]
        if not rows and not marks:
            problems.append(f"{bomb}: run {name} is not marked (no over_limit row or input-over-limit finding on {want})")
        if v["verdict"] == "clean":
            problems.append(f"{bomb}: run {name} is clean although {want} was not read whole")
    if base is not None:
        for name, bv in base["verdicts"].items():
            v = facts["verdicts"].get(name)
            if v is None:
                problems.append(f"ordinary run {name} has no verdict")
                continue
            diff = [k for k in FIELDS if str(v[k]) != str(bv[k])]
            if diff:
                problems.append(f"ordinary run {name} differs from the baseline in {', '.join(diff)}")
            cov = orjson.loads(facts["coverage"].get(name) or "{}")
            if cov.get("failed") or cov.get("missing"):
                problems.append(f"ordinary run {name}: analyzers failed {cov.get('failed')} / missing {cov.get('missing')}")
    return problems


# ---------------------------------------------------------------------------------- bench
def run_bombs(work: Path, only: list[str], kinds: list[str], base_runs: int, sizes: Sizes, jobs: int,
              kill_rss: int, max_rss: int, timeout: float, together: bool, log=None,
              limits: dict[str, str] | None = None) -> dict[str, Any]:
    env = {**os.environ, **(limits or {})}
    rows: list[dict[str, Any]] = []

    def one(name: str, kind: str, bombs: list[str]) -> dict[str, Any]:
        d = work / f"{kind}-{name}"
        t0 = time.perf_counter()
        arch, planted = write_bomb_archive(d, bombs=bombs, kind=kind, base_runs=base_runs, sizes=sizes)
        gen = time.perf_counter() - t0
        out = d / "report"
        if log:
            log(f"scan {kind} {name} ...")
        m = measure(scan_cmd(arch, out, jobs), env, kill_rss, timeout, d / "stderr.log")
        m.update(name=name, kind=kind, bombs=bombs, generate_s=round(gen, 1))
        return m, out, planted, arch

    for kind in kinds:
        todo = [b for b in only if kind == "dir" or b in PACKED_BOMBS]
        if not todo:
            continue
        m, out, planted, arch = one("baseline", kind, [])
        base = _store_facts(out / "audit.duckdb") if m["rc"] == 0 and not m["killed"] else None
        m["problems"] = [] if base is not None else check(m, out, {}, None)
        rows.append(m)
        shutil.rmtree(out.parent, ignore_errors=True)
        cases = [(b, [b]) for b in todo]
        if together and kind == "dir" and len(todo) > 1:
            cases.append(("all", todo))
        for name, bombs in cases:
            m, out, planted, arch = one(name, kind, bombs)
            m["problems"] = check(m, out, planted, base)
            m["marked"] = m["rc"] == 0 and not m["killed"] and \
                not any("not marked" in p or "no verdict" in p for p in m["problems"])
            rows.append(m)
            if log:
                log(f"  {kind} {name}: peak {m['peak_rss'] / GiB:.2f} GiB, {m['wall_s']} s wall, {m['cpu_s']} s CPU"
                    + (f"; {len(m['problems'])} problem(s)" if m["problems"] else ""))
            shutil.rmtree(out.parent, ignore_errors=True)
    for m in rows:
        m.pop("result", None)
        if m["peak_rss"] > max_rss and not m["killed"]:
            m.setdefault("problems", []).append(f"peak RSS {m['peak_rss'] / GiB:.2f} GiB over {max_rss / GiB:.1f} GiB")
    base_of = {m["kind"]: m for m in rows if m["name"] == "baseline"}
    for m in rows:
        b = base_of.get(m["kind"])
        if b and m is not b and b["wall_s"]:
            m["wall_vs_baseline"] = round(m["wall_s"] / b["wall_s"], 2)
            m["rss_vs_baseline"] = round(m["peak_rss"] / max(b["peak_rss"], 1), 2)
    return {"rows": rows, "base_runs": base_runs, "jobs": jobs, "sizes": sizes.__dict__, "limits": limits or {},
            "max_rss": max_rss, "ok": not any(m.get("problems") for m in rows)}


def table(res: dict[str, Any]) -> str:
    head = ("kind", "bomb", "peak RSS", "x base", "maxrss child", "wall s", "x base", "CPU s", "marked", "others", "ok")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for m in res["rows"]:
        probs = m.get("problems") or []
        others = "n/a" if m["name"] == "baseline" else ("no" if any("ordinary run" in p for p in probs) else "yes")
        marked = "n/a" if m["name"] == "baseline" else ("yes" if m.get("marked") else "no")
        lines.append(" | ".join(str(x) for x in (
            m["kind"], m["name"], f"{m['peak_rss'] / GiB:.2f} GiB", m.get("rss_vs_baseline", ""),
            f"{m['maxrss_child'] / GiB:.2f} GiB", m["wall_s"], m.get("wall_vs_baseline", ""), m["cpu_s"], marked, others,
            "killed" if m["killed"] else ("yes" if not probs else "no"))))
    return "\n".join("| " + ln + " |" for ln in lines)


@click.command("bombs")
@click.option("--only", default=",".join(BOMBS), show_default=True, help="Bombs to plant (comma-separated).")
@click.option("--kinds", default=",".join(KINDS), show_default=True,
              help="Archive kinds: dir, zip, tgz (the packed kinds carry the solution bomb).")
@click.option("--runs", "base_runs", default=8, show_default=True, help="Ordinary fixture runs beside the bombs.")
@click.option("--small", is_flag=True, help="Every bomb 1/1024 its size, the limits scaled down too (a smoke test).")
@click.option("--jobs", "-j", default=1, show_default=True, help="--jobs of the scans.")
@click.option("--together/--no-together", default=True, show_default=True,
              help="Also scan one folder archive holding every bomb at once.")
@click.option("--max-rss", default=4.0, show_default=True, help="GiB a scan's process tree may reach (the bar).")
@click.option("--kill-rss", default=6.0, show_default=True, help="GiB at which a scan is killed (protects the machine).")
@click.option("--timeout", default=1800.0, show_default=True, help="Seconds a scan may run before it is killed.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the archives go (default: a temporary folder, removed).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_bombs(only, kinds, base_runs, small, jobs, together, max_rss, kill_rss, timeout, workdir, as_json) -> None:
    """Resource bombs beside ordinary runs: peak memory, time, and nothing else lost."""
    bombs = [b.strip() for b in only.split(",") if b.strip()]
    bad = [b for b in bombs if b not in BOMBS]
    if bad:
        raise click.BadParameter(f"unknown bomb(s) {', '.join(bad)}; one of {', '.join(BOMBS)}", param_hint="--only")
    ks = [k.strip() for k in kinds.split(",") if k.strip()]
    if [k for k in ks if k not in KINDS]:
        raise click.BadParameter(f"kinds are {', '.join(KINDS)}", param_hint="--kinds")
    tmp = None
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix="forensics-bombs-")
        workdir = Path(tmp)
    try:
        res = run_bombs(workdir, bombs, ks, base_runs, Sizes.small() if small else Sizes(), jobs,
                        int(kill_rss * GiB), int(max_rss * GiB), timeout, together,
                        log=None if as_json else (lambda s: click.echo(s, err=True)),
                        limits=SMALL_LIMITS if small else None)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    if as_json:
        click.echo(orjson.dumps(res, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(table(res))
        for m in res["rows"]:
            for p in m.get("problems") or []:
                click.echo(f"  {m['kind']} {m['name']}: {p}")
    if not res["ok"]:
        raise SystemExit(1)
