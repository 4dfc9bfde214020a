"""The HTML report in a real headless browser (Debian chromium): the pages load, the JS ran
(sorting applied, marker set), the tables and links render and resolve; the bundled fixture's index
page at 1400 px, measured in the page and screenshotted, shows every column and every run id whole.
Skipped only where no chromium binary exists (.ci/run installs it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from forensics import pipeline as P

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (.ci/run installs Debian's: "
                                                          "apt-get install chromium)")


def chrome(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


class DOM(HTMLParser):
    """Collect tables (id -> rows of cell texts), links and attributes from a dumped DOM."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.table_attrs: dict[str, dict[str, str]] = {}
        self.links: list[str] = []
        self.imgs: list[str] = []
        self.body_attrs: dict[str, str] = {}
        self._table: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_body = False
        self.ids: set[str] = set()
        self.svg_cells = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "body":
            self.body_attrs = {k: v or "" for k, v in attrs}
        elif tag == "table":
            tid = a.get("id") or f"_t{len(self.tables)}"
            self._table.append(tid)
            self.tables[tid] = []
            self.table_attrs[tid] = {k: v or "" for k, v in attrs}
        elif tag == "tr" and self._table:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"])
        elif tag == "img" and a.get("src"):
            self.imgs.append(a["src"])
        elif tag == "rect" and "cell" in (a.get("class") or ""):
            self.svg_cells += 1

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table:
            self.tables[self._table[-1]].append(self._row)
            self._row = None
        elif tag == "table" and self._table:
            self._table.pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def dump(tmp: Path, page: Path) -> DOM:
    r = chrome(tmp, "--virtual-time-budget=3000", "--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-500:]
    d = DOM()
    d.feed(r.stdout)
    return d


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, P.ScanResult]:
    tmp = tmp_path_factory.mktemp("html")
    arch = tmp / "arch"
    r = subprocess.run([sys.executable, "-m", "forensics.cli", "corpus", "generate", str(arch), "--runs", "8",
                        "--seed", "11"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("corpus generator unavailable")
    res = P.scan(arch, out=tmp / "report", progress=False)
    return tmp / "report", res


def test_index_renders_sorted_table_and_links(report, tmp_path):
    out, res = report
    d = dump(tmp_path, out / "index.html")
    assert d.body_attrs.get("data-js") == "ready"              # the inline script ran
    rows = d.tables["runs"]
    header, body = rows[0], rows[1:]
    assert header[0].startswith("run") and "verdict" in header
    assert len(body) == len(res.run_ids)
    assert d.table_attrs["runs"].get("data-sorted-by") == "run:asc"   # default sort applied by JS
    names = [r[0] for r in body]
    assert names == sorted(names)
    vcol = header.index("verdict")
    assert {r[vcol] for r in body} == {v["verdict"] for v in res.verdicts}
    run_links = [h for h in d.links if h.startswith("runs/")]
    assert len(run_links) >= len(res.run_ids)
    for h in run_links:
        assert (out / unquote(urlparse(h).path)).is_file(), h
    assert "verdict-counts" in d.ids


def test_run_page_renders_fields_findings_and_plot(report, tmp_path):
    out, res = report
    pages = sorted((out / "runs").glob("*.html"))
    with_plot = [p for p in pages if p.with_suffix(".timeline.png").exists()]
    page = with_plot[0] if with_plot else pages[0]
    d = dump(tmp_path, page)
    fields = d.tables["fields"]
    assert [r[0] for r in fields[1:]] == list(P.V.FIELDS)
    assert all(len(r) == 5 for r in fields)
    assert "../index.html" in d.links
    for src in d.imgs:
        assert (page.parent / src).is_file()
    if with_plot:
        assert d.imgs


def test_screenshot(report, tmp_path):
    out, _ = report
    shot = tmp_path / "index.png"
    r = chrome(tmp_path, "--window-size=1400,1000", f"--screenshot={shot}", (out / "index.html").as_uri())
    assert r.returncode == 0, r.stderr[-300:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_heatmap_and_contamination_sections(tmp_path):
    """Index with similarity pairs and a deliberate foreign read, rendered from store rows."""
    from forensics.report.html import index_html
    overview = [{"run_id": f"r{i}", "run_name": f"run_{i}", "problem": "01_fp8_gemm", "harness": "claude",
                 "verdict": "clean" if i else "contamination", "archived": None} for i in range(3)]
    pairs = [{"a_id": "r0", "b_id": "r1", "jaccard": 0.63, "jaccard_est": 0.6},
             {"a_id": "r1", "b_id": "r2", "jaccard": 0.12, "jaccard_est": 0.1}]
    foreign = [{"run_id": "r0", "foreign_run_id": "r1", "classification": "deliberate_read", "foreign_file": "solution.py",
                "same_problem": True, "call_seq": 41, "reason": "cat of solution.py"}]
    names = {f"r{i}": f"r{i}" for i in range(3)}
    (tmp_path / "runs").mkdir()
    for i in range(3):
        (tmp_path / "runs" / f"r{i}.html").write_text("<html><body>run</body></html>")
    page = tmp_path / "index.html"
    page.write_text(index_html(overview, foreign, pairs, {"archive": "x"}, names))
    d = dump(tmp_path, page)
    assert d.svg_cells == 9
    c = d.tables["contamination"]
    assert c[1][0] == "r0" and c[1][2] == "r1" and "runs/r1.html" in d.links


# --------------------------------------------------------------------------- the index at 1400 px

# Run in the page once it has loaded, its script has sorted the table and its fonts are in: the
# viewport, every header and run id of the runs table with the boxes the browser laid them out in,
# and every table cell of the page that reaches past the window or overflows its own box.  The
# result goes into an attribute of <html>, which --dump-dom prints (nothing on the page moves).
LAYOUT_PROBE = """
window.addEventListener('load', function () { document.fonts.ready.then(function () { setTimeout(function () {
  var de = document.documentElement, vw = de.clientWidth, sy = window.scrollY;
  function xy(r) { return [r.left, r.top + sy, r.right, r.bottom + sy]; }
  function shown(el) { for (var e = el; e && e.nodeType === 1; e = e.parentElement) {
    var s = getComputedStyle(e); if (s.display === 'none' || s.visibility !== 'visible' || s.opacity === '0') return false; }
    return true; }
  var out = {vw: vw, inner: window.innerWidth, page_w: de.scrollWidth, page_h: de.scrollHeight, overflow: []};
  var runs = document.getElementById('runs');
  if (runs) {
    var box = runs.closest('.wide') || runs.parentElement;
    out.box = {client: box.clientWidth, scroll: box.scrollWidth, rect: xy(box.getBoundingClientRect())};
    out.headers = Array.prototype.map.call(runs.tHead.rows[0].cells, function (th) {
      return {text: th.textContent.replace(/[\\u25B2\\u25BC]/g, '').trim(), rect: xy(th.getBoundingClientRect()),
              shown: shown(th), over: th.scrollWidth - th.clientWidth}; });
    out.runs = Array.prototype.map.call(runs.tBodies[0].rows, function (tr) {
      var td = tr.cells[0], a = td.querySelector('a');
      return {text: a ? a.textContent : td.textContent, rect: xy(td.getBoundingClientRect()), shown: shown(a || td),
              lines: Array.prototype.map.call((a || td).getClientRects(), xy), over: td.scrollWidth - td.clientWidth}; });
  }
  document.querySelectorAll('table').forEach(function (t) {
    Array.prototype.forEach.call(t.rows, function (tr, i) { Array.prototype.forEach.call(tr.cells, function (c, j) {
      var r = c.getBoundingClientRect();
      if (r.right > vw + 0.5 || r.left < -0.5 || c.scrollWidth > c.clientWidth + 1)
        out.overflow.push({table: t.id, row: i, col: j, right: r.right, over: c.scrollWidth - c.clientWidth,
                           text: c.textContent.trim().slice(0, 60)});
    }); }); });
  de.setAttribute('data-layout', JSON.stringify(out));
}, 0); }); });
"""


def layout(tmp: Path, page: Path, width: int, height: int) -> dict:
    """LAYOUT_PROBE's measurements of `page` in a window of width x height (a copy of the page
    with the probe added, beside it so that its relative links stay as they are)."""
    import html
    import json
    import re
    probe = page.with_name(page.stem + ".layout-probe.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", f"<script>{LAYOUT_PROBE}</script></body>"),
                     encoding="utf-8")
    try:
        r = chrome(tmp, f"--window-size={width},{height}", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    assert r.returncode == 0, r.stderr[-500:]
    m = re.search(r'<html[^>]*\sdata-layout="([^"]*)"', r.stdout)
    assert m, "the layout probe did not run: " + r.stdout[:300]
    return json.loads(html.unescape(m.group(1)))


def ink(img, rect, test) -> int:
    """How many pixels of `img` inside rect (x0, y0, x1, y1; CSS px are image px) pass `test`."""
    import numpy as np
    x0, y0, x1, y1 = (int(rect[0]) + 1, int(rect[1]) + 1, int(rect[2]), int(rect[3]))
    if x1 <= x0 or y1 <= y0:
        return 0
    return int(test(np.asarray(img.crop((x0, y0, x1, y1)), dtype=np.int16)).sum())


def link_blue(a):
    return a[..., 2] - a[..., :2].max(axis=-1) > 80      # the default link colour's ink, pale edges left out


def dark(a):
    return a.max(axis=-1) < 110


@pytest.fixture(scope="module")
def fixture_report(tmp_path_factory) -> tuple[Path, list[str]]:
    """The bundled fixture archive scanned: 49 runs of every harness, ids up to 77 characters, one
    with '__', contamination links with paths in their reasons."""
    import duckdb
    from conftest import FIXTURE_ARCHIVE
    out = tmp_path_factory.mktemp("fixture-html") / "report"
    res = P.scan(FIXTURE_ARCHIVE, out=out, progress=False)
    con = duckdb.connect(res.db, read_only=True)
    try:
        names = [n for (n,) in con.execute("select coalesce(run_name, run_id) from runs").fetchall()]
    finally:
        con.close()
    assert len(names) == len(res.run_ids) >= 40
    return out, names


def check_fits(d: dict, names: list[str], where: str) -> None:
    from forensics.report.html import RUNS_COLUMNS
    vw = d["vw"]
    assert d["page_w"] <= vw, f"{where}: the page scrolls sideways ({d['page_w']} px in a {vw} px window)"
    assert d["box"]["scroll"] <= d["box"]["client"], f"{where}: the runs table scrolls in its box: {d['box']}"
    assert [h["text"] for h in d["headers"]] == list(RUNS_COLUMNS)
    for h in d["headers"]:
        assert h["shown"] and h["over"] <= 0 and 0 <= h["rect"][0] and h["rect"][2] <= vw, (where, h)
    assert sorted(r["text"] for r in d["runs"]) == sorted(names), where   # every run, its id whole
    for r in d["runs"]:
        assert r["shown"] and r["over"] <= 0 and r["lines"], (where, r)
        for ln in r["lines"]:
            assert r["rect"][0] <= ln[0] and ln[2] <= r["rect"][2] and 0 <= ln[0] and ln[2] <= vw, (where, r["text"], ln)
    assert d["overflow"] == [], f"{where}: table cells past the window or overflowing their box: {d['overflow'][:5]}"


def test_index_at_1400px_shows_every_column_and_run_id(fixture_report, tmp_path):
    """Issue 37: a 1400 px window shows the runs table's every column and every run id whole, and
    no table of the page reaches past the window.  Measured twice: in a 1400 x 1000 window (the
    page scrolls down, so a scroll bar takes its width off the 1400 px), and in a window as tall as
    the page, screenshotted at that size: every header and run id box the page reports has its
    text's ink in the screenshot."""
    from PIL import Image
    out, names = fixture_report
    index = out / "index.html"
    d = layout(tmp_path, index, 1400, 1000)
    assert d["inner"] == 1400 and d["page_h"] > 1000 and d["vw"] <= 1400
    check_fits(d, names, "1400x1000")

    # a window taller than the page (the headless window's viewport is shorter than the window by
    # its frame, about 150 px): no scroll bar, the whole page in one screenshot
    height = int(d["page_h"]) + 400
    full = layout(tmp_path, index, 1400, height)
    assert full["vw"] == 1400, "still a scroll bar in a window taller than the page"
    check_fits(full, names, f"1400x{height}")
    shot = tmp_path / "index-1400.png"
    r = chrome(tmp_path, f"--window-size=1400,{height}", "--virtual-time-budget=10000", f"--screenshot={shot}",
               index.as_uri())
    assert r.returncode == 0, r.stderr[-300:]
    img = Image.open(shot).convert("RGB")
    assert img.size[0] == 1400 and img.size[1] >= max(r["rect"][3] for r in full["runs"]), img.size
    for h in full["headers"]:
        assert ink(img, h["rect"], dark) >= 8 * len(h["text"].replace(" ", "")), ("header not drawn", h)  # ~22 here
    for row in full["runs"]:
        drawn = sum(ink(img, ln, link_blue) for ln in row["lines"])
        assert drawn >= 10 * len(row["text"]), ("run id not drawn", row["text"], drawn)   # ~27 a character here
