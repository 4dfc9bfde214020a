"""Forbidden ops resolved through aliases (and Python containers told from tensors), and library
calls doing the main operation (per-call evidence for work accounting).
"""

from __future__ import annotations

import ast
import re

from . import problems as P
from .base import Hit
from .model import FORWARD_NAMES, Module, _deco_func, _getattr_call, unparse


# ---------------------------------------------------------------------- forbidden ops and libraries
def forbidden_uses(mod: Module, problem: str | None, bench: str | None) -> dict[str, list[ast.AST]]:
    """literal -> AST nodes that really use it."""
    uses: dict[str, list[ast.AST]] = {}
    targets = P.forbidden_targets(problem)
    if "getattr" not in mod.text and "import_module" not in mod.text and "__import__" not in mod.text:
        targets = [t for t in targets if t.value.rsplit(".", 1)[-1] in mod.text]
    local_defs = set(mod.by_name)
    if not targets:
        targets = []
    alias_roots = {v.split(".")[0] for v in mod.aliases.values()}
    alias_vals = set(mod.aliases.values())
    # which targets a bare name or an attribute chain hits is decided by its resolved name alone
    # (a Name's by its id; an Attribute's by its qualname, when no target is a method): one answer per name
    by_name: dict[str, list[str]] = {}
    by_qual: dict[str, list[str]] = {}
    any_method = any(t.kind == "method" for t in targets)

    def target_hit(t, n: ast.AST, q: str) -> bool:
        if t.kind == "qualname":
            hit = q == t.value or q.startswith(t.value + ".")
            if not hit and t.value.startswith("torch.nn.functional.") and isinstance(n, ast.Attribute):
                hit = q.endswith(".functional." + t.value.rsplit(".", 1)[1])
            return hit
        if t.kind == "name":
            if t.value in q.split("."):
                return not (isinstance(n, ast.Name) and n.id in local_defs and n.id not in mod.aliases)
            return False
        if t.kind == "method" and isinstance(n, ast.Attribute) and n.attr == t.value:
            parent = mod.parent.get(n)
            base_q = mod.qn(n.value) or ""
            base_is_module = base_q.split(".")[0] in alias_roots and isinstance(n.value, (ast.Name, ast.Attribute)) and (
                base_q in alias_vals or (isinstance(n.value, ast.Name) and n.value.id in mod.aliases))
            return isinstance(parent, ast.Call) and parent.func is n and (not base_is_module or base_q.startswith("torch")) \
                and not _python_container(mod, n.value)
        return False

    # (mod.of returns the nodes type by type, imports, calls, attributes, names: each group in its own loop)
    for n in (mod.of(ast.Import, ast.ImportFrom, ast.Call) if targets else ()):
        imported: list[str] = []
        q = None
        if isinstance(n, ast.Import):
            imported = [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            if n.level or not n.module:
                continue
            imported = [n.module] + [f"{n.module}.{a.name}" for a in n.names]
        elif isinstance(n, ast.Call):
            if _getattr_call(n):
                q = mod.qn(n) or ""
                s_attr = mod.const_str(n.args[1]) or ""
                for t in targets:
                    if (t.kind == "qualname" and q == t.value) or (t.kind == "method" and s_attr == t.value):
                        uses.setdefault(t.literal, []).append(n)
                continue
            fq = mod.qn(n.func) or ""
            if fq in ("importlib.import_module", "__import__") and n.args:
                s_imp = mod.const_str(n.args[0])
                if s_imp:
                    imported = [s_imp]
            if not imported:
                continue
        else:
            continue
        for t in targets:
            hit = False
            if imported:
                if t.kind == "import":
                    mods = imported[:1] if isinstance(n, ast.ImportFrom) else imported
                    hit = any(m == t.value or m.startswith(t.value + ".") for m in mods)
                elif t.kind == "qualname":
                    hit = any(m == t.value or m.startswith(t.value + ".") for m in imported)
                elif t.kind == "name":
                    hit = any(t.value in m.split(".") for m in imported)
            else:
                hit = target_hit(t, n, q)
            if hit:
                uses.setdefault(t.literal, []).append(n)
    parent_of = mod.parent.get
    for n in (mod.of(ast.Attribute) if targets else ()):
        if not isinstance(n.ctx, ast.Load) or isinstance(parent_of(n), ast.Attribute):
            continue  # only the outermost attribute of a chain
        q = mod.qn(n) or ""
        if not any_method:
            lits = by_qual.get(q)
            if lits is None:
                lits = by_qual[q] = [t.literal for t in targets if target_hit(t, n, q)]
        else:
            lits = [t.literal for t in targets if target_hit(t, n, q)]
        for lit in lits:
            uses.setdefault(lit, []).append(n)
    for n in (mod.of(ast.Name) if targets else ()):
        lits = by_name.get(n.id)
        if lits is None:
            lits = by_name[n.id] = [t.literal for t in targets if target_hit(t, n, mod.qn(n) or "")]
        if lits and isinstance(n.ctx, ast.Load) and not isinstance(parent_of(n), ast.Attribute):
            for lit in lits:
                uses.setdefault(lit, []).append(n)
    # mega: AST import bans (module, submodule or parent)
    for banned in P.import_bans(problem):
        for n in mod.of(ast.Import, ast.ImportFrom):
            mods: list[str] = []
            if isinstance(n, ast.Import):
                mods = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                mods = [n.module]
            for m in mods:
                if m == banned or m.startswith(banned + ".") or banned.startswith(m + "."):
                    uses.setdefault(f"import {banned}", []).append(n)
    return uses


PY_CONTAINER_CALLS = {"list", "sorted", "dict", "set", "tuple", "range", "zip", "enumerate", "map", "filter",
                      "reversed", "tolist", "keys", "values", "items", "split", "copy", "deque"}


def _python_container(mod: Module, e: ast.AST) -> bool:
    """Is `e` a Python list/dict/tuple rather than a tensor (`ts = []; ts.append(t); ts.sort()`)?
    Known from how the name is bound in its function: a display, a comprehension, a container
    builtin or `.tolist()`, or `.append`/`.extend` called on it (tensors have neither)."""
    if not isinstance(e, ast.Name):
        return isinstance(e, (ast.List, ast.ListComp, ast.Dict, ast.Set, ast.Tuple, ast.DictComp, ast.SetComp))
    fi = mod.scope_of(e)
    vals = fi.assigns.get(e.id, []) if fi is not None else ([mod.consts[e.id]] if e.id in mod.consts else [])
    if not vals:
        return False
    def container(v: ast.AST) -> bool:
        if isinstance(v, (ast.List, ast.ListComp, ast.Dict, ast.Set, ast.Tuple, ast.DictComp, ast.SetComp)):
            return True
        if isinstance(v, ast.Call):
            f = v.func
            name = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else "")
            return name in PY_CONTAINER_CALLS
        return False
    if all(container(v) for v in vals):
        return True
    nodes = fi.nodes if fi is not None else []
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend")
               and isinstance(n.func.value, ast.Name) and n.func.value.id == e.id for n in nodes)


