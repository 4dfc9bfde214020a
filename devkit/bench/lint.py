"""`forensics bench lint`: lint throughput vs bare read+ast.parse, and (--quality) rule precision/recall.

Throughput: N solutions are generated deterministically from corpus/lint/solutions (each one a
concatenation of 3-8 corpus files, with their identifiers suffixed, a few hundred lines like real
solutions), written to a temp dir, then (a) read and ast.parse'd, (b) linted, in the same run.

Quality: every labeled corpus file and run folder is scored for three detectors side by side:
our rules, the baseline tripwire (a grep for the same names, spec A8; the official substring check
for FORBIDDEN-OP), and KernelGuard (PyPI `kernelguard`, run in a subprocess, its patterns mapped
to our rule ids where they cover the same pattern).  KernelGuard is never a dependency.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from devkit.paths import CORPUS_DIR, FIXTURES
from forensics import verdict as V
from forensics.analyze.static import lint_run_dir, lint_source
from forensics.analyze.static.rules import RULES
from forensics.analyze.static.tripwire import TRIPWIRE, official_forbidden, tripwire
from forensics.pool import pmap

CORPUS = CORPUS_DIR / "lint"
# Scored beside the rules: the file's findings leave a recompute probe pending (the verdict's ER1,
# empirical_recompute_required until a probe result exists).  Labeled by `recompute_probe: true|false`.
PROBE_LABEL = "RECOMPUTE-PROBE"


def _ours(rep) -> set[str]:
    got = rep.rules()
    if any(V.asks_recompute_probe(h.to_dict()) for h in rep.hits):
        got.add(PROBE_LABEL)
    return got


def _expect(lab: dict) -> tuple[set[str], set[str]]:
    must, must_not = set(lab["must"]), set(lab["must_not"])
    if lab.get("recompute_probe") is True:
        must.add(PROBE_LABEL)
    elif lab.get("recompute_probe") is False:
        must_not.add(PROBE_LABEL)
    return must, must_not

# KernelGuard pattern -> our rule ids it covers (only where the patterns describe the same thing)
KG_MAP: dict[str, tuple[str, ...]] = {
    "OUTPUT_REPLAY_CACHE": ("CACHED-OUTPUT-RETURN",), "LAST_CALL_REPLAY": ("CACHED-OUTPUT-RETURN",),
    "SHAPE_OUTPUT_REPLAY": ("CACHED-OUTPUT-RETURN",), "RESULT_BANK_REPLAY": ("CACHED-OUTPUT-RETURN",),
    "TIMED_INPUT_REPLAY": ("CACHED-OUTPUT-RETURN",),
    "POINTER_REPLAY": ("PTR-KEYED-CACHE",), "PREPROCESS_CACHE": ("PTR-KEYED-CACHE", "VERSION-KEYED-CACHE"),
    "RUNNER_PLAN_CACHE": ("PTR-KEYED-CACHE",),
    "WORKSPACE_CACHE": ("PERSISTENT-OUTPUT",),
    "CUDA_GRAPH_REPLAY": ("CUDA-GRAPH-REPLAY",), "CUDA_GRAPH_PYTHON": ("CUDA-GRAPH-REPLAY",),
    "PARTIAL_GRAPH_KEY": ("CUDA-GRAPH-REPLAY",), "SEQUENCE_BATCH_GRAPH": ("CUDA-GRAPH-REPLAY",),
    "FRAME_WALK_ACCESS": ("STACK-SNIFF",), "FRAME_WALK_MUTATION": ("STACK-SNIFF",),
    "EVALUATOR_MODE_BRANCH": ("ENV-SNIFF", "GRADER-READ"), "EVALUATOR_EXPLOIT": ("GRADER-READ",),
    "CODE_ACCESS": ("GRADER-READ",), "SYS_MODULES_ACCESS": ("GRADER-READ", "REFERENCE-MUTATION"),
    "TRUSTED_MODULE_IMPORT": ("REFERENCE-IMPORT",),
    "REFERENCE_PRECOMPUTE_REPLAY": ("REFERENCE-CALL",),
    "MODULE_MUTATION": ("REFERENCE-MUTATION",), "GLOBALS_MUTATION": ("REFERENCE-MUTATION",),
    "TIMER_MONKEYPATCH": ("MONKEYPATCH-TORCH",), "TORCH_VALIDATION_MONKEYPATCH": ("MONKEYPATCH-TORCH",),
    "TENSOR_INSTANCE_METHOD_OVERRIDE": ("MONKEYPATCH-TORCH",), "HARNESS_RUNTIME_PATCHING": ("MONKEYPATCH-TORCH",),
    "FAKE_BENCHMARK_EMIT": ("GRADER-OUTPUT-FORGERY",), "STDIO_REDIRECT": ("GRADER-OUTPUT-FORGERY",),
    "DYNAMIC_EXECUTION": ("DYNAMIC-EXEC",), "OBFUSCATED_EXEC": ("DYNAMIC-EXEC",), "CODE_REPLACEMENT": ("DYNAMIC-EXEC",),
    "SCALED_MM_REF": ("LIBRARY-DOES-WORK",), "DECODE_MM_REF": ("LIBRARY-DOES-WORK",),
    "TORCH_COMPILE_CACHE": ("LIBRARY-DOES-WORK",),
    "INPUT_STRUCTURE_TRUNCATION_DISPATCH": ("INPUT-DISPATCH",),
}
KG_RULES = {r for v in KG_MAP.values() for r in v}

_KG_SCRIPT = r"""
import json, sys
try:
    import kernelguard
