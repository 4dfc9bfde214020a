"""Reports of a scan: annotation YAML per run, scan.json, and the HTML report with plots.

    from forensics.report import write_reports
    paths = write_reports(store, "report/", run_ids)

Layout under OUT: index.html, runs/<run>.html (+ runs/<run>.timeline.png), annotations/<run>.yaml
(<run>: the run id where it is a portable file name, forensics.archive.runid.run_file_names),
scan.json (written by the pipeline after the reports, with the final timings).  Data is gathered
from the store in the calling process (DuckDB has one writer); rendering (HTML, YAML, matplotlib)
runs in a process pool with `jobs > 1`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from forensics.store.db import Store

__all__ = ["plot_runs", "write_reports", "render_run"]


def _timeline_data(store: Store, run_id: str) -> dict[str, Any] | None:
    try:
        from forensics.analyze.timeline.report import timeline
    except Exception:  # noqa: BLE001 - timeline module absent: no plot
        return None
    try:
        t = timeline(store, run_id)
    except Exception:  # noqa: BLE001
        return None
    if not t.get("checks") and not (t.get("solution") or {}).get("versions"):
        return None
    return t


def render_run(args) -> tuple[str, str | None]:
    """Render one run's YAML, HTML and timeline PNG (runs in a worker process)."""
    rep, out, page_name, page_names, tl = args
    from forensics.report.annotation import write_annotation
    from forensics.report.html import run_html
    out = Path(out)
    write_annotation(rep, out / "annotations" / f"{page_name}.yaml")
    plot_name = None
    if tl is not None:
        try:
            from forensics.analyze.timeline.report import plot
            plot(tl, str(out / "runs" / f"{page_name}.timeline.png"))
            plot_name = f"{page_name}.timeline.png"
        except Exception as e:  # noqa: BLE001 - a plot failure must not lose the page
            print(f"timeline plot failed for {rep['run']['run_id']}: {e}", file=sys.stderr)
    html_text = run_html(rep, plot_name, page_names)
    p = out / "runs" / f"{page_name}.html"
    tmp = p.with_suffix(".html.tmp")
    tmp.write_text(html_text, encoding="utf-8")
    tmp.replace(p)
    return rep["run"]["run_id"], plot_name


MAX_PNG_PLOTS = 60


def plot_runs(store: Store, run_ids: Sequence[str], max_png: int = MAX_PNG_PLOTS) -> set[str]:
    """The runs whose page gets a timeline PNG: the first `max_png` of `run_ids` (in their order)
    that want one.  Decided over all the runs, never over the pages a scan happens to re-render, so a
    resumed scan plots exactly the runs an uninterrupted one does."""
    if max_png <= 0 or not run_ids:
        return set()
    rows = store.query("select r.run_id, v.verdict as v, (select count(*) from findings f where f.run_id = r.run_id "
                       "and f.analyzer = 'timeline' and f.severity in ('medium', 'high', 'critical')) as n, "
                       "(exists (select 1 from check_runs c where c.run_id = r.run_id) or exists (select 1 from "
                       "file_versions fv where fv.run_id = r.run_id and fv.is_solution)) as data "
                       "from runs r left join verdicts v using (run_id) where r.run_id in (select unnest(?::VARCHAR[]))",
                       [list(run_ids)])
    # (a run with neither checks nor solution versions has no timeline to plot: _timeline_data)
    want = {r["run_id"] for r in rows if r["data"] and (r["n"] or r["v"] not in ("clean", "retryable_infra_failure", None))}
    return set([rid for rid in run_ids if rid in want][:max_png])


_WS: dict[str, Any] = {}


def _worker_open(db_path: str, out: str | None = None, page_names: dict[str, str] | None = None) -> None:
    """A report worker: its store of one chunk of runs at a time (the store file attached
    read-only), and what every task of the scan shares (the folder, the page names), sent once."""
    from forensics.store.chunks import ChunkStore
    _WS["chunks"] = ChunkStore.reading(db_path)
    _WS["out"], _WS["page_names"] = out, page_names


def _worker_render(args) -> list[tuple[str, str | None]]:
    """In a worker: load a chunk of runs into the worker's chunk store, gather each run's data from
    it and render the run."""
    from forensics.analyze.registry import REPORT
    chunk, png = args
    mem = _WS["chunks"].load(chunk, REPORT.reads_all)
    return [render_run(_gather(mem, rid, _WS["out"], _WS["page_names"], rid in png)) for rid in chunk]


def _gather(store: Store, rid: str, out: str, page_names: dict[str, str], png: bool) -> tuple:
    from forensics.report.data import run_report
    return (run_report(store, rid), out, page_names[rid], page_names, _timeline_data(store, rid) if png else None)


