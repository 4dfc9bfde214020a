"""The annotation writer against generated text: PyYAML's pure-Python loader, libyaml's loader and
the benchmark site's line reader (tests/site_yaml.py) read back the same values for every field the
writer emits (top-level scalars, quotes, findings, decided_by, trajectory and the other nested
values), whatever the text holds: any Unicode category, trailing blank lines, `...` and `---`, CR,
CRLF, U+2028/U+2029, NEL, BOM, NUL and the other C0/C1 controls, tabs, leading spaces, long lines.

The site's reader does no unescaping, so a text YAML cannot carry raw (a control character, a line
break YAML has and the site does not) reaches it as the escaped double-quoted form, which YAML reads
as the value; a final line break is YAML's alone (the site's block has no way to say it).  Lone
surrogates cannot be written as UTF-8 at all: they are written as U+FFFD.
"""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from forensics.report.annotation import annotation_dict, dump_annotation, write_annotation
from site_yaml import parse_site, site_agrees

C_LOADER = getattr(yaml, "CSafeLoader", None)
LOADERS = [yaml.SafeLoader] + ([C_LOADER] if C_LOADER is not None else [])

SPECIAL = ["\n", "\n\n", "\n\n\n", "...", "---", "\n...\n", "\n---\n", "\r", "\r\n", "\u2028", "\u2029", "\x85",
           "\ufeff", "\x00", "\x01", "\x07", "\x1b", "\x1f", "\x7f", "\x80", "\x9f", "\ud800", "\udcff", "\t",
           "  ", " ", "\n  ", "\n\t", "# ", ": ", "- ", "? ", "'", '"', "\\", "|", ">", "&a", "*a", "!x", "%", "@",
           "`", "{", "}", "[", "]", ",", "x" * 3000, "\u00a0", "\ufffe", "\uffff", "é", "漢", "🚀", "\u200b",
           "true", "null", "~", "1e3", "0x1F", "key: value", "\nkey: value"]

_char = st.characters(exclude_categories=())          # every category, surrogates (Cs) included
text = st.lists(st.one_of(st.text(_char, max_size=12), st.sampled_from(SPECIAL)), max_size=8).map("".join)
scalar = st.one_of(text, st.none(), st.booleans(), st.integers(-10**12, 10**12),
                   st.floats(allow_nan=False, allow_infinity=True))
json_value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(text, inner, max_size=4)), max_leaves=12)
status = st.one_of(st.booleans(), st.none(), text)

KEYS = ["run_id", "model", "harness", "effort", "problem", "bench", "gpu_name", "peak_fraction", "verdict",
        "reward_hack", "contamination", "correct", "failure_reason", "measurement_status", "publish_grade",
        "empirical_recompute_required", "exclude_from_denominator", "summary", "implication", "rule_trace", "quotes",
        "trajectory", "findings", "decided_by", "archived_verdict_check", "archived_annotation",
        "archived_annotation_error", "auditor"]


@st.composite
def annotations(draw) -> dict:
    d: dict = {}
    for k in ("run_id", "model", "harness", "effort", "problem", "bench", "gpu_name"):
        d[k] = draw(st.one_of(text, st.none()) if k in ("model", "effort") else text)
    d["peak_fraction"] = draw(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)))
    d["verdict"] = draw(text)
    for k in ("reward_hack", "contamination", "correct", "failure_reason", "measurement_status", "publish_grade",
              "empirical_recompute_required", "exclude_from_denominator"):
        d[k] = draw(status)
    for k in ("summary", "implication", "rule_trace"):
        d[k] = draw(text)
    d["quotes"] = draw(st.lists(st.fixed_dictionaries({
        "file": text, "lines": st.lists(st.integers(0, 10**9), min_size=2, max_size=2), "label": text, "text": text}),
        max_size=3))
    d["trajectory"] = draw(st.lists(json_value, max_size=3))
    d["findings"] = draw(st.lists(st.fixed_dictionaries({"id": text, "rule": text, "category": text, "severity": text,
                                                         "message": text}), max_size=3))
    d["decided_by"] = draw(st.dictionaries(text, st.one_of(text, st.lists(text, max_size=3)), max_size=4))
    d["archived_verdict_check"] = draw(st.dictionaries(text, st.dictionaries(text, scalar, max_size=3), max_size=3))
    d["archived_annotation"] = draw(text)
    d["archived_annotation_error"] = draw(text)
    d["auditor"] = draw(text)
    return d


_SURR = re.compile("[\ud800-\udfff]")
# what YAML cannot carry raw, or reads as a line break where the site's reader does not
_NOT_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\r\u2028\u2029\ufeff\ufffe\uffff]")


def expected(v):
    """What every reader must get back: the value, lone surrogates as U+FFFD."""
    if isinstance(v, str):
        return _SURR.sub("\ufffd", v)
    if isinstance(v, dict):
        return {expected(k): expected(x) for k, x in v.items()}
    if isinstance(v, list):
        return [expected(x) for x in v]
    return v


