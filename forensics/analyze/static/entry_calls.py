"""What a call does in the entry data flow (`CallFlow`, a collaborator of `EntryFlow`): a function of the
solution run with its arguments bound, a builtin that moves elements, a method of a tensor (a view, an
in-place write, its storage, an allocation nothing wrote yet), a torch function (in-place, `out=`), a
stream made or entered, a C++ function the solution builds (what `cuda.read_cpp` says it writes and
returns), and anything the reading cannot follow, which receives what it is handed."""

from __future__ import annotations

import ast
import re
from typing import Any

from .entry_threads import (POOL_CTORS, START_NOW, THREAD_CTORS, WAIT_ALL, _first_only, _target_of, _timeout,
                            _unknown_join)
from .entry_values import _MAX, _MOVERS, _cap


_WRITES = re.compile(r"^(?!__)[a-z][a-z0-9_]*_$")     # torch's in-place methods end with one '_'
_NOT_INPLACE = frozenset({"record_stream_", "requires_grad_", "share_memory_", "retain_grad_"})
VIEW = frozenset({"view", "view_as", "reshape", "reshape_as", "t", "T", "mT", "transpose", "permute", "narrow",
                  "as_strided", "expand", "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten", "select",
                  "diagonal", "movedim", "swapaxes", "unfold", "detach", "__getitem__", "data", "real", "imag",
                  "chunk", "split", "unbind"})
MAYBE_VIEW = frozenset({"contiguous", "to", "float", "half", "bfloat16", "double", "cuda", "type_as", "int", "long"})

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

_DEPTH = 5


def _zero_size(call: ast.Call) -> bool:
    """torch.empty(0) / empty((0, n)): nothing to write."""
    for a in call.args:
        for n in ([a] + (list(a.elts) if isinstance(a, (ast.Tuple, ast.List)) else [])):
            if isinstance(n, ast.Constant) and n.value == 0 and not isinstance(n.value, bool):
                return True
    return False


