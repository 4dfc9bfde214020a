"""The index page and the decision-table page of a report, read as HTML (no browser): the heat map
names every run whole and says how many it shows of how many; at 1400 px the runs table can show
every column with the decisive ones first; the verdict vocabulary has a legend; the decision table
ships as verdict.html and the rule ids link to its rows; no page cites a spec a user cannot read."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from forensics import verdict as V
from forensics.report import html as H

REPO = Path(__file__).resolve().parent.parent


class Tables(HTMLParser):
    """table id -> rows of (text, raw html) cells; plus every id and href of the page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[tuple[str, str]]]] = {}
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self._t: list[str] = []
        self._row = None
        self._cell: list[str] | None = None
        self._raw: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if a.get("href"):
            self.hrefs.append(a["href"])
        if self._raw is not None:
            self._raw.append(self.get_starttag_text())
        if tag == "table":
            self._t.append(a.get("id") or f"_t{len(self.tables)}")
            self.tables[self._t[-1]] = []
        elif tag == "tr" and self._t:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell, self._raw = [], []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append((" ".join("".join(self._cell).split()), "".join(self._raw)))
            self._cell = self._raw = None
        elif self._raw is not None:
            self._raw.append(f"</{tag}>")
        if tag == "tr" and self._row is not None and self._t:
            self.tables[self._t[-1]].append(self._row)
            self._row = None
        elif tag == "table" and self._t:
            self._t.pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
            self._raw.append(data)


def parse(text: str) -> Tables:
    t = Tables()
    t.feed(text)
    return t


# --------------------------------------------------------------------------- the heat map

def long_id(i: int) -> str:
    # the archive's grammar, with a model name long enough that a 40-character cut loses the date
    return f"2026080{i % 9 + 1}_1{i:05d}_opencode_openrouter-pinned_minimax_minimax-m2.7_{i:02d}_w4a16_gemm"


def test_heatmap_names_every_run_whole_and_says_what_it_leaves_out():
    ids = [long_id(i) for i in range(70)]
    # a chain: run k's most similar pair scores (k+1)/100 (run 69: 0.69), so the 60 shown are runs 10..69
    pairs = [{"a_id": ids[i], "b_id": ids[i + 1], "jaccard": (i + 1) / 100, "jaccard_est": None} for i in range(69)]
    svg = H.heatmap_svg(pairs, {}, max_runs=60)
    labels = re.findall(r'<text class="row-label"[^>]*>([^<]*)</text>', svg)
    assert sorted(labels) == sorted(ids[10:]), "the 60 most similar runs, each labelled by its whole id"
    assert "(highest similarity 0.10 or less)" in svg
    cap = re.search(r'id="heatmap-caption">([^<]*)<', svg).group(1)
    assert "The 60 runs" in cap and "of the 70 runs with a scored pair" in cap and "the other 10" in cap
    assert svg.count('class="cell"') == 60 * 60
    width = int(re.search(r'id="heatmap" width="(\d+)"', svg).group(1))
    height = int(re.search(r'id="heatmap" width="\d+" height="(\d+)"', svg).group(1))
    need = H.MONO_CHAR_W * max(map(len, ids))
    assert width >= need + 60 * 16 and height >= need + 60 * 16, "the canvas fits the whole labels"


def test_heatmap_shows_all_runs_when_they_fit():
    ids = [long_id(i) for i in range(5)]
    pairs = [{"a_id": ids[i], "b_id": ids[i + 1], "jaccard": None, "jaccard_est": 0.5} for i in range(4)]
    svg = H.heatmap_svg(pairs, {ids[0]: "named-run"})
    cap = re.search(r'id="heatmap-caption">([^<]*)<', svg).group(1)
    assert cap.startswith("All 5 runs with a scored pair")
    assert "named-run" in svg and all(i in svg for i in ids[1:])


# --------------------------------------------------------------------------- the runs table at 1400 px

