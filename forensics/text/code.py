"""Code as text: the tokenizer of Python and C++/CUDA sources (identifiers and literals normalized,
keywords and the torch/triton vocabulary kept), token shingles and their hashes, one document per
solution (`build_doc`), and the aligned spans two documents share.  Shared by the similarity
analyzer (MinHash/LSH over the shingles) and provenance (what a copy carried over); no store, no
analyzer.  The parameters are documented in docs/contamination.md."""

from __future__ import annotations

import hashlib
import keyword
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

K = 12                # tokens per shingle (sweep in docs/contamination.md)
SIDE_EXT = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp")
_MAX_HASH = np.uint64((1 << 32) - 1)


# ------------------------------------------------------------------------------ tokenizing

# Token patterns, one alternative per token kind, in priority order: comment, string literal,
# number, identifier, operator, newline (anything else, e.g. whitespace, is skipped).  String and
# comment bodies are unrolled loops (`[^"]*(?:"(?!"")[^"]*)*`) rather than lazy `[\s\S]*?`
# scans, and a newline token takes the next line's indentation with it (the regex engine then
# does not try every alternative at every indentation space): the same tokens, faster.
_PY_TOK = re.compile(
    r"""(?P<com>\#[^\n]*)"""
    r"""|(?P<str>[rRbBuUfF]{0,2}(?:\"\"\"[^"]*(?:"(?!"")[^"]*)*(?:\"\"\"|$)|'''[^']*(?:'(?!'')[^']*)*(?:'''|$)"""
    r"""|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|'[^'\\\n]*(?:\\.[^'\\\n]*)*'?))"""
    r"""|(?P<num>0[xX][0-9a-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d+)(?:[eE][+-]?\d+)?[jJ]?)"""
    r"""|(?P<id>[A-Za-z_]\w*)"""
    r"""|(?P<op>\*\*=?|//=?|>>=?|<<=?|[-+*/%&|^=<>!]=|->|:=|[-+*/%&|^~<>=!@:.,;()\[\]{}])"""
    r"""|(?P<nl>\n[ \t]*)"""
)
_CPP_TOK = re.compile(
    r"""(?P<com>//[^\n]*|/\*[^*]*(?:\*(?!/)[^*]*)*(?:\*/|$))"""
    r"""|(?P<str>"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|'(?:[^'\\\n]|\\.){0,4}'?)"""
    r"""|(?P<num>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFuUlLhH]*)"""
    r"""|(?P<id>\#\s*[A-Za-z_]\w*|[A-Za-z_]\w*)"""
    r"""|(?P<op><<<|>>>|<<=|>>=|->\*?|::|\+\+|--|&&|\|\||[-+*/%&|^=<>!]=|<<|>>|[-+*/%&|^~<>=!?:.,;()\[\]{}])"""
    r"""|(?P<nl>\n[ \t]*)"""
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


# Token ids: a normalized token text -> crc32(text) | len(text) << 32 (`_tid`).  The lexers below
# run one `re.findall` over a whole file (the token boundaries of the sequential lexers `_PY_TOK` /
# `_CPP_TOK` describe, in C), map every raw token to its normalized id through a dict that fills
# itself on a miss (`__missing__`, so a token text is classified once per process), and handle only
# the few tokens that need context (string literals, comments with line breaks) in Python.
_TOKEN_ID: dict[str, int] = {}
_ID_TEXT: dict[int, str] = {}
_NL, _DROP, _SPECIAL = -1, -2, -3     # sentinels in the raw id arrays: newline, comment, needs a look


def _tid(t: str) -> int:
    v = _TOKEN_ID.get(t)
    if v is None:
        v = zlib.crc32(t.encode()) | (len(t) << 32)
        _TOKEN_ID[t] = v
        _ID_TEXT[v] = t
    return v


def _ungrouped(rx: re.Pattern) -> re.Pattern:
    """The same pattern with its named groups made non-capturing, so findall returns whole tokens."""
    return re.compile(re.sub(r"\(\?P<\w+>", "(?:", rx.pattern))


_PY_ALL = _ungrouped(_PY_TOK)
_CPP_ALL = _ungrouped(_CPP_TOK)
_PREFIX = frozenset("rRbBuUfF")


class _PyIds(dict):
    """raw Python token -> normalized id; comments -> _DROP, string literals -> _SPECIAL (not kept)."""

    def __missing__(self, tok: str) -> int:
        c = tok[0]
        if c == "\n":
            v = _NL
        elif c == "#":
            return _DROP
        elif c in "'\"" or (c in _PREFIX and ("'" in tok[:3] or '"' in tok[:3])):
            return _SPECIAL
        elif c.isdigit() or (c == "." and len(tok) > 1):
            v = _tid(tok.replace("_", ""))
        elif c.isalpha() or c == "_":
            v = _tid(tok if tok in PY_KEEP else "V")
        else:
            v = _tid(tok)
        self[tok] = v
        return v


class _CppIds(dict):
    """raw C/C++ token -> normalized id; comments -> _DROP, tokens holding a line break -> _SPECIAL."""

    def __missing__(self, tok: str) -> int:
        c = tok[0]
        if c == "\n":
            v = _NL
        elif "\n" in tok:
            return _SPECIAL
        elif tok.startswith(("//", "/*")):
            return _DROP
        elif c in "\"'":
            return _tid("S")
        elif c == "#":
            s = "#" + tok[1:].strip()
            v = _tid(s if s in CPP_KEEP else "V")
        elif c.isdigit() or (c == "." and len(tok) > 1):
            v = _tid(tok.rstrip("fFuUlLhH") or tok)
        elif c.isalpha() or c == "_":
            v = _tid(tok if tok in CPP_KEEP else "V")
        else:
            v = _tid(tok)
        self[tok] = v
        return v


_PY_IDS = _PyIds()
_CPP_IDS = _CppIds()
_EMPTY_I = np.zeros(0, dtype=np.int64)


def _lines_of(raw: np.ndarray, incr_extra: dict[int, int], line0: int) -> np.ndarray:
    """Line of every raw token: line0 plus the line breaks before it (newline tokens, and the
    breaks inside multi-line tokens given in incr_extra)."""
    incr = (raw == _NL).astype(np.int64)
    for k, n in incr_extra.items():
        incr[k] = n
    lines = np.empty(len(raw), dtype=np.int64)
    if len(raw):
        lines[0] = line0
        np.cumsum(incr[:-1], out=lines[1:])
        lines[1:] += line0
    return lines


def lex_cpp_ids(src: str, line0: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Normalized token ids and their 1-based lines of C/C++/CUDA source (comments dropped,
    strings -> S, identifiers -> V unless CPP_KEEP)."""
    toks = _CPP_ALL.findall(src)
    if not toks:
        return _EMPTY_I, _EMPTY_I
    raw = np.fromiter(map(_CPP_IDS.__getitem__, toks), dtype=np.int64, count=len(toks))
    special = np.flatnonzero(raw == _SPECIAL).tolist()
    extra = {}
    for k in special:   # block comments and `#  \n directive` spellings that span lines
        t = toks[k]
        extra[k] = t.count("\n")
        if t.startswith("/*"):
            raw[k] = _DROP
        else:
            s = "#" + t[1:].strip()
            raw[k] = _tid(s if s in CPP_KEEP else "V")
    lines = _lines_of(raw, extra, line0)
    keep = raw >= 0
    return raw[keep], lines[keep]


def lex_python_ids(src: str) -> tuple[np.ndarray, np.ndarray]:
    """Normalized token ids and lines of a Python file: comments and docstrings dropped, strings
    holding C/C++/CUDA lexed as C++ in place (their own line numbers), other strings -> S,
    identifiers -> V unless PY_KEEP; numbers kept.  Token for token what the sequential `_PY_TOK`
    lexer gives (tested against it)."""
    toks = _PY_ALL.findall(src)
    if not toks:
        return _EMPTY_I, _EMPTY_I
    raw = np.fromiter(map(_PY_IDS.__getitem__, toks), dtype=np.int64, count=len(toks))
    strings = np.flatnonzero(raw == _SPECIAL)
    if not len(strings):
        lines = _lines_of(raw, {}, 1)
        keep = raw >= 0
        return raw[keep], lines[keep]
    extra = {k: toks[k].count("\n") for k in strings.tolist()}
    lines = _lines_of(raw, extra, 1)
    # docstring: a triple-quoted string starting a statement - no significant token before it, or
    # the last one is ':' with a line break in between (what the sequential lexer's prev_sig tracks)
    sig = (raw != _NL) & (raw != _DROP)
    n = len(raw)
    last_sig = np.maximum.accumulate(np.where(sig, np.arange(n), -1))
    nl_cum = np.cumsum(raw == _NL)
    s_id = _tid("S")
    cuda: list[tuple[int, np.ndarray, np.ndarray]] = []
    for k in strings.tolist():
        s = toks[k]
        body, _ = _string_body(s)
        if _CODE_HINT.search(body) or (body.count(";") >= 3 and body.count("{") >= 2):
            ci, cl = lex_cpp_ids(body, int(lines[k]))
            cuda.append((k, ci, cl))
            raw[k] = _DROP
            continue
        if s.lstrip("rRbBuUfF")[:3] in ('"""', "'''"):
            p = int(last_sig[k - 1]) if k else -1
            if p < 0 or (toks[p] == ":" and nl_cum[k - 1] - nl_cum[p] > 0):
                raw[k] = _DROP
                continue
        raw[k] = s_id
    keep = raw >= 0
    if not cuda:
        return raw[keep], lines[keep]
    ids_parts, line_parts, prev = [], [], 0
    for k, ci, cl in cuda:
        m = keep[prev:k]
        ids_parts += [raw[prev:k][m], ci]
        line_parts += [lines[prev:k][m], cl]
        prev = k + 1
    m = keep[prev:]
    ids_parts.append(raw[prev:][m])
    line_parts.append(lines[prev:][m])
    return np.concatenate(ids_parts), np.concatenate(line_parts)


#: distinct raw tokens the lexers' caches hold at most (numbers are kept tokens, and raw identifiers
#: are cached too: over an archive's solutions the caches grew with the archive); past it they are
#: emptied and refill (a token's id is its text's crc32 and length: the same after a refill)
TOKEN_CACHE_MAX = 200_000


def _bound_token_caches() -> None:
    if len(_PY_IDS) + len(_CPP_IDS) + len(_TOKEN_ID) > TOKEN_CACHE_MAX:
        _PY_IDS.clear()
        _CPP_IDS.clear()
        _TOKEN_ID.clear()
        _ID_TEXT.clear()


def lex_file_ids(name: str, text: str) -> tuple[np.ndarray, np.ndarray]:
    _bound_token_caches()
    return lex_cpp_ids(text) if name.endswith(SIDE_EXT) else lex_python_ids(text)


def _texts(ids: np.ndarray) -> list[str]:
    return [_ID_TEXT[i] for i in ids.tolist()]


def _lex_python(src: str) -> tuple[list[str], list[int]]:
    """Normalized token texts and their line numbers (parallel lists) of a Python file."""
    ids, lines = lex_python_ids(src)
    return _texts(ids), lines.tolist()


def lex_file(name: str, text: str) -> tuple[list[str], list[int]]:
    ids, lines = lex_file_ids(name, text)
    return _texts(ids), lines.tolist()


def tokenize_python(src: str) -> list[Tok]:
    """Normalized tokens of a Python file, CUDA/C++ held in its strings lexed as C++ in place."""
    return [Tok(t, ln) for t, ln in zip(*_lex_python(src))]


def tokenize_cpp(src: str) -> list[Tok]:
    ids, lines = lex_cpp_ids(src)
    return [Tok(t, ln) for t, ln in zip(_texts(ids), lines.tolist())]


def tokenize_file(name: str, text: str) -> list[Tok]:
    return [Tok(t, ln) for t, ln in zip(*lex_file(name, text))]


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


# ------------------------------------------------------------------------------ shingles

def _unique(x: np.ndarray) -> np.ndarray:
    """Sorted unique values (sort + neighbour mask: several times faster than np.unique's hash
    path in numpy 2 on these arrays)."""
    s = np.sort(x)
    if len(s) < 2:
        return s
    m = np.empty(len(s), bool)
    m[0] = True
    np.not_equal(s[1:], s[:-1], out=m[1:])
    return s[m]


def _unique_inverse(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(x)
    s = x[order]
    m = np.empty(len(s), bool)
    if len(s):
        m[0] = True
        np.not_equal(s[1:], s[:-1], out=m[1:])
    inv = np.empty(len(s), np.int64)
    inv[order] = np.cumsum(m) - 1
    return s[m], inv


def _unique_counts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.sort(x)
    if not len(s):
        return s, np.zeros(0, np.int64)
    m = np.empty(len(s), bool)
    m[0] = True
    np.not_equal(s[1:], s[:-1], out=m[1:])
    idx = np.flatnonzero(m)
    return s[idx], np.diff(np.append(idx, len(s)))


_MULT = np.uint64(0x9E3779B97F4A7C15)


_SH_POW: list[np.ndarray] = [np.ones(1, np.uint64), np.ones(1, np.uint64)]   # powers of _MULT and its inverse


def _sh_powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(_SH_POW[0]) < n:
        m = max(n, 2 * len(_SH_POW[0]), 4096)
        inv = np.uint64(pow(int(_MULT), -1, 1 << 64))
        with np.errstate(over="ignore"):
            _SH_POW[0] = np.cumprod(np.concatenate(([np.uint64(1)], np.full(m - 1, _MULT, np.uint64))), dtype=np.uint64)
            _SH_POW[1] = np.cumprod(np.concatenate(([np.uint64(1)], np.full(m - 1, inv, np.uint64))), dtype=np.uint64)
    return _SH_POW[0], _SH_POW[1]


def shingle_hashes(token_ids: np.ndarray, k: int | None = None) -> np.ndarray:
    """32-bit hashes of every k-token window: the polynomial sum(ids[i+j] * MULT^(k-1-j)) mod 2^64
    (computed from prefix sums: window = (P[i+k] - P[i]) * MULT^-(n-i-k), P[t] = sum over u < t of
    ids[u] * MULT^(n-1-u)), then a 64-bit finalizer, truncated to 32 bits."""
    k = k or K
    n = len(token_ids)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    if n < k:
        k = n
    pw, inv = _sh_powers(n + 1)
    with np.errstate(over="ignore"):
        w = token_ids.astype(np.uint64) * pw[n - 1::-1] if n > 1 else token_ids.astype(np.uint64)
        pre = np.empty(n + 1, np.uint64)
        pre[0] = 0
        np.cumsum(w, out=pre[1:])
        m = n - k + 1
        h = (pre[k:] - pre[:m]) * inv[n - k::-1][:m] if n - k > 0 else (pre[k:] - pre[:m])
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
    return h & _MAX_HASH


# Normalized lines (for aligned spans): a line is the sequence of its token ids, compared through a
# 64-bit polynomial key; lines of fewer than 2 tokens and the trivial ones are dropped.
_TRIVIAL = {"", ")", "]", "}", "(", "{", "};", "pass", "else :", "V )", "return V", "return", "V ,", "S ,"}
_LMULT = np.uint64(0x100000001B3)
_LMULT_INV = np.uint64(pow(0x100000001B3, -1, 1 << 64))
_POW: list[np.ndarray] = [np.ones(1, np.uint64), np.ones(1, np.uint64)]   # powers of _LMULT, _LMULT_INV


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(_POW[0]) < n:
        m = max(n, 2 * len(_POW[0]))
        with np.errstate(over="ignore"):
            _POW[0] = np.cumprod(np.r_[np.uint64(1), np.full(m - 1, _LMULT, np.uint64)], dtype=np.uint64)
            _POW[1] = np.cumprod(np.r_[np.uint64(1), np.full(m - 1, _LMULT_INV, np.uint64)], dtype=np.uint64)
    return _POW[0][:n], _POW[1][:n]


def _line_keys(ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Position-independent 64-bit key of each line (ids[starts[i]:starts[i+1]])."""
    n = len(ids)
    p, pinv = _powers(n)
    with np.errstate(over="ignore"):
        w = ids.astype(np.uint64) * p
        keys = np.add.reduceat(w, starts) * pinv[starts]
        keys ^= np.diff(np.r_[starts, n]).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return keys


@lru_cache(maxsize=1)
def _trivial_keys() -> np.ndarray:
    ks = []
    for t in _TRIVIAL:
        parts = t.split(" ") if t else []
        if parts:
            ks.append(_line_keys(np.array([_tid(x) for x in parts], np.int64), np.zeros(1, np.int64))[0])
    return _unique(np.array(ks, dtype=np.uint64))


@dataclass
class FileToks:
    """One file's normalized tokens: ids and lines (parallel arrays), and its normalized lines."""

    ids: np.ndarray
    lines: np.ndarray
    _norm: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    _lines: Any = None    # _Lines, built on the first span search

    def __len__(self) -> int:
        return len(self.ids)

    def norm_lines(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(keys uint64, line numbers, token counts) of the non-trivial lines, in file order."""
        if self._norm is None:
            n = len(self.ids)
            if n == 0:
                self._norm = (np.zeros(0, np.uint64), _EMPTY_I, _EMPTY_I)
            else:
                starts = np.r_[0, np.flatnonzero(np.diff(self.lines)) + 1]
                counts = np.diff(np.r_[starts, n])
                keys = _line_keys(self.ids, starts)
                ok = (counts >= 2) & ~np.isin(keys, _trivial_keys())
                self._norm = (keys[ok], self.lines[starts][ok], counts[ok])
        return self._norm


@dataclass
class Doc:
    """One solution as the similarity analysis sees it."""

    doc_id: str                      # run_id, or 'ext:<path>'
    problem: str | None
    files: dict[str, str]            # name -> text (solution.py first, then sidecars)
    sha256: str = ""
    tokens: dict[str, FileToks] = field(default_factory=dict)   # per file (kept for aligned spans)
    shingles: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))  # unique, sorted
    distinct: np.ndarray | None = None   # after discount


def build_doc(doc_id: str, files: dict[str, str], problem: str | None = None, keep_where: bool = True) -> Doc:
    """Tokenize and shingle a solution's files (`keep_where`: keep the tokens for aligned spans)."""
    h = hashlib.sha256()
    for name in files:
        h.update(files[name].encode("utf-8", "replace"))
    d = Doc(doc_id, problem, files, h.hexdigest())
    parts = []
    for name, text in files.items():
        ids, lines = lex_file_ids(name, text)
        if keep_where:
            d.tokens[name] = FileToks(ids, lines)
        if len(ids):
            parts.append(shingle_hashes(ids))
    d.shingles = _unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)
    return d


def shingle_set_of_text(files: dict[str, str]) -> np.ndarray:
    return build_doc("_", files, keep_where=False).shingles


# ------------------------------------------------------------------------------ spans

class _Lines:
    """A file's normalized lines as the span search uses them (computed once per file)."""

    __slots__ = ("keys", "nums", "counts", "order", "sorted", "prefix", "prefix_list", "nums_list")

    def __init__(self, keys: np.ndarray, nums: np.ndarray, counts: np.ndarray):
        self.keys, self.nums, self.counts = keys, nums, counts
        self.nums_list = nums.tolist()
        self.order = np.argsort(keys, kind="stable")
        self.sorted = keys[self.order]
        self.prefix = np.concatenate(([0], np.cumsum(counts)))
        self.prefix_list = self.prefix.tolist()


def _lines_of_toks(toks: FileToks | list[Tok]) -> _Lines:
    if not isinstance(toks, FileToks):
        toks = FileToks(np.array([_tid(t.text) for t in toks], np.int64), np.array([t.line for t in toks], np.int64))
    if toks._lines is None:
        toks._lines = _Lines(*toks.norm_lines())
    return toks._lines


def _file_pair_spans(A: _Lines, B: _Lines, min_lines: int, min_tokens: int,
                     skip: np.ndarray | None) -> list[tuple[int, int, int, int]]:
    """Greedy tiling of two files' normalized lines: (tokens, i, j, length) of maximal runs of equal
    lines, longest (in tokens) first, non-overlapping in either file, in any order.  Runs start where
    the previous lines differ (or are skip lines) and not on a skip line; skip lines do not count
    towards a run's tokens.  Vectorized: every (i, j) with equal lines, grouped by diagonal."""
    la, lb = A.keys, B.keys
    n_a, n_b = len(la), len(lb)
    if not n_a or not n_b:
        return []
    lo = np.searchsorted(B.sorted, la, "left")
    cnt = np.searchsorted(B.sorted, la, "right") - lo
    tot = int(cnt.sum())
    if not tot:
        return []
    ii = np.repeat(np.arange(n_a), cnt)
    first = np.cumsum(cnt) - cnt
    jj = B.order[np.repeat(lo - first, cnt) + np.arange(tot)]
    # maximal diagonal segments of equal lines: each (i, j) runs to the end of its segment
    d = jj - ii
    order = np.argsort(d, kind="stable")     # by (diagonal, i): ii is already ascending
    ds, is_ = d[order], ii[order]
    brk = np.empty(tot, bool)
    brk[0] = True
    np.not_equal(ds[1:], ds[:-1], out=brk[1:])
    brk[1:] |= is_[1:] != is_[:-1] + 1
    starts = np.flatnonzero(brk)
    last = np.empty(len(starts), np.int64)
    last[:-1] = starts[1:] - 1
    last[-1] = tot - 1
    run_len = np.empty(tot, np.int64)
    run_len[order] = np.repeat(is_[last], np.diff(np.append(starts, tot))) - is_ + 1
    if skip is not None and len(skip):
        skip_a = np.isin(la, skip)
        counted = np.concatenate(([0], np.cumsum(np.where(skip_a, 0, A.counts))))
        pm = (ii > 0) & (jj > 0)
        pi, pj = ii[pm] - 1, jj[pm] - 1
        prev = np.zeros(tot, bool)
        prev[pm] = (la[pi] == lb[pj]) & ~skip_a[pi]
        ok = ~prev & ~skip_a[ii]
    else:
        counted = A.prefix
        # a run starts where (i-1, j-1) is not an equal pair: the first element of its diagonal segment
        ok = np.empty(tot, bool)
        ok[order] = brk
    tok = counted[ii + run_len] - counted[ii]
    ok &= (run_len >= min_lines) & (tok >= min_tokens)
    if not ok.any():
        return []
    ti, ii, jj, run_len = tok[ok], ii[ok], jj[ok], run_len[ok]
    srt = np.lexsort((jj, ii, -ti))
    used_a = bytearray(n_a)
    used_b = bytearray(n_b)
    call = A.prefix_list
    out = []
    for t, i, j, L in zip(ti[srt].tolist(), ii[srt].tolist(), jj[srt].tolist(), run_len[srt].tolist()):
        xa = used_a.find(1, i, i + L)
        xb = used_b.find(1, j, j + L)
        if xa >= 0 or xb >= 0:               # trim to the free part at the start
            x = min(xa - i if xa >= 0 else L, xb - j if xb >= 0 else L)
            if x < min_lines:
                continue
            L = x
            t = call[i + L] - call[i]
            if t < min_tokens:
                continue
        used_a[i:i + L] = b"\x01" * L
        used_b[j:j + L] = b"\x01" * L
        out.append((t, i, j, L))
    return out


def _tokens_of(d: Doc) -> dict[str, FileToks]:
    """A document's tokens per file: kept ones, else lexed again from its text (a document built
    without them, `keep_where=False`, as the archive's similarity builds every run's: the tokens of
    every solution held at once grew with the archive)."""
    if d.tokens or not d.files:
        return d.tokens
    return {name: FileToks(*lex_file_ids(name, text)) for name, text in d.files.items()}


def aligned_spans(a: Doc, b: Doc, min_lines: int = 3, min_tokens: int = 20,
                  skip_lines: set[str] | None = None) -> list[dict[str, Any]]:
    """Greedy tiling of normalized token lines: maximal runs of identical normalized lines in both
    documents, longest first, non-overlapping, in any order.  Lines in `skip_lines` (scaffolding,
    normalized texts such as "V = V ( V )") do not start or count towards a span."""
    skip = None
    if skip_lines:
        skip = np.array([_line_keys(np.array([_tid(x) for x in s.split(" ")], np.int64), np.zeros(1, np.int64))[0]
                         for s in skip_lines if s], dtype=np.uint64)
    spans: list[dict[str, Any]] = []
    b_toks = _tokens_of(b)
    for fa, ta in _tokens_of(a).items():
        A = _lines_of_toks(ta)
        for fb, tb in b_toks.items():
            B = _lines_of_toks(tb)
            na, nb = A.nums_list, B.nums_list
            for tok, i, j, L in _file_pair_spans(A, B, min_lines, min_tokens, skip):
                spans.append({"a_file": fa, "a_start": na[i], "a_end": na[i + L - 1],
                              "b_file": fb, "b_start": nb[j], "b_end": nb[j + L - 1], "tokens": tok})
    spans.sort(key=lambda s: -s["tokens"])
    return spans


def span_summary(spans: Sequence[dict[str, Any]], max_spans: int = 3) -> str:
    parts = []
    for s in list(spans)[:max_spans]:
        parts.append(f"lines {s['a_start']}-{s['a_end']} of {s['a_file']} to {s['b_start']}-{s['b_end']} of {s['b_file']}")
    return "; ".join(parts)
