"""Source similarity between final solutions: exact shingle overlap (MinHash + LSH for very large
problem groups) over normalized token shingles.

    from forensics.analyze import similarity
    similarity.analyze(store)                 # similarity_pairs + findings for every run
    docs = [similarity.build_doc("a", {"solution.py": src})]   # library use (notebooks, bench)
    pairs, stats = similarity.find_pairs(docs)

Pipeline (each step a function below):

1. **Documents.**  A run's document is its final ``solution.py`` plus the sidecar CUDA/C++ sources
   archived beside it (``scratch/*.cu|cuh|cpp|cc|h|hpp``).  ``--against DIR`` adds external
   solutions: ``*.py`` files, or run folders (a folder holding ``solution.py``); a loose file's
   problem comes from `infer_problem` (a run id in its name, else the reference interface in it).
2. **Tokens.**  Python is tokenized with a regex lexer (one ``findall`` per file; raw tokens map to
   normalized ids through a dict that fills itself); comments and docstrings are dropped;
   string literals that hold C/C++/CUDA (``load_inline`` sources: ``__global__``, ``#include``,
   braces and semicolons) are lexed as C++ in place, keeping their line numbers; other strings
   become ``S``.  Identifiers are normalized to ``V`` unless they are language keywords or
   well-known API names (torch, triton ``tl.*``, CUDA intrinsics and types), so renaming every
   variable and function does not change the token stream.  Numbers are kept.
3. **Shingles.**  Every window of `K` consecutive tokens (per file) is hashed to 32 bits.
4. **Discount of shared scaffolding.**  Shingles of the problem's reference/template files (the
   run's ``template_files/`` and ``repo/problems/<p>/``) are removed; then shingles common to many
   *independent* solutions of the same problem are removed: near-duplicates (Jaccard >= 0.5) are
   clustered, and a shingle found in more than ``max(MIN_DF, DF_FRAC * clusters)`` clusters
   of the problem is scaffolding.  Counting clusters, not documents, keeps a widely copied
   solution from discounting its own copied text.
5. **Pairs.**  Within each problem the exact intersection of every pair of shingle sets comes from
   one sparse product of the document x shingle matrix (`exact_overlaps`) while that costs at most
   `EXACT_WORK`; past it, MinHash signatures (datasketch's permutation family and formula,
   ``(a*h + b) mod (2^61-1)`` truncated to 32 bits, computed with numpy over all shingles of a
   batch at once) feed datasketch's ``MinHashLSH`` banding and ``MinHashLSHEnsemble``.
6. **Scores and spans.**  Each pair gets the exact Jaccard of the discounted sets, both
   containments, and a score ``max(jaccard, containment)`` (containment only counts when the
   smaller side has ``MIN_SET`` shingles); pairs under `PAIR_FLOOR` are dropped.  Aligned spans
   come from greedy tiling of normalized token lines (order-independent, so reordered functions
   still align), with 1-based line ranges in both files.

Findings (analyzer ``similarity``, category ``contamination``): ``similar-solution`` for pairs
above `FINDING_SCORE`, and ``contamination-chain`` when a run that read a foreign run's files
(foreign_refs, from the provenance analyzer) has a final solution similar to that run's.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from forensics.text.code import (  # noqa: F401 - the tokenizer and spans, re-exported for the analyzer's users
    CPP_KEEP, Doc, FileToks, K, PY_KEEP, SIDE_EXT, Tok, _unique, _unique_counts, _unique_inverse,
    aligned_spans, build_doc, lex_cpp_ids, lex_file, lex_file_ids, lex_python_ids, shingle_hashes,
    shingle_set_of_text, span_summary, tokenize_cpp, tokenize_file, tokenize_python,
)

NUM_PERM = 128        # permutations of the bench / cluster pass
ANALYSIS_PERM = 256   # permutations of the archive analysis
ANALYSIS_BANDS = (128, 2)  # bands x rows: a pair with J = 0.176 (a 30% copy between equal-size
#                            files) is a candidate with probability 1-(1-0.176^2)^128 = 0.98
LSH_THRESHOLD = 0.15  # used only when no explicit bands are given
CLUSTER_THRESHOLD = 0.5
CLUSTER_PERM = 64      # the clustering pass only needs to see near-duplicates (J >= 0.5)
DF_FRAC = 0.3
MIN_DF = 3
MIN_SET = 30          # containment needs this many distinctive shingles on the smaller side
FINDING_SCORE = 0.5   # similar-solution finding at this score
SEED = 1
_MERSENNE = np.uint64((1 << 61) - 1)

# ------------------------------------------------------------------------------ minhash / lsh

_PERMS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
SCHEME = "affine32"   # datasketch's default permutation scheme


def permutations(num_perm: int = NUM_PERM, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's permutation parameters (a, b) for (num_perm, seed) in the affine32 scheme."""
    key = (num_perm, seed)
    if key not in _PERMS:
        from datasketch import MinHash
        a, b = MinHash(num_perm=num_perm, seed=seed, scheme=SCHEME).permutations
        _PERMS[key] = (np.asarray(a, dtype=np.uint32), np.asarray(b, dtype=np.uint32))
    return _PERMS[key]


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3 32-bit finalizer (datasketch pre-mixes inputs with it)."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def signatures(sets: Sequence[np.ndarray], num_perm: int = NUM_PERM, seed: int = SEED,
               batch_cols: int = 1 << 15) -> np.ndarray:
    """MinHash signatures (len(sets) x num_perm, uint32), identical to datasketch's
    ``MinHash(scheme='affine32').update_batch`` of the 32-bit shingle hashes, but vectorized over
    batches of documents: one (num_perm x shingles) matrix per batch, min-reduced per document."""
    a, b = permutations(num_perm, seed)
    a = a[:, None]
    b = b[:, None]
    n = len(sets)
    out = np.full((n, num_perm), np.uint32(0xFFFFFFFF), dtype=np.uint32)
    i = 0
    while i < n:
        j = i
        cols = 0
        while j < n and (cols == 0 or cols + len(sets[j]) <= batch_cols):
            cols += len(sets[j])
            j += 1
        chunk = sets[i:j]
        lens = np.array([len(s) for s in chunk])
        nz = lens > 0
        if cols:
            allh = _fmix32(np.concatenate([s for s in chunk if len(s)]).astype(np.uint32))
            with np.errstate(over="ignore"):
                ph = a * allh[None, :] + b
            starts = np.concatenate([[0], np.cumsum(lens[nz])[:-1]])
            mins = np.minimum.reduceat(ph, starts, axis=1).T
            out[np.arange(i, j)[nz]] = mins
        i = j
    return out


