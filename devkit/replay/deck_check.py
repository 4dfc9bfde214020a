"""The benchmark's own check.py, run on this machine against one archived solution, in the replay's
sandbox: the arbiter between "our replay is wrong" and "the solution does not pass here".

A replay that fails a solution the archive says passed is one of two things. Either the replay
differs from the deck (inputs, tolerances, how a stateful API is chained: our false fail), or the
solution does not pass on this machine at all, whoever checks it (another GPU: its SM count, its
L2; another toolchain). Only the deck's own check, on the same machine, tells them apart; so
`devkit.replay.real_bench --deck DIR` runs it after every official replay failure of a run the
archive says passed.

The deck's files are data read from DIR (`../shared/decks`: `benchmarks/<bench>/problems-h100/<p>/`
and `benchmarks/<bench>/src/`; the mega bench's `problems/`); they are laid out in the scratch as
`deck/problems/<p>/` beside `deck/src/` (check.py finds its `src` two levels up and reads
problem.yaml from its cwd), with the solution (its public-archive sidecars split off) in the
problem folder. The check runs as `python -s check.py` in that folder under the same sandbox as a
replay child (forensics.replay.sandbox): the solution is adversarial code whoever calls it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: where each bench keeps its problems under a decks root (the H100 editions)
DECK_DIRS = {"cuda": "benchmarks/cuda/problems-h100", "hard": "benchmarks/hard/problems-h100",
             "mega": "benchmarks/mega/problems"}
#: what a deck's check prints: "PASS" alone at the end, "FAIL: ..." on the first failure
_FAIL = re.compile(r"^\s*FAIL\b.*$", re.M)
_PASS = re.compile(r"^\s*PASS\b.*$", re.M)
_SKIP_PARTS = {"__pycache__", ".git"}


def problem_dir(decks: Path, bench: str, problem: str) -> Path | None:
    """The deck's folder of `problem` in `bench` under `decks`, or None."""
    sub = DECK_DIRS.get(bench or "")
    if sub is None:
        return None
    d = Path(decks) / sub / problem
    return d if (d / "check.py").is_file() else None


def _tree(src: Path, prefix: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if p.is_symlink() or not p.is_file() or _SKIP_PARTS & set(rel.parts) or p.suffix == ".pyc":
            continue
        out[f"{prefix}/{rel.as_posix()}"] = p.read_bytes()
    return out


def deck_files(decks: Path, bench: str, problem: str, solution: bytes, sidecars: dict[str, bytes] | None
               ) -> tuple[dict[str, bytes], str] | None:
    """The scratch files (relative path -> bytes) and the check's folder, or None without a deck."""
    pdir = problem_dir(decks, bench, problem)
    if pdir is None:
        return None
    home = f"deck/problems/{problem}"
    files = _tree(pdir.parent.parent / "src", "deck/src")
    files.update(_tree(pdir, home))
    for rel, data in (sidecars or {}).items():
        files[f"{home}/{rel}"] = data
    files[f"{home}/solution.py"] = solution
    return files, home


def verdict(output: str, rc: int | None) -> tuple[str, str]:
    """(status, the line that says so) from the check's output and exit status."""
    fail = _FAIL.findall(output)
    if fail:
        return "fail", fail[0].strip()[:400]
    if rc == 0 and _PASS.search(output):
        return "pass", _PASS.findall(output)[-1].strip()[:400]
    tail = [ln for ln in output.strip().splitlines() if ln.strip()]
    return "error", (f"exit {rc}: " + (tail[-1] if tail else "no output"))[:400]


def run_deck_check(decks: Path, bench: str, problem: str, solution: bytes, sidecars: dict[str, bytes] | None,
                   device: str = "cuda", timeout_s: float = 600.0, python: str | None = None) -> dict[str, Any]:
    """Run the deck's check.py against `solution` here. -> {"status": pass | fail | error | timeout
    | no_deck, "line", "s", "rc", "tail" (the output's last 2000 characters), "deck"}."""
    from forensics.replay import sandbox
    from forensics.replay.api import split_published
    from forensics.replay.proctree import kill_session
    from forensics.replay.runner import Scratch, close_fds, scrubbed_env

    solution, sidecars, _ = split_published(solution, sidecars)
    got = deck_files(Path(decks), bench, problem, solution, sidecars)
    if got is None:
        return {"status": "no_deck", "line": f"no deck check.py for {bench}/{problem} under {decks}", "s": 0.0,
                "rc": None, "tail": "", "deck": None}
    files, home = got
    t0 = time.monotonic()
    scratch = Scratch(solution, files)
    log = scratch.root / "deck-check.log"
    cwd = scratch.sol_dir / home
    py = python or sys.executable
    argv = [py, "-s", "check.py"]
    env = scrubbed_env(scratch.sol_dir, scratch.ref_dir, scratch.home, scratch.cache, device)
    env["PYTHONPATH"] = str(cwd)
    rep_r, rep_w = os.pipe()
    cg = None
    rc: int | None = None
    status = None
    try:
        cfg, cg = sandbox.plan(scratch, device, py, (), rep_w, argv, env, hide=[str(Path(decks).resolve())])
        with open(log, "wb") as out:
            if cfg is None:     # FORENSICS_SANDBOX=off
                proc = subprocess.Popen(argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
            else:
                cfg["cwd"] = str(cwd)
                scratch.prepare_owner(cfg["uid"])
                proc = subprocess.Popen([py, "-I", "-S", str(scratch.harness / "sandbox.py")], cwd=str(scratch.harness),
                                        env={sandbox.CONFIG_ENV: __import__("json").dumps(cfg)},
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        pass_fds=(rep_w,), start_new_session=True, close_fds=True)
            os.close(rep_w)
            rep_w = -1
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                status = "timeout"
            finally:
                kill_session(proc.pid)
                if cg is not None:
                    cg.kill_all()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
        text = log.read_text(encoding="utf-8", errors="replace")
        if status == "timeout":
            line = f"the deck's check ran past {timeout_s:.0f} s and was killed"
        else:
            status, line = verdict(text, rc)
        return {"status": status, "line": line, "s": round(time.monotonic() - t0, 2), "rc": rc,
                "tail": text[-2000:], "deck": str(problem_dir(Path(decks), bench, problem))}
    finally:
        close_fds(rep_r, rep_w)
        if cg is not None:
            cg.remove()
        scratch.cleanup()


__all__ = ["DECK_DIRS", "deck_files", "problem_dir", "run_deck_check", "verdict"]
