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
import re
from typing import Any, Iterable

from .model import _target_key, main_guard

_WRITES = re.compile(r"^(?!__)[a-z][a-z0-9_]*_$")     # torch's in-place methods end with one '_'
_NOT_INPLACE = frozenset({"record_stream_", "requires_grad_", "share_memory_", "retain_grad_"})
VIEW = frozenset({"view", "view_as", "reshape", "reshape_as", "t", "T", "mT", "transpose", "permute", "narrow",
                  "as_strided", "expand", "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten", "select",
                  "diagonal", "movedim", "swapaxes", "unfold", "detach", "__getitem__", "data", "real", "imag",
                  "chunk", "split", "unbind"})
MAYBE_VIEW = frozenset({"contiguous", "to", "float", "half", "bfloat16", "double", "cuda", "type_as", "int", "long"})
_VIEW_ATTRS = frozenset({"data", "T", "mT", "real", "imag"})
#: a tensor's storage is its memory: what is written through it is written into the tensor
STORAGE = frozenset({"untyped_storage", "storage", "_typed_storage", "_storage"})
#: a dunder call is its operator: `x.__setitem__(i, v)` is `x[i] = v`, `x.__iadd__(y)` is `x += y`
DUNDER_WRITES = frozenset({"__setitem__", "__delitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                           "__ifloordiv__", "__imod__", "__ipow__", "__imatmul__", "__iand__", "__ior__", "__ixor__",
                           "__ilshift__", "__irshift__"})
#: the operator module's in-place forms: operator.setitem(x, i, v), operator.iadd(x, y), ...
OPERATOR_WRITES = frozenset({"setitem", "delitem", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow",
                             "imatmul", "iand", "ior", "ixor", "ilshift", "irshift"})
#: methods that read only metadata: calling one writes nothing and is no use of an allocation
_METADATA = frozenset({"size", "dim", "numel", "stride", "element_size", "nelement", "ndimension", "is_contiguous",
                       "get_device", "is_cuda", "storage_offset", "nbytes", "itemsize"})
UNINIT = frozenset({"torch.empty", "torch.empty_like", "torch.empty_strided"})
_UNINIT_METHODS = frozenset({"new_empty", "new_empty_strided"})
STREAM_CTORS = frozenset({"torch.cuda.Stream", "torch.cuda.streams.Stream", "torch.Stream", "torch.cuda.ExternalStream"})
CURRENT_STREAM = frozenset({"torch.cuda.current_stream", "torch.cuda.default_stream", "torch.cuda.streams.current_stream"})
STREAM_CONTEXTS = frozenset({"torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.streams.StreamContext",
                             "torch.cuda.use_stream"})
SET_STREAM = frozenset({"torch.cuda.set_stream"})
#: what starts a thread, a process or a pool of them (the thread reading: `thread_joins`, entry_flow)
THREAD_CTORS = frozenset({"threading.Thread", "threading.Timer", "multiprocessing.Process", "multiprocessing.context.Process",
                          "torch.multiprocessing.Process"})
POOL_CTORS = frozenset({"concurrent.futures.ThreadPoolExecutor", "concurrent.futures.ProcessPoolExecutor",
                        "concurrent.futures.thread.ThreadPoolExecutor", "concurrent.futures.process.ProcessPoolExecutor",
                        "multiprocessing.Pool", "multiprocessing.pool.Pool", "multiprocessing.pool.ThreadPool",
                        "multiprocessing.dummy.Pool", "torch.multiprocessing.Pool"})
START_NOW = frozenset({"_thread.start_new_thread", "_thread.start_new"})
#: what a pool hands work to (each gives a future; a multiprocessing pool's map/apply wait for their results)
POOL_SUBMIT = frozenset({"submit", "map", "apply_async", "map_async", "starmap_async", "imap", "imap_unordered"})
#: waits: a thread's or process's join, a future's result, a pool's shutdown/join/terminate
THREAD_JOIN = frozenset({"join"})
FUTURE_JOIN = frozenset({"result", "exception", "get", "wait"})
POOL_JOIN = frozenset({"shutdown", "join", "terminate"})
#: a class of the solution that subclasses one of these is a thread: `W().start()` runs `W.run`
THREAD_BASES = frozenset({"threading.Thread", "multiprocessing.Process", "multiprocessing.context.Process",
                          "torch.multiprocessing.Process"})
