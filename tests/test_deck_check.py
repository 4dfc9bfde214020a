"""devkit.replay.deck_check and real_bench --deck: the deck's own check.py as the arbiter of an
official replay failure.  The decks here are planted (a check of our own in the deck's layout:
problems-h100/<p>/check.py finding src/ two levels up, printing PASS or FAIL: ...), so the tests
say what the arbiter does with each answer, not what a real deck says."""

from __future__ import annotations

import json
import os
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
