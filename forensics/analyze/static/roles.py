"""Where a graded entry's behaviour runs, and what its names stand for there.

An entry point may hand its call to other code of the solution: a helper function or a helper class's
method given the instance and the inputs (`return _Helper().run(self, x)`), a nested function closing
over them, the wrapper a decorator puts in the entry's place, a helper reached through a dict of
functions or an instance's `__call__`, a function defined by `exec` of a constant string (model puts
that code in the module's tree).  The rules that read what an entry does with its inputs and its state
(caches that return a stored output, call counters, branches on input values) read each of these too,
with the names bound as the entry binds them:

  inputs   the names that carry the caller's inputs there: a parameter given one (or a value computed
           from one), an input the function closes over
  owners   the parameters given the entry's instance (`owner` in `run(self, owner, x)`): state kept on
           them is the instance's, kept across calls as `self.x` is (model.Module.owner_params)
  result   what the function returns is what the entry returns (the entry itself, `return helper(...)`,
           `out = helper(...); return out`, a decorator's wrapper)

Calls are resolved by the module's shared evaluation (evaluation.Evaluator, passed in: aliases,
class attributes, instances, closures, partials, decorators), as the capability audit resolves them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from .evaluation import evaluator
from .model import FuncInfo, Module, _entries, _entry_params, attr_read, walk

#: what a tensor tells without its values: a name read only through these carries no input values
META_ATTRS = frozenset(("shape", "size", "dim", "ndim", "dtype", "device", "numel", "stride", "is_contiguous",
                        "is_cuda", "requires_grad", "layout", "data_ptr", "element_size", "nelement"))
_MAX_ROLES = 200
_MAX_DEPTH = 5


@dataclass
class Role:
    fi: FuncInfo
    inputs: dict[str, frozenset[str]] = field(default_factory=dict)   # name -> the entry's inputs it carries
    owners: set[str] = field(default_factory=set)
    result: bool = False
    entry: str = ""
    via: str = ""          # how the entry reaches it: "entry", "call", "closure", "decorator"
    depth: int = 0


def value_names(mod: Module, e: ast.AST, names: Any) -> set[str]:
    """Which of `names` `e` reads the values of (not only the shape, dtype or length): `x.shape[0]`,
    `getattr(x, 'dtype')`, `len(x)` read none."""
    out = set()
    for n in (m for m in walk(e) if m.__class__ is ast.Name and m.id in names):
        p = mod.parent.get(n)
        if isinstance(p, ast.Attribute) and p.attr in META_ATTRS:
            continue
        if isinstance(p, ast.Call) and isinstance(p.func, ast.Name) and p.func.id in ("len", "isinstance", "type"):
            continue
        if isinstance(p, ast.Call) and p.args and p.args[0] is n:
            read = attr_read(mod, p)
            if read is not None and read[1] in META_ATTRS:
                continue
        out.add(n.id)
    return out


def input_aliases(mod: Module, fi: FuncInfo, inputs: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """The names carrying input values in `fi` (`inputs`) and the locals computed from them (``xf =
    x.float()``, ``args = (q, k)``), each with the entry inputs it carries, to a fixpoint.  A local
    computed from an input's shape or dtype only (``n = q.shape[-1]``) carries none."""
    out = dict(inputs)
    while True:
        more = {}
        for name, vals in fi.assigns.items():
            if name in out:
                continue
            read = set().union(*(value_names(mod, v, out) for v in vals))
            if read:
                more[name] = frozenset().union(*(out[r] for r in read))
        if not more:
            return out
        out.update(more)


