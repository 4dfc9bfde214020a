"""What the graded entry does with the caller's inputs and with the outputs it returns, by data flow.

The capability audit's INPUT-WRITE and OUTPUT-UNWRITTEN read the graded entry (and every callable of
the solution it reaches) as a small abstract interpretation, statement by statement, where each
expression may denote:

  ("in", param, sure)     a caller's input, or a view of it (sure: the same memory for certain; a value
                          that is the input only when no copy was needed, `.contiguous()`, is not sure)
  ("seq", vals)           a tuple, list, iterator or `*args` whose elements may denote `vals`
  ("tup", (vals, ...))    a tuple of known length (what `zip`/`enumerate` yield), element by element
  ("alloc", site)         memory torch.empty / empty_like / new_empty allocated and nothing has written
  ("stream", site)        a CUDA stream the solution made
  ("bm", recv, name)      a bound method (`t.zero_`, `getattr(t, 'zero_')`) of such a value
  ("lam"/"loc", node, env) a lambda or a nested def with the scope it closes over
  ("pt", fvals, args, kw) functools.partial of any callable
  ("map", fvals, elems)   map(f, xs): f runs on the elements when something consumes it
  ("bi", name)            a builtin that moves elements (tuple, list, zip, enumerate, map, ...)
and every value of the module's reference evaluation (`Evaluator`: imports reached by any name, the
solution's functions, classes and instances, their attributes).

So an input is followed wherever the code carries it, whatever the spelling: a loop variable over a
tuple or list of the entry's parameters (`for t in (x,)`, `for t in inputs`, `*args`, `zip`,
`enumerate`, a comprehension, `map(lambda t: ...)`), a helper given the tuple, a nested function, a
helper class's method, the decorator's wrapper that replaces the entry, a function defined by `exec` of a
constant string, `getattr(t, 'zero_')`, `functools.partial(t.zero_)`, an immediately invoked lambda.
A write is an in-place method (`zero_`, `fill_`, `copy_`, `x.data.zero_()`), an in-place torch
function (`torch._foreach_zero_`, `torch.Tensor.zero_(t)`), an index or `.data` assignment, `+=`,
or `out=`.  Look-alikes stay apart by what they denote: the solution's own state (`self.cache`), a
private copy (`x.clone()`), an output buffer it allocated.

An allocation is written when anything receives it: a kernel launch, an extension call, any call the
reading cannot follow, an in-place method, an index assignment, a store into an attribute or a
container.  One the entry returns that nothing received is OUTPUT-UNWRITTEN, whether it is returned
directly, through a local alias of `torch.empty`, `torch.__dict__['empty']`, a helper, a closure, a
lambda, a partial or a decorator's wrapper.
"""

from __future__ import annotations

import ast
from typing import Any, Iterable

from .entry_calls import CallFlow
from .entry_threads import ThreadFlow
from .entry_values import _Exit, _Frame, _MOVERS, _cap, _src
from .model import _target_key, main_guard


_VIEW_ATTRS = frozenset({"data", "T", "mT", "real", "imag"})

#: calls that queue no work of their own on the current stream (events, joins, metadata)
_NO_WORK = frozenset({"record", "record_event", "wait_stream", "wait_event", "synchronize", "query", "wait", "Event",
                      "elapsed_time", "print", "len", "range", "isinstance", "getattr", "hasattr", "setattr", "size",
                      "dim", "numel", "stride", "data_ptr"})

_CONSUME = frozenset({"tuple", "list", "set", "frozenset", "sorted", "any", "all", "sum", "max", "min", "next"})