except Exception as e:
    print(json.dumps({"error": f"import kernelguard failed: {type(e).__name__}: {e}"})); sys.exit(0)
out = {}
for path in json.load(sys.stdin):
    try:
        code = open(path, encoding="utf-8", errors="replace").read()
        r = kernelguard.analyze_code(code)
        out[path] = sorted({m.get("pattern") for m in r.get("matched_patterns", []) if m.get("pattern")})
    except Exception as e:
        out[path] = {"error": f"{type(e).__name__}: {e}"}
try:
    from importlib.metadata import version
    v = version("kernelguard")
except Exception:
    v = getattr(kernelguard, "__version__", None)
print(json.dumps({"version": v, "results": out}))
"""


def run_kernelguard(paths: list[str]) -> dict[str, Any]:
    """KernelGuard verdicts per file, from a child interpreter (FORENSICS_KERNELGUARD_PYTHON or this one)."""
    py = os.environ.get("FORENSICS_KERNELGUARD_PYTHON", sys.executable)
    try:
        p = subprocess.run([py, "-c", _KG_SCRIPT], input=json.dumps(paths), capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"could not run {py}: {e}"}
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"error": f"kernelguard child failed (rc={p.returncode}): {p.stderr.strip()[-300:]}"}


def _score(items: list[dict], key: str, rules: list[str], covered: set[str] | None) -> dict[str, dict]:
    out = {}
    for r in rules:
        if covered is not None and r not in covered:
            out[r] = None
            continue
        tp = fn = fp = tn = 0
        for it in items:
            got = it[key]
            if got is None:
                continue
            if r in it["must"]:
                tp += r in got
                fn += r not in got
            elif r in it["must_not"]:
                fp += r in got
                tn += r not in got
        out[r] = {"tp": tp, "fn": fn, "fp": fp, "tn": tn,
                  "precision": round(tp / (tp + fp), 3) if tp + fp else None,
                  "recall": round(tp / (tp + fn), 3) if tp + fn else None}
    return out


def quality(with_kernelguard: bool = True) -> dict[str, Any]:
    all_labels = json.loads((CORPUS / "labels.json").read_text())
    labels = {("solutions", f): v for f, v in all_labels["solutions"].items()}
    labels.update({("holdout", f): v for f, v in all_labels.get("holdout", {}).items()})
    items: list[dict] = []
    t0 = time.perf_counter()
    for (split, f), lab in sorted(labels.items()):
        path = CORPUS / split / f
        raw = path.read_bytes()
        text = raw.decode("utf-8", "replace")
        rep = lint_source(raw, f, lab["problem"], None, lab["gpu"])
        base = tripwire(text)
        if official_forbidden(text, lab["problem"]):
            base.add("FORBIDDEN-OP")
        must, must_not = _expect(lab)
        items.append({"item": f"{split}/{f}", "split": split, "path": str(path), "must": must,
                      "must_not": must_not, "ours": _ours(rep), "tripwire": base, "kg": None})
    mk = runpy.run_path(str(CORPUS / "make_runs.py"))
    with tempfile.TemporaryDirectory() as tmp:
        run_labels, deck = mk["build"](tmp)
        for name, lab in sorted(run_labels.items()):
            rep = lint_run_dir(Path(tmp) / name, deck=deck)
            text = (Path(tmp) / name / "solution.py").read_text()
            must, must_not = _expect(lab)
            items.append({"item": f"runs/{name}", "split": "runs", "path": None, "must": must, "must_not": must_not,
                          "ours": _ours(rep), "tripwire": tripwire(text), "kg": None})
    t_ours = time.perf_counter() - t0
    kg_info: dict[str, Any] = {"used": False}
    if with_kernelguard:
        t1 = time.perf_counter()
        res = run_kernelguard([it["path"] for it in items if it["path"]])
        kg_info = {"used": "error" not in res, "error": res.get("error"), "version": res.get("version"),
                   "seconds": round(time.perf_counter() - t1, 2), "mapping": {k: list(v) for k, v in KG_MAP.items()}}
        if "results" in res:
            for it in items:
                if it["path"] in res["results"]:
                    pats = res["results"][it["path"]]
                    if isinstance(pats, list):
                        it["kg"] = {r for p in pats for r in KG_MAP.get(p, ())}
                        it["kg_raw"] = pats
    rules = sorted({r for it in items for r in it["must"] | it["must_not"]})
    ours = _score(items, "ours", rules, None)
    base_cov = set(TRIPWIRE) | {"FORBIDDEN-OP"}
    base_cov -= {"ARG-IGNORED", "RETAINED-INPUT"}
    base = _score(items, "tripwire", rules, base_cov)
    kg = _score(items, "kg", rules, KG_RULES) if kg_info.get("used") else {r: None for r in rules}
    missing = sorted(set(RULES) - set(rules) - {"LANGUAGE"})

    def micro(sc: dict) -> dict:
        tp = sum(v["tp"] for v in sc.values() if v)
        fp = sum(v["fp"] for v in sc.values() if v)
        fn = sum(v["fn"] for v in sc.values() if v)
        return {"tp": tp, "fp": fp, "fn": fn, "precision": round(tp / (tp + fp), 3) if tp + fp else None,
                "recall": round(tp / (tp + fn), 3) if tp + fn else None}

    # the same micro totals restricted to the rules each baseline covers, so the comparison is like for like
    def micro_on(sc: dict, keys: set[str]) -> dict:
        return micro({k: v for k, v in sc.items() if k in keys})

    unl = {}
    for it in items:
        for r in it["ours"] - it["must"] - it["must_not"] - {"LANGUAGE", PROBE_LABEL}:
            unl[r] = unl.get(r, 0) + 1
    hold = [it for it in items if it["split"] == "holdout"]
    hold_scores = {"ours": micro(_score(hold, "ours", rules, None)),
                   "tripwire": micro(_score(hold, "tripwire", rules, base_cov)),
                   "kernelguard": micro(_score(hold, "kg", rules, KG_RULES)) if kg_info.get("used") else None}
    fixture = fixture_eval(with_kernelguard) if (FIXTURES / "labels.json").exists() else None
    return {
        "fixture_archive": fixture,
        "n_items": len(items), "n_solution_files": len(labels), "n_run_folders": len(items) - len(labels),
        "n_holdout": len(hold), "holdout_micro": hold_scores,
        "lint_seconds": round(t_ours, 2), "rules_without_cases": missing,
        "per_rule": {r: {"n_must": ours[r]["tp"] + ours[r]["fn"], "n_must_not": ours[r]["fp"] + ours[r]["tn"],
                         "ours": ours[r], "tripwire": base[r], "kernelguard": kg[r]} for r in rules},
        "micro": {"ours": micro(ours), "tripwire": micro(base),
                  "ours_on_tripwire_rules": micro_on(ours, base_cov & set(rules)),
                  "tripwire_on_tripwire_rules": micro_on(base, base_cov & set(rules)),
                  "ours_on_kernelguard_rules": micro_on(ours, KG_RULES & set(rules)),
                  "kernelguard": micro(kg) if kg_info.get("used") else None},
        "kernelguard": kg_info,
        "unlabeled_fires": dict(sorted(unl.items())),
        "misses": [{"item": it["item"], "missed": sorted(it["must"] - it["ours"]), "false": sorted(it["must_not"] & it["ours"])}
                   for it in items if (it["must"] - it["ours"]) or (it["must_not"] & it["ours"])],
    }


# corpus/fixtures/labels.json (written by the corpus generator, not by this analyzer) tags each run's
# planted defects; a tag is detected if any of these rules fires.  '*_ok' tags are clean look-alikes:
# none of the listed rules may fire.  Tags with no static rule are reported as out of reach.
FIXTURE_TAGS: dict[str, tuple[str, ...]] = {
    "ptr_keyed_cache": ("PTR-KEYED-CACHE", "VERSION-KEYED-CACHE"), "sampled_window_cache": ("SAMPLED-VALIDATION",),
    "ptr_keyed_launch_plan": ("PTR-KEYED-CACHE",), "id_keyed_state": ("ID-KEYED-STATE",),
    "id_keyed_weight_cache": ("ID-KEYED-STATE",), "decode_ignores_caches": ("ARG-IGNORED",),
    "template_mutation": ("TEMPLATE-MUTATED",), "global_torch_flag": ("GLOBAL-TORCH-FLAG",),
    "persisting_l2": ("L2-PERSISTING-WINDOW",), "evict_last_flush_defeat": ("L2-EVICT-LAST",),
    "shfl_lane_bug": ("SHFL-LANE-VARYING",), "launch_state_bug": ("ATTR-ONCE-TEMPLATE",),
    "grid_sync_race": ("BARRIER-RACE",), "nonportable_include": ("NONPORTABLE-INCLUDE",),
    "forbidden_op": ("FORBIDDEN-OP",), "cuda_compile_error": ("ATOMIC-TYPE",),
}
FIXTURE_OK_TAGS: dict[str, tuple[str, ...]] = {
    "cuda_graph_replay_ok": ("CUDA-GRAPH-REPLAY", "CACHED-OUTPUT-RETURN"), "ptr_keyed_graph_ok": ("CUDA-GRAPH-REPLAY", "CACHED-OUTPUT-RETURN"),
    "version_keyed_weight_cache_ok": ("PTR-KEYED-CACHE", "CACHED-OUTPUT-RETURN"), "output_buffer_reuse_ok": ("CACHED-OUTPUT-RETURN",),
}


def fixture_eval(with_kernelguard: bool = True) -> dict[str, Any]:
    """Detection of the fixture archive's planted defects (labels written independently of these rules)."""
    fx = FIXTURES
    labels = json.loads((fx / "labels.json").read_text())["runs"]
    rows, kg_paths = [], []
    for rid, lab in sorted(labels.items()):
        d = fx / "archive" / lab["path"]
        if not d.is_dir():
            continue
        rep = lint_run_dir(d)
        sol = next((p for p in (d / "solution.py", d / "repo" / "problems" / lab.get("problem", "") / "solution.py") if p.is_file()), None)
        text = sol.read_text(errors="replace") if sol else ""
        base = tripwire(text) | ({"FORBIDDEN-OP"} if official_forbidden(text, lab.get("problem")) else set())
        rows.append({"run": rid, "tags": lab.get("defects") or [], "ours": rep.rules(), "tripwire": base,
                     "sol": str(sol) if sol else None, "kg": None})
        if sol:
            kg_paths.append(str(sol))
    if with_kernelguard and kg_paths:
        res = run_kernelguard(kg_paths)
        for r in rows:
            pats = res.get("results", {}).get(r["sol"])
            if isinstance(pats, list):
                r["kg"] = {x for p in pats for x in KG_MAP.get(p, ())}
    out: dict[str, Any] = {"n_runs": len(rows), "tags": {}, "ok_tags": {}, "out_of_reach": {}}
    for r in rows:
        for tag in r["tags"]:
            if tag in FIXTURE_TAGS:
                want = set(FIXTURE_TAGS[tag])
                t = out["tags"].setdefault(tag, {"n": 0, "ours": 0, "tripwire": 0, "kernelguard": 0, "missed_by_ours": []})
                t["n"] += 1
                t["ours"] += bool(r["ours"] & want)
                t["tripwire"] += bool(r["tripwire"] & want)
                t["kernelguard"] += bool(r["kg"] and r["kg"] & want)
                if not r["ours"] & want:
                    t["missed_by_ours"].append(r["run"])
            elif tag in FIXTURE_OK_TAGS:
                bad = set(FIXTURE_OK_TAGS[tag])
                t = out["ok_tags"].setdefault(tag, {"n": 0, "ours_false": 0, "tripwire_false": 0, "kernelguard_false": 0})
                t["n"] += 1
                t["ours_false"] += bool(r["ours"] & bad)
                t["tripwire_false"] += bool(r["tripwire"] & bad)
                t["kernelguard_false"] += bool(r["kg"] and r["kg"] & bad)
            else:
                out["out_of_reach"][tag] = out["out_of_reach"].get(tag, 0) + 1
    return out


