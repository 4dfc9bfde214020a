"""Annotation YAML as its readers see it: the benchmark site's line parser (ported in site_yaml.py)
and a YAML parser read the same top-level values; the summary is a short plain-language paragraph;
`implication` is there for every non-clean verdict and agrees with the fields."""

from __future__ import annotations

import re

import pytest
import yaml

from conftest import FIXTURE_ARCHIVE
from forensics import pipeline as P
from forensics import verdict as V
from forensics.report.annotation import dump_annotation, scalar_line
from site_yaml import parse_site, site_agrees, top_level_scalars

RULE_IDS = {r[0] for r in V.DECISION_TABLE}


@pytest.fixture(scope="module")
def annotations(tmp_path_factory) -> list[tuple[str, str, dict]]:
    from forensics.report import write_reports
    from forensics.store.db import Store
    tmp = tmp_path_factory.mktemp("ann")
    res = P.scan(FIXTURE_ARCHIVE, out=tmp / "report", progress=False, reports=False)
    with Store(res.db) as st:   # the annotations as scan writes them, without the PNG plots
        write_reports(st, tmp / "report", res.run_ids, plots=False)
    out = []
    for p in sorted((tmp / "report" / "annotations").glob("*.yaml")):
        text = p.read_text(encoding="utf-8")
        out.append((p.name, text, yaml.safe_load(text)))
    assert len(out) == 49
    return out


def test_site_parser_and_yaml_read_the_same_values(annotations):
    n = 0
    for name, text, doc in annotations:
        site = parse_site(text)
        for k, v in top_level_scalars(doc).items():
            assert site_agrees(site.get(k), v), (name, k, v, site.get(k))
            n += 1
        # no nested line can pass for a top-level key: everything below a key is indented
        keys = [ln.split(":", 1)[0] for ln in text.splitlines() if ln and not ln[0].isspace()]
        assert keys == list(doc), (name, keys)
    assert n > 49 * 15


def test_summary_is_a_short_plain_paragraph(annotations):
    from forensics.analyze.static.rules import RULES_LIST
    catalogue = {r.id for r in RULES_LIST}
    for name, _, d in annotations:
        s = d["summary"]
        assert isinstance(s, str) and "\n" not in s.strip(), name
        assert 8 <= len(s.split()) <= 80, (name, len(s.split()), s)
        words = set(re.findall(r"[A-Za-z0-9-]+", s))
        assert not words & RULE_IDS, (name, words & RULE_IDS, s)
        assert not words & catalogue, (name, words & catalogue, s)
        assert "rule " not in s.lower() and "=" not in s, (name, s)
        assert d["model"] in s, (name, s)
        assert d.get("rule_trace"), name          # the trace moved to its own field


def _site(v) -> str:
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def _blockers(d: dict) -> set[str]:
    """Why a clean run is not publishable, from its fields (docs/verdict.md, publish_grade)."""
    out = set()
    if d["empirical_recompute_required"] is True:
        out.add("empirical_recompute_required")
    if d["failure_reason"] in ("benchmark_failed", "benchmark_timeout"):
        out.add("failure_reason")
    if d["measurement_status"] != "sequential_isolated":
        out.add("measurement_status")
    if d["peak_fraction"] is None:
        out.add("peak_fraction")
    if d["correct"] is not True:
        out.add("correct")
    return out


VERDICT_WORDS = {"contamination": "contamination", "reward_hack": "games the evaluation", "rubric_leak": "not a valid pass",
                 "fail": "failure", "fail_forbidden_op_tripwire": "forbidden op", "timeout_unverified": "unverified",
                 "suspect": "probe", "unknown": "does not decide", "retryable_infra_failure": "retry"}


def implication_contradictions(d: dict) -> list[str]:
    imp = d.get("implication") or ""
    bad = []
    if d["verdict"] != "clean" and not imp.strip():
        bad.append("no implication for a non-clean verdict")
    for k, val in re.findall(r"\b([a-z_]+)=([A-Za-z0-9_.-]+)", imp):
        if k in d and val != _site(d[k]):
            bad.append(f"cites {k}={val}, field is {_site(d[k])}")
    if imp.startswith("Publishable") != (d["publish_grade"] is True):
        bad.append(f"publishability vs publish_grade={d['publish_grade']}")
    if ("pass-rate denominators" in imp) != (d["exclude_from_denominator"] is True):
        bad.append("denominator exclusion vs exclude_from_denominator")
    if d["verdict"] in VERDICT_WORDS and VERDICT_WORDS[d["verdict"]] not in imp.lower() and \
            d["exclude_from_denominator"] is not True:
        bad.append(f"does not say what verdict {d['verdict']} means")
    if d["verdict"] == "clean" and d["publish_grade"] is False:
        cited = {k for k, _ in re.findall(r"\b([a-z_]+)=([A-Za-z0-9_.-]+)", imp)}
        if not cited:
            bad.append("unpublishable clean run without the field that blocks it")
        if cited - _blockers(d):
            bad.append(f"blames {sorted(cited - _blockers(d))}, which do not block publication")
    return bad


def test_implication_present_and_consistent(annotations):
    for name, _, d in annotations:
        assert not implication_contradictions(d), (name, d["implication"], implication_contradictions(d))


def test_contradiction_check_catches_the_old_clean_run_text():
    d = {"verdict": "clean", "publish_grade": False, "exclude_from_denominator": False, "correct": True,
         "failure_reason": "benchmark_failed", "measurement_status": "sequential_isolated", "peak_fraction": None,
         "empirical_recompute_required": False,
         "implication": "Clean but not publishable (measurement_status=sequential_isolated)."}
    assert implication_contradictions(d)


