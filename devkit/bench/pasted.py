"""`forensics bench pasted [DIR]`: PASTED-LIBRARY-SOURCE's margin on real solutions and its cost.

DIR (default ../shared/real-dev) holds one folder per run with its final `solution.py` and, where
there is one, the auditors' `label.json`.  For every solution, in the same run:

  * the best containment of any fingerprinted library function in it (the share of the function's
    sampled distinctive shingles found in the solution) and which function that is: the margin a
    solution keeps below the rule's threshold (`static.pasted.MIN_CONTAINMENT`);
  * the findings of the two rules (PASTED-LIBRARY-SOURCE, LIBRARY-PROVENANCE-MARK) by severity, per
    label family: on clean solutions none may be high;
  * the cost per file: a bare `ast.parse` of the same text (the baseline), and the rule's own work
    (tokenize, shingle, look up, marks), median and p95 in ms; the one-time load of the fingerprints;
  * with `--plant N` (the builder's artifact cache at hand: `python -m devkit.fingerprints build`
    fills it): N fingerprinted library functions, spread over the libraries, cut from the pinned
    artifacts and planted into the clean solutions (Python appended to the module, C/C++/CUDA in a
    `load_inline` source string), as pasted and with every tenth line of code deleted: how many the
    rule finds, and the planted function's containment.  Nothing planted is written anywhere.

Nothing in the rule knows these files: the bench reads them and their labels only.
"""

from __future__ import annotations

import ast
import json
import textwrap
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import click
import numpy as np

from devkit import fingerprints as FP
from devkit.paths import REPO
from forensics.analyze.static import pasted as P
from forensics.analyze.static.model import Module
from forensics.analyze.static.problems import problem_from_text
from forensics.archive.sidecars import split_sidecars

DEFAULT = REPO.parent / "shared" / "real-dev"


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else 0.0


