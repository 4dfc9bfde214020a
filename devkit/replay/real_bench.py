"""Replay every real archived solution of a labelled set, one after another, and tabulate it.

    python -m devkit.replay.real_bench --real ../shared/real-dev --out $OUT/real.jsonl [--gpu h100]
        [--device cuda] [--jobs N] [--run-limit-s 420] [--time-budget-s 560] [--shard K/N] [--only RUN_ID ...]
        [--probes check,state-drift,...] [--cutlass-include DIR] [--cuda-include DIR|auto] [--nvidia-file]
        [--per-gpu K] [--mem-gb PROBLEM=GB] [--longest-first JSONL...] [--events-dir DIR] [--md $OUT/real.md]
    python -m devkit.replay.real_bench --merge OLDEST.jsonl ... NEWEST.jsonl --md merged.md

The labelled set is a folder of run folders holding `solution.py` (in the public archive's form:
sidecars appended, split back by the replay) and `label.json` (the auditors' verdict, `correct`,
the GPU the run was graded on).  Runs graded on `--gpu` (default h100: sm_90 code, which an H200
runs) are replayed; the others are skipped.  Nothing of the labelled set is written anywhere but
`--out`.

Each run is replayed in its own process (`--one`), in a session of its own, under `--run-limit-s`
of wall time: a replay that hangs, dies or is killed costs that run only, and whatever it had
streamed (one JSON line per finished probe) is kept.  With `--jobs N` (N <= the visible GPUs) N
runs go at once, each on its own GPU (CUDA_VISIBLE_DEVICES); `--per-gpu K` lets K share a GPU while
their memory estimates fit it (`Packing`: MEM_GB / `--mem-gb`, then each problem's measured peak
`info.gpu_peak_gb`; `--gpu-mem-gb`), a run out of GPU memory beside others runs again alone
(`run_superseded`, `rerun_alone`), and `--longest-first JSONL...` starts the runs that took
longest in earlier outputs first (a run not in them: its problem's median there).  `--events-dir DIR` keeps each run's own stream (every row with
its detail); `--merge JSONL...` tabulates earlier outputs, each run's latest finished row (runs
with no row, with `--real` every run it would discover, under `rerun`).  `--time-budget-s` bounds the whole
command (a device call of 10 minutes): a run's limit shrinks to what is left, no run starts with
less than `--min-run-s`, and the summary lists `rerun` (not started, cut short by the budget, or
out of GPU memory while sharing it: `summarize`)
for `--only` or `--shard` in the next command.

Per run, one JSON line is appended to `--out` as soon as the run ends:

    run_id, problem, label_verdict, label_correct, label_reward_hack, outcome (the deck's check here:
    pass | fail | error | crash | timeout | early_exit | tampered | not_replayable | not_run),
    correct_here, vs_label (confirm | refute | cannot tell: the label's `correct`, or, where the
    auditors left it null, its verdict family: clean expects a passing check), reason, findings
    (high/critical rule ids of every probe), extra (the medium ones: state drift, ...), wall_s
    (the run's process), replay_s, solution_s, build_s, overhead_s (replay_s - solution_s -
    build_s: the replay's `info.account`, where build_s is its build and construct, each second
    counted once), account (that record whole), probe_s, sidecars, caught_by (a labelled bug or hack: `check` when the deck's check
    fails here, else the probes' high/critical rules that caught it; vs_label judges the check
    alone), status (every probe's worst), false_fail (a labelled-clean run
    whose check here is neither pass nor not_replayable), deck_check and replay_outcome (below)

`--deck DIR` (the benchmark's decks, `../shared/decks`) makes the deck's own check.py the arbiter of
every official failure (fail, error, crash): it runs against the same solution on this machine, in
the replay's sandbox (devkit.replay.deck_check). A run the archive says passed whose deck check
fails here too is `not_replayable` ("not reproducible on this machine"), with the replay's own
outcome kept in `replay_outcome`; one whose deck check passes here stays a failure: a false fail
of ours when the label is clean.

then a summary line (`"event": "summary"`), and `--md` writes the same table in Markdown.

`--prepare-carry DIR` (on a machine with the labelled set) copies the runs to replay, and the
CUTLASS headers of an nvidia-cutlass wheel, into DIR for a device call to carry.
`--device cpu` (tiny shapes, TRITON_INTERPRET=1) checks the script itself on runs whose Triton
or torch code runs under the interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: official outcomes after which `--deck` runs the deck's own check.py on this machine
DECK_ARBITRATES = ("fail", "error", "crash")
DEFAULT_PROBES = ("check", "state-drift", "same-buffer", "fresh-state", "alternate-cache", "timed-outputs",
                  "distribution")
_RUN_DATE = re.compile(r"^(20\d{2})(\d{2})(\d{2})_\d{6}_")


# ------------------------------------------------------------------------------ the labelled set
def discover(real: Path, gpu: str | None = "h100", only: list[str] | None = None) -> tuple[list[dict], list[dict]]:
    """(runs to replay, runs skipped with the reason), sorted by run id."""
    runs, skipped = [], []
    for d in sorted(p for p in Path(real).iterdir() if p.is_dir()):
        if only and d.name not in only:
            continue
        lab = d / "label.json"
        if not lab.is_file() or not (d / "solution.py").is_file():
            skipped.append({"run_id": d.name, "why": "no label.json or solution.py"})
            continue
        try:
            label = json.loads(lab.read_text())
        except ValueError as e:
            skipped.append({"run_id": d.name, "why": f"unreadable label.json: {e}"})
            continue
        if gpu and label.get("gpu") != gpu:
            skipped.append({"run_id": d.name, "why": f"graded on {label.get('gpu')}, not {gpu}"})
            continue
        m = _RUN_DATE.match(d.name)
        runs.append({"run_id": d.name, "dir": str(d), "problem": label.get("problem"),
                     "date": "-".join(m.groups()) if m else None, "label": label})
    return runs, skipped


def expected(label: dict) -> tuple[Any, str]:
    """What the label says the deck's check did: (True | False | None, source)."""
    if label.get("correct") is not None:
        return bool(label["correct"]), "label correct"
    fam = label.get("verdict_family")
    if fam in ("clean", "clean_interesting"):
        return True, f"label verdict {fam}"
    if fam == "failed_or_bug" and (label.get("failure_reason") in ("check_failed", "timeout")
                                   or "correct=false" in (label.get("summary") or "")):
        return False, "label failed_or_bug (check failed)"
    return None, f"label verdict {fam}, correct null"


