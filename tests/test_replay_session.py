"""The replay's session on its own (forensics/replay/session.py): a probe's view of one solution,
driven here without the driver, on the CPU with tiny shapes.  What crosses to the child is the
session's named requests; what judges stays in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forensics.kernels import registry  # noqa: E402
from forensics.replay.outcome import Limits  # noqa: E402
from forensics.replay.runner import Scratch  # noqa: E402
from forensics.replay.session import RUNNER_ONLY, Session, same  # noqa: E402
from forensics.vocab import CHECK  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "corpus" / "replay"
FAST = Limits(build_s=300, call_s=240, probe_s=300, time_s=120)
TOPK = "05_topk_bitonic"


def _session(tmp_path, name: str) -> tuple[Session, Scratch]:
    from forensics.replay.api import TINY_SHAPES, reference_file
    spec = registry.get(TOPK)
    scratch = Scratch((CORPUS / name).read_bytes(), reference_src=reference_file(spec), cache_root=tmp_path / "cache",
                      work_root=tmp_path)
    return Session(spec, scratch, device="cpu", shapes="tiny", limits=FAST, seeds=(42,),
                   shape_list=TINY_SHAPES.get(spec.name)), scratch


def test_a_probe_builds_calls_fetches_and_judges_through_the_session(tmp_path):
    """The honest top-k through the session's requests: the output matches the reference computed in
    this process; a snapshot of the returned slot comes back equal; the watched inputs are untouched."""
    s, scratch = _session(tmp_path, "topk_honest.py")
    try:
        ch = s.child()
        assert ch is not None and s.alive(ch) and "Model" in s.solution_attrs
        shape = s.probe_shape()
        ref = s.ref_model(shape)
        assert s.new_model(ch, "m", shape, s.state_file(shape, ref)).ok
        inputs = s.make_inputs(shape, 42)
        pr, args = s.put(ch, inputs, prefix="x")
        assert pr.ok and [a for a in args if "slot" in a]
        r, payload = s.call(ch, "m", args, out_slot="o")
        assert r.ok and payload["inputs_mutated"] == []
        res = s.compare(s.reference(ref, inputs), s.sol_out(payload), inputs=inputs)
        assert res["ok"], res
        snap = s.snapshot(ch, ["o"])
        assert snap.ok
        again = s.fetch(snap)["o"]
        assert not Path(snap.out_path).exists()          # fetched once, the file is gone
        assert same(payload["out"], again)
        assert s.owned_changed([a["slot"] for a in args if "slot" in a]) == []
        s.row(CHECK, "pass", shape, 42, "nominal", res)
        assert [r["status"] for r in s.rows(CHECK)] == ["pass"]
        assert s.delete(ch, objs=["m"], slots=["o"]).ok
    finally:
        s.close()
        scratch.cleanup()


def test_a_solution_writing_its_input_is_seen_from_the_memory_the_session_holds(tmp_path):
    """topk_mutates_input sorts its input in place: the session's call reports it (replay-input-mutated),
    judged from the memory this process holds, not from the child's account."""
    s, scratch = _session(tmp_path, "topk_mutates_input.py")
    try:
        ch = s.child()
        shape = s.probe_shape()
        ref = s.ref_model(shape)
        assert s.new_model(ch, "m", shape, s.state_file(shape, ref)).ok
        pr, args = s.put(ch, s.make_inputs(shape, 42))
        r, payload = s.call(ch, "m", args)
        assert r.ok and payload["inputs_mutated"] and s.inputs_mutated
        assert "replay-input-mutated" in {f["rule"] for f in s.outcome.findings}
    finally:
        s.close()
        scratch.cleanup()


def test_the_driver_keeps_its_names_to_itself():
    """What only the driver calls (start, deadlines, close) is named, and is all public on the session."""
    public = {n for n in dir(Session) if not n.startswith("_")}
    assert RUNNER_ONLY <= public
    assert {"child", "new_model", "put", "call", "fetch", "compare", "reference", "row", "finding"} <= public - RUNNER_ONLY
