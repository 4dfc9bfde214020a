"""Oracle for tests: the sequential regex lexer and the greedy line tiling of
`forensics.analyze.similarity` as they were before the vectorized rewrite (commit bc5ac0e), kept
verbatim so the fast versions can be checked token for token and span for span."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from forensics.analyze.similarity import CPP_KEEP, PY_KEEP


@dataclass(slots=True)
class Tok:
    text: str
    line: int


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


def aligned_spans(a: Any, b: Any, min_lines: int = 3, min_tokens: int = 20,
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




def tokens(name: str, text: str) -> list[Tok]:
    """Old `tokenize_file`: C/C++ sidecars lexed as C++, everything else as Python."""
    texts: list[str] = []
    lines: list[int] = []
    if name.endswith((".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp")):
        _lex_cpp(text, 1, texts, lines)
    else:
        texts, lines = _lex_python(text)
    return [Tok(t, ln) for t, ln in zip(texts, lines)]


class OldDoc:
    def __init__(self, files: dict[str, str]):
        self.tokens = {n: tokens(n, t) for n, t in files.items()}
