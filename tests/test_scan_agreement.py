"""Measured agreement (issue 7 section 6): scan the labeled fixture archive and compare every
verdict field with corpus/fixtures/labels.json.

Fields the table decides from archive facts and the contamination chain must match exactly.
Two documented policy differences of the decision table (docs/verdict.md) are mapped, by rule,
not by run: a check timeout is `timeout_unverified` (V5, seed 16) where the labels say `fail`,
and a correct kernel whose benchmark failed stays `clean` (V9, seed 20).  The fields that hinge
on the static analyzer's reading of caches and graphs (empirical_recompute_required and
publish_grade) must agree on at least 85% of the runs; their disagreements are printed.
"""

from __future__ import annotations

import pytest

from forensics import pipeline as P
from devkit.bench.agreement import agreement, agreement_table
from forensics.store.db import Store

from conftest import FIXTURE_ARCHIVE, FIXTURE_LABELS

pytestmark = pytest.mark.skipif(not FIXTURE_LABELS.exists(), reason="labeled fixture archive not present")

EXACT = ("contamination", "correct", "failure_reason", "reward_hack", "exclude_from_denominator", "measurement_status")
POLICY = {("verdict", "V5"): ("fail", "timeout_unverified"), ("verdict", "V9"): ("fail", "clean")}


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("fx") / "report"
    res = P.scan(FIXTURE_ARCHIVE, out=out, progress=False, jobs=2)
    with Store(res.db, read_only=True) as s:
        return res, agreement(s, FIXTURE_LABELS)


def test_every_labeled_run_was_adjudicated(result):
    res, a = result
    assert not a["missing"], a["missing"]
    assert a["runs"] == len(res.run_ids)


@pytest.mark.parametrize("field", EXACT)
def test_fact_fields_match_labels(result, field):
    res, a = result
    if field in ("contamination",) and "provenance" not in res.coverage["ran"]:
        pytest.skip("provenance analyzer absent")
    if field in ("reward_hack",) and "static" not in res.coverage["ran"]:
        pytest.skip("static analyzer absent")
    bad = [d for d in a["disagreements"] if d["field"] == field]
    assert not bad, "\n" + agreement_table({**a, "disagreements": bad})


def test_verdict_matches_labels_up_to_documented_policy(result):
    res, a = result
    if not {"provenance", "static"} <= set(res.coverage["ran"]):
        pytest.skip("provenance/static analyzers absent")
    bad = [d for d in a["disagreements"] if d["field"] == "verdict"
           and POLICY.get(("verdict", d["rule"])) != (d["expected"], d["ours"])]
    assert not bad, "\n" + agreement_table({**a, "disagreements": bad})


@pytest.mark.parametrize("field", ("empirical_recompute_required", "publish_grade"))
def test_static_dependent_fields_mostly_agree(result, field):
    res, a = result
    if "static" not in res.coverage["ran"]:
        pytest.skip("static analyzer absent")
    f = a["fields"][field]
    print(agreement_table({**a, "disagreements": [d for d in a["disagreements"] if d["field"] == field]}))
    assert f["rate"] >= 0.85, f


def test_no_field_is_left_unknown_on_the_fixture(result):
    _, a = result
    assert sum(f["unknown"] for f in a["fields"].values()) == 0
