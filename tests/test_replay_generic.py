"""The stateful API kinds' drivers (forensics/replay/probes/generic.py): each kind's registered
probes run the generic determinism (and, where the kind's rebuild is a seeded model, fresh-state)
with its own driver.  End to end on the CPU the probes are exercised by tests/test_replay_stateful.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from forensics.replay import registry  # noqa: E402
from forensics.replay.probes import decode, generic, rollout, step  # noqa: E402

DRIVERS = {"decode": decode.DRIVER, "step": step.DRIVER, "rollout": rollout.DRIVER}
OPS = ("reference", "model", "run", "expected", "compare")


def test_each_kind_has_its_driver():
    for kind, d in DRIVERS.items():
        assert isinstance(d, generic.Driver) and d.kind == kind
        assert "determinism" in d.objs


def test_seeded_kinds_implement_every_operation():
    """decode and rollout run the generic fresh-state: every operation of the driver is theirs."""
    for kind in ("decode", "rollout"):
        d = DRIVERS[kind]
        for op in OPS:
            assert getattr(type(d), op) is not getattr(generic.Driver, op), (kind, op)
        assert "fresh-state" in d.objs


def test_tables_call_the_generic_probes(monkeypatch):
    calls = []
    monkeypatch.setattr(generic, "determinism", lambda s, d: calls.append(("determinism", d.kind)))
    monkeypatch.setattr(generic, "fresh_state", lambda s, d: calls.append(("fresh-state", d.kind)))
    session = SimpleNamespace()   # the generic probes are patched: nothing of the session is used
    for kind in DRIVERS:
        table = registry.table(kind)
        table["determinism"](session)
        if kind != "step":
            table["fresh-state"](session)
    assert calls == [("determinism", "decode"), ("fresh-state", "decode"), ("determinism", "step"),
                     ("determinism", "rollout"), ("fresh-state", "rollout")]


def test_decode_check_is_the_generic_one(monkeypatch):
    """decode's check is generic.check; the rollout and step checks stay their own (generic.py says why)."""
    calls = []
    monkeypatch.setattr(generic, "check", lambda s, d: calls.append(d.kind))
    for kind in DRIVERS:
        table = registry.table(kind)
        if kind == "decode":
            table["check"](SimpleNamespace())
    assert calls == ["decode"]
    for kind in ("decode", "rollout"):
        d = DRIVERS[kind]
        assert "check" in d.objs and type(d).check_finding is not generic.Driver.check_finding


def test_every_kind_registers_its_check_timing_and_the_generic_probes():
    from forensics.vocab import CHECK, DETERMINISM, FRESH_STATE, TIMING
    for kind in registry.KINDS:
        assert {CHECK, TIMING, DETERMINISM, FRESH_STATE} <= set(registry.table(kind)), kind


def test_the_registry_refuses_what_the_vocabulary_does_not_declare_and_a_second_registration():
    from forensics.vocab import CHECK, STRESS
    before = {k: registry.table(k) for k in registry.KINDS}
    with pytest.raises(ValueError, match="not a replay probe"):
        registry.probe("no-such-probe", "module")
    with pytest.raises(ValueError, match="not a replay probe"):
        registry.probe(STRESS, "module")        # rows of the check probe, not a probe of its own
    with pytest.raises(ValueError, match="unknown API kind"):
        registry.probe(CHECK, "graph")
    with pytest.raises(ValueError, match="registered twice for the step API"):
        registry.probe(CHECK, "step", "rollout")(lambda s: None)   # both taken: neither table changes
    assert {k: registry.table(k) for k in registry.KINDS} == before
