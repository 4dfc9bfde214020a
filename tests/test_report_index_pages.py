"""The index of a large archive (issue 39): past INDEX_PAGE_RUNS runs the runs table comes in pages
(the first on index.html, the others under pages/) with a pager on each, a search over every run
(pages/runs-index.js, loaded on first use), and the counts of all the runs; the rows are read a page
at a time.  A report folder lists the pages as its own files, so a smaller rescan removes the extra
pages."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from forensics import pipeline as P
from forensics.report import folder
from forensics.report import html as H

from tests.test_report_index import long_id, overview_row, parse

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "corpus" / "fixtures" / "archive"


def _rows(n: int) -> list[dict]:
    verdicts = ["clean", "contamination", "fail", "reward_hack"]
    return [overview_row(i, verdicts[i % 4], publish_grade="true" if i % 4 == 0 and i % 8 else "false")
            for i in range(n)]


def test_small_index_is_one_table(tmp_path: Path):
    rows = _rows(4)
    names = {r["run_id"]: r["run_id"] for r in rows}
    assert H.write_index(tmp_path, iter(rows), 4, [], [], {}, names) == ["index.html"]
    assert (tmp_path / "index.html").read_text() == H.index_html(rows, [], [], {}, names)
    assert H.index_files(4) == [] and not (tmp_path / H.INDEX_DIR).exists()


def test_large_index_comes_in_pages_with_a_search(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(H, "INDEX_PAGE_RUNS", 5)
    rows = _rows(12)
    names = {r["run_id"]: r["run_id"] for r in rows}
    pulled: list[int] = []

    def lazily():          # the writer reads the rows as they come
        for i, r in enumerate(rows):
            pulled.append(i)
            yield r
    files = H.write_index(tmp_path, lazily(), 12, [], [], {"archive": "/a"}, names)
    assert files == ["index.html", "pages/runs-2.html", "pages/runs-3.html", "pages/runs-index.js"]
    assert H.index_files(12) == files[1:] and pulled == list(range(12))
    idx = (tmp_path / "index.html").read_text()
    t = parse(idx)
    shown = [row[0][0] for row in t.tables["runs"][1:]]
    assert shown == [long_id(i) for i in range(5)]
    # the counts are of all twelve runs, not of the page
    cards = dict(re.findall(r'<span class="v v-(\w+)">\w+</span><b>(\d+)</b>', idx))
    assert cards == {"clean": "3", "contamination": "3", "fail": "3", "reward_hack": "3"}
    assert "12 runs, 1 publishable" in idx
    assert "Runs 1-5 of 12 (page 1 of 3)" in idx and 'href="pages/runs-2.html"' in idx
    assert 'id="search"' in idx and "pages/runs-index.js" in idx
    p3 = (tmp_path / "pages" / "runs-3.html").read_text()
    t3 = parse(p3)
    assert [row[0][0] for row in t3.tables["runs"][1:]] == [long_id(10), long_id(11)]
    assert "Runs 11-12 of 12 (page 3 of 3)" in p3 and 'href="../index.html"' in p3
    assert all(h.startswith(("../runs/", "../index.html", "../pages/")) for h in t3.hrefs), t3.hrefs
    assert (tmp_path / "pages" / "runs-2.html").is_file()
    js = (tmp_path / "pages" / "runs-index.js").read_text()
    data = json.loads(js[js.index("["):js.rindex("]") + 1].replace(",\n]", "\n]"))
    assert [(d[0], d[1], d[2], d[5]) for d in data] == [(long_id(i), long_id(i), rows[i]["verdict"], i // 5 + 1)
                                                         for i in range(12)]


def test_a_scan_writes_the_pages_and_a_smaller_rescan_removes_them(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(H, "INDEX_PAGE_RUNS", 4)
    arch = tmp_path / "a"
    srcs = sorted(FIXTURE.glob("outputs/*/*"))[:9]
    for src in srcs:
        shutil.copytree(src, arch / src.relative_to(FIXTURE), symlinks=True)
    out = tmp_path / "r"
    res = P.scan(arch, out=out, progress=False, jobs=1, reports=True)
    assert len(res.run_ids) == 9
    assert sorted(p.name for p in (out / "pages").iterdir()) == ["runs-2.html", "runs-3.html", "runs-index.js"]
    marker = folder.read_marker(out)
    assert {"pages/runs-2.html", "pages/runs-3.html", "pages/runs-index.js"} <= set(marker["files"])
    # every run is on a page, linked to its run page
    linked = set()
    for f in ("index.html", "pages/runs-2.html", "pages/runs-3.html"):
        for h in parse((out / f).read_text()).hrefs:
            m = re.match(r"(?:\.\./)?runs/(.+)\.html$", h)
            if m:
                linked.add(m.group(1))
    assert len(linked) == 9
    for src in srcs[4:]:
        shutil.rmtree(arch / src.relative_to(FIXTURE))
    P.scan(arch, out=out, progress=False, jobs=1)
    assert not (out / "pages").exists() or not any((out / "pages").iterdir())
    assert len(parse((out / "index.html").read_text()).tables["runs"]) == 1 + 4