#: the label families a replay can catch: a bug, a hack, a rubric leak (an API that ignores what its
#: caller hands it, which the deck's check does not exercise: Kimi's caches, caught by alternate-cache)
CATCH_FAMILIES = ("failed_or_bug", "reward_hack", "rubric_leak")


def caught_by(family: Any, outcome: str, high: list[str]) -> str:
    """For a run the auditors labelled a bug, a hack or a rubric leak (CATCH_FAMILIES): what caught it
    here (the deck's check failing, else the probes' high/critical findings), "" when nothing did.
    `vs_label` compares the deck's check alone, so a bug the check passes and a probe catches (Kimi's
    id(state) cache) reads `refute` there and its probe here.  Not filled for other labels: a clean
    run's findings are in `findings`."""
    if family not in CATCH_FAMILIES:
        return ""
    if outcome == "fail":
        return "check"
    return ", ".join(high)


# ------------------------------------------------------------------------------ one run, in its own process
def one(args: argparse.Namespace) -> int:
    """Replay one run folder, streaming JSON lines to args.events (the parent reads them)."""
    from forensics.replay.stream import JsonLines, failure_doc
    from forensics.replay.outcome import Limits, install_signal_handlers, restore_signal_handlers
    old_handlers = install_signal_handlers()
    stream = JsonLines(args.events)
    events: list[dict] = []

    def on_event(e: dict) -> None:
        events.append(e)
        stream(e)

    try:
        from forensics.replay import buildenv
        from forensics.replay.api import replay_solution
        supplied = buildenv.supply(cutlass=args.cutlass_include, cuda_include=args.cuda_include,
                                   nvidia_file=args.nvidia_file)
        run = Path(args.one)
        sol = (run / "solution.py").read_bytes()
        side: dict[str, bytes] = {}
        if (run / "scratch").is_dir():
            for p in sorted((run / "scratch").rglob("*")):
                if p.is_file() and not p.is_symlink():
                    side[str(p.relative_to(run / "scratch"))] = p.read_bytes()
        out = replay_solution(args.problem, sol, side, device=args.device, probes=args.probes.split(","),
                              shapes=args.shapes, archive_date=args.date, on_event=on_event,
                              shape_list=[json.loads(args.shape)] if args.shape else None,
                              limits=Limits(build_s=args.build_s, call_s=args.call_s, probe_s=args.probe_s,
                                            time_s=args.call_s))
        out.info["build_env_supplied"] = supplied
        doc = {"info": out.info, "rows": out.rows, "findings": out.findings}
        if args.deck and out.official()["status"] in DECK_ARBITRATES:
            from .deck_check import run_deck_check
            on_event({"event": "progress", "what": "the deck's own check.py (arbiter)", "t": None})
            doc["deck_check"] = run_deck_check(Path(args.deck), args.bench, args.problem, sol, side,
                                               device=args.device, timeout_s=args.deck_timeout_s)
    except BaseException as e:  # noqa: BLE001 - the run's line is written whatever happened
        doc = failure_doc(e, events, f"replay of {args.one}")
    finally:
        restore_signal_handlers(old_handlers)
    stream(dict(doc, event="result"))
    stream.close()
    return 0


# ------------------------------------------------------------------------------ the table
def _sum(d: Any) -> float:
    if isinstance(d, dict):
        return sum(float(v) for v in d.values() if isinstance(v, (int, float)))
    if isinstance(d, list):
        return sum(float(v) for v in d if isinstance(v, (int, float)))
    return 0.0