def _sig_worker(args):
    sets, num_perm, seed = args
    return signatures(sets, num_perm, seed)


def signatures_parallel(sets: Sequence[np.ndarray], num_perm: int = NUM_PERM, seed: int = SEED,
                        jobs: int = 1) -> np.ndarray:
    if jobs <= 1 or len(sets) < 2000:
        return signatures(sets, num_perm, seed)
    from forensics.pool import pmap
    step = (len(sets) + jobs * 4 - 1) // (jobs * 4)
    chunks = [list(sets[i:i + step]) for i in range(0, len(sets), step)]
    parts = list(pmap(_sig_worker, [(c, num_perm, seed) for c in chunks], jobs))
    return np.concatenate(parts, axis=0)


def lsh_candidates(sigs: np.ndarray, threshold: float, num_perm: int | None = None,
                   groups: Sequence[Any] | None = None, weights: tuple[float, float] = (0.3, 0.7),
                   params: tuple[int, int] | None = None) -> tuple[set[tuple[int, int]], tuple[int, int]]:
    """Candidate pairs (i < j) from datasketch's MinHashLSH banding; only pairs within the same
    group (problem) when `groups` is given.  `params` = (bands, rows) overrides datasketch's
    optimal choice for `threshold`.  Returns (pairs, (bands, rows))."""
    from datasketch import MinHashLSH
    from datasketch.lsh import _optimal_param
    num_perm = num_perm or sigs.shape[1]
    bands, rows = params or _optimal_param(threshold, num_perm, weights[0], weights[1])
    lsh = MinHashLSH(num_perm=num_perm, params=(bands, rows))
    # bucket directly through the band hash tables (same keys MinHashLSH.insert uses) so that
    # all-pairs enumeration does not need one query per document
    hashtables = lsh.hashtables
    ranges = lsh.hashranges
    n = sigs.shape[0]
    sw = sigs
    buckets: list[dict[bytes, list[int]]] = [defaultdict(list) for _ in range(bands)]
    for bi, (s, e) in enumerate(ranges):
        band = np.ascontiguousarray(sw[:, s:e])
        if groups is not None:
            keyarr = band
        else:
            keyarr = band
        raw = keyarr.tobytes()
        w = (e - s) * sw.itemsize
        bk = buckets[bi]
        for i in range(n):
            k = raw[i * w:(i + 1) * w]
            if groups is not None:
                k = k + str(groups[i]).encode()
            bk[k].append(i)
    del hashtables
    pairs: set[tuple[int, int]] = set()
    for bk in buckets:
        for ids in bk.values():
            if len(ids) < 2:
                continue
            if len(ids) > 2000:  # a degenerate bucket (empty docs): skip, the rest still pair
                continue
            for x in range(len(ids)):
                ix = ids[x]
                for y in range(x + 1, len(ids)):
                    pairs.add((ix, ids[y]))
    return pairs, (bands, rows)


CONTAINMENT_THRESHOLD = 0.2


