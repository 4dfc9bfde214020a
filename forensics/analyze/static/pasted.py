"""Pasted library source: a forbidden library's kernels copied into the solution instead of imported.

The decks forbid prebuilt libraries by import or call (problem.yaml `forbidden`, the PROMPT's
"do not import a prebuilt quantized kernel ..."); the grader's substring check and FORBIDDEN-OP
see an import, not the same library's source pasted inline with its names changed.  This module
compares the solution with the libraries' own sources, fingerprinted from their published wheels and
sdists by `python -m devkit.fingerprints build` into ``forensics/data/library_fingerprints.json``:

* **Code.**  The solution is tokenized by the similarity engine's tokenizer
  (`forensics.text.code`: comments and docstrings dropped, identifiers normalized, CUDA held in
  Python strings lexed as C++ in place, sidecar CUDA lexed as C++) and shingled (K tokens).  Each
  library function or kernel is stored as a bottom-`SAMPLE` sketch of its *distinctive* shingles
  (those not shared by unrelated libraries or by the project's own honest kernels: the generic
  vocabulary of Triton and CUDA kernels).  The sketches of all functions form one sorted array,
  searched with the solution's shingle hashes (a binary search per shingle: the LSH-style
  prefilter); a function whose sketch is found at `MIN_CONTAINMENT` or more is contained in the
  solution, renamed or not, and its matched shingles give the solution's line range.
* **Marks.**  Licence and copyright lines of the libraries' own files (their distinctive holders:
  "Tri Dao", "the vLLM project"...), statements that code was adapted or copied from a library, and
  the libraries' distinctive kernel and function names defined again in the solution.

Rules: PASTED-LIBRARY-SOURCE (code) and LIBRARY-PROVENANCE-MARK (marks only).  Severity: high when
the library (or the upstream it vendors) is forbidden for the problem and the code is on the graded
path; medium when it is not forbidden for this problem, off the graded path, or derived from the
Triton tutorials; a mark alone is medium for a forbidden library, info otherwise.
"""

from __future__ import annotations

import ast
import base64
import re
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import orjson

from forensics.text.code import K, _unique, lex_cpp_ids, lex_python_ids, shingle_hashes

from .base import Hit, quote_lines

# ---------------------------------------------------------------------- which library each problem forbids
# The table below belongs in the problem catalogue (the torch-free catalogue of the decks' facts);
# it is kept here, beside the one rule that reads it, until the catalogue holds per-problem facts.
# Read from ../shared/decks/benchmarks/*/problems*/*/problem.yaml `forbidden`, PROMPT.txt and
# spec/replay-contract.md.  A deck that forbids part of a library by name (vllm.attention,
# bitsandbytes.functional.dequantize_4bit, marlin_kernel.gemm, fla.ops.kda) forbids its prebuilt
# implementation: pasting that library's kernels is calling them without the import, so the whole
# library counts here; what the deck names is kept as the evidence.


@dataclass(frozen=True)
class Library:
    id: str
    title: str
    repos: tuple[str, ...]                 # github owner/name of the upstream (provenance lines cite them)
    modules: tuple[str, ...] = ()          # import names
    forbidden: dict[str, str] = field(default_factory=dict)   # problem -> what the deck says
    holders: tuple[str, ...] = ()          # regexes of its copyright holders, as its own files' headers write them


def _L(id_: str, title: str, repos: tuple[str, ...], modules: tuple[str, ...], forbidden: dict[str, str],
       holders: tuple[str, ...] = ()) -> Library:
    return Library(id_, title, repos, modules, forbidden, holders)