#: waits for a collection of futures (every one, unless told to return at the first)
WAIT_ALL = frozenset({"concurrent.futures.wait", "concurrent.futures.as_completed"})
#: calls that queue no work of their own on the current stream (events, joins, metadata)
_NO_WORK = frozenset({"record", "record_event", "wait_stream", "wait_event", "synchronize", "query", "wait", "Event",
                      "elapsed_time", "print", "len", "range", "isinstance", "getattr", "hasattr", "setattr", "size",
                      "dim", "numel", "stride", "data_ptr"})
#: builtins that carry elements from one container into another (and what `map`/`filter` apply)
_MOVERS = frozenset({"tuple", "list", "iter", "reversed", "sorted", "set", "frozenset", "zip", "enumerate", "map",
                     "filter", "next", "getattr", "any", "all", "sum", "max", "min"})
_CONSUME = frozenset({"tuple", "list", "set", "frozenset", "sorted", "any", "all", "sum", "max", "min", "next"})
_MAX = 24
_DEPTH = 5


def _cap(vals: set) -> set:
    return vals if len(vals) <= _MAX else set(list(vals)[:_MAX])


class EntryFlow:
    """The data flow of one module's graded entries, on top of its reference evaluation (`ev`)."""

    def __init__(self, ev: Any) -> None:
        self.ev = ev
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
                for wv in self._call(dv, [{("fn-entry", id(node))}], {}, d, self._def_fi(fi), 0):
                    self.pend = frozenset()
                    out |= self._call(wv, args, {}, d, fi, 0)
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
                self._join(self._spun_on(st.test, env, fi, depth))
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
                done = self._pool_members(pools)
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
                self._join({v[1]})
            elif k == "seq":
                out |= set(v[1])
            elif k == "tup":
                for part in v[1]:
                    out |= set(part)
            elif k == "map":
                for f in v[1]:
                    out |= self._call(f, [set(v[2])], {}, None, fi, depth)
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
            return self._eval_call(e, env, fi, depth)
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

    def _eval_call(self, call: ast.Call, env: dict[str, set], fi: Any, depth: int) -> set:
        fvals = self._eval(call.func, env, fi, depth)
        f = call.func
        grow = f.attr if isinstance(f, ast.Attribute) and f.attr in ("append", "extend", "insert", "add") \
            and isinstance(f.value, ast.Name) else None
        args: list[set] = []
        star: set = set()
        for a in call.args:
            if isinstance(a, ast.Starred):
                star |= self._elements(self._eval(a.value, env, fi, depth), fi, depth)
            else:
                args.append(self._eval(a, env, fi, depth))
        if star:
            args.append(star)
            args.extend([star] * 3)
        kws: dict[str, set] = {}
        for kw in call.keywords:
            v = self._eval(kw.value, env, fi, depth)
            if kw.arg:
                kws[kw.arg] = v
            else:
                for x in self._elements(v, fi, depth):
                    kws.setdefault("**", set()).add(x)
        if "out" in kws:
            self._write(kws["out"], call, "`out=` writes the result into it")
        if grow and args:       # a container of the function's own grows: what it yields grows with it
            item = args[-1] if grow in ("append", "add", "insert") else self._elements(args[0], fi, depth)
            if item:
                name = f.value.id
                env[name] = _cap(set(env.get(name, set())) | {("seq", frozenset(_cap(set(item))))})
        if not fvals:
            q = self.mod.qn(call.func)
            if q:
                fvals = {("ref", q)}
        if not fvals:           # nothing known calls it: whatever it was handed may be written (a kernel launch)
            for a in args:
                self._use(a)
            for v in kws.values():
                self._use(v)
            self._work()
            if isinstance(f, ast.Attribute) and _unknown_join(f.attr, call):
                self._join(set(self.pend or ()))     # a join whose thread the reading cannot name: maybe these
            return set()
        out: set = set()
        for fv in list(fvals)[:_MAX]:
            out |= self._call(fv, args, kws, call, fi, depth)
        return _cap(out)

    # ------------------------------------------------------------------ calls
    def _call(self, fv: tuple, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
              depth: int) -> set:
        k = fv[0]
        if k == "bm":
            return self._method(set(fv[1]), fv[2], args, kws, call, fi, depth)
        if k == "bi" or (k == "builtin" and fv[1] in ("getattr", "setattr")) or (
                k == "ref" and fv[1].startswith("builtins.") and fv[1][9:] in (*_MOVERS, "setattr")):
            return self._builtin(fv[1].split(".")[-1], args, kws, call, fi, depth)
        if k == "ref":
            return self._ref(fv[1], args, kws, call, fi, depth)
        if k == "pt":
            out: set = set()
            for f in fv[1]:
                out |= self._call(f, [set(a) for a in fv[2]] + args, {**{a: set(b) for a, b in fv[3]}, **kws},
                                  call, fi, depth)
            return out
        if k == "partial":               # a partial the reference evaluation made
            p = self.ev.partials.get(fv[1])
            if p:
                f, pargs, pkws = p
                out = set()
                for inner in f:
                    out |= self._call(inner, [set(a) for a in pargs] + args, {**{a: set(b) for a, b in pkws.items()}, **kws},
                                      call, fi, depth)
                return out
            return set()
        if k in ("lam", "loc", "func", "closure", "lambda"):
            return self._invoke(fv, args, kws, call, fi, depth)
        if k == "cpp":
            return self._cpp_call(fv[1], args, kws, call, fi, depth)
        if k == "tmethod":
            return self._tmethod(fv[1], fv[2], args, kws, call, fi, depth)
        if k == "class":
            for a in args:
                self._use(a)
            for v in kws.values():
                self._use(v)
            return {("self", fv[1])}
        if k == "builtin":               # vars(), globals(), __import__(...): what the reference evaluation knows
            for a in args:
                self._use(a)
            return self.ev._apply_value(fv, args, call, self._ctx(fi))
        if k == "fn-entry":              # the decorated entry itself, called from its wrapper
            node = next((f.node for f in self.mod.funcs.values() if id(f.node) == fv[1]), None)
            got = next((f for f in self.mod.funcs.values() if id(f.node) == fv[1]), None)
            if node is not None:
                return self._invoke(("func", got.qualname), args[1:] if got.cls else args, kws, call, got, depth)
            return set()
        for a in args:
            self._use(a)
        for v in kws.values():
            self._use(v)
        return set()

    def _cpp_call(self, name: str, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
                  depth: int) -> set:
        """A function of a C++ source the solution built, called from Python: the parameters it writes in
        place are written (a vector parameter's elements too), what else it is handed may be written (a
        kernel), and an allocation it returns that nothing in it wrote is unwritten memory."""
        cfn, tf = self.cpp[name]
        self._work()
        for i, (how, sure, _off) in tf.writes:
            if i < len(args):
                vals = set(args[i]) | self._elements(args[i], fi, depth)
                self._write(vals, call, f"the C++ function {cfn} it calls: {how}", sure_ok=sure)
        for a in args:
            self._use(a)
        for v in kws.values():
            self._use(v)
        if tf.fresh is not None and call is not None:
            a = self._alloc(call)
            self.alloc_notes[a[1]] = f"the C++ function {cfn} {tf.fresh[0]}"
            return {a}
        return set()

    def _method(self, recv: set, name: str, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
                depth: int) -> set:
        at = call if call is not None else None
        if name in _METADATA or name in ("shape", "dtype", "device"):
            return set()
        if name in ("append", "extend", "insert", "add", "update"):
            return set()      # container growth: handled where the receiver is a name (below, _grow)
        if (_WRITES.match(name) and name not in _NOT_INPLACE) or name in DUNDER_WRITES:
            self._write(recv, at, f"`.{name}()` writes into it")
            if name in ("copy_",) and args:
                pass
            for a in args:
                self._use(a)
            return {v for v in recv if v[0] in ("in", "alloc")}
        if name in _UNINIT_METHODS and any(v[0] in ("in", "alloc") for v in recv):
            if call is not None and _zero_size(call):
                return set()
            return {self._alloc(call)}
        if name in VIEW or name in STORAGE:
            for a in args:
                self._use(a)
            return {v for v in recv if v[0] in ("in", "alloc")}
        if name in MAYBE_VIEW:
            return {("in", v[1], False) if v[0] == "in" else v for v in recv if v[0] in ("in", "alloc")}
        if name in ("wait_stream", "synchronize", "wait_event", "record_event", "query"):
            return set()
        # anything else: the receiver and the arguments are handed to code that may write them
        self._use(recv)
        for a in args:
            self._use(a)
        return set()

    def _alloc(self, call: ast.AST | None) -> tuple:
        key = id(call)
        self.allocs.setdefault(key, call)
        return ("alloc", key)

    def _builtin(self, name: str, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
                 depth: int) -> set:
        if name == "setattr" and len(args) >= 3 and call is not None:
            for s in self.ev.strs(args[1]) or {"*"}:
                if s == "data":
                    self._write(args[0], call, "`setattr(..., 'data', ...)` writes into it")
                else:
                    self._attr_store(args[0], s, call)
            self._use(args[2])
            return set()
        if name == "getattr" and len(args) >= 2:
            names = self.ev.strs(args[1])
            out: set = set()
            for s in names:
                out |= self._attr(args[0], s)
            return out
        if name == "map" and len(args) >= 2:
            elems: set = set()
            for a in args[1:]:
                elems |= self._elements(a, fi, depth)
            return {("map", frozenset(args[0]), frozenset(elems))}
        if name == "zip":
            return {("seq", frozenset({("tup", tuple(frozenset(self._elements(a, fi, depth)) for a in args))}))}
        if name == "enumerate" and args:
            return {("seq", frozenset({("tup", (frozenset(), frozenset(self._elements(args[0], fi, depth))))}))}
        if name == "filter" and len(args) >= 2:
            elems = self._elements(args[1], fi, depth)
            for f in args[0]:
                self._call(f, [elems], {}, call, fi, depth)
            return {("seq", frozenset(elems))} if elems else set()
        if args:
            elems = self._elements(args[0], fi, depth)
            if name in ("next", "max", "min"):
                return elems
            if name in ("any", "all", "sum"):
                return set()
            return {("seq", frozenset(elems))} if elems else set()
        return set()

    def _ref(self, q: str, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any, depth: int) -> set:
        last = q.rsplit(".", 1)[-1]
        if q in UNINIT:
            if call is not None and _zero_size(call):
                return set()
            return {self._alloc(call)}
        if q in STREAM_CTORS:
            return {("stream", id(call))}
        if q in CURRENT_STREAM:
            return {("stream", "current")}
        if q in STREAM_CONTEXTS:               # the context that makes its stream current (entered by a with)
            return {("sctx", frozenset(args[0]) if args else frozenset())}
        if q in SET_STREAM and args:           # torch.cuda.set_stream(s): what follows runs on it
            self._enter(call if call is not None else ast.Pass(), frozenset(args[0]))
            return set()
        if q == "functools.partial" and args:
            return {("pt", frozenset(args[0]), tuple(frozenset(a) for a in args[1:]),
                     tuple((a, frozenset(b)) for a, b in kws.items()))}
        if q in THREAD_CTORS and call is not None:     # the thread's target and arguments, run when it starts
            self.thread_spec[id(call)] = (q, *_target_of(q, args, kws, lambda v: self._elements(v, fi, depth)))
            self._handed[id(call)] = [*args, *kws.values()]
            return {("thread", id(call))}
        if q in POOL_CTORS and call is not None:
            self.ev.pool_kind[id(call)] = q
            return {("pool", id(call))}
        if q in START_NOW and call is not None:        # started at once, with no handle to join
            self.thread_spec[id(call)] = (q, *_target_of(q, args, kws, lambda v: self._elements(v, fi, depth)))
            self._start(id(call), call, fi, depth)
            return set()
        if q in WAIT_ALL and call is not None:
            if not _timeout(call, 1) and not _first_only(call):
                futs = {v[1] for a in args[:1] for v in self._elements(a, fi, depth) if v[0] == "future"}
                self._join(futs or set(self.pend or ()))
            return set()
        if q.startswith(("torch.", "triton.")):
            self._work()
        if q.startswith("torch.") and _WRITES.match(last.removeprefix("_foreach_")) and last not in _NOT_INPLACE and args:
            if last.startswith("_foreach_"):       # in place on every tensor of its first argument
                self._write(self._elements(args[0], fi, depth), call, f"`{q}()` writes into it")
            else:                                  # torch.relu_(t), torch.Tensor.zero_(t)
                self._write(args[0], call, f"`{q}()` writes into it")
            for a in args[1:]:
                self._use(a)
            return set()
        if q.startswith("torch.Tensor.") and args:
            return self._method(args[0], last, args[1:], kws, call, fi, depth)
        if q.startswith("operator.") and last.strip("_") in OPERATOR_WRITES and args:
            self._write(args[0], call, f"`{q}()` writes into it")
            for a in args[1:]:
                self._use(a)
            return {v for v in args[0] if v[0] in ("in", "alloc")}
        for a in args:
            self._use(a)
        for v in kws.values():
            self._use(v)
        # what the reference evaluation knows it returns (importlib.import_module('torch'), sys.modules.get)
        return self.ev._apply_value(("ref", q), args, call, self._ctx(fi))

    def _invoke(self, fv: tuple, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
                depth: int) -> set:
        """A callable of the solution: its body with the parameters bound to what the arguments denote."""
        k = fv[0]
        if k in ("lam", "loc"):
            node, outer = fv[2], fv[3]
            cfi = fi if k == "lam" else self._fi_of(node)
        elif k == "lambda":
            node, outer = self.ev.lambdas.get(fv[1]), None
            cfi = fi
        else:
            f = self.mod.funcs.get(fv[1])
            if f is None:
                return set()
            node, outer, cfi = f.node, None, f
        if node is None or depth >= _DEPTH or id(node) in self._active:
            for a in args:
                self._use(a)
            for v in kws.values():
                self._use(v)
            return set()
        a = node.args
        params = [p.arg for p in a.posonlyargs + a.args]
        env: dict[str, set] = {}
        bound_self = False
        if k in ("func", "closure") and cfi is not None and cfi.cls is not None and params and params[0] in ("self", "cls"):
            env[params[0]] = {("self", cfi.cls)}
            params = params[1:]
            bound_self = True
        for p, v in zip(params, args):
            env[p] = set(v)
        if a.vararg is not None and len(args) > len(params):
            rest: set = set()
            for v in args[len(params):]:
                rest |= v
            env[a.vararg.arg] = {("seq", frozenset(rest))} if rest else set()
        for kname, v in kws.items():
            if kname in params or kname in [p.arg for p in a.kwonlyargs]:
                env[kname] = set(v)
            elif a.kwarg is not None:
                env.setdefault(a.kwarg.arg, set()).add(("seq", frozenset(v)))
        if outer is not None:
            env["\0outer"] = {outer} | set(outer.env.get("\0outer", ()))
        del bound_self
        key = (id(node), tuple(sorted((p, tuple(sorted(map(repr, v)))) for p, v in env.items() if p != "\0outer")),
               tuple(self._tctx[-1:]))
        if key in self._memo:
            out, started, joined, ends = self._memo[key]
            if self.pend is not None:      # the same call again: the same threads started and joined
                self.pend = None if ends else (self.pend - joined) | started
                self._joins_seen.extend(joined)
            return out
        self._memo[key] = (set(), frozenset(), frozenset(), False)
        self._active.add(id(node))
        before, mark = self.pend, len(self._joins_seen)
        try:
            out = self._run_def(node, env, cfi, depth + 1)
        finally:
            self._active.discard(id(node))
        after = self.pend
        if before is None:           # read where no path reaches: what it starts is not known from here
            del self._memo[key]
            return out
        started = frozenset() if after is None else after - before
        self._memo[key] = (out, started, frozenset(self._joins_seen[mark:]), after is None)
        return out

    # ------------------------------------------------------------------ threads
    def _tmethod(self, v: tuple, name: str, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
                 depth: int) -> set:
        """A method of a thread, a process, a pool or a future: start, submit, join, result, shutdown."""
        kind, site = v[0], v[1]
        if kind == "thread":
            if name == "start":
                self._start(site, call, fi, depth)
            elif name == "run":                   # t.run() runs the target here, in this thread
                self._run_target(site, call, fi, depth)
            elif name in THREAD_JOIN and not _short_timeout(call, 0):
                if _timeout(call, 0):            # joined, but only for a while: the replay tells whether it ended
                    self.timed_joins.setdefault(site, call)
                self._join({site})
            return set()
        if kind == "pool":
            if name in POOL_SUBMIT and call is not None and args:
                sync = self.ev.pool_kind.get(site, "").startswith(("multiprocessing", "torch.multiprocessing")) \
                    and name == "map"           # a multiprocessing pool's map waits for its results
                if name == "submit":
                    fargs, fkws = args[1:], kws
                elif name == "apply_async":
                    fargs = _positional(args[1] if len(args) > 1 else kws.get("args", set()), lambda x: self._elements(x, fi, depth))
                    fkws = {}
                else:
                    fargs, fkws = [self._elements(a, fi, depth) for a in args[1:2]], {}
                fut = id(call)
                self.thread_spec[fut] = (f"{self.ev.pool_kind.get(site, 'a pool')}.{name}", frozenset(args[0]), fargs, fkws)
                if sync:
                    self._run_target(fut, call, fi, depth)
                    return set()
                self.pool_futs.setdefault(site, set()).add(fut)
                self._start(fut, call, fi, depth)
                return {("future", fut, site)}
            if name in POOL_JOIN and not (name == "shutdown" and _false_arg(call, "wait", 0)):
                self._join(self._pool_members([site]))
            return set()
        if kind == "future" and name in FUTURE_JOIN and not (name == "wait" and _timeout(call, 0)):
            self._join({site})
        return set()

    def _start(self, site: Any, call: ast.AST | None, fi: Any, depth: int) -> None:
        """A thread (a process, a pool's task) starts: pending on this path until a join reaches it; its target
        is read now, what it does counted as the thread's."""
        info = self.threads.setdefault(site, {"node": call, "entry": self.entry, "work": False,
                                              "what": (self.thread_spec.get(site) or self._spec_of(site) or ("a thread",))[0]})
        if info["node"] is None:
            info["node"] = call
        if self.pend is not None:
            self.pend = self.pend | {site}
        self._run_target(site, call, fi, depth)

    def _run_target(self, site: Any, call: ast.AST | None, fi: Any, depth: int) -> None:
        spec = self.thread_spec.get(site) or self._spec_of(site)
        targets = [t for t in (spec[1] if spec else ()) if t[0] in ("lam", "loc", "func", "closure", "lambda", "pt",
                                                                    "partial", "ref", "bm", "cpp", "tmethod",
                                                                    "builtin", "class")]
        if site not in self.threads:
            self.threads[site] = {"node": call, "entry": self.entry, "work": False, "what": spec[0] if spec else "a thread"}
        if not targets:
            self.threads[site]["work"] = True      # a target the reading cannot name: it may do anything
            self._tctx.append(site)
            try:                                    # with what it was handed
                for a in (spec[2] if spec else ()):
                    self._use(set(a))
            finally:
                self._tctx.pop()
            return
        saved = self.pend
        self._tctx.append(site)
        self._frames.append(_Frame(barrier=True))
        try:
            for t in targets[:_MAX]:
                self.pend = saved
                self._call(t, [set(a) for a in spec[2]], {k: set(b) for k, b in spec[3].items()}, call, fi, depth)
        finally:
            self._frames.pop()
            self._tctx.pop()
        # a thread's own raise or return ends only its own path; the threads it starts join the caller's state
        self.pend = None if saved is None else saved | (self.pend or frozenset())

    def _spec_of(self, site: Any) -> tuple | None:
        """What a thread made outside the entry's reading runs (`self.t = Thread(target=self._loop)` in
        __init__, a Thread subclass's run), read with the module's reference evaluation."""
        if isinstance(site, str) and site.startswith("class:"):
            cls = site[6:]
            run = {v for v in self.ev.attr(("self", cls), "run", self.ev.ctx(None)) if v[0] == "func"}
            spec = ("a " + cls + " thread", frozenset(run), [], {})
            self.thread_spec[site] = spec
            return spec
        if self._calls_by_id is None:
            self._calls_by_id = {id(c): c for c in self.mod.of(ast.Call)}
        call = self._calls_by_id.get(site) if isinstance(site, int) else None
        if call is None:
            return None
        ctx = self.ev.ctx(self.mod.scope_of(call))
        q = next((v[1] for v in self.ev.eval(call.func, ctx) if v[0] == "ref" and v[1] in THREAD_CTORS), None)
        if q is None:
            return None
        args = [self.ev.eval(a, ctx) for a in call.args]
        kws = {k.arg: self.ev.eval(k.value, ctx) for k in call.keywords if k.arg}
        spec = (q, *_target_of(q, args, kws, lambda v: set()))
        self.thread_spec[site] = spec
        return spec

    def _join(self, sites: Iterable[Any]) -> None:
        sites = set(sites)
        if not sites:
            return
        self._joins_seen.extend(sites)
        if self.pend is not None:
            self.pend = self.pend - sites

    def _pool_members(self, pools: Iterable[Any]) -> set:
        out: set = set()
        for p in pools:
            out |= {p} | self.pool_futs.get(p, set())
        return out

    def _spun_on(self, test: ast.AST, env: dict[str, set], fi: Any, depth: int) -> set:
        """The threads and futures a while loop's test polls (`t.is_alive()`, `fut.done()`): the loop ends
        when they have."""
        out: set = set()
        for n in ast.walk(test):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("is_alive", "done", "ready"):
                out |= {v[1] for v in self._eval(n.func.value, env, fi, depth) if v[0] in ("thread", "future")}
        return out

    def _fi_of(self, node: ast.AST) -> Any:
        return next((f for f in self.mod.funcs.values() if f.node is node), None)


