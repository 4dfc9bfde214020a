"""One probe vocabulary (forensics/vocab.py): every probe name any rule, the replay or the verdict
uses is declared there, and the two mappings derived from it agree with each other."""

from __future__ import annotations

import ast
from pathlib import Path

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


# ------------------------------------------------------------------ probe names are spelled once
PKG = Path(__file__).resolve().parent.parent / "forensics"
#: where probe names are used as names: the replay (its probes, rows, rules), and what reads its
#: results (the verdict, the report's prose)
SPELLED_BY_CONSTANT = [*sorted((PKG / "replay").rglob("*.py")), PKG / "verdict.py", PKG / "report" / "prose.py"]
#: files of the solution's process: run by path in the child, standard library and torch only, so
#: they cannot import the vocabulary (their 'check' is the deck's check.py module)
CHILD_SIDE = {"replay/worker.py", "replay/childaudit.py"}
#: strings equal to a probe's name that name something else, with how often they occur
NOT_PROBE_NAMES = {
    ("replay/capabilities.py", "check"): 1,    # the deck's check.py module among the names a solution may shadow
    ("replay/capabilities.py", "build"): 3,    # the route of an audit event from the build tools
    ("replay/account.py", "build"): 1,         # the account's kind for the solution's build (BUILD_KIND)
    ("replay/cli.py", "check"): 3,             # `forensics kernels check`, and its --shapes check (the check's shapes)
    ("replay/cli.py", "stress"): 1,            # `forensics kernels list`: a deck version's stress cases
    ("replay/cli.py", "property"): 2,          # ... and its property cases
    ("replay/probes/kerneltrace.py", "build"): 1,   # the path tracer's record of the model's construction
    ("verdict.py", "check"): 1,                # an in-session check run's script (check.py)
}


def probe_name_literals(src: str) -> list[tuple[str, int]]:
    """(name, line) of every string constant equal to a probe's name, except an attribute name
    (getattr, hasattr, setattr's second argument: a ProblemSpec field such as `timing`)."""
    names = {p.name for p in vocab.PROBES}
    tree = ast.parse(src)
    attr_names = {id(n.args[1]) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                  and n.func.id in ("getattr", "hasattr", "setattr") and len(n.args) > 1}
    return [(n.value, n.lineno) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value in names and id(n) not in attr_names]


def test_probe_names_are_spelled_by_the_vocabularys_constants():
    """A probe's name is a constant of forensics/vocab.py (CHECK, SAME_BUFFER ...): the replay's
    registry, rows, rules and probes, the verdict's probe groups and the report's prose use those,
    so renaming a probe is one edit and a typo is a NameError, not a row nobody reads."""
    found: dict[tuple[str, str], int] = {}
    lines: dict[tuple[str, str], list[int]] = {}
    for p in SPELLED_BY_CONSTANT:
        rel = p.relative_to(PKG).as_posix()
        if rel in CHILD_SIDE:
            continue
        for name, line in probe_name_literals(p.read_text(encoding="utf-8")):
            found[(rel, name)] = found.get((rel, name), 0) + 1
            lines.setdefault((rel, name), []).append(line)
    assert found == NOT_PROBE_NAMES, {k: lines.get(k) for k in set(found) | set(NOT_PROBE_NAMES)
                                      if found.get(k) != NOT_PROBE_NAMES.get(k)}


def test_the_literal_check_sees_a_planted_probe_name():
    src = 'rows = [r for r in out if r["probe"] == "same-buffer"]\nx = getattr(spec, "timing", None)\n'
    assert probe_name_literals(src) == [("same-buffer", 1)]