def summarize_run(run: dict, events: list[dict], wall_s: float, why_partial: str | None) -> dict:
    label = run["label"]
    res = next((e for e in reversed(events) if e.get("event") == "result"), None)
    if res is None:   # killed before it could write its result: the probes it finished
        rows = [r for e in events for r in e.get("rows", [])]
        findings = [f for e in events for f in e.get("findings", [])]
        info: dict = {"partial": True, "error": why_partial}
        step = next((e for e in reversed(events) if e.get("event") == "progress"), None)
        if step is not None and why_partial:
            info["error"] = f"{why_partial}; its last step: {step.get('what')} (from {step.get('t')} s)"
    else:
        rows, findings, info = res.get("rows", []), res.get("findings", []), res.get("info", {})
    from forensics.replay.outcome import OFFICIAL_PROBES, STATUS_ORDER
    from forensics.vocab import env_incomplete
    off_rows = [r for r in rows if r.get("probe") in OFFICIAL_PROBES]
    seen = {r.get("status") for r in off_rows}
    outcome = next((s for s in STATUS_ORDER if s in seen), None)
    if env_incomplete(off_rows):
        outcome = "not_replayable"   # the graded build could not be reproduced here (Outcome.official)
    if any(f.get("rule") in ("replay-torch-monkeypatch", "replay-report-forged") for f in findings):
        outcome = "tampered"
    if outcome is None or outcome == "skipped":
        outcome = "not_run" if res is not None else ("timeout" if why_partial and "limit" in why_partial else "not_run")
    if res is None and outcome == "pass":
        outcome = "not_run"     # never reached its end: not a verdict
    exp, src = expected(label)
    deck = (res or {}).get("deck_check") or None
    replay_outcome = outcome
    if deck and deck.get("status") == "fail" and outcome in DECK_ARBITRATES and exp is True:
        # the archive says it passed, and on this machine neither we nor the deck's own check pass it
        outcome = "not_replayable"
    correct_here = {"pass": True, "fail": False, "error": False, "crash": False, "early_exit": False,
                    "tampered": False}.get(outcome)
    vs = "cannot tell" if exp is None or correct_here is None else ("confirm" if exp == correct_here else "refute")
    reason = info.get("not_replayable") or info.get("error") or ""
    if outcome != replay_outcome:
        reason = (f"not reproducible on this machine: the deck's own check fails here too ({deck.get('line')}); "
                  f"the replay: {replay_outcome}")
    if not reason:
        bad = next((r for r in off_rows if r.get("status") not in ("pass", "skipped")), None)
        reason = ((bad.get("detail") or "").splitlines() or [""])[0][:300] if bad else ""
    # the replay's own account (forensics/replay/account.py): each second charged once, the first call
    # of a child to the build and never to the solution's calls too (it was both: 7 rows read 0.0)
    acct = info.get("account") or {}
    replay_s = float(acct.get("total_s") or info.get("total_s") or 0.0)
    solution_s = float(acct.get("solution_s") or 0.0)
    build_s = float(acct.get("build_s") or 0.0) + float(acct.get("construct_s") or 0.0)
    overhead_s = float(acct.get("overhead_s") or 0.0) if acct else max(0.0, replay_s - solution_s - build_s)
    fam = label.get("verdict_family")
    high = sorted({f["rule"] for f in findings if f.get("severity") in ("high", "critical")})
    return {"run_id": run["run_id"], "problem": run["problem"], "label_verdict": fam,
            "label_correct": label.get("correct"), "label_reward_hack": label.get("reward_hack"),
            "outcome": outcome, "correct_here": correct_here, "vs_label": vs, "vs_label_source": src,
            "reason": reason, "status": info.get("status"),
            "findings": high, "caught_by": caught_by(fam, outcome, high),
            "extra": sorted({f["rule"] for f in findings if f.get("severity") == "medium"}),
            "false_fail": fam in ("clean", "clean_interesting") and outcome not in ("pass", "not_replayable"),
            "wall_s": round(wall_s, 2), "replay_s": round(replay_s, 2), "solution_s": round(solution_s, 2),
            "build_s": round(build_s, 2), "overhead_s": round(overhead_s, 2), "account": acct or None,
            "probe_s": info.get("probe_s"), "sidecars": [s.get("name") for s in info.get("sidecars_split") or []],
            "deck_version": info.get("deck_version"), "partial": res is None,
            "replay_outcome": replay_outcome,
            "deck_check": {k: deck.get(k) for k in ("status", "line", "s")} if deck else None,
            "interrupted": info.get("interrupted")}


#: the replay's GPU memory at canonical shapes, GiB (this process and the solution's together),
#: for the problems that need much: sonic-MoE's largest measured peak (57.8 GB, round 5 on an H100,
#: `info.gpu_peak_gb`) +10 %; GLM's reference held 64.7 GB on the H200 (round 3, before peaks were
#: recorded).  Each run that ends reports its peak, which replaces a smaller estimate for later runs.
MEM_GB = {"01_glm52_fused_moe": 72.0, "06_sonic_moe_swiglu": 64.0}
#: any other problem until one of its runs has reported a peak: round 5's largest other peak was
#: 5.5 GB (Kimi; paged 5.1, fp8 4.4, w4a16 3.2, KDA 1.0, topk and NSA under 0.1)
DEFAULT_MEM_GB = 8.0