LIBRARIES: dict[str, Library] = {lib.id: lib for lib in (
    _L("fla", "flash-linear-attention", ("fla-org/flash-linear-attention", "sustcsonglin/flash-linear-attention"),
       ("fla",), {"02_kda_cutlass": "problem.yaml forbids fla.ops.kda, chunk_kda, fused_recurrent_kda, naive_*_kda; "
                                    "the PROMPT: write the chunk-parallel attention yourself, not FLA's",
                  "02_kimi_linear_decode": "problem.yaml forbids fla.ops and flash_linear_attention (prebuilt stack)"},
       (r"Songlin Yang",)),
    _L("vllm", "vLLM", ("vllm-project/vllm",), ("vllm",),
       {"03_paged_attention": "problem.yaml forbids vllm.attention",
        "01_glm52_fused_moe": "problem.yaml forbids import vllm; the PROMPT: read vLLM fused_moe, do not call it",
        "03_megaqwen_decode": "problem.yaml forbids import vllm",
        "02_kimi_linear_decode": "problem.yaml forbids vllm"},
       (r"contributors to the vLLM project", r"\bThe vLLM team")),
    _L("flashinfer", "FlashInfer", ("flashinfer-ai/flashinfer",), ("flashinfer",),
       {"03_paged_attention": "problem.yaml forbids flashinfer.batch_decode_with_paged_kv_cache and flashinfer.decode",
        "01_glm52_fused_moe": "problem.yaml forbids flashinfer",
        "02_deepseek_nsa": "problem.yaml forbids flashinfer",
        "03_megaqwen_decode": "problem.yaml forbids flashinfer",
        "04_flash_attention": "the mini deck forbids flashinfer"},
       (r"FlashInfer team",)),
    _L("flash_attn", "FlashAttention", ("Dao-AILab/flash-attention", "HazyResearch/flash-attention"), ("flash_attn",),
       {"02_deepseek_nsa": "problem.yaml forbids flash_attn",
        "03_megaqwen_decode": "problem.yaml forbids flash_attn",
        "04_flash_attention": "the mini deck forbids flash_attn"},
       (r"(?:\(c\)|\d{4})\s*,?\s*Tri Dao\b",)),
    _L("bitsandbytes", "bitsandbytes", ("bitsandbytes-foundation/bitsandbytes", "TimDettmers/bitsandbytes"),
       ("bitsandbytes",),
       {"07_w4a16_gemm": "problem.yaml forbids bitsandbytes.functional.dequantize_4bit and gemv_4bit",
        "02_kimi_linear_decode": "problem.yaml forbids bitsandbytes (prebuilt quantized kernel)"}),
    _L("marlin", "Marlin", ("IST-DASLab/marlin",), ("marlin", "marlin_kernel"),
       {"07_w4a16_gemm": "problem.yaml forbids marlin_kernel.gemm",
        "02_kimi_linear_decode": "problem.yaml forbids marlin (prebuilt quantized kernel)"},
       (r"Elias Frantar", r"\bMarlin\.\d{4}")),
    _L("gptq", "GPTQ (AutoGPTQ, GPTQModel)", ("AutoGPTQ/AutoGPTQ", "ModelCloud/GPTQModel", "qwopqwop200/GPTQ-for-LLaMa",
                                             "fpgaminer/GPTQ-triton", "PanQiWei/AutoGPTQ"),
       ("auto_gptq", "gptqmodel"), {"02_kimi_linear_decode": "problem.yaml forbids auto_gptq (prebuilt quantized kernel)"},
       (r"ModelCloud\.ai", r"qubitium@modelcloud")),
    _L("awq", "AWQ (AutoAWQ, llm-awq)", ("casper-hansen/AutoAWQ", "mit-han-lab/llm-awq"), ("awq", "autoawq"),
       {"02_kimi_linear_decode": "problem.yaml forbids autoawq and awq (prebuilt quantized kernel)"}),
    _L("exllama", "ExLlama / ExLlamaV2", ("turboderp/exllama", "turboderp/exllamav2", "turboderp-org/exllamav2"),
       ("exllama", "exllamav2"), {"02_kimi_linear_decode": "problem.yaml forbids exllama (prebuilt quantized kernel)"}),
    _L("torchao", "torchao", ("pytorch/ao", "pytorch-labs/ao"), ("torchao",),
       {"02_kimi_linear_decode": "problem.yaml forbids torchao (prebuilt quantized kernel)"}),
    _L("transformers", "Hugging Face Transformers", ("huggingface/transformers",), ("transformers",),
       {"02_kimi_linear_decode": "problem.yaml forbids transformers (prebuilt model stack)"},
       (r"HuggingFace Inc\. team", r"The HuggingFace Team")),
    _L("sglang", "SGLang", ("sgl-project/sglang",), ("sglang", "sgl_kernel"),
       {"02_kimi_linear_decode": "problem.yaml forbids sglang (prebuilt model stack)"},
       (r"SGLang Team",)),
    _L("flash_mla", "FlashMLA", ("deepseek-ai/FlashMLA",), ("flash_mla", "flashmla"),
       {"02_kimi_linear_decode": "problem.yaml forbids flash_mla and flashmla (prebuilt attention)"}),
    _L("megablocks", "MegaBlocks", ("databricks/megablocks", "stanford-futuredata/megablocks"), ("megablocks",),
       {"01_glm52_fused_moe": "problem.yaml forbids megablocks"},
       (r"\bDatabricks\b",)),
    _L("scattermoe", "ScatterMoE", ("shawntan/scattermoe",), ("scattermoe",),
       {"01_glm52_fused_moe": "problem.yaml forbids scattermoe"}),
    _L("sonic_moe", "Sonic-MoE", ("Dao-AILab/sonic-moe",), ("sonic_moe",),
       {"06_sonic_moe_swiglu": "problem.yaml forbids from/import sonic_moe"},
       (r"Xinle Cheng, Ion Stoica, Tri Dao",)),
    _L("pufferlib", "PufferLib", ("PufferAI/PufferLib",), ("pufferlib",),
       {"04_grid_mingru_sps": "problem.yaml forbids pufferlib", "01_rl_grid_ppo": "the mega deck bans pufferlib imports"}),
    # fingerprinted for provenance, forbidden by no deck: a match is reported (medium), never decides
    _L("liger_kernel", "Liger Kernel", ("linkedin/Liger-Kernel",), ("liger_kernel",), {}),
    _L("quack", "QuACK (quack-kernels)", ("Dao-AILab/quack",), ("quack",), {},
       (r"QuACK team", r"Han Guo, Tri Dao", r"Ted Zadouri, Tri Dao", r"Wentao Guo, Mayank Mishra, Tri Dao",
        r"(?:\(c\)|\d{4})\s*,?\s*Tri Dao\b")),
    # the Triton tutorials: textbook code many honest kernels start from; a library function whose
    # file says it was adapted from them is never decisive (forbidden by no deck)
    _L("triton_tutorials", "the Triton tutorials", ("triton-lang/triton", "openai/triton"), (), {}),
)}


