"""`forensics bench similarity`: MinHash/LSH all-pairs vs exact all-pairs at 1k/10k/100k solutions,
`--quality`: the contamination quality table (ours vs a raw-token Jaccard baseline), and
`--real-sized N` / `--dir DIR`: all pairs of N generated real-sized solutions (or of every solution
in DIR) through the production path of `forensics similar` (lex, shingle, discount, pair scores,
aligned spans), beside a plain MinHash/LSH over the same files measured in the same run.

Real-sized.  Solutions of the public archive average ~570 lines, about half of the bytes CUDA/C++
held in `load_inline` strings; `gen_real_sized` writes such files (a Triton part plus a CUDA source
string, docstrings and comments) in families of near-copies like `corpus`.  The baseline is the
plain recipe: datasketch `MinHash(num_perm=128).update_batch` over each file's whitespace-token
5-grams, inserted into a `MinHashLSH(threshold=0.5)` and queried with every file.

Workload.  Deterministic generated solutions (Triton-style Python built from statement templates
with random identifiers, constants and structure) in families: a base and 0-3 derivatives that
rename identifiers, reorder functions and edit 10-30% of lines, so true similar pairs exist at
every size.  Every document goes through the production path of `forensics.analyze.similarity`:
tokenize -> normalize -> shingle -> scaffolding discount -> MinHash (numpy, datasketch's hash
family) -> LSH banding -> exact Jaccard of the candidates.

Ground truth.  All pairs with exact Jaccard >= threshold over the same discounted sets, found by
an exact prefix-filtered similarity join (every pair with J >= t shares one of the rarest
|x| - ceil(t|x|) + 1 shingles of each side, so the join misses nothing) and verified exactly; at
1k it is checked against literal brute force over all n(n-1)/2 pairs, whose time is measured there
and, at larger sizes, measured on a random sample of pairs and scaled to n(n-1)/2 (labelled
"extrapolated").  Recall = LSH pairs found / true pairs.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import click
import numpy as np

from forensics.analyze import similarity as SIM
from devkit.bench.synth import _FNS, _OPS, _OTHERS, _WORDS, _name, _stmt, gen_solution  # noqa: F401

THRESHOLD = 0.5

# ------------------------------------------------------------------------------ generator
# (the plain Triton generator is devkit.bench.synth)


def derive(src: str, rng: random.Random, edit_frac: float) -> str:
    """A derivative: identifiers renamed, top-level functions reordered, a fraction of lines edited."""
    from devkit.bench.contamination_eval import rename, reorder
    s = rename(src, str(rng.random()))
    if rng.random() < 0.7:
        try:
            s = reorder(s)
        except SyntaxError:
            pass
    lines = s.splitlines()
    body = [i for i, ln in enumerate(lines) if ln.startswith("    ") and "=" in ln and "def " not in ln]
    for i in rng.sample(body, int(edit_frac * len(body))):
        ind = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = ind + _stmt(rng, [lines[i].split("=")[0].strip() or "x", "x"])
    return "\n".join(lines) + "\n"


_CU_TYPES = ["float", "__nv_bfloat16", "half", "int", "float4", "uint32_t"]
_CU_FNS = ["__expf", "fmaxf", "fminf", "rsqrtf", "__shfl_xor_sync(0xffffffff, {a}, {k})", "atomicAdd(&{a}, {b})"]


def _cu_stmt(rng: random.Random, vs: list[str]) -> str:
    a, b = rng.choice(vs), rng.choice(vs)
    t = _name(rng)
    vs.append(t)
    k = rng.randrange(7)
    if k == 0:
        return f"{rng.choice(_CU_TYPES)} {t} = {a}[threadIdx.x + {rng.randrange(1, 256)} * blockIdx.x];"
    if k == 1:
        f = rng.choice(_CU_FNS)
        return f"float {t} = " + (f.format(a=a, b=b, k=rng.choice([1, 2, 4, 8, 16])) if "{" in f else f"{f}({a} * {b})") + ";"
    if k == 2:
        return f"for (int {t} = threadIdx.x; {t} < {rng.randrange(64, 8192)}; {t} += blockDim.x) {{ {a} += {b}[{t}]; }}"
    if k == 3:
        return f"if ({a} > {rng.randrange(1, 99)}) {{ {b} = {a} * {rng.random():.4f}f; }}"
    if k == 4:
        return f"__shared__ float {t}[{rng.choice([32, 64, 128, 256])}];"
    if k == 5:
        return f"{a} = {b} {rng.choice(_OPS)} {rng.randrange(1, 4096)};"
    return "__syncthreads();"


def gen_real_sized(rng: random.Random, n_lines: int = 570) -> str:
    """A solution the size and shape of the archive's: docstring, a Triton part, a CUDA source
    string for load_inline (about half the lines), comments, and the Model wrapper."""
    head = ['"""' + " ".join(rng.choice(_WORDS) for _ in range(12)) + ".", "", "Strategy: " +
            " ".join(rng.choice(_WORDS) for _ in range(20)) + '."""']
    py = gen_solution(rng, max(40, n_lines // 2)).splitlines()
    cu = ['CUDA_SRC = r"""', "#include <cuda_runtime.h>", "#include <cuda_bf16.h>", ""]
    while len(cu) < n_lines // 2:
        fname = _name(rng) + "_kernel"
        params = [_name(rng) for _ in range(rng.randrange(2, 6))]
        vs = list(params)
        cu.append(f"// {' '.join(rng.choice(_WORDS) for _ in range(8))}")
        cu.append(f"__global__ void {fname}(" + ", ".join(f"float* __restrict__ {p}" for p in params) + ") {")
        for _ in range(rng.randrange(8, 24)):
            cu.append("    " + _cu_stmt(rng, vs))
        cu.extend(["}", ""])
    cu.append('"""')
    cu.append('_ext = load_inline(name="ext", cpp_sources="", cuda_sources=CUDA_SRC, functions=[], verbose=False)')
    return "\n".join(head + py[:4] + cu + [""] + py[4:]) + "\n"


def corpus(n: int, seed: int = 0, n_problems: int = 10, real_sized: bool = False) -> tuple[list[str], list[str]]:
    """n documents in families; returns (sources, problems)."""
    rng = random.Random(seed)
    srcs: list[str] = []
    probs: list[str] = []
    while len(srcs) < n:
        prob = f"{rng.randrange(n_problems):02d}_problem"
        base = gen_real_sized(rng, rng.randrange(400, 740)) if real_sized else gen_solution(rng, rng.randrange(45, 80))
        srcs.append(base)
        probs.append(prob)
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
            if len(srcs) >= n:
                break
            srcs.append(derive(base, rng, rng.uniform(0.05, 0.3)))
            probs.append(prob)
    return srcs, probs


# ------------------------------------------------------------------------------ exact joins

def prefix_join(sets: list[np.ndarray], groups: list[str], t: float) -> set[tuple[int, int]]:
    """Exact all-pairs with Jaccard >= t (prefix filtering + exact verification), within groups."""
    if not sets:
        return set()
    allv = np.concatenate([s for s in sets if len(s)]) if any(len(s) for s in sets) else np.zeros(0, np.uint64)
    vals, counts = np.unique(allv, return_counts=True)
    out: set[tuple[int, int]] = set()
    by_group: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        by_group[g].append(i)
    for g, idx in by_group.items():
        index: dict[int, list[int]] = defaultdict(list)
        cands: set[tuple[int, int]] = set()
        for i in idx:
            s = sets[i]
            if not len(s):
                continue
            freq = counts[np.searchsorted(vals, s)]
            order = s[np.lexsort((s, freq))]
            p = len(s) - math.ceil(t * len(s)) + 1
            for v in order[:p].tolist():
                lst = index[v]
                for j in lst:
                    cands.add((j, i))
                lst.append(i)
        for i, j in cands:
            jac = SIM.exact_scores(sets[i], sets[j])[0]
            if jac >= t:
                out.add((min(i, j), max(i, j)))
    return out


def brute_force(sets: list[np.ndarray], groups: list[str], t: float, pairs: list[tuple[int, int]] | None = None):
    """Literal brute force: exact Jaccard of every pair (python sets)."""
    ps = [set(s.tolist()) for s in sets]
    out = set()
    n = len(sets)
    it = pairs if pairs is not None else ((i, j) for i in range(n) for j in range(i + 1, n))
    for i, j in it:
        if groups[i] != groups[j]:
            continue
        a, b = ps[i], ps[j]
        inter = len(a & b)
        if inter and inter / (len(a) + len(b) - inter) >= t:
            out.add((i, j))
    return out


# ------------------------------------------------------------------------------ benchmark

def run_size(n: int, jobs: int, truth: bool, brute: str, seed: int = 0) -> dict[str, Any]:
    srcs, probs = corpus(n, seed)
    load0 = os.getloadavg()[0]
    c0 = _cpu()
    t0 = time.perf_counter()
    if jobs > 1 and n >= 5000:
        from forensics.pool import pmap
        sets_list = list(pmap(_shingle_one, srcs, jobs, chunksize=500))
    else:
        sets_list = [_shingle_one(s) for s in srcs]
    t_shingle = time.perf_counter() - t0
    docs = [SIM.Doc(str(i), probs[i], {}, "", {}, sets_list[i]) for i in range(n)]
    t1 = time.perf_counter()
    SIM.discount(docs, None, jobs=jobs)
    t_discount = time.perf_counter() - t1
    sets = [d.distinct for d in docs]
    t2 = time.perf_counter()
    sigs = SIM.signatures_parallel(sets, jobs=jobs)
    t_minhash = time.perf_counter() - t2
    t3 = time.perf_counter()
    cand, params = SIM.lsh_candidates(sigs, LSH_T, groups=probs)
    t_lsh = time.perf_counter() - t3
    t4 = time.perf_counter()
    found = set()
    for i, j in cand:
        if SIM.exact_scores(sets[i], sets[j])[0] >= THRESHOLD:
            found.add((i, j))
    t_verify = time.perf_counter() - t4
    total = time.perf_counter() - t0
    cpu = _cpu() - c0
    row: dict[str, Any] = {"n": n, "cpu_total_s": cpu, "load_avg_start": load0, "load_avg_end": os.getloadavg()[0], "pairs_found": len(found), "candidates": len(cand), "lsh_bands_rows": params,
                           "t_shingle_s": t_shingle, "t_discount_s": t_discount, "t_minhash_s": t_minhash,
                           "t_lsh_s": t_lsh, "t_verify_s": t_verify, "t_total_s": total,
                           "t_lsh_path_s": t_minhash + t_lsh + t_verify}
    if truth:
        t5 = time.perf_counter()
        true = prefix_join(sets, probs, THRESHOLD)
        row["t_exact_join_s"] = time.perf_counter() - t5
        row["true_pairs"] = len(true)
        row["recall"] = len(found & true) / len(true) if true else 1.0
        row["precision"] = len(found & true) / len(found) if found else 1.0
    n_pairs = n * (n - 1) // 2
    if brute == "full":
        t6 = time.perf_counter()
        bf = brute_force(sets, probs, THRESHOLD)
        row["t_brute_s"] = time.perf_counter() - t6
        row["brute_extrapolated"] = False
        if truth:
            row["exact_join_equals_brute"] = bf == true
    elif brute == "sample":
        rng = random.Random(1)
        sample = [tuple(sorted(rng.sample(range(n), 2))) for _ in range(200_000)]
        # the sample must pay for every pair, including cross-problem ones
        same = ["g"] * n
        t6 = time.perf_counter()
        brute_force(sets, same, THRESHOLD, sample)
        dt = time.perf_counter() - t6
        row["t_brute_s"] = dt / len(sample) * n_pairs
        row["brute_extrapolated"] = True
    return row


def run_files(names: list[str], texts: list[str], problems: list[str | None]) -> dict[str, Any]:
    """All pairs of these solutions through the production path of `forensics similar` (lex and
    shingle, scaffolding discount, pair scores, aligned spans for pairs >= 0.1), each phase timed,
    beside a plain MinHash/LSH over the same files measured in the same run."""
    load0 = os.getloadavg()[0]
    c0, t0 = _cpu(), time.perf_counter()
    docs = [SIM.build_doc(n, {"solution.py": t}, p) for n, t, p in zip(names, texts, problems)]
    c1, t1 = _cpu(), time.perf_counter()
    pairs, stats = SIM.find_pairs(docs, {}, with_spans=False)   # scaffolding discount + pair scores
    c3, t3 = _cpu(), time.perf_counter()
    n_spans = 0
    for p in pairs:
        if p.score >= 0.1:
            p.spans = SIM.aligned_spans(docs[p.a], docs[p.b])[:50]
            n_spans += 1
    c4, t4 = _cpu(), time.perf_counter()
    cpu = c4 - c0
    ours = t4 - t0
    c5, t5 = _cpu(), time.perf_counter()
    from datasketch import MinHash, MinHashLSH
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    sigs = []
    for i, t in enumerate(texts):
        m = MinHash(num_perm=128)
        w = t.split()
        m.update_batch([" ".join(w[k:k + 5]).encode() for k in range(max(1, len(w) - 4))])
        lsh.insert(i, m)
        sigs.append(m)
    base_pairs = {(min(i, j), max(i, j)) for i, m in enumerate(sigs) for j in lsh.query(m) if j != i}
    t6 = time.perf_counter()
    return {"files": len(texts), "bytes": sum(len(t) for t in texts), "lines": sum(t.count("\n") for t in texts),
            "t_lex_shingle_s": t1 - t0, "t_pairs_s": t3 - t1, "t_spans_s": t4 - t3,
            "cpu_lex_shingle_s": c1 - c0, "cpu_pairs_s": c3 - c1, "cpu_spans_s": c4 - c3,
            "t_ours_s": ours, "cpu_ours_s": cpu, "pairs": len(pairs), "pairs_with_spans": n_spans,
            "pairs_ge_05": sum(1 for p in pairs if p.score >= 0.5), "exact_groups": stats.get("exact_groups"),
            "lsh_docs": stats.get("lsh_docs"), "t_plain_minhash_s": t6 - t5, "cpu_plain_minhash_s": _cpu() - c5,
            "plain_minhash_pairs": len(base_pairs), "load_avg_start": load0, "load_avg_end": os.getloadavg()[0]}


def _dir_solutions(root: str) -> tuple[list[str], list[str], list[str | None]]:
    """Every *.py under root (a flat folder of solutions or run folders' solution.py), with the
    problem each belongs to as `forensics similar` infers it."""
    from forensics.analyze.similarity import infer_problem
    names, texts, probs = [], [], []
    for f in sorted(Path(root).rglob("*.py")):
        t = f.read_text("utf-8", "replace")
        names.append(str(f.relative_to(root)))
        texts.append(t)
        probs.append(infer_problem(f, t)[0])
    return names, texts, probs


def files_table(r: dict[str, Any], what: str) -> str:
    return "\n".join([
        f"all pairs of {r['files']} solutions ({what}; {r['lines']:,} lines, {r['bytes'] / 1e6:.1f} MB), one process",
        f"{'':<36}{'wall s':>10}{'CPU s':>10}",
        f"{'lex + shingle':<36}{r['t_lex_shingle_s']:>10.2f}{r['cpu_lex_shingle_s']:>10.2f}",
        f"{'discount + pair scores':<36}{r['t_pairs_s']:>10.2f}{r['cpu_pairs_s']:>10.2f}",
        f"{'aligned spans (' + str(r['pairs_with_spans']) + ' pairs >= 0.1)':<36}{r['t_spans_s']:>10.2f}"
        f"{r['cpu_spans_s']:>10.2f}",
        f"{'forensics similar path, total':<36}{r['t_ours_s']:>10.2f}{r['cpu_ours_s']:>10.2f}",
        f"{'plain MinHash/LSH (baseline)':<36}{r['t_plain_minhash_s']:>10.2f}{r['cpu_plain_minhash_s']:>10.2f}",
        f"ratio ours / plain MinHash: {r['t_ours_s'] / r['t_plain_minhash_s']:.2f} wall, "
        f"{r['cpu_ours_s'] / r['cpu_plain_minhash_s']:.2f} CPU; pairs reported {r['pairs']} "
        f"({r['pairs_ge_05']} scoring >= 0.5); exact groups {r['exact_groups']}, docs via LSH {r['lsh_docs']}",
        f"load average {r['load_avg_start']:.1f} -> {r['load_avg_end']:.1f} on {os.cpu_count()} cores"])


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the MinHash/shingle pools)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


LSH_T = 0.4  # banding threshold below the reporting threshold, for recall at J just above 0.5


def _shingle_one(src: str) -> np.ndarray:
    return SIM.build_doc("_", {"solution.py": src}, keep_where=False).shingles


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if v < 100 else f"{v:,.0f}"
    return str(v)


def quality_table(rep: dict[str, Any]) -> str:
    s = rep["similarity"]
    o, b = s["ours"], s["baseline"]
    lines = [f"similarity quality: {s['documents']} documents ({s['bases']} hand-written bases, {s['derivatives']} "
             f"planted derivatives, {s['problems']} problems)",
             f"{'metric':<44}{'ours (normalized shingles)':>32}{'baseline (raw-token Jaccard)':>30}",
             f"{'true source ranked 1st':<44}{sum(1 for r in o['ranks'].values() if r == 1):>28}/{len(o['ranks']):<3}"
             f"{sum(1 for r in b['ranks'].values() if r == 1):>26}/{len(b['ranks']):<3}",
             f"{'worst rank of a true source':<44}{o['worst_rank']:>32}{b['worst_rank']:>30}",
             f"{'lowest true-pair score':<44}{o['min_true']:>32.3f}{b['min_true']:>30.3f}",
             f"{'highest unrelated same-problem score':<44}{o['max_unrelated']:>32.3f}{b['max_unrelated']:>30.3f}",
             f"{'gap (lowest true - highest unrelated)':<44}{o['gap']:>32.3f}{b['gap']:>30.3f}"]
    for k in sorted(o["rank1_by_kind"]):
        lines.append(f"{'  rank 1 for ' + k:<44}{o['rank1_by_kind'][k]:>32}{b['rank1_by_kind'].get(k, '-'):>30}")
    lines.append(f"true pairs with aligned spans: {s['true_pairs_with_spans']}/{s['derivatives']}")
    r = rep["reads"]
    lines.append("")
    lines.append(f"read classification: {r['labeled_refs']} labeled references in {r['cases']} runs, harness styles "
                 f"{', '.join(r['styles'])}")
    lines.append(f"{'class':<20}{'precision':>10}{'recall':>10}{'tp':>6}{'fp':>6}{'fn':>6}")
    for k, v in r["per_class"].items():
        lines.append(f"{k:<20}{v['precision']:>10.3f}{v['recall']:>10.3f}{v['tp']:>6}{v['fp']:>6}{v['fn']:>6}")
    for e in r["errors"][:10]:
        lines.append(f"  miss: {e['case']} {e['foreign'][:40]} want={e['want']} got={e['got']}")
    return "\n".join(lines)


@click.command("similarity")
@click.option("--sizes", default="1000,10000,100000", show_default=True, help="Comma-separated corpus sizes.")
@click.option("--jobs", default=min(2, os.cpu_count() or 1), show_default=True, help="Processes for shingling/MinHash.")
@click.option("--quality", is_flag=True, help="Print the contamination quality table (ours vs baseline) instead.")
@click.option("--real-sized", "real_sized", type=int, default=None,
              help="All pairs of N generated real-sized solutions (~570 lines, CUDA strings) vs plain MinHash.")
@click.option("--dir", "dir_", type=click.Path(exists=True, file_okay=False), default=None,
              help="All pairs of every *.py solution under DIR vs plain MinHash.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def bench_similarity(sizes: str, jobs: int, quality: bool, real_sized: int | None, dir_: str | None,
                     as_json: bool) -> None:
    """All pairs above Jaccard 0.5 with MinHash/LSH vs exact search; recall at 1k and 10k."""
    import orjson
    if real_sized or dir_:
        if dir_:
            names, texts, probs = _dir_solutions(dir_)
            what = f"every *.py under {dir_}"
        else:
            texts, probs = corpus(real_sized, seed=0, n_problems=12, real_sized=True)
            names = [f"g{i}" for i in range(len(texts))]
            what = "generated real-sized, families of near-copies, 12 problems"
        r = run_files(names, texts, probs)
        click.echo(orjson.dumps(r, option=orjson.OPT_INDENT_2).decode() if as_json else files_table(r, what))
        return
    if quality:
        from devkit.bench.contamination_eval import evaluate
        rep = evaluate()
        if as_json:
            click.echo(orjson.dumps(rep, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str).decode())
        else:
            click.echo(quality_table(rep))
        return
    rows = []
    for n in [int(x) for x in sizes.split(",") if x.strip()]:
        truth = n <= 10_000
        brute = "full" if n <= 1000 else "sample"
        rows.append(run_size(n, jobs, truth, brute))
    if as_json:
        click.echo(orjson.dumps({"threshold": THRESHOLD, "lsh_threshold": LSH_T, "jobs": jobs, "rows": rows},
                                option=orjson.OPT_INDENT_2, default=str).decode())
        return
    click.echo(f"all pairs with Jaccard >= {THRESHOLD} (LSH banding at {LSH_T}, {SIM.NUM_PERM} perms, jobs={jobs})")
    hdr = f"{'n':>8}{'cpu s':>8}{'total s':>9}{'shingle':>9}{'discnt':>8}{'minhash':>9}{'lsh':>7}{'verify':>8}{'pairs':>8}" \
          f"{'recall':>8}{'exact join s':>13}{'brute s':>12}{'brute/lsh':>10}"
    click.echo(hdr)
    for r in rows:
        bt = r.get("t_brute_s")
        click.echo(f"{r['n']:>8}{r['cpu_total_s']:>8.1f}{r['t_total_s']:>9.2f}{r['t_shingle_s']:>9.2f}{r['t_discount_s']:>8.2f}"
                   f"{r['t_minhash_s']:>9.2f}{r['t_lsh_s']:>7.2f}{r['t_verify_s']:>8.2f}{r['pairs_found']:>8}"
                   f"{(format(r['recall'], '.3f') if 'recall' in r else '-'):>8}"
                   f"{(format(r['t_exact_join_s'], '.2f') if 't_exact_join_s' in r else '-'):>13}"
                   f"{(format(bt, ',.1f') + ('*' if r.get('brute_extrapolated') else '')) if bt else '-':>12}"
                   f"{(format(bt / r['t_lsh_path_s'], ',.0f') + 'x') if bt else '-':>10}")
    for a, b in zip(rows, rows[1:]):
        g = math.log(b["t_total_s"] / a["t_total_s"]) / math.log(b["n"] / a["n"])
        click.echo(f"growth {a['n']}->{b['n']}: time x{b['t_total_s'] / a['t_total_s']:.1f} for n x{b['n'] / a['n']:.0f} "
                   f"(exponent {g:.2f}; quadratic = 2.00)")
    click.echo("load average at start/end of each size: " + ", ".join(
        f"{r['n']}: {r['load_avg_start']:.1f}/{r['load_avg_end']:.1f}" for r in rows) + f" (this machine has {os.cpu_count()} cores)")
    if any(r.get("brute_extrapolated") for r in rows):
        click.echo("* brute force timed on 200,000 random pairs and scaled to n(n-1)/2 pairs")
    for r in rows:
        if "exact_join_equals_brute" in r:
            click.echo(f"n={r['n']}: exact prefix join == literal brute force: {r['exact_join_equals_brute']}")