def check_forbidden(mod: Module, problem: str | None, bench: str | None) -> list[Hit]:
    hits = []
    for lit, nodes in forbidden_uses(mod, problem, bench).items():
        seen = set()
        for n in nodes:
            if n.lineno in seen:
                continue
            seen.add(n.lineno)
            what = mod.qn(n) if isinstance(n, (ast.Attribute, ast.Name, ast.Call)) else ast.unparse(n)[:60]
            hits.append(mod.hit("FORBIDDEN-OP", n, f"uses forbidden '{lit}' ({what}) for {problem}",
                                data={"forbidden": lit, "resolved": what, "problem": problem,
                                      "import": isinstance(n, (ast.Import, ast.ImportFrom)) or lit.startswith("import ")
                                      or (isinstance(n, ast.Call) and (mod.qn(n.func) or "") in ("importlib.import_module", "__import__"))}))
    return hits


GEMM_OPS = set(P.CORE_LIBRARY_OPS["gemm"]) | set(P.CORE_LIBRARY_OPS["attention"]) | set(P.CORE_LIBRARY_OPS["compile"])
FALLBACK_HINT = re.compile(r"fallback|_ref\b|reference|_torch|naive|slow|eager|check|verify|test|debug|bench", re.I)


# an availability test (`if _ext is None`, `if not HAS_TRITON`), not a lazy initialisation
# (`if self._graph is None: capture`), which is the main path's first call
AVAILABILITY_TEST = re.compile(r"HAS_|_ok\b|available|(ext|lib|kernel|mod|module|_C|ops|triton|cuda|compiled)\w*\s+is None|"
                               r"not \w*(ext|lib|kernel|mod)|fallback|ImportError|_EXT|device\.type|is_cuda", re.I)


def _fallback_context(mod: Module, n: ast.AST) -> str | None:
    """Why `n` sits off the main path (an except handler, a fallback-named function, either arm of a
    branch on an availability test), or None.  Computed once per node (the library rule asks)."""
    memo = mod.__dict__.setdefault("_fallback_memo", {})
    key = id(n)
    if key not in memo:
        memo[key] = _off_path(mod, n, sense=False)
    return memo[key]


def off_main_path(mod: Module, n: ast.AST) -> str | None:
    """`_fallback_context` read with the availability test's sense (the work accounting's question):
    of a branch on an availability test only the arm taken when the kernels are *not* available is off
    the path (both arms where the test's sense cannot be read), and so are the statements after an
    `if <available>: ... return` - the code that runs when the fast path is missing."""
    memo = mod.__dict__.setdefault("_off_main_memo", {})
    key = id(n)
    if key not in memo:
        memo[key] = _off_path(mod, n, sense=True)
    return memo[key]