def forbidden_libraries(problem: str | None) -> dict[str, str]:
    """Library id -> what the deck says, for the libraries `problem` forbids."""
    return {lib.id: lib.forbidden[problem] for lib in LIBRARIES.values() if problem in lib.forbidden}


def library_of_repo(url_or_repo: str) -> str | None:
    """The library whose upstream repository a github URL or owner/name names."""
    s = url_or_repo.lower()
    for lib in LIBRARIES.values():
        for r in lib.repos:
            r = r.lower()
            if s == r or s.endswith("/" + r) or ("github.com/" + r) in s:
                return lib.id
    return None


RULE_IDS = ("PASTED-LIBRARY-SOURCE", "LIBRARY-PROVENANCE-MARK")

# ---------------------------------------------------------------------- sketches (shared with the builder)
SAMPLE = 32            # shingles kept per library function (bottom-k of a mixed hash)
MIN_SHINGLES = 80      # a function needs this many distinctive shingles (about ten lines) to be fingerprinted
MIN_CONTAINMENT = 0.6  # share of a function's sketch found in the solution to call it pasted
MIN_HITS = 20          # and at least this many sketch shingles (of SAMPLE)
MARK_NAMES_MIN = 3     # distinctive upstream names defined again before names alone make a mark
FORMAT = "forensics-library-fingerprints/1"
DATA = "library_fingerprints.json"


def mix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer: the order in which a function's shingles are sampled."""
    h = h.astype(np.uint32)
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint32(16))
        h = h * np.uint32(0x85EBCA6B)
        h = h ^ (h >> np.uint32(13))
        h = h * np.uint32(0xC2B2AE35)
        return h ^ (h >> np.uint32(16))


def sketch(shingles: np.ndarray, k: int = SAMPLE) -> np.ndarray:
    """The bottom-k sketch of a set of 32-bit shingle hashes: the k whose mixed value is smallest,
    returned sorted by shingle hash (uint32).  The same set always gives the same sketch."""
    s = np.unique(np.asarray(shingles, dtype=np.uint64)).astype(np.uint32)
    if len(s) <= k:
        return np.sort(s)
    order = np.lexsort((s, mix32(s)))
    return np.sort(s[order[:k]])


def pack_u32(a: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.asarray(a, dtype="<u4").tobytes(), 9)).decode()


def unpack_u32(s: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(s)), dtype="<u4").copy()


