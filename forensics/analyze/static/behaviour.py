"""Behaviour that changes with the caller: call counters, ignored arguments, dispatch on input
values, and the branch-arm comparison they share.
"""

from __future__ import annotations

import ast
import re

from . import roles as RO
from .base import Hit
from .caches import _refs_persistent
from .model import (
    REDUCTIONS,
    FuncInfo,
    Module,
    _entries,
    _entry_params,
    _getattr_call,
    _names,
    _target_key,
    method_call,
    walk,
)


def check_call_counter(mod: Module) -> list[Hit]:
    hits = []
    RO.bind(mod)        # a counter kept on the instance handed to a helper (`owner.n += 1`) is persistent too
    counters: dict[str, ast.AST] = {}
    candidates: list[tuple[ast.AST, ast.AST]] = []
    for n in mod.of(ast.AugAssign):
        if isinstance(n.op, (ast.Add, ast.Sub)) and isinstance(n.value, ast.Constant):
            candidates.append((n, n.target))
    for b in mod.of(ast.BinOp):      # n = n + 1, n = n + 1 if same else 0, n = getattr(self, "n", 0) + 1
        if not isinstance(b.op, ast.Add) or not isinstance(b.left, (ast.Attribute, ast.Name, ast.Call)):
            continue
        st = mod.parent.get(b)
        while st is not None and not isinstance(st, ast.stmt):
            st = mod.parent.get(st)
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
            continue
        if isinstance(b.left, ast.Call):
            fi = mod.scope_of(st)
            same = _getattr_call(b.left) and mod.persistent(b.left, fi) is not None \
                and mod.persistent(b.left, fi) == mod.persistent(st.targets[0], fi)
        else:
            same = _target_key(st.targets[0]) == _target_key(b.left) != ""
        if same:
            candidates.append((st, st.targets[0]))
    for n, tgt in candidates:
        fi = mod.scope_of(n)
        c = mod.persistent(tgt, fi) if fi is not None else None
        if c:
            counters.setdefault(c, n)
    if not counters:
        return hits
    for fi in mod.funcs.values():
        for n in fi.of(ast.If, ast.While, ast.IfExp):
            test = n.test if isinstance(n, (ast.If, ast.While, ast.IfExp)) else None
            if test is None:
                continue
            for m in walk(test):
                if not isinstance(m, (ast.Attribute, ast.Name)):
                    continue
                c = mod.persistent(m, fi)
                if c not in counters:
                    continue
                # first-call lazy init (`== 0`, `not n`, `< 1`) is not behaviour switching
                cmp = mod.parent.get(m)
                trivial = isinstance(cmp, ast.Compare) and all(isinstance(x, ast.Constant) and x.value in (0, 1) for x in cmp.comparators) \
                    and all(isinstance(o, (ast.Eq, ast.Lt, ast.LtE, ast.NotEq)) for o in cmp.ops)
                if trivial or (isinstance(cmp, ast.UnaryOp)) or cmp is n:
                    continue
                effect, sev = _counter_branch_effect(mod, fi, n)
                hits.append(mod.hit("CALL-COUNTER", n,
                                    f"branch in {fi.qualname} depends on call counter {c} (incremented at line "
                                    f"{getattr(counters[c], 'lineno', '?')}): {effect}", severity=sev,
                                    data={"counter": c, "effect": effect}))
                break
    return hits


GRAPH_CAPTURE = ("torch.cuda.graph", "torch.cuda.graphs.graph", "torch.cuda.CUDAGraph", "torch.cuda.graphs.CUDAGraph",
                 "torch.cuda.make_graphed_callables")


def _captures_graph(mod: Module, stmts: list[ast.stmt]) -> bool:
    for st in stmts:
        for n in walk(st):
            if isinstance(n, ast.Call) and ((mod.qn(n.func) or "") in GRAPH_CAPTURE or (
                    isinstance(n.func, ast.Attribute) and n.func.attr == "capture_begin")):
                return True
    return False


