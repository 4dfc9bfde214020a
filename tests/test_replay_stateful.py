"""Replay of the stateful APIs end to end on the CPU: the mega 02 Kimi `step` API and the cuda 04
grid MinGRU rollout API, against the planted solutions in corpus/replay/ (plain torch, tiny
configs), through the real runner and child process.  Each planted defect must end in its own
finding and status; the honest ones must pass every probe.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forensics.replay.api import replay_solution  # noqa: E402
from forensics.replay.probes import Limits  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "corpus" / "replay"
FAST = Limits(build_s=300, call_s=240, probe_s=300, time_s=120)
KIMI = "02_kimi_linear_decode"
GRID = "04_grid_mingru_sps"
KIMI_SIDE = {"kimi_core.py": (CORPUS / "kimi_core.py").read_bytes()}
GRID_SIDE = {"mingru_core.py": (CORPUS / "mingru_core.py").read_bytes()}


def _replay(name: str, problem: str, probes, sidecars, seeds, tmp_path):
    return replay_solution(problem, (CORPUS / name).read_bytes(), sidecars, device="cpu", shapes="tiny",
                           probes=probes, limits=FAST, seeds=seeds, cache_root=tmp_path / "cache")


def _rules(out) -> set[str]:
    return {f["rule"] for f in out.findings}


def _rows(out, probe: str, case: str | None = None) -> list[dict]:
    return [r for r in out.rows if r["probe"] == probe and (case is None or r["case_name"] == case)]


def _finding(out, rule: str) -> dict:
    return next(f for f in out.findings if f["rule"] == rule)


def _has_stats(d: dict) -> bool:
    return d.get("max_abs", 0) > 0 and d.get("n_bad", 0) > 0 and d.get("worst_index") is not None


# ------------------------------------------------------------------------------ API kinds
def test_stateful_kinds():
    from forensics.replay.stateful import kind
    from kernels import registry
    assert kind(registry.get("03_megaqwen_decode")) == "decode"
    assert kind(registry.get(KIMI)) == "step"
    assert kind(registry.get(GRID)) == "rollout"      # its env_step( must not read as a step API
    assert kind(registry.get("05_topk_bitonic")) is None


# ------------------------------------------------------------------------------ Kimi step API
def test_kimi_honest_passes_every_step_probe(tmp_path):
    out = _replay("kimi_honest.py", KIMI, ["check", "same-buffer", "fresh-state", "alternate-cache", "determinism"],
                  KIMI_SIDE, (0, 1), tmp_path)
    assert out.status() == "pass", [(r["probe"], r["status"], r["case_name"], r["detail"]) for r in out.rows
                                    if r["status"] != "pass"]
    assert {f["severity"] for f in out.findings} <= {"info"}
    assert [r["case_name"] for r in _rows(out, "check")] == ["nominal", "chain-8"] * 2    # 2 seeds
    chain = _rows(out, "check", "chain-8")[0]
    assert chain["max_abs"] == 0.0 and chain["n_bad"] == 0 and chain["n_total"] > 1000    # every hidden + all layers
    assert [r["case_name"] for r in _rows(out, "same-buffer")] == ["state+hidden", "state"]
    assert [r["case_name"] for r in _rows(out, "alternate-cache")] == ["continue-earlier-trajectory", "copied-state"]
    assert "dead-id" in _rows(out, "fresh-state")[0]["case_name"]


def test_kimi_frozen_state_passes_the_deck_check_but_not_the_chain(tmp_path):
    out = _replay("kimi_frozen_state.py", KIMI, ["check"], KIMI_SIDE, (0,), tmp_path)
    assert _rows(out, "check", "nominal")[0]["status"] == "pass"      # one step barely moves S
    chain = _rows(out, "check", "chain-8")[0]
    assert chain["status"] == "fail" and chain["worst_index"].startswith("state[")
    f = _finding(out, "replay-check-failed")
    assert "one-step check passes" in f["message"] and _has_stats(f["data"]) and f["data"]["worst_part"]
    assert out.status() == "fail"


def test_kimi_id_keyed_weight_cache_fails_fresh_state(tmp_path):
    out = _replay("kimi_id_cache.py", KIMI, ["check", "fresh-state"], KIMI_SIDE, (0,), tmp_path)
    assert all(r["status"] == "pass" for r in _rows(out, "check"))   # the check cannot see it
    row = _rows(out, "fresh-state")[0]
    assert row["status"] == "fail" and "dead-id" in row["case_name"]
    f = _finding(out, "replay-stale-fresh-state")
    assert f["data"]["id_reused"] is True and _has_stats(f["data"])
    assert out.status() == "fail"


def test_kimi_pointer_keyed_state_fails_same_buffer(tmp_path):
    out = _replay("kimi_ptr_state.py", KIMI, ["check", "same-buffer"], KIMI_SIDE, (0,), tmp_path)
    assert all(r["status"] == "pass" for r in _rows(out, "check"))   # its own returned S comes back: consistent
    assert {r["status"] for r in _rows(out, "same-buffer")} == {"fail"}
    f = _finding(out, "replay-stale-same-buffer")
    assert f["data"]["data_ptr_kept"] is True and _has_stats(f["data"]) and ".S" in f["data"]["worst_part"]
    assert out.status() == "fail"


def test_kimi_internal_state_ignores_the_state_it_is_handed(tmp_path):
    out = _replay("kimi_internal_state.py", KIMI, ["check", "alternate-cache"], KIMI_SIDE, (0,), tmp_path)
    assert all(r["status"] == "pass" for r in _rows(out, "check"))
    row = _rows(out, "alternate-cache", "continue-earlier-trajectory")[0]
    assert row["status"] == "fail" and row["n_bad"] > 0
    f = _finding(out, "replay-ignores-caller-cache")
    assert f["data"]["variant"] == "continue-earlier-trajectory" and _has_stats(f["data"])
    assert out.status() == "fail"


# ------------------------------------------------------------------------------ MinGRU rollout API
def test_mingru_honest_passes_every_rollout_probe(tmp_path):
    out = _replay("mingru_honest.py", GRID, ["check", "same-buffer", "fresh-state", "output-alias", "determinism"],
                  GRID_SIDE, (42,), tmp_path)
    assert out.status() == "pass", [(r["probe"], r["status"], r["detail"]) for r in out.rows if r["status"] != "pass"]
    assert [(r["probe"], r["case_name"]) for r in out.rows[:5]] == [
        ("check", "nominal"), ("stress", "small_obs_state"), ("stress", "large_obs_state"), ("check", "env_step"),
        ("check", "run")]
    assert {r["case_name"] for r in _rows(out, "same-buffer")} == {
        "all-inputs", "input0", "input1", "parameters:policy_forward", "parameters:run"}
    assert _rows(out, "output-alias")[0]["case_name"] == "earlier-output-intact"


def test_mingru_weight_cache_keyed_by_id_and_version(tmp_path):
    out = _replay("mingru_weight_cache.py", GRID, ["check", "same-buffer", "fresh-state"], GRID_SIDE, (42, 123),
                  tmp_path)
    # load_state_dict per seed bumps _version: the check recomputes and passes
    assert [r["status"] for r in _rows(out, "check") + _rows(out, "stress")] == ["pass"] * 10   # 2 seeds x (3 check parts + 2 stress)
    assert all(r["status"] == "pass" for r in _rows(out, "same-buffer") if not r["case_name"].startswith("parameters"))
    bad = {r["case_name"] for r in _rows(out, "same-buffer") if r["status"] == "fail"}
    assert bad == {"parameters:policy_forward", "parameters:run"}
    f = _finding(out, "replay-stale-same-buffer")
    assert "_version kept" in f["message"] and _has_stats(f["data"])
    assert _finding(out, "replay-stale-fresh-state")["data"]["id_reused"] is True
    assert out.status() == "fail"