# ---------------------------------------------------------------------- the fingerprints
@dataclass
class Fingerprints:
    """The shipped data, loaded: per fingerprint its sketch and owners (library, version, file,
    function, lines); the index (every sketch hash, sorted, with its fingerprint); marks and names."""

    libraries: dict[str, dict[str, Any]]
    files: list[str]
    owners: list[list[tuple[str, int, str, int, int]]]    # per fingerprint: (library, file index, name, first, last line)
    origins: list[tuple[str, ...]]                        # per fingerprint: upstream libraries its files cite
    shingles: np.ndarray                                  # per fingerprint: distinctive shingle count
    sketches: np.ndarray                                  # (n, SAMPLE) uint32
    index_hash: np.ndarray = field(init=False)            # sorted unique sketch hashes
    index_start: np.ndarray = field(init=False)           # CSR offsets into index_fp
    index_fp: np.ndarray = field(init=False)
    marks: dict[str, dict[str, int]] = field(default_factory=dict)   # library -> holder pattern -> its files carrying it
    names: dict[str, list[str]] = field(default_factory=dict)   # library -> distinctive upstream names
    engine: dict[str, Any] = field(default_factory=dict)
    _name_lib: dict[str, set[str]] | None = None

    def __post_init__(self) -> None:
        flat = self.sketches.reshape(-1)
        fp = np.repeat(np.arange(len(self.sketches), dtype=np.int32), self.sketches.shape[1] if len(self.sketches) else 0)
        order = np.argsort(flat, kind="stable")
        flat, fp = flat[order], fp[order]
        uniq, start = np.unique(flat, return_index=True)
        self.index_hash = uniq
        self.index_start = np.append(start, len(flat)).astype(np.int64)
        self.index_fp = fp

    @classmethod
    def from_json(cls, raw: bytes | dict) -> "Fingerprints":
        d = orjson.loads(raw) if isinstance(raw, (bytes, str)) else raw
        if d.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file (format={d.get('format')!r})")
        k = int(d["engine"]["sample"])
        if int(d["engine"]["shingle_tokens"]) != K:
            raise ValueError(f"fingerprints were built with {d['engine']['shingle_tokens']}-token shingles, the "
                             f"tokenizer uses {K}: rebuild them (python -m devkit.fingerprints build)")
        sk = unpack_u32(d["sketches"]).reshape(-1, k) if d["sketches"] else np.zeros((0, k), np.uint32)
        libs = list(d["library_ids"])
        owners = [[(libs[o[0]], int(o[1]), str(o[2]), int(o[3]), int(o[4])) for o in os_] for os_ in d["owners"]]
        origins = [tuple(libs[i] for i in o) for o in d["origins"]]
        return cls(d["libraries"], d["files"], owners, origins, np.asarray(d["shingles"], np.int64), sk,
                   marks=d.get("marks", {}), names=d.get("names", {}), engine=d["engine"])

    def name_libraries(self) -> dict[str, set[str]]:
        if self._name_lib is None:
            out: dict[str, set[str]] = {}
            for lib, names in self.names.items():
                for n in names:
                    out.setdefault(n, set()).add(lib)
            self._name_lib = out
        return self._name_lib


class FingerprintsMissing(RuntimeError):
    pass


@lru_cache(maxsize=1)
def shipped() -> Fingerprints:
    """The fingerprints shipped with forensics (package data)."""
    try:
        raw = resources.files("forensics.data").joinpath(DATA).read_bytes()
    except (FileNotFoundError, OSError) as e:
        raise FingerprintsMissing(f"forensics/data/{DATA} is missing ({e}); build it with "
                                  "`python -m devkit.fingerprints build`") from e
    return Fingerprints.from_json(raw)


# ---------------------------------------------------------------------- the solution's shingles
@dataclass
class Part:
    """One piece of the solution as text the tokenizer reads: the Python file (CUDA in its strings
    lexed in place), an appended or separate sidecar; `line0` maps its lines to the cited file."""

    file: str
    text: str
    cpp: bool
    line0: int = 1
    sidecar: str | None = None     # the sidecar's own name (appended or a separate file); None: the solution


@dataclass
class Shingled:
    hashes: np.ndarray        # uint32 per window, all parts concatenated
    first: np.ndarray         # first line of each window
    last: np.ndarray          # last line of each window
    part: np.ndarray          # index of the part of each window


def shingle_parts(parts: list[Part]) -> Shingled:
    hs, fs, ls, ps = [], [], [], []
    for i, p in enumerate(parts):
        ids, lines = lex_cpp_ids(p.text, p.line0) if p.cpp else lex_python_ids(p.text)
        if not p.cpp and p.line0 != 1:
            lines = lines + (p.line0 - 1)
        if len(ids) < K:
            continue
        h = shingle_hashes(ids).astype(np.uint32)
        n = len(h)
        hs.append(h)
        fs.append(lines[:n])
        ls.append(lines[K - 1:K - 1 + n])
        ps.append(np.full(n, i, np.int32))
    if not hs:
        e = np.zeros(0, np.int64)
        return Shingled(np.zeros(0, np.uint32), e, e, np.zeros(0, np.int32))
    return Shingled(np.concatenate(hs), np.concatenate(fs), np.concatenate(ls), np.concatenate(ps))


