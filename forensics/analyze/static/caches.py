"""Caches and state: identity-keyed caches (data_ptr, _version, id, is) and what a hit returns,
pointer compares, sampled validation, persistent outputs, CUDA graphs, retained inputs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import roles as RO
from .base import Hit
from .model import (
    _PTR_ATTRS,
    ALLOC_FUNCS,
    CONTENT_METHODS,
    DERIVE_METHODS,
    FORWARD_NAMES,
    IDENT_KINDS,
    FuncInfo,
    Module,
    _deco_func,
    _entries,
    _entry_params,
    _names,
    _names_in_target,
    _tensor_text,
    attr_read,
    builtin_called,
    method_call,
    walk,
)


# ---------------------------------------------------------------------- cache / state analysis
@dataclass
class CacheSite:
    func: FuncInfo
    container: str
    kinds: set[str]
    lookup_nodes: list[ast.AST] = field(default_factory=list)
    store_values: list[ast.AST] = field(default_factory=list)
    style: str = "dict"            # dict | saved-key | identity
    stored: set[str] = field(default_factory=set)
    returns_stored: ast.AST | None = None
    aux: set[str] = field(default_factory=set)     # state saved beside a saved key
    hit_launches: bool = False
    graph: bool = False
    unversioned: set[str] = field(default_factory=set)   # tensors keyed by pointer/id without _version
    versioned: set[str] = field(default_factory=set)     # tensors whose _version the key reads (source text)

    def to_dict(self, mod: Module) -> dict[str, Any]:
        return {"function": self.func.qualname, "container": self.container, "style": self.style,
                "key_kinds": sorted(self.kinds), "stores": sorted(self.stored),
                "hit_returns_stored": self.returns_stored is not None, "hit_launches": self.hit_launches,
                "lines": sorted({getattr(n, "lineno", 0) for n in self.lookup_nodes})}


def _is_graph_expr(mod: Module, e: ast.AST, fi: FuncInfo, depth: int = 0) -> bool:
    """Does the expression hold a CUDA graph: built here, bound to a local that holds one, or
    returned by a helper of the module (`entry = self._capture(x)` returning `(graph, out)`)?"""
    for n in walk(e):
        if isinstance(n, ast.Call) and (mod.qn(n.func) or "").endswith(("CUDAGraph", "make_graphed_callables")):
            return True
        if isinstance(n, ast.Name) and depth < 3:
            for v in fi.assigns.get(n.id, []):
                if _is_graph_expr(mod, v, fi, depth + 1):
                    return True
        if isinstance(n, ast.Call) and depth < 2:
            for c in mod.callees(n, fi):
                if c is not fi and any(isinstance(r, ast.Return) and r.value is not None
                                       and _is_graph_expr(mod, r.value, c, depth + 1) for r in c.nodes):
                    return True
    return False


def classify_value(mod: Module, e: ast.AST, fi: FuncInfo, depth: int = 0, seen: set | None = None) -> set[str]:
    """What a cached value is: output, input-copy, packed-weight, content-plan, plan, buffer, graph."""
    seen = seen if seen is not None else set()
    out: set[str] = set()
    if depth > 3:
        return out
    returned = fi.returned
    for n in walk(e):
        if isinstance(n, ast.Call):
            q = mod.qn(n.func) or ""
            last = q.split(".")[-1] if q else (n.func.attr if isinstance(n.func, ast.Attribute) else "")
            if q.endswith(("CUDAGraph", "make_graphed_callables")):
                out.add("graph")
            elif q in ALLOC_FUNCS:
                out.add("buffer")
            elif last in CONTENT_METHODS:
                out.add("content-plan")
            elif last in DERIVE_METHODS or q.endswith(("functional.pad", "torch.cat", "torch.stack")):
                args_names = set().union(*[_names(a) for a in n.args]) if n.args else set()
                base_names = _names(n.func.value) if isinstance(n.func, ast.Attribute) else set()
                src = args_names | base_names
                if src & set(_entry_params(fi)):
                    out.add("input-copy")
            elif mod.is_launch(n, fi):
                out.add("computed")
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" and re.search(
                r"weight|w_|^w\d?$|scale|zeros|w_q|W_", n.attr):
            out.add("packed-weight")
        elif isinstance(n, ast.Name):
            if n.id in returned and n.id not in seen:
                out.add("output")
            if n.id in fi.params and (not fi.cls or n.id != fi.params[0]):
                if re.search(r"weight|^w\d?$|^w_|W_", n.id):
                    out.add("packed-weight")
                else:
                    out.add("input-ref")
            if n.id not in seen:
                seen.add(n.id)
                for v in fi.assigns.get(n.id, []):
                    out |= classify_value(mod, v, fi, depth + 1, seen)
    if "packed-weight" in out and "input-copy" in out:
        out.discard("input-copy")
    return out


def _lookup_parts(mod: Module, n: ast.AST, fi: FuncInfo) -> tuple[str, ast.AST, str] | None:
    """(container, key, op) for a cache lookup or store node, else None."""
    # the container may be named through a local that stands for it (`cache = self._cache`)
    if isinstance(n, ast.Subscript):
        c = mod.persistent(n.value, fi, alias=True)
        if c:
            return c, n.slice, "store" if isinstance(n.ctx, ast.Store) else "get"
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "setdefault", "pop", "__getitem__") and n.args:
        c = mod.persistent(n.func.value, fi, alias=True)
        if c:
            return c, n.args[0], "get"
    if isinstance(n, ast.Compare) and len(n.ops) == 1:
        op, right = n.ops[0], n.comparators[0]
        if isinstance(op, (ast.In, ast.NotIn)):
            c = mod.persistent(right, fi, alias=True)
            if c:
                return c, n.left, "in"
        if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
            for a, b in ((n.left, right), (right, n.left)):
                c = mod.persistent(b, fi, alias=True)
                if c and mod.persistent(a, fi) is None and not (isinstance(a, ast.Constant)):
                    return c, a, "is" if isinstance(op, (ast.Is, ast.IsNot)) else "eq"
    return None


def _hit_polarity(mod: Module, test: ast.AST, fi: FuncInfo, container: str, lookup_vars: set[str]) -> str | None:
    """'hit' if the If body is the cache-hit branch, 'miss' if it is the miss branch."""
    neg = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        neg, test = True, test.operand
    if isinstance(test, ast.BoolOp):
        for v in test.values:
            p = _hit_polarity(mod, v, fi, container, lookup_vars)
            if p:
                # `a and b` hit only if all hit; `a or b` miss if any miss; keep the simple reading
                return ("miss" if p == "hit" else "hit") if neg else p
        return None
    pol = None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op = test.ops[0]
        parts = _lookup_parts(mod, test, fi)
        if parts and parts[0] == container:
            pol = "hit" if isinstance(op, (ast.In, ast.Eq, ast.Is)) else "miss"
        elif isinstance(test.left, ast.Name) and test.left.id in lookup_vars and isinstance(test.comparators[0], ast.Constant) \
                and test.comparators[0].value is None:
            pol = "miss" if isinstance(op, (ast.Is, ast.Eq)) else "hit"
        elif any(_lookup_parts(mod, x, fi) and _lookup_parts(mod, x, fi)[0] == container for x in walk(test.left)) \
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
            pol = "miss" if isinstance(op, (ast.Is, ast.Eq)) else "hit"
    elif isinstance(test, ast.Name) and test.id in lookup_vars:
        pol = "hit"
    if pol and neg:
        pol = "miss" if pol == "hit" else "hit"
    return pol


def _refs_cache(mod: Module, e: ast.AST, fi: FuncInfo, container: str, lookup_vars: set[str],
                aux: set[str] | frozenset = frozenset()) -> bool:
    for n in walk(e):
        parts = _lookup_parts(mod, n, fi) if isinstance(n, (ast.Subscript, ast.Call)) else None
        if parts and parts[0] == container:
            return True
        if isinstance(n, ast.Name) and n.id in lookup_vars:
            return True
        if (isinstance(n, ast.Attribute) or (isinstance(n, ast.Name) and n.id in fi.globals_)) \
                and mod.persistent(n, fi) in ({container} | set(aux)):
            return True     # the state itself: an attribute, or a slot declared global/nonlocal
    return False


def _stored_callable_call(mod: Module, e: ast.AST, fi: FuncInfo) -> bool:
    """``self._replay(idx)`` as a statement: a callable kept on the instance (no method of the
    class: an extension's launcher, a graph's replay bound at build time) called for its effect.
    On a cache's hit path it is work run now, as a launch is; a method of the container
    (``self._stats.append(x)``) is not such a call."""
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name)
            and e.func.value.id == "self"):
        return False
    return not mod.callees(e, fi)


def _analyse_hit_path(mod: Module, site: CacheSite) -> None:
    fi = site.func
    container = site.container
    lookup_vars: set[str] = set()
    for name, vals in fi.assigns.items():
        for v in vals:
            if _refs_cache(mod, v, fi, container, set()):
                lookup_vars.add(name)

    # a key read from sampled elements is computed with tensor calls (`x[:, :8].sum()`): computing the key
    # is the lookup, not work done on the hit path
    key_names = _key_locals(mod, site) if SAMPLED in site.kinds else set()

    def launches(stmts: Iterable[ast.stmt]) -> bool:
        for st in stmts:
            if isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) and t.id in key_names for t in st.targets):
                continue
            if isinstance(st, ast.Expr) and _stored_callable_call(mod, st.value, fi):
                return True
            for n in walk(st):
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                    return True
                if isinstance(n, ast.Call) and mod.is_launch(n, fi) and not (
                        _lookup_parts(mod, n, fi) and _lookup_parts(mod, n, fi)[0] == container):
                    return True
        return False

    def hit_stmts(stmts: list[ast.stmt]) -> list[ast.stmt]:
        """Statements of a block that run on the hit path (miss branches dropped)."""
        out = []
        for st in stmts:
            if isinstance(st, ast.If):
                pol = _hit_polarity(mod, st.test, fi, container, lookup_vars)
                if pol == "miss":
                    out.extend(hit_stmts(st.orelse))
                    continue
                if pol == "hit":
                    out.extend(hit_stmts(st.body))
                    continue
            if isinstance(st, ast.Try):
                out.extend(hit_stmts(st.body))
                continue
            out.append(st)
        return out

    def scan(stmts: list[ast.stmt], on_hit: bool, prior_launch: bool) -> None:
        seen_launch = prior_launch
        for st in stmts:
            if isinstance(st, ast.Return) and st.value is not None and on_hit:
                if _refs_cache(mod, st.value, fi, container, lookup_vars, site.aux):
                    if _calls_with_live_inputs(st.value, fi):
                        # `return plan.run(x, out)` / `return cache[key](x)`: the cached object is a
                        # launch plan run on the current inputs, not a stored answer
                        site.hit_launches = True
                    elif not seen_launch:
                        site.returns_stored = site.returns_stored or st
                    else:
                        site.hit_launches = True
                elif seen_launch or launches([st]):
                    site.hit_launches = True
                break       # what follows a return in its block never runs
            if isinstance(st, ast.If):
                pol = _hit_polarity(mod, st.test, fi, container, lookup_vars)
                if pol == "hit":
                    scan(st.body, True, seen_launch)
                    scan(st.orelse, False, seen_launch)
                    if st.body and isinstance(st.body[-1], (ast.Return, ast.Raise)):
                        on_hit = False  # what follows is the miss path
                    continue
                if pol == "miss":
                    scan(st.body, False, seen_launch)
                    scan(st.orelse, True, seen_launch)
                    continue
                scan(st.body, on_hit, seen_launch)
                scan(st.orelse, on_hit, seen_launch)
                if on_hit and launches([st]):
                    seen_launch = True
                continue
            if isinstance(st, (ast.With, ast.For, ast.While, ast.Try)):
                scan(getattr(st, "body", []), on_hit, seen_launch)
                if on_hit and launches(hit_stmts(getattr(st, "body", []))):
                    seen_launch = True
                continue
            if on_hit and launches([st]):
                seen_launch = True
                site.hit_launches = True
            if isinstance(st, (ast.Return, ast.Raise)):
                break

    scan(fi.node.body, True, False)
    del launches, hit_stmts, scan   # recursive closures are reference cycles: drop them now


def _key_locals(mod: Module, site: CacheSite) -> set[str]:
    """The locals a site's lookup keys are computed through (`key = (...)`, `flat = x.flatten()` it reads)."""
    fi = site.func
    keys: list[ast.AST] = []
    for n in site.lookup_nodes:
        parts = _lookup_parts(mod, n, fi)
        if parts:
            keys.append(parts[1])
    out: set[str] = set()
    todo = [nm for k in keys for nm in _names(k)]
    while todo:
        nm = todo.pop()
        if nm in out or nm not in fi.assigns or nm in fi.params:
            continue
        out.add(nm)
        for v in fi.assigns[nm]:
            todo.extend(_names(v))
    return out