def _fmt(v: dict | None) -> str:
    if v is None:
        return "   n/a    "
    p = "  -  " if v["precision"] is None else f"{v['precision']:.2f}"
    r = "  -  " if v["recall"] is None else f"{v['recall']:.2f}"
    return f"{p:>5}/{r:<5}"


def print_quality(q: dict) -> None:
    click.echo(f"{q['n_solution_files']} labeled solutions ({q['n_holdout']} holdout) + {q['n_run_folders']} run folders; "
               f"lint took {q['lint_seconds']} s")
    kg = q["kernelguard"]
    click.echo("KernelGuard: " + (f"version {kg.get('version')}, {kg.get('seconds')} s" if kg.get("used")
                                  else f"not run ({kg.get('error') or 'disabled'})"))
    click.echo(f"{'rule':<24}{'must':>5}{'not':>5}   {'ours P/R':<12}{'tripwire P/R':<14}{'KernelGuard P/R':<14}")
    for r, d in q["per_rule"].items():
        click.echo(f"{r:<24}{d['n_must']:>5}{d['n_must_not']:>5}   {_fmt(d['ours']):<12}{_fmt(d['tripwire']):<14}{_fmt(d['kernelguard']):<14}")
    m = q["micro"]
    click.echo(f"micro (all labeled rules):      ours {_fmt(m['ours'])}  tripwire {_fmt(m['tripwire'])}"
               f"  kernelguard {_fmt(m['kernelguard'])}")
    click.echo(f"micro (rules the tripwire has): ours {_fmt(m['ours_on_tripwire_rules'])}  tripwire {_fmt(m['tripwire_on_tripwire_rules'])}")
    click.echo(f"micro (rules KernelGuard maps): ours {_fmt(m['ours_on_kernelguard_rules'])}  kernelguard {_fmt(m['kernelguard'])}")
    h = q["holdout_micro"]
    click.echo(f"holdout only ({q['n_holdout']} files): ours {_fmt(h['ours'])}  tripwire {_fmt(h['tripwire'])}"
               f"  kernelguard {_fmt(h['kernelguard'])}")
    fx = q.get("fixture_archive")
    if fx:
        click.echo(f"fixture archive ({fx['n_runs']} runs, defects labeled independently): detected / planted")
        click.echo(f"  {'defect tag':<28}{'n':>3}{'ours':>6}{'tripwire':>10}{'KernelGuard':>13}")
        for tag, t in sorted(fx["tags"].items()):
            click.echo(f"  {tag:<28}{t['n']:>3}{t['ours']:>6}{t['tripwire']:>10}{t['kernelguard']:>13}"
                       + (f"   missed: {', '.join(m[:15] for m in t['missed_by_ours'])}" if t["missed_by_ours"] else ""))
        for tag, t in sorted(fx["ok_tags"].items()):
            click.echo(f"  {tag + ' (false alarms)':<28}{t['n']:>3}{t['ours_false']:>6}{t['tripwire_false']:>10}{t['kernelguard_false']:>13}")
        click.echo("  no static rule (transcript / runtime only): " + ", ".join(f"{k} x{v}" for k, v in sorted(fx["out_of_reach"].items())))
    if q["rules_without_cases"]:
        click.echo("rules without labeled cases: " + ", ".join(q["rules_without_cases"]))
    for mi in q["misses"]:
        click.echo(f"  miss/false: {mi['item']}: missed {mi['missed']} false {mi['false']}")