# ---------------------------------------------------------------------- matching
@dataclass
class Match:
    fp: int
    hits: int
    containment: float
    part: int
    line_start: int
    line_end: int


def match(fps: Fingerprints, sh: Shingled, min_containment: float = MIN_CONTAINMENT,
          min_hits: int = MIN_HITS) -> tuple[list[Match], float]:
    """Library functions contained in the solution, and the best containment of any function (the
    margin a clean solution keeps).  One binary search per distinct solution shingle into the sorted
    sketch hashes; only functions with enough of their sketch found are looked at further."""
    if not len(sh.hashes) or not len(fps.index_hash):
        return [], 0.0
    u = _unique(sh.hashes)
    pos = np.searchsorted(fps.index_hash, u)
    pos[pos == len(fps.index_hash)] = 0
    found = pos[fps.index_hash[pos] == u]
    if not len(found):
        return [], 0.0
    starts, ends = fps.index_start[found], fps.index_start[found + 1]
    lens = ends - starts
    idx = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens) + np.arange(int(lens.sum()))
    fp_ids = fps.index_fp[idx]
    counts = np.bincount(fp_ids, minlength=len(fps.sketches))
    k = fps.sketches.shape[1]
    best = float(counts.max()) / k if len(counts) else 0.0
    cand = np.flatnonzero((counts >= min_hits) & (counts >= np.ceil(min_containment * k)))
    out: list[Match] = []
    for f in cand.tolist():
        m = np.isin(sh.hashes, fps.sketches[f])
        where = np.flatnonzero(m)
        part, lo, hi = _densest(sh, where, int(counts[f]))
        out.append(Match(f, int(counts[f]), float(counts[f]) / k, part, lo, hi))
    out.sort(key=lambda x: (-x.containment, -int(fps.shingles[x.fp]), x.fp))
    return out, best


def _densest(sh: Shingled, where: np.ndarray, hits: int) -> tuple[int, int, int]:
    """The part and line range of the shortest run of windows (within one part) that holds 90% of
    the function's matched sketch shingles: a copy is one place, a sibling function elsewhere in the
    solution that shares a few of them is not counted in."""
    w = where.tolist()
    hv = sh.hashes[where].tolist()
    pv = sh.part[where].tolist()
    need = max(1, int(np.ceil(0.9 * hits)))
    best = None
    count: dict[int, int] = {}
    lo = 0
    for hi in range(len(w)):
        if hi and pv[hi] != pv[hi - 1]:       # a run never spans two parts
            count.clear()
            lo = hi
        count[hv[hi]] = count.get(hv[hi], 0) + 1
        while len(count) >= need:
            if best is None or w[hi] - w[lo] < best[1] - best[0]:
                best = (w[lo], w[hi])
            c = count[hv[lo]] - 1
            if c:
                count[hv[lo]] = c
            else:
                del count[hv[lo]]
            lo += 1
    if best is None:                          # the hits are spread over parts: the largest part's span
        part = max(set(pv), key=pv.count)
        ws = [x for x, q in zip(w, pv) if q == part]
        best = (ws[0], ws[-1])
    return int(sh.part[best[0]]), int(sh.first[best[0]]), int(sh.last[best[1]])


# ---------------------------------------------------------------------- marks
COPY_STMT = re.compile(r"(?:adapted|copied|ported|taken|borrowed|vendored|lifted|extracted|forked)\s+(?:\w+\s+){0,3}?"
                       r"from\s+(?P<what>[^\n]{1,160})", re.I)
GITHUB = re.compile(r"github\.com/([\w.-]+/[\w.-]+)", re.I)


def _library_named(text: str) -> str | None:
    """The library a provenance statement names: a github URL of its upstream, or its import/title."""
    g = GITHUB.search(text)
    if g:
        lib = library_of_repo(g.group(1).removesuffix(".git"))
        if lib:
            return lib
    low = text.lower()
    for lib in LIBRARIES.values():
        for w in (lib.title.lower(), *lib.modules, lib.id):
            if len(w) >= 4 and re.search(r"(?<![\w.-])" + re.escape(w.lower()) + r"(?![\w-])", low):
                return lib.id
    return None