def containment_candidates(sigs: np.ndarray, sizes: Sequence[int], groups: Sequence[Any],
                           threshold: float = CONTAINMENT_THRESHOLD, num_part: int = 16) -> set[tuple[int, int]]:
    """Pairs where at least `threshold` of one document is contained in the other, from
    datasketch's MinHashLSHEnsemble (one index per problem).  Catches partial copies between
    documents of very different sizes, whose Jaccard is low."""
    from datasketch import LeanMinHash, MinHash, MinHashLSHEnsemble
    num_perm = sigs.shape[1]
    by_group: dict[Any, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        if sizes[i] > 0:
            by_group[g].append(i)
    out: set[tuple[int, int]] = set()
    for g, idx in by_group.items():
        if len(idx) < 2:
            continue
        mh = {i: LeanMinHash(MinHash(num_perm=num_perm, seed=SEED, hashvalues=sigs[i], scheme=SCHEME)) for i in idx}
        ens = MinHashLSHEnsemble(threshold=threshold, num_perm=num_perm, num_part=min(num_part, len(idx)))
        ens.index([(i, mh[i], int(sizes[i])) for i in idx])
        for i in idx:
            for j in ens.query(mh[i], int(sizes[i])):
                if j != i:
                    out.add((min(i, j), max(i, j)))
    return out


def lsh_index(docs_sigs: np.ndarray, keys: Sequence[str], threshold: float, num_perm: int = NUM_PERM):
    """A datasketch MinHashLSH holding every signature (for querying new solutions against)."""
    from datasketch import LeanMinHash, MinHash, MinHashLSH
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    for k, s in zip(keys, docs_sigs):
        lsh.insert(k, LeanMinHash(MinHash(num_perm=num_perm, seed=SEED, hashvalues=s, scheme=SCHEME)))
    return lsh


def est_jaccard(sigs: np.ndarray, i: int, j: int) -> float:
    return float(np.mean(sigs[i] == sigs[j]))


def exact_scores(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, int]:
    """(jaccard, containment of a in b, containment of b in a, |a & b|) of sorted unique arrays."""
    if len(a) == 0 or len(b) == 0:
        return 0.0, 0.0, 0.0, 0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - inter
    return inter / union, inter / len(a), inter / len(b), inter


def score_of(j: float, ca: float, cb: float, na: int, nb: int) -> float:
    """max(Jaccard, containment of the smaller document in the larger); containment only counts
    when the smaller side has MIN_SET distinctive shingles."""
    c = (ca if na <= nb else cb) if min(na, nb) >= MIN_SET else 0.0
    return max(j, c)


# ------------------------------------------------------------------------------ exact overlaps

EXACT_WORK = 50_000_000   # sum over shingles of (documents holding it)^2 per group, above which a
#                           group's pairs come from MinHash/LSH instead of exact intersections
PAIR_FLOOR = 0.05         # pairs scoring below this are not reported (incidental shared shingles)


def exact_overlaps(sets: Sequence[np.ndarray], idx: Sequence[int],
                   max_work: int = EXACT_WORK) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every pair (i < j) of the documents `idx` that shares at least one shingle, with the exact
    size of the intersection: (i, j, |A & B|) as arrays of document indices, from one sparse
    product X @ X.T of the document x shingle matrix.  None when that product would cost more than
    `max_work` (the sum of squared posting lengths), so the caller falls back to MinHash/LSH."""
    idx = [i for i in idx if len(sets[i])]
    if len(idx) < 2:
        e = np.zeros(0, np.int64)
        return e, e, e
    lens = np.array([len(sets[i]) for i in idx])
    vals = np.concatenate([sets[i] for i in idx])
    # shingle hashes are uniform: the 1/64 of them with low bits 0 estimate the work without
    # sorting everything, so a group far over budget goes to MinHash/LSH at once
    sample = vals[(vals & np.uint64(63)) == 0]
    if len(sample):
        c = _unique_counts(sample)[1].astype(np.int64)
        if 64 * int((c * c).sum()) > 2 * max_work:
            return None
    uniq, col = _unique_inverse(vals)
    df = np.bincount(col, minlength=len(uniq)).astype(np.int64)
    if int((df * df).sum()) > max_work:
        return None
    from scipy import sparse
    rows = np.repeat(np.arange(len(idx), dtype=np.int32), lens)
    x = sparse.csr_matrix((np.ones(len(vals), np.int32), (rows, col.astype(np.int32))), shape=(len(idx), len(uniq)))
    c = sparse.triu(x @ x.T, k=1).tocoo()
    ids = np.asarray(idx, dtype=np.int64)
    return ids[c.row], ids[c.col], c.data.astype(np.int64)


def _group_indices(docs: Sequence[Doc], cross_problem: bool = False) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = defaultdict(list)
    for i, d in enumerate(docs):
        out[0 if cross_problem else d.problem].append(i)
    return out


# ------------------------------------------------------------------------------ discount

def discount(docs: Sequence[Doc], templates: dict[str | None, np.ndarray] | None = None,
             df_frac: float = DF_FRAC, min_df: int = MIN_DF, jobs: int = 1,
             exact_work: int = EXACT_WORK) -> dict[str, Any]:
    """Set `doc.distinct`: shingles minus the problem's template shingles minus scaffolding common
    to many independent (clustered) solutions of the same problem.  Near-duplicates (Jaccard >=
    CLUSTER_THRESHOLD) are clustered from exact intersections where a problem's documents are few
    enough (`exact_work`), else from a MinHash/LSH pass.  Returns statistics."""
    templates = templates or {}
    base: list[np.ndarray] = []
    for d in docs:
        t = templates.get(d.problem)
        s = d.shingles
        if t is not None and len(t) and len(s):
            s = s[~np.isin(s, t, assume_unique=True)]
        base.append(s)
    # pass 1: clusters of near-duplicates (union-find over high-similarity pairs)
    parent = list(range(len(docs)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    by_problem = _group_indices(docs)
    lsh_docs: list[int] = []
    n_exact = 0
    for prob, idx in by_problem.items():
        ov = exact_overlaps(base, idx, exact_work) if len(idx) > 1 else None
        if ov is None:
            lsh_docs += idx if len(idx) > 1 else []
            continue
        n_exact += 1
        i, j, inter = ov
        sz = np.array([len(s) for s in base])
        jac = inter / np.maximum(sz[i] + sz[j] - inter, 1)
        for a, b in zip(i[jac >= CLUSTER_THRESHOLD].tolist(), j[jac >= CLUSTER_THRESHOLD].tolist()):
            parent[find(a)] = find(b)
    if lsh_docs:
        sub = [base[i] for i in lsh_docs]
        sigs = signatures_parallel(sub, num_perm=CLUSTER_PERM, jobs=jobs)
        pairs, _ = lsh_candidates(sigs, CLUSTER_THRESHOLD, groups=[docs[i].problem for i in lsh_docs])
        for a, b in pairs:
            if est_jaccard(sigs, a, b) >= CLUSTER_THRESHOLD:
                parent[find(lsh_docs[a])] = find(lsh_docs[b])
    # cluster document frequency per problem
    n_removed = 0
    stats: dict[str, Any] = {"problems": {}, "cluster_exact_groups": n_exact,
                             "cluster_lsh_groups": len(by_problem) - n_exact}
    for prob, idx in by_problem.items():
        clusters: dict[int, list[int]] = defaultdict(list)
        for i in idx:
            clusters[find(i)].append(i)
        n_cl = len(clusters)
        cutoff = max(min_df, int(df_frac * n_cl))
        if n_cl <= min_df:
            common = np.zeros(0, dtype=np.uint64)
        else:
            per_cluster = [base[mem[0]] if len(mem) == 1 else _unique(np.concatenate([base[i] for i in mem]))
                           for mem in clusters.values()]
            allv = np.concatenate(per_cluster) if per_cluster else np.zeros(0, dtype=np.uint64)
            vals, counts = _unique_counts(allv)
            common = vals[counts > cutoff]
        for i in idx:
            s = base[i]
            if len(common):
                keep = ~np.isin(s, common, assume_unique=True)
                n_removed += int((~keep).sum())
                s = s[keep]
            docs[i].distinct = s
        stats["problems"][str(prob)] = {"docs": len(idx), "clusters": n_cl, "df_cutoff": cutoff,
                                        "common_shingles": int(len(common))}
    stats["removed"] = n_removed
    return stats


# ------------------------------------------------------------------------------ pairs

@dataclass
class Pair:
    a: int
    b: int
    jaccard_est: float
    jaccard: float
    containment_a: float
    containment_b: float
    score: float
    shared: int
    spans: list[dict[str, Any]] = field(default_factory=list)


def find_pairs(docs: Sequence[Doc], templates: dict[str | None, np.ndarray] | None = None,
               threshold: float = LSH_THRESHOLD, min_score: float = 0.0, cross_problem: bool = False,
               with_spans: bool = True, jobs: int = 1, num_perm: int = ANALYSIS_PERM,
               params: tuple[int, int] | None = ANALYSIS_BANDS,
               exact_work: int = EXACT_WORK) -> tuple[list[Pair], dict[str, Any]]:
    """Discount scaffolding, then score every pair of the same problem (of any problems with
    `cross_problem`) that shares distinctive shingles, and align spans for those scoring >= 0.1.

    Pairs come from exact intersections (a sparse product per problem) wherever that costs at most
    `exact_work`; a larger problem group falls back to MinHash + LSH banding (Jaccard) and LSH
    Ensemble (containment) candidates, scored exactly.  Pairs scoring below max(min_score,
    PAIR_FLOOR) are dropped."""
    stats = discount(docs, templates, jobs=jobs, exact_work=exact_work)
    sets = [d.distinct if d.distinct is not None else d.shingles for d in docs]
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    floor = max(min_score, PAIR_FLOOR)
    found: list[tuple[int, int, int, float | None]] = []   # (i, j, |A & B|, MinHash estimate)
    lsh_docs: list[int] = []
    n_exact = n_cand = 0
    for _, idx in _group_indices(docs, cross_problem).items():
        ov = exact_overlaps(sets, idx, exact_work)
        if ov is None:
            lsh_docs += idx
            continue
        n_exact += 1
        i, j, inter = ov
        n_cand += len(i)
        # the pairs under the floor dropped here, as arrays (score_of's arithmetic, vectorised): a
        # group within the budget can share a shingle or two across millions of pairs, and a Python
        # tuple for each held gigabytes at 40,000 tiny runs (the score is computed again below)
        na, nb = sizes[i], sizes[j]
        jac = inter / np.maximum(na + nb - inter, 1)
        cont = np.where(na <= nb, inter / np.maximum(na, 1), inter / np.maximum(nb, 1))
        cont = np.where(np.minimum(na, nb) >= MIN_SET, cont, 0.0)
        keep = (inter > 0) & (np.maximum(jac, cont) >= floor)
        i, j, inter = i[keep], j[keep], inter[keep]
        found += zip(i.tolist(), j.tolist(), inter.tolist(), [None] * len(i))
    used_params = None
    if len(lsh_docs) > 1:
        sub = [sets[i] for i in lsh_docs]
        sigs = signatures_parallel(sub, num_perm=num_perm, jobs=jobs)
        groups = [0 if cross_problem else docs[i].problem for i in lsh_docs]
        cand, used_params = lsh_candidates(sigs, threshold, groups=groups, params=params)
        cand |= containment_candidates(sigs, [len(s) for s in sub], groups)
        n_cand += len(cand)
        for a, b in cand:
            inter = exact_scores(sub[a], sub[b])[3]
            found.append((lsh_docs[a], lsh_docs[b], inter, est_jaccard(sigs, a, b)))
    stats.update({"candidates": n_cand, "exact_groups": n_exact, "lsh_docs": len(lsh_docs),
                  "lsh_params": used_params, "docs": len(docs)})
    pairs: list[Pair] = []
    for i, j, inter, est in sorted(found, key=lambda t: (t[0], t[1])):
        if inter == 0:
            continue
        na, nb = int(sizes[i]), int(sizes[j])
        jac = inter / (na + nb - inter)
        ca, cb = inter / na, inter / nb
        sc = score_of(jac, ca, cb, na, nb)
        if sc < floor:
            continue
        pairs.append(Pair(i, j, jac if est is None else est, jac, ca, cb, sc, inter))
    if with_spans:
        for p in pairs:
            if p.score >= max(min_score, 0.1):
                p.spans = aligned_spans(docs[p.a], docs[p.b])[:50]
    pairs.sort(key=lambda p: -p.score)
    return pairs, stats


# ------------------------------------------------------------------------------ reading files

def read_dir_solution(path: Path) -> dict[str, str]:
    """Files of a solution on a plain directory: solution.py (or the one .py) plus sidecars."""
    files: dict[str, str] = {}
    if path.is_file():
        files[path.name] = path.read_text("utf-8", "replace")
        for side in sorted(path.parent.glob("*")):
            if side.suffix in SIDE_EXT and side.is_file():
                files[side.name] = side.read_text("utf-8", "replace")
        return files
    sol = path / "solution.py"
    if sol.is_file():
        files["solution.py"] = sol.read_text("utf-8", "replace")
    for sub in (path, path / "scratch"):
        if sub.is_dir():
            for side in sorted(sub.iterdir()):
                if side.suffix in SIDE_EXT and side.is_file():
                    files[f"{sub.name + '/' if sub != path else ''}{side.name}"] = side.read_text("utf-8", "replace")
    return files


def read_run_solution(rf: Any) -> dict[str, str]:
    """solution.py plus scratch sidecars of a run through a RunFiles-like object
    (``read_text(rel)``, ``list(prefix)``)."""
    files: dict[str, str] = {}
    sol = rf.read_text("solution.py")
    if sol is None:
        return files
    files["solution.py"] = sol
    for rel in rf.list("scratch/"):
        if rel.endswith(SIDE_EXT) and "/build/" not in rel and "__pycache__" not in rel:
            t = rf.read_text(rel, limit=2_000_000)
            if t is not None:
                files[rel] = t
    return files


def read_run_templates(rf: Any, problem: str | None) -> list[str]:
    out = []
    for rel in rf.list("template_files/"):
        if rel.endswith((".py",) + SIDE_EXT):
            t = rf.read_text(rel)
            if t:
                out.append((rel, t))
    if problem:
        for rel in rf.list(f"repo/problems/{problem}/"):
            name = rel.rsplit("/", 1)[-1]
            if name != "solution.py" and rel.endswith((".py",) + SIDE_EXT) and rel.count("/") == 3:
                t = rf.read_text(rel)
                if t:
                    out.append((rel, t))
    return [t for _, t in out]


@lru_cache(maxsize=1)
def interface_signatures() -> dict[str, tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]]:
    """problem -> (Model.__init__ parameter names, Model.forward parameter names, Model method
    names) of each bundled reference (the current version's `ref_file` in the problem catalogue,
    kernels/ref/*.py), read as source text with `ast` - only the package's folder is imported (no
    torch).  A constructor signature two problems share is dropped (it cannot tell them apart)."""
    import ast
    import forensics.kernels   # its __path__ is the kernels/ folder, installed or in a checkout
    from forensics import problems
    root = Path(list(forensics.kernels.__path__)[0])
    out: dict[str, tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]] = {}
    for name in problems.bundled():
        rp = root / "ref" / problems.get(name).ref_file
        if not rp.is_file():
            continue
        sig = _model_signature(ast.parse(rp.read_text("utf-8", "replace")))
        if sig is not None:
            out[name] = sig
    inits: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for name, (init, _, _) in out.items():
        inits[init].add(name)
    return {n: s for n, s in out.items() if len(inits[s[0]]) == 1}


def _model_signature(tree: Any) -> tuple[tuple[str, ...], tuple[str, ...], frozenset[str]] | None:
    import ast
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in ("Model", "ModelNew"):
            init: tuple[str, ...] | None = None
            fwd: tuple[str, ...] = ()
            methods = set()
            for f in node.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    methods.add(f.name)
                    args = tuple(a.arg for a in f.args.posonlyargs + f.args.args)[1:]
                    if f.name == "__init__":
                        init = args
                    elif f.name == "forward":
                        fwd = args
            if init is not None:
                return init, fwd, frozenset(methods)
    return None


def problem_from_content(text: str) -> str | None:
    """The problem whose reference interface the solution implements: its `Model.__init__`
    parameters equal one reference's (and, for a constructor of fewer than two parameters, its
    forward parameters or a method of that reference match too); None when no single one does."""
    import ast
    sigs = interface_signatures()
    try:
        sig = _model_signature(ast.parse(text))
    except (SyntaxError, ValueError):
        return None
    if sig is None:
        return None
    init, fwd, methods = sig
    hits = []
    for name, (r_init, r_fwd, r_methods) in sigs.items():
        if init != r_init:
            continue
        special = r_methods - {"__init__", "forward", "reset_parameters"}
        if len(init) >= 2 or (r_fwd and fwd == r_fwd) or (special & methods):
            hits.append(name)
    return hits[0] if len(hits) == 1 else None


def infer_problem(path: Path, text: str | None = None) -> tuple[str | None, str]:
    """(problem, how it was found) for a solution file: a run id in its file name or in a folder
    above it (`<run_id>.py`, `<run_id>__x.py`, `<run_id>/solution.py`), a folder named after a
    known problem (`problems/<problem id>/`), else its content (`problem_from_content`).  (None,
    why) when none decides; digits elsewhere in a name are never read as a problem."""
    from forensics import problems
    from forensics.archive.runid import run_id_in_name
    path = Path(path)
    names = [path.stem, *[p.name for p in reversed(path.parents) if p.name][::-1]]
    for n in names:
        r = run_id_in_name(n)   # the archive's grammar: run ids may hold `__` themselves
        if r is not None:
            return r.problem, f"run id {r.raw}"
    for n in names[1:]:
        if problems.find(n) is not None:
            return n, f"folder {n}"
    if text is None:
        try:
            text = path.read_text("utf-8", "replace") if path.is_file() else None
        except OSError:
            text = None
    if text:
        p = problem_from_content(text)
        if p:
            return p, "Model constructor signature"
    return None, "no run id in the name and no bundled problem's interface in the code"


def _solution_paths(root: Path) -> list[Path]:
    """Solution files or run folders under root (a file, a flat folder of *.py, or run folders)."""
    if root.is_file():
        return [root]
    cands: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(x for x in dirnames if x not in ("__pycache__", ".venv", "cache", "tmp",
                                                               "agent_home", "repo", "template_files",
                                                               "trusted_src", "scratch", ".git"))
        p = Path(dirpath)
        if "solution.py" in filenames:
            cands.append(p)
            dirnames[:] = []
            continue
        for f in sorted(filenames):
            if f.endswith(".py"):
                cands.append(p / f)
    return cands


def external_docs(dirs: Iterable[str], default_problem: str | None = None, ids_relative: bool = False,
                  unknown: list[tuple[str, str]] | None = None) -> list[Doc]:
    """Docs for --against (and `forensics similar` on a folder of solutions): every *.py file (with
    same-folder sidecars) or run folder under each DIR, its problem from `infer_problem` (else
    `default_problem`; files it cannot place are listed in `unknown` as (path, why))."""
    docs: list[Doc] = []
    for d in dirs:
        root = Path(d)
        if not root.exists():
            raise FileNotFoundError(d)
        for c in _solution_paths(root):
            files = read_dir_solution(c)
            if not files:
                continue
            main = files.get("solution.py") or next(iter(files.values()))
            problem, how = infer_problem(c if c.is_file() else c / "solution.py", main)
            if problem is None:
                if unknown is not None:
                    unknown.append((str(c), how))
                problem = default_problem
            did = str(c.relative_to(root)) if ids_relative and c != root else f"ext:{c}"
            docs.append(build_doc(did, files, problem))
    return docs


# ------------------------------------------------------------------------------ analyzer

#: the files of a run the similarity reads (its solution, sidecars and templates; registry's reads_all)
CODE_FILES_SQL = ("path = 'solution.py' or path like 'scratch/%' or path like 'template_files/%' "
                  "or path like 'repo/problems/%'")


def _store_docs(store: Any, run_ids: Sequence[str] | None) -> tuple[list[Doc], dict[str | None, np.ndarray]]:
    from forensics.archive import RunFiles, get_source
    from forensics.archive.source import Entry
    rows = store.query("select run_id, problem, archive, run_path from runs order by run_id")
    # every run's code files in one query (two queries a run, each scanning the store's tables, made
    # the similarity's reading quadratic in runs)
    entries: dict[str, list[Entry]] = defaultdict(list)
    for rid, path, size, mtime, link, target in store.con.execute(
            f"select run_id, path, size, mtime, is_symlink, link_target from files where {CODE_FILES_SQL}").fetchall():
        entries[rid].append(Entry(path, size or 0, mtime, False, bool(link), target))
    docs: list[Doc] = []
    templ_text: dict[str | None, list[str]] = defaultdict(list)
    seen_templ: set[tuple[str | None, str]] = set()
    listed = {r[0] for r in store.con.execute("select distinct run_id from files").fetchall()}
    for r in rows:
        try:
            if r["run_id"] in listed:
                rf = RunFiles(get_source(r["archive"]), r["run_path"] or "", entries.pop(r["run_id"], []))
            else:       # no files rows at all (a store not written by the ingest): the archive's listing
                rf = RunFiles.from_store(store, r["run_id"])
        except Exception:  # noqa: BLE001 - archive moved or unreadable: the run has no document
            continue
        files = read_run_solution(rf)
        prob = r["problem"]
        for t in read_run_templates(rf, prob):
            key = (prob, hashlib.sha256(t.encode()).hexdigest())
            if key not in seen_templ:
                seen_templ.add(key)
                templ_text[prob].append(t)
        if files:   # (no tokens kept: a pair's are lexed again for its spans; every run's held grew with runs)
            docs.append(build_doc(r["run_id"], files, prob, keep_where=False))
    templates = {p: _unique(np.concatenate([shingle_set_of_text({"t.py": t}) for t in ts]))
                 for p, ts in templ_text.items() if ts}
    return docs, templates


def _pair_row(docs: Sequence[Doc], p: Pair) -> dict[str, Any]:
    a, b = docs[p.a], docs[p.b]
    return {"a_id": a.doc_id, "b_id": b.doc_id, "a_problem": a.problem, "b_problem": b.problem,
            "jaccard_est": round(p.jaccard_est, 4), "jaccard": round(p.jaccard, 4),
            "containment_a": round(p.containment_a, 4), "containment_b": round(p.containment_b, 4),
            "spans": p.spans, "a_sha256": a.sha256, "b_sha256": b.sha256, "score": round(p.score, 4),
            "shared_shingles": p.shared, "a_shingles": int(len(a.distinct if a.distinct is not None else a.shingles)),
            "b_shingles": int(len(b.distinct if b.distinct is not None else b.shingles))}


def analyze(store: Any, run_ids: Sequence[str] | None = None, against: Sequence[str] = (),
            cross_problem: bool = False, default_problem: str | None = None) -> int:
    """Write similarity_pairs (all pairs; cross-run analysis) and findings for run_ids."""
    from forensics.analyze.findings import write_findings
    docs, templates = _store_docs(store, None)
    # an --against file whose problem is unknown is compared only across problems (`similar` lists it)
    docs.extend(d for d in external_docs(against, default_problem) if cross_problem or d.problem is not None)
    pairs, _stats = find_pairs(docs, templates, cross_problem=cross_problem)
    rows = [_pair_row(docs, p) for p in pairs]
    targets = list(run_ids) if run_ids is not None else store.run_ids()
    tset = set(targets)
    with store.transaction():
        if run_ids is None:
            store.con.execute("DELETE FROM similarity_pairs")
        else:
            store.con.execute("DELETE FROM similarity_pairs WHERE a_id IN (SELECT unnest(?::VARCHAR[])) "
                              "OR b_id IN (SELECT unnest(?::VARCHAR[]))", [list(targets), list(targets)])
        store.insert_rows("similarity_pairs", [r for r in rows if run_ids is None or r["a_id"] in tset or r["b_id"] in tset])
    findings = chain_findings(store, docs, pairs, tset)
    return write_findings(store, "similarity", targets, findings)


def chain_findings(store: Any, docs: Sequence[Doc], pairs: Sequence[Pair], targets: set[str]) -> list[Any]:
    """similar-solution and contamination-chain findings (reads joined with similarity)."""
    from forensics.analyze.findings import Evidence, Finding
    runs = {r["run_id"]: r for r in store.query("select run_id, run_name, run_ts from runs")}
    name_to_id = {}
    for rid, r in runs.items():
        name_to_id.setdefault(r["run_name"] or rid, rid)
    refs: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    # provenance's reads (the registry runs it first; where it failed, this run's similarity is failed too)
    for r in store.query("select run_id, foreign_run_id, foreign_file, classification, call_seq, line, source, "
                         "artifact from foreign_refs where classification in ('deliberate_read', 'copy') "
                         "order by run_id, call_seq"):
        fid = name_to_id.get((r["foreign_run_id"] or "").split("@")[0], r["foreign_run_id"])
        refs[(r["run_id"], fid)].append(r)
    out: list[Any] = []
    for p in pairs:
        a, b = docs[p.a], docs[p.b]
        for me, other, c_me in ((a, b, p.containment_a), (b, a, p.containment_b)):
            if me.doc_id not in targets:
                continue
            span_txt = span_summary([_orient(s, me is a) for s in p.spans])
            ev = [Evidence(file=_f(s, me is a), line_start=_ls(s, me is a), line_end=_le(s, me is a),
                           sha256=me.sha256, note=f"matches {other.doc_id} {_f(s, me is not a)}:"
                                                  f"{_ls(s, me is not a)}-{_le(s, me is not a)}")
                  for s in p.spans[:5]] or [Evidence(file="solution.py", sha256=me.sha256)]
            data = {"other": other.doc_id, "score": round(p.score, 4), "jaccard": round(p.jaccard, 4),
                    "containment": round(c_me, 4), "spans": p.spans[:20]}
            reads = refs.get((me.doc_id, other.doc_id), [])
            if reads:
                r0 = next((r for r in reads if r["artifact"] == "solution"), reads[0])
                msg = (f"run {me.doc_id} opened {other.doc_id}/{r0['foreign_file'] or ''} at tool call "
                       f"{r0['call_seq']} (transcript line {r0['line']:,}); {c_me:.0%} of its final solution "
                       f"fingerprints match {other.doc_id}'s" + (f", {span_txt}" if span_txt else "") + "."
                       if r0["line"] is not None else
                       f"run {me.doc_id} read {other.doc_id}/{r0['foreign_file'] or ''}; {c_me:.0%} of its final "
                       f"solution fingerprints match" + (f", {span_txt}" if span_txt else "") + ".")
                chain_ev = [Evidence(file=r["source"], transcript_line=r["line"], call_seq=r["call_seq"],
                                     note=f"{r['classification']} of {other.doc_id}/{r['foreign_file']}")
                            for r in reads[:5]] + ev
                sev = "high" if (p.score >= 0.3 and a.problem == b.problem) else "medium"
                out.append(Finding(me.doc_id, "similarity", "contamination-chain", sev, msg, "contamination",
                                   chain_ev, data=data | {"reads": [{k: r[k] for k in ("call_seq", "line", "foreign_file",
                                                                                      "classification")} for r in reads[:20]]}))
            elif p.score >= FINDING_SCORE:
                msg = (f"final solution shares {c_me:.0%} of its distinctive fingerprints with {other.doc_id} "
                       f"(Jaccard {p.jaccard:.2f})" + (f", {span_txt}" if span_txt else "") +
                       "; no read of that run was found, so this alone is not a verdict.")
                out.append(Finding(me.doc_id, "similarity", "similar-solution", "low", msg, "contamination", ev,
                                   data=data))
    return out


def _orient(s: dict[str, Any], a_side: bool) -> dict[str, Any]:
    if a_side:
        return s
    return {"a_file": s["b_file"], "a_start": s["b_start"], "a_end": s["b_end"], "b_file": s["a_file"],
            "b_start": s["a_start"], "b_end": s["a_end"], "tokens": s["tokens"]}


def _f(s, a_side):
    return s["a_file"] if a_side else s["b_file"]


def _ls(s, a_side):
    return s["a_start"] if a_side else s["b_start"]


def _le(s, a_side):
    return s["a_end"] if a_side else s["b_end"]


# ------------------------------------------------------------------------------ CLI

class UnknownProblems(ValueError):
    """Solutions whose problem neither their name nor their code tells: (path, why) pairs."""

    def __init__(self, items: list[tuple[str, str]]):
        self.items = items
        shown = "\n".join(f"  {p}: {why}" for p, why in items[:10])
        more = f"\n  ... and {len(items) - 10} more" if len(items) > 10 else ""
        super().__init__(
            f"cannot tell which problem {len(items)} solution(s) belong to (pairs are only compared within a "
            f"problem):\n{shown}{more}\nName each file after its run id (<run_id>.py or <run_id>__x.py), put it "
            "in its run folder, give --problem P for the files that cannot be placed, or compare across "
            "problems with --cross-problem.")


def _has_runs(path: Path) -> bool:
    from forensics.archive import open_source
    from forensics.archive.discover import discover_runs
    try:
        return bool(discover_runs(open_source(path), single_name=path.name))
    except Exception:  # noqa: BLE001 - not an archive we can read: treat as a folder of solutions
        return False


def similar(archive: str, against: Sequence[str] = (), db: str | None = None, top: int = 20,
            cross_problem: bool = False, problem: str | None = None,
            unplaced: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """The `top` most similar pairs as dicts (similarity_pairs rows).  ARCHIVE is a run archive
    (ingested into `db` or memory), a store (`.duckdb`), or a folder of solution files
    (`<run_id>.py`, `<run_id>__x.py`, run folders), whose problems come from `infer_problem`.
    A solution that cannot be placed (no `problem`, no `cross_problem`) raises UnknownProblems,
    unless `unplaced` is a list: then it is left out and listed there as (path, why), and
    UnknownProblems is raised only when no solution at all could be placed."""
    from forensics.store.db import Store, loads_json
    p = Path(archive)
    unknown: list[tuple[str, str]] = []

    def settle(docs: list[Doc], others: bool = False) -> list[Doc]:
        """`docs` less the unplaced ones (listed in `unplaced`); `others`: the archive's runs are compared too."""
        if not unknown or problem or cross_problem:
            return docs
        placed = [d for d in docs if d.problem is not None]
        if unplaced is None or not (placed or others):
            raise UnknownProblems(unknown)
        unplaced.extend(unknown)
        return placed
    if not (p.is_file() and p.suffix == ".duckdb") and (p.is_file() or not _has_runs(p)):
        docs = external_docs([str(p)], problem, ids_relative=True, unknown=unknown)
        docs += external_docs(against, problem, unknown=unknown)
        docs = settle(docs)
        pairs, _ = find_pairs(docs, {}, cross_problem=cross_problem)
        rows = [_pair_row(docs, x) for x in pairs]
        rows.sort(key=lambda r: -max(r["jaccard"] or 0, r["containment_a"] or 0, r["containment_b"] or 0))
        return rows[:top]
    if against:
        settle(external_docs(against, problem, unknown=unknown), others=True)   # before the (slower) ingest
    if p.is_file() and p.suffix == ".duckdb":
        store = Store(str(p))
    else:
        store = Store(db or ":memory:")
        from forensics.store.ingest import ingest_archive
        ingest_archive(store, str(p))
    analyze(store, None, against=against, cross_problem=cross_problem, default_problem=problem)
    rows = store.query("select * from similarity_pairs order by greatest(jaccard, containment_a, containment_b) desc "
                       "limit ?", [top])
    for r in rows:
        r["spans"] = loads_json(r["spans"])
    return rows


try:
    import click
except ImportError:  # pragma: no cover
    click = None

if click is not None:
    from forensics.cliutil import InputError as _InputError

    @click.command("similar")
    @click.argument("archive", type=click.Path(exists=True))
    @click.option("--against", multiple=True, type=click.Path(exists=True),
                  help="Extra solutions: *.py files or run folders (repeatable).")
    @click.option("--db", default=None, type=click.Path(dir_okay=False),
                  help="Store to use (default: in memory; an ARCHIVE ending .duckdb is read as a store).")
    @click.option("--top", default=20, show_default=True, help="How many pairs to show.")
    @click.option("--cross-problem", is_flag=True, help="Compare solutions of different problems too (default: within a problem).")
    @click.option("--problem", default=None, help="Problem of the solutions whose name and code do not tell it.")
    @click.option("--json", "as_json", is_flag=True, help="Print the pairs as JSON.")
    def similar_cmd(archive: str, against: tuple[str, ...], db: str | None, top: int, cross_problem: bool,
                    problem: str | None, as_json: bool) -> None:
        """Most similar solution pairs in ARCHIVE (and --against DIRs), with aligned spans.

        ARCHIVE is a run archive, a store (.duckdb), or a folder of solution files.  A file's problem
        comes from a run id in its name or folder (<run_id>.py, <run_id>__x.py, <run_id>/solution.py,
        read by the archive's run-id grammar), else from its code (the Model constructor of a bundled
        problem's interface).  Files neither places are left out and listed on stderr (exit 0);
        exit 2 only when no file can be placed.  --problem P or --cross-problem compares them too."""
        unplaced: list[tuple[str, str]] = []
        try:
            rows = similar(archive, against, db, top, cross_problem=cross_problem, problem=problem,
                           unplaced=unplaced)
        except UnknownProblems as e:
            raise _InputError(str(e)) from e
        if unplaced:
            shown = "".join(f"\n  {p}: {why}" for p, why in unplaced[:10])
            more = f"\n  ... and {len(unplaced) - 10} more" if len(unplaced) > 10 else ""
            click.echo(f"Warning: left out {len(unplaced)} solution(s) whose problem neither the name nor the code "
                       f"tells (name them <run_id>.py, or give --problem P or --cross-problem):{shown}{more}", err=True)
        if as_json:
            import orjson
            click.echo(orjson.dumps(rows, default=str, option=orjson.OPT_INDENT_2).decode())
            return
        if not rows:
            click.echo("no similar pairs")
            return
        for r in rows:
            sc = max(r["jaccard"] or 0, r["containment_a"] or 0, r["containment_b"] or 0)
            cross = f"  [{r['a_problem']} / {r['b_problem']}]" if r.get("a_problem") != r.get("b_problem") else ""
            click.echo(f"{sc:.2f}  J={r['jaccard']:.2f} ca={r['containment_a']:.2f} cb={r['containment_b']:.2f}  "
                       f"{r['a_id']}  ~  {r['b_id']}{cross}")
            for s in (r["spans"] or [])[:3]:
                click.echo(f"      {s['a_file']}:{s['a_start']}-{s['a_end']}  <->  {s['b_file']}:{s['b_start']}-{s['b_end']}"
                           f"  ({s['tokens']} tokens)")