# ---------------------------------------------------------------------- throughput
_IDENT = re.compile(r"\b(_[A-Za-z]\w*|Model)\b")


def generate(out: Path, n: int, seed: int = 0) -> list[Path]:
    """n realistic solutions: each 3-8 corpus files concatenated, identifiers suffixed per part."""
    labels = json.loads((CORPUS / "labels.json").read_text())["solutions"]
    parts = []
    for f in sorted(labels):
        t = (CORPUS / "solutions" / f).read_text(encoding="utf-8", errors="replace")
        try:
            ast.parse(t)
        except (SyntaxError, RecursionError, ValueError, MemoryError):
            continue
        parts.append(t)
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        k = rng.randint(3, 8)
        chunks = []
        for j, t in enumerate(rng.sample(parts, k)):
            last = j == k - 1
            chunks.append(_IDENT.sub(lambda m: m.group(0) if (last and m.group(0) == "Model") else f"{m.group(0)}_{i}_{j}", t))
        text = f"# generated solution {i} (seed {seed})\n" + "\n\n".join(chunks)
        p = out / f"sol_{i:05d}.py"
        p.write_text(text)
        paths.append(p)
    return paths


_PROBLEM = re.compile(r"(?:^|_)(\d\d_[a-z0-9_]+?)(?:\.py)?$")