class _Frame:
    """A function being read: the thread states its returns hand back, and the try/with blocks around the
    statement being read that see a return (finally, a pool's with) or a raise (except) first.  A thread's
    target is read in a barrier frame: its raise ends its own path, not its starter's."""

    __slots__ = ("returns", "exits", "barrier")

    def __init__(self, barrier: bool = False) -> None:
        self.returns: list[frozenset] = []
        self.exits: list[_Exit] = []
        self.barrier = barrier


class _Exit:
    __slots__ = ("kind", "states", "pools")

    def __init__(self, kind: str, pools: list | None = None) -> None:
        self.kind = kind
        self.states: list[frozenset] = []
        self.pools = pools or []


def _paths(*states: frozenset | None) -> frozenset | None:
    """The thread state where paths meet: what may be pending on any of them (None: no path reaches)."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    out: frozenset = frozenset()
    for s in live:
        out |= s
    return out


def _target_of(q: str, args: list[set], kws: dict[str, set], elements: Any) -> tuple:
    """(target values, positional arguments, keyword arguments) of a thread constructor's call."""
    if q == "threading.Timer":
        target = kws.get("function") or (args[1] if len(args) > 1 else set())
        a = kws.get("args") or (args[2] if len(args) > 2 else set())
        kw = kws.get("kwargs") or (args[3] if len(args) > 3 else set())
    elif q in START_NOW:
        target = args[0] if args else set()
        a = args[1] if len(args) > 1 else set()
        kw = args[2] if len(args) > 2 else set()
    else:                        # Thread(group, target, name, args, kwargs) and Process alike
        target = kws.get("target") or (args[1] if len(args) > 1 else set())
        a = kws.get("args") or (args[3] if len(args) > 3 else set())
        kw = kws.get("kwargs") or (args[4] if len(args) > 4 else set())
    del kw       # keyword arguments by name are not followed: their values still reach the target's reading
    return frozenset(target), _positional(a, elements), {}