class Packing:
    """Which pending run starts next, and on which GPU.

    Mechanism: a GPU takes at most `per_gpu` runs, and only while the memory estimates of the runs
    on it (MEM_GB, `--mem-gb`, or the largest peak a finished run of the problem reported, +10 %)
    fit `mem_gb`; a GPU with nothing on it takes any run, so an estimate larger than the GPU never
    stalls the bench.  A run marked `alone` (it ran out of memory while sharing) waits for an empty
    GPU and keeps it to itself; while one waits no other run starts (the GPUs drain for it, so the time
    budget does not cut it after every other run).  Runs start in their order; one that does not fit now lets the next
    one by.  Look-alike it must not hold back: small runs beside a large one while the sum fits."""

    def __init__(self, gpus: list[int | None], per_gpu: int, mem_gb: float | None,
                 estimates: dict[str, float] | None = None, max_active: int | None = None) -> None:
        self.gpus = list(dict.fromkeys(gpus))
        self.max_active = max_active or len(self.gpus) * max(1, per_gpu)
        self.per_gpu = max(1, per_gpu)
        self.mem_gb = mem_gb
        self.est = dict(MEM_GB, **(estimates or {}))
        self.on: dict[Any, list[dict]] = {g: [] for g in self.gpus}

    def estimate(self, run: dict) -> float:
        return float(self.est.get(str(run.get("problem")), DEFAULT_MEM_GB))

    def fits(self, run: dict, gpu: Any) -> bool:
        here = self.on[gpu]
        if not here:
            return True
        if run.get("alone") or any(r.get("alone") for r in here) or len(here) >= self.per_gpu:
            return False
        return self.mem_gb is None or sum(map(self.estimate, here)) + self.estimate(run) <= self.mem_gb

    def place(self, pending: list[dict]) -> tuple[dict, Any] | None:
        """The first pending run that fits a GPU now, and that GPU (the emptiest that fits), or None."""
        if sum(map(len, self.on.values())) >= self.max_active:
            return None
        alone = [r for r in pending if r.get("alone")]
        for run in alone or pending:   # a rerun alone goes first: GPUs drain for it, nothing new joins
            fit = [g for g in self.gpus if self.fits(run, g)]
            if fit:
                return run, min(fit, key=lambda g: len(self.on[g]))
        return None

    def start(self, run: dict, gpu: Any) -> None:
        self.on[gpu].append(run)
        for r in self.on[gpu]:   # who shared this GPU at any time of its life
            r["shared_with"] = sorted(set(r.get("shared_with") or []) | {x["run_id"] for x in self.on[gpu]} - {r["run_id"]})

    def end(self, run: dict, gpu: Any, peak_gb: float | None) -> None:
        self.on[gpu] = [r for r in self.on[gpu] if r is not run]
        if peak_gb:
            key = str(run.get("problem"))
            self.est[key] = max(float(self.est.get(key, 0.0)), round(1.1 * float(peak_gb), 1))


def _peak_gb(events: list[dict]) -> float | None:
    """The replay's GPU peak (its own process and the solution's) from a run's result line."""
    res = next((e for e in reversed(events) if e.get("event") == "result"), None)
    peaks = ((res or {}).get("info") or {}).get("gpu_peak_gb") or {}
    vals = [float(v) for v in peaks.values() if isinstance(v, (int, float))]
    return sum(vals) if vals else None