def real_copies(src: Path, out: Path, n: int) -> list[Path]:
    """n files cycled from the `solution.py` files under `src` (real solutions: `forensics bench
    lint --from ../shared/real-dev`), each named after its run folder so the lint knows its
    problem; copies, so that reading them is part of what is timed as for generated files."""
    found = sorted(src.rglob("solution.py"))
    if not found:
        raise click.ClickException(f"no solution.py under {src}")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        f = found[i % len(found)]
        p = out / f"{i:05d}_{f.parent.name}.py"
        p.write_bytes(f.read_bytes())
        paths.append(p)
    return paths


def _lint_one(path: str) -> tuple[int, float]:
    t0 = time.process_time()
    m = _PROBLEM.search(os.path.basename(path))
    problem = m.group(1) if m and not os.path.basename(path).startswith("sol_") else "05_topk_bitonic"
    with open(path, "rb") as fh:
        n = len(lint_source(fh.read(), "solution.py", problem).hits)
    return n, time.process_time() - t0


def _parse_one(path: str) -> tuple[int, float]:
    t0 = time.process_time()
    with open(path, "rb") as fh:
        try:
            n = len(ast.parse(fh.read()).body)
        except (SyntaxError, ValueError, RecursionError):   # a real file with sidecars appended
            n = 0
    return n, time.process_time() - t0