# the positive form of an availability test (`_ext is not None`), and how to read a test's sense
_AVAILABLE = re.compile(AVAILABILITY_TEST.pattern + r"|(ext|lib|kernel|mod|module|_C|ops|triton|compiled)\w*\s+is not None",
                        re.I)
_POS_TEST = re.compile(r"\bis not None\b|HAS_|available|_ok\b|is_cuda|device\.type\s*==\s*['\"]cuda|_EXT\b")
_NEG_TEST = re.compile(r"^not\b|\bis None\b|fallback|ImportError|_err\b|==\s*['\"]cpu|!=\s*['\"]cuda")


def _polarity(test: str) -> str | None:
    """Which arm of an availability branch is the main path: "pos" (the body: `_ext is not None`,
    `HAS_TRITON`, `x.is_cuda`), "neg" (the else: `_ext is None`, `not HAS_TRITON`), None (cannot tell)."""
    t = test.strip()
    if _NEG_TEST.search(t):
        return "neg"
    if _POS_TEST.search(t):
        return "pos"
    return None


def _after_available_return(p: ast.AST, child: ast.AST) -> ast.If | None:
    """The `if <available>: ... return` (no else) that precedes `child` in its block of `p`, if any."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(p, field, None)
        if isinstance(block, list) and child in block:
            for prev in block[:block.index(child)]:
                if isinstance(prev, ast.If) and not prev.orelse and prev.body \
                        and isinstance(prev.body[-1], (ast.Return, ast.Raise)):
                    t = unparse(prev.test)
                    if _AVAILABLE.search(t) and _polarity(t) == "pos":
                        return prev
            return None
    return None


def _off_path(mod: Module, n: ast.AST, sense: bool) -> str | None:
    p, child = mod.parent.get(n), n
    while p is not None:
        if isinstance(p, ast.ExceptHandler):
            return "except handler"
        if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) and FALLBACK_HINT.search(p.name):
            return f"function {p.name}"
        if isinstance(p, ast.If) and child in p.body + p.orelse:
            t = unparse(p.test)
            if (_AVAILABLE if sense else AVAILABILITY_TEST).search(t):
                pol = _polarity(t) if sense else None
                if pol is None or (pol == "pos" and child in p.orelse) or (pol == "neg" and child in p.body):
                    return f"branch `{t[:50]}`"
        if sense:
            prev = _after_available_return(p, child)
            if prev is not None:
                return f"after `if {unparse(prev.test)[:50]}: return`"
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return None     # the graded path is read per function: an enclosing def's context is not this one's
        child, p = p, mod.parent.get(p)
    return None


VERIFY_HINT = re.compile(r"ref|check|verify|test|debug|bench|selftest", re.I)


def _reached_from_entry(mod: Module) -> set[str]:
    seen: set[str] = set()
    todo = [fi for fi in mod.funcs.values() if fi.node.name in FORWARD_NAMES or fi.node.name == "__init__"]
    while todo:
        fi = todo.pop()
        if fi.qualname in seen:
            continue
        seen.add(fi.qualname)
        for n in fi.of(ast.Call):
            if isinstance(n, ast.Call):
                todo.extend(mod.callees(n, fi))
    return seen


def check_library(mod: Module, problem: str | None) -> list[Hit]:
    hits = []
    reached = _reached_from_entry(mod)
    for n in mod.of(ast.Call, ast.BinOp, ast.FunctionDef, ast.AsyncFunctionDef):
        q = None
        if isinstance(n, ast.Call):
            q = mod.qn(n.func) or ""
            if q not in GEMM_OPS and not (q.startswith("torch.ops.aten.") and q.split(".")[3] in ("mm", "matmul", "bmm", "_scaled_mm", "addmm")):
                if isinstance(n.func, ast.Attribute) and n.func.attr in ("mm", "matmul", "bmm", "addmm") and not (
                        isinstance(n.func.value, ast.Name) and n.func.value.id in mod.aliases):
                    q = "Tensor." + n.func.attr
                else:
                    continue
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            q = "@"
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in n.decorator_list:
                dq = mod.qn(_deco_func(d)) or ""
                if dq in P.CORE_LIBRARY_OPS["compile"]:
                    hits.append(mod.hit("LIBRARY-DOES-WORK", d, f"{n.name} is wrapped by {dq}", data={"call": dq, "fallback": None}))
            continue
        else:
            continue
        scope = mod.scope_of(n)
        if scope is not None and scope.is_triton:
            continue
        if mod.in_main(n):
            continue
        if scope is not None and VERIFY_HINT.search(scope.node.name) and scope.qualname not in reached:
            continue  # a self-check helper the entry points never call
        fb = _fallback_context(mod, n)
        where = scope.qualname if scope else "module scope"
        hits.append(mod.hit("LIBRARY-DOES-WORK", n,
                            f"{q} in {where}{' (fallback: ' + fb + ')' if fb else ''}",
                            severity="low" if fb else "medium", data={"call": q, "fallback": fb, "function": where}))
    return hits
