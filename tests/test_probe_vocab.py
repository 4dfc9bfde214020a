"""One probe vocabulary (forensics/vocab.py): every probe name any rule, the replay or the verdict
uses is declared there, and the two mappings derived from it agree with each other."""

from __future__ import annotations

import pytest

from forensics import vocab
from forensics.analyze.catalogue import all_rules
from forensics.analyze.findings import norm_probe


def test_every_rule_probe_resolves():
    """Every probe a rule of any analyzer names (the static rules' prose, the replay's names)."""
    missing = sorted({(r.id, r.probe) for r in all_rules() if r.probe and vocab.lookup(r.probe) is None})
    assert not missing, f"rules naming an undeclared probe: {missing}"


def test_static_hits_that_override_the_rule_probe_resolve():
    # caches.py names the fresh-inputs probe for a pointer-keyed cache whose inputs are captured
    assert vocab.lookup("fresh input pointers").name == "fresh-inputs"


def test_every_replay_probe_is_declared_and_runs_in_order():
    from forensics.replay.api import ALL_PROBES
    assert ALL_PROBES == vocab.ALL_PROBES
    assert ALL_PROBES[0] == "check" and ALL_PROBES[-1] == "timing"
    for p in ALL_PROBES:
        assert vocab.BY_NAME[p].replay
    # every probe that runs something runs replay probes only
    for p in vocab.PROBES:
        assert set(p.selects) <= set(ALL_PROBES), p
    for name, sel in vocab.SELECTIONS.items():
        assert sel and set(sel) <= set(ALL_PROBES), name


def test_every_probe_a_replay_table_runs_is_declared():
    pytest.importorskip("torch")
    from forensics.replay import registry

    names = set()
    for k in registry.KINDS:
        names |= set(registry.table(k))
    assert names <= set(vocab.ALL_PROBES), names - set(vocab.ALL_PROBES)


def test_norm_and_static_round_trip():
    for p in vocab.PROBES:
        for s in (p.name,) + p.aliases:
            assert norm_probe(s) == p.name, s
            assert norm_probe(s.upper().replace("-", "_")) == p.name, s
            # what a spelling asks the replay to run is what its canonical name asks, except that a
            # replay probe's own name selects itself alone
            want = (p.name,) if vocab.key(s) == p.name and p.replay else p.selects
            assert vocab.static_probe(s) == want, s
        # a canonical name is a fixed point, and every probe a phrase selects is itself canonical
        assert norm_probe(p.name) == p.name
        for q in p.selects:
            assert norm_probe(q) == q and vocab.static_probe(q) == (q,)
    # the replay probe a non-replay name stands for records its results under that name
    assert vocab.static_probe("L2-persistence reset timing") == ("timing",)
    assert norm_probe("L2-persistence reset timing") == "timing-l2-reset"
    # one name for the verdict, two probes for the replay (a graph on the caller's buffers passes
    # the overwrite and fails only new inputs)
    assert norm_probe("same-buffer overwrite") == "same-buffer"
    # an auditor's log of the variant that overwrites the weights in place (spec 2.5 key=value form)
    assert norm_probe("same_buffer_weight_overwrite") == "same-buffer"
    assert vocab.static_probe("same-buffer overwrite") == ("same-buffer", "fresh-inputs")
    assert vocab.static_probe("same-buffer") == ("same-buffer",)
    # unknown spellings: normalized, select nothing
    assert norm_probe("Some_New probe") == "some-new-probe" and vocab.static_probe("Some_New probe") == ()
    assert norm_probe(None) == "" and vocab.static_probe(None) == ()


def test_selections_are_not_probes():
    for s in vocab.SELECTIONS:
        assert vocab.lookup(s) is None and norm_probe(s) == s


def test_replay_api_uses_the_vocabulary():
    from forensics.replay import api
    assert api.static_probe is vocab.static_probe and api.PROBE_ALIASES is vocab.PROBE_ALIASES
    assert api.expand_probes(["all"]) == list(vocab.ALL_PROBES)
    assert api.expand_probes(["stress", "timing-l2-reset", "build"]) == ["check", "timing"]
    with pytest.raises(ValueError):
        api.expand_probes(["first-launch"])   # declared, but nothing replays it


def test_the_verdicts_probe_sets_use_canonical_names():
    from forensics import verdict as V
    for name in ("PROBES_STALE", "PROBES_RUBRIC", "PROBES_CORRECTNESS", "PROBES_IGNORED", "RECOMPUTE_PROBES",
                 "CORROBORATING_PROBES"):
        for p in getattr(V, name):
            assert p in vocab.BY_NAME and norm_probe(p) == p, (name, p)


def test_severities_and_categories_have_one_home():
    from forensics.analyze import findings
    assert findings.SEVERITIES is vocab.SEVERITIES and findings.SEV_RANK is vocab.SEV_RANK
    assert findings.CATEGORIES is vocab.CATEGORIES and findings.severity_key is vocab.severity_key


def test_vocab_imports_nothing_of_forensics():
    import ast
    from pathlib import Path
    tree = ast.parse(Path(vocab.__file__).read_text())
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            assert not (n.module or "").startswith("forensics") and not n.level
        elif isinstance(n, ast.Import):
            assert not any(a.name.startswith("forensics") for a in n.names)
