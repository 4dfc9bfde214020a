"""Source similarity between final solutions: MinHash + LSH over normalized token shingles.

    from forensics.analyze import similarity
    similarity.analyze(store)                 # similarity_pairs + findings for every run
    docs = [similarity.build_doc("a", {"solution.py": src})]   # library use (notebooks, bench)
    pairs = similarity.find_pairs(docs)

Pipeline (each step a function below):

1. **Documents.**  A run's document is its final ``solution.py`` plus the sidecar CUDA/C++ sources
   archived beside it (``scratch/*.cu|cuh|cpp|cc|h|hpp``).  ``--against DIR`` adds external
   solutions: ``*.py`` files, or run folders (a folder holding ``solution.py``).
2. **Tokens.**  Python is tokenized with a regex lexer; comments and docstrings are dropped;
   string literals that hold C/C++/CUDA (``load_inline`` sources: ``__global__``, ``#include``,
   braces and semicolons) are lexed as C++ in place, keeping their line numbers; other strings
   become ``S``.  Identifiers are normalized to ``V`` unless they are language keywords or
   well-known API names (torch, triton ``tl.*``, CUDA intrinsics and types), so renaming every
   variable and function does not change the token stream.  Numbers are kept.
3. **Shingles.**  Every window of `K` consecutive tokens (per file) is hashed to 32 bits.
4. **Discount of shared scaffolding.**  Shingles of the problem's reference/template files (the
   run's ``template_files/`` and ``repo/problems/<p>/``) are removed; then shingles common to many
   *independent* solutions of the same problem are removed: a first LSH pass clusters
   near-duplicates, and a shingle found in more than ``max(MIN_DF, DF_FRAC * clusters)`` clusters
   of the problem is scaffolding.  Counting clusters, not documents, keeps a widely copied
   solution from discounting its own copied text.
5. **MinHash + LSH.**  Signatures use datasketch's permutation family and formula
   (``(a*h + b) mod (2^61-1)`` truncated to 32 bits) computed with numpy over all shingles of a
   batch at once (datasketch's own ``update`` hashes every shingle in Python); the index is
   datasketch's ``MinHashLSH`` with a low threshold so partial copies are still candidates.
6. **Scores and spans.**  Each candidate pair gets the exact Jaccard of the discounted sets, both
   containments, and a score ``max(jaccard, containment)`` (containment only counts when the
   smaller side has ``MIN_SET`` shingles).  Aligned spans come from greedy tiling of normalized
   token lines (order-independent, so reordered functions still align), with 1-based line
   ranges in both files.

Findings (analyzer ``similarity``, category ``contamination``): ``similar-solution`` for pairs
above `FINDING_SCORE`, and ``contamination-chain`` when a run that read a foreign run's files
(foreign_refs, from the provenance analyzer) has a final solution similar to that run's.
"""

from __future__ import annotations

import hashlib
import keyword
import os
import re
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

K = 12                # tokens per shingle (sweep in docs/contamination.md)
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
SIDE_EXT = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp")
_MERSENNE = np.uint64((1 << 61) - 1)
_MAX_HASH = np.uint64((1 << 32) - 1)

# ------------------------------------------------------------------------------ tokenizing

_PY_TOK = re.compile(
    r"""(?P<com>\#[^\n]*)"""
    r"""|(?P<str>[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?(?:\"\"\"|$)|'''[\s\S]*?(?:'''|$)|"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?))"""
    r"""|(?P<num>0[xX][0-9a-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d+)(?:[eE][+-]?\d+)?[jJ]?)"""
    r"""|(?P<id>[A-Za-z_]\w*)"""
    r"""|(?P<op>\*\*=?|//=?|>>=?|<<=?|[-+*/%&|^=<>!]=|->|:=|[-+*/%&|^~<>=!@:.,;()\[\]{}])"""
    r"""|(?P<nl>\n)"""
)
_CPP_TOK = re.compile(
    r"""(?P<com>//[^\n]*|/\*[\s\S]*?(?:\*/|$))"""
    r"""|(?P<str>"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.){0,4}'?)"""
    r"""|(?P<num>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFuUlLhH]*)"""
    r"""|(?P<id>\#\s*[A-Za-z_]\w*|[A-Za-z_]\w*)"""
    r"""|(?P<op><<<|>>>|<<=|>>=|->\*?|::|\+\+|--|&&|\|\||[-+*/%&|^=<>!]=|<<|>>|[-+*/%&|^~<>=!?:.,;()\[\]{}])"""
    r"""|(?P<nl>\n)"""
)
_CODE_HINT = re.compile(r"__global__|#include|__device__|extern\s+\"C\"|torch::Tensor|PYBIND11_MODULE|asm\s*\(|\bvoid\s+\w+\s*\(")