class CallFlow:
    """The calls of one EntryFlow (`fl`): what each does to the values it is handed, and what it returns."""

    def __init__(self, fl: Any) -> None:
        self.fl = fl

    def eval_call(self, call: ast.Call, env: dict[str, set], fi: Any, depth: int) -> set:
        fvals = self.fl._eval(call.func, env, fi, depth)
        f = call.func
        grow = f.attr if isinstance(f, ast.Attribute) and f.attr in ("append", "extend", "insert", "add") \
            and isinstance(f.value, ast.Name) else None
        args: list[set] = []
        star: set = set()
        for a in call.args:
            if isinstance(a, ast.Starred):
                star |= self.fl._elements(self.fl._eval(a.value, env, fi, depth), fi, depth)
            else:
                args.append(self.fl._eval(a, env, fi, depth))
        if star:
            args.append(star)
            args.extend([star] * 3)
        kws: dict[str, set] = {}
        for kw in call.keywords:
            v = self.fl._eval(kw.value, env, fi, depth)
            if kw.arg:
                kws[kw.arg] = v
            else:
                for x in self.fl._elements(v, fi, depth):
                    kws.setdefault("**", set()).add(x)
        if "out" in kws:
            self.fl._write(kws["out"], call, "`out=` writes the result into it")
        if grow and args:       # a container of the function's own grows: what it yields grows with it
            item = args[-1] if grow in ("append", "add", "insert") else self.fl._elements(args[0], fi, depth)
            if item:
                name = f.value.id
                env[name] = _cap(set(env.get(name, set())) | {("seq", frozenset(_cap(set(item))))})
        if not fvals:
            q = self.fl.mod.qn(call.func)
            if q:
                fvals = {("ref", q)}
        if not fvals:           # nothing known calls it: whatever it was handed may be written (a kernel launch)
            for a in args:
                self.fl._use(a)
            for v in kws.values():
                self.fl._use(v)
            self.fl._work()
            if isinstance(f, ast.Attribute) and _unknown_join(f.attr, call):
                self.fl.thread_flow.join(set(self.fl.pend or ()))     # a join whose thread the reading cannot name: maybe these
            return set()
        out: set = set()
        for fv in list(fvals)[:_MAX]:
            out |= self.call(fv, args, kws, call, fi, depth)
        return _cap(out)

    # ------------------------------------------------------------------ calls
    def call(self, fv: tuple, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
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
                out |= self.call(f, [set(a) for a in fv[2]] + args, {**{a: set(b) for a, b in fv[3]}, **kws},
                                  call, fi, depth)
            return out
        if k == "partial":               # a partial the reference evaluation made
            p = self.fl.ev.partials.get(fv[1])
            if p:
                f, pargs, pkws = p
                out = set()
                for inner in f:
                    out |= self.call(inner, [set(a) for a in pargs] + args, {**{a: set(b) for a, b in pkws.items()}, **kws},
                                      call, fi, depth)
                return out
            return set()
        if k in ("lam", "loc", "func", "closure", "lambda"):
            return self._invoke(fv, args, kws, call, fi, depth)
        if k == "cpp":
            return self._cpp_call(fv[1], args, kws, call, fi, depth)
        if k == "tmethod":
            return self.fl.thread_flow.tmethod(fv[1], fv[2], args, kws, call, fi, depth)
        if k == "class":
            for a in args:
                self.fl._use(a)
            for v in kws.values():
                self.fl._use(v)
            return {("self", fv[1])}
        if k == "builtin":               # vars(), globals(), __import__(...): what the reference evaluation knows
            for a in args:
                self.fl._use(a)
            return self.fl.ev._apply_value(fv, args, call, self.fl._ctx(fi))
        if k == "fn-entry":              # the decorated entry itself, called from its wrapper
            node = next((f.node for f in self.fl.mod.funcs.values() if id(f.node) == fv[1]), None)
            got = next((f for f in self.fl.mod.funcs.values() if id(f.node) == fv[1]), None)
            if node is not None:
                return self._invoke(("func", got.qualname), args[1:] if got.cls else args, kws, call, got, depth)
            return set()
        for a in args:
            self.fl._use(a)
        for v in kws.values():
            self.fl._use(v)
        return set()

    def _cpp_call(self, name: str, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
                  depth: int) -> set:
        """A function of a C++ source the solution built, called from Python: the parameters it writes in
        place are written (a vector parameter's elements too), what else it is handed may be written (a
        kernel), and an allocation it returns that nothing in it wrote is unwritten memory."""
        cfn, tf = self.fl.cpp[name]
        self.fl._work()
        for i, (how, sure, _off) in tf.writes:
            if i < len(args):
                vals = set(args[i]) | self.fl._elements(args[i], fi, depth)
                self.fl._write(vals, call, f"the C++ function {cfn} it calls: {how}", sure_ok=sure)
        for a in args:
            self.fl._use(a)
        for v in kws.values():
            self.fl._use(v)
        if tf.fresh is not None and call is not None:
            a = self._alloc(call)
            self.fl.alloc_notes[a[1]] = f"the C++ function {cfn} {tf.fresh[0]}"
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
            self.fl._write(recv, at, f"`.{name}()` writes into it")
            if name in ("copy_",) and args:
                pass
            for a in args:
                self.fl._use(a)
            return {v for v in recv if v[0] in ("in", "alloc")}
        if name in _UNINIT_METHODS and any(v[0] in ("in", "alloc") for v in recv):
            if call is not None and _zero_size(call):
                return set()
            return {self._alloc(call)}
        if name in VIEW or name in STORAGE:
            for a in args:
                self.fl._use(a)
            return {v for v in recv if v[0] in ("in", "alloc")}
        if name in MAYBE_VIEW:
            return {("in", v[1], False) if v[0] == "in" else v for v in recv if v[0] in ("in", "alloc")}
        if name in ("wait_stream", "synchronize", "wait_event", "record_event", "query"):
            return set()
        # anything else: the receiver and the arguments are handed to code that may write them
        self.fl._use(recv)
        for a in args:
            self.fl._use(a)
        return set()

    def _alloc(self, call: ast.AST | None) -> tuple:
        key = id(call)
        self.fl.allocs.setdefault(key, call)
        return ("alloc", key)

    def _builtin(self, name: str, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
                 depth: int) -> set:
        if name == "setattr" and len(args) >= 3 and call is not None:
            for s in self.fl.ev.strs(args[1]) or {"*"}:
                if s == "data":
                    self.fl._write(args[0], call, "`setattr(..., 'data', ...)` writes into it")
                else:
                    self.fl._attr_store(args[0], s, call)
            self.fl._use(args[2])
            return set()
        if name == "getattr" and len(args) >= 2:
            names = self.fl.ev.strs(args[1])
            out: set = set()
            for s in names:
                out |= self.fl._attr(args[0], s)
            return out
        if name == "map" and len(args) >= 2:
            elems: set = set()
            for a in args[1:]:
                elems |= self.fl._elements(a, fi, depth)
            return {("map", frozenset(args[0]), frozenset(elems))}
        if name == "zip":
            return {("seq", frozenset({("tup", tuple(frozenset(self.fl._elements(a, fi, depth)) for a in args))}))}
        if name == "enumerate" and args:
            return {("seq", frozenset({("tup", (frozenset(), frozenset(self.fl._elements(args[0], fi, depth))))}))}
        if name == "filter" and len(args) >= 2:
            elems = self.fl._elements(args[1], fi, depth)
            for f in args[0]:
                self.call(f, [elems], {}, call, fi, depth)
            return {("seq", frozenset(elems))} if elems else set()
        if args:
            elems = self.fl._elements(args[0], fi, depth)
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
            self.fl._enter(call if call is not None else ast.Pass(), frozenset(args[0]))
            return set()
        if q == "functools.partial" and args:
            return {("pt", frozenset(args[0]), tuple(frozenset(a) for a in args[1:]),
                     tuple((a, frozenset(b)) for a, b in kws.items()))}
        if q in THREAD_CTORS and call is not None:     # the thread's target and arguments, run when it starts
            self.fl.thread_spec[id(call)] = (q, *_target_of(q, args, kws, lambda v: self.fl._elements(v, fi, depth)))
            self.fl._handed[id(call)] = [*args, *kws.values()]
            return {("thread", id(call))}
        if q in POOL_CTORS and call is not None:
            self.fl.ev.pool_kind[id(call)] = q
            return {("pool", id(call))}
        if q in START_NOW and call is not None:        # started at once, with no handle to join
            self.fl.thread_spec[id(call)] = (q, *_target_of(q, args, kws, lambda v: self.fl._elements(v, fi, depth)))
            self.fl.thread_flow.start(id(call), call, fi, depth)
            return set()
        if q in WAIT_ALL and call is not None:
            if not _timeout(call, 1) and not _first_only(call):
                futs = {v[1] for a in args[:1] for v in self.fl._elements(a, fi, depth) if v[0] == "future"}
                self.fl.thread_flow.join(futs or set(self.fl.pend or ()))
            return set()
        if q.startswith(("torch.", "triton.")):
            self.fl._work()
        if q.startswith("torch.") and _WRITES.match(last.removeprefix("_foreach_")) and last not in _NOT_INPLACE and args:
            if last.startswith("_foreach_"):       # in place on every tensor of its first argument
                self.fl._write(self.fl._elements(args[0], fi, depth), call, f"`{q}()` writes into it")
            else:                                  # torch.relu_(t), torch.Tensor.zero_(t)
                self.fl._write(args[0], call, f"`{q}()` writes into it")
            for a in args[1:]:
                self.fl._use(a)
            return set()
        if q.startswith("torch.Tensor.") and args:
            return self._method(args[0], last, args[1:], kws, call, fi, depth)
        if q.startswith("operator.") and last.strip("_") in OPERATOR_WRITES and args:
            self.fl._write(args[0], call, f"`{q}()` writes into it")
            for a in args[1:]:
                self.fl._use(a)
            return {v for v in args[0] if v[0] in ("in", "alloc")}
        for a in args:
            self.fl._use(a)
        for v in kws.values():
            self.fl._use(v)
        # what the reference evaluation knows it returns (importlib.import_module('torch'), sys.modules.get)
        return self.fl.ev._apply_value(("ref", q), args, call, self.fl._ctx(fi))

    def _invoke(self, fv: tuple, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
                depth: int) -> set:
        """A callable of the solution: its body with the parameters bound to what the arguments denote."""
        k = fv[0]
        if k in ("lam", "loc"):
            node, outer = fv[2], fv[3]
            cfi = fi if k == "lam" else self.fl._fi_of(node)
        elif k == "lambda":
            node, outer = self.fl.ev.lambdas.get(fv[1]), None
            cfi = fi
        else:
            f = self.fl.mod.funcs.get(fv[1])
            if f is None:
                return set()
            node, outer, cfi = f.node, None, f
        if node is None or depth >= _DEPTH or id(node) in self.fl._active:
            for a in args:
                self.fl._use(a)
            for v in kws.values():
                self.fl._use(v)
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
               tuple(self.fl._tctx[-1:]))
        if key in self.fl._memo:
            out, started, joined, ends = self.fl._memo[key]
            if self.fl.pend is not None:      # the same call again: the same threads started and joined
                self.fl.pend = None if ends else (self.fl.pend - joined) | started
                self.fl._joins_seen.extend(joined)
            return out
        self.fl._memo[key] = (set(), frozenset(), frozenset(), False)
        self.fl._active.add(id(node))
        before, mark = self.fl.pend, len(self.fl._joins_seen)
        try:
            out = self.fl._run_def(node, env, cfi, depth + 1)
        finally:
            self.fl._active.discard(id(node))
        after = self.fl.pend
        if before is None:           # read where no path reaches: what it starts is not known from here
            del self.fl._memo[key]
            return out
        started = frozenset() if after is None else after - before
        self.fl._memo[key] = (out, started, frozenset(self.fl._joins_seen[mark:]), after is None)
        return out