@dataclass
class Mark:
    library: str
    kind: str          # licence | provenance | names
    file: str
    line: int
    text: str


LICENCE_LINE = re.compile(r"copyright|spdx-|\(c\)|©|licen[cs]ed under", re.I)
_MARK_CANDIDATE = re.compile(r"(?im)^[ \t]*(?:#|//|/?\*)[^\n]*?(?:copyright|spdx-|\(c\)|©|licen[cs]ed under|adapted|copied|"
                             r"ported|taken|borrowed|vendored|lifted|extracted|forked)[^\n]*")


@lru_cache(maxsize=1)
def _holder_rx() -> list[tuple[str, re.Pattern]]:
    return [(lib.id, re.compile(h, re.I)) for lib in LIBRARIES.values() for h in lib.holders]


def find_marks(fps: Fingerprints, parts: list[Part], defined: dict[str, int]) -> list[Mark]:
    """Copyright and licence lines naming a library's holder, statements that code was adapted or
    copied from a library (a comparison such as "like flash-attn's online softmax" is neither), and
    MARK_NAMES_MIN or more of a library's distinctive kernel/function names defined again."""
    out: list[Mark] = []
    holders = _holder_rx()
    for p in parts:
        for cm in _MARK_CANDIDATE.finditer(p.text):   # comment lines with a licence or copy word only
            line = cm.group(0)
            if len(line) > 400:
                continue
            ln = p.line0 + p.text.count("\n", 0, cm.start())
            if LICENCE_LINE.search(line):
                libs = sorted({lib for lib, r in holders if r.search(line)})
                for lib in libs:
                    out.append(Mark(lib, "licence", p.file, ln, line.strip()[:160]))
                if libs:
                    continue
            m = COPY_STMT.search(line)
            if m:
                lib = _library_named(m.group("what"))
                if lib and lib != "triton_tutorials":
                    out.append(Mark(lib, "provenance", p.file, ln, line.strip()[:160]))
    by_lib: dict[str, list[tuple[str, int]]] = {}
    nl = fps.name_libraries()
    for name, ln in defined.items():
        for lib in nl.get(name, ()):
            by_lib.setdefault(lib, []).append((name, ln))
    for lib, names in sorted(by_lib.items()):
        if len(names) >= MARK_NAMES_MIN:
            names.sort(key=lambda x: x[1])
            out.append(Mark(lib, "names", parts[0].file if parts else "solution.py", names[0][1],
                            ", ".join(n for n, _ in names[:8])))
    return out


_CPP_DEF = re.compile(r"(?:__global__|__device__|template\s*<[^>]*>)[^;{(]*?\b([A-Za-z_]\w*)\s*\(")


def defined_names(mod: Any, parts: list[Part]) -> dict[str, int]:
    """Functions, kernels and classes the solution defines (Python defs and classes, CUDA
    __global__/__device__ functions), with their first line."""
    out: dict[str, int] = {}
    if mod is not None:
        for n in mod.of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            out.setdefault(n.name, n.lineno)
    for p in parts:
        if p.cpp or "__global__" in p.text or "__device__" in p.text:
            for m in _CPP_DEF.finditer(p.text):
                out.setdefault(m.group(1), p.line0 + p.text.count("\n", 0, m.start(1)))
    return out


# ---------------------------------------------------------------------- the graded path
def _reached_ranges(mod: Any) -> tuple[list[tuple[int, int]], list[tuple[int, int, str]]]:
    """(line ranges of functions reached from the entry points or module level, ranges of functions
    not reached).  Reach follows every reference to a module function by name (calls, Triton
    launches `k[grid](...)`, functions passed as values) and `self.`/`cls.` methods."""
    funcs = list(mod.funcs.values())
    by_name = mod.by_name
    from .model import FORWARD_NAMES
    todo = [fi for fi in funcs if fi.node.name in FORWARD_NAMES or fi.node.name == "__init__"]
    # names referenced at module level (outside every function) run at import
    for n in mod.of(ast.Name, ast.Attribute):
        if mod.scope_of(n) is None:
            nm = n.id if isinstance(n, ast.Name) else n.attr
            todo.extend(by_name.get(nm, ()))
    seen: set[str] = set()
    while todo:
        fi = todo.pop()
        if fi.qualname in seen:
            continue
        seen.add(fi.qualname)
        for n in fi.nodes:
            if isinstance(n, ast.Name):
                todo.extend(by_name.get(n.id, ()))
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
                todo.extend(by_name.get(n.attr, ()))
        # nested definitions belong to their parent's reach
        for sub in funcs:
            if sub.qualname.startswith(fi.qualname + ".") and sub.qualname not in seen:
                todo.append(sub)
    on, off = [], []
    for fi in funcs:
        rng = (min([fi.node.lineno] + [d.lineno for d in fi.node.decorator_list]), fi.node.end_lineno or fi.node.lineno)
        if fi.qualname in seen:
            on.append(rng)
        else:
            off.append((*rng, fi.qualname))
    return on, off