def throughput(n: int = 10_000, workers: int = 2, seed: int = 0, real: Path | None = None) -> dict[str, Any]:
    """Wall and CPU seconds of bare read+ast.parse and of the full lint over the same n files.

    CPU seconds are summed over the worker processes: on a shared machine (other jobs running) the
    wall clock includes their load, CPU/workers is what an idle box of `workers` cores would take."""
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        paths = [str(p) for p in (real_copies(real, Path(tmp), n) if real else generate(Path(tmp), n, seed))]
        t_gen = time.perf_counter() - t0
        lines = sum(Path(p).read_text().count("\n") for p in paths[:200]) / min(200, len(paths))
        res: dict[str, Any] = {}
        for name, fn in (("read_parse", _parse_one), ("lint", _lint_one)):
            t0 = time.perf_counter()
            out = list(pmap(fn, paths, workers, ordered=False, chunksize=32))
            wall = time.perf_counter() - t0
            cpu = sum(c for _, c in out)
            res[name] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "cpu_ms_per_file": round(cpu / n * 1000, 2),
                         "idle_estimate_s": round(cpu / workers, 2)}
            if name == "lint":
                res["findings"] = sum(k for k, _ in out)
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"n": n, "workers": workers, "source": str(real) if real else "generated", "avg_lines": round(lines),
            "generate_s": round(t_gen, 2), **res,
            "lint_vs_parse_cpu": round(res["lint"]["cpu_s"] / res["read_parse"]["cpu_s"], 2) if res["read_parse"]["cpu_s"] else None,
            "under_60s_wall": res["lint"]["wall_s"] < 60, "under_60s_idle_estimate": res["lint"]["idle_estimate_s"] < 60,
            "load_average_start": load0, "load_average_end": load1, "cpus": os.cpu_count()}


