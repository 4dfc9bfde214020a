"""The static lint's speed-ups must not change what it computes: the literal-head regex scans give
re's own matches, the model's walk gives ast.walk's nodes in ast.walk's order, FuncInfo.of gives
the isinstance filter of a function's nodes, and a lint leaves no reference cycles behind and the
garbage collector as it found it."""

from __future__ import annotations

import ast
import gc
import random
import re
from pathlib import Path

import pytest

from forensics.analyze.static import lint_source
from forensics.analyze.static.model import Module, walk
from forensics.text import rx as RX

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "lint" / "solutions"

PATTERNS = [
    (r"\bif\s*\(", ("if",)),
    (r"\bfor\s*\(\s*(\w*)", ("for",)),
    (r"\batomic(Add|Sub)\s*\(\s*&?\s*\(?\s*([A-Za-z_]\w*)", ("atomic",)),
    (r"\b(cublas\w*|at::mm|at::(?:mm|x))\s*\(", ("cublas", "at::")),
    (r"(?<=x)if|for\b", ("if", "for")),
    (r"^\s*for", ("for",)),     # '^' never matches at pos > 0 in either
]


@pytest.mark.parametrize("pattern,heads", PATTERNS)
def test_rx_scans_equal_re(pattern, heads):
    rng = random.Random(17)
    alpha = ["if", "for", " ", "(", ")", "x", "_", "atomicAdd", "a", "\n", ";", "=", "at::", "mm", "cublasGemm", "é", "1", "&"]
    rx = re.compile(pattern)
    for _ in range(3000):
        t = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 40)))
        pos = rng.randint(0, len(t))
        end = rng.choice([None, rng.randint(0, len(t) + 2)])
        want = [(m.span(), m.groups()) for m in (rx.finditer(t, pos) if end is None else rx.finditer(t, pos, end))]
        got = [(m.span(), m.groups()) for m in RX.finditer(rx, t, heads, pos, end)]
        assert got == want, (t, pos, end)
        s1 = rx.search(t, pos) if end is None else rx.search(t, pos, end)
        s2 = RX.search(rx, t, heads, pos, end)
        assert (s1 and (s1.span(), s1.groups())) == (s2 and (s2.span(), s2.groups()))


def _corpus_trees():
    for p in sorted(CORPUS.glob("*.py")):
        text = p.read_text(encoding="utf-8", errors="replace")
        try:
            yield text, ast.parse(text)
        except (SyntaxError, ValueError):
            continue


def test_walk_is_ast_walk():
    n = 0
    for _text, tree in _corpus_trees():
        for node in ast.walk(tree):
            got = walk(node)
            assert got == walk(node)          # cached: same answer the second time
            want = tuple(ast.walk(node))
            assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
            n += 1
    assert n > 1000


def test_funcinfo_of_is_the_isinstance_filter():
    kinds = [(ast.Call,), (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr), (ast.If, ast.While, ast.IfExp),
             (ast.Return,), (ast.Subscript, ast.Call, ast.Compare), (ast.Global, ast.Nonlocal), (ast.Match,)]
    for text, tree in _corpus_trees():
        mod = Module(tree, text)
        for fi in mod.funcs.values():
            for types in kinds:
                want = [x for x in fi.nodes if isinstance(x, types)]
                got = fi.of(*types)
                assert len(got) == len(want) and all(a is b for a, b in zip(got, want))


def test_lint_leaves_no_cycles_and_restores_gc():
    sources = [p.read_bytes() for p in sorted(CORPUS.glob("*.py"))[:40]]
    gc.collect()
    for src in sources:
        lint_source(src, "solution.py", "01_fp8_gemm")
    assert gc.isenabled()
    gc.disable()
    try:
        assert gc.collect() == 0          # every lint's objects were freed by reference counting
        lint_source(sources[0], "solution.py", "01_fp8_gemm")
        assert not gc.isenabled()        # a caller's choice to keep the collector off is kept
    finally:
        gc.enable()