PY_KEEP = set(keyword.kwlist) | {
    "self", "cls", "len", "range", "int", "float", "bool", "str", "list", "dict", "tuple", "set", "min", "max",
    "abs", "sum", "print", "isinstance", "super", "getattr", "setattr", "hasattr", "zip", "enumerate", "map",
    "sorted", "any", "all", "open", "object", "Exception", "RuntimeError", "ValueError", "NotImplementedError",
    "__init__", "__name__", "__main__", "forward", "torch", "nn", "Module", "Parameter", "Tensor", "functional",
    "F", "triton", "tl", "jit", "autotune", "Config", "heuristics", "constexpr", "program_id", "num_programs",
    "arange", "load", "store", "dot", "zeros", "zeros_like", "empty", "empty_like", "full", "ones", "where",
    "cdiv", "next_power_of_2", "maximum", "minimum", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid",
    "atomic_add", "atomic_max", "reduce", "sum", "max", "argmax", "broadcast_to", "reshape", "trans", "view",
    "permute", "transpose", "contiguous", "float16", "bfloat16", "float32", "float8e4nv", "int8", "int32",
    "int64", "uint8", "to", "cuda", "device", "dtype", "shape", "stride", "size", "numel", "data_ptr",
    "matmul", "mm", "bmm", "softmax", "topk", "sort", "cat", "stack", "chunk", "split", "unsqueeze", "squeeze",
    "expand", "clone", "copy_", "fill_", "zero_", "new_empty", "no_grad", "inference_mode", "utils",
    "cpp_extension", "load_inline", "cpp_sources", "cuda_sources", "functions", "extra_cuda_cflags",
    "extra_cflags", "verbose", "name", "sources", "os", "path", "math", "num_warps", "num_stages", "BLOCK_M",
    "BLOCK_N", "BLOCK_K", "BLOCK_SIZE", "mask", "other", "eviction_policy", "cache_modifier", "get_inputs",
    "get_init_inputs", "Model", "ModelNew", "reference", "register_buffer", "item", "tolist", "float8_e4m3fn",
    "half", "randn", "rand", "manual_seed", "synchronize", "Stream", "CUDAGraph", "graph",
}
CPP_KEEP = {
    "__global__", "__device__", "__host__", "__forceinline__", "__shared__", "__constant__", "__restrict__",
    "__syncthreads", "__syncwarp", "__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync", "__shfl_up_sync",
    "__ballot_sync", "__any_sync", "__all_sync", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize",
    "x", "y", "z", "int", "unsigned", "float", "double", "half", "__half", "__half2", "__nv_bfloat16",
    "__nv_bfloat162", "__nv_fp8_e4m3", "float2", "float4", "int4", "uint4", "char", "short", "long", "bool",
    "void", "const", "constexpr", "static", "inline", "template", "typename", "struct", "class", "return", "if",
    "else", "for", "while", "do", "break", "continue", "switch", "case", "default", "auto", "sizeof", "extern",
    "namespace", "using", "volatile", "true", "false", "nullptr", "#include", "#define", "#pragma", "#if",
    "#ifdef", "#ifndef", "#endif", "#else", "unroll", "asm", "torch", "Tensor", "at", "TORCH_CHECK", "data_ptr",
    "size", "numel", "options", "dtype", "kFloat", "kHalf", "kBFloat16", "empty", "zeros", "std", "min", "max",
    "expf", "__expf", "exp2f", "logf", "sqrtf", "rsqrtf", "fmaxf", "fminf", "fabsf", "atomicAdd", "atomicMax",
    "__float2half", "__half2float", "__float2bfloat16", "__bfloat162float", "cudaStream_t", "dim3",
    "getCurrentCUDAStream", "c10", "cuda", "mma", "wmma", "ldmatrix", "cp", "async", "uint32_t", "int32_t",
    "int64_t", "uint64_t", "size_t", "PYBIND11_MODULE", "m", "def", "reinterpret_cast", "static_cast",
    "__launch_bounds__", "__ldg", "blockReduce", "warpReduce", "INFINITY", "FLT_MAX", "contiguous",
}