def roles(mod: Module, ev: Any) -> dict[str, Role]:
    """Every function that runs as part of a graded entry's call, by qualname (computed once per module;
    `ev` is the module's shared evaluation).  Also fills `mod.owner_params`."""
    got = mod.__dict__.get("_fx_roles")
    if got is not None:
        return got
    out: dict[str, Role] = {}
    mod.__dict__["_fx_roles"] = out
    todo: list[Role] = []

    def add(fi: FuncInfo, inputs: dict[str, frozenset[str]], owners: set[str], result: bool, entry: str, via: str,
            depth: int) -> None:
        if fi.is_triton or depth > _MAX_DEPTH or (fi.qualname not in out and len(out) >= _MAX_ROLES):
            return
        r = out.get(fi.qualname)
        if r is None:
            r = out[fi.qualname] = Role(fi, {}, set(), False, entry, via, depth)
        before = (dict(r.inputs), set(r.owners), r.result)
        for k, v in inputs.items():
            r.inputs[k] = r.inputs.get(k, frozenset()) | v
        r.owners |= owners
        r.result = r.result or result
        if (dict(r.inputs), set(r.owners), r.result) != before or depth == 0:
            todo.append(r)

    for fi in _entries(mod):
        params = _entry_params(fi)
        own = {fi.params[0]} if fi.cls and fi.params and fi.params[0] in ("self", "cls") else set()
        add(fi, {p: frozenset((p,)) for p in params}, own, True, fi.qualname, "entry", 0)
        for w, bind in _decorator_wrappers(mod, ev, fi):
            add(w, *bind, True, fi.qualname, "decorator", 1)
    seen = 0
    while todo and seen < 4 * _MAX_ROLES:
        seen += 1
        r = todo.pop()
        fi = r.fi
        alias = input_aliases(mod, fi, {k: v for k, v in r.inputs.items()})
        owners = r.owners | ({fi.params[0]} if fi.cls and fi.params and fi.params[0] in ("self", "cls") else set())
        for c in fi.of(ast.Call):
            returned = r.result and returns_call(mod, fi, c)
            for g, bound in callees_of(mod, ev, fi, c):
                if g is fi:
                    continue
                ins, own = _bind_args(mod, g, c, bound, alias, owners)
                add(g, ins, own, returned, r.entry, "call", r.depth + 1)
                # a decorated helper runs as the wrapper its decorator put in its place: the wrapper's
                # parameters carry what the call binds to the helper's
                for w, (wins, wown) in _decorator_wrappers(mod, ev, g) if g.node.decorator_list else ():
                    carried = {wp: frozenset().union(*(ins.get(e, frozenset()) for e in eps)) for wp, eps in wins.items()}
                    add(w, {k: v for k, v in carried.items() if v}, wown if own else set(), returned, r.entry,
                        "decorator", r.depth + 2)
        for g in _nested(mod, fi):   # a nested def closes over the names of the function it is defined in
            reads = {n.id for n in walk(g.node) if n.__class__ is ast.Name and isinstance(n.ctx, ast.Load)}
            local = set(g.params) | set(g.assigns)
            ins = {k: v for k, v in alias.items() if k in reads and k not in local}
            own = {o for o in owners if o in reads and o not in local}
            if ins or own:
                add(g, ins, own, False, r.entry, "closure", r.depth + 1)
    for q, r in out.items():
        own = frozenset(o for o in r.owners if o in r.fi.params and o not in ("self", "cls"))
        if own:
            mod.owner_params[q] = own
            r.fi.__dict__.pop("_aliases", None)      # persistent() answers change with the owners
    for r in out.values():        # a name that carries the instance is not an input
        for o in r.owners:
            r.inputs.pop(o, None)
    return out


def bind(mod: Module) -> dict[str, Role]:
    """The roles of `mod` with its shared evaluation (the entry point for the rule families)."""
    got = mod.__dict__.get("_fx_roles")
    if got is not None:
        return got
    return roles(mod, evaluator(mod))


def _nested(mod: Module, fi: FuncInfo) -> list[FuncInfo]:
    pre = fi.qualname + "."
    return [g for g in mod.funcs.values() if g.qualname.startswith(pre) and "." not in g.qualname[len(pre):]]


def returns_call(mod: Module, fi: FuncInfo, c: ast.Call) -> bool:
    """The call's value is what `fi` returns: `return f(...)`, or `out = f(...)` ... `return out`."""
    st = mod.parent.get(c)
    if isinstance(st, ast.Return):
        return True
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
        name = st.targets[0].id
        return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Name) and n.value.id == name
                   for n in fi.of(ast.Return))
    return False


def callees_of(mod: Module, ev: Any, fi: FuncInfo, c: ast.Call) -> list[tuple[FuncInfo, bool]]:
    """The solution's functions a call runs, each with whether it is called as a bound method (its first
    parameter is the receiver, not the first argument)."""
    out: dict[str, tuple[FuncInfo, bool]] = {}
    for g in mod.callees(c, fi):
        out[g.qualname] = (g, g.cls is not None and isinstance(c.func, ast.Attribute) and not _static(g))
    try:
        vals = ev.eval(c.func, ev.ctx(fi))
    except RecursionError:
        vals = set()
    recv = _receiver(c)
    unbound = recv is not None and {v[0] for v in _eval(ev, recv, fi)} == {"class"}
    for v in vals:
        q = None
        if v[0] in ("func", "closure"):
            q = v[1]
        elif v[0] == "self":                               # an instance of the solution's class called: __call__
            q = ev.methods.get(v[1], {}).get("__call__")
            if q and q in mod.funcs:
                out.setdefault(q, (mod.funcs[q], True))
            continue
        g = mod.funcs.get(q) if q else None
        if g is not None and g.qualname not in out:
            out[g.qualname] = (g, g.cls is not None and recv is not None and not unbound and not _static(g)
                               and g.params[:1] in (["self"], ["cls"]))
    return list(out.values())


def _eval(ev: Any, e: ast.AST, fi: FuncInfo) -> set:
    try:
        return ev.eval(e, ev.ctx(fi))
    except RecursionError:
        return set()


def _receiver(c: ast.Call) -> ast.AST | None:
    f = c.func
    if isinstance(f, ast.Attribute):
        return f.value
    if isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == "getattr" and f.args:
        return f.args[0]
    return None


def _static(g: FuncInfo) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in g.node.decorator_list)