def longest_first(runs: list[dict], earlier: list[Path]) -> list[dict]:
    """`runs` with the longest earlier wall time first (the largest-first rule: a long run started
    last keeps the whole bench waiting on it).  The latest row of each run in `earlier` (real_bench
    outputs; unreadable lines skipped) counts; a run not in them takes its problem's estimate, the
    median of the latest times of that problem's runs there (a new GLM run is as long as the GLM runs
    seen, not the longest of all); a run of a problem never seen counts as longest."""
    took: dict[str, float] = {}
    problem: dict[str, str] = {}
    for path in earlier:
        for row in _run_rows(path):
            if isinstance(row.get("wall_s"), (int, float)):
                took[str(row["run_id"])] = float(row["wall_s"])
                if row.get("problem"):
                    problem[str(row["run_id"])] = str(row["problem"])
    per_problem: dict[str, list[float]] = {}
    for rid, t in took.items():
        if rid in problem:
            per_problem.setdefault(problem[rid], []).append(t)
    estimate = {p: sorted(ts)[len(ts) // 2] for p, ts in per_problem.items()}

    def expect(r: dict) -> float:
        if r["run_id"] in took:
            return took[r["run_id"]]
        return estimate.get(str(r.get("problem")), float("inf"))
    return sorted(runs, key=lambda r: -expect(r))


def _cut(row: dict) -> bool:
    return "cut short by --time-budget-s" in str(row.get("reason") or "")


#: outcomes of a run that never reached its end under that call's limits: they measured nothing
INCONCLUSIVE = ("timeout", "not_run")


def _inconclusive(row: dict) -> bool:
    return _cut(row) or row.get("outcome") in INCONCLUSIVE


def _verdict(row: dict) -> bool:
    """The row says something about the solution (pass, fail, crash, tampered, ...), not about
    the machine or the call (not_replayable names what the machine lacked)."""
    return not _inconclusive(row) and row.get("outcome") != "not_replayable"


def merge(outputs: list[Path], expected: list[str] | None = None) -> tuple[list[dict], dict]:
    """One table from several bench outputs, in the order given (oldest first): each run's latest
    row, except that a row which measured nothing (cut short by the time budget, a timeout at a run
    limit, not run) never replaces a verdict on the solution: a later call with a shorter limit, or
    a machine busy building, says nothing against a pass or fail measured earlier.  Those rows are
    listed under `not_replacing` (run_id, outcome, source) so the later attempt stays visible.  Any
    other later row replaces (a later not_replayable is the newer code naming what the machine
    lacks, where older code called it a fail; a timeout after a not_replayable got further).  A run
    with no row in any output (a bench's summary lists it as not started, or it is one of `expected`,
    the runs `--real` discovers) is `not_started` and under `rerun`.
    -> (rows, summary with `sources`: which output each row came from).  Unreadable lines are
    skipped."""
    latest: dict[str, tuple[dict, str]] = {}
    not_replacing: list[tuple[str, str, str]] = []
    listed: list[str] = []      # runs a bench's summary says it never started
    for path in outputs:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such bench output")
        for e in _read_events(path):
            if isinstance(e, dict) and e.get("event") == "summary" and isinstance(e.get("not_started"), list):
                listed += [str(x) for x in e["not_started"]]
        for row in _run_rows(path):
            old = latest.get(row["run_id"])
            if old is not None and _inconclusive(row) and _verdict(old[0]):
                not_replacing.append((row["run_id"], str(row.get("outcome")), path.name))
                continue
            latest[row["run_id"]] = (row, path.name)
    rows = [dict(r, source=src) for r, src in sorted(latest.values(), key=lambda x: x[0]["run_id"])]
    shared = any(r.get("shared_with", True) for r in rows)
    cut = [r["run_id"] for r in rows if _cut(r)]
    # a run no output has a row of: listed as not started by a bench, or (with `expected`: the runs a
    # bench would discover) never tried at all; both go under `rerun`
    never = sorted((set(listed) | set(expected or ())) - set(latest))
    summary = dict(summarize(rows, never, cut, shared), merged_from=[p.name for p in outputs],
                   not_replacing=not_replacing)
    return rows, summary


def _kill(proc: subprocess.Popen) -> None:
    from forensics.replay.proctree import kill_session
    kill_session(proc.pid)
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass
    kill_session(proc.pid)


def _spawn(run: dict, args: argparse.Namespace, gpu: int | None, events: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "devkit.replay.real_bench", "--one", run["dir"], "--problem", str(run["problem"]),
           "--events", str(events), "--device", args.device, "--shapes", args.shapes, "--probes", args.probes,
           "--build-s", str(args.build_s), "--call-s", str(args.call_s), "--probe-s", str(args.probe_s)]
    if run.get("date"):
        cmd += ["--date", run["date"]]
    shape = dict(kv.split("=", 1) for kv in args.shape_for or []).get(str(run["problem"]))
    if shape:
        cmd += ["--shape", shape]
    for opt in ("cutlass_include", "cuda_include"):
        v = getattr(args, opt)
        if v:
            cmd += ["--" + opt.replace("_", "-"), v]
    if args.nvidia_file:
        cmd.append("--nvidia-file")
    if args.deck:
        cmd += ["--deck", str(Path(args.deck).resolve()), "--bench", str(run["label"].get("bench") or ""),
                "--deck-timeout-s", str(args.deck_timeout_s)]
    env = dict(os.environ)
    from devkit.paths import REPO
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    if args.device == "cpu":
        env.setdefault("TRITON_INTERPRET", "1")
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(str(events) + ".log", "wb"), start_new_session=True)


def _run_rows(path: Path) -> list[dict]:
    """The run rows (`"event": "run"`) of a bench output, in order; unreadable lines skipped."""
    return [e for e in _read_events(path) if isinstance(e, dict) and e.get("event") == "run" and "run_id" in e]


def _read_events(path: Path) -> list[dict]:
    out = []
    try:
        for line in path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue    # a line cut short by a kill
    except OSError:
        pass
    return out


def prepare_carry(real: Path, dest: Path, gpu: str | None, wheel: str | None) -> dict:
    """What a device call carries (the repository is copied there, ../shared is not): the labelled
    runs of `gpu` (solution.py and label.json only) under dest/real-dev, and, from an nvidia-cutlass
    wheel (`pip download nvidia-cutlass --no-deps`), its CUTLASS headers under dest/cutlass
    (include/ and tools/util/include/, the layout --cutlass-include takes).  dest must be a path git
    ignores (/.carry/ is)."""
    import shutil
    import zipfile
    runs, _ = discover(real, gpu)
    out = dest / "real-dev"
    n = 0
    for r in runs:
        d = out / r["run_id"]
        d.mkdir(parents=True, exist_ok=True)
        for f in ("solution.py", "label.json"):
            shutil.copyfile(Path(r["dir"]) / f, d / f)
        n += 1
    done: dict = {"runs": n, "real_dev": str(out)}
    if wheel:
        prefix = "cutlass_library/source/"
        with zipfile.ZipFile(wheel) as z:
            names = [m for m in z.namelist() if m.startswith(prefix + "include/")
                     or m.startswith(prefix + "tools/util/include/")]
            for m in names:
                if m.endswith("/"):
                    continue
                target = dest / "cutlass" / m[len(prefix):]
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(m) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        done["cutlass"] = str(dest / "cutlass")
        done["cutlass_files"] = len(names)
    size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    done["bytes"] = size
    return done


def markdown(rows: list[dict], summary: dict) -> str:
    cols = ("run_id", "problem", "label_verdict", "label_correct", "outcome", "vs_label", "caught_by", "reason", "deck",
            "findings", "wall_s", "overhead_s")
    cols += tuple(c for c in ("shared", "source") if any(c in r or (c == "shared" and "shared_with" in r) for r in rows))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = (r.get("deck_check") or {}).get("status") if c == "deck" else \
                len(r.get("shared_with") or []) if c == "shared" and "shared_with" in r else r.get(c)
            if isinstance(v, list):
                v = ", ".join(v)
            cells.append(str(v if v is not None else "").replace("|", "/").replace("\n", " ")[:160])
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Summary: " + json.dumps({k: v for k, v in summary.items() if k != "event"}, default=str))
    return "\n".join(lines) + "\n"


def _caught(row: dict) -> bool:
    """A row written before `caught_by` existed (--merge of older outputs) is read the same way."""
    if "caught_by" in row:
        return bool(row["caught_by"])
    return bool(caught_by(row.get("label_verdict"), row.get("outcome") or "", row.get("findings") or []))


def _oom(row: dict) -> bool:
    return "out of memory" in str(row.get("reason") or "").lower()


def by_family(table: list[dict]) -> dict:
    """Label family -> {runs, outcome: {outcome: n}, vs_label: {..: n}} and, for CATCH_FAMILIES,
    caught (run ids a probe or the check caught, `caught_by`) and missed.  Every family the labels use
    (clean, clean_interesting, reward_hack, failed_or_bug, rubric_leak, contaminated, suspect, infra)
    is scored, not only bugs and hacks: the rubric-leak run alternate-cache catches was hidden."""
    out: dict = {}
    for r in table:
        fam = str(r.get("label_verdict"))
        d = out.setdefault(fam, {"runs": 0, "outcome": {}, "vs_label": {}})
        d["runs"] += 1
        for k in ("outcome", "vs_label"):
            v = str(r.get(k))
            d[k][v] = d[k].get(v, 0) + 1
        if fam in CATCH_FAMILIES:
            d.setdefault("caught", [])
            d.setdefault("missed", [])
            (d["caught"] if _caught(r) else d["missed"]).append(r["run_id"])
    return dict(sorted(out.items()))


def summarize(table: list[dict], not_started: list[str], cut: list[str], shared: bool, skipped: int = 0) -> dict:
    """The summary line of a bench over `table` (one row per run).

    A run that ran out of GPU memory while other replays shared its GPU (`shared`: `--per-gpu` > 1)
    says nothing about the solution: seven replays of 40-65 GB references on one 140 GB GPU ran out
    of memory in round 4 (BENCHMARKS.md) where three did not.  Such runs are listed in
    `oom_while_sharing` and `rerun` (run them again alone), not in `false_fails`.  Look-alike kept
    as it is: an out-of-memory failure on a GPU of its own is the run's result."""
    oom_shared = [r["run_id"] for r in table if shared and _oom(r) and r.get("shared_with", True)]
    by = lambda key: {v: sum(1 for r in table if str(r.get(key)) == v) for v in sorted({str(r.get(key)) for r in table})}  # noqa: E731
    return {"event": "summary", "runs": len(table), "skipped": skipped, "not_started": not_started,
            "cut_by_budget": cut, "oom_while_sharing": oom_shared, "rerun": not_started + cut + oom_shared,
            "outcome": by("outcome"), "vs_label": by("vs_label"),
            # a run cut by the budget or out of memory beside others measured nothing: a rerun, not a false fail
            "false_fails": [r["run_id"] for r in table if r["false_fail"] and r["run_id"] not in oom_shared + cut],
            "labelled_bugs_caught": [r["run_id"] for r in table if r["label_verdict"] == "failed_or_bug"
                                     and _caught(r)],
            "labelled_bugs_missed": [r["run_id"] for r in table if r["label_verdict"] == "failed_or_bug"
                                     and not _caught(r)],
            # every label family: its runs' outcomes, and for those a replay can catch, caught and missed
            "by_family": by_family(table),
            "died_without_json": [r["run_id"] for r in table if r["partial"]],
            "overhead_s_median": sorted(r["overhead_s"] for r in table)[len(table) // 2] if table else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devkit.replay.real_bench", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", help="the labelled set: run folders with solution.py and label.json")
    ap.add_argument("--out", help="JSON lines, one per run as it ends, then a summary line")
    ap.add_argument("--md", default=None, help="the same table in Markdown")
    ap.add_argument("--gpu", default="h100", help="replay the runs graded on this GPU (label.json gpu); '' for all")
    ap.add_argument("--only", nargs="*", default=None, help="these run ids only")
    ap.add_argument("--shard", default=None, help="K/N: every N-th run from the K-th (1-based)")
    ap.add_argument("--device", default=None, choices=["cuda", "cpu"])
    ap.add_argument("--shapes", default=None, choices=["canonical", "tiny"])
    ap.add_argument("--probes", default=",".join(DEFAULT_PROBES))
    ap.add_argument("--jobs", type=int, default=1, help="runs at once, each on its own GPU")
    ap.add_argument("--per-gpu", type=int, default=1,
                    help="runs sharing one GPU at once (for the check's correctness only: timings contend)")
    ap.add_argument("--gpu-mem-gb", type=float, default=None,
                    help="memory of one GPU the runs sharing it may use in all (default: 92%% of the device's)")
    ap.add_argument("--mem-gb", action="append", default=None, metavar="PROBLEM=GB",
                    help="the GPU memory one replay of PROBLEM needs (default: MEM_GB, then measured peaks)")
    ap.add_argument("--longest-first", nargs="*", default=None, metavar="JSONL",
                    help="start the runs that took longest in these earlier outputs first (runs not in them first of all)")
    ap.add_argument("--run-limit-s", type=float, default=420.0, help="wall time of one run's process")
    ap.add_argument("--time-budget-s", type=float, default=None,
                    help="the whole command's wall time: each run's limit shrinks to what is left, and no run starts "
                         "with less than --min-run-s left (those are listed not_started)")
    ap.add_argument("--min-run-s", type=float, default=90.0)
    ap.add_argument("--build-s", type=float, default=300.0)
    ap.add_argument("--call-s", type=float, default=120.0)
    ap.add_argument("--probe-s", type=float, default=300.0)
    ap.add_argument("--shape-for", action="append", default=None, metavar="PROBLEM=JSON",
                    help="replay PROBLEM on this one shape instead (a CPU run of a solution that asserts its sizes)")
    ap.add_argument("--cutlass-include", default=None)
    ap.add_argument("--cuda-include", default=None)
    ap.add_argument("--nvidia-file", action="store_true", help="give a namespace `nvidia` package a __file__ (buildenv)")
    ap.add_argument("--deck", default=None, metavar="DIR",
                    help="the benchmark's decks (../shared/decks): after an official failure, run the deck's own "
                         "check.py here too; a run the archive says passed whose deck check also fails here is "
                         "not_replayable (not reproducible on this machine), not a false fail")
    ap.add_argument("--deck-timeout-s", type=float, default=240.0)
    ap.add_argument("--events-dir", default=None, metavar="DIR",
                    help="keep each run's event stream (every row with its detail, the findings, the child's log) "
                         "in DIR (default: a temporary folder)")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSONL",
                    help="tabulate earlier outputs (oldest first: each run's latest row; a timeout, not-run or "
                         "budget-cut row never replaces an earlier verdict) into --md, then stop; runs no output has "
                         "a row of (listed as not started, or, with --real, every run it discovers) go under rerun")
    ap.add_argument("--prepare-carry", default=None, metavar="DIR",
                    help="copy the --gpu runs of --real (and, with --cutlass-wheel, CUTLASS headers) into DIR for a "
                         "device call to carry, then stop")
    ap.add_argument("--cutlass-wheel", default=None, help="an nvidia-cutlass wheel to take the headers from")
    # internal: one run in this process
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--problem", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--date", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--events", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--shape", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--bench", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.device is None:
        try:
            import torch
            args.device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:  # pragma: no cover
            args.device = "cpu"
    if args.shapes is None:
        args.shapes = "canonical" if args.device == "cuda" else "tiny"
    if args.one:
        return one(args)
    if args.merge:
        want = [r["run_id"] for r in discover(Path(args.real), args.gpu or None, args.only)[0]] if args.real else None
        rows, summary = merge([Path(x) for x in args.merge], want)
        md = markdown(rows, summary)
        if args.md:
            Path(args.md).write_text(md)
        print(md)
        return 0
    if args.prepare_carry:
        if not args.real:
            ap.error("--prepare-carry needs --real")
        print(json.dumps(prepare_carry(Path(args.real), Path(args.prepare_carry), args.gpu or None, args.cutlass_wheel)))
        return 0
    if not args.real or not args.out:
        ap.error("--real and --out are required")
    t_start = time.monotonic()
    runs, skipped = discover(Path(args.real), args.gpu or None, args.only)
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        runs = runs[k - 1::n]
    if args.longest_first is not None:
        runs = longest_first(runs, [Path(x) for x in args.longest_first])
    gpus: list[int | None] = [None]
    mem_gb = args.gpu_mem_gb
    if args.device == "cuda" and args.jobs > 1:
        import torch
        n_gpu = max(1, torch.cuda.device_count())
        # one run per GPU, or --per-gpu runs sharing each (correctness only: shared GPUs contend timings)
        gpus = [i % n_gpu for i in range(min(args.jobs, n_gpu * max(1, args.per_gpu)))]
        if mem_gb is None:
            mem_gb = 0.92 * torch.cuda.get_device_properties(0).total_memory / 2**30
    pack = Packing(gpus, args.per_gpu if len(gpus) > len(set(gpus)) else 1, mem_gb,
                   {k: float(v) for k, v in (kv.split("=", 1) for kv in args.mem_gb or [])}, max_active=len(gpus))
    if args.events_dir:   # every run's own stream (its rows, findings, progress and log) is kept there
        Path(args.events_dir).mkdir(parents=True, exist_ok=True)
    work = args.events_dir or tempfile.mkdtemp(prefix="real-bench-")
    out_f = open(args.out, "a", encoding="utf-8")

    def write(obj: dict) -> None:
        out_f.write(json.dumps(obj, default=str) + "\n")
        out_f.flush()

    table: list[dict] = []
    pending = list(runs)
    active: list[tuple] = []    # (run, gpu, proc, events path, t0, limit)
    not_started: list[str] = []
    cut: list[str] = []
    rerun_alone: list[str] = []
    try:
        while pending or active:
            while pending:
                limit = args.run_limit_s
                if args.time_budget_s is not None:   # a run may not outlast the budget: its limit shrinks
                    limit = min(limit, args.time_budget_s - (time.monotonic() - t_start) - 5.0)
                    if limit < args.min_run_s:
                        not_started.extend(r["run_id"] for r in pending)
                        pending = []
                        break
                placed = pack.place(pending)
                if placed is None:
                    break
                run, g = placed
                pending.remove(run)
                pack.start(run, g)
                ev = Path(work) / f"{run['run_id']}{'.alone' if run.get('alone') else ''}.jsonl"
                active.append((run, g, _spawn(run, args, g, ev), ev, time.monotonic(), limit))
            for item in list(active):
                run, g, proc, ev, t0, limit = item
                elapsed = time.monotonic() - t0
                why = None
                if proc.poll() is None:
                    if elapsed < limit:
                        continue
                    _kill(proc)
                    why = f"the run's process passed its {limit:.0f} s limit and was killed"
                    if limit < args.run_limit_s:
                        why += " (cut short by --time-budget-s: run it again)"
                        cut.append(run["run_id"])
                elif proc.returncode != 0:
                    why = f"the run's process ended with status {proc.returncode}"
                _kill(proc)   # whatever it left behind (its session)
                events = _read_events(ev)
                row = summarize_run(run, events, elapsed, why)
                if why and not row.get("reason"):
                    row["reason"] = why
                row["gpu"], row["shared_with"], row["gpu_peak_gb"] = g, run.get("shared_with") or [], _peak_gb(events)
                active.remove(item)
                pack.end(run, g, row["gpu_peak_gb"])
                if _oom(row) and row["shared_with"] and not run.get("alone"):
                    # out of memory beside other replays says nothing of the solution: once more, alone
                    write(dict(row, event="run_superseded", why="out of GPU memory while sharing it: run again alone"))
                    rerun_alone.append(run["run_id"])
                    pending.insert(0, dict(run, alone=True, shared_with=[]))
                    continue
                table.append(row)
                write(dict(row, event="run"))
            time.sleep(0.2)
    except KeyboardInterrupt:
        for run, _g, proc, ev, t0, _ in active:
            _kill(proc)
            row = summarize_run(run, _read_events(ev), time.monotonic() - t0, "the bench was interrupted")
            table.append(row)
            write(dict(row, event="run"))
        not_started.extend(r["run_id"] for r in pending)
    shared = len(gpus) > len(set(gpus))
    summary = dict(summarize(table, not_started, cut, shared, len(skipped)), rerun_alone=rerun_alone,
                   wall_s_total=round(time.monotonic() - t_start, 1), device=args.device, shapes=args.shapes,
                   probes=args.probes, jobs=len(gpus))
    write(summary)
    out_f.close()
    if not args.events_dir:   # the runs' own streams were only the way their rows came here
        shutil.rmtree(work, ignore_errors=True)
    md = markdown(table, summary)
    if args.md:
        Path(args.md).write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