def same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(x, b[k]) for k, x in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


def site_reads(site: str | None, v) -> bool:
    """The site's string for a top-level value: the value itself; for a text ending in a line break,
    the text without its final break; for a text YAML cannot carry raw (or a multi-line one whose
    first line starts with white space, which no two-space block can say), YAML's escaped
    double-quoted form, which YAML reads as the value."""
    if isinstance(v, float) and v != v:            # NaN: the site shows `.nan`, which YAML reads as NaN
        try:
            got = yaml.safe_load(f"k: {site}")["k"]
        except (yaml.YAMLError, TypeError):
            return False
        return isinstance(got, float) and got != got
    if not isinstance(v, str):
        return site_agrees(site, v)
    if site is None:
        return False
    if site == v or (v.endswith("\n") and site == v[:-1]):
        return True
    if _NOT_RAW.search(v) or ("\n" in v and (v[:1] in (" ", "\t", "\n"))):
        try:
            return yaml.safe_load(f'k: "{site}"') == {"k": v}
        except yaml.YAMLError:
            return False
    return False


def check(d: dict) -> str:
    out = dump_annotation(d)
    want = expected(d)
    for loader in LOADERS:
        got = yaml.load(out, Loader=loader)
        assert same(got, want), (loader.__name__, out)
    site = parse_site(out)
    keys = [ln.split(":", 1)[0] for ln in out.split("\n") if ln and not ln[0].isspace()]
    assert keys == list(d), (keys, out)          # no nested line passes for a top-level key
    for k, v in want.items():
        if not isinstance(v, (dict, list)):
            assert site_reads(site.get(k), v), (k, v, site.get(k), out)
    return out


def test_libyaml_is_here():
    # the property below runs both loaders only where PyYAML was built with libyaml
    assert C_LOADER is not None, "PyYAML has no CSafeLoader here: only the pure loader is checked"


def test_generated_fields_are_the_writers_fields():
    rep = {"run": {"run_id": "r", "model": "m", "harness": "h", "problem": "01_fp8_gemm", "gpu_name": "H100",
                   "peak_fraction": 0.1},
           "verdict": {"verdict": "clean", "decided_by": {"verdict": "rule:V1"}, "summary": "x",
                       "archived": {"fields": {"verdict": {"status": "agree", "archived": "clean", "source": "a.yaml"}},
                                    "source": "a.yaml", "annotation_error": "e"}},
           "quotes": [{"file": "f", "lines": [1, 2], "label": "l", "text": "t"}], "trajectory": [],
           "findings": [{"finding_id": "i", "analyzer": "static", "rule": "R", "category": "c", "severity": "high",
                         "message": "m"}]}
    assert list(annotation_dict(rep)) == KEYS


# the three real annotations that were not YAML: a quote ending in blank lines, nested under quotes:
@example({**{k: "x" for k in KEYS}, "quotes": [{"file": "a.py", "lines": [3, 9], "label": "L", "text": "x = 1\n\n\n"}],
          "trajectory": [], "findings": [], "decided_by": {}, "archived_verdict_check": {}})
@example({**{k: "" for k in KEYS}, "model": None, "peak_fraction": float("nan"), "quotes": [], "trajectory": [],
          "findings": [], "decided_by": {}, "archived_verdict_check": {}})
@given(annotations())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_every_reader_reads_the_same_values(d):
    check(d)


@pytest.mark.parametrize("piece", SPECIAL, ids=lambda v: ascii(v)[:24])
@pytest.mark.parametrize("where", ["top", "quote", "nested"])
def test_each_special_piece_everywhere(piece, where):
    for v in (piece, "a" + piece, piece + "b", "a\n" + piece + "\n\n", "  " + piece + "\nz\n\n\n"):
        d = {k: "x" for k in KEYS}
        d.update(quotes=[], trajectory=[], findings=[], decided_by={}, archived_verdict_check={})
        if where == "top":
            d["summary"] = v
        elif where == "quote":
            d["quotes"] = [{"file": v, "lines": [1, 2], "label": v, "text": v}]
        else:
            d["trajectory"] = [{v: [v, {"k": v}]}]
            d["decided_by"] = {v: [v, v]}
        check(d)


def test_written_file_is_utf8_yaml(tmp_path):
    rep = {"run": {"run_id": "r\udcff", "model": "m"}, "verdict": {"verdict": "clean", "summary": "x\n\n"},
           "quotes": [{"file": "f", "lines": [1, 2], "label": "l", "text": "end\n\n\n"}], "trajectory": [],
           "findings": []}
    p = write_annotation(rep, tmp_path / "a.yaml")
    doc = yaml.load(p.read_bytes().decode("utf-8"), Loader=LOADERS[-1])
    assert doc["run_id"] == "r\ufffd" and doc["quotes"][0]["text"] == "end\n\n\n"