def _live_names(fi: FuncInfo) -> set[str]:
    """The entry's caller-supplied parameters and the locals computed from them (in a function an entry
    hands its call to, the names that carry the entry's inputs there: roles)."""
    live = fi.__dict__.get("_live")
    if live is None:
        carried = fi.__dict__.get("_fx_role_inputs")
        params = (set(carried) if carried is not None else set(_entry_params(fi))) - {"args", "kwargs"}
        live = set(params)
        for _ in range(3):
            for name, vals in fi.assigns.items():
                if name not in live and any(_names(v) & live for v in vals):
                    live.add(name)
        fi.__dict__["_live"] = live
    return live


def _calls_with_live_inputs(e: ast.AST, fi: FuncInfo) -> bool:
    """Does the expression compute something from the current call's inputs: a call given one as an
    argument or as its receiver (`plan.run(x)`, `x.matmul(self._packed)`), or an operator applied to
    one (`x @ self._packed`)?  A stored value combined with the live inputs is work on them, not a
    stored answer."""
    live = _live_names(fi)
    for n in walk(e):
        if isinstance(n, ast.Call):
            f = n.func
            if (isinstance(f, ast.Name) and f.id in _KEY_BUILTINS) or (isinstance(f, ast.Attribute) and f.attr in _META_ATTRS):
                continue    # `tuple(x.shape)`, `x.size(0)` in a key: metadata read, nothing computed from the values
            args = list(n.args) + [k.value for k in n.keywords]
            if isinstance(f, ast.Attribute):
                args.append(f.value)
            if any(_names(a) & live for a in args):
                return True
        elif isinstance(n, ast.BinOp) and (_names(n.left) & live or _names(n.right) & live):
            return True
    return False


