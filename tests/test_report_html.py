"""The HTML report in a real headless browser (Debian chromium): the pages load, the JS ran
(sorting applied, marker set), the tables and links render and resolve, a screenshot is taken.
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
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")


def chrome(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp / 'profile'}", *args]
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
