"""The human report: index.html (archive overview) and runs/<run>.html (one page per run).

Hand-written HTML (html.escape everywhere), one small inline stylesheet and one small inline
script (click a column header to sort; a filter box).  No external resources: the report opens
from disk, offline.
"""

from __future__ import annotations

import html
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from forensics import verdict as V
from forensics.analyze.findings import severity_key
from forensics.report.prose import implication, reader_summary

E = html.escape

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1f23;max-width:1500px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:13px}th,td{border:1px solid #d0d7de;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f3f4f6;position:sticky;top:0}table.sortable th{cursor:pointer;user-select:none}
th.asc:after{content:" \\25B2"}th.desc:after{content:" \\25BC"}tr:nth-child(even) td{background:#fafbfc}
.v{font-weight:600;padding:1px 6px;border-radius:4px;white-space:nowrap}
.v-clean{background:#dafbe1;color:#116329}.v-reward_hack,.v-contamination,.v-rubric_leak{background:#ffebe9;color:#a40e26}
.v-fail,.v-timeout_unverified,.v-fail_forbidden_op_tripwire{background:#fff8c5;color:#7d4e00}.v-unknown,.v-suspect{background:#eaeef2;color:#57606a}
.v-retryable_infra_failure{background:#ddf4ff;color:#0550ae}
.cards{display:flex;gap:10px;flex-wrap:wrap}.card{border:1px solid #d0d7de;border-radius:6px;padding:6px 12px;min-width:90px}
.card b{display:block;font-size:20px}.muted{color:#57606a}.sev-critical,.sev-high{color:#a40e26;font-weight:600}
.sev-medium{color:#7d4e00}pre{background:#f6f8fa;border:1px solid #d0d7de;padding:8px;overflow-x:auto;font-size:12px;
white-space:pre-wrap;word-break:break-all;max-height:420px}code{font-size:12px}
.agree{color:#116329}.disagree{color:#a40e26;font-weight:600}.cannot_tell{color:#57606a}
input#filter{padding:4px 8px;width:320px;margin:4px 0}img.plot{max-width:100%;border:1px solid #d0d7de}
.wide{overflow-x:auto;max-width:100%}
#runs td:first-child,#contamination td:nth-child(1),#contamination td:nth-child(3){min-width:30ch;overflow-wrap:anywhere}
#runs .v{white-space:normal;-webkit-box-decoration-break:clone;box-decoration-break:clone}
ul.legend{margin:4px 0;padding-left:20px}ul.legend li{margin:2px 0}tr:target td{background:#fff8c5}
"""

JS = """
function cellValue(tr,i){var c=tr.children[i];if(!c)return'';var s=c.getAttribute('data-sort');return s!==null?s:c.textContent.trim();}
function sortTable(th){var table=th.closest('table');var tb=table.tBodies[0];var i=Array.prototype.indexOf.call(th.parentNode.children,th);
var asc=!th.classList.contains('asc');Array.prototype.forEach.call(th.parentNode.children,function(h){h.classList.remove('asc','desc');});
th.classList.add(asc?'asc':'desc');var rows=Array.prototype.slice.call(tb.rows);
rows.sort(function(a,b){var x=cellValue(a,i),y=cellValue(b,i);var nx=parseFloat(x),ny=parseFloat(y);
var num=/^-?[0-9]+([.][0-9]+)?(e-?[0-9]+)?$/;var r=(num.test(x)&&num.test(y))?nx-ny:x.localeCompare(y);
return asc?r:-r;});rows.forEach(function(r){tb.appendChild(r);});table.setAttribute('data-sorted-by',th.textContent+(asc?':asc':':desc'));}
document.addEventListener('DOMContentLoaded',function(){
document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',function(){sortTable(th);});});
var f=document.getElementById('filter');if(f){f.addEventListener('input',function(){var q=f.value.toLowerCase();
document.querySelectorAll('#runs tbody tr').forEach(function(tr){tr.style.display=tr.textContent.toLowerCase().indexOf(q)>=0?'':'none';});});}
var d=document.querySelector('table[data-default-sort]');if(d){var col=d.getAttribute('data-default-sort');
d.querySelectorAll('th').forEach(function(th){if(th.textContent.trim()===col){sortTable(th);}});}
document.body.setAttribute('data-js','ready');});
"""


def safe_name(run_id: str) -> str:
    """The file-name stem of one run's page and annotation (forensics.archive.runid.run_file_name);
    a report names its runs with `page_names`."""
    from forensics.archive.runid import run_file_name
    return run_file_name(run_id)


def run_page_names(run_ids) -> dict[str, str]:
    """run id -> the file-name stem of its page, annotation and plot: the run id itself where it is
    a portable file name, injective over the set also where case is folded
    (forensics.archive.runid.run_file_names)."""
    from forensics.archive.runid import run_file_names
    return run_file_names(run_ids)


def href(name: str) -> str:
    """A file name as the path of a link (percent-encoded: a run id may hold '#', '%', spaces or
    non-ASCII letters), HTML-escaped for an attribute."""
    from urllib.parse import quote
    return E(quote(name, safe=""))


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def breakable(text: str) -> str:
    """Escaped text that may wrap after each '_', '/' and '.' (a <wbr>, which copies as nothing), so
    a run id or a snake_case value wraps between its words instead of widening its column."""
    return E(text).replace("_", "_<wbr>").replace("/", "/<wbr>").replace(".", ".<wbr>")


def badge(verdict: Any, wrap: bool = False) -> str:
    """A verdict's coloured label, whole; with `wrap` it may break after its '_' (the runs table,
    where a 26-character verdict would otherwise take the width its run ids need)."""
    v = fmt(verdict)
    return f'<span class="v v-{E(v)}">{breakable(v) if wrap else E(v)}</span>'


def page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{E(title)}</title>"
            f"<style>{CSS}</style></head><body>\n{body}\n<script>{JS}</script></body></html>\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "", id_: str = "", attrs: str = "") -> str:
    """rows hold already-escaped HTML cells; a cell may be (html, sort_key)."""
    h = "".join(f"<th>{E(x)}</th>" for x in headers)
    body = []
    for r in rows:
        tds = []
        for c in r:
            if isinstance(c, tuple):
                tds.append(f'<td data-sort="{E(str(c[1]))}">{c[0]}</td>')
            else:
                tds.append(f"<td>{c}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return (f'<table class="{cls}"' + (f' id="{id_}"' if id_ else "") + (f" {attrs}" if attrs else "")
            + f"><thead><tr>{h}</tr></thead><tbody>\n" + "\n".join(body) + "\n</tbody></table>")


# ---------------------------------------------------------------------------------------------
HEATMAP_MAX_RUNS = 60
MONO_CHAR_W = 6.1      # px per character of the 10 px monospace labels (a generous estimate)


def heatmap_svg(pairs: list[dict[str, Any]], names: dict[str, str], max_runs: int = HEATMAP_MAX_RUNS,
                cell: int = 16) -> str:
    """Inline SVG heat map of the most similar solutions (jaccard, or the MinHash estimate), with a
    caption saying how many runs it shows of how many, and how they were chosen.  Labels are whole
    run names (the run id where a run has no name): the canvas grows to fit them, none is cut."""
    if not pairs:
        return '<p class="muted">No similar solution pairs were recorded (similarity_pairs is empty).</p>'
    score: dict[str, float] = {}
    val: dict[tuple[str, str], float] = {}
    for p in pairs:
        j = p.get("jaccard") if p.get("jaccard") is not None else p.get("jaccard_est")
        if j is None:
            continue
        a, b = p["a_id"], p["b_id"]
        val[(a, b)] = val[(b, a)] = max(float(j), val.get((a, b), 0.0))
        score[a] = max(score.get(a, 0.0), float(j))
        score[b] = max(score.get(b, 0.0), float(j))
    ranked = sorted(score, key=lambda i: (-score[i], i))
    ids = sorted(ranked[:max_runs])
    n = len(ids)
    if n == 0:
        return '<p class="muted">No scored pairs.</p>'
    left_out = ranked[max_runs:]
    if left_out:
        cut = score[ranked[max_runs - 1]]
        caption = (f"The {n} runs whose solutions are most similar to another run's (highest similarity "
                   f"{cut:.2f} or more), of the {len(ranked)} runs with a scored pair; the other {len(left_out)} "
                   f"(highest similarity {score[left_out[0]]:.2f} or less) are left out of the map - their pairs "
                   "are on their run pages and in the store's similarity_pairs table.")
    else:
        caption = f"All {n} runs with a scored pair (the store's similarity_pairs table)."
    caption += (" Colour: Jaccard similarity of the two final solutions (the MinHash estimate where the exact "
                "value was not computed); hover a cell for the pair and its value.")
    label = lambda i: names.get(i) or i   # noqa: E731
    longest = max(len(label(i)) for i in ids)
    left = int(MONO_CHAR_W * longest) + 10          # row labels, right-aligned before the grid
    top = int(MONO_CHAR_W * longest) + 10           # column labels, vertical above the grid
    right = 60                                      # the colour scale
    size = n * cell
    parts = [f'<p class="muted" id="heatmap-caption">{E(caption)}</p>',
             f'<div class="wide"><svg xmlns="http://www.w3.org/2000/svg" id="heatmap" width="{left + size + right}" '
             f'height="{top + size + 20}" font-size="10" font-family="monospace">']
    for i, a in enumerate(ids):
        full = E(label(a))
        parts.append(f'<text class="row-label" x="{left - 4}" y="{top + i * cell + cell - 4}" text-anchor="end">{full}</text>')
        parts.append(f'<text class="col-label" transform="translate({left + i * cell + cell // 2 + 3},{top - 4}) rotate(-90)">'
                     f'{full}</text>')
        for k, b in enumerate(ids):
            j = 1.0 if a == b else val.get((a, b), 0.0)
            r = int(255 - 200 * j)
            g = int(255 - 170 * j)
            color = f"rgb({r},{g},255)" if a != b else "#cccccc"
            parts.append(f'<rect class="cell" x="{left + k * cell}" y="{top + i * cell}" width="{cell - 1}" '
                         f'height="{cell - 1}" fill="{color}"><title>{full} ~ {E(label(b))}: '
                         f'{j:.2f}</title></rect>')
    parts.append(f'<text x="{left + size + 6}" y="{top + 12}">1.0</text>'
                 f'<rect x="{left + size + 6}" y="{top + 16}" width="12" height="12" fill="rgb(55,85,255)"/>'
                 f'<text x="{left + size + 6}" y="{top + 44}">0.0</text>'
                 f'<rect x="{left + size + 6}" y="{top + 48}" width="12" height="12" fill="rgb(255,255,255)" stroke="#999"/>')
    parts.append("</svg></div>")
    return "".join(parts)


def trajectory_svg(checks: list[dict[str, Any]], versions: list[dict[str, Any]], final_pf: float | None,
                   width: int = 900, height: int = 220) -> str:
    """Inline SVG of the in-session trajectory: benchmark peak_fraction per tool call, check
    outcomes, solution versions (the archived final one highlighted) and the post-session grade."""
    sol = [v for v in versions if str(v.get("rel_path") or v.get("path") or "").endswith("solution.py") and v.get("call_seq")]
    pts = [c for c in checks if c.get("call_seq")]
    if not pts and not sol:
        return ""
    xmax = max([c["call_seq"] for c in pts] + [v["call_seq"] for v in sol] + [1])
    bench = [c for c in pts if c.get("script") == "benchmark" and c.get("peak_fraction") is not None]
    ymax = max([c["peak_fraction"] for c in bench] + [final_pf or 0, 0.01]) * 1.15
    L, R, T, B = 50, 10, 10, 30
    W, H = width - L - R, height - T - B

    def X(v):
        return L + W * v / xmax

    def Y(v):
        return T + H - H * v / ymax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trajectory" width="{width}" height="{height}" font-size="10" '
           f'font-family="sans-serif"><rect x="{L}" y="{T}" width="{W}" height="{H}" fill="#fff" stroke="#d0d7de"/>']
    for v in sol:
        fin = bool(v.get("matches_final"))
        out.append(f'<line class="version" x1="{X(v["call_seq"]):.1f}" x2="{X(v["call_seq"]):.1f}" y1="{T}" y2="{T + H}" '
                   f'stroke="{"#ff7f0e" if fin else "#ccc"}" stroke-width="{2 if fin else 1}"><title>solution v{v.get("version")} '
                   f'(call {v["call_seq"]}{", archived final" if fin else ""})</title></line>')
    if final_pf is not None:
        out.append(f'<line x1="{L}" x2="{L + W}" y1="{Y(final_pf):.1f}" y2="{Y(final_pf):.1f}" stroke="#ff7f0e" '
                   f'stroke-dasharray="4 3"><title>post-session grade {final_pf}</title></line>')
    if bench:
        path = " ".join(f"{X(c['call_seq']):.1f},{Y(c['peak_fraction']):.1f}" for c in bench)
        out.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
        for c in bench:
            out.append(f'<circle class="bench" cx="{X(c["call_seq"]):.1f}" cy="{Y(c["peak_fraction"]):.1f}" r="3" fill="#1f77b4">'
                       f'<title>call {c["call_seq"]}: peak_fraction {c["peak_fraction"]} (v{c.get("solution_version")})</title></circle>')
    colors = {"PASS": "#2ca02c", "FAIL": "#d62728", "ERROR": "#9467bd", "TIMEOUT": "#8c564b"}
    for c in pts:
        if c.get("script") == "benchmark":
            continue
        col = colors.get(c.get("outcome"), "#7f7f7f")
        out.append(f'<rect class="check" x="{X(c["call_seq"]) - 3:.1f}" y="{T + H - 8}" width="6" height="6" fill="{col}">'
                   f'<title>call {c["call_seq"]}: check {E(str(c.get("outcome")))} on v{c.get("solution_version")}'
                   f'{" (superseded)" if c.get("superseded") else ""}</title></rect>')
    out.append(f'<text x="{L}" y="{height - 8}">tool call 0</text><text x="{L + W}" y="{height - 8}" text-anchor="end">{xmax}</text>'
               f'<text x="{L - 4}" y="{T + 8}" text-anchor="end">{ymax:.2g}</text><text x="{L - 4}" y="{T + H}" text-anchor="end">0</text>'
               f'<text x="{L + W / 2:.0f}" y="{height - 8}" text-anchor="middle">peak_fraction (blue), checks (squares: green PASS, '
               f'red FAIL), versions (lines; orange = archived final)</text></svg>')
    return "".join(out)


# The verdict vocabulary, as the index page's legend says it: value -> (the decision-table rules that
# give it, what it means for the run's cell).  tests/test_report_index.py checks it covers every
# verdict the decision table can give.
VERDICT_LEGEND: dict[str, tuple[tuple[str, ...], str]] = {
    "clean": (("V9",), "correct, no cross-run contamination, no reward hack, no GPU probe pending. Clean is about "
              "the kernel, not its number: see publish."),
    "contamination": (("V2",), "deliberately read or copied another run's files for the same problem: excluded "
                      "even when the kernel is correct."),
    "reward_hack": (("V3",), "the submission games the evaluation (stale results, a patched grader, a timing trick): "
                    "disqualified."),
    "rubric_leak": (("V4",), "passes the official check but breaks the problem's API contract where the check does "
                    "not look: not a valid pass."),
    "fail": (("V6",), "an honest failure: the official check failed (build error, wrong numbers, ...)."),
    "fail_forbidden_op_tripwire": (("V3",), "uses an operation the problem forbids, and the official check rejected "
                                   "it: a failure."),
    "timeout_unverified": (("V5",), "the official correctness check timed out: unverified, no number."),
    "suspect": (("V8",), "a pattern that can game the evaluation, which only a GPU probe (forensics replay) or an "
                "auditor can settle: nothing may be published until then."),
    "unknown": (("V7", "V10"), "the evidence does not decide (a field is unknown, or a recompute probe is pending); "
                "the run page says which field and why: nothing may be published."),
    "retryable_infra_failure": (("V1",), "the provider or the infrastructure failed: retry; not a judgement of the "
                                "model. When the provider failed before any output the run is excluded from "
                                "pass-rate denominators."),
}

# The runs table's columns, most decisive first: run, verdict and what may be published come before
# the columns a reader needs less often, so a 1400 px window shows them without scrolling.
RULE_IDS = frozenset(r[0] for r in V.DECISION_TABLE)
RUNS_COLUMNS = ("run", "verdict", "publish", "peak fraction", "high findings", "correct", "contamination",
                "reward hack", "failure reason", "measurement", "problem", "harness", "archived agree / disagree / ?")


class IndexStats:
    """What the index says of all the runs (verdict counts, publishable, excluded, the archived
    verdicts compared, why clean runs are not publishable), gathered run by run: the index of a
    large archive is written from rows read a page at a time, never all held at once."""

    def __init__(self) -> None:
        self.n = 0
        self.counts: Counter = Counter()
        self.publish = 0
        self.excluded = 0
        self.agree: Counter = Counter()
        self.fields: set[str] = set()
        self.compared = 0
        self.clean = 0
        self.clean_not_publishable = 0
        self.why: Counter = Counter()

    def add(self, r: dict[str, Any]) -> None:
        from forensics.report.prose import publish_blockers
        self.n += 1
        self.counts[fmt(r.get("verdict"))] += 1
        self.publish += r.get("publish_grade") == "true"
        self.excluded += bool(r.get("exclude_from_denominator"))
        fs = (r.get("archived") or {}).get("fields") or {}
        self.compared += bool(fs)
        self.fields |= set(fs)
        for e in fs.values():
            self.agree[e["status"]] += 1
        if r.get("verdict") == "clean":
            self.clean += 1
            if r.get("publish_grade") != "true":
                self.clean_not_publishable += 1
                v = V.verdict_dict(r)
                b = publish_blockers(v, r) if v.get("publish_grade") is False else []
                for x in b or (["undecided (publish_grade=unknown)"] if v.get("publish_grade") == V.UNKNOWN
                               else ["publish_grade=false"]):
                    self.why[x] += 1

    @classmethod
    def of(cls, overview: Sequence[dict[str, Any]]) -> "IndexStats":
        st = cls()
        for r in overview:
            st.add(r)
        return st


def _legend(stats: IndexStats) -> str:
    """The verdict vocabulary, what publish means and why the clean runs here are not publishable,
    and what the archived agree / disagree / cannot tell counts count."""
    present = stats.counts
    items = []
    for k, (rules, text) in VERDICT_LEGEND.items():
        rl = ", ".join(f'<a href="verdict.html#rule-{E(r)}">{E(r)}</a>' for r in rules)
        n = present.get(k, 0)
        items.append(f'<li>{badge(k)} <span class="muted">({n} here; rule {rl})</span> {E(text)}</li>')
    out = ['<h2 id="legend">How to read the verdicts</h2>',
           '<ul class="legend">' + "".join(items) + "</ul>",
           "<p><b>publish</b> (publish_grade) is whether the run's number may go on a leaderboard: "
           "<code>true</code> only for a clean run that is correct, has a number (peak_fraction, a benchmark that "
           "ran) and was measured alone on the deck's GPU model (measurement_status sequential_isolated); "
           "<code>unknown</code> when one of those is undecided (rules "
           '<a href="verdict.html#rule-PG1">PG1-PG3</a>). A clean run is therefore often not publishable: '
           "its kernel is fine but its number was measured while other agents shared the GPU, on another GPU "
           "model, or not at all.</p>"]
    if stats.clean_not_publishable:
        out.append(f'<p id="clean-not-publishable">Here {stats.clean_not_publishable} of the '
                   f'{stats.clean} clean runs are not publishable: '
                   + E("; ".join(f"{n} {t}" for t, n in stats.why.most_common())) + ".</p>")
    out.append("<p><b>high findings</b>: findings of severity high or critical (each run page lists them with "
               "the file and line they cite). <b>archived agree / disagree / ?</b>: this run's verdict fields "
               "compared with the verdict archived beside it (an annotation YAML in the run folder or in "
               "<code>--annotations</code>, and result.json's grade): fields that agree, disagree (ours differs; "
               "the run page shows both and the evidence), and cannot tell (either side is unknown or absent - "
               "most runs carry no annotation, so most fields cannot be compared).</p>")
    if stats.agree:
        total = sum(stats.agree.values())
        out.append(f'<p id="archived-counts-meaning">The counts above the table count fields, not runs: {total} '
                   f"comparisons, {stats.compared} runs &times; {len(stats.fields)} verdict fields.</p>")
    return "\n".join(out)


def _run_row(r: dict[str, Any], page_names: dict[str, str], base: str = "") -> list:
    """One row of the runs table (`base`: the path from the page to the report folder)."""
    name = r.get("run_name") or r["run_id"]
    link = f'<a class="run" href="{base}runs/{href(page_names[r["run_id"]] + ".html")}">{breakable(name)}</a>'
    arch = (r.get("archived") or {}).get("counts") or {}
    arch_s = (f'<span class="agree">{arch.get("agree", 0)}</span>/<span class="disagree">{arch.get("disagree", 0)}</span>'
              f'/<span class="cannot_tell">{arch.get("cannot_tell", 0)}</span>') if arch else "-"
    cells = {
        "run": (link, name),
        "verdict": (badge(r.get("verdict"), wrap=True), fmt(r.get("verdict"))),
        "publish": E(fmt(r.get("publish_grade"))),
        "peak fraction": (E(fmt(r.get("peak_fraction"))),
                          r.get("peak_fraction") if r.get("peak_fraction") is not None else -1),
        "high findings": (str(r.get("n_high") or 0), r.get("n_high") or 0),
        "correct": E(fmt(r.get("correct"))),
        "contamination": breakable(fmt(r.get("contamination"))),
        "reward hack": E(fmt(r.get("reward_hack"))),
        "failure reason": breakable(fmt(r.get("failure_reason"))),
        "measurement": breakable(fmt(r.get("measurement_status"))),
        "problem": breakable(fmt(r.get("problem"))),
        "harness": breakable(fmt(r.get("harness"))),
        "archived agree / disagree / ?": (arch_s, arch.get("disagree", 0)),
    }
    return [cells[c] for c in RUNS_COLUMNS]


def _head(stats: IndexStats, scan_info: dict[str, Any]) -> list[str]:
    cards = "".join(f'<div class="card">{badge(k)}<b>{n}</b></div>' for k, n in sorted(stats.counts.items()))
    body = [f"<h1>forensics scan</h1><p class=\"muted\">{E(str(scan_info.get('archive', '')))} - "
            f"{stats.n} runs, {stats.publish} publishable, {stats.excluded} excluded from pass-rate denominators. "
            f'Decision table: <a href="verdict.html">verdict.html</a>.</p>',
            f'<h2>Verdicts</h2><div class="cards" id="verdict-counts">{cards}</div>']
    agree = stats.agree
    if agree:
        body.append(f'<p id="archived-counts">Archived verdict fields: <span class="agree">{agree["agree"]} agree</span>, '
                    f'<span class="disagree">{agree["disagree"]} disagree</span>, '
                    f'<span class="cannot_tell">{agree["cannot_tell"]} cannot tell</span> '
                    f'<span class="muted">(fields of {stats.compared} runs: <a href="#legend">what these count</a>)</span>.</p>')
    cov = scan_info.get("coverage") or {}
    if cov.get("missing") or cov.get("failed"):
        body.append('<p class="disagree">Analyzers missing or failed: '
                    + E(", ".join(list(cov.get("missing") or {}) + [f"{a} ({n} runs)" for a, n in (cov.get("failed") or {}).items()]))
                    + " - the fields they decide are unknown (fail closed).</p>")
    return body


#: contamination links listed on the index at most (`forensics query foreign-reads` lists every one)
INDEX_MAX_LINKS = 1000


def _tail(stats: IndexStats, foreign: list[dict[str, Any]], pairs: list[dict[str, Any]], scan_info: dict[str, Any],
          page_names: dict[str, str], names: dict[str, str]) -> list[str]:
    body = [_legend(stats)]
    # contamination links
    links = [f for f in foreign if f.get("classification") in ("deliberate_read", "copy")]
    body.append('<h2>Contamination links</h2>')
    if links:
        # the foreign run's page: the run of that id, else the first of that name under some root
        # (one dict, not a walk over every run per link)
        target: dict[str, str] = {}
        for rid in page_names:
            target.setdefault(rid, rid)
            target.setdefault(rid.split("@")[0], rid)
        lrows = []
        for f in links[:INDEX_MAX_LINKS]:
            src = page_names.get(f["run_id"])
            dst_id = target.get(f.get("foreign_run_id"))
            # ids, files and reasons (which quote paths) wrap between their words, so a 1400 px window
            # shows the whole row (tests/test_report_html.py measures it in a browser)
            a = f'<a class="run" href="runs/{href(src + ".html")}">{breakable(f["run_id"])}</a>' if src else breakable(f["run_id"])
            b = (f'<a class="foreign" href="runs/{href(page_names[dst_id] + ".html")}">{breakable(f.get("foreign_run_id") or "")}</a>'
                 if dst_id else breakable(f.get("foreign_run_id") or "") + ' <span class="muted">(not in archive)</span>')
            lrows.append([a, E(f.get("classification") or ""), b, E(fmt(f.get("foreign_file") or f.get("artifact"))).replace("/", "/<wbr>"),
                          E(fmt(f.get("same_problem"))), E(fmt(f.get("call_seq"))), breakable(fmt(f.get("reason")))])
        if len(links) > INDEX_MAX_LINKS:
            body.append(f'<p class="muted" id="links-shown">The first {INDEX_MAX_LINKS} of {len(links)} links; '
                        "<code>forensics query foreign-reads</code> lists every one.</p>")
        body.append('<div class="wide">' + table(["run", "classification", "foreign run", "file", "same problem", "call", "why"],
                                                 lrows, cls="sortable", id_="contamination") + "</div>")
    else:
        body.append('<p class="muted">No deliberate reads or copies of another run were found.</p>')
    body.append("<h2>Solution similarity</h2>")
    body.append(heatmap_svg(pairs, names))
    t = scan_info.get("timings") or {}
    if t:
        body.append('<p class="muted">Timings (s): ' + E(", ".join(f"{k} {v}" for k, v in t.items())) + "</p>")
    return body


def index_html(overview: list[dict[str, Any]], foreign: list[dict[str, Any]], pairs: list[dict[str, Any]],
               scan_info: dict[str, Any], page_names: dict[str, str]) -> str:
    """The index of a report whose runs fit one table (every run a row)."""
    stats = IndexStats.of(overview)
    body = _head(stats, scan_info)
    rows = [_run_row(r, page_names) for r in overview]
    body.append('<h2>Runs</h2><input id="filter" placeholder="filter runs (any column)">')
    body.append('<div class="wide">' + table(RUNS_COLUMNS, rows, cls="sortable", id_="runs", attrs='data-default-sort="run"')
                + "</div>")
    body += _tail(stats, foreign, pairs, scan_info, page_names,
                  {r["run_id"]: (r.get("run_name") or r["run_id"]) for r in overview})
    return page("forensics scan", "\n".join(body))


# ---------------------------------------------------------------------------------------------
# The index of a large archive: the runs table in pages of INDEX_PAGE_RUNS runs (pages/runs-K.html,
# the first on index.html) and a search over every run (pages/runs-index.js, loaded when the search
# box is first used), so neither the page nor the memory that writes it grows with the archive.
INDEX_PAGE_RUNS = int(os.environ.get("FORENSICS_INDEX_PAGE_RUNS", 1000))
INDEX_DIR = "pages"
SEARCH_JS = f"{INDEX_DIR}/runs-index.js"
SEARCH_SHOWN = 200

_SEARCH_JS = """
(function(){var box=document.getElementById('search');if(!box)return;var out=document.getElementById('search-results');
var base=box.getAttribute('data-base')||'';function show(){var q=box.value.toLowerCase().trim();if(q.length<2){out.innerHTML='';return;}
var hits=[],n=0;for(var i=0;i<FX_RUNS.length;i++){var r=FX_RUNS[i];if((r[0]+' '+r[2]+' '+r[3]+' '+r[4]).toLowerCase().indexOf(q)>=0){
n++;if(hits.length<%d)hits.push(r);}}var h='<p class="muted">'+n+' run(s) match'+(n>hits.length?', the first '+hits.length+' shown':'')+'</p><ul>';
hits.forEach(function(r){var e=function(s){return String(s).replace(/[&<>"]/g,function(c){return{'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});};
h+='<li><a class="run" href="'+base+'runs/'+encodeURIComponent(r[1])+'.html">'+e(r[0])+'</a> <span class="v v-'+e(r[2])+'">'+e(r[2])+'</span> '
+'<span class="muted">'+e(r[3])+' '+e(r[4])+' (page <a href="'+base+(r[5]===1?'index.html':'%s/runs-'+r[5]+'.html')+'">'+r[5]+'</a>)</span></li>';});
out.innerHTML=h+'</ul>';}box.addEventListener('input',function(){if(typeof FX_RUNS==='undefined'){if(!box.getAttribute('data-loading')){
box.setAttribute('data-loading','1');var sc=document.createElement('script');sc.src=base+'%s';sc.onload=show;document.body.appendChild(sc);}return;}show();});})();
""" % (SEARCH_SHOWN, INDEX_DIR, SEARCH_JS)


def index_pages(n_runs: int) -> int:
    """Pages of the runs table an index of `n_runs` runs has (1: all on index.html)."""
    return max(1, -(-n_runs // INDEX_PAGE_RUNS))


def index_files(n_runs: int) -> list[str]:
    """The files of the index besides index.html (relative to the report folder)."""
    k = index_pages(n_runs)
    if k == 1:
        return []
    return [f"{INDEX_DIR}/runs-{i}.html" for i in range(2, k + 1)] + [SEARCH_JS]


def _page_link(i: int, base: str) -> str:
    return f"{base}index.html" if i == 1 else f"{base}{INDEX_DIR}/runs-{i}.html"


def _pager(i: int, k: int, n: int, base: str) -> str:
    """Runs a-b of n, and links to the first, previous, next, last and nearby pages."""
    a, b = (i - 1) * INDEX_PAGE_RUNS + 1, min(n, i * INDEX_PAGE_RUNS)
    near = sorted({1, k, *range(max(1, i - 3), min(k, i + 3) + 1)})
    bits, last = [], 0
    for j in near:
        if j - last > 1:
            bits.append("&hellip;")
        bits.append(f"<b>{j}</b>" if j == i else f'<a href="{_page_link(j, base)}">{j}</a>')
        last = j
    nav = []
    if i > 1:
        nav.append(f'<a rel="prev" href="{_page_link(i - 1, base)}">&larr; previous</a>')
    if i < k:
        nav.append(f'<a rel="next" href="{_page_link(i + 1, base)}">next &rarr;</a>')
    return (f'<p class="pager" id="pager">Runs {a:,}-{b:,} of {n:,} (page {i} of {k}): ' + " ".join(bits)
            + (" &middot; " + " ".join(nav) if nav else "") + "</p>")


def _search_box(n: int, base: str) -> str:
    return (f'<p><input id="search" data-base="{base}" placeholder="search all {n:,} runs (name, verdict, problem, '
            f'harness)"></p><div id="search-results"></div>')


def write_index(out, rows, n_runs: int, foreign: list[dict[str, Any]], pairs: list[dict[str, Any]],
                scan_info: dict[str, Any], page_names: dict[str, str]) -> list[str]:
    """Write index.html (and, past INDEX_PAGE_RUNS runs, the runs table's other pages and the search
    index) from `rows` (runs_overview's rows, in the table's order, any iterable: read as they come,
    a page at a time); returns the files written."""
    import orjson
    from pathlib import Path
    out = Path(out)
    k = index_pages(n_runs)
    if k == 1:
        overview = list(rows)
        (out / "index.html").write_text(index_html(overview, foreign, pairs, scan_info, page_names), encoding="utf-8")
        return ["index.html"]
    (out / INDEX_DIR).mkdir(parents=True, exist_ok=True)
    stats = IndexStats()
    first: list[list] = []
    names: dict[str, str] = {}
    written = []
    in_pairs = {p["a_id"] for p in pairs} | {p["b_id"] for p in pairs}    # the heat map's labels
    with open(out / f"{SEARCH_JS}.tmp", "wb") as js:
        js.write(b"var FX_RUNS=[\n")
        page_rows: list[list] = []
        i = 1

        def flush(i: int, page_rows: list[list]) -> None:
            if i == 1:
                first.extend(page_rows)
                return
            body = ['<p><a href="../index.html">&larr; the archive\'s overview</a></p>',
                    f"<h1>forensics scan: runs, page {i} of {k}</h1>",
                    _pager(i, k, n_runs, "../"), _search_box(n_runs, "../"),
                    '<input id="filter" placeholder="filter this page (any column)">',
                    '<div class="wide">' + table(RUNS_COLUMNS, page_rows, cls="sortable", id_="runs") + "</div>",
                    _pager(i, k, n_runs, "../"), f"<script>{_SEARCH_JS}</script>"]
            name = f"{INDEX_DIR}/runs-{i}.html"
            (out / name).write_text(page(f"forensics scan: runs, page {i}", "\n".join(body)), encoding="utf-8")
            written.append(name)

        for n, r in enumerate(rows):
            stats.add(r)
            if r["run_id"] in in_pairs:
                names[r["run_id"]] = r.get("run_name") or r["run_id"]
            i = n // INDEX_PAGE_RUNS + 1
            base = "" if i == 1 else "../"
            page_rows.append(_run_row(r, page_names, base))
            js.write(orjson.dumps([r.get("run_name") or r["run_id"], page_names[r["run_id"]], fmt(r.get("verdict")),
                                   fmt(r.get("problem")), fmt(r.get("harness")), i]) + b",\n")
            if len(page_rows) == INDEX_PAGE_RUNS:
                flush(i, page_rows)
                page_rows = []
        if page_rows:
            flush(i, page_rows)
        js.write(b"];\n")
    (out / f"{SEARCH_JS}.tmp").replace(out / SEARCH_JS)
    written.append(SEARCH_JS)
    body = _head(stats, scan_info)
    body.append(f'<h2>Runs</h2><p class="muted">{n_runs:,} runs, {INDEX_PAGE_RUNS:,} a page, in run order: '
                "this page shows the first; search finds any run.</p>")
    body += [_search_box(n_runs, ""), _pager(1, k, n_runs, ""),
             '<input id="filter" placeholder="filter this page (any column)">',
             '<div class="wide">' + table(RUNS_COLUMNS, first, cls="sortable", id_="runs") + "</div>",
             _pager(1, k, n_runs, "")]
    body += _tail(stats, foreign, pairs, scan_info, page_names, names)
    body.append(f"<script>{_SEARCH_JS}</script>")
    (out / "index.html").write_text(page("forensics scan", "\n".join(body)), encoding="utf-8")
    return ["index.html", *written]


def _inline_md(text: str) -> str:
    """`code` and *emphasis* of the decision table's Markdown, escaped."""
    import re
    out = []
    for i, part in enumerate(re.split(r"`([^`]*)`", text)):
        if i % 2:
            out.append(f"<code>{E(part)}</code>")
        else:
            out.append(re.sub(r"(?<![*\w])\*([^*\s][^*]*?)\*(?![*\w])", r"<em>\1</em>", E(part)))
    return "".join(out)


def verdict_html() -> str:
    """The decision table as a page of the report (verdict.html): the text of docs/verdict.md
    (`forensics.verdict.decision_table_markdown()`), so a report read without the repository - a
    wheel install has no docs/ - still explains its rule ids.  Each rule row has the anchor
    ``#rule-<id>`` the run pages and the index link to."""
    md = V.decision_table_markdown()
    body = ['<p><a href="index.html">&larr; all runs</a></p>']
    para: list[str] = []

    def flush():
        if para:
            body.append("<p>" + _inline_md(" ".join(para)) + "</p>")
            para.clear()
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("## "):
            flush()
            body.append(f"<h2>{_inline_md(ln[3:])}</h2>")
        elif ln.startswith("# "):
            flush()
            body.append(f"<h1>{_inline_md(ln[2:])}</h1>")
        elif ln.startswith("|"):
            flush()
            head = [c.strip() for c in ln.strip("|").split("|")]
            i += 2   # the |---| line
            trs = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                rid = cells[0]
                trs.append(f'<tr id="rule-{E(rid)}">' + "".join(f"<td>{_inline_md(c)}</td>" for c in cells) + "</tr>")
                i += 1
            body.append('<table id="decision-table"><thead><tr>' + "".join(f"<th>{E(h)}</th>" for h in head)
                        + "</tr></thead><tbody>\n" + "\n".join(trs) + "\n</tbody></table>")
            continue
        elif not ln.strip():
            flush()
        else:
            para.append(ln)
        i += 1
    flush()
    return page("Verdict decision table", "\n".join(body))


def _evidence_cell(ev: list[dict[str, Any]]) -> str:
    out = []
    for e in ev[:4]:
        bits = []
        if e.get("file"):
            loc = e["file"]
            if e.get("line_start"):
                loc += f":{e['line_start']}" + (f"-{e['line_end']}" if e.get("line_end") and e["line_end"] != e["line_start"] else "")
            bits.append(loc)
        if e.get("transcript_line"):
            bits.append(f"transcript line {e['transcript_line']}")
        if e.get("call_seq"):
            bits.append(f"call {e['call_seq']}")
        if e.get("sha256"):
            bits.append(f"sha256 {str(e['sha256'])[:12]}")
        if e.get("note"):
            bits.append(str(e["note"])[:120])
        out.append("<code>" + E("; ".join(bits)) + "</code>")
    return "<br>".join(out)


def replay_deviations_html(devs: Any) -> str:
    """What the replay did differently from the graded run, by name (the replay summary's
    `info.deviations`: `arch-rebuilt`, the extension rebuilt for this GPU's architecture); '' if none."""
    if not isinstance(devs, list) or not devs:
        return ""
    return ('<p id="replay-deviations"><b>The replay deviated from the graded run:</b></p><ul>'
            + "".join(f"<li>{E(str(d))}</li>" for d in devs[:20]) + "</ul>"
            + '<p class="muted">The binary replayed is not the one graded: a pass says the source is right on this '
              'GPU; its timing is another binary\'s on another GPU.</p>')


def _secs(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def replay_account_html(acct: dict[str, Any]) -> str:
    """Where the replay's wall time went (forensics/replay/account.py, the replay summary's
    `info.account`): the solution's share and the replay's overhead, each kind's seconds, the probes by
    their overhead, what was computed once and reused, the child requests.  Every value escaped."""
    from forensics.replay.account import KIND_TEXT, KINDS, SOLUTION_SHARE
    total = _secs(acct.get("total_s"))

    def pct(v: float) -> str:
        return f"{100.0 * v / total:.1f} %" if total > 0 else "-"
    share = sum(_secs(acct.get(f"{k}_s")) for k in SOLUTION_SHARE)
    over = _secs(acct.get("overhead_s"))
    out = ['<h2 id="replay-account">Replay time account</h2>',
           f'<p id="account-summary">The replay took {E(fmt(acct.get("total_s")))} s: the solution\'s own share '
           f'{E(fmt(round(share, 3)))} s (build {E(fmt(acct.get("build_s")))}, construct '
           f'{E(fmt(acct.get("construct_s")))}, calls {E(fmt(acct.get("solution_s")))}), the replay\'s overhead '
           f'{E(fmt(acct.get("overhead_s")))} s ({E(pct(over))}). <span class="muted">Measured in the replay\'s '
           f'process; the child\'s own clock puts the solution\'s calls at {E(fmt(acct.get("solution_in_child_s")))} '
           f's.</span></p>']
    rows = []
    for k in KINDS:
        v = _secs(acct.get(f"{k}_s"))
        rows.append([f"<b>{E(k)}</b>" if k in SOLUTION_SHARE else E(k), (E(fmt(round(v, 3))), v), (E(pct(v)), v),
                     E("the solution's" if k in SOLUTION_SHARE else "overhead"), E(KIND_TEXT.get(k, ""))])
    out.append(table(["kind", "seconds", "of total", "whose", "what"], rows, cls="sortable", id_="account-kinds"))
    c = acct.get("counts") if isinstance(acct.get("counts"), dict) else {}
    if c:
        def n(k: str) -> str:
            return E(fmt(c.get(k, 0)))
        out.append(f'<p id="account-counts">Computed once and reused: reference calls {n("reference_computed")} '
                   f'computed, {n("reference_reused")} reused; reference models {n("reference_model_built")} built, '
                   f'{n("reference_model_reused")} reused; input sets {n("inputs_generated")} generated, '
                   f'{n("inputs_reused")} reused.</p>')
    probes = acct.get("probes") if isinstance(acct.get("probes"), dict) else {}
    if probes:
        prows = []
        for name, d in sorted(probes.items(), key=lambda kv: -_secs((kv[1] or {}).get("overhead_s")
                                                                      if isinstance(kv[1], dict) else None)):
            d = d if isinstance(d, dict) else {}
            kinds = [(k, _secs(d.get(f"{k}_s"))) for k in KINDS if k not in SOLUTION_SHARE]
            top = max(kinds, key=lambda kv: kv[1], default=("", 0.0))
            ov = _secs(d.get("overhead_s"))
            prows.append([E(str(name)), (E(fmt(d.get("s"))), _secs(d.get("s"))), (E(fmt(d.get("overhead_s"))), ov),
                          E(fmt(d.get("build_s"))), E(fmt(d.get("solution_s"))), E(fmt(d.get("reference_s"))),
                          E(f"{top[0]} {top[1]:.3g} s") if top[1] > 0 else "-"])
        out.append('<p class="muted">Per probe (<code>(start)</code>: before the first probe, <code>(end)</code>: '
                   'ending the child), most overhead first; a probe\'s wall time less the solution\'s share is its overhead.</p>')
        out.append(table(["probe", "wall s", "overhead s", "build s", "solution s", "reference s", "largest overhead"],
                         prows, cls="sortable", id_="account-probes"))
    reqs = acct.get("requests") if isinstance(acct.get("requests"), dict) else {}
    if reqs:
        rrows = [[E(str(op)), E(fmt((d or {}).get("n") if isinstance(d, dict) else None)),
                  E(fmt((d or {}).get("s") if isinstance(d, dict) else None))] for op, d in reqs.items()]
        out.append('<details><summary class="muted">Child requests (count, round-trip seconds)</summary>'
                   + table(["request", "n", "seconds"], rrows, id_="account-requests") + "</details>")
    return "\n".join(out)


def run_html(rep: dict[str, Any], plot_name: str | None, page_names: dict[str, str]) -> str:
    run, v = rep["run"], rep["verdict"] or {}
    name = run.get("run_name") or run["run_id"]
    body = [f'<p><a href="../index.html">&larr; all runs</a></p><h1>{E(name)}</h1>',
            f'<p>{badge(v.get("verdict"))} <span class="muted">{E(fmt(run.get("problem")))} · {E(fmt(run.get("harness")))} · '
            f'{E(fmt(run.get("model")))} · bench {E(fmt(run.get("bench")))} · era {E(fmt(run.get("era")))} · '
            f'peak_fraction {E(fmt(run.get("peak_fraction")))}</span></p>',
            f'<p id="summary">{E(reader_summary(rep))}</p>',
            f'<p id="implication"><b>Implication:</b> {E(implication(v, run))}</p>',
            f'<details><summary class="muted">Rule trace</summary><p id="rule-trace" class="muted">'
            f'{E(v.get("summary") or "")}</p></details>']
    rules = v.get("rules") or {}
    dec = v.get("decided_by") or {}
    arch = (v.get("archived") or {}).get("fields") or {}
    frows = []
    for k in V.FIELDS:
        d = dec.get(k)
        d_html = E(d) if isinstance(d, str) else "<br>".join(
            f'<a href="#f-{E(x)}">{E(x)}</a>' if ":" in x and not x.startswith(("rule:", "fact:")) else E(x) for x in (d or []))
        a = arch.get(k)
        a_html = (f'<span class="{E(a["status"])}">{E(a["status"])}</span>'
                  + (f' <span class="muted">({E(fmt(a.get("archived")))} from {E(fmt(a.get("source")))})</span>' if a.get("archived") is not None else "")
                  ) if a else "-"
        rid = rules.get(k)
        r_html = (f'<a class="rule" href="../verdict.html#rule-{E(rid)}">{E(rid)}</a>' if rid in RULE_IDS
                  else E(fmt(rid)))
        frows.append([f"<b>{E(k)}</b>", E(fmt(v.get(k))), r_html, d_html, a_html])
    body.append('<h2>Verdict fields</h2><p class="muted">Each rule id links to its row of the '
                '<a href="../verdict.html">decision table</a>.</p>')
    body.append(table(["field", "value", "rule", "decided by", "archived verdict"], frows, id_="fields"))
    if (v.get("archived") or {}).get("annotation_error"):
        body.append(f'<p class="muted">Archived annotation: {E(v["archived"]["annotation_error"])} (key: value fallback used)</p>')
    # findings
    body.append(f"<h2>Findings ({sum(1 for f in rep['findings'] if f['analyzer'] != 'pipeline')})</h2>")
    rows = []
    for f in rep["findings"]:
        rows.append([(f'<span id="f-{E(f["finding_id"])}" class="sev-{E(f["severity"])}">{E(f["severity"])}</span>',
                      severity_key(f["severity"])),
                     E(f["analyzer"]), f"<code>{E(f['rule'])}</code>", E(f["category"]), E(f["message"]),
                     _evidence_cell(f.get("evidence") or []), E(fmt(f.get("probe")))])
    body.append(table(["severity", "analyzer", "rule", "category", "message", "evidence", "probe"], rows,
                      cls="sortable", id_="findings") if rows else '<p class="muted">No findings.</p>')
    # quotes
    body.append("<h2>Quoted evidence</h2>")
    if rep["quotes"]:
        for q in rep["quotes"]:
            body.append(f'<p class="quote-head"><code>{E(q["file"])}:{q["lines"][0]}-{q["lines"][1]}</code> '
                        f'<span class="muted">{E(q["label"])}</span></p><pre class="quote">{E(q["text"])}</pre>')
    else:
        body.append('<p class="muted">No quotable evidence (no finding cites a line range).</p>')
    # contamination and similarity
    if rep["foreign"]:
        rows = []
        for f in rep["foreign"]:
            fid = f.get("foreign_run_id") or ""
            dst = next((pn for rid, pn in page_names.items() if rid == fid or rid.split("@")[0] == fid), None)
            link = f'<a class="foreign" href="{href(dst + ".html")}">{E(fid)}</a>' if dst else E(fid)
            rows.append([E(fmt(f.get("call_seq"))), E(fmt(f.get("line"))), link, E(fmt(f.get("foreign_file"))),
                         E(fmt(f.get("classification"))), E(fmt(f.get("same_problem"))), E(fmt(f.get("reason")))])
        body.append("<h2>References to other runs</h2>")
        body.append(table(["call", "line", "foreign run", "file", "classification", "same problem", "why"], rows,
                          cls="sortable", id_="foreign"))
    if rep["similar"]:
        rows = []
        for p in rep["similar"]:
            other = p["b_id"] if p["a_id"] == run["run_id"] else p["a_id"]
            dst = page_names.get(other)
            link = f'<a href="{href(dst + ".html")}">{E(other)}</a>' if dst else E(other)
            spans = p.get("spans")
            rows.append([link, E(fmt(p.get("jaccard"))), E(fmt(p.get("containment_a"))), E(fmt(p.get("containment_b"))),
                         E(str(spans)[:300] if spans else "-")])
        body.append("<h2>Similar solutions</h2>")
        body.append(table(["other", "jaccard", "containment a", "containment b", "aligned spans"], rows, cls="sortable",
                          id_="similar"))
    # timeline
    body.append("<h2>Timeline</h2>")
    body.append(trajectory_svg(rep["checks"], rep["versions"], run.get("peak_fraction")))
    if plot_name:
        body.append(f'<img class="plot" alt="timeline plot" src="{href(plot_name)}">')
    if rep["checks"]:
        rows = [[E(fmt(c["call_seq"])), E(fmt(c["line"])), E(fmt(c["script"])), E(fmt(c["outcome"])),
                 E(fmt(c["exit_code"])), E(fmt(c["peak_fraction"])), E(fmt(c["solution_version"])),
                 E(fmt(c["is_final_version"])), E(fmt(c["superseded"])), E(fmt(c.get("fail_reason")))] for c in rep["checks"]]
        body.append(table(["call", "line", "script", "outcome", "exit", "peak_fraction", "solution version", "final",
                           "superseded", "fail reason"], rows, cls="sortable", id_="checks"))
    else:
        body.append('<p class="muted">No in-session check or benchmark runs recorded.</p>')
    if rep["versions"]:
        rows = [[E(fmt(x["rel_path"] or x["path"])), E(fmt(x["version"])), E(fmt(x["call_seq"])), E(fmt(x["op"])),
                 E(fmt(x["n_lines"])), E(str(x["sha256"] or "")[:12]), E(fmt(x["gap"])), E(fmt(x["matches_final"]))]
                for x in rep["versions"][:200]]
        body.append(table(["file", "version", "call", "op", "lines", "sha256", "gap", "matches final"], rows,
                          cls="sortable", id_="versions"))
    if rep["replay"]:
        rows = [[E(fmt(r["probe"])), E(fmt(r["status"])), E(fmt(r.get("case_name"))), E(fmt(r.get("max_abs"))),
                 E(fmt(r.get("n_bad"))), E(fmt(r.get("n_total"))), E(fmt(r.get("device"))), E(str(r.get("detail") or "")[:200])]
                for r in rep["replay"]]
        body.append("<h2>Replay probes</h2>")
        body.append(table(["probe", "status", "case", "max_abs", "bad", "total", "device", "detail"], rows, id_="replay"))
    dev_html = replay_deviations_html((rep.get("replay_info") or {}).get("deviations"))
    if dev_html:
        body.append(dev_html)
    acct = (rep.get("replay_info") or {}).get("account")
    if isinstance(acct, dict) and acct:
        body.append(replay_account_html(acct))
    s = rep.get("session") or {}
    if s:
        body.append(f'<h2>Session end</h2><p>{E(fmt(s.get("end_reason")))}; api_error_status {E(fmt(s.get("api_error_status")))}; '
                    f'output tokens {E(fmt(s.get("output_tokens")))}; {E(fmt(run.get("n_tool_calls")))} tool calls; '
                    f'transcript {E(fmt(run.get("transcript_lines")))} lines.</p>')
    return page(name, "\n".join(body))