def find_cache_sites(mod: Module) -> list[CacheSite]:
    """The identity-keyed cache sites (data_ptr, _version, id, `is`): the state inventory."""
    return [s for s in _all_sites(mod) if s.kinds & set(IDENT_KINDS)]


def blind_sites(mod: Module) -> list[CacheSite]:
    """Sites keyed by nothing that reads the inputs' contents (shape, dtype, device, a constant-free
    tuple of those: a hit is the same for any values of the same shape), or only a few sampled elements
    of them (SAMPLED: a hit is the same for any values elsewhere)."""
    return [s for s in _all_sites(mod) if not s.kinds & set(IDENT_KINDS)]


def _all_sites(mod: Module) -> list[CacheSite]:
    if mod._sites is None:
        for r in RO.bind(mod).values():     # owners known to persistent() before any site is read
            if r.via != "entry":            # a helper's live names: those carrying the entry's inputs
                r.fi.__dict__["_fx_role_inputs"] = frozenset(r.inputs)
        mod._sites = _find_cache_sites(mod)
    return mod._sites


#: the kind of a key read from the inputs' metadata only (shape, dtype, device, sizes)
BLIND = "blind"
#: what reading a tensor's metadata gives (never its values)
_META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda", "requires_grad", "is_contiguous",
                         "size", "stride", "dim", "numel", "nelement", "element_size", "ndimension", "get_device",
                         "storage_offset", "itemsize", "nbytes"})
#: builtins that combine keys without reading a tensor's values
_KEY_BUILTINS = frozenset({"tuple", "len", "str", "int", "repr", "type", "frozenset", "bool"})


def content_blind(mod: Module, key: ast.AST, fi: FuncInfo, depth: int = 0) -> bool:
    """Does a cache key read nothing of the inputs' values: built only from metadata (`x.shape`,
    `x.size(0)`, `x.dtype`, `str(x.device)`), constants and locals built the same way?  A key that
    calls anything else (`x.sum().item()`, a hash of the bytes, a helper), or is a bare parameter
    (an int argument is its own value), may read contents: not blind."""
    if depth > 4:
        return False
    seen_meta = False
    for n in walk(key):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in _META_ATTRS:
                continue
            if isinstance(f, ast.Name) and f.id in _KEY_BUILTINS and f.id not in mod.aliases and f.id not in mod.by_name:
                continue
            if isinstance(f, ast.Name) and f.id == "getattr" and len(n.args) >= 2 and mod.const_str(n.args[1]) in _META_ATTRS:
                seen_meta = True
                continue
            return False
        if isinstance(n, ast.Attribute) and n.attr in _META_ATTRS:
            seen_meta = True
        elif isinstance(n, ast.Attribute) and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")) \
                and not (isinstance(mod.parent.get(n), ast.Attribute) and mod.parent[n].attr in _META_ATTRS
                         and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
            return False        # x.T, x.data, t.grad: a value, not metadata
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            parent = mod.parent.get(n)
            if isinstance(parent, ast.Attribute) or (isinstance(parent, ast.Call) and parent.func is n):
                continue        # x in x.shape; tuple in tuple(...)
            vals = fi.assigns.get(n.id, [])
            if n.id in fi.params or not vals or n.id in fi.globals_:
                return False
            if not all(content_blind(mod, v, fi, depth + 1) for v in vals):
                return False
            seen_meta = True
        elif isinstance(n, (ast.Subscript, ast.Starred, ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield)) \
                and not (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and n.value.attr in _META_ATTRS):
            if isinstance(n, ast.Subscript) and _subscript_of_meta(mod, n, fi, depth):
                continue
            return False
    return seen_meta


#: the kind of a key read from a few elements of an input (a constant index or slice), never all of it
SAMPLED = "sampled"
#: methods that give the same tensor (or a view, a cast, a copy) of their receiver: its elements still to be read
_VIEW_METHODS = frozenset({"flatten", "view", "reshape", "ravel", "contiguous", "detach", "float", "double", "half",
                           "bfloat16", "to", "cpu", "cuda", "clone", "t", "T", "mT", "squeeze", "unsqueeze", "transpose",
                           "permute", "view_as", "flip", "abs", "int", "long", "data"})
#: methods that read the values of their receiver (into a Python value, bytes or a reduction of them)
_VALUE_METHODS = frozenset({"item", "tolist", "numpy", "tobytes", "sum", "mean", "amax", "amin", "max", "min", "norm",
                            "prod", "std", "var", "any", "all", "hexdigest", "digest", "__hash__", "__float__"})
#: builtins that read the value of what they are given into a hashable key
_VALUE_BUILTINS = frozenset({"float", "int", "bool", "hash", "round", "tuple", "str", "repr", "frozenset", "list",
                             "bytes", "abs"})
_NON_TENSOR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "list", "tuple", "dict", "List", "Tuple", "Dict",
                                     "Sequence", "Optional", "None"})
_KIND_ORDER = ("const", "meta", "view", "elem", "sample", "full", "other")


def _const_index(e: ast.AST) -> bool:
    """An index or slice made of integer constants only that narrows the tensor (`0`, `-1`, `:8`, `::1024`,
    `:, :4`), not a bare `:` (every element)."""
    if isinstance(e, ast.Tuple):
        parts = [x for x in e.elts if not (isinstance(x, ast.Slice) and x.lower is x.upper is x.step is None)]
        return bool(parts) and all(_const_index(x) for x in parts)
    if isinstance(e, ast.Slice):
        parts = [x for x in (e.lower, e.upper, e.step) if x is not None]
        return bool(parts) and all(_const_index(x) for x in parts)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return _const_index(e.operand)
    return isinstance(e, ast.Constant) and type(e.value) is int