def _positional(vals: set, elements: Any) -> list[set]:
    """The positional arguments a tuple value holds (`args=(x, out)`), else its elements for each."""
    tups = [v for v in vals if v[0] == "tup"]
    if tups:
        n = max(len(t[1]) for t in tups)
        return [set().union(*(t[1][i] for t in tups if i < len(t[1]))) for i in range(n)]
    el = elements(vals) if vals else set()
    return [el] if el else []


def _const_arg(call: Any, name: str, pos: int) -> ast.AST | None:
    if not isinstance(call, ast.Call):
        return None
    kw = next((k.value for k in call.keywords if k.arg == name), None)
    if kw is not None:
        return kw
    return call.args[pos] if len(call.args) > pos and not isinstance(call.args[pos], ast.Starred) else None


def _timeout(call: Any, pos: int) -> bool:
    """A wait given a timeout (`t.join(0.1)`, `timeout=5`) may return while the thread still runs."""
    a = _const_arg(call, "timeout", pos)
    return a is not None and not (isinstance(a, ast.Constant) and a.value is None)


#: a constant join timeout below this many seconds is read as no join at all: the wait returns before any
#: real work can finish (`t.join(0.0001)`); a longer or computed one may well see the thread end
SHORT_JOIN_S = 1.0


def _short_timeout(call: Any, pos: int) -> bool:
    a = _const_arg(call, "timeout", pos)
    return isinstance(a, ast.Constant) and isinstance(a.value, (int, float)) and not isinstance(a.value, bool) \
        and a.value < SHORT_JOIN_S


