"""devkit.replay.deck_check and real_bench --deck: the deck's own check.py as the arbiter of an
official replay failure.  The decks here are planted (a check of our own in the deck's layout:
problems-h100/<p>/check.py finding src/ two levels up, printing PASS or FAIL: ...), so the tests
say what the arbiter does with each answer, not what a real deck says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.replay.deck_check import deck_files, problem_dir, run_deck_check, verdict

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "corpus" / "replay"

CHECK = b"""import os, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from src.eval.judge import judge
import solution
print("secret seen" if os.environ.get("FORENSICS_TEST_SECRET_TOKEN") else "no secret")
if getattr(solution, "SLEEP", 0):
    time.sleep(solution.SLEEP)
print(judge(Path("solution.py").read_text()))
sys.exit(0)
"""
JUDGE = b"""def judge(src):
    return "PASS" if "DECK_SAYS_PASS" in src else "FAIL: seed=42: planted deck says no"
"""


def plant_deck(root: Path, bench: str = "hard", problem: str = "05_topk_bitonic") -> Path:
    sub = {"hard": "benchmarks/hard/problems-h100", "cuda": "benchmarks/cuda/problems-h100",
           "mega": "benchmarks/mega/problems"}[bench]
    pdir = root / sub / problem
    pdir.mkdir(parents=True)
    (pdir / "check.py").write_bytes(CHECK)
    (pdir / "problem.yaml").write_text("name: planted\n")
    src = pdir.parent.parent / "src" / "eval"
    src.mkdir(parents=True)
    (src / "__init__.py").write_bytes(b"")
    (src / "judge.py").write_bytes(JUDGE)
    return root


def test_the_deck_layout_in_the_scratch(tmp_path):
    decks = plant_deck(tmp_path / "decks")
    assert problem_dir(decks, "hard", "05_topk_bitonic") is not None
    assert problem_dir(decks, "hard", "02_kda_cutlass") is None and problem_dir(decks, "nope", "x") is None
    files, home = deck_files(decks, "hard", "05_topk_bitonic", b"x = 1\n", {"kern/a.cu": b"//"})
    assert home == "deck/problems/05_topk_bitonic"
    assert {"deck/src/eval/judge.py", f"{home}/check.py", f"{home}/solution.py", f"{home}/kern/a.cu"} <= set(files)


def test_verdict_reads_the_checks_own_words():
    assert verdict("cuda_language: ok\nPASS\n", 0) == ("pass", "PASS")
    assert verdict("FAIL: seed=42 shape=1: max_abs 3\n", 1)[0] == "fail"
    assert verdict("Traceback ...\nImportError: no yaml\n", 1) == ("error", "exit 1: ImportError: no yaml")
    assert verdict("PASS\n", 1)[0] == "error"           # PASS printed, then died: not a pass


@pytest.mark.parametrize("marker,status", [(b"# DECK_SAYS_PASS\n", "pass"), (b"", "fail")])
def test_the_check_runs_in_a_scrubbed_sandbox(tmp_path, monkeypatch, marker, status):
    decks = plant_deck(tmp_path / "decks")
    monkeypatch.setenv("FORENSICS_TEST_SECRET_TOKEN", "s3cret")
    sol = b"ANSWER = 1\n" + marker
    got = run_deck_check(decks, "hard", "05_topk_bitonic", sol, None, device="cpu", timeout_s=120)
    assert got["status"] == status, got
    assert "no secret" in got["tail"] and "s3cret" not in got["tail"]   # the parent's environment stays out
    assert not list((decks / "benchmarks/hard/problems-h100/05_topk_bitonic").glob("cuda_language.json"))


def test_a_hanging_check_is_killed_and_a_missing_deck_said(tmp_path):
    decks = plant_deck(tmp_path / "decks")
    got = run_deck_check(decks, "hard", "05_topk_bitonic", b"SLEEP = 600\n", None, device="cpu", timeout_s=5)
    assert got["status"] == "timeout" and got["s"] < 60
    got = run_deck_check(decks, "cuda", "03_megaqwen_decode", b"x = 1\n", None, device="cpu")
    assert got["status"] == "no_deck" and "03_megaqwen_decode" in got["line"]


def _labelled(real: Path, run_id: str, solution: bytes, **label) -> None:
    d = real / run_id
    d.mkdir(parents=True)
    (d / "solution.py").write_bytes(solution)
    base = {"run_id": run_id, "gpu": "h100", "bench": "hard", "problem": run_id.split("_", 4)[-1],
            "verdict_family": "clean", "correct": True, "reward_hack": False}
    (d / "label.json").write_text(json.dumps(dict(base, **label)))


WRONG = (b"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
         b"    def __init__(self, batch, n, k):\n        super().__init__()\n        self.k = k\n"
         b"        self.register_buffer('_dummy', torch.zeros(1))\n\n    def forward(self, x):\n"
         b"        return x[:, :self.k].contiguous(), torch.arange(self.k).expand(x.shape[0], self.k).contiguous()\n")


@pytest.mark.slow
def test_real_bench_lets_the_deck_arbitrate_a_failure(tmp_path, monkeypatch):
    """A clean-labelled run our replay fails: when the deck's own check fails it here too it is not
    reproducible on this machine (not_replayable, not a false fail); when the deck passes it, the
    failure is ours (a false fail), whatever the replay said.  A labelled bug the deck also fails
    stays a confirmed failure."""
    from devkit.replay import real_bench
    real = tmp_path / "real"
    decks = plant_deck(tmp_path / "decks")
    _labelled(real, "20260801_000001_a_b_05_topk_bitonic", WRONG)
    _labelled(real, "20260801_000002_a_b_05_topk_bitonic", WRONG + b"# DECK_SAYS_PASS\n")
    _labelled(real, "20260801_000003_a_b_05_topk_bitonic", WRONG, verdict_family="failed_or_bug", correct=False)
    _labelled(real, "20260801_000004_a_b_05_topk_bitonic", (CORPUS / "topk_honest.py").read_bytes())
    monkeypatch.setenv("FORENSICS_REPLAY_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "real.jsonl"
    rc = real_bench.main(["--real", str(real), "--out", str(out), "--device", "cpu", "--probes", "check",
                          "--deck", str(decks), "--deck-timeout-s", "120", "--md", str(tmp_path / "real.md")])
    assert rc == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    runs = {e["run_id"][14]: e for e in lines if e["event"] == "run"}
    assert runs["1"]["outcome"] == "not_replayable" and runs["1"]["replay_outcome"] == "fail"
    assert runs["1"]["deck_check"]["status"] == "fail" and "deck's own check fails here too" in runs["1"]["reason"]
    assert runs["1"]["vs_label"] == "cannot tell" and not runs["1"]["false_fail"]
    assert runs["2"]["outcome"] == "fail" and runs["2"]["deck_check"]["status"] == "pass" and runs["2"]["false_fail"]
    assert runs["3"]["outcome"] == "fail" and runs["3"]["vs_label"] == "confirm"
    assert runs["4"]["outcome"] == "pass" and runs["4"]["deck_check"] is None      # no failure, no arbiter
    summary = lines[-1]
    assert summary["false_fails"] == [runs["2"]["run_id"]]
    assert "| deck |" in (tmp_path / "real.md").read_text()
    assert not os.listdir(decks / "benchmarks/hard/problems-h100/05_topk_bitonic").count("solution.py")


def test_out_of_memory_while_replays_share_a_gpu_is_a_rerun_not_a_false_fail():
    """Mechanism: with --per-gpu > 1 an out-of-memory ending is the bench's packing, so the run is
    listed to rerun alone; look-alike: the same ending on a GPU of its own stays a false fail."""
    from devkit.replay.real_bench import summarize
    row = lambda rid, reason, ff: {"run_id": rid, "outcome": "fail", "vs_label": "refute", "reason": reason,  # noqa: E731
                                   "false_fail": ff, "label_verdict": "clean", "findings": [], "partial": False,
                                   "overhead_s": 1.0}
    table = [row("a", "oom in replay: CUDA out of memory. Tried to allocate 4.00 GiB", True),
             row("b", "last_hidden: 987/1024 elements outside atol", True),
             row("c", None, False)]
    s = summarize(table, [], [], shared=True)
    assert s["oom_while_sharing"] == ["a"] and s["rerun"] == ["a"] and s["false_fails"] == ["b"]
    s = summarize(table, ["d"], [], shared=False)
    assert s["oom_while_sharing"] == [] and s["rerun"] == ["d"] and s["false_fails"] == ["a", "b"]


def test_packing_fits_runs_by_memory_and_runs_an_oom_alone():
    """Mechanism: Packing admits a run on a GPU only while the memory estimates of its runs fit
    (two 64 GB sonic replays do not share a 120 GB GPU), a measured peak replaces a smaller estimate,
    and a run marked `alone` waits for an empty GPU and keeps it.  Look-alikes: small runs still
    join a large one while the sum fits; an estimate larger than the GPU still runs on an empty one."""
    from devkit.replay.real_bench import Packing
    run = lambda rid, problem, **kw: dict(run_id=rid, problem=problem, **kw)  # noqa: E731
    p = Packing([0], per_gpu=4, mem_gb=120.0)
    sonic1, sonic2, topk = run("s1", "06_sonic_moe_swiglu"), run("s2", "06_sonic_moe_swiglu"), run("t", "05_topk_bitonic")
    assert p.place([sonic1]) == (sonic1, 0)
    p.start(sonic1, 0)
    assert p.place([sonic2, topk]) == (topk, 0)          # sonic2 does not fit beside sonic1; topk does
    p.start(topk, 0)
    assert sonic1["shared_with"] == ["t"] and topk["shared_with"] == ["s1"]
    assert p.place([sonic2]) is None
    p.end(sonic1, 0, peak_gb=30.0)                         # measured: 30 GB -> 33 beside the old 64
    assert p.estimate(sonic2) == 64.0
    kimi = run("k", "02_kimi_linear_decode")
    p.end(topk, 0, peak_gb=None)
    p.end(run("k0", "02_kimi_linear_decode"), 0, peak_gb=150.0)   # a peak above the GPU: 165 estimated
    assert p.place([kimi]) == (kimi, 0)                    # an empty GPU takes it anyway
    p.start(kimi, 0)
    assert p.place([topk]) is None                         # 165 + 8 > 120
    p.end(kimi, 0, None)
    alone = run("a", "05_topk_bitonic", alone=True)
    p.start(topk, 0)
    assert p.place([alone]) is None                        # waits for an empty GPU
    assert p.place([alone, run("t3", "05_topk_bitonic")]) is None   # and nothing joins while it waits
    p.end(topk, 0, None)
    p.start(alone, 0)
    assert p.place([run("t2", "05_topk_bitonic")]) is None  # and keeps it
    two = Packing([0, 1], per_gpu=1, mem_gb=None)
    a, b = run("a", "x"), run("b", "x")
    two.start(a, 0)
    assert two.place([b]) == (b, 1)


def test_real_bench_reruns_alone_a_run_out_of_memory_beside_another(tmp_path, monkeypatch):
    """The bench's loop: a run whose replay ended out of GPU memory while another shared its GPU is
    written as `run_superseded` and replayed again alone; the table keeps the alone result.  The
    replay is stood in for by a process that reports an OOM the first time only (its own events)."""
    from devkit.replay import real_bench
    real = tmp_path / "real"
    for rid in ("20260801_000001_a_b_05_topk_bitonic", "20260801_000002_a_b_05_topk_bitonic"):
        (real / rid).mkdir(parents=True)
        (real / rid / "solution.py").write_text("x = 1\n")
        (real / rid / "label.json").write_text(json.dumps({"gpu": "h100", "verdict_family": "clean", "correct": True}))
    spawned = []

    def fake_spawn(run, args, gpu, events):
        first = not any(r["run_id"] == run["run_id"] for r, _ in spawned)
        spawned.append((dict(run), gpu))
        reason = "oom in replay: CUDA out of memory" if first and run["run_id"].endswith("2_a_b_05_topk_bitonic") else ""
        row = {"probe": "check", "status": "not_run" if reason else "pass", "detail": reason}
        res = {"event": "result", "rows": [row], "findings": [],
               "info": {"status": row["status"], "error": reason or None, "gpu_peak_gb": {"replay": 1.0}}}
        Path(events).write_text(json.dumps(res) + "\n")
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])

    monkeypatch.setattr(real_bench, "_spawn", fake_spawn)
    monkeypatch.setattr(real_bench, "_kill", lambda proc: proc.wait())
    out = tmp_path / "out.jsonl"
    assert real_bench.main(["--real", str(real), "--out", str(out), "--device", "cpu", "--probes", "check",
                            "--jobs", "1", "--gpu", "h100"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    # on the CPU the bench runs one at a time: nothing shared, so the OOM is the run's own result
    assert [x["event"] for x in lines] == ["run", "run", "summary"] and lines[-1]["rerun_alone"] == []
    p = real_bench.Packing([0], per_gpu=2, mem_gb=None)
    monkeypatch.setattr(real_bench, "Packing", lambda *a, **kw: p)
    spawned.clear()
    out.unlink()
    assert real_bench.main(["--real", str(real), "--out", str(out), "--device", "cpu", "--probes", "check",
                            "--jobs", "1", "--gpu", "h100"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["event"] for x in lines].count("run_superseded") == 1, lines
    s = lines[-1]
    assert s["rerun_alone"] == ["20260801_000002_a_b_05_topk_bitonic"] and s["oom_while_sharing"] == [], s
    assert [r["alone"] for r, _ in spawned if r.get("alone")] == [True] and s["outcome"] == {"pass": 2}, s


def test_longest_first_orders_by_the_latest_earlier_wall_time(tmp_path):
    """Runs with no earlier time go first, then the longest; a later row of the same run wins and a
    broken line is skipped."""
    from devkit.replay.real_bench import longest_first
    f = tmp_path / "a.jsonl"
    f.write_text("\n".join([json.dumps({"event": "run", "run_id": "a", "wall_s": 300}),
                            json.dumps({"event": "run", "run_id": "b", "wall_s": 10}), "{broken",
                            json.dumps({"event": "run", "run_id": "a", "wall_s": 5}),
                            json.dumps({"event": "summary", "run_id": "b", "wall_s": 999})]))
    runs = [{"run_id": x} for x in ("a", "b", "c")]
    assert [r["run_id"] for r in longest_first(runs, [f, tmp_path / "missing.jsonl"])] == ["c", "b", "a"]


def test_merge_keeps_each_runs_latest_finished_row(tmp_path):
    """A later output replaces a run's row, except by a row that decided nothing (cut short by the
    time budget, a timeout at a shorter run limit) over a verdict: a run only ever cut keeps its cut
    row and is listed under cut_by_budget.  Look-alikes that do replace: a later verdict (pass over
    fail), a later not_replayable (newer code naming what the machine lacks), a timeout over a
    not_replayable (it got further)."""
    from devkit.replay.real_bench import merge
    row = lambda rid, outcome, reason="": {"event": "run", "run_id": rid, "outcome": outcome, "reason": reason,  # noqa: E731
                                           "vs_label": "confirm", "false_fail": outcome == "fail",
                                           "label_verdict": "clean", "findings": [], "partial": False,
                                           "overhead_s": 1.0, "shared_with": []}
    cut = "killed (cut short by --time-budget-s: run it again)"
    a, b = tmp_path / "r1.jsonl", tmp_path / "r2.jsonl"
    a.write_text("\n".join(json.dumps(x) for x in (row("x", "pass"), row("y", "fail"), row("z", "timeout", cut),
                                                    row("w", "fail"), row("v", "timeout"),
                                                    row("u", "not_replayable"), row("t", "pass"))))
    b.write_text("\n".join([json.dumps(row("x", "timeout", cut)), json.dumps(row("y", "pass")), "{bad",
                            json.dumps(row("z", "timeout", cut)), json.dumps(row("w", "timeout")),
                            json.dumps(row("v", "pass")), json.dumps(row("u", "timeout")),
                            json.dumps(row("t", "not_replayable")), json.dumps({"event": "summary"})]))
    rows, s = merge([a, b])
    got = {r["run_id"]: (r["outcome"], r["source"]) for r in rows}
    assert got == {"x": ("pass", "r1.jsonl"), "y": ("pass", "r2.jsonl"), "z": ("timeout", "r2.jsonl"),
                   "w": ("fail", "r1.jsonl"), "v": ("pass", "r2.jsonl"),
                   "u": ("timeout", "r2.jsonl"), "t": ("not_replayable", "r2.jsonl")}
    assert s["not_replacing"] == [("x", "timeout", "r2.jsonl"), ("w", "timeout", "r2.jsonl")]
    assert s["cut_by_budget"] == ["z"] and s["rerun"] == ["z"] and s["false_fails"] == ["w"] and s["merged_from"] == ["r1.jsonl", "r2.jsonl"]


def test_longest_first_gives_an_unseen_run_its_problems_estimate(tmp_path):
    """A run not in the earlier outputs takes the median time of its problem's runs there (a new GLM
    run is long, a new topk run short); a run of a problem never seen still goes first."""
    from devkit.replay.real_bench import longest_first
    f = tmp_path / "a.jsonl"
    rows = [("g1", "glm", 500), ("g2", "glm", 400), ("g3", "glm", 450), ("t1", "topk", 20), ("k1", "kimi", 100)]
    f.write_text("\n".join(json.dumps({"event": "run", "run_id": r, "problem": p, "wall_s": w}) for r, p, w in rows))
    runs = [{"run_id": "g-new", "problem": "glm"}, {"run_id": "t-new", "problem": "topk"},
            {"run_id": "k1", "problem": "kimi"}, {"run_id": "n-new", "problem": "nsa"}, {"run_id": "t1", "problem": "topk"}]
    assert [r["run_id"] for r in longest_first(runs, [f])] == ["n-new", "g-new", "k1", "t-new", "t1"]


def test_merge_lists_never_started_runs_under_rerun(tmp_path):
    """A run a bench's summary lists as not started, and (with the runs `--real` discovers) a run no
    output has a row of, are `not_started` and under `rerun`; one started in a later output is not."""
    from devkit.replay.real_bench import merge
    row = lambda rid: {"event": "run", "run_id": rid, "outcome": "pass", "reason": "", "vs_label": "confirm",  # noqa: E731
                       "false_fail": False, "label_verdict": "clean", "findings": [], "partial": False,
                       "overhead_s": 1.0, "shared_with": []}
    a, b = tmp_path / "r1.jsonl", tmp_path / "r2.jsonl"
    a.write_text("\n".join(json.dumps(x) for x in (row("x"), {"event": "summary", "not_started": ["y", "z"]})))
    b.write_text("\n".join(json.dumps(x) for x in (row("y"), {"event": "summary", "not_started": []})))
    _, s = merge([a, b])
    assert s["not_started"] == ["z"] and s["rerun"] == ["z"]
    _, s = merge([a, b], expected=["x", "y", "z", "w"])
    assert s["not_started"] == ["w", "z"] and s["rerun"] == ["w", "z"]