def _non_tensor_param(fi: FuncInfo, name: str) -> bool:
    """A parameter annotated as something other than a tensor (`k: int`, `sizes: tuple[int, ...]`)."""
    for a in fi.node.args.posonlyargs + fi.node.args.args + fi.node.args.kwonlyargs:
        if a.arg == name and a.annotation is not None:
            ann = a.annotation.value if isinstance(a.annotation, ast.Subscript) else a.annotation
            last = ann.attr if isinstance(ann, ast.Attribute) else getattr(ann, "id", None) or (
                ann.value if isinstance(ann, ast.Constant) else None)
            return str(last) in _NON_TENSOR_ANNOTATIONS
    return False


def _key_read(mod: Module, e: ast.AST, fi: FuncInfo, inputs: set[str], depth: int = 0) -> str:
    """What a cache key (or a part of one) reads of the call's inputs: `const`, `meta` (shape, dtype, ...),
    `view` (an input tensor itself, or a view or cast of it: nothing read yet), `elem` (a few of its
    elements, not yet read into a value), `sample` (the values of a few elements: `float(flat[0])`,
    `x[:, :4].sum().item()`, a hash of the bytes of `x[:64]`), `full` (values read from the whole input:
    `x.sum().item()`) or `other` (anything else: a helper's result, state, an unknown call)."""
    if depth > 4:
        return "other"
    join = lambda kinds: max(kinds, key=_KIND_ORDER.index, default="const")   # noqa: E731
    if isinstance(e, ast.Constant):
        return "const"
    if isinstance(e, (ast.Tuple, ast.List)):
        return join([_key_read(mod, x, fi, inputs, depth) for x in e.elts])
    if isinstance(e, ast.BinOp):
        k = join([_key_read(mod, e.left, fi, inputs, depth), _key_read(mod, e.right, fi, inputs, depth)])
        return "other" if k in ("view", "elem") else k
    if isinstance(e, ast.UnaryOp):
        return _key_read(mod, e.operand, fi, inputs, depth)
    if isinstance(e, ast.Name):
        if e.id in ("self", "cls"):
            return "other"
        vals = fi.assigns.get(e.id, []) if e.id not in fi.globals_ else []
        if vals:        # a local: what its values read (the depth bounds a chain of locals, and a cycle)
            return join([_key_read(mod, v, fi, inputs, depth + 1) for v in vals])
        return "view" if e.id in inputs and not _non_tensor_param(fi, e.id) else "other"
    read = attr_read(mod, e) if isinstance(e, (ast.Attribute, ast.Call)) else None
    if read is not None:        # `x.shape`, `getattr(x, 'shape')`
        if read[1] in _META_ATTRS:
            return "meta"
        base = _key_read(mod, read[0], fi, inputs, depth)
        return base if read[1] in _VIEW_METHODS and base in ("view", "elem") else "other"
    if isinstance(e, ast.Subscript):
        base = _key_read(mod, e.value, fi, inputs, depth)
        if base in ("const", "meta"):
            return base if _const_index(e.slice) or _key_read(mod, e.slice, fi, inputs, depth) in ("const", "meta") \
                else "other"
        if base in ("view", "elem") and _const_index(e.slice):
            return "elem"
        return "other"
    if isinstance(e, ast.Call):
        args = list(e.args) + [k.value for k in e.keywords]
        b = builtin_called(mod, e)
        q = mod.qn(e.func) or ""
        if b in _KEY_BUILTINS | _VALUE_BUILTINS or q.startswith("hashlib."):
            if b in ("len", "type"):
                return "meta"       # len(x), type(x): no values read
            k = join([_key_read(mod, a, fi, inputs, depth) for a in args])
            return {"view": "full", "elem": "sample"}.get(k, k)
        m = method_call(mod, e, fi)
        if m is not None:
            recv, name = m
            if name in _META_ATTRS:
                return "meta"
            base = _key_read(mod, recv, fi, inputs, depth)
            rest = join([_key_read(mod, a, fi, inputs, depth) for a in args])
            if rest not in ("const", "meta"):
                return "other"
            if name in ("narrow", "select", "index_select") and base in ("view", "elem"):
                return "elem"
            if name in _VIEW_METHODS and base in ("view", "elem", "sample"):
                return base
            if name in _VALUE_METHODS:
                return {"view": "full", "elem": "sample", "sample": "sample", "full": "full"}.get(base, "other")
            return "other"
        return "other"
    return "other"


def content_sampled(mod: Module, key: ast.AST, fi: FuncInfo) -> bool:
    """Does a cache key read the values of only a few elements of the call's inputs (a constant index or
    slice: `float(x.flatten()[0])`, `x[:, :8].sum().item()`, a hash of the bytes of `x[:64]`), besides
    their metadata?  A hit then answers any input agreeing at those positions: the values elsewhere are
    never read.  A key reading every value (`x.sum().item()`, a hash of all the bytes) is not sampled."""
    carried = fi.__dict__.get("_fx_role_inputs")
    inputs = (set(carried) if carried is not None else set(_entry_params(fi))) - {"args", "kwargs"}
    return bool(inputs) and _key_read(mod, key, fi, inputs) == "sample"


def _subscript_of_meta(mod: Module, n: ast.Subscript, fi: FuncInfo, depth: int) -> bool:
    """`shape[0]` where `shape = x.shape`: an element of metadata."""
    return isinstance(n.value, ast.Name) and bool(fi.assigns.get(n.value.id)) and n.value.id not in fi.params \
        and all(content_blind(mod, v, fi, depth + 1) for v in fi.assigns[n.value.id])