@click.command("lint")
@click.option("--quality", is_flag=True, help="Per-rule precision/recall vs the tripwire and KernelGuard.")
@click.option("-n", "n", default=10_000, show_default=True, help="Solutions for the throughput run.")
@click.option("--workers", default=2, show_default=True, help="Worker processes for the throughput run.")
@click.option("--seed", default=0, show_default=True, help="Seed of the generated solutions.")
@click.option("--no-kernelguard", is_flag=True, help="Skip the KernelGuard column.")
@click.option("--from", "real", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Cycle the solution.py files under DIR (real solutions) instead of generating.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_lint(quality: bool, n: int, workers: int, seed: int, no_kernelguard: bool, real: Path | None,
               as_json: bool) -> None:
    """Lint N generated (or --from DIR real) solutions vs bare read + ast.parse (or, with --quality,
    rule precision/recall)."""
    if quality:
        q = globals()["quality"](with_kernelguard=not no_kernelguard)
        if as_json:
            click.echo(json.dumps(q, indent=1, default=sorted))
        else:
            print_quality(q)
        return
    r = throughput(n, workers, seed, real)
    if as_json:
        click.echo(json.dumps(r, indent=1))
        return
    click.echo(f"{r['n']} {'generated' if real is None else 'real (cycled from ' + str(real) + ')'} solutions, ~{r['avg_lines']} lines each (generation {r['generate_s']} s); "
               f"{workers} worker processes; load average {r['load_average_start']} -> {r['load_average_end']} on {r['cpus']} CPUs")
    for k, label in (("read_parse", "read + ast.parse"), ("lint", "lint (all rules)")):
        d = r[k]
        click.echo(f"{label:<18} wall {d['wall_s']:8.2f} s   CPU {d['cpu_s']:8.2f} s ({d['cpu_ms_per_file']} ms/file)   "
                   f"idle-box estimate {d['idle_estimate_s']:7.2f} s")
    click.echo(f"lint / parse CPU: {r['lint_vs_parse_cpu']}x; {r['findings']} findings; 60 s target: wall "
               f"{'met' if r['under_60s_wall'] else 'MISSED'}, idle estimate {'met' if r['under_60s_idle_estimate'] else 'MISSED'}")