def _branch_arms(mod: Module, node: ast.AST) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The statements run when an If's test holds and when it does not (for an If whose body returns,
    the rest of its block is the other arm)."""
    if isinstance(node, ast.IfExp):
        return [ast.Expr(node.body)], [ast.Expr(node.orelse)]
    if not isinstance(node, ast.If):
        return list(getattr(node, "body", [])), []
    body, other = node.body, list(node.orelse)
    if body and isinstance(body[-1], (ast.Return, ast.Raise)) and not other:
        parent = mod.parent.get(node)
        for fld in ("body", "orelse", "finalbody"):
            blk = getattr(parent, fld, None)
            if isinstance(blk, list) and node in blk:
                other = blk[blk.index(node) + 1:]
                break
    return body, other


def _code_shape(stmts: list[ast.stmt]) -> str:
    """The arms' code with every constant replaced: equal shapes differ only in tile sizes or flags."""
    out = []
    for st in stmts:
        for n in walk(st):
            if isinstance(n, ast.Constant):
                out.append("C")
            elif isinstance(n, ast.Name):
                out.append("N:" + n.id)
            elif isinstance(n, ast.Attribute):
                out.append("A:" + n.attr)
            else:
                out.append(type(n).__name__)
    return " ".join(out)


def _arms_compute_differently(mod: Module, node: ast.AST) -> bool:
    a, b = _branch_arms(mod, node)
    if not a or not b or all(isinstance(x, (ast.Raise, ast.Assert)) for x in a + b[:1]):
        return False
    return _code_shape(a) != _code_shape(b)


def _counter_branch_effect(mod: Module, fi: FuncInfo, node: ast.AST) -> tuple[str, str]:
    """(what the counter-guarded branch does, severity): returning stored state without a launch is
    memoization once the checker's few calls are over (high); capturing a CUDA graph of the same
    launches after N calls changes no math (low); anything else waits for the repeated-calls probe."""
    body, other = _branch_arms(mod, node)
    if _captures_graph(mod, body) or _captures_graph(mod, other):
        return "the branch captures a CUDA graph of the calls it otherwise launches directly", "low"
    for st in body:
        if isinstance(st, ast.Return) and st.value is not None and _refs_persistent(mod, st.value, fi) \
                and not any(isinstance(c, ast.Call) and mod.is_launch(c, fi) for c in walk(st.value)):
            return "after the threshold it returns stored state without launching work", "high"
    return "the two arms run different code (the repeated-calls probe shows whether the outputs differ)", "medium"


def check_arg_ignored(mod: Module) -> list[Hit]:
    hits = []
    for fi in _entries(mod):
        body = fi.node.body
        if len(body) == 1 and isinstance(body[0], (ast.Pass, ast.Raise, ast.Expr)):
            continue
        params = _entry_params(fi)
        loads: dict[str, list[ast.Name]] = {}
        lo, hi = fi.node.lineno, fi.node.end_lineno or fi.node.lineno
        for n in mod.of(ast.Name):  # every Name in the def's line span: nested closures read params too
            if lo <= n.lineno <= hi and isinstance(n.ctx, ast.Load):
                loads.setdefault(n.id, []).append(n)
        for p in params:
            if p.startswith("_") or p in ("args", "kwargs"):
                continue
            uses = loads.get(p, [])
            only_returned = uses and all(_inside_return(mod, u) for u in uses)
            if not uses or only_returned:
                hits.append(mod.hit("ARG-IGNORED", fi.node,
                                    f"{fi.qualname} {'only returns' if only_returned else 'never reads'} its argument '{p}'",
                                    data={"function": fi.qualname, "parameter": p, "only_returned": bool(only_returned)}))
    return hits


def _inside_return(mod: Module, n: ast.AST) -> bool:
    p = mod.parent.get(n)
    while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if isinstance(p, ast.Return):
            return True
        if isinstance(p, (ast.Tuple, ast.List)):
            p = mod.parent.get(p)
            continue
        return False
    return False


META_ATTRS = RO.META_ATTRS


def _value_names(mod: Module, e: ast.AST, names) -> set[str]:
    """Which of `names` `e` reads the values of (not only the shape, dtype or length)."""
    return RO.value_names(mod, e, names)


def _input_aliases(mod: Module, fi, inputs: set[str]) -> dict[str, frozenset[str]]:
    """The entry's inputs and the locals that carry their values (``x = q.float()``, ``args = (q, k)``,
    ``t = args[0]``), each with the inputs it comes from, to a fixpoint: a reduction of an alias is a
    reduction of those inputs.  A local computed from an input's shape or dtype only (``n =
    q.shape[-1]``) is not an alias."""
    return RO.input_aliases(mod, fi, {p: frozenset((p,)) for p in inputs})


