"""A replay's overhead (issue 40, item 4): where its wall time went (the account, measured on the
replay's side), and the reference computed once per replay where probes ask for the same output.

CPU, tiny shapes, the planted solutions of corpus/replay/ and two written here."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forensics.replay.account import KINDS, SOLUTION_SHARE, line  # noqa: E402
from forensics.replay.api import replay_solution  # noqa: E402
from forensics.replay.outcome import Limits  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "corpus" / "replay"
FAST = Limits(build_s=300, call_s=240, probe_s=300, time_s=120)
KIMI_SIDE = {"kimi_core.py": (CORPUS / "kimi_core.py").read_bytes()}

#: a top-k whose first forward waits LAZY_S (a lazy build: an extension compiled in the first call)
LAZY_S = 1.5
LAZY = f"""import time
import torch
import torch.nn as nn

_built = []


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1))

    def forward(self, x):
        if not _built:
            time.sleep({LAZY_S})
            _built.append(1)
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
""".encode()


def _replay(sol: bytes, problem="05_topk_bitonic", probes=None, seeds=(42,), tmp_path=None, side=None, **kw):
    return replay_solution(problem, sol, side, device="cpu", shapes="tiny", probes=probes, limits=FAST, seeds=seeds,
                           cache_root=tmp_path / "cache", **kw)


def _digest(x) -> str:
    from forensics.replay.values import tensors
    h = hashlib.sha256()
    for t in tensors(x):
        t = t.detach().cpu().contiguous()
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _count_references(monkeypatch) -> dict:
    """Every reference output the replay computes (Oracle._reference: the forward itself), as
    (digest of the model's weights, digest of its inputs, whether a probe had lent the model other
    weights), and every reference model built."""
    from forensics.replay.oracle import Oracle
    seen: dict = {"computed": [], "models": 0}
    ref_fn, build_fn = Oracle._reference, Oracle._build_model

    def counting_reference(self, model, inputs):
        lent = id(model) in self._lent   # other weights a probe lent it (same-buffer's writes): its own outputs
        seen["computed"].append((_digest(list(model.state_dict().values())) if hasattr(model, "state_dict") else "",
                                 _digest(inputs), lent))
        return ref_fn(self, model, inputs)

    def counting_build(self, shape):
        seen["models"] += 1
        return build_fn(self, shape)
    monkeypatch.setattr(Oracle, "_reference", counting_reference)
    monkeypatch.setattr(Oracle, "_build_model", counting_build)
    return seen


# ------------------------------------------------------------------------------ the account
def test_the_account_adds_up_and_counts_a_lazy_build_once(tmp_path):
    """Every second of the replay is charged once: the kinds add up to the total, the overhead is the
    total less the solution's share, and the first call of the child (a lazy build, LAZY_S in its
    first forward) is build, never the solution's calls too.  The devkit bench reads the same
    account: its build_s holds the wait, its solution_s does not (7 rows of the H100 bench read 0.0
    overhead when the first call was counted as both)."""
    from devkit.replay import real_bench
    out = _replay(LAZY, probes=["check", "determinism"], tmp_path=tmp_path)
    assert out.status() == "pass", out.rows
    a = out.info["account"]
    total = a["total_s"]
    assert abs(sum(a[f"{k}_s"] for k in KINDS) - total) < 0.01
    share = sum(a[f"{k}_s"] for k in SOLUTION_SHARE)
    assert abs(a["overhead_s"] - (total - share)) < 0.01
    assert a["build_s"] >= LAZY_S and a["solution_s"] < LAZY_S
    assert a["solution_in_child_s"] <= a["solution_s"]
    assert set(a["probes"]) >= {"(start)", "check", "determinism"}
    assert a["probes"]["check"]["build_s"] >= LAZY_S and a["probes"]["determinism"].get("build_s", 0.0) < 0.5
    assert a["requests"]["call"]["n"] >= 4 and "hello" in a["requests"]
    assert line(a).startswith(f"account: total {total} s")
    run = {"run_id": "20260801_000001_a_b_05_topk_bitonic", "problem": "05_topk_bitonic",
           "label": {"verdict_family": "clean", "correct": True}}
    row = real_bench.summarize_run(run, [{"event": "result", "info": out.info, "rows": out.rows,
                                          "findings": out.findings}], total + 1.0, None)
    assert row["build_s"] >= LAZY_S and row["solution_s"] < LAZY_S
    assert row["overhead_s"] > 0
    assert abs(row["replay_s"] - row["solution_s"] - row["build_s"] - row["overhead_s"]) <= 0.02


@pytest.fixture(scope="module")
def replayed_store(tmp_path_factory):
    """A store with one run replayed on the CPU by `forensics.replay.analyze` (the scan's path)."""
    pytest.importorskip("duckdb")
    import json

    from forensics.replay import analyze
    from forensics.report.jsonout import replay_accounts
    from forensics.store.db import Store
    from forensics.store.ingest import ingest_path
    tmp = tmp_path_factory.mktemp("replayed")
    run = tmp / "outputs" / "runs" / "20260810_101010_claude_opus_05_topk_bitonic"
    run.mkdir(parents=True)
    (run / "solution.py").write_bytes((CORPUS / "topk_honest.py").read_bytes())
    (run / "result.json").write_text(json.dumps({"problem": "05_topk_bitonic", "has_solution": True, "correct": True}))
    store = Store(str(tmp / "a.duckdb"))
    ingest_path(store, tmp / "outputs")
    rid = store.query("select run_id from runs")[0]["run_id"]
    assert replay_accounts(store, [rid]) == {}
    analyze(store, probes=["check", "nan-poison"], device="cpu", limits=FAST)
    return store, rid, tmp


def test_the_account_is_in_the_store_and_the_scan_json(replayed_store):
    """`forensics scan --replay`'s rows: the replay summary row's data holds the account, and scan.json
    gives it per replayed run (`replay_account`)."""
    from forensics.report.jsonout import replay_accounts, scan_json
    store, rid, _ = replayed_store
    acc = replay_accounts(store, [rid])[rid]
    assert acc["total_s"] > 0 and acc["overhead_s"] <= acc["total_s"] and acc["counts"]["reference_computed"] >= 1
    assert scan_json(store, [rid], {})["runs"][0]["replay_account"] == acc


def test_the_run_page_shows_where_the_replay_time_went(replayed_store):
    """The HTML report's run page holds the replay's account (issue 40): the total, the solution's share
    and the overhead, every kind's seconds, the probes by overhead, the reference computed once and
    reused (nan-poison asks for the check's first output again)."""
    import html as H
    import re

    from forensics.report import write_reports
    from forensics.report.data import replay_info
    from forensics.report.jsonout import replay_accounts
    store, rid, tmp = replayed_store
    acc = replay_accounts(store, [rid])[rid]
    assert replay_info(store, rid)["account"] == acc
    write_reports(store, tmp / "report", [rid], plots=False)
    page = (tmp / "report" / "runs" / f"{rid}.html").read_text()
    assert 'id="replay-account"' in page
    summary = re.search(r'<p id="account-summary">(.*?)</p>', page, re.S).group(1)
    assert f"took {acc['total_s']:.4g} s" in H.unescape(summary)
    assert f"overhead {acc['overhead_s']:.4g} s" in H.unescape(summary)
    kinds = re.search(r'<table[^>]*id="account-kinds".*?</table>', page, re.S).group(0)
    assert len(re.findall(r"<tr><td>", kinds)) == len(KINDS)
    for k in ("build", "reference", "solution", "exchange"):
        assert f'<td data-sort="{acc[k + "_s"]}">' in kinds or f'<td data-sort="{float(acc[k + "_s"])}">' in kinds, k
    probes = re.search(r'<table[^>]*id="account-probes".*?</table>', page, re.S).group(0)
    assert ">check<" in probes and ">nan-poison<" in probes and ">(start)<" in probes
    counts = H.unescape(re.search(r'<p id="account-counts">(.*?)</p>', page, re.S).group(1))
    c = acc["counts"]
    assert c["reference_reused"] >= 1
    assert f"reference calls {c['reference_computed']} computed, {c['reference_reused']} reused" in counts


def test_the_account_on_the_page_is_escaped():
    """What the account holds is escaped on the page (a probe label, a request op, a count)."""
    from forensics.report.html import replay_account_html
    bad = "<script>alert(1)</script>"
    out = replay_account_html({"total_s": 2.0, "solution_s": 1.0, "overhead_s": 1.0, "reference_s": "<b>x</b>",
                               "probes": {bad: {"s": 1.0, "overhead_s": 0.5, "reference_s": 0.5}, "check": bad},
                               "counts": {"reference_computed": bad}, "requests": {bad: {"n": bad, "s": 1}}})
    assert "<script>" not in out and "<b>x</b>" not in out
    assert out.count("&lt;script&gt;") >= 3
    assert "50.0 %" in out     # solution 1.0 of 2.0 (a non-number reads 0)


# ------------------------------------------------------------------------------ reuse
def test_each_reference_output_is_computed_once_per_replay(tmp_path, monkeypatch):
    """Every probe of a module API on the CPU: one reference model per shape for the whole replay
    (each probe built its own: 12 for one shape), and no reference output computed twice for the
    same weights and inputs (the check's first inputs were computed again by fresh-inputs and
    nan-poison, the benchmark seed's by timed-outputs and distribution, one output only for its
    dtype).  The rows are those of the replay without reuse, which still computes more."""
    from forensics.kernels.registry import ProblemSpec
    from forensics.replay.values import shape_key
    seen = _count_references(monkeypatch)
    made: list = []
    mk = ProblemSpec.make_inputs

    def counting_inputs(self, shape, seed, *a, **kw):
        made.append((shape_key(shape), seed))
        return mk(self, shape, seed, *a, **kw)
    monkeypatch.setattr(ProblemSpec, "make_inputs", counting_inputs)
    out = _replay((CORPUS / "topk_honest.py").read_bytes(), tmp_path=tmp_path)
    assert out.status() == "pass"
    assert made and len(made) == len(set(made)), "an input set generated twice"   # once per (shape, seed)
    computed, models = list(seen["computed"]), seen["models"]
    assert models == 1
    own = [k for k in computed if not k[2]]
    dupes = {k for k in own if own.count(k) > 1}
    assert not dupes, f"{len(dupes)} reference output(s) computed more than once"
    c = out.info["account"]["counts"]
    assert c["reference_computed"] == len(computed) and c["reference_reused"] >= 4
    seen["computed"].clear()
    seen["models"] = 0
    before = _replay((CORPUS / "topk_honest.py").read_bytes(), tmp_path=tmp_path, reuse=False)
    assert before.status() == "pass"
    assert len(seen["computed"]) > len(computed) and seen["models"] > models
    assert [(r["probe"], r["status"], r["case_name"]) for r in before.rows] == \
        [(r["probe"], r["status"], r["case_name"]) for r in out.rows]


def test_a_probe_that_lends_the_shared_reference_other_weights_gives_them_back(tmp_path):
    """same-buffer (its parameter writes) and fresh-state (other weights) run the shared reference with
    weights of their own: after them it holds its seeded weights again, bit for bit, and a later probe
    on the check's first inputs gets the check's own output back."""
    from forensics.kernels import registry
    from forensics.replay.oracle import Oracle
    from forensics.replay.record import Record
    from forensics.replay.values import shape_key
    from forensics.replay.oracle import SHARED_INPUTS
    SHARED_INPUTS.clear()      # an earlier test's replay of the same problem would lend its inputs
    o = Oracle(registry.get("01_fp8_gemm"), Record(None, "cpu"), device="cpu", shapes="tiny")
    shape = o.check_shapes()[0]
    ref = o.ref_model(shape)
    before = {k: v.clone() for k, v in ref.state_dict().items()}
    x = o.make_inputs(shape, o.seeds[0])
    key = o.ref_key(shape, o.seeds[0])
    y0 = o.reference(ref, x, key=key)
    other = {k: torch.randn_like(v.float()).to(v.dtype) for k, v in before.items() if v.is_floating_point()}
    with pytest.raises(RuntimeError):
        with o.other_weights(ref, other):
            y1 = o.reference(ref, x, key=key)      # not the kept output: other weights
            assert not torch.equal(y1, y0)
            raise RuntimeError("a probe failing inside")
    assert all(torch.equal(before[k], v) for k, v in ref.state_dict().items())
    assert o.reference(ref, x, key=key) is y0
    assert o.ref_model(shape) is ref and shape_key(shape) == key[0]
    assert o.rec.account.counts == {"inputs_generated": 1, "reference_computed": 2, "reference_reused": 1,
                                    "reference_model_built": 1, "reference_model_reused": 1}


def test_the_kimi_chains_from_the_first_seed_are_computed_once(tmp_path, monkeypatch):
    """mega 02 `step`: the check's step and state-drift's chain start from the same fed state; the
    chain's steps are computed once (the check's one step was computed again as the chain's first)."""
    seen = _count_references(monkeypatch)
    out = _replay((CORPUS / "kimi_honest.py").read_bytes(), "02_kimi_linear_decode", ["check", "state-drift"], (0,),
                  tmp_path, side=KIMI_SIDE)
    assert out.status() == "pass", [(r["probe"], r["status"], r["detail"]) for r in out.rows]
    own = [k for k in seen["computed"] if not k[2]]
    assert not {k for k in own if own.count(k) > 1}
    assert out.info["account"]["counts"]["reference_reused"] >= 1


def test_the_cli_prints_the_account_in_one_line(tmp_path):
    """`forensics replay RUN_DIR` (text): one line says where the time went; --no-reuse runs the old path."""
    import json
    import os
    import subprocess
    import sys
    run = tmp_path / "runs" / "20260801_101010_claude_opus_05_topk_bitonic"
    run.mkdir(parents=True)
    (run / "solution.py").write_bytes((CORPUS / "topk_honest.py").read_bytes())
    (run / "result.json").write_text(json.dumps({"problem": "05_topk_bitonic", "correct": True}))
    env = dict(os.environ, PYTHONPATH=str(REPO), FORENSICS_REPLAY_CACHE=str(tmp_path / "c"))
    for extra in ([], ["--no-reuse"]):
        p = subprocess.run([sys.executable, "-m", "forensics.cli", "replay", str(run), "--device", "cpu", "--shapes",
                            "tiny", "--probe", "check", "--probe", "nan-poison", *extra], cwd=str(REPO), env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        acct = [ln for ln in p.stdout.splitlines() if ln.startswith("  account: total ")]
        assert len(acct) == 1 and " overhead " in acct[0] and "reference calls " in acct[0]
        # nan-poison asks for the check's first output again: kept with the reuse, computed again without
        assert (" 0 reused" in acct[0]) == bool(extra), acct[0]


# ------------------------------------------------------------------------------ re-seeded references
def _reset(model, seed):
    model.reset_parameters(seed)


@pytest.mark.parametrize("problem", ["04_grid_mingru_sps", "03_megaqwen_decode"])
def test_a_seeded_reference_has_each_seeds_weights_bit_for_bit(problem):
    """`Session.seeded_reference` (decode, rollout): one model per shape, re-seeded; the weights it has
    for a seed are those of a new model reset with that seed, whatever happened to it in between (another
    seed, an in-place change), and each seed's are drawn once."""
    from forensics.kernels import registry
    from forensics.replay.oracle import Oracle
    from forensics.replay.record import Record
    spec = registry.get(problem)
    o = Oracle(spec, Record(None, "cpu"), device="cpu", shapes="tiny")
    shape = o.check_shapes()[0]

    def fresh(seed):
        m = spec.build_reference(shape, "cpu")
        m.reset_parameters(seed)
        return {k: v.clone() for k, v in m.state_dict().items()}

    def equal(m, want):
        return all(torch.equal(v, want[k]) for k, v in m.state_dict().items())
    a = o.seeded_reference(shape, 42, _reset)
    assert equal(a, fresh(42))
    b = o.seeded_reference(shape, 123, _reset)
    assert b is a and equal(b, fresh(123))
    with torch.no_grad():
        next(iter(b.parameters())).mul_(3.0)        # a probe's in-place change (a stress scaling left behind)
    c = o.seeded_reference(shape, 42, _reset)
    assert c is a and equal(c, fresh(42))
    assert o.rec.account.counts == {"reference_model_built": 1, "reference_model_reused": 2,
                                    "reference_weights_drawn": 2, "reference_weights_reused": 1}
    no = Oracle(spec, Record(None, "cpu"), device="cpu", shapes="tiny", reuse=False)
    d = no.seeded_reference(shape, 42, _reset)
    assert d is not no.seeded_reference(shape, 42, _reset) and equal(d, fresh(42))


def _count_builds(monkeypatch) -> list:
    from forensics.kernels.registry import ProblemSpec
    from forensics.replay.values import shape_key
    built: list = []
    build = ProblemSpec.build_reference

    def counting(self, shape, *a, **kw):
        built.append(shape_key(shape))
        return build(self, shape, *a, **kw)
    monkeypatch.setattr(ProblemSpec, "build_reference", counting)
    return built


@pytest.mark.parametrize("problem,sol,side,probes", [
    ("04_grid_mingru_sps", "mingru_honest.py", "mingru_core.py", None),
    ("03_megaqwen_decode", "mq_honest.py", "mq_core.py", ["check", "fresh-state", "alternate-cache", "determinism"])])
def test_the_decode_and_rollout_references_are_built_once_per_shape(tmp_path, monkeypatch, problem, sol, side, probes):
    """The stateful APIs that re-seed their reference per seed (cuda 03 decode, cuda 04 rollout): every
    probe built its own reference model (megaqwen 8 a replay, mingru 9); now the replay builds one per
    shape and draws each seed's weights once, with the same rows as each probe building its own."""
    built = _count_builds(monkeypatch)
    sidecars = {side: (CORPUS / side).read_bytes()}
    out = _replay((CORPUS / sol).read_bytes(), problem, probes, (42, 123), tmp_path, side=sidecars)
    assert out.status() == "pass", [(r["probe"], r["status"], r["detail"]) for r in out.rows if r["status"] != "pass"]
    assert built and len(built) == len(set(built)), built      # once per shape
    c = out.info["account"]["counts"]
    assert c["reference_model_built"] == len(built) and c["reference_weights_reused"] >= 3
    n_shared = len(built)
    built.clear()
    before = _replay((CORPUS / sol).read_bytes(), problem, probes, (42, 123), tmp_path, side=sidecars, reuse=False)
    assert before.status() == "pass"
    assert len(built) > n_shared + 2
    assert [(r["probe"], r["status"], r["case_name"], r["seed"]) for r in before.rows] == \
        [(r["probe"], r["status"], r["case_name"], r["seed"]) for r in out.rows]


def test_the_decks_inputs_are_drawn_once_per_process_and_every_replay_gets_its_own_copy(monkeypatch):
    """H100: paged attention's replays spent 36 of their 41 s of overhead drawing the same KV caches
    on the CPU, run after run of one scan.  A second replay (a new Oracle) of the same problem, shape
    and seed takes the first one's inputs (`inputs_shared`), equal to a fresh draw, as clones: what a
    replay does to them in place reaches neither the kept set nor the next replay.  Another seed is
    drawn; a cap of 0 keeps nothing; beyond the cap the least recently used set goes."""
    from forensics.kernels import registry
    from forensics.replay.oracle import SHARED_INPUTS, Oracle, SharedInputs
    from forensics.replay.record import Record
    spec = registry.get("05_topk_bitonic")
    SHARED_INPUTS.clear()
    first = Oracle(spec, Record(None, "cpu"), device="cpu", shapes="tiny")
    shape, seed = first.check_shapes()[0], first.seeds[0]
    a = first.make_inputs(shape, seed)
    a[0].zero_()                                                    # a replay writing into its inputs
    second = Oracle(spec, Record(None, "cpu"), device="cpu", shapes="tiny")
    b = second.make_inputs(shape, seed)
    fresh = spec.make_inputs(shape, seed, "cpu")
    assert all(torch.equal(x, y) for x, y in zip(b, fresh)) and not torch.equal(a[0], b[0])
    assert first.rec.account.counts == {"inputs_generated": 1}
    assert second.rec.account.counts == {"inputs_shared": 1}
    other = [s for s in second.seeds if s != seed][:1] or [seed + 1]
    second.make_inputs(shape, other[0])
    assert second.rec.account.counts == {"inputs_shared": 1, "inputs_generated": 1}
    # off: a cap of 0 keeps nothing
    SHARED_INPUTS.clear()
    monkeypatch.setenv("FORENSICS_REPLAY_INPUT_CACHE_MB", "0")
    Oracle(spec, Record(None, "cpu"), device="cpu", shapes="tiny").make_inputs(shape, seed)
    third = Oracle(spec, Record(None, "cpu"), device="cpu", shapes="tiny")
    third.make_inputs(shape, seed)
    assert third.rec.account.counts == {"inputs_generated": 1}
    # bounded: sets of 1 KiB under a 2.5 KiB cap keep the two used last
    monkeypatch.setenv("FORENSICS_REPLAY_INPUT_CACHE_MB", str(2.5 / 1024))
    cache = SharedInputs()
    for i in range(4):
        cache.put(("k", i), [torch.zeros(256)])
    assert [k[1] for k in cache._sets] == [2, 3]
    assert cache.get(("k", 0)) is None and cache.get(("k", 3)) is not None