def _false_arg(call: Any, name: str, pos: int) -> bool:
    a = _const_arg(call, name, pos)
    return isinstance(a, ast.Constant) and a.value is False


def _first_only(call: Any) -> bool:
    """concurrent.futures.wait(fs, return_when=FIRST_COMPLETED): returns when one has."""
    a = _const_arg(call, "return_when", 2)
    return a is not None and "FIRST" in _src(a)


def _unknown_join(name: str, call: ast.Call) -> bool:
    """A method call on a receiver the reading cannot name that waits like a join: `.join()` (no arguments:
    not str.join), `.result()`, `.shutdown()` (not wait=False)."""
    if name == "join":
        return not call.args and not call.keywords
    if name == "result":
        return True
    if name == "shutdown":
        return not _false_arg(call, "wait", 0)
    return False


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


def _zero_size(call: ast.Call) -> bool:
    """torch.empty(0) / empty((0, n)): nothing to write."""
    for a in call.args:
        for n in ([a] + (list(a.elts) if isinstance(a, (ast.Tuple, ast.List)) else [])):
            if isinstance(n, ast.Constant) and n.value == 0 and not isinstance(n.value, bool):
                return True
    return False


def _src(n: ast.AST) -> str:
    try:
        return ast.unparse(n)
    except Exception:   # noqa: BLE001 - a node unparse cannot render is only cited less precisely
        return type(n).__name__