def _bind_args(mod: Module, g: FuncInfo, c: ast.Call, bound: bool, alias: dict[str, frozenset[str]],
               owners: set[str]) -> tuple[dict[str, frozenset[str]], set[str]]:
    """What the parameters of `g` carry at this call: the entry inputs an argument's values come from, and
    the parameters given an owner (the entry's instance, or the receiver when it is one)."""
    a = g.node.args
    params = [p.arg for p in a.posonlyargs + a.args]
    ins: dict[str, frozenset[str]] = {}
    own: set[str] = set()
    if bound and params:
        recv = _receiver(c)
        if isinstance(recv, ast.Name) and recv.id in owners:
            own.add(params[0])
        params = params[1:]
    pairs = [(p, e) for p, e in zip(params, c.args) if not isinstance(e, ast.Starred)]
    kw = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    pairs += [(k.arg, k.value) for k in c.keywords if k.arg in kw]
    for p, e in pairs:
        if isinstance(e, ast.Name) and e.id in owners:
            own.add(p)
            continue
        read = value_names(mod, e, alias)
        if read:
            ins[p] = frozenset().union(*(alias[n] for n in read))
    if a.vararg is not None and len(c.args) > len(params):
        rest = set()
        for e in c.args[len(params):]:
            for n in value_names(mod, e, alias):
                rest |= alias[n]
        if rest:
            ins[a.vararg.arg] = frozenset(rest)
    return ins, own


def _decorator_wrappers(mod: Module, ev: Any, fi: FuncInfo) -> list[tuple[FuncInfo, tuple[dict, set]]]:
    """The functions a decorator of the entry puts in its place (the wrapper a decorator returns, through
    a decorator factory too), each with its parameters bound as the entry's are: the caller's arguments."""
    out = []
    if not fi.node.decorator_list:
        return out
    scope = mod.scope_of(fi.node)
    params = [p.arg for p in fi.node.args.posonlyargs + fi.node.args.args]
    entry_in = set(_entry_params(fi))
    for d in fi.node.decorator_list:
        vals = _eval(ev, d, scope)
        wrappers: set = set()
        for v in vals:
            if v[0] in ("func", "closure"):
                try:
                    wrappers |= ev._returns(v, [set()], ev.ctx(scope))
                except RecursionError:
                    pass
        for w in wrappers:
            g = mod.funcs.get(w[1]) if w[0] in ("func", "closure") else None
            if g is None or g is fi:
                continue
            wa = g.node.args
            wparams = [p.arg for p in wa.posonlyargs + wa.args]
            ins: dict[str, frozenset[str]] = {}
            own: set[str] = set()
            for p, ep in zip(wparams, params):
                if ep in entry_in:
                    ins[p] = frozenset((ep,))
                elif fi.cls and ep == params[0]:
                    own.add(p)
            if wa.vararg is not None and len(wparams) < len(params):
                ins[wa.vararg.arg] = frozenset(p for p in params[len(wparams):] if p in entry_in)
            out.append((g, (ins, own)))
    return out


def decorated_runs(mod: Module, ev: Any, fi: FuncInfo) -> tuple[list[FuncInfo], bool]:
    """What a call of the decorated `fi` runs: the wrappers its decorators put in its place (empty where no
    decorator resolves to a function of the module: `@torch.no_grad()`, a class) and whether `fi`'s own
    body may still run.  It may unless every wrapper resolved and the function handed to the decorator is
    used for nothing but `functools.wraps`/`update_wrapper` (copying its name): a wrapper that never calls,
    stores or passes on the original replaces the body entirely."""
    wrappers = [w for w, _ in _decorator_wrappers(mod, ev, fi)]
    if not wrappers or len(wrappers) < len(fi.node.decorator_list):
        return wrappers, True
    return wrappers, any(_original_used(mod, w) for w in wrappers)


def _original_used(mod: Module, w: FuncInfo) -> bool:
    """Does anything in the decorator functions enclosing wrapper `w` use the parameters of the one that
    returns it (the function decorated: a factory's outer arguments are settings) otherwise than as the
    argument of `functools.wraps` or `functools.update_wrapper`?  No enclosing function: the original may
    be reached some other way (True)."""
    parts = w.qualname.split(".")
    outers = [mod.funcs[q] for q in (".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)) if q in mod.funcs]
    if not outers:
        return True
    params = set(outers[0].params)
    for o in outers:
        for n in walk(o.node):
            if n.__class__ is not ast.Name or n.id not in params or not isinstance(n.ctx, ast.Load):
                continue
            call = mod.parent.get(n)
            if isinstance(call, ast.Call) and n in call.args and (mod.qn(call.func) or "").split(".")[-1] in (
                    "wraps", "update_wrapper"):
                continue
            return True
    return False


def callees(mod: Module, fi: FuncInfo, c: ast.Call) -> list[FuncInfo]:
    """The solution's functions a call in `fi` runs, resolved by the module's shared evaluation."""
    return [g for g, _ in callees_of(mod, evaluator(mod), fi, c)]


def result_functions(mod: Module) -> set[str]:
    """The functions whose return value is a graded entry's (the entries included)."""
    return {q for q, r in bind(mod).items() if r.result}