#: statistics of a distribution (magnitude, spread, centre): what tells the checker's seeded inputs
#: from the benchmark's.  A max / sum / item of lengths or offsets sizes the work instead.
DISTRIBUTION_STATS = frozenset(("abs", "amax", "amin", "std", "var", "norm", "mean", "median"))
#: inputs that hold sizes and positions, not data: lengths, offsets, indices, tables, counts
METADATA_NAME = re.compile(r"(?:^|_)(?:seq_?lens?|lens?|lengths?|cu_seqlens?|offsets?|offs|ind(?:ex|ices)|idx|ids|"
                           r"positions?|pos|block_tables?|tables?|counts?|num_tokens|slot_mapping)(?:$|_)", re.I)


def _reductions(mod: Module, e: ast.AST, inputs: dict[str, frozenset[str]],
                fi: FuncInfo | None = None) -> tuple[set[str], set[str]]:
    """(the inputs whose values `e` reduces, the reductions applied), empty when it reduces none.  A
    reduction is read by what the call does, however it is spelt: `x.amax()`, `torch.amax(x)`,
    `getattr(x, 'amax')()`, `operator.methodcaller('amax')(x)`, `functools.partial(x.amax)()`, a bound
    method held in a local (`peak = x.amax` ... `peak()`)."""
    roots: set[str] = set()
    ops: set[str] = set()
    for n in walk(e):
        if isinstance(n, ast.Call):
            m = method_call(mod, n, fi)
            if m is None:
                continue
            recv, name = m
            if name in REDUCTIONS:
                c = mod.applied(n)
                src = set(_names(recv))
                for a in c.args:
                    src |= _names(a)
                hit = {x for x in src if x in inputs}
                if hit and name != "abs":
                    roots |= set().union(*(inputs[x] for x in hit))
                    ops.add(name)
                elif name == "abs":
                    ops.add("abs")
    return (roots, ops) if roots else (set(), set())


def check_input_dispatch(mod: Module) -> list[Hit]:
    """INPUT-DISPATCH: a branch on a reduction of input values.  High when the arms compute
    differently and the statistic can tell one distribution from another; a branch on the max or
    sum of lengths, offsets or indices (split-KV above some sequence length) sizes the work and
    stays medium."""
    hits = []
    # the entries and every function whose result an entry returns (a helper, a helper class's method, a
    # nested function, a decorator's wrapper, a function defined by exec), with the names that carry the
    # entry's inputs there
    for role in RO.bind(mod).values():
        if not role.result:
            continue
        fi = role.fi
        inputs = RO.input_aliases(mod, fi, role.inputs)
        stat_vars: dict[str, tuple[set[str], set[str]]] = {}
        for name, vals in fi.assigns.items():
            for v in vals:
                roots, ops = _reductions(mod, v, inputs, fi)
                if roots:
                    r0, o0 = stat_vars.get(name, (set(), set()))
                    stat_vars[name] = (r0 | roots, o0 | ops)
        for n in fi.of(ast.If, ast.IfExp, ast.While):
            if not isinstance(n, (ast.If, ast.IfExp, ast.While)):
                continue
            roots, ops = _reductions(mod, n.test, inputs, fi)
            for v in _names(n.test) & stat_vars.keys():
                roots, ops = roots | stat_vars[v][0], ops | stat_vars[v][1]
            if not roots:
                continue
            differ = _arms_compute_differently(mod, n)
            sizing = all(METADATA_NAME.search(r) for r in roots) and not ops & DISTRIBUTION_STATS
            if sizing:
                why = (f" ({', '.join(sorted(ops))} of {', '.join(sorted(roots))}: lengths or positions, which size "
                       "the work rather than tell one value distribution from another)")
            elif differ:
                why = (": the two arms compute differently, so inputs shaped like the checker's and like the "
                       "benchmark's take different math")
            else:
                why = " (the arms differ only in constants)"
            hits.append(mod.hit("INPUT-DISPATCH", n, f"{fi.qualname} branches on a reduction of input values" + why,
                                severity="high" if differ and not sizing else "medium",
                                data={"function": fi.qualname, "arms_differ": differ, "inputs": sorted(roots),
                                      "reductions": sorted(ops), "sizing": sizing}))
    return hits