def _find_cache_sites(mod: Module) -> list[CacheSite]:
    sites: dict[tuple[str, str], CacheSite] = {}
    for fi in mod.funcs.values():
        if fi.is_triton:
            continue
        for n in fi.of(ast.Subscript, ast.Call, ast.Compare):
            if not isinstance(n, (ast.Subscript, ast.Call, ast.Compare)):
                continue
            parts = _lookup_parts(mod, n, fi)
            if not parts:
                continue
            container, key, op = parts
            k = mod.kinds(key, fi)
            if not k & set(IDENT_KINDS) and _weak_keyed(mod, container) and not isinstance(key, ast.Constant):
                k = k | {"id"}     # a WeakKeyDictionary holds its keys by the object: a tensor's hash is its id()
            if op == "is":
                if isinstance(key, ast.Constant):
                    continue
                k = k | {"is"}
            if not (k & set(IDENT_KINDS)) and op != "store":
                if op == "is" or isinstance(key, ast.Constant):
                    continue
                if content_blind(mod, key, fi):
                    k = k | {BLIND}     # keyed by what the inputs are shaped like, never by what they hold
                elif content_sampled(mod, key, fi):
                    k = k | {SAMPLED}   # keyed by a few of the values they hold, never by the rest
                else:
                    continue
            s = sites.get((fi.qualname, container))
            if s is None:
                s = sites[(fi.qualname, container)] = CacheSite(fi, container, set())
            s.kinds |= k
            s.unversioned |= mod.unversioned(key, fi)
            if "version" in k:
                s.versioned |= mod._key_tensors(key, fi, 0)[1]
            s.lookup_nodes.append(n)
            if op in ("eq", "is"):
                s.style = "saved-key" if op == "eq" else "identity"
        # stores: container[key] = value  and  saved-key attributes assigned in the same function
        for n in fi.of(ast.Assign):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    if isinstance(t, ast.Subscript):
                        c = mod.persistent(t.value, fi, alias=True)
                        if c and (fi.qualname, c) in sites:
                            sites[(fi.qualname, c)].store_values.append(n.value)
    out = []
    for s in sites.values():
        if not (s.kinds & set(IDENT_KINDS + (BLIND, SAMPLED))):
            continue
        fi = s.func
        if s.style in ("saved-key", "identity"):
            # what is kept alongside the saved key: other persistent attrs assigned in this function
            for n in fi.of(ast.Assign):
                if isinstance(n, ast.Assign):
                    for t in _flat_targets(n.targets):
                        # an attribute, or a name declared global/nonlocal (a slot in a module or a closure)
                        c = mod.persistent(t, fi) if isinstance(t, ast.Attribute) or (
                            isinstance(t, ast.Name) and t.id in fi.globals_) else None
                        if c and c != s.container and not mod.kinds(n.value, fi) & set(IDENT_KINDS) \
                                and not (BLIND in s.kinds and content_blind(mod, n.value, fi)):
                            s.store_values.append(n.value)
                            s.aux.add(c)
        for v in s.store_values:
            s.stored |= classify_value(mod, v, fi)
            if _is_graph_expr(mod, v, fi):
                s.graph = True
                s.stored.add("graph")
        _analyse_hit_path(mod, s)
        out.append(s)
    return out


def _flat_targets(targets: list[ast.expr]) -> list[ast.expr]:
    """Assignment targets with tuples unpacked (`a, b = ...` assigns a and b)."""
    out: list[ast.expr] = []
    for t in targets:
        out.extend(_flat_targets(t.elts) if isinstance(t, (ast.Tuple, ast.List)) else [t])
    return out


def _weak_keyed(mod: Module, container: str) -> bool:
    """Is the container a weakref.WeakKeyDictionary (built where the module or a method assigns it)?"""
    memo = mod.__dict__.setdefault("_fx_weak", {})
    if container not in memo:
        last = container.rsplit(".", 1)[-1]
        found = False
        for n in mod.of(ast.Assign):
            if isinstance(n.value, ast.Call) and (mod.qn(n.value.func) or "").endswith("WeakKeyDictionary") and any(
                    (isinstance(t, ast.Name) and "." not in container and t.id == container)
                    or (isinstance(t, ast.Attribute) and "." in container and t.attr == last) for t in n.targets):
                found = True
                break
        memo[container] = found
    return memo[container]


#: decorators that memoize a function on its arguments (a tensor argument hashes by its identity)
MEMO_DECORATORS = frozenset({"functools.lru_cache", "functools.cache"})


def _memoizing(mod: Module, e: ast.AST | None, fi: FuncInfo | None, depth: int = 0) -> bool:
    """Does `e` denote a function memoized on its arguments: `functools.lru_cache(...)(f)`,
    `functools.cache(f)`, or a name bound to one?"""
    if e is None or depth > 2:
        return False
    if isinstance(e, ast.Call):
        q = mod.qn(e.func.func if isinstance(e.func, ast.Call) else e.func) or ""
        return q in MEMO_DECORATORS and bool(e.args)
    if isinstance(e, ast.Name):
        vals = list(fi.assigns.get(e.id, ())) if fi is not None else []
        if not vals and e.id in mod.consts:
            vals = [mod.consts[e.id]]
        return len(vals) == 1 and _memoizing(mod, vals[0], None, depth + 1)
    return False


def check_memoized_calls(mod: Module) -> list[Hit]:
    """CACHED-OUTPUT-RETURN through a memoizing decorator: an entry (or a function whose result an entry
    returns) returns the call of a function under functools.lru_cache / functools.cache with one of the
    caller's tensors, or a key read from one's identity (data_ptr, id, _version), among the arguments.
    The cache answers a repeated call on the same tensor objects (or the same storage) with the value
    stored the first time: the function does not run, whatever the tensors hold now.  Look-alike: a
    memoized builder called with shapes, dtypes or constants (a launch configuration, a compiled kernel)."""
    hits: list[Hit] = []
    roles = RO.bind(mod)
    memo_fns = {fi.qualname for fi in mod.funcs.values()
                if any((mod.qn(_deco_func(d)) or "") in MEMO_DECORATORS for d in fi.node.decorator_list)}
    for role in roles.values():
        if not role.result:
            continue
        fi = role.fi
        inputs = set(role.inputs)
        for c in fi.of(ast.Call):
            if not RO.returns_call(mod, fi, c):
                continue
            targets = {g.qualname for g in RO.callees(mod, fi, c)}
            memoized = sorted(targets & memo_fns) or (["<lru_cache>"] if _memoizing(mod, c.func, fi) else [])
            if not memoized:
                continue
            args = list(c.args) + [k.value for k in c.keywords]
            ident = set().union(*(mod.kinds(a, fi) for a in args)) & {"ptr", "id", "version"} if args else set()
            objs = sorted({a.id for a in args if isinstance(a, ast.Name) and a.id in inputs})
            if not ident and not objs:
                continue
            what = ", ".join([f"{o} (hashed by identity)" for o in objs] + sorted(ident))
            hits.append(mod.hit("CACHED-OUTPUT-RETURN", c,
                                f"{fi.qualname} returns {memoized[0]}(...), memoized by a caching decorator on {what}: "
                                "a repeated call on the same tensors returns the stored result without running it",
                                data={"function": fi.qualname, "memoized": memoized[0],
                                      "key_kinds": sorted(ident | ({"id"} if objs else set())),
                                      "hit_returns_stored": True, "hit_launches_work": False}))
    return hits


def _result_functions(mod: Module) -> set[str]:
    """Entry points and the functions whose result an entry point returns: a helper it returns the call
    of (directly or through a local), a helper class's method, a nested function, a decorator's wrapper,
    a function defined by exec, however the call names it (roles)."""
    out = RO.result_functions(mod)
    for fi in mod.funcs.values():
        if fi.node.name in FORWARD_NAMES:
            out.add(fi.qualname)
            for n in fi.of(ast.Return):
                if isinstance(n, ast.Return) and isinstance(n.value, ast.Call):
                    out |= {c.qualname for c in mod.callees(n.value, fi)}
    return out


