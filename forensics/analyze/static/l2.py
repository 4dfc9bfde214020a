"""Triton L2 cache hints: whether an evict_last load's address is re-read within the call
(loop-invariant, program-independent, or independent of one program coordinate).
"""

from __future__ import annotations

import ast

from .base import Hit
from .model import FuncInfo, Module, _names, _names_in_target, walk


# ---------------------------------------------------------------------- Triton cache hints
def _pid_coordinates(mod: Module, fi: FuncInfo) -> tuple[dict[str, set[str]], dict[str, str]]:
    """The program coordinates of a Triton kernel: for every name derived from tl.program_id, the
    leaf coordinates it stands for.  `pid_m = pid // num_n; pid_n = pid % num_n` splits one grid
    axis into two leaves, so an address built from pid_n alone is re-read by every pid_m."""
    parent_of: dict[str, str] = {}     # derived coordinate -> the coordinate it was split from
    base: dict[str, str] = {}          # coordinate -> its grid axis label
    for name, vals in fi.assigns.items():
        for v in vals:
            if isinstance(v, ast.Call) and (mod.qn(v.func) or "").endswith("program_id"):
                base[name] = f"axis{_axis(v)}"
    changed = True
    while changed:
        changed = False
        for name, vals in fi.assigns.items():
            if name in base or name in parent_of:
                continue
            for v in vals:
                if isinstance(v, ast.BinOp) and isinstance(v.op, (ast.FloorDiv, ast.Mod)):
                    src = [m.id for m in walk(v.left) if isinstance(m, ast.Name) and (m.id in base or m.id in parent_of)]
                    if len(src) == 1:
                        parent_of[name] = src[0]
                        changed = True
                        break
    coords = set(base) | set(parent_of)
    children: dict[str, set[str]] = {}
    for c, p in parent_of.items():
        children.setdefault(p, set()).add(c)

    def leaves(c: str) -> set[str]:
        kids = children.get(c)
        return set().union(*[leaves(k) for k in kids]) if kids else {c}

    axis = {}
    for c in coords:
        r = c
        while r in parent_of:
            r = parent_of[r]
        axis[c] = base.get(r, "axis?")
    out = {c: leaves(c) for c in coords}
    del leaves   # a recursive closure is a reference cycle: drop it now
    return out, axis


def check_triton_hints(mod: Module) -> list[Hit]:
    hits = []
    if "evict_last" not in mod.text:
        return hits
    for fi in mod.funcs.values():
        if not fi.is_triton:
            continue
        coord_leaves, coord_axis = _pid_coordinates(mod, fi)
        all_leaves = set().union(*coord_leaves.values()) if coord_leaves else set()
        # a loop variable depends on what its range is built from
        loop_deps: dict[str, set[str]] = {}
        for n in fi.of(ast.For):
            if isinstance(n, ast.For):
                for t in _names_in_target(n.target):
                    loop_deps.setdefault(t, set()).update(_names(n.iter))
        for n in fi.of(ast.Call):
            if not (isinstance(n, ast.Call) and (mod.qn(n.func) or "").split(".")[-1] in ("load", "store")):
                continue
            pol = next((mod.const_str(k.value) for k in n.keywords if k.arg in ("eviction_policy", "cache_modifier")), None)
            if pol not in ("evict_last",):
                continue
            addr = n.args[0] if n.args else None
            # program coordinates are atoms: pid_n is not "built from" pid_mn's other leaf pid_m
            addr_names = _closure(fi, _names(addr) if addr is not None else set(), loop_deps, stop=set(coord_leaves))
            loops = []
            p = mod.parent.get(n)
            while p is not None and p is not fi.node:
                if isinstance(p, (ast.For, ast.While)):
                    loops.append(p)
                p = mod.parent.get(p)
            loop_vars = set()
            for lp in loops:
                if isinstance(lp, ast.For):
                    loop_vars |= set(_names_in_target(lp.target))
            loop_dep = bool(addr_names & loop_vars)
            used = addr_names & set(coord_leaves)
            used_leaves = set().union(*[coord_leaves[c] for c in used]) if used else set()
            missing = sorted(all_leaves - used_leaves)
            reuse = None
            if loops and not loop_dep:
                reuse = "address is invariant in the enclosing loop: the same data is loaded repeatedly within the call"
            elif not used:
                reuse = "address does not depend on program_id: every program reads the same data"
            elif missing:
                reuse = (f"address does not depend on program coordinate(s) {', '.join(missing)} "
                         f"({', '.join(sorted({coord_axis.get(m, '?') for m in missing}))}): programs that differ only "
                         f"there re-read the same data within the call")
            data = {"kernel": fi.qualname, "in_loop": bool(loops), "address_depends_on_program_id": bool(used),
                    "address_depends_on_loop": loop_dep, "coordinates_used": sorted(used_leaves),
                    "coordinates_unused": missing}
            if reuse:
                hits.append(mod.hit("L2-HINT-REUSED", n, f"evict_last in {fi.qualname}: {reuse}", data=data))
            else:
                hits.append(mod.hit("L2-EVICT-LAST", n,
                                    f"evict_last load in {fi.qualname} whose address varies with every program coordinate"
                                    f"{' and the loop' if loop_dep else ''}: each byte is read once per call, so the hint "
                                    f"can only help it survive the benchmark's L2 flush", data=data))
    return hits