def write_reports(store: Store, out: str | Path, run_ids: Sequence[str], rerender: Iterable[str] | None = None,
                  jobs: int = 1, progress: bool = False, scan_info: dict[str, Any] | None = None,
                  plots: bool = True, max_png: int = MAX_PNG_PLOTS, png: set[str] | None = None,
                  rendered: list[str] | None = None) -> dict[str, str]:
    """Write the per-run YAML/HTML (+PNG) for `rerender` (all runs if None; plus any whose files are
    missing) and the index for all `run_ids`.  PNG timeline plots go to the runs of `png` (default
    `plot_runs`: at most `max_png` of all the runs, suspicious ones); a re-rendered page without one
    loses a stale PNG.  The inline SVG trajectory is on every page.  `rendered` gets the runs whose
    page and annotation were written.

    Pages are gathered and rendered chunk by chunk (forensics.store.chunks: each chunk's rows in a
    store of their own, so a page's queries cost the same in an archive of any size, and what is held
    is one chunk's), in `jobs` worker processes when there are enough of them."""
    from forensics.analyze.registry import REPORT
    from forensics.report.data import iter_runs_overview
    from forensics.report.html import run_page_names, verdict_html, write_index
    from forensics.store.chunks import CHUNK_RUNS, ChunkStore, chunk_stores_above, chunks
    out = Path(out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / "annotations").mkdir(parents=True, exist_ok=True)
    page_names = run_page_names(run_ids)
    if png is None:
        png = plot_runs(store, run_ids, max_png) if plots else set()
    redo = set(run_ids) if rerender is None else set(rerender)
    for rid in run_ids:
        pn = page_names[rid]
        if not (out / "runs" / f"{pn}.html").exists() or not (out / "annotations" / f"{pn}.yaml").exists() \
                or (rid in png) != (out / "runs" / f"{pn}.timeline.png").exists():
            redo.add(rid)
    todo = [rid for rid in run_ids if rid in redo]
    for rid in todo:   # a page re-rendered without a plot keeps no plot of an earlier scan
        if rid not in png:
            (out / "runs" / f"{page_names[rid]}.timeline.png").unlink(missing_ok=True)
    bar = None
    if progress and todo:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), unit="run", desc="report", file=sys.stderr, leave=False)

    def done(res: tuple[str, str | None]) -> None:
        if rendered is not None:
            rendered.append(res[0])
        if bar:
            bar.update(1)

    if jobs > 1 and len(todo) > 4 and store.path != ":memory:":
        # DuckDB has one writer: release ours, let the workers read the file, then reopen.
        import duckdb
        from forensics.pool import pmap
        # chunks small enough that every worker gets several (a chunk is one task)
        size = max(1, min(CHUNK_RUNS, -(-len(todo) // (4 * jobs))))
        work = [c for c in chunks(store, todo, max_runs=size)]
        store.con.execute("CHECKPOINT")
        store.con.close()
        try:
            lost_runs: list[str] = []

            def lost(a, reason):
                if len(a[0]) > 1:       # which page killed the worker is unknown: each again alone
                    lost_runs.extend(a[0])
                else:
                    print(f"report: the page of run {a[0][0]} was not written: {reason}", file=sys.stderr)
                return None
            init = (store.path, str(out), page_names)
            for batch in ([(c, png & set(c)) for c in work], [([rid], png & {rid}) for rid in lost_runs]):
                for res in pmap(_worker_render, batch, jobs, initializer=_worker_open, initargs=init,
                                ordered=False, lost=lost):
                    for r in res or ():
                        done(r)
        finally:
            store.con = duckdb.connect(store.path)
    elif store.scalar("select count(*) from runs") > chunk_stores_above():
        with ChunkStore.beside(store) as cs:
            for c in chunks(store, todo):
                mem = cs.load(c, REPORT.reads_all)
                for rid in c:
                    done(render_run(_gather(mem, rid, str(out), page_names, rid in png)))
    else:   # a store no larger than a chunk: its pages gathered from it directly
        for rid in todo:
            done(render_run(_gather(store, rid, str(out), page_names, rid in png)))
    if bar:
        bar.close()
    want = set(run_ids)
    # (the links the index lists: deliberate reads and copies, not every reference)
    foreign = [f for f in store.query("select * from foreign_refs where classification in ('deliberate_read', 'copy') "
                                      "order by run_id, call_seq") if f["run_id"] in want]
    pairs = [p for p in store.query("select a_id, b_id, jaccard, jaccard_est from similarity_pairs")
             if p["a_id"] in want or p["b_id"] in want]
    write_index(out, iter_runs_overview(store, run_ids), len(run_ids), foreign, pairs, scan_info or {}, page_names)
    (out / "verdict.html").write_text(verdict_html(), encoding="utf-8")   # the decision table the pages link to
    return {"index": str(out / "index.html"), "verdict": str(out / "verdict.html"), "runs": str(out / "runs"), "annotations": str(out / "annotations"),
            "scan_json": str(out / "scan.json")}