@dataclass(slots=True)
class Tok:
    text: str
    line: int


def _lex_cpp(src: str, line0: int, texts: list[str], lines: list[int]) -> None:
    line = line0
    keep = CPP_KEEP
    ta = texts.append
    la = lines.append
    for m in _CPP_TOK.finditer(src):
        kind = m.lastgroup
        if kind == "nl":
            line += 1
            continue
        s = m.group()
        if kind == "com":
            line += s.count("\n")
            continue
        if kind == "id":
            if s[0] == "#":
                s = "#" + s[1:].strip()
            ta(s if s in keep else "V")
        elif kind == "str":
            ta("S")
        elif kind == "num":
            ta(s.rstrip("fFuUlLhH") or s)
        else:
            ta(s)
        la(line)


def _string_body(s: str) -> tuple[str, int]:
    """Inner text of a Python string literal and the offset of its first character."""
    i = 0
    while i < len(s) and s[i] in "rRbBuUfF":
        i += 1
    q = s[i:i + 3] if s[i:i + 3] in ('"""', "'''") else s[i]
    body = s[i + len(q):]
    if body.endswith(q):
        body = body[: -len(q)]
    return body, i + len(q)


def _lex_python(src: str) -> tuple[list[str], list[int]]:
    """Normalized token texts and their line numbers (parallel lists) of a Python file."""
    texts: list[str] = []
    lines: list[int] = []
    ta = texts.append
    la = lines.append
    keep = PY_KEEP
    line = 1
    prev_sig = "\n"   # last significant token (docstring detection: a string starting a statement)
    prev_dot = False
    for m in _PY_TOK.finditer(src):
        kind = m.lastgroup
        if kind == "nl":
            line += 1
            if prev_sig == ":":
                prev_sig = "\n"
            continue
        if kind == "com":
            continue
        s = m.group()
        if kind == "id":
            ta(s if s in keep else "V")
            la(line)
            prev_dot = False
            prev_sig = "x"
        elif kind == "op":
            ta(s)
            la(line)
            prev_dot = s == "."
            prev_sig = ":" if s == ":" else "x"
        elif kind == "num":
            ta(s.replace("_", ""))
            la(line)
            prev_dot = False
            prev_sig = "x"
        else:  # string literal
            nl = s.count("\n")
            body, _ = _string_body(s)
            if _CODE_HINT.search(body) or (body.count(";") >= 3 and body.count("{") >= 2):
                _lex_cpp(body, line, texts, lines)
            elif prev_sig == "\n" and s.lstrip("rRbBuUfF")[:3] in ('"""', "'''"):
                pass  # docstring / bare string statement
            else:
                ta("S")
                la(line)
            line += nl
            prev_sig = "S"
            prev_dot = False
    return texts, lines


def tokenize_python(src: str) -> list[Tok]:
    """Normalized tokens of a Python file, CUDA/C++ held in its strings lexed as C++ in place."""
    texts, lines = _lex_python(src)
    return [Tok(t, ln) for t, ln in zip(texts, lines)]