def overview_row(i: int, verdict: str, **kw) -> dict:
    r = {"run_id": long_id(i), "run_name": long_id(i), "problem": "03_paged_attention", "harness": "opencode",
         "verdict": verdict, "correct": "true", "contamination": "clean", "reward_hack": "false",
         "failure_reason": "provider_insufficient_credits", "measurement_status": "sequential_isolated_wrong_hardware_sku",
         "publish_grade": "false", "empirical_recompute_required": "false", "exclude_from_denominator": False,
         "peak_fraction": 0.123456, "n_high": 12,
         "archived": {"fields": {f: {"status": "cannot_tell"} for f in V.FIELDS[:8]},
                      "counts": {"agree": 10, "disagree": 10, "cannot_tell": 10}}}
    r.update(kw)
    return r


CHAR_PX = 8.0        # a generous width of one character at the table's 13 px (bold headers included)
CELL_PX = 7 * 2 + 1  # padding and border of a cell (the stylesheet's th,td rule)


def min_content_px(cells: list[tuple[str, str]], min_ch: int = 0) -> float:
    """An upper bound of the narrowest a column can be under the page's CSS: the longest piece
    between break opportunities (spaces, after '-', <wbr>) or the column's min-width in ch."""
    widest = min_ch
    for text, raw in cells:
        pieces = re.split(r"<wbr>|\s+|(?<=-)", re.sub(r"<(?!wbr)[^>]*>", "", raw)) if raw else text.split()
        widest = max([widest, *(len(p) for p in pieces)])
    return widest * CHAR_PX + CELL_PX


def test_runs_table_fits_1400px_with_publish_peak_and_high_first():
    overview = [overview_row(i, v) for i, v in enumerate(["clean", "fail_forbidden_op_tripwire",
                                                           "retryable_infra_failure", "contamination"])]
    page = H.index_html(overview, [], [], {"archive": "/data/archive"}, {r["run_id"]: r["run_id"] for r in overview})
    t = parse(page)
    rows = t.tables["runs"]
    header = [c[0] for c in rows[0]]
    assert header[:5] == ["run", "verdict", "publish", "peak fraction", "high findings"]
    assert set(header) >= {"correct", "contamination", "reward hack", "failure reason", "measurement", "problem",
                           "harness", "archived agree / disagree / ?"}
    css = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    # the badges wrap after their '_' in this table only (a label elsewhere stays whole)
    assert re.search(r"\.v\{[^}]*white-space:nowrap", css) and re.search(r"#runs \.v\{[^}]*white-space:normal", css)
    run_min_ch = int(re.search(r"#runs td:first-child[^{]*\{[^}]*min-width:(\d+)ch", css).group(1))
    cols = list(zip(*rows))
    widths = [min_content_px(list(col), run_min_ch if i == 0 else 0) for i, col in enumerate(cols)]
    body_margin = int(re.search(r"body\{[^}]*margin:(\d+)px", css).group(1))
    assert sum(widths) + 1 <= 1400 - 2 * body_margin, (sum(widths), dict(zip(header, widths)))
    # the run id is whole in its cell (wrapping points only, which copy as nothing), and an id
    # without any still wraps rather than widening the table
    run_cell = rows[1][0]
    assert run_cell[0] == overview[0]["run_id"] and "<wbr>" in run_cell[1]
    assert re.search(r"#runs td:first-child[^{]*\{[^}]*overflow-wrap:anywhere", css)
    # a table wider than the window scrolls in its own box rather than pushing the page
    assert re.search(r'<div class="wide"><table class="sortable" id="runs"', page)
    assert re.search(r"\.wide\{overflow-x:auto", css)


# --------------------------------------------------------------------------- the legend

def verdict_values_of_the_table() -> set[str]:
    out = set()
    for rid, fld, _cond, then in V.DECISION_TABLE:
        if fld == "verdict":
            out |= set(re.findall(r"`([a-z_]+)`", then))
    return out