def run(src: Path, repeat: int = 3, plant_n: int = 0, cache: Path | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    P.shipped.cache_clear()
    fps = P.shipped()
    load_ms = (time.perf_counter() - t0) * 1000
    rows = []
    hosts: list[tuple[str, str, str | None]] = []
    parse_ms, rule_ms = [], []
    for d in sorted(p for p in src.iterdir() if (p / "solution.py").is_file()):
        text = (d / "solution.py").read_text(encoding="utf-8", errors="replace")
        lab = json.loads((d / "label.json").read_text()) if (d / "label.json").is_file() else {}
        problem = problem_from_text(d.name)
        sp = split_sidecars(text)
        try:
            tree = ast.parse(sp.python)
            mod = Module(tree, sp.python)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            mod = None
        tp, tr = [], []
        for _ in range(repeat):     # the baseline and the rule, alternated, on the same text
            a = time.perf_counter()
            try:
                ast.parse(sp.python)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass
            b = time.perf_counter()
            hits = P.check_solution(mod, "solution.py", sp.python, sp.sidecars, None, problem, fps)
            c = time.perf_counter()
            tp.append(b - a)
            tr.append(c - b)
        parse_ms.append(min(tp) * 1000)
        rule_ms.append(min(tr) * 1000)
        best, _ = P.top_score(P.solution_parts("solution.py", sp.python, sp.sidecars), fps)
        ms, _b = P.match(fps, P.shingle_parts(P.solution_parts("solution.py", sp.python, sp.sidecars)), 0.0, 1)
        top = ""
        if ms:
            o = fps.owners[ms[0].fp][0]
            top = f"{o[0]} {fps.files[o[1]].rsplit('/', 1)[-1]}:{o[2]}"
        if lab.get("verdict_family") in ("clean", "clean_interesting"):
            hosts.append((d.name, text, problem))
        rows.append({"run": d.name, "family": lab.get("verdict_family"), "problem": problem, "best": round(best, 3),
                     "top": top, "lines": text.count("\n") + 1,
                     "findings": [{"rule": h.rule, "severity": h.severity, "message": h.message[:300]} for h in hits]})
    by_family: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        fam = r["family"] or "unlabelled"
        by_family[fam]["solutions"] += 1
        for f in r["findings"]:
            by_family[fam][f"{f['rule']}:{f['severity']}"] += 1
    clean = [r for r in rows if r["family"] in ("clean", "clean_interesting")]
    planted = None
    if plant_n:
        cache = cache or FP.DEFAULT_CACHE
        planted = plant(fps, hosts, plant_n, cache) if hosts and cache.is_dir() else \
            {"skipped": f"no artifact cache at {cache}" if hosts else "no clean host solutions"}
    return {
        "source": str(src), "solutions": len(rows), "threshold": P.MIN_CONTAINMENT, "sample": P.SAMPLE,
        "fingerprints": int(len(fps.sketches)), "load_ms": round(load_ms, 1),
        "cost_ms": {"ast_parse": {"median": round(statistics.median(parse_ms), 3), "p95": round(_pct(parse_ms, 0.95), 3)},
                    "rule": {"median": round(statistics.median(rule_ms), 3), "p95": round(_pct(rule_ms, 0.95), 3)}},
        "rule_vs_parse_median": round(statistics.median(rule_ms) / statistics.median(parse_ms), 2) if parse_ms else None,
        "by_family": {k: dict(v) for k, v in sorted(by_family.items())},
        "clean_high": [r["run"] for r in clean if any(f["severity"] == "high" for f in r["findings"])],
        "clean_top": sorted(({"run": r["run"], "best": r["best"], "top": r["top"]} for r in clean),
                            key=lambda x: -x["best"])[:10],
        "clean_best_max": max((r["best"] for r in clean), default=None),
        "clean_best_hist": dict(sorted(Counter(round(r["best"], 2) for r in clean).items())),
        "flagged": [{"run": r["run"], "family": r["family"], "findings": r["findings"]} for r in rows if r["findings"]],
        "planted": planted,
    }


# ---------------------------------------------------------------------- planted library functions
def _sources(files: list[str], cache: Path) -> dict[str, str]:
    """The text of each `dist-version/path` the fingerprints cite, read from the pinned artifacts
    in `cache` (sha256 checked); files whose artifact is not there are left out."""
    by_label = {f"{s.dist}-{s.version}": s for s in FP.SOURCES}
    want: dict[str, set[str]] = defaultdict(set)
    for f in files:
        label, _, rel = f.partition("/")
        want[label].add(rel)
    out = {}
    for label, rels in sorted(want.items()):
        src = by_label.get(label)
        path = cache / src.filename if src else None
        if path is None or not path.is_file() or FP._sha256(path) != src.sha256:
            continue
        for rel, raw in FP.members(path):
            if rel in rels:
                out[f"{label}/{rel}"] = raw.decode("utf-8", errors="replace")
    return out


def _edited(body: str, cpp: bool) -> str:
    """Every tenth line holding code deleted (the first two, the signature, kept)."""
    out, n = [], 0
    for line in body.splitlines():
        code = line.strip() and not line.strip().startswith(("//", "#", "/*", "*"))
        if code:
            n += 1
            if n > 2 and n % 10 == 0:
                continue
        out.append(line)
    return "\n".join(out)


def plant(fps: P.Fingerprints, hosts: list[tuple[str, str, str | None]], n: int, cache: Path) -> dict[str, Any]:
    """Plant `n` library functions (every len/n-th fingerprint, so every library is sampled in
    proportion) into the clean hosts, as pasted and edited, and count what the rule finds."""
    picks = sorted({int(i) for i in np.linspace(0, len(fps.owners) - 1, n)}) if n else []
    texts = _sources(sorted({fps.files[fps.owners[i][0][1]] for i in picks}), cache)
    rows = []
    for j, fp in enumerate(picks):
        lib, fi, name, a, b = fps.owners[fp][0]
        text = texts.get(fps.files[fi])
        if text is None:
            continue
        cpp = not fps.files[fi].endswith(".py")
        body = "\n".join(text.splitlines()[a - 1:b])
        host_name, host, problem = hosts[j % len(hosts)]
        for form in ("pasted", "edited"):
            code = _edited(body, cpp) if form == "edited" else body
            if cpp:
                code = code.replace("\'\'\'", "' ' '")
                add = f"\n\n_PASTED_SRC = r\'\'\'\n{code}\n\'\'\'\n"
            else:
                add = "\n\n" + textwrap.dedent(code) + "\n"
            # into the Python of the published file, above its appended sidecars (which are dropped: a
            # sidecar's lines follow the Python's, and the plant would shift them)
            hp = split_sidecars(host).python.rstrip("\n")
            sol = hp + "\n" + add
            lo, hi = hp.count("\n") + 3, sol.count("\n") + 1
            try:
                mod = Module(ast.parse(sol), sol)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                mod = None
            hits = [h for h in P.check_solution(mod, "solution.py", sol, (), None, problem, fps)
                    if h.rule == "PASTED-LIBRARY-SOURCE" and h.line_start and not (h.line_end < lo or h.line_start > hi)]
            parts = P.solution_parts("solution.py", sol)
            sh = P.shingle_parts(parts)
            cont = float(np.isin(fps.sketches[fp], sh.hashes).sum()) / fps.sketches.shape[1]
            rows.append({"library": lib, "function": f"{fps.files[fi].rsplit('/', 1)[-1]}:{name}", "lang": "cpp" if cpp else "py",
                         "form": form, "host": host_name, "containment": round(cont, 3), "found": bool(hits),
                         "severity": max((h.severity for h in hits), key=lambda s: ("info", "low", "medium", "high").index(s))
                         if hits else None})
    summ: dict[str, Any] = {}
    for key in ("form", "lang", "library"):
        g: dict[str, list] = defaultdict(list)
        for r in rows:
            g[r[key] if key != "library" else f"{r['library']} ({r['form']})"].append(r)
        summ[key] = {k: {"planted": len(v), "found": sum(r["found"] for r in v),
                         "containment_median": round(statistics.median(r["containment"] for r in v), 3)}
                     for k, v in sorted(g.items())}
    return {"functions": len(picks), "planted": len(rows), "found": sum(r["found"] for r in rows),
            "by": summ, "missed": [r for r in rows if not r["found"]][:40],
            "severity": dict(Counter(r["severity"] for r in rows if r["found"]))}


@click.command("pasted")
@click.argument("src", type=click.Path(exists=True, file_okay=False, path_type=Path), required=False)
@click.option("--repeat", default=3, show_default=True, help="Timings per file (the minimum is kept).")
@click.option("--plant", "plant_n", default=0, show_default=True,
              help="Also plant this many fingerprinted library functions into the clean solutions (needs the builder's cache).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The builder's artifact cache (default: FORENSICS_FINGERPRINT_CACHE or ~/.cache/forensics-fingerprints).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_pasted(src: Path | None, repeat: int, plant_n: int, cache: Path | None, as_json: bool) -> None:
    """PASTED-LIBRARY-SOURCE on real solutions (default ../shared/real-dev): each clean solution's best
    containment against the threshold, findings per label family, and the cost per file beside ast.parse."""
    src = src or DEFAULT
    if not src.is_dir():
        raise click.ClickException(f"{src} is not a folder of run folders")
    r = run(src, repeat, plant_n, cache)
    if as_json:
        click.echo(json.dumps(r, indent=1))
        return
    c = r["cost_ms"]
    click.echo(f"{r['solutions']} solutions from {r['source']}; {r['fingerprints']} fingerprints (sketch {r['sample']}, "
               f"threshold {r['threshold']:.0%}); fingerprints loaded once in {r['load_ms']} ms")
    click.echo(f"cost per file: ast.parse median {c['ast_parse']['median']} ms (p95 {c['ast_parse']['p95']}), "
               f"the rule median {c['rule']['median']} ms (p95 {c['rule']['p95']}): {r['rule_vs_parse_median']}x parse")
    click.echo(f"clean solutions: best containment max {r['clean_best_max']}, histogram {r['clean_best_hist']}; "
               f"flagged high: {len(r['clean_high'])}")
    for t in r["clean_top"][:5]:
        click.echo(f"  {t['best']:.3f}  {t['run']}  ({t['top']})")
    for fam, cnt in r["by_family"].items():
        click.echo(f"{fam:<18} " + ", ".join(f"{k} {v}" for k, v in sorted(cnt.items())))
    for f in r["flagged"]:
        for x in f["findings"]:
            click.echo(f"- {f['run']} [{f['family']}] {x['rule']} {x['severity']}: {x['message'][:200]}")
    pl = r["planted"]
    if pl and "skipped" in pl:
        click.echo(f"planted: skipped ({pl['skipped']})")
    elif pl:
        click.echo(f"planted: {pl['found']} of {pl['planted']} found ({pl['functions']} library functions, pasted and "
                   f"edited), severity of the found {pl['severity']}")
        for key in ("form", "lang"):
            for k, v in pl["by"][key].items():
                click.echo(f"  {key} {k:<8} found {v['found']:4d} of {v['planted']:4d}, containment median {v['containment_median']}")
        for m in pl["missed"][:10]:
            click.echo(f"  missed: {m['library']} {m['function']} ({m['lang']}, {m['form']}) containment {m['containment']}")