def tokenize_cpp(src: str) -> list[Tok]:
    texts: list[str] = []
    lines: list[int] = []
    _lex_cpp(src, 1, texts, lines)
    return [Tok(t, ln) for t, ln in zip(texts, lines)]


def lex_file(name: str, text: str) -> tuple[list[str], list[int]]:
    if name.endswith(SIDE_EXT):
        texts: list[str] = []
        lines: list[int] = []
        _lex_cpp(text, 1, texts, lines)
        return texts, lines
    return _lex_python(text)


def tokenize_file(name: str, text: str) -> list[Tok]:
    texts, lines = lex_file(name, text)
    return [Tok(t, ln) for t, ln in zip(texts, lines)]


# ------------------------------------------------------------------------------ shingles

_TOKEN_ID: dict[str, int] = {}


def _tid(t: str) -> int:
    v = _TOKEN_ID.get(t)
    if v is None:
        v = zlib.crc32(t.encode()) | (len(t) << 32)
        _TOKEN_ID[t] = v
    return v


_MULT = np.uint64(0x9E3779B97F4A7C15)


def shingle_hashes(token_ids: np.ndarray, k: int | None = None) -> np.ndarray:
    """32-bit hashes of every k-token window (polynomial rolling combination, uint64 wrap)."""
    k = k or K
    n = len(token_ids)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    if n < k:
        k = n
    ids = token_ids.astype(np.uint64)
    h = np.zeros(n - k + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(k):
            h = h * _MULT + ids[j:n - k + 1 + j]
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
    return h & _MAX_HASH


@dataclass
class Doc:
    """One solution as the similarity analysis sees it."""

    doc_id: str                      # run_id, or 'ext:<path>'
    problem: str | None
    files: dict[str, str]            # name -> text (solution.py first, then sidecars)
    sha256: str = ""
    tokens: dict[str, list[Tok]] = field(default_factory=dict)
    shingles: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))  # unique, sorted
    # shingle hash -> (file, first line, last line) of its first occurrence
    where: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    distinct: np.ndarray | None = None   # after discount


def build_doc(doc_id: str, files: dict[str, str], problem: str | None = None, keep_where: bool = True) -> Doc:
    """Tokenize and shingle a solution's files."""
    h = hashlib.sha256()
    for name in files:
        h.update(files[name].encode("utf-8", "replace"))
    d = Doc(doc_id, problem, files, h.hexdigest())
    parts = []
    get = _TOKEN_ID.get
    for name, text in files.items():
        texts, lines = lex_file(name, text)
        if keep_where:
            d.tokens[name] = [Tok(t, ln) for t, ln in zip(texts, lines)]
        if not texts:
            continue
        ids = np.array([get(t) or _tid(t) for t in texts], dtype=np.uint64)
        sh = shingle_hashes(ids)
        parts.append(sh)
        if keep_where:
            kk = min(K, len(texts))
            w = d.where
            for i, v in enumerate(sh.tolist()):
                if v not in w:
                    w[v] = (name, lines[i], lines[i + kk - 1])
    d.shingles = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)
    return d


def shingle_set_of_text(files: dict[str, str]) -> np.ndarray:
    return build_doc("_", files, keep_where=False).shingles


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
    import multiprocessing as mp
    step = (len(sets) + jobs * 4 - 1) // (jobs * 4)
    chunks = [list(sets[i:i + step]) for i in range(0, len(sets), step)]
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    with ctx.Pool(jobs) as pool:
        parts = pool.map(_sig_worker, [(c, num_perm, seed) for c in chunks])
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


# ------------------------------------------------------------------------------ discount