def graded(mod: Any, part: Part, lo: int, hi: int, sidecars_named: set[str]) -> tuple[bool, str]:
    """Is the matched range on the graded path, and why (or why not).  A sidecar is when the
    solution names it (a build or import of it); code in the solution is unless it sits inside a
    function no entry point reaches, or in the `__main__` block."""
    if part.sidecar is not None:
        base = part.sidecar.rsplit("/", 1)[-1]
        if base in sidecars_named or base.rsplit(".", 1)[0] in sidecars_named:
            return True, f"sidecar {base}, which the solution names"
        return False, f"sidecar {base}, which the solution does not name"
    if mod is None:
        return True, "the solution could not be parsed: the path cannot be narrowed"
    on, off = mod.__dict__.setdefault("_pasted_reach", _reached_ranges(mod))
    inside_off = [q for a, b, q in off if a <= lo and hi <= b]
    inside_on = [(a, b) for a, b in on if a <= lo and hi <= b]
    if inside_off and not inside_on:
        return False, f"inside {inside_off[-1]}, which no entry point reaches"
    if any(ln in mod.main_block_lines for ln in (lo, hi)):
        return False, "inside the `if __name__ == '__main__'` block"
    return True, "reached from the entry points or at module level"


# ---------------------------------------------------------------------- the rule
def sidecars_named(python: str, parts: list[Part]) -> set[str]:
    """The sidecars (by file name or module name) that the solution's Python text names."""
    out = set()
    for p in parts:
        if p.sidecar is not None:
            base = p.sidecar.rsplit("/", 1)[-1]
            stem = base.rsplit(".", 1)[0]
            if base in python:
                out.add(base)
            if base.endswith(".py") and re.search(r"\b(?:import|from)\s+" + re.escape(stem) + r"\b", python):
                out.add(stem)
    return out


def solution_parts(filename: str, python: str, appended: Any = (), sidecars: dict[str, str] | None = None) -> list[Part]:
    """The pieces of one solution the tokenizer reads: its Python (CUDA in strings lexed in place),
    the sidecars appended to a published file (cited at the published file's lines), and the
    run's separate sidecar sources."""
    parts = [Part(filename, python, False)]
    for sc in appended:
        parts.append(Part(filename, sc.text, not sc.name.endswith(".py"), sc.first_line, sidecar=sc.name))
    for path, t in sorted((sidecars or {}).items()):
        if path.endswith((".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp", ".py")):
            parts.append(Part(path, t, not path.endswith(".py"), 1, sidecar=path))
    return parts


def check_solution(mod: Any, filename: str, python: str, appended: Any, sidecars: dict[str, str] | None,
                   problem: str | None, fps: Fingerprints | None = None) -> list[Hit]:
    """PASTED-LIBRARY-SOURCE and LIBRARY-PROVENANCE-MARK for one solution (the static analyzer's call)."""
    parts = solution_parts(filename, python, appended, sidecars)
    if fps is None:
        try:
            fps = shipped()
        except (FingerprintsMissing, ValueError, KeyError, TypeError, zlib.error) as e:   # a broken install: say so
            return [Hit("PASTED-LIBRARY-SOURCE", None, None, f"the library fingerprints could not be read ({e}): "
                        "pasted library source was not looked for", file=filename, severity="info",
                        data={"ran": False, "error": str(e)[:300]})]
    return check_pasted(mod, parts, problem, sidecars_named(python, parts), fps)


