"""`forensics corpus generate`: a deterministic, realistic synthetic archive of N runs.

Same (runs, seed, scale) -> byte-identical tree: every random choice comes from a
`random.Random` seeded from the arguments, timestamps derive from the seed, files are
written in sorted order and their mtimes are set from the run's own clock.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

import orjson

from . import decks, logs, solutions
from .labels import SCHEMA_VERSION, run_keys
from .run import ERA_DATES, RunBuilder
from .session import ForeignRef, transcript_format

# harness -> (weight, models); weights follow the observed run-id counts (spec 1.2)
HARNESSES = {
    "claude": (153, ["claude-opus-4-8", "claude-fable-5", "claude-opus-4-6"]),
    "or-fable": (145, ["qwen/qwen3.8-max", "anthropic/claude-fable-5", "moonshotai/kimi-k3"]),
    "kinetic-claude": (134, ["kinetic-0715[1m]"]),
    "codex": (107, ["gpt-5.5-codex", "gpt-5.4"]),
    "grok": (100, ["grok-build-2", "grok-5-code"]),
    "zai-claude": (63, ["zai/glm-5.1", "custom:GLM-5.1-[Z.AI-Coding-Plan]-0"]),
    "kimi-claude": (56, ["kimi-k3"]),
    "opencode": (49, ["openrouter-pinned/qwen/qwen3.6-27b", "openrouter-pinned/minimax/minimax-m2.7"]),
    "minimax-claude": (47, ["minimax-m2.7"]),
    "cursor": (47, ["composer-2", "gpt-5.5"]),
    "gemini": (43, ["gemini-3.1-pro"]),
    "deepseek-claude": (39, ["deepseek-v4"]),
    "hy3": (12, ["hy3"]),
    "kimi": (8, ["kimi-k3"]),
    "droid": (8, ["glm-5.1"]),
}
FORMAT_ORDER = ["claude", "codex_text", "opencode", "cursor", "gemini", "kimi", "droid", "grok_stream"]
FORMAT_HARNESS = {"claude": "claude", "codex_text": "codex", "opencode": "opencode", "cursor": "cursor",
                  "gemini": "gemini", "kimi": "kimi", "droid": "droid", "grok_stream": "grok"}
ERA_WEIGHTS = {"E0": 8, "E1": 6, "E2": 10, "E3": 22, "E4": 40, "E5": 14}
BENCH_WEIGHTS = {"hard": 50, "cuda": 25, "mini": 10, "mega": 15}
OUTCOMES = {"pass": 52, "check_fail": 18, "pass_superseded_fail": 5, "402_no_output": 4, "402_after_solution": 4,
            "cut_off": 5, "check_timeout": 4, "benchmark_failed": 3, "template_mutated": 2, "recovered": 2,
            "rate_limited": 1}
FILLER = [
    ("nvidia-smi", "+-----------------------------------------------------------------------------------------+\n"
                   "| NVIDIA-SMI 595.84       Driver Version: 595.84       CUDA Version: 13.2                 |\n"
                   "|  0  NVIDIA RTX PRO 6000 Blackwell Server Edition  On |   00000000:01:00.0 Off |  Off |\n"
                   "| 30%   41C    P0   92W / 600W |    1024MiB / 97887MiB |      0%      Default |\n"
                   "+-----------------------------------------------------------------------------------------+\n"),
    ("python -c 'import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())'",
     "2.11.0+cu130 3.5.0 NVIDIA RTX PRO 6000 Blackwell Server Edition\n"),
    ("nvcc --version | tail -2", "Cuda compilation tools, release 13.2, V13.2.51\nBuild cuda_13.2.r13.2/compiler.36125\n"),
    ("ls -la", "total 48\ndrwxr-xr-x 3 agent agent 4096 .\n-rw-r--r-- 1 agent agent 1501 PROMPT.txt\n"
               "-rw-r--r-- 1 agent agent 3251 benchmark.py\n-rw-r--r-- 1 agent agent 3426 check.py\n"
               "-rw-r--r-- 1 agent agent 1224 problem.yaml\n-rw-r--r-- 1 agent agent 3596 reference.py\n"
               "-rw-r--r-- 1 agent agent 1370 shapes.py\n-rw-r--r-- 1 agent agent  248 sota.py\n"),
    ("grep -n 'tolerance\\|forbidden' problem.yaml", "6:tolerance:\n9:forbidden:\n"),
    ("python - <<'EOF'\nimport torch\nx = torch.randn(4096, 4096, device='cuda')\nprint(x.float().abs().max().item())\nEOF",
     "4.91784\n"),
    ("git status --short 2>/dev/null | head", ""),
    ("ncu --version", "NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2026.2.0.0 (build 36441587)\n"),
]
THOUGHTS = [
    "The reference rounds the GEMM to bf16 before scaling, so the epilogue has to do the same or large_input drifts.",
    "Check passes on nominal; the stress cases are the risk. Let me look at the tolerance override for small inputs.",
    "The benchmark flushes L2 between trials, so the steady-state number is the cold-cache one.",
    "Occupancy looks limited by registers; try fewer stages for the small-M shapes.",
    "Before tuning further I should re-run check.py on the exact file I will submit.",
    "The tail shape is the slowest; it is launch-bound, not bandwidth-bound.",
]


def _weighted(rng: random.Random, table: dict):
    keys = list(table)
    w = [table[k] if not isinstance(table[k], tuple) else table[k][0] for k in keys]
    return rng.choices(keys, weights=w, k=1)[0]


def _ts_for(rng: random.Random, era: str, host_tz: int, i: int) -> datetime:
    y, m, d = ERA_DATES[era]
    base = datetime(y, m, d, 9, 0, 0) + timedelta(days=rng.randrange(0, 10), seconds=rng.randrange(0, 12 * 3600))
    return base + timedelta(hours=host_tz) + timedelta(seconds=i)


class _Prior:
    """What later runs can see of an earlier run in the same archive."""

    def __init__(self, b: RunBuilder, out: Path):
        self.run_id = b.run_id
        self.problem = b.problem_name
        self.bench = b.bench
        self.root = b.root
        self.dir = out / "outputs" / b.root / b.run_id
        self.archive_base = b.archive_base
        self.start_epoch = b.start_epoch

    def read(self, rel: str) -> str | None:
        p = self.dir / rel
        if p.is_file():
            return p.read_bytes().decode("utf-8", "replace")
        return None


def agent_loop(b: RunBuilder, rng: random.Random, *, n_calls: int, outcome: str, final_variant: dict,
               priors: list[_Prior], progress_per_call: int = 0, n_versions: int | None = None) -> None:
    """A generic but realistic session: read the deck, draft, check, iterate, benchmark, finish."""
    s = b.session
    p = b.problem
    fmt = s.fmt
    claude = fmt == "claude"
    s.text(f"I'll start by reading the problem statement and the reference for {p.name}.")
    s.read("PROMPT.txt", b.template("PROMPT.txt"))
    s.read("reference.py", b.template("reference.py"))
    s.read("check.py", b.template("check.py"), offset=1, limit=40)
    if claude and rng.random() < 0.7:
        for i, subj in enumerate(("Write first correct version", "Pass check.py incl. stress", "Tune per-shape"), 1):
            s.tool("TaskCreate", {"subject": subj, "description": subj, "activeForm": subj + "..."},
                   f"Task #{i} created successfully: {subj}")
    # only earlier runs of the same bench tree on the same host exist on this disk at this time
    priors = [pr for pr in priors if pr.archive_base == b.archive_base and pr.start_epoch < b.start_epoch - 600]
    if b.container:
        priors = []  # the container only mounts this run's workspace: no other run is visible
    same = [pr for pr in priors if pr.problem == b.problem_name]
    other = [pr for pr in priors if pr.problem != b.problem_name]
    # benign exposure: a listing of the runs directory
    if any(pr.root == b.root for pr in priors) and rng.random() < 0.35:
        same_root = [pr for pr in priors if pr.root == b.root] or priors[:0]
        shown = sorted(rng.sample(same_root, min(len(same_root), rng.randint(1, 6))), key=lambda x: x.run_id)
        listing = "\n".join(pr.run_id for pr in shown) + "\n"
        root_dir = f"{b.archive_base}/outputs/{b.root}"
        s.bash(f"ls {root_dir} | tail -20", listing,
               foreign=[ForeignRef(pr.run_id, "", "benign_exposure") for pr in shown if pr.root == b.root])
    if priors and rng.random() < 0.2:
        pr = rng.choice(priors)
        s.bash("fuser -v /dev/nvidia* 2>&1 | head; ps -eo pid,args | grep -c python",
               f"                     USER        PID ACCESS COMMAND\n/dev/nvidia0:        agent     {rng.randrange(1000, 99999)} F...m python\n"
               f"  {rng.randrange(1000, 99999)} uv run python {b.archive_base}/outputs/{pr.root}/{pr.run_id}/repo/problems/{pr.problem}/benchmark.py\n3\n",
               foreign=[ForeignRef(pr.run_id, f"repo/problems/{pr.problem}/benchmark.py", "benign_exposure")]
               if pr.root == b.root else None)
    copied_from = None
    if same and rng.random() < 0.12:
        pr = rng.choice(same)
        sol = pr.read("solution.py")
        res = pr.read("result.json")
        if res:
            s.bash(f"cat {b.archive_base}/outputs/{pr.root}/{pr.run_id}/result.json", res,
                   foreign=[ForeignRef(pr.run_id, "result.json", "deliberate_read")])
        if sol:
            s.read(f"{b.archive_base}/outputs/{pr.root}/{pr.run_id}/solution.py", sol,
                   foreign=[ForeignRef(pr.run_id, "solution.py", "deliberate_read")])
            if rng.random() < 0.5:
                copied_from = (pr, sol)
    if copied_from:
        pr, sol = copied_from
        s.write("solution.py", sol, foreign=[ForeignRef(pr.run_id, "solution.py", "copy")])
    nv = n_versions or rng.randint(2, 6)
    ops = solutions.drafts(p.name, rng, nv, final_variant)
    # spread the drafts over the session with filler calls and checks between them
    budget = max(0, n_calls - s.calls.__len__() - 3 * len(ops) - 4)
    per = budget // max(1, len(ops))
    check_fail_first = outcome not in ("402_no_output",)
    for oi, (op, payload) in enumerate(ops):
        last = oi == len(ops) - 1
        if op == "write":
            s.write("solution.py", payload)
        elif op == "heredoc":
            s.heredoc("solution.py", payload)
        elif op == "edit":
            old, new = payload
            r = rng.random()
            if claude and r < 0.15:
                s.multiedit("solution.py", [(old, new)])
            elif r < 0.25 and "\n" not in old.rstrip("\n") and "\n" not in new.rstrip("\n") and not old.endswith("\n"):
                s.sed_i("solution.py", old, new)
            else:
                s.edit("solution.py", old, new)
            if claude and rng.random() < 0.2:
                s.tool_progress(rng.randint(1, 4))
        if oi == 0 and check_fail_first:
            b.check("FAIL", style=rng.choice(["tail", "plain", "timeout"]),
                    fail_line=logs.fail_tolerance(p, case=rng.choice(("nominal",) + p.stress) if p.stress else "nominal", era=b.era)
                    if p.bench not in ("mega",) else f"FAIL: seed 0 ctx 2048: out cosine 0.8{rng.randrange(10, 99)} < 0.98")
        for _ in range(per):
            r = rng.random()
            if r < 0.45:
                cmd, out = rng.choice(FILLER)
                s.bash(cmd, out, gpu=("python" in cmd or "nvidia-smi" in cmd or "ncu" in cmd))
            elif r < 0.6:
                cur = s.content("solution.py") or ""
                s.read("solution.py", cur, offset=1, limit=min(80, cur.count("\n") + 1))
            elif r < 0.72:
                name = f"bench_{rng.randrange(100)}.py"
                s.write(name, f"import torch\nimport solution\n\n# quick local timing of shape {rng.randrange(5)}\n"
                              f"print(torch.cuda.get_device_name())\n")
            elif r < 0.8 and claude:
                s.tool("TaskUpdate", {"taskId": str(rng.randint(1, 3)), "status": rng.choice(["in_progress", "completed"])},
                       "Updated task status")
            else:
                s.thinking(rng.choice(THOUGHTS))
                s.text(rng.choice(THOUGHTS))
            if progress_per_call:
                s.progress(rng.randint(progress_per_call // 2, progress_per_call * 3 // 2))
        if not last and oi > 0 and rng.random() < 0.6:
            bg = fmt in ("claude", "codex_text") and rng.random() < 0.3
            seq = b.check("PASS", style=rng.choice(["tail", "plain", "cd", "env", "abs"]), background=bg)
            if bg:
                s.progress(rng.randint(200, 2000) if progress_per_call else 0)
                s.task_output(seq)
            if rng.random() < 0.5:
                b.benchmark(target=rng.uniform(0.02, 0.4))
    if claude and rng.random() < 0.15:
        s.compact("Summary of the session so far: solution.py implements the kernel; check.py passes on nominal and "
                  "stress cases; remaining work is per-shape tuning.")
    if b.harness in ("opencode", "hy3", "opencode-nemotron") and rng.random() < 0.25:
        b.stall_kills.append(rng.choice([600, 900, 1200]))
    if outcome == "402_after_solution":
        s.api_error(402, "API Error: 402 Insufficient credits. Add more using https://openrouter.ai/settings/credits")
        if fmt in ("claude",):
            s.end("API Error: 402 Insufficient credits. Add more using https://openrouter.ai/settings/credits",
                  is_error=True, subtype="success", terminal_reason="api_error", api_error_status=402, stop_reason="stop_sequence")
        return
    if outcome == "rate_limited":
        s.rate_limit()
        if fmt == "claude":
            s.api_error(429, "You've hit your session limit · resets 2:20pm (UTC)")
            s.end("You've hit your session limit · resets 2:20pm (UTC)", is_error=True, terminal_reason="api_error",
                  api_error_status=429, stop_reason="stop_sequence")
        else:
            s.api_error(429, "429 resource_exhausted: rate limit exceeded")
        return
    if outcome == "cut_off":
        b.check("PASS", style="tail")
        s.bash("uv run python benchmark.py 2>&1 | tail -5", "", 0, dur=1.0)
        s.cut_off()
        return
    if outcome == "pass_superseded_fail":
        # a PASS on the previous version, then a last rewrite that is never re-checked
        cur = s.content("solution.py")
        b.check("PASS", style="tail")
        s.edit("solution.py", "import torch\n", "import torch\n# final micro-optimisation: fused tail loop\n")
        b.notes.append("The last in-session PASS precedes the final edit.")
    else:
        b.check("PASS" if outcome not in ("check_fail", "check_timeout") else "FAIL", style=rng.choice(["tail", "plain", "uvrun"]))
        if outcome not in ("check_fail", "check_timeout"):
            b.benchmark(target=rng.uniform(0.02, 0.5))
    s.text("Final solution.py is in place; check.py passes and the benchmark numbers are above.")
    if fmt == "claude":
        s.end("Implemented solution.py; check.py PASS; benchmark peak_fraction reported.")
    else:
        s.end("Implemented solution.py; check.py PASS.")


def random_run(i: int, rng: random.Random, priors: list[_Prior], *, scale: float, seed: int) -> RunBuilder:
    # formats and eras cycle first so every one appears in any generation of >= 8 runs
    if i < len(FORMAT_ORDER):
        harness = FORMAT_HARNESS[FORMAT_ORDER[i]]
    else:
        harness = _weighted(rng, HARNESSES)
    era = ("E0", "E1", "E2", "E3", "E4", "E5")[i % 6] if i < 12 else _weighted(rng, ERA_WEIGHTS)
    bench = _weighted(rng, BENCH_WEIGHTS) if era != "E0" else "hard"
    if era in ("E0", "E1") and bench == "mega":
        bench = "hard"
    probs = decks.problems_of(bench)
    p = rng.choice(probs)
    model = rng.choice(HARNESSES[harness][1])
    host = rng.choice(["anvil", "anvil", "lambda-h100-1", "brev-6h4h8jy86"]) if era != "E0" else "anvil"
    tz = -6 if host == "anvil" else 0
    ts = _ts_for(rng, era, 0, i)
    container = era in ("E2", "E3", "E4", "E5") and bench != "mega" and rng.random() < 0.5
    root = "runs-h100" if (rng.random() < 0.06 and era != "E0") else "runs"
    gpu = "H100" if root == "runs-h100" else "RTX_PRO_6000"
    collision = (rng.randrange(2000, 400000), rng.randint(1, 3)) if rng.random() < 0.05 else None
    outcome = _weighted(rng, OUTCOMES)
    if (outcome == "recovered" and era not in ("E3", "E4", "E5")) or (outcome == "template_mutated" and era == "E0"):
        outcome = "pass"  # recovered archives are a late practice; E0 had no template snapshot
    if bench in ("mega", "mini") and outcome == "pass":
        # the mega/mini families are simplified drafts that would not pass a real replay
        outcome = "check_fail"
    b = RunBuilder(bench, p.name, harness, era, ts, model, container, seed=seed, host=host, gpu=gpu, root=root,
                   collision=collision, effort=rng.choice(["", "max", "high", "xhigh"]), scenario=f"random_{outcome}",
                   run_group=f"sweep_{ts:%Y%m%d_%H%M%S}" if rng.random() < 0.5 else "")
    fw, ev = solutions.framework_of(p.name, bench)
    b.framework, b.cuda_evidence = fw, ev
    s = b.session
    fmt = s.fmt
    claude = fmt == "claude"
    base_calls = rng.randint(100, 500) if claude else rng.randint(30, 200)
    n_calls = max(12, int(base_calls * scale))
    progress = int(rng.randint(60, 220) * scale) if claude else 0
    variant = {"block": rng.choice([256, 512, 1024, 2048])}
    if b.old_fp8_deck:
        variant["old_deck"] = True  # the fp8 deck before 2026-06-14: bf16 weight, no scale
    if outcome == "402_no_output":
        s.api_error(402, "API Error: 402 Insufficient credits. Add more using https://openrouter.ai/settings/credits")
        if claude:
            s.end("API Error: 402 Insufficient credits. Add more using https://openrouter.ai/settings/credits", is_error=True,
                  terminal_reason="api_error", api_error_status=402, stop_reason="stop_sequence")
        b.stderr_extra = "Error: 402 Insufficient credits. Add more using https://openrouter.ai/settings/credits\n"
        b.harness_exit = 1
        b.explicit_no_solution = True
        return b
    agent_loop(b, rng, n_calls=n_calls, outcome=outcome, final_variant=variant, priors=priors,
               progress_per_call=progress)
    if outcome in ("check_fail", "pass_superseded_fail"):
        b.grade("FAIL", fail_line=logs.fail_tolerance(b.problem, era=era) if bench != "mega"
                else "FAIL: seed 2 ctx 2048: mla_cache cosine 0.0382 < 0.98")
    elif outcome == "check_timeout":
        b.grade("TIMEOUT")
    elif outcome == "benchmark_failed":
        b.grade("PASS", bench_exit=1, bench_text=logs.benchmark_failed_text(
            b.problem, era=era, rng=rng, t0=s.t, fail_shape=min(2, len(b.problem.shapes) - 1),
            exc="CUDA error: invalid argument"), peak_fraction=None)
    elif outcome == "template_mutated":
        y = b.template("problem.yaml")
        tol_line = next(ln for ln in y.split("\n") if ln.startswith("  ") and ":" in ln)
        k, v = tol_line.strip().split(":")
        new_line = f"  {k}: {float(v) * 10:g}"
        s.edit("problem.yaml", tol_line, new_line) if s.path("problem.yaml") in s.vfs else None
        b.mutate_template("problem.yaml", y.replace(tol_line, new_line))
        b.defects.append("template_mutation")
    elif outcome == "recovered":
        b.recovered = True
        b.notes.append("Recovered archive: runner died before grading; result.json synthesised.")
    elif outcome == "cut_off":
        b.grade("PASS")
    else:
        b.grade("PASS")
    if rng.random() < 0.12 and b.regrade_info is None and outcome == "pass" and era in ("E4", "E5"):
        b.regrade()
    if rng.random() < 0.05:
        b.secrets = True
    if era in ("E1", "E2", "E3", "E4") and not b.container and rng.random() < 0.3:
        b.src_symlink = True  # before E5, host mode linked repo/src to the live bench src/
    return b


def generate(out: str | Path, runs: int, seed: int, scale: float = 1.0, progress_bar: bool = False) -> dict:
    """Write OUT/outputs/<root>/<run_id>/... and OUT/labels.json; return the labels document."""
    out = Path(out)
    rng = random.Random(f"corpus:{runs}:{seed}:{scale}")
    priors: list[_Prior] = []
    labels = []
    it = range(runs)
    if progress_bar:
        from tqdm import tqdm
        it = tqdm(it, desc="runs", unit="run")
    for i in it:
        b = random_run(i, random.Random(rng.getrandbits(64)), priors, scale=scale, seed=seed)
        lab = b.write(out)
        labels.append(lab)
        priors.append(_Prior(b, out))
    doc = {"schema_version": SCHEMA_VERSION, "generator": {"kind": "generate", "runs": runs, "seed": seed, "scale": scale},
           "runs": dict(sorted(run_keys(labels).items()))}
    (out / "labels.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    return doc