def discount(docs: Sequence[Doc], templates: dict[str | None, np.ndarray] | None = None,
             df_frac: float = DF_FRAC, min_df: int = MIN_DF, jobs: int = 1) -> dict[str, Any]:
    """Set `doc.distinct`: shingles minus the problem's template shingles minus scaffolding common
    to many independent (clustered) solutions of the same problem.  Returns statistics."""
    templates = templates or {}
    base: list[np.ndarray] = []
    for d in docs:
        t = templates.get(d.problem)
        s = d.shingles
        if t is not None and len(t) and len(s):
            s = s[~np.isin(s, t, assume_unique=True)]
        base.append(s)
    # pass 1: clusters of near-duplicates (union-find over high-similarity candidate pairs)
    parent = list(range(len(docs)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    if len(docs) > 1:
        sigs = signatures_parallel(base, num_perm=CLUSTER_PERM, jobs=jobs)
        pairs, _ = lsh_candidates(sigs, CLUSTER_THRESHOLD, groups=[d.problem for d in docs])
        for i, j in pairs:
            if est_jaccard(sigs, i, j) >= CLUSTER_THRESHOLD:
                parent[find(i)] = find(j)
    # cluster document frequency per problem
    by_problem: dict[str | None, list[int]] = defaultdict(list)
    for i, d in enumerate(docs):
        by_problem[d.problem].append(i)
    n_removed = 0
    stats: dict[str, Any] = {"problems": {}}
    for prob, idx in by_problem.items():
        clusters: dict[int, list[int]] = defaultdict(list)
        for i in idx:
            clusters[find(i)].append(i)
        n_cl = len(clusters)
        cutoff = max(min_df, int(df_frac * n_cl))
        if n_cl <= min_df:
            common = np.zeros(0, dtype=np.uint64)
        else:
            per_cluster = [np.unique(np.concatenate([base[i] for i in mem])) for mem in clusters.values()]
            allv = np.concatenate(per_cluster) if per_cluster else np.zeros(0, dtype=np.uint64)
            vals, counts = np.unique(allv, return_counts=True)
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


# ------------------------------------------------------------------------------ spans

_TRIVIAL = {"", ")", "]", "}", "(", "{", "};", "pass", "else :", "V )", "return V", "return", "V ,", "S ,"}


def _norm_lines(toks: list[Tok], skip: set[int] | None = None) -> tuple[list[str], list[int], list[int]]:
    """Normalized token lines (text, line number, tokens), trivial lines dropped."""
    by_line: dict[int, list[str]] = {}
    order: list[int] = []
    for t in toks:
        if t.line not in by_line:
            by_line[t.line] = []
            order.append(t.line)
        by_line[t.line].append(t.text)
    texts, nums, counts = [], [], []
    for ln in order:
        s = " ".join(by_line[ln])
        if s in _TRIVIAL or len(by_line[ln]) < 2:
            continue
        texts.append(s)
        nums.append(ln)
        counts.append(len(by_line[ln]))
    return texts, nums, counts


def aligned_spans(a: Doc, b: Doc, min_lines: int = 3, min_tokens: int = 20,
                  skip_lines: set[str] | None = None) -> list[dict[str, Any]]:
    """Greedy tiling of normalized token lines: maximal runs of identical normalized lines in both
    documents, longest first, non-overlapping, in any order.  Lines in `skip_lines` (scaffolding)
    do not start or count towards a span."""
    skip_lines = skip_lines or set()
    spans: list[dict[str, Any]] = []
    for fa, ta in a.tokens.items():
        la, na, ca = _norm_lines(ta)
        for fb, tb in b.tokens.items():
            lb, nb, cb = _norm_lines(tb)
            pos: dict[str, list[int]] = defaultdict(list)
            for j, s in enumerate(lb):
                pos[s].append(j)
            runs: list[tuple[int, int, int, int]] = []  # (tokens, i, j, length)
            for i, s in enumerate(la):
                if s in skip_lines:
                    continue
                for j in pos.get(s, ()):
                    if i > 0 and j > 0 and la[i - 1] == lb[j - 1] and la[i - 1] not in skip_lines:
                        continue  # not the start of a run
                    L = 0
                    tok = 0
                    while i + L < len(la) and j + L < len(lb) and la[i + L] == lb[j + L]:
                        if la[i + L] not in skip_lines:
                            tok += ca[i + L]
                        L += 1
                    if L >= min_lines and tok >= min_tokens:
                        runs.append((tok, i, j, L))
            runs.sort(key=lambda r: (-r[0], r[1], r[2]))
            used_a: set[int] = set()
            used_b: set[int] = set()
            for tok, i, j, L in runs:
                if any((i + x) in used_a or (j + x) in used_b for x in range(L)):
                    # trim to the free part at the start
                    x = 0
                    while x < L and (i + x) not in used_a and (j + x) not in used_b:
                        x += 1
                    if x < min_lines:
                        continue
                    L = x
                    tok = sum(ca[i:i + L])
                    if tok < min_tokens:
                        continue
                used_a.update(range(i, i + L))
                used_b.update(range(j, j + L))
                spans.append({"a_file": fa, "a_start": na[i], "a_end": na[i + L - 1],
                              "b_file": fb, "b_start": nb[j], "b_end": nb[j + L - 1], "tokens": tok})
    spans.sort(key=lambda s: -s["tokens"])
    return spans


def span_summary(spans: Sequence[dict[str, Any]], max_spans: int = 3) -> str:
    parts = []
    for s in list(spans)[:max_spans]:
        parts.append(f"lines {s['a_start']}-{s['a_end']} of {s['a_file']} to {s['b_start']}-{s['b_end']} of {s['b_file']}")
    return "; ".join(parts)


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
               params: tuple[int, int] | None = ANALYSIS_BANDS) -> tuple[list[Pair], dict[str, Any]]:
    """Discount scaffolding, MinHash + LSH, exact scores and spans for every candidate pair."""
    stats = discount(docs, templates, jobs=jobs)
    sets = [d.distinct if d.distinct is not None else d.shingles for d in docs]
    sigs = signatures_parallel(sets, num_perm=num_perm, jobs=jobs)
    groups = None if cross_problem else [d.problem for d in docs]
    cand, params = lsh_candidates(sigs, threshold, groups=groups, params=params)
    n_jac = len(cand)
    cand |= containment_candidates(sigs, [len(s) for s in sets], groups or [0] * len(docs))
    stats.update({"candidates": len(cand), "jaccard_candidates": n_jac, "lsh_params": params, "docs": len(docs)})
    pairs: list[Pair] = []
    for i, j in sorted(cand):
        jac, ca, cb, inter = exact_scores(sets[i], sets[j])
        sc = score_of(jac, ca, cb, len(sets[i]), len(sets[j]))
        if sc < min_score or inter == 0:
            continue
        p = Pair(i, j, est_jaccard(sigs, i, j), jac, ca, cb, sc, inter)
        pairs.append(p)
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


def external_docs(dirs: Iterable[str]) -> list[Doc]:
    """Docs for --against: every *.py file (with same-folder sidecars) or run folder under each DIR."""
    docs: list[Doc] = []
    for d in dirs:
        root = Path(d)
        if not root.exists():
            raise FileNotFoundError(d)
        cands: list[Path] = []
        if root.is_file():
            cands = [root]
        else:
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
        for c in cands:
            files = read_dir_solution(c)
            if not files:
                continue
            problem = None
            from forensics.transcripts.access import parse_problem
            for part in reversed(c.parts):
                problem = parse_problem(part) if part[:2] == "20" else None
                if problem:
                    break
            if problem is None:
                m = re.search(r"(\d\d_[a-z][a-z0-9_]*)", str(c))
                problem = m.group(1) if m else None
            docs.append(build_doc(f"ext:{c}", files, problem))
    return docs


# ------------------------------------------------------------------------------ analyzer

def _store_docs(store: Any, run_ids: Sequence[str] | None) -> tuple[list[Doc], dict[str | None, np.ndarray]]:
    from forensics.archive import RunFiles
    rows = store.query("select run_id, problem from runs order by run_id")
    docs: list[Doc] = []
    templ_text: dict[str | None, list[str]] = defaultdict(list)
    seen_templ: set[tuple[str | None, str]] = set()
    for r in rows:
        try:
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
        if files:
            docs.append(build_doc(r["run_id"], files, prob))
    templates = {p: np.unique(np.concatenate([shingle_set_of_text({"t.py": t}) for t in ts]))
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


def analyze(store: Any, run_ids: Sequence[str] | None = None, against: Sequence[str] = ()) -> int:
    """Write similarity_pairs (all pairs; cross-run analysis) and findings for run_ids."""
    from forensics.analyze.findings import Evidence, Finding, write_findings
    docs, templates = _store_docs(store, None)
    docs.extend(external_docs(against))
    pairs, _stats = find_pairs(docs, templates)
    rows = [_pair_row(docs, p) for p in pairs]
    targets = list(run_ids) if run_ids is not None else store.run_ids()
    tset = set(targets)
    with store.transaction():
        if run_ids is None:
            store.con.execute("DELETE FROM similarity_pairs")
        else:
            ph = ",".join("?" * len(targets)) or "NULL"
            store.con.execute(f"DELETE FROM similarity_pairs WHERE a_id IN ({ph}) OR b_id IN ({ph})",
                              list(targets) + list(targets))
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
    try:
        for r in store.query("select run_id, foreign_run_id, foreign_file, classification, call_seq, line, source, "
                             "artifact from foreign_refs where classification in ('deliberate_read', 'copy') "
                             "order by run_id, call_seq"):
            fid = name_to_id.get((r["foreign_run_id"] or "").split("@")[0], r["foreign_run_id"])
            refs[(r["run_id"], fid)].append(r)
    except Exception:  # noqa: BLE001 - provenance not run: no chains, similarity findings still stand
        pass
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

def similar(archive: str, against: Sequence[str] = (), db: str | None = None, top: int = 20) -> list[dict[str, Any]]:
    """Ingest (if needed) an archive, compute pairs, return the `top` most similar pairs as dicts."""
    from forensics.store.db import Store
    p = Path(archive)
    if p.is_file() and p.suffix == ".duckdb":
        store = Store(str(p))
    else:
        store = Store(db or ":memory:")
        from forensics.store.ingest import ingest_archive
        ingest_archive(store, str(p))
    analyze(store, None, against=against)
    rows = store.query("select * from similarity_pairs order by greatest(jaccard, containment_a, containment_b) desc "
                       "limit ?", [top])
    from forensics.store.db import loads_json
    for r in rows:
        r["spans"] = loads_json(r["spans"])
    return rows


try:
    import click
except ImportError:  # pragma: no cover
    click = None

if click is not None:
    @click.command("similar")
    @click.argument("archive")
    @click.option("--against", multiple=True, type=click.Path(exists=True), help="Extra solutions: *.py files or run folders.")
    @click.option("--db", default=None, help="Store to use (default: in memory; an ARCHIVE ending .duckdb is read as a store).")
    @click.option("--top", default=20, show_default=True, help="How many pairs to show.")
    @click.option("--json", "as_json", is_flag=True, help="JSON output.")
    def similar_cmd(archive: str, against: tuple[str, ...], db: str | None, top: int, as_json: bool) -> None:
        """Most similar solution pairs in ARCHIVE (and --against DIRs), with aligned spans."""
        rows = similar(archive, against, db, top)
        if as_json:
            import orjson
            click.echo(orjson.dumps(rows, default=str, option=orjson.OPT_INDENT_2).decode())
            return
        if not rows:
            click.echo("no similar pairs")
            return
        for r in rows:
            sc = max(r["jaccard"] or 0, r["containment_a"] or 0, r["containment_b"] or 0)
            click.echo(f"{sc:.2f}  J={r['jaccard']:.2f} ca={r['containment_a']:.2f} cb={r['containment_b']:.2f}  "
                       f"{r['a_id']}  ~  {r['b_id']}")
            for s in (r["spans"] or [])[:3]:
                click.echo(f"      {s['a_file']}:{s['a_start']}-{s['a_end']}  <->  {s['b_file']}:{s['b_start']}-{s['b_end']}"
                           f"  ({s['tokens']} tokens)")