def check_pasted(mod: Any, parts: list[Part], problem: str | None, named: set[str],
                 fps: Fingerprints) -> list[Hit]:
    forb = forbidden_libraries(problem)
    hits: list[Hit] = []
    sh = shingle_parts(parts)
    matches, best = match(fps, sh)
    taken: list[tuple[int, int, int]] = []
    code_libs: set[str] = set()
    for m in matches:
        if any(p == m.part and not (m.line_end < a or m.line_start > b) for p, a, b in taken):
            continue   # the same region already cited by a closer (or larger) match
        same = [x for x in matches if x.part == m.part and not (x.line_end < m.line_start or x.line_start > m.line_end)]
        owners = [o for x in same for o in fps.owners[x.fp]]
        libs = sorted({o[0] for o in owners} | {u for x in same for u in fps.origins[x.fp]})
        taken.append((m.part, m.line_start, m.line_end))
        part = parts[m.part]
        on_path, why = graded(mod, part, m.line_start, m.line_end, named)
        forbidden_here = [lib for lib in libs if lib in forb]
        tutorial = "triton_tutorials" in libs
        if forbidden_here and on_path and not tutorial:
            sev = "high"
        else:
            sev = "medium"
        o = fps.owners[m.fp][0]
        lib0, file0, name0, a0, b0 = o[0], fps.files[o[1]], o[2], o[3], o[4]
        ver = fps.libraries.get(lib0, {}).get("version", "?")
        also = sorted({f"{x[0]} {fps.files[x[1]].split('/')[-1]}:{x[2]}" for x in owners if x != o})
        reason = (f"forbidden for {problem}: {forb[forbidden_here[0]]}" if forbidden_here else
                  (f"{', '.join(libs)} {'is' if len(libs) == 1 else 'are'} not forbidden for {problem}" if problem
                   else "the problem is unknown, so whether the library is forbidden is unknown"))
        if tutorial:
            reason += "; the library's file says it was adapted from the Triton tutorials, so the copy may come from them"
        if forbidden_here and not on_path:
            reason += f"; off the graded path ({why})"
        msg = (f"lines {m.line_start}-{m.line_end} of {part.file} contain {lib0} {ver} {file0}:{name0} "
               f"(lines {a0}-{b0} there): {m.hits} of its {fps.sketches.shape[1]} sampled distinctive shingles "
               f"({m.containment:.0%}; the function has {int(fps.shingles[m.fp])}) are in the solution, with names and "
               f"comments ignored; {reason}")
        if also:
            msg += f" (also matches {'; '.join(also[:4])})"
        code_libs.update(libs)
        hits.append(Hit("PASTED-LIBRARY-SOURCE", m.line_start, m.line_end, msg, file=part.file, severity=sev,
                        quote=quote_lines(part.text.splitlines(), m.line_start - part.line0 + 1,
                                          m.line_end - part.line0 + 1),
                        data={"library": lib0, "version": ver, "library_file": file0, "function": name0,
                              "library_lines": [a0, b0], "libraries": libs, "containment": round(m.containment, 3),
                              "sketch_hits": m.hits, "sketch": int(fps.sketches.shape[1]),
                              "function_shingles": int(fps.shingles[m.fp]), "forbidden": forbidden_here,
                              "graded_path": on_path, "graded_path_why": why, "problem": problem,
                              "also": also[:10]}))
        if len(hits) >= 12:
            break
    marks = find_marks(fps, parts, defined_names(mod, parts))
    by_lib: dict[str, list[Mark]] = {}
    for mk in marks:
        by_lib.setdefault(mk.library, []).append(mk)
    for lib, ms in sorted(by_lib.items()):
        sev = "medium" if lib in forb else "info"
        first = ms[0]
        kinds = sorted({m.kind for m in ms})
        msg = (f"{LIBRARIES[lib].title if lib in LIBRARIES else lib} provenance marks ({', '.join(kinds)}): "
               + "; ".join(f"{m.file}:{m.line} {m.text!r}" for m in ms[:4])
               + (f" (+{len(ms) - 4} more)" if len(ms) > 4 else "")
               + (f"; {lib} is forbidden for {problem}" if lib in forb else "")
               + ("; the code matches it too (PASTED-LIBRARY-SOURCE)" if lib in code_libs else
                  "; no code of it was found in the solution, so the mark alone decides nothing"))
        hits.append(Hit("LIBRARY-PROVENANCE-MARK", first.line, first.line, msg, file=first.file, severity=sev,
                        data={"library": lib, "marks": [{"kind": m.kind, "file": m.file, "line": m.line, "text": m.text}
                                                        for m in ms[:20]],
                              "forbidden": lib in forb, "problem": problem, "code_match": lib in code_libs}))
    return hits


def top_score(parts: list[Part], fps: Fingerprints | None = None) -> tuple[float, list[Match]]:
    """The best containment of any library function in the solution, and the matches at the rule's
    threshold (for calibration: `forensics bench pasted`)."""
    fps = fps if fps is not None else shipped()
    ms, best = match(fps, shingle_parts(parts))
    return best, ms