def _axis(call: ast.Call):
    a = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "axis"), None)
    return a.value if isinstance(a, ast.Constant) else "?"


def _closure(fi: FuncInfo, names: set[str], extra: dict[str, set[str]] | None = None,
             stop: set[str] | frozenset = frozenset()) -> set[str]:
    """`names` and every name they are computed from (assignments, and `extra` dependencies such as
    a loop variable's range), not expanding through the names in `stop`."""
    out = set(names)
    frontier = set(names) - set(stop)
    for _ in range(8):
        new = set()
        for nm in frontier:
            for v in fi.assigns.get(nm, []):
                new |= _names(v)
            if extra:
                new |= extra.get(nm, set())
        new -= out
        if not new:
            break
        out |= new
        frontier = new - set(stop)
    return out


def _closure_dep(fi: FuncInfo, names: set[str], targets: set[str]) -> bool:
    return bool(names & targets)


# ---------------------------------------------------------------------- access-policy windows set from Python
#: cudaAccessProperty / CUaccessProperty: 0 normal, 1 streaming, 2 persisting
ACCESS_PERSISTING = 2
_WINDOW_FIELDS = ("hitProp", "missProp", "hitRatio", "num_bytes")
_POINTER_OF = ("ctypes.byref", "ctypes.pointer", "ctypes.addressof", "ctypes.cast")


def window_properties(mod: Module, call: ast.AST, fi: FuncInfo | None) -> dict[str, float] | None:
    """What the access-policy window a `cudaStreamSetAttribute`/`cuStreamSetAttribute` call passes says
    (its third argument: a ctypes structure, `ctypes.byref(s)`, `ctypes.pointer(s)`): `hitProp`, `missProp`,
    `hitRatio`, `num_bytes` where the source gives them as constants.  The structure is built from a
    `ctypes.Structure` class of the module (positional arguments in the order of its `_fields_`, keywords
    by name) and fields may be set on it afterwards (`s.hitProp = 2`, `v.accessPolicyWindow.hitProp = 2`,
    in the function that makes the call).  None where the argument is no such structure: nothing read."""
    if not isinstance(call, ast.Call) or len(call.args) < 3:
        return None
    e = call.args[2]
    while isinstance(e, ast.Call) and (mod.qn(e.func) or "") in _POINTER_OF and e.args:
        e = e.args[0]
    if not isinstance(e, ast.Name):
        return None
    name = e.id
    vals = list(fi.assigns.get(name, ())) if fi is not None else []
    if not vals and name in mod.consts:
        vals = [mod.consts[name]]
    built = [v for v in vals if isinstance(v, ast.Call)]
    if len(built) != 1:
        return None
    ctor = built[0]
    fields = _struct_fields(mod, ctor.func)
    if fields is None:
        return None
    out: dict[str, float] = {}
    for f, a in zip(fields, ctor.args):
        c = _int_const(mod, a)
        if f in _WINDOW_FIELDS and c is not None:
            out[f] = c
    for k in ctor.keywords:
        c = _int_const(mod, k.value)
        if k.arg in _WINDOW_FIELDS and c is not None:
            out[k.arg] = c
    body = fi.node if fi is not None else mod.tree
    for n in walk(body):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Attribute) \
                and n.targets[0].attr in _WINDOW_FIELDS:
            root = n.targets[0].value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id == name:
                c = _int_const(mod, n.value)
                if c is None:
                    out.pop(n.targets[0].attr, None)     # set to something the source does not give: unread
                else:
                    out[n.targets[0].attr] = c
    return out


def _struct_fields(mod: Module, f: ast.AST) -> list[str] | None:
    """The field names, in order, of a ctypes structure class of the module that `f` names."""
    cname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    for c in mod.of(ast.ClassDef):
        if c.name != cname:
            continue
        for st in c.body:
            if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_fields_" for t in st.targets) \
                    and isinstance(st.value, (ast.List, ast.Tuple)):
                names = [el.elts[0].value for el in st.value.elts if isinstance(el, (ast.Tuple, ast.List)) and el.elts
                         and isinstance(el.elts[0], ast.Constant) and isinstance(el.elts[0].value, str)]
                return names if len(names) == len(st.value.elts) else None
    return None


def _int_const(mod: Module, e: ast.AST) -> float | None:
    """A number the source gives: a literal, or a module-level name bound to one."""
    if isinstance(e, ast.Name) and e.id in mod.consts:
        e = mod.consts[e.id]
    if isinstance(e, ast.Call) and e.args and (mod.qn(e.func) or "").startswith("ctypes.c_"):
        e = e.args[0]                       # ctypes.c_int(2)
    try:
        v = ast.literal_eval(e)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