class EntryFlow:
    """The data flow of one module's graded entries, on top of its reference evaluation (`ev`)."""

    def __init__(self, ev: Any) -> None:
        self.ev = ev
        self.call_flow = CallFlow(self)        # what a call does to the values it is handed
        self.thread_flow = ThreadFlow(self)    # threads, processes and pool tasks: started, run, joined
        self.mod = ev.mod
        self.writes: list[tuple[ast.AST, str, bool, str, str]] = []   # (node, input, sure, how, entry)
        self.attr_stores: list[tuple[ast.AST, str, str, str]] = []      # (node, input, attribute, entry)
        self.allocs: dict[int, ast.AST] = {}
        self.used: set[int] = set()
        self.entry = ""
        self._memo: dict[tuple, tuple] = {}
        self._active: set[int] = set()
        self._exec_defs = self._exec_functions()
        # the functions of the C++ sources the solution builds, by the name Python calls them (cuda.read_cpp):
        # what each does to the tensors it is handed and to the one it returns
        self.cpp: dict[str, Any] = ev.cpp_tensor_flow() if hasattr(ev, "cpp_tensor_flow") else {}
        self.alloc_notes: dict[int, str] = {}
        # streams the graded entry makes current around work: (the with or set_stream node, the streams it may
        # be (("stream", site) values, "current" for the caller's own), whether the reading knows none, entry)
        self.entered: list[tuple[ast.AST, frozenset, bool, str]] = []
        # the thread reading: what is started and not yet joined on the path being read (a set of sites: a
        # thread's or process's constructor call, a pool's submit call; None where no path reaches), the
        # frames of the functions being read (their returns, and the try/with blocks that see them), what
        # each thread site is and whether its work was read, and the sites pending when an entry returns
        self.pend: frozenset | None = frozenset()
        self._frames: list[_Frame] = []
        self.threads: dict[Any, dict[str, Any]] = {}
        self.thread_spec: dict[Any, tuple] = {}
        self.pool_futs: dict[Any, set] = {}
        self.thread_used: dict[Any, set[int]] = {}
        self._tctx: list[Any] = []
        self._joins_seen: list[Any] = []
        self.outlived: list[tuple[Any, str]] = []       # (site, entry): started and still running when it returns
        self.timed_joins: dict[Any, ast.Call] = {}      # site -> a join of it with a timeout long enough to matter
        self._calls_by_id: dict[int, ast.Call] | None = None
        self._handed: dict[int, list[set]] = {}          # a thread constructor's call -> the values handed to it

    # ------------------------------------------------------------------ entry points
    def run_entry(self, fi: Any, inputs: Iterable[str]) -> set:
        """Interpret `fi` with its caller-supplied parameters bound to the inputs; what it returns."""
        self.entry = fi.qualname
        inputs = set(inputs)
        env: dict[str, set] = {}
        node = fi.node
        a = node.args
        params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
        for i, p in enumerate(params):
            if i == 0 and fi.cls is not None and p in ("self", "cls"):
                env[p] = {("self", fi.cls)}
            elif p in inputs:
                env[p] = {("in", p, True)}
        if a.vararg is not None:
            env[a.vararg.arg] = {("seq", frozenset({("in", "*" + a.vararg.arg, True)}))}
        if a.kwarg is not None:
            env[a.kwarg.arg] = {("seq", frozenset({("in", "**" + a.kwarg.arg, True)}))}
        self.pend = frozenset()
        out = self._run_def(node, env, fi, 0)
        left = set(self.pend or ())
        # a decorated entry: the decorator's wrapper is what the caller runs, with the same arguments
        args = [set(env.get(p, set())) for p in params]
        for d in node.decorator_list:
            for dv in self._eval(d, {}, self._def_fi(fi), 0):
                for wv in self.call_flow.call(dv, [{("fn-entry", id(node))}], {}, d, self._def_fi(fi), 0):
                    self.pend = frozenset()
                    out |= self.call_flow.call(wv, args, {}, d, fi, 0)
                    left |= set(self.pend or ())
        # a thread still running when the entry returns: what it writes is not written before the return
        for site in sorted(left, key=str):
            if site in self.threads:
                self.outlived.append((site, fi.qualname))
        for site, keys in self.thread_used.items():
            if site not in left:
                self.used |= keys
        for site, vals in self._handed.items():    # a thread made and not started here: what it was handed escapes
            if site not in self.threads:
                for v in vals:
                    self._use(v)
        return out

    def _def_fi(self, fi: Any) -> Any:
        q = fi.qualname.rsplit(".", 1)[0] if "." in fi.qualname else None
        outer = self.mod.funcs.get(q) if q else None
        return outer if outer is not None and outer.cls is None else None

    def _exec_functions(self) -> dict[str, ast.FunctionDef]:
        """Functions defined by `exec` of a constant string at module level: name -> def."""
        out: dict[str, ast.FunctionDef] = {}
        for st in self.ev._module_stmts():
            for n in ast.walk(st):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "exec" and n.args:
                    code = self.mod.const_str(n.args[0])
                    tree = self.ev.exec_tree(code) if code and hasattr(self.ev, "exec_tree") else None
                    if tree is None:
                        continue
                    for d in tree.body:
                        if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            out[d.name] = d
        return out

    # ------------------------------------------------------------------ statements
    def _run_def(self, node: ast.AST, env: dict[str, set], fi: Any, depth: int) -> set:
        if isinstance(node, ast.Lambda):
            return self._eval(node.body, env, fi, depth)
        rets: set = set()
        self._frames.append(_Frame())
        try:
            self._block(node.body, env, fi, depth, rets)
        finally:
            fr = self._frames.pop()
        self.pend = _paths(*fr.returns, self.pend)     # what the function hands back, on every path it returns by
        return rets

    def _block(self, body: list[ast.stmt], env: dict[str, set], fi: Any, depth: int, rets: set) -> None:
        for st in body:
            self._stmt(st, env, fi, depth, rets)

    def _merge(self, env: dict[str, set], *others: dict[str, set]) -> None:
        for o in others:
            for k, v in o.items():
                env[k] = _cap(env.get(k, set()) | v)

    def _stmt(self, st: ast.stmt, env: dict[str, set], fi: Any, depth: int, rets: set) -> None:
        t = st.__class__
        if t is ast.Assign:
            vals = self._eval(st.value, env, fi, depth)
            for tg in st.targets:
                self._assign(tg, vals, env, fi, depth, st)
        elif t is ast.AnnAssign:
            if st.value is not None:
                self._assign(st.target, self._eval(st.value, env, fi, depth), env, fi, depth, st)
        elif t is ast.AugAssign:
            vals = self._eval(st.value, env, fi, depth)
            self._use(vals)
            tg = st.target
            base = self._eval(tg, env, fi, depth) if isinstance(tg, ast.Name) else \
                self._eval(tg.value, env, fi, depth) if isinstance(tg, (ast.Subscript, ast.Attribute)) else set()
            if not isinstance(tg, ast.Attribute) or tg.attr in _VIEW_ATTRS:
                self._write(base, st, f"`{_src(st)[:60]}` updates it in place")
        elif t is ast.Expr:
            self._eval(st.value, env, fi, depth)
        elif t is ast.Return:
            if st.value is not None:
                rets |= self._eval(st.value, env, fi, depth)
            self._leave_by_return()
        elif t is ast.Raise:
            self._eval(st.exc, env, fi, depth)
            self._leave_by_raise()
        elif t in (ast.If, ast.While):
            self._eval(st.test, env, fi, depth)
            a, b = dict(env), dict(env)
            skip = main_guard(st.test) if t is ast.If and not self.mod.name_rebound else None   # not taken on import
            p0 = self.pend
            if skip != "body":
                self._block(st.body, a, fi, depth, rets)
            if t is ast.While:
                self._block(st.body, a, fi, depth, rets)
            pa = self.pend if skip != "body" else None
            self.pend = p0
            if skip != "orelse":
                self._block(st.orelse, b, fi, depth, rets)
            pb = self.pend if skip != "orelse" else None
            self.pend = _paths(pa, pb)
            if t is ast.While:       # `while t.is_alive():` / `while not fut.done():` waits for it
                self.thread_flow.join(self.thread_flow.spun_on(st.test, env, fi, depth))
            self._merge(env, a, b)
        elif t in (ast.For, ast.AsyncFor):
            elems = self._elements(self._eval(st.iter, env, fi, depth), fi, depth)
            a = dict(env)
            for _ in range(2):       # the thread state: the loop runs (a join loop over the threads it started)
                self._assign(st.target, elems, a, fi, depth, st)
                self._block(st.body, a, fi, depth, rets)
            self._block(st.orelse, a, fi, depth, rets)
            self._merge(env, a)
        elif t in (ast.With, ast.AsyncWith):
            pools: list = []
            for it in st.items:
                v = self._eval(it.context_expr, env, fi, depth)
                for c in v:
                    if c[0] == "sctx" and _does_work(st.body):    # `with torch.cuda.stream(s):` around work
                        self._enter(st, c[1])
                    elif c[0] == "pool":                           # the block's end shuts the pool down, waiting
                        pools.append(c[1])
                if it.optional_vars is not None:
                    self._assign(it.optional_vars, v, env, fi, depth, st)
            if pools and self._frames:
                rec = _Exit("pool", pools=pools)
                self._frames[-1].exits.append(rec)
                try:
                    self._block(st.body, env, fi, depth, rets)
                finally:
                    self._frames[-1].exits.remove(rec)
                done = self.thread_flow.pool_members(pools)
                for r in rec.states:            # a return inside the block waits for the pool on its way out
                    self._to_return(r - done)
                self._joins_seen.extend(done)
                self.pend = None if self.pend is None else self.pend - done
            else:
                self._block(st.body, env, fi, depth, rets)
        elif t is ast.Try or t.__name__ == "TryStar":
            self._try(st, env, fi, depth, rets)
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef):
            env[st.name] = {("loc", id(st), st, _EnvRef(env))}
        elif t is ast.Delete:
            pass

    def _try(self, st: Any, env: dict[str, set], fi: Any, depth: int, rets: set) -> None:
        """A try statement: the handlers start from any state the body may raise in (a join only there joins
        nothing on the path that returns normally); a finally block runs on every path out, returns included."""
        p0 = self.pend
        fr = self._frames[-1] if self._frames else None
        fin = _Exit("finally") if st.finalbody and fr is not None else None
        exc = _Exit("except") if st.handlers and fr is not None else None
        for rec in (fin, exc):
            if rec is not None:
                fr.exits.append(rec)
        try:
            self._block(st.body, env, fi, depth, rets)
        finally:
            if exc is not None:
                fr.exits.remove(exc)
        pb = self.pend
        into_handler = _paths(p0, pb, *(exc.states if exc else ()))
        outs = []
        try:
            for h in st.handlers:
                self.pend = into_handler
                self._block(h.body, env, fi, depth, rets)
                outs.append(self.pend)
            self.pend = pb
            self._block(st.orelse, env, fi, depth, rets)
        finally:
            if fin is not None:
                fr.exits.remove(fin)
        normal = _paths(self.pend, *outs)
        if fin is None:
            self.pend = normal
            self._block(st.finalbody, env, fi, depth, rets)
            return
        into = _paths(normal, *fin.states)
        self.pend = into
        self._block(st.finalbody, env, fi, depth, rets)
        after = self.pend
        if into is None or after is None:        # nothing reaches it, or it leaves by itself (return/raise)
            self.pend = None
            return
        joined, started = into - after, after - into
        for r in fin.states:                      # a return inside the try: the finally block runs first
            self._to_return((r - joined) | started)
        self.pend = None if normal is None else (normal - joined) | started

    def _leave_by_return(self) -> None:
        if self.pend is not None:
            self._to_return(self.pend)
        self.pend = None

    def _to_return(self, state: frozenset) -> None:
        """A path leaves its function by a return: the innermost finally or pool block sees it first."""
        if not self._frames:
            return
        fr = self._frames[-1]
        for rec in reversed(fr.exits):
            if rec.kind in ("finally", "pool"):
                rec.states.append(state)
                return
        fr.returns.append(state)

    def _leave_by_raise(self) -> None:
        """A raise ends the path unless a handler around it (in this function or a caller, not past a
        thread's own frame) takes it: that handler starts from this state too."""
        if self.pend is not None:
            for fr in reversed(self._frames):
                rec = next((r for r in reversed(fr.exits) if r.kind == "except"), None)
                if rec is not None:
                    rec.states.append(self.pend)
                    break
                if fr.barrier:
                    break
        self.pend = None

    def _enter(self, node: ast.AST, vals: frozenset) -> None:
        streams = frozenset(v for v in vals if v[0] == "stream")
        self.entered.append((node, streams, not streams, self.entry))

    def _assign(self, tg: ast.AST, vals: set, env: dict[str, set], fi: Any, depth: int, at: ast.AST) -> None:
        if isinstance(tg, ast.Name):
            env[tg.id] = _cap(set(vals))
        elif isinstance(tg, (ast.Tuple, ast.List)):
            n = len(tg.elts)
            tups = [v for v in vals if v[0] == "tup" and len(v[1]) == n]
            rest = self._elements({v for v in vals if not (v[0] == "tup" and len(v[1]) == n)}, fi, depth)
            for i, el in enumerate(tg.elts):
                part = set(rest)
                for tv in tups:
                    part |= set(tv[1][i])
                if isinstance(el, ast.Starred):
                    self._assign(el.value, {("seq", frozenset(part))} if part else set(), env, fi, depth, at)
                else:
                    self._assign(el, part, env, fi, depth, at)
        elif isinstance(tg, ast.Subscript):
            base = self._eval(tg.value, env, fi, depth)
            self._eval(tg.slice, env, fi, depth)
            self._write(base, at, f"`{_src(tg)[:50]} = ...` writes into it")
            self._use(vals)                      # stored into a container or a tensor: received
        elif isinstance(tg, ast.Attribute):
            base = self._eval(tg.value, env, fi, depth)
            if tg.attr in ("data",):
                self._write(base, at, f"`{_src(tg)[:50]} = ...` writes into it")
            else:
                self._attr_store(base, tg.attr, at)
            self._use(vals)                      # kept on an object: it escapes the reading
        elif isinstance(tg, ast.Starred):
            self._assign(tg.value, vals, env, fi, depth, at)

    # ------------------------------------------------------------------ effects
    def _write(self, vals: set, at: ast.AST, how: str, sure_ok: bool = True) -> None:
        for v in vals:
            if v[0] == "in":
                self.writes.append((at, v[1], v[2] and sure_ok, how, self.entry))
                self._work()
            elif v[0] == "alloc":
                self._received(v[1])

    def _attr_store(self, vals: set, name: str, at: ast.AST) -> None:
        """An attribute set on a caller's input object (`x._out = y`, setattr): state kept on the caller's
        tensor, which the caller passes again (the benchmark reuses its inputs) whatever it now holds."""
        for v in vals:
            if v[0] == "in":
                self.attr_stores.append((at, v[1], name, self.entry))

    def _use(self, vals: set, depth: int = 0) -> None:
        """Values handed to something that may write them: allocations count as written."""
        if depth > 3:
            return
        for v in vals:
            k = v[0]
            if k == "alloc":
                self._received(v[1])
            elif k == "in":
                self._work()
            elif k == "seq":
                self._use(set(v[1]), depth + 1)
            elif k == "tup":
                for part in v[1]:
                    self._use(set(part), depth + 1)
            elif k == "bm":
                self._use(set(v[1]), depth + 1)
            elif k == "map":
                self._use(set(v[2]), depth + 1)

    def _received(self, key: int) -> None:
        """An allocation something received: written, by the entry's path or by the thread reading it."""
        if self._tctx:
            self._work()
            self.thread_used.setdefault(self._tctx[-1], set()).add(key)
        else:
            self.used.add(key)

    def _work(self) -> None:
        """The thread whose target is being read does work (a launch, a tensor op, a write)."""
        for site in self._tctx:
            if site in self.threads:
                self.threads[site]["work"] = True

    def _elements(self, vals: set, fi: Any, depth: int) -> set:
        """What iterating `vals` yields."""
        out: set = set()
        for v in vals:
            k = v[0]
            if k == "future":      # iterating what a pool's map gives waits for each result
                self.thread_flow.join({v[1]})
            elif k == "seq":
                out |= set(v[1])
            elif k == "tup":
                for part in v[1]:
                    out |= set(part)
            elif k == "map":
                for f in v[1]:
                    out |= self.call_flow.call(f, [set(v[2])], {}, None, fi, depth)
            elif k in ("in", "alloc"):
                out.add(v)          # iterating a tensor yields views of it
        return _cap(out)

    # ------------------------------------------------------------------ expressions
    def _eval(self, e: ast.AST | None, env: dict[str, set], fi: Any, depth: int) -> set:
        if e is None:
            return set()
        t = e.__class__
        if t is ast.Name:
            return self._lookup(e.id, env, fi)
        if t in (ast.Tuple, ast.List, ast.Set):
            parts: list[set] = []
            flat: set = set()
            starred = False
            for el in e.elts:
                if isinstance(el, ast.Starred):
                    starred = True
                    flat |= self._elements(self._eval(el.value, env, fi, depth), fi, depth)
                else:
                    p = self._eval(el, env, fi, depth)
                    parts.append(p)
                    flat |= p
            if t is ast.Tuple and not starred:
                return {("tup", tuple(frozenset(p) for p in parts))} if parts else set()
            return {("seq", frozenset(_cap(flat)))} if flat else set()
        if t is ast.Dict:
            vals: set = set()
            for k, v in zip(e.keys, e.values):
                if k is not None:
                    self._eval(k, env, fi, depth)
                vals |= self._eval(v, env, fi, depth)
            return {("seq", frozenset(_cap(vals)))} if vals else set()
        if t is ast.Attribute:
            base = self._eval(e.value, env, fi, depth)
            out = self._attr(base, e.attr)
            if e.attr in self.cpp and (not base or _target_key(e.value) in self.mod.ext_names):
                out = out | {("cpp", e.attr)}        # ext.fx(...): a function of a C++ source it built
            return out
        if t is ast.Subscript:
            base = self._eval(e.value, env, fi, depth)
            self._eval(e.slice, env, fi, depth)
            out: set = set()
            idx = e.slice.value if isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, int) else None
            for v in base:
                k = v[0]
                if k in ("in", "alloc"):
                    out.add(v)
                elif k == "seq":
                    out |= set(v[1])
                elif k == "tup":
                    if idx is not None and -len(v[1]) <= idx < len(v[1]):
                        out |= set(v[1][idx])
                    else:
                        out |= self._elements({v}, fi, depth)
            out |= self.ev.eval(e, self._ctx(fi))
            return _cap(out)
        if t is ast.Call:
            return self.call_flow.eval_call(e, env, fi, depth)
        if t is ast.Lambda:
            return {("lam", id(e), e, _EnvRef(env))}
        if t in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            inner = dict(env)
            for g in e.generators:
                elems = self._elements(self._eval(g.iter, inner, fi, depth), fi, depth)
                self._assign(g.target, elems, inner, fi, depth, e)
                for cond in g.ifs:
                    self._eval(cond, inner, fi, depth)
            if t is ast.DictComp:
                self._eval(e.key, inner, fi, depth)
                res = self._eval(e.value, inner, fi, depth)
            else:
                res = self._eval(e.elt, inner, fi, depth)
            return {("seq", frozenset(_cap(res)))} if res else set()
        if t is ast.IfExp:
            self._eval(e.test, env, fi, depth)
            return self._eval(e.body, env, fi, depth) | self._eval(e.orelse, env, fi, depth)
        if t is ast.BoolOp:
            out = set()
            for v in e.values:
                out |= self._eval(v, env, fi, depth)
            return out
        if t is ast.NamedExpr:
            v = self._eval(e.value, env, fi, depth)
            self._assign(e.target, v, env, fi, depth, e)
            return v
        if t is ast.Starred:
            return self._eval(e.value, env, fi, depth)
        if t is ast.Await:
            return self._eval(e.value, env, fi, depth)
        if t in (ast.BinOp, ast.UnaryOp, ast.Compare, ast.JoinedStr, ast.FormattedValue):
            for ch in ast.iter_child_nodes(e):
                if isinstance(ch, ast.expr):
                    self._use(self._eval(ch, env, fi, depth))
            return self.ev.eval(e, self._ctx(fi)) if t in (ast.BinOp, ast.JoinedStr) else set()
        return self.ev.eval(e, self._ctx(fi))

    def _ctx(self, fi: Any) -> Any:
        return self.ev.ctx(fi)

    def _lookup(self, name: str, env: dict[str, set], fi: Any) -> set:
        if name in env:
            return env[name]
        for v in env.get("\0outer", ()):          # the scopes a nested def or a lambda closes over
            got = v.env.get(name) if isinstance(v, _EnvRef) else None
            if got is not None:
                return got
        vals = self.ev.lookup(name, self._ctx(fi))
        if vals:
            return vals
        if name in self._exec_defs:
            d = self._exec_defs[name]
            return {("loc", id(d), d, None)}
        if name in _MOVERS:
            return {("bi", name)}
        return set()

    def _attr(self, base: set, name: str) -> set:
        out: set = set()
        if not base and name in self.cpp:          # getattr(ext, "fx"): the extension is what the reading does not know
            out.add(("cpp", name))
        mine = frozenset(v for v in base if v[0] in ("in", "alloc", "stream", "seq", "tup"))
        for v in base:
            k = v[0]
            if k in ("in", "alloc"):
                if name in _VIEW_ATTRS:
                    out.add(v)
            elif k not in ("seq", "tup", "stream", "bm", "lam", "loc", "pt", "map", "bi", "fn-entry"):
                out |= self.ev.attr(v, name)
        if mine:
            out.add(("bm", mine, name))
        return _cap(out)

    def _fi_of(self, node: ast.AST) -> Any:
        return next((f for f in self.mod.funcs.values() if f.node is node), None)


def _paths(*states: frozenset | None) -> frozenset | None:
    """The thread state where paths meet: what may be pending on any of them (None: no path reaches)."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    out: frozenset = frozenset()
    for s in live:
        out |= s
    return out


class _EnvRef:
    """A scope a nested def or lambda closes over (held by reference: later bindings show)."""

    __slots__ = ("env",)

    def __init__(self, env: dict[str, set]) -> None:
        self.env = env

    def __repr__(self) -> str:
        return f"<scope {id(self.env)}>"

    def __hash__(self) -> int:
        return id(self.env)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _EnvRef) and other.env is self.env


def _does_work(body: list[ast.stmt]) -> bool:
    """A block that queues work where it runs: a call other than an event, a join or a metadata read, or
    arithmetic on values (`y = x * 2` is a kernel on the current stream)."""
    for st in body:
        for n in ast.walk(st):
            if isinstance(n, ast.BinOp):
                return True
            if isinstance(n, ast.Call):
                f = n.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name not in _NO_WORK:
                    return True
    return False