def check_caches(mod: Module) -> list[Hit]:
    hits: list[Hit] = check_memoized_calls(mod)
    result_funcs = _result_functions(mod)
    for s in blind_sites(mod):
        # keyed by the inputs' shape (or nothing of theirs): a hit that launches nothing returns what an
        # earlier call computed from other values - stale by construction.  A shape-keyed plan, tile
        # config or output buffer the kernel then writes launches work on the hit path: not this.
        if s.returns_stored is None or s.hit_launches or s.graph or s.func.qualname not in result_funcs:
            continue
        if not (s.stored - {"graph"}) and not s.aux:
            continue
        if SAMPLED in s.kinds:
            what = ("when a few sampled elements of the inputs (a constant index or slice) match an earlier "
                    "call's, without launching work: the key reads no other value, so new values anywhere else "
                    "get the old result")
        else:
            what = ("when the inputs' shape matches an earlier call's, without launching work: the key reads none "
                    "of the inputs' values, so any new values of that shape get the old result")
        hits.append(mod.hit("CACHED-OUTPUT-RETURN", s.returns_stored,
                            f"{s.func.qualname} returns the value stored in {s.container} {what}",
                            probe=None,     # stale by construction: no probe can show the key reads the values
                            data={"function": s.func.qualname, "container": s.container,
                                  "key_kinds": ["sampled"] if SAMPLED in s.kinds else ["shape"],
                                  "stores": sorted(s.stored), "hit_launches_work": False, "hit_returns_stored": True}))
    for s in find_cache_sites(mod):
        node = min(s.lookup_nodes, key=lambda n: getattr(n, "lineno", 0))
        kinds = s.kinds
        content = s.stored & {"input-copy", "packed-weight", "content-plan", "output", "computed"}
        base = {"function": s.func.qualname, "container": s.container, "key_kinds": sorted(kinds & set(IDENT_KINDS + ("shape",))),
                "stores": sorted(s.stored), "hit_launches_work": s.hit_launches,
                "hit_returns_stored": s.returns_stored is not None}
        # a ptr+_version key checks contents only for the tensors whose _version it reads
        blind = sorted(s.unversioned) if "version" in kinds else []
        if blind:
            base["unversioned"] = blind
        if s.returns_stored is not None and not s.hit_launches and not s.graph and s.func.qualname in result_funcs:
            hits.append(mod.hit("CACHED-OUTPUT-RETURN", s.returns_stored,
                                f"{s.func.qualname} returns the value stored in {s.container} on a "
                                f"{'/'.join(sorted(kinds & set(IDENT_KINDS)))}-keyed hit without launching work",
                                data=base))
        if s.graph and (s.hit_launches or not content - {"computed"}):
            continue  # graph caches are reported by check_graphs
        if not content and s.hit_launches:
            continue  # a key that selects a launch plan or workspace and re-launches on live data
        if "id" in kinds or ("is" in kinds and "ptr" not in kinds):
            sev = "medium" if content or s.returns_stored is not None else "low"
            hits.append(mod.hit("ID-KEYED-STATE", node,
                                f"{s.func.qualname} selects state in {s.container} by Python "
                                f"{'id()' if 'id' in kinds else '`is` identity'}; it stores {', '.join(sorted(s.stored)) or 'state'}",
                                severity=sev, data=base))
        elif "ptr" in kinds and ("version" not in kinds or blind):
            sev = "high" if (s.returns_stored is not None or "input-copy" in content) else ("medium" if content else "low")
            hits.append(mod.hit("PTR-KEYED-CACHE", node,
                                f"{s.func.qualname} keys {s.container} on data_ptr() "
                                f"{'of ' + ', '.join(blind) + ' without their _version ' if blind else ''}and stores "
                                f"{', '.join(sorted(s.stored)) or 'derived state'}; "
                                f"a hit {'re-launches work' if s.hit_launches else 'does not re-launch work'}",
                                severity=sev, data=base))
        elif "version" in kinds:
            # a launch on the hit path still consumes the stored derived data: like a pointer key.  Kept data
            # derived only from the module's own tensors, keyed by the _version of each, is the prepacked-
            # weight pattern: the decks write weights in place (load_state_dict, the numeric-stress scaling:
            # `tensor.copy_` under no_grad), which bumps _version, so the key sees every write (low)
            sev = "medium" if content or s.returns_stored is not None else "low"
            if sev == "medium" and _own_state_versioned(mod, s):
                sev = "low"
                base["own_state_versioned"] = sorted(s.versioned)
            hits.append(mod.hit("VERSION-KEYED-CACHE", node,
                                f"{s.func.qualname} keys {s.container} on "
                                f"{'data_ptr() and ' if 'ptr' in kinds else ''}_version and stores "
                                f"{', '.join(sorted(s.stored)) or 'derived state'} (writes through .data keep _version)",
                                severity=sev, data=base))
    return hits


def _own_state_versioned(mod: Module, s: CacheSite) -> bool:
    """A _version key over the module's own tensors only (`self.weight._version`), guarding data derived
    from those tensors alone: nothing of the call's inputs is kept, no hit returns the kept value, and
    every tensor the kept values read is one whose _version the key reads."""
    if s.kinds & {"ptr", "id", "is", BLIND, SAMPLED} or s.unversioned or not s.versioned:
        return False
    if s.returns_stored is not None and s.func.qualname in _result_functions(mod):
        return False        # the kept value is what the entry returns (a packer's getter returning it is not)
    # the module's own object: `self`, or a parameter given it (a helper's `model`, roles' owners)
    own = {"self"} | set(mod.owner_params.get(s.func.qualname, ()))
    if not all(t.split(".", 1)[0] in own and "." in t for t in s.versioned):
        return False
    if s.stored & {"content-plan"}:
        return False        # ("output", "input-*" may only say an owner is read: the reads below decide)
    for v in s.store_values:
        if _names(v) & (set(s.func.params) | set(s.func.assigns)) - own:
            return False    # a local or a parameter: something other than the versioned state itself
        read = {_tensor_text(n) for n in walk(v) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id in own}
        if read - s.versioned:
            return False
    return bool(s.store_values)


def _ptr_call(e: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _PTR_ATTRS
               for n in walk(e))


