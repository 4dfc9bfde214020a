"""The rule catalogue (forensics.analyze.catalogue): every rule id the source emits is catalogued,
every catalogued id is emitted somewhere, the verdict names no rule outside it, each id resolves to
the module that emits it, and `forensics rules` lists them all."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from click.testing import CliRunner

from forensics.analyze.catalogue import all_rules, by_id, rules_cmd
from forensics.analyze.findings import CATEGORIES, SEVERITIES
from forensics.replay.rules import FINDING_RULES

PKG = Path(__file__).resolve().parent.parent / "forensics"
RID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$|^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$")
# calls whose first argument is a rule id (the analyzers' own emit helpers), and Finding(run, analyzer, rule, ...)
FIRST_ARG = {"finding", "Hit", "hit", "add"}


def _literal(node: ast.AST, consts: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    return None


def emitted() -> dict[str, set[str]]:
    """rule id -> files that emit it: Finding(.., .., RULE), finding/Hit/add(RULE, ...), rule=RULE, {"rule": RULE}."""
    out: dict[str, set[str]] = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG)   # the product only: devkit/ (beside forensics/) is not scanned
        tree = ast.parse(p.read_text(encoding="utf-8"))
        consts = {n.targets[0].id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                  and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                  and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
        cands: list[ast.AST] = []
        for n in ast.walk(tree):
            if isinstance(n, ast.Dict):
                cands += [v for k, v in zip(n.keys, n.values) if isinstance(k, ast.Constant) and k.value == "rule"]
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            cands += [k.value for k in n.keywords if k.arg == "rule"]
            if name == "Finding" and len(n.args) >= 3:
                cands.append(n.args[2])
            elif name in FIRST_ARG and n.args:
                cands.append(n.args[0])
        for c in cands:
            s = _literal(c, consts)
            if s and RID.match(s):
                out.setdefault(s, set()).add(str(rel))
    return out


# emit-helper calls whose first argument is not a rule: static's internal value kinds (caches.py,
# work.py: set.add of a kind) match the id shape but are never a finding's rule
NOT_RULES = {"authored-core", "authored-token", "authored-unknown", "content-plan", "input-copy", "input-ref",
             "packed-weight"}


def test_the_extraction_sees_each_emission_shape():
    e = emitted()
    assert "foreign-read" in e and "analysis-coverage" in e      # Finding(run, analyzer, RULE), rule=CONSTANT
    assert "final-version" in e and "replay-crash" in e          # add(RULE, ...), self.finding(RULE, ...)
    assert "replay-cpu-only" in e and "SAMPLED-VALIDATION" in e  # dict(rule=...), Hit(RULE, ...)


def test_every_emitted_rule_is_catalogued():
    cat = by_id()
    missing = sorted(r for r in emitted() if r not in cat and r not in NOT_RULES)
    assert missing == []


def test_every_catalogued_rule_is_emitted():
    """No dead entries.  A rule id emitted through a variable (the replay's stale-* family, the
    static rules a table drives) is found as a literal anywhere in the emitting module."""
    e = emitted()
    dead = []
    for r in all_rules():
        if r.id in e:
            continue
        mods = [p for p in PKG.rglob("*.py") if p.name != "rules.py" and p.name != "catalogue.py"]
        if not any(f'"{r.id}"' in p.read_text(encoding="utf-8") for p in mods):
            dead.append(r.id)
    assert dead == []


def test_the_verdict_names_only_catalogued_rules():
    src = (PKG / "verdict.py").read_text(encoding="utf-8")
    named = {m for m in re.findall(r'"([a-z]+(?:-[a-z0-9]+)+|[A-Z]+(?:-[A-Z0-9]+)+)"', src)
             if m.startswith(("replay-", "foreign-", "stream-", "similar-", "contamination-", "final-", "superseded-",
                              "edits-", "stress-", "post-session-", "session-", "timeline-", "transcript-",
                              "analysis-")) or m.isupper()}
    from forensics import verdict as V
    named |= {r for k, v in vars(V).items() if k.startswith("RULE_") and isinstance(v, tuple) for r in v}
    cat = by_id()
    assert sorted(n for n in named if n not in cat) == []


def test_entries_are_well_formed_and_resolve_to_their_module():
    ids = [r.id for r in all_rules()]
    assert len(ids) == len(set(ids))
    for r in all_rules():
        assert r.severity in SEVERITIES and r.category in CATEGORIES, r
        assert r.title and r.rationale and r.evidence, r
    e = emitted()
    for r in all_rules():
        if r.analyzer in ("static", "integrity") or r.id not in e:
            continue
        # the second hop: the module the catalogue names is one that emits it
        assert any(f.startswith(r.source.rstrip("/")) for f in e[r.id]), (r.id, r.source, e[r.id])


def test_the_replay_takes_its_severities_from_the_catalogue():
    cat = by_id()
    for rid, (sev, category, probe) in FINDING_RULES.items():
        assert (cat[rid].severity, cat[rid].category, cat[rid].probe) == (sev, category, probe)


def test_forensics_rules_lists_every_analyzer():
    res = CliRunner().invoke(rules_cmd, ["--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert {r["analyzer"] for r in got} >= {"static", "integrity", "provenance", "similarity", "timeline", "replay",
                                            "pipeline"}
    assert len(got) == len(all_rules())
    res = CliRunner().invoke(rules_cmd, ["--analyzer", "timeline"])
    assert "superseded-pass" in res.output and "PTR-KEYED-CACHE" not in res.output