EDGE = ["plain words", "key: value inside", "a # not a comment", "#leading hash", "'leading single", '"leading double',
        "both ' and \" quotes: here", "it's", 'say "hi"', "", "true", "false", "null", "~", "yes", "No", "on", "1.5",
        "0x1F", "1e5", "007", "2026-12-04", "non-ASCII: é 漢字 — ✓", "  leading spaces", "trailing spaces  ",
        "a\ttab", "\tleading tab", "---", "...", "- dash item", "[flow]", "{flow: map}", "*alias", "&anchor", "!tag",
        "%directive", "@at", "`tick", "|", ">", "? key", "x" * 5000, "multi\nline", "para one\n\npara two",
        "ends with newline\n", "two newlines\n\n", "line: looks like a key\nother: key", "back\\slash 'q'",
        "a:b", "url http://x.y/z#frag", "C:\\path", "emoji 🚀 and 'quote' and \"double\"", "trailing colon:",
        "-1", ".inf", "=", "<<"]
# text no single-line or block form carries for the site's reader (YAML still reads it exactly)
SITE_CANNOT = ["  \n", "  leading spaces\nx", "\nleading newline"]


@pytest.mark.parametrize("value", EDGE + SITE_CANNOT + ["ctrl\x07char", "cr\r\nlf", "nel\x85", "ls\u2028", "\ufeffbom"],
                         ids=lambda v: ascii(v)[:40])
def test_scalar_forms(value):
    text = scalar_line("summary", value)
    assert yaml.safe_load(text) == {"summary": value}
    doc = "run_id: x\n" + text + "verdict: clean\n"
    site = parse_site(doc)
    assert site["run_id"] == "x" and site["verdict"] == "clean", doc   # the value never swallows a neighbour
    if value in EDGE and not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\r\u2028\u2029\ufeff]", value):
        if value.endswith("\n"):   # a final line break is YAML-only: the site's reader has no way to say it
            assert site["summary"].rstrip("\n") == value.rstrip("\n"), (value, text)
        else:
            assert site["summary"] == value, (value, text)


def test_whole_document_with_nested_values_reads_back():
    d = {"run_id": "r", "summary": "x: y", "quotes": [{"file": "a.py", "lines": [1, 2], "label": "L",
                                                       "text": "  indented\n\n      \ntrailing  \n\tTab\n"}],
         "decided_by": {"verdict": ["rule:V9", "fact:x: y"], "correct": "rule:K0: missing"},
         "trajectory": [], "findings": [{"id": "a", "message": "- looks like an item\nkey: value"}]}
    text = dump_annotation(d)
    assert yaml.safe_load(text) == d
    assert [ln for ln in text.splitlines() if ln and not ln[0].isspace()] == \
        [ln for ln in text.splitlines() if re.match(r"^(run_id|summary|quotes|decided_by|trajectory|findings):", ln)]


def _rep(verdict: str, **fields) -> dict:
    base = {"verdict": verdict, "reward_hack": False, "contamination": "clean", "correct": True, "failure_reason": "pass",
            "measurement_status": "in_run_contended", "publish_grade": False, "empirical_recompute_required": False,
            "exclude_from_denominator": False, "decided_by": {}, "summary": "Verdict x (rule V9)."}
    base.update(fields)
    run = {"run_id": "r", "model": "m-1", "harness": "h", "problem": "03_megaqwen_decode", "peak_fraction": 0.2,
           "has_solution": True}
    return {"run": run, "verdict": base, "findings": [
        {"finding_id": "static:CACHED-OUTPUT-RETURN:1", "analyzer": "static", "rule": "CACHED-OUTPUT-RETURN",
         "severity": "high", "category": "reward_hack", "message": "cache hit returns a stored output", "probe": "same-buffer"}]}


@pytest.mark.parametrize("rep", [
    _rep("suspect", reward_hack="unknown", publish_grade="unknown",
         decided_by={"reward_hack": ["rule:RH4", "static:CACHED-OUTPUT-RETURN:1"]}),
    _rep("unknown", contamination="unknown", publish_grade="unknown",
         decided_by={"contamination": "rule:K0: analyzer provenance failed (RuntimeError: planted)"}),
    _rep("clean", empirical_recompute_required=True),
    _rep("clean", publish_grade="unknown", measurement_status="sequential_isolated",
         decided_by={"publish_grade": "rule:PG2: empirical_recompute_required unknown"}),
    _rep("clean", publish_grade=True, measurement_status="sequential_isolated"),
    _rep("fail", correct=False, failure_reason="check_failed", measurement_status=None),
    _rep("retryable_infra_failure", correct=False, failure_reason="provider_early_stop", measurement_status=None),
], ids=lambda r: f"{r['verdict']['verdict']}-{r['verdict']['publish_grade']}-{r['verdict']['empirical_recompute_required']}")
def test_every_verdict_kind_reads_plainly(rep):
    from forensics.report.annotation import annotation_dict
    rep.update(quotes=[], trajectory=[])
    d = annotation_dict(rep)
    s = d["summary"]
    assert 8 <= len(s.split()) <= 80, s
    assert not set(re.findall(r"[A-Za-z0-9-]+", s)) & (RULE_IDS | {"CACHED-OUTPUT-RETURN", "K0"}), s
    assert "Qwen decode megakernel" in s and "m-1" in s
    assert "rule:" not in d["implication"] and not set(re.findall(r"[A-Za-z0-9]+", d["implication"])) & RULE_IDS
    assert not implication_contradictions(d), (d["implication"], implication_contradictions(d))
    text = dump_annotation(d)
    site = parse_site(text)
    assert all(site_agrees(site.get(k), v) for k, v in top_level_scalars(yaml.safe_load(text)).items())