def check_ptr_compare(mod: Module) -> list[Hit]:
    """A pointer compared with a saved one to pick stored state (`st = saved[1] if saved[0] ==
    x.data_ptr() else st`): the same staleness as a data_ptr()-keyed cache, without a dict key
    (planted kimi_ptr_state).  Comparing two live tensors' pointers (an aliasing check) is not it:
    exactly one side may call data_ptr(), the other must be stored state (a name, attribute or
    subscript), and the comparison must decide a branch of an entry point."""
    hits: list[Hit] = []
    for fi in _entries(mod):
        lo, hi = fi.node.lineno, fi.node.end_lineno or fi.node.lineno
        for c in mod.of(ast.Compare):
            if not lo <= c.lineno <= hi or len(c.ops) != 1 or not isinstance(c.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
                continue
            sides = (c.left, c.comparators[0])
            ptr = [x for x in sides if _ptr_call(x)]
            other = [x for x in sides if not _ptr_call(x)]
            if len(ptr) != 1 or not other or not isinstance(other[0], (ast.Name, ast.Attribute, ast.Subscript)):
                continue
            p = mod.parent.get(c)
            while isinstance(p, (ast.BoolOp, ast.UnaryOp)):   # `a and saved[0] == x.data_ptr()`
                p = mod.parent.get(p)
            if not isinstance(p, (ast.If, ast.IfExp, ast.While)) or not any(n is c for n in walk(p.test)):
                continue
            hits.append(mod.hit("PTR-KEYED-CACHE", c,
                                f"{fi.qualname} picks stored state when a tensor's data_ptr() equals a saved "
                                f"pointer ({ast.unparse(c)[:80]}): new contents written into the same storage "
                                "are not read", severity="medium",
                                data={"function": fi.qualname, "key_kinds": ["ptr"], "comparison": ast.unparse(c)[:200]}))
            break   # one finding per function
    return hits


def _sampled(fi: FuncInfo, inputs: set[str], e: ast.AST, depth: int = 0) -> bool:
    """Is `e` a slice or sample (x[:n], x.narrow(...)) of the function's inputs?  (A module-level
    function, not a closure: a recursive closure is a reference cycle that outlives the lint.)"""
    if depth > 3:
        return False
    if isinstance(e, ast.Name):
        return any(_sampled(fi, inputs, v, depth + 1) for v in fi.assigns.get(e.id, []))
    for n in walk(e):
        if isinstance(n, ast.Subscript) and any(isinstance(s, ast.Slice) for s in walk(n.slice)):
            if _names(n.value) & (inputs | {v for v in fi.assigns if _names_derived(fi, v, inputs)}):
                return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("narrow", "index_select") \
                and _names(n.func.value) & inputs:
            return True
    return False


def check_sampled_validation(mod: Module) -> list[Hit]:
    """torch.equal(x[:n], self._saved) / (x.view(-1)[::k] == cached).all() ..."""
    hits = []
    for fi in mod.funcs.values():
        if fi.is_triton:
            continue
        inputs = set(_entry_params(fi))

        for n in fi.of(ast.Call, ast.Compare):
            pair: tuple[ast.AST, ast.AST] | None = None
            if isinstance(n, ast.Call):
                q = mod.qn(n.func) or ""
                if q in ("torch.equal", "torch.allclose") and len(n.args) >= 2:
                    pair = (n.args[0], n.args[1])
                elif isinstance(n.func, ast.Attribute) and n.func.attr in ("equal", "allclose", "eq") and n.args:
                    pair = (n.func.value, n.args[0])
            elif isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], (ast.Eq, ast.NotEq)):
                pair = (n.left, n.comparators[0])
            if not pair:
                continue
            a, b = pair
            for x, y in ((a, b), (b, a)):
                stored = mod.persistent(y, fi) or any(
                    mod.persistent(m, fi) for m in walk(y) if isinstance(m, (ast.Attribute, ast.Name)))
                if not stored:
                    stored = any(_from_persistent(mod, fi, m.id) for m in walk(y) if isinstance(m, ast.Name))
                if stored and _sampled(fi, inputs, x):
                    hits.append(mod.hit("SAMPLED-VALIDATION", n,
                                        f"{fi.qualname} validates cached input by comparing only a slice of the "
                                        f"input with a stored copy; changes outside the window go unnoticed",
                                        data={"function": fi.qualname}))
                    break
    return hits


def _names_derived(fi: FuncInfo, var: str, inputs: set[str], depth: int = 0) -> bool:
    if depth > 3:
        return False
    for v in fi.assigns.get(var, []):
        ns = _names(v)
        if ns & inputs or any(_names_derived(fi, m, inputs, depth + 1) for m in ns if m != var):
            return True
    return False


def _from_persistent(mod: Module, fi: FuncInfo, name: str, depth: int = 0) -> bool:
    if depth > 4:
        return False
    for v in fi.assigns.get(name, []):
        if _refs_persistent(mod, v, fi):
            return True
        if isinstance(v, ast.Name) and v.id != name and _from_persistent(mod, fi, v.id, depth + 1):
            return True
    return False


def _refs_persistent(mod: Module, e: ast.AST, fi: FuncInfo) -> bool:
    return any(mod.persistent(m, fi) for m in walk(e) if isinstance(m, (ast.Attribute, ast.Name)))


def check_persistent_output(mod: Module) -> list[Hit]:
    hits = []
    for fi in _entries(mod):
        for n in fi.of(ast.Return):
            if not (isinstance(n, ast.Return) and n.value is not None):
                continue
            elts = n.value.elts if isinstance(n.value, ast.Tuple) else [n.value]
            for e in elts:
                c = mod.persistent(e, fi) if isinstance(e, ast.Attribute) else None
                if c is None and isinstance(e, ast.Name):
                    for v in fi.assigns.get(e.id, []):
                        if isinstance(v, ast.Attribute):
                            c = mod.persistent(v, fi)
                if c and not c.split(".")[-1].startswith(("k_cache", "v_cache", "state", "cache")):
                    hits.append(mod.hit("PERSISTENT-OUTPUT", n,
                                        f"{fi.qualname} returns persistent storage {c}; earlier results alias later ones",
                                        data={"function": fi.qualname, "buffer": c}))
                    break
    return hits