def test_legend_covers_the_verdict_vocabulary():
    assert set(H.VERDICT_LEGEND) == verdict_values_of_the_table()
    ids = {r[0] for r in V.DECISION_TABLE}
    for rules, _ in H.VERDICT_LEGEND.values():
        assert set(rules) <= ids


def test_legend_says_why_clean_is_not_publishable_and_what_the_counts_count():
    overview = [overview_row(0, "clean", measurement_status="in_run_contended", failure_reason="pass"),
                overview_row(1, "clean", measurement_status="in_run_contended", failure_reason="pass"),
                overview_row(2, "clean", publish_grade="true", measurement_status="sequential_isolated", failure_reason="pass"),
                overview_row(3, "fail", correct="false", failure_reason="check_failed")]
    page = H.index_html(overview, [], [], {}, {r["run_id"]: r["run_id"] for r in overview})
    t = parse(page)
    assert {"legend", "clean-not-publishable", "archived-counts", "archived-counts-meaning"} <= t.ids
    clean = re.search(r'id="clean-not-publishable">([^<]*)<', page).group(1)
    assert "2 of the 3 clean runs are not publishable" in clean
    assert "2 measured while other agents shared the GPU (measurement_status=in_run_contended)" in clean
    meaning = re.search(r'id="archived-counts-meaning">([^<]*)<', page).group(1)
    assert "32 comparisons, 4 runs &times; 8 verdict fields" in meaning.replace("×", "&times;")
    assert "#legend" in t.hrefs and "verdict.html" in t.hrefs
    for v in H.VERDICT_LEGEND:
        assert f'class="v v-{v}"' in page


# --------------------------------------------------------------------------- the decision table page

def test_verdict_page_has_every_rule_with_an_anchor():
    page = H.verdict_html()
    t = parse(page)
    rows = t.tables["decision-table"]
    assert [c[0] for c in rows[0]] == ["id", "field", "when", "then"]
    assert [r[0][0] for r in rows[1:]] == [r[0] for r in V.DECISION_TABLE]
    assert {f"rule-{r[0]}" for r in V.DECISION_TABLE} <= t.ids
    assert "index.html" in t.hrefs
    assert "<code>unknown</code>" in page and "`" not in re.sub(r"<style>.*?</style>|<script>.*?</script>", "", page, flags=re.S)


UNFOLLOWABLE = re.compile(r"\bspec\b|§|\b3\.3 classifier|spec section|section \d", re.I)


@pytest.fixture(scope="module")
def fixture_report(tmp_path_factory) -> Path:
    from forensics.pipeline import scan
    out = tmp_path_factory.mktemp("idx") / "report"
    scan(REPO / "corpus" / "fixtures" / "archive", out=out, progress=False)
    return out


def test_report_links_rules_and_cites_nothing_unreadable(fixture_report):
    out = fixture_report
    verdict_page = parse((out / "verdict.html").read_text(encoding="utf-8"))
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "verdict.html" in parse(index).hrefs
    linked = 0
    for p in sorted((out / "runs").glob("*.html")):
        text = p.read_text(encoding="utf-8")
        for h in parse(text).hrefs:
            if h.startswith("../verdict.html#"):
                assert h.split("#", 1)[1] in verdict_page.ids, (p.name, h)
                linked += 1
        assert not UNFOLLOWABLE.search(text), (p.name, UNFOLLOWABLE.search(text).group(0))
    assert linked >= len(V.FIELDS) * len(list((out / "runs").glob("*.html"))) - 5
    for name in ("index.html", "verdict.html"):
        text = (out / name).read_text(encoding="utf-8")
        assert not UNFOLLOWABLE.search(text), (name, UNFOLLOWABLE.search(text).group(0))
    for y in (out / "annotations").glob("*.yaml"):
        assert not UNFOLLOWABLE.search(y.read_text(encoding="utf-8")), y.name