def check_graphs(mod: Module) -> list[Hit]:
    hits: list[Hit] = []
    if "raph" not in mod.text and "replay" not in mod.text:
        return hits
    creates = [n for n in mod.of(ast.Call) if isinstance(n, ast.Call) and (mod.qn(n.func) or "").endswith(
        ("cuda.CUDAGraph", "graphs.CUDAGraph", "make_graphed_callables"))]
    captures = [n for n in mod.of(ast.Call) if isinstance(n, ast.Call) and (mod.qn(n.func) or "") in (
        "torch.cuda.graph", "torch.cuda.graphs.graph") or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                                                         and n.func.attr == "capture_begin")]
    replays = [n for n in mod.of(ast.Call) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "replay"]
    if not (creates or captures or replays):
        return hits
    sites = [s for s in find_cache_sites(mod) if s.graph or any(
        isinstance(v, ast.Name) and v.id for v in s.store_values)]
    graph_sites = [s for s in sites if s.graph]
    key_kinds: set[str] = set()
    for s in graph_sites:
        key_kinds |= s.kinds
    # key kinds of shape-keyed graph dicts are not identity; look at graph stores directly
    for fi in mod.funcs.values():
        for n in fi.of(ast.Assign):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Subscript) for t in n.targets) and _is_graph_expr(mod, n.value, fi):
                for t in n.targets:
                    if isinstance(t, ast.Subscript):
                        key_kinds |= mod.kinds(t.slice, fi) or {"other"}
    # a graph kept on self and re-captured when a saved pointer differs (`if self._x_ptr != x.data_ptr():
    # self._capture(x)`) is keyed by that pointer even though no dict holds it
    for r in replays:
        fi = mod.scope_of(r)
        if fi is not None and not (key_kinds & set(IDENT_KINDS)):
            for n in fi.of(ast.Compare):
                if isinstance(n, ast.Compare) and _ptr_call(n):
                    key_kinds.add("ptr")
                elif isinstance(n, ast.Compare) and any(isinstance(o, (ast.Is, ast.IsNot)) for o in n.ops) and not any(
                        isinstance(c, ast.Constant) for c in [n.left] + n.comparators):
                    key_kinds.add("is")
    if key_kinds & set(IDENT_KINDS):
        key_kinds.discard("other")
    copy_in = False
    for r in replays:
        fi = mod.scope_of(r)
        if fi is None:
            continue
        live = set(fi.params)
        for n in fi.of(ast.For):  # loop variables over the inputs (for dst, src in zip(static, (q, k, v)))
            if isinstance(n, ast.For) and _names(n.iter) & live:
                live |= set(_names_in_target(n.target))
        for n in fi.of(ast.Call):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "copy_" and n.args and \
                    (_names(n.args[0]) & live):
                copy_in = True
    skip_replay = [s for s in graph_sites if s.returns_stored is not None and not s.hit_launches]
    anchor = (creates or captures or replays)[0]
    data = {"key_kinds": sorted(key_kinds), "copies_inputs_in": copy_in, "n_replay_sites": len(replays),
            "n_capture_sites": len(captures) + len(creates)}
    if skip_replay:
        hits.append(mod.hit("CUDA-GRAPH-REPLAY", skip_replay[0].returns_stored,
                            "a graph-cache hit returns stored output without replaying the graph", severity="high", data=data))
    elif not replays:
        hits.append(mod.hit("CUDA-GRAPH-REPLAY", anchor, "a CUDA graph is captured but never replayed in this file",
                            severity="low", data=data))
    elif "ptr" not in key_kinds and not copy_in:
        hits.append(mod.hit("CUDA-GRAPH-REPLAY", replays[0],
                            f"CUDA graphs keyed by {'/'.join(sorted(key_kinds)) or 'nothing'} replay on the addresses captured "
                            f"at first call and the live inputs are not copied in: fresh input pointers read stale data",
                            severity="high", probe="fresh input pointers", data=data))
    elif copy_in:
        hits.append(mod.hit("CUDA-GRAPH", replays[0],
                            "CUDA graph replay after copying live inputs into the captured buffers: replay reruns "
                            "the captured kernels on current contents", data=data))
    else:
        # captured once on the caller's buffers and reused whenever their pointers match: nothing
        # reads the new contents except the captured kernels themselves, which only a probe shows
        hits.append(mod.hit("CUDA-GRAPH", replays[0],
                            f"CUDA graph captured on the caller's buffers and replayed while the "
                            f"{'/'.join(sorted(key_kinds & set(IDENT_KINDS)))} key matches, without copying the contents "
                            f"in: only the same-buffer probe shows the replay reads new contents",
                            severity="medium", data=data))
    return hits


def _retained_param(e: ast.AST, params: set[str]) -> tuple[str, bool] | None:
    """(parameter, copied) when `e` is an entry argument itself, a view, slice or conversion of it
    (x, x[...], x.contiguous(), x.T, x.float()) or a clone; copied: a .clone() is in the chain."""
    copied = False
    while True:
        if isinstance(e, ast.Name):
            return (e.id, copied) if e.id in params else None
        if isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Attribute) and e.attr in ("T", "mT", "data"):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in DERIVE_METHODS \
                and e.func.attr not in ("cat", "stack", "pad", "copy_"):
            copied |= e.func.attr == "clone"
            e = e.func.value
        else:
            return None


def _guard_reads(mod: Module, test: ast.AST, fi: FuncInfo, state: str) -> bool:
    """The if-test reads `state` (self.x is None, getattr(self, 'x', None), hasattr(self, 'x'), ...)."""
    for m in walk(test):
        if isinstance(m, (ast.Attribute, ast.Name, ast.Call)) and mod.persistent(m, fi) == state:
            return True
        if isinstance(m, ast.Call) and isinstance(m.func, ast.Name) and m.func.id == "hasattr" and len(m.args) == 2 \
                and isinstance(m.args[0], ast.Name) and f"{m.args[0].id}.{mod.const_str(m.args[1])}" == state:
            return True
    return False


def check_retained_input(mod: Module) -> list[Hit]:
    """An entry stores its argument in unset persistent state and reads that state afterwards."""
    hits = []
    for fi in _entries(mod):
        params = set(_entry_params(fi)) - {"args", "kwargs"}
        done: set[str] = set()
        for n in fi.of(ast.Assign):
            if not isinstance(n, ast.Assign) or not (src := _retained_param(n.value, params)):
                continue
            for t in n.targets:
                state = mod.persistent(t, fi)
                if not state or state in done:
                    continue
                guard = mod.parent.get(n)
                while guard is not None and guard is not fi.node and not (
                        isinstance(guard, ast.If) and any(n is b or n in walk(b) for b in guard.body)
                        and _guard_reads(mod, guard.test, fi, state)):
                    guard = mod.parent.get(guard)
                if not isinstance(guard, ast.If):
                    continue
                inside = {id(m) for m in walk(guard)}
                outside = [m for m in fi.nodes if id(m) not in inside]
                reads = [m for m in outside if isinstance(m, (ast.Attribute, ast.Name))
                         and isinstance(getattr(m, "ctx", None), ast.Load) and mod.persistent(m, fi) == state]
                # refreshed every call (a graph's static input: state.copy_(x) or state[...] = x) is the copy-in pattern
                refreshed = any(
                    (isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and m.func.attr == "copy_"
                     and mod.persistent(m.func.value, fi) == state and _names(m) & params)
                    or (isinstance(m, ast.Assign) and any(isinstance(tt, ast.Subscript) and mod.persistent(tt, fi) == state
                                                          for tt in m.targets) and _names(m.value) & params)
                    for m in outside)
                if not reads or refreshed:
                    continue
                done.add(state)
                p, copied = src
                hits.append(mod.hit("RETAINED-INPUT", n,
                                    f"{fi.qualname} stores {'a copy of ' if copied else ''}its argument '{p}' in {state} "
                                    f"only while it is unset (guard line {guard.lineno}) and reads {state} again at "
                                    f"line {reads[0].lineno}: later calls compute from the first call's tensor",
                                    data={"function": fi.qualname, "parameter": p, "state": state, "copied": copied,
                                          "guard_line": guard.lineno, "read_line": reads[0].lineno}))
    return hits


def state_inventory(mod: Module) -> list[dict[str, Any]]:
    return [s.to_dict(mod) for s in find_cache_sites(mod)]
