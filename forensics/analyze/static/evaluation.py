"""The abstract interpretation of one module (`Evaluator`): what each expression may denote, by meaning
rather than spelling (import aliases, locals, class and instance attributes, closures, getattr with built
names, `__dict__`/`vars()`/`globals()`, `sys.modules`, partials, lambdas, decorators, calls into the
module's own helpers with their arguments bound, code given to `exec` as a constant string, the paths the
code builds).  The environments it reads are bound by `bindings.Bindings`.  `evaluator(mod)` is the one
evaluation every detector shares and `resolve_call` the qualified name of a call; the capability sinks
are read on top of it (capabilities.Auditor and its collaborators, cap_*.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, Iterable

from .bindings import Bindings
from .entry_threads import POOL_CTORS, POOL_SUBMIT, THREAD_BASES, THREAD_CTORS
from .model import _deco_func, _target_key
from .values import Cap, Ctx, Val, _MAX_VALS


#: the grader's and the reference's own modules: their data (a tolerance table, the stress cases, the
#: L2 scratch) is the grade, whatever writes it
GRADER_ROOTS = frozenset({"reference", "check", "benchmark", "shapes", "src", "eval", "__main__", "sota"})

#: builtins that hand on the elements of what they are given
_ELEMENT_MOVERS = frozenset({"list", "tuple", "sorted", "iter", "reversed", "set", "frozenset"})

#: constructors of a CUDA stream of the solution's own, the caller's stream, a CUDA event
STREAM_CTORS = frozenset({"torch.cuda.Stream", "torch.cuda.streams.Stream", "torch.Stream", "torch.cuda.ExternalStream"})
CURRENT_STREAM = frozenset({"torch.cuda.current_stream", "torch.cuda.default_stream", "torch.cuda.streams.current_stream"})
EVENT_CTORS = frozenset({"torch.cuda.Event", "torch.cuda.streams.Event", "torch.Event"})

CUDA_LIBS = re.compile(r"(?i)(cuda|nvrtc|cublas|cudnn|cufft|curand|cusparse|nvjitlink|nccl|nvidia|nvml|cutlass|libc\.so|libm\.so)")
_LIBC = re.compile(r"(?i)\blib[cm]\.so")
#: the value a CUDA library loaded through ctypes is (its functions: attributes of it)
CUDA_HANDLE = "ctypes.<cuda>"
DLL_LOADERS = frozenset({"ctypes.CDLL", "ctypes.PyDLL", "ctypes.WinDLL", "ctypes.cdll.LoadLibrary",
                         "ctypes.pydll.LoadLibrary", "ctypes.windll.LoadLibrary", "ctypes.LibraryLoader"})

_BUILTINS = frozenset({"setattr", "getattr", "delattr", "hasattr", "vars", "globals", "locals", "exec", "eval", "compile",
                       "__import__", "open", "id", "type", "object", "print", "super", "isinstance", "callable",
                       "staticmethod", "classmethod", "property", "str"})
#: wrappers a class attribute is read through: `staticmethod(f)` and `classmethod(f)` are f when called
_DESCRIPTOR_WRAPPERS = frozenset({"staticmethod", "classmethod", "builtins.staticmethod", "builtins.classmethod"})

#: a part of a built path the reading does not know (a parameter, sys.path[i]): cuda's reading of C++ strings
#: uses the same mark, and `_path_strings` drops it with the separator after it
_UNKNOWN_PART = "\x00"
_CWD_CALLS = frozenset({"os.getcwd", "os.getcwdb", "pathlib.Path.cwd"})
_IMPORT_DIR_CALLS = frozenset({"site.getsitepackages", "site.getusersitepackages", "sysconfig.get_path",
                               "site.getuserbase"})
_TEMP_DIR_CALLS = frozenset({"tempfile.gettempdir", "tempfile.mkdtemp"})
_SAME_PATH_CALLS = frozenset({"os.path.abspath", "os.path.realpath", "os.path.normpath", "os.path.expanduser",
                              "os.path.expandvars", "os.fspath", "builtins.str", "os.fsdecode", "os.fsencode"})
#: pathlib.Path methods that give another path, and those that read or write the file it names
_PATH_METHODS = frozenset({"joinpath", "with_name", "with_suffix", "resolve", "absolute", "expanduser"})

_PATH_FILE_METHODS = frozenset({"write_text", "write_bytes", "open", "read_text", "read_bytes", "touch", "unlink",
                                "mkdir", "rename", "replace", "symlink_to"})


def _dirname(p: str) -> str:
    """The folder of a path the code built ("." for a bare name, which is relative to the working folder)."""
    p = p.rstrip("/") or p
    return p.rsplit("/", 1)[0] or "/" if "/" in p else "."


class Evaluator:
    """The abstract interpretation of one module: environments, then every capability sink."""

    def __init__(self, mod: Any, problem: str | None, blobs: Iterable[Any] = ()) -> None:
        self.mod = mod
        self.problem = problem
        self.blobs = list(blobs)
        self.lambdas: dict[int, ast.Lambda] = {}
        self.partials: dict[int, tuple[frozenset, list[frozenset], dict[str, frozenset]]] = {}
        self.partial_calls: dict[int, ast.Call] = {}     # the functools.partial(...) call of each partial
        self.closures: dict[int, dict[str, frozenset]] = {}
        self.dict_lits: dict[int, tuple[ast.Dict, "Ctx"]] = {}   # ("dictlit", key): a dict display and where it is
        self.module_env: dict[str, set] = {}
        self.func_env: dict[str, dict[str, set]] = {}
        self.class_attr: dict[str, dict[str, set]] = {}
        self.self_attr: dict[str, dict[str, set]] = {}
        self.methods: dict[str, dict[str, str]] = {}
        self.caps: list[Cap] = []
        self.streams: list[tuple[ast.AST, str, ast.AST]] = []   # CUDA streams the solution makes: (site, ctor, call)
        self.pool_kind: dict[int, str] = {}        # a pool's constructor call -> what it constructs
        self.thread_sites: list[tuple[ast.AST, str, ast.AST]] = []   # threads, processes, pools: (site, ctor, call)
        self.legit: list[tuple[str, str, int | None, str]] = []
        self.exec_classes: dict[str, ast.ClassDef] = {}     # classes defined by code run from a string
        self._seen: set[tuple] = set()
        self._call_memo: set[tuple] = set()
        self._origin: dict[int, ast.AST] = {}     # a call made up for a partial -> the call site
        self._kept: list[ast.AST] = []              # calls made up here, kept alive while their ids are keys
        self._exec_dead: set[int] = set()           # nodes of exec'd strings import never runs (a __main__ test)
        self._exec_trees: list[ast.AST] = []        # the exec'd trees, kept alive while their ids are keys
        self.exec_sites: list[tuple[ast.AST, ast.AST]] = []     # (exec'd tree, the module line that runs it)
        self.imported_roots = {v.split(".")[0] for v in mod.aliases.values()} | set(mod.aliases)
        self.bindings = Bindings(self)      # the environments, bound before anything is evaluated
        self.bindings.build()

    def _module_stmts(self) -> Iterable[ast.stmt]:
        stack = list(self.mod.tree.body)
        while stack:
            st = stack.pop(0)
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(st, ast.ClassDef):
                continue
            yield st
            for sub in ("body", "orelse", "finalbody"):
                stack.extend(getattr(st, sub, []) or [])
            for h in getattr(st, "handlers", []) or []:
                stack.extend(h.body)

    # ------------------------------------------------------------------ evaluation
    def lookup(self, name: str, ctx: "Ctx") -> set:
        if ctx.binding is not None and name in ctx.binding:
            return set(ctx.binding[name])
        fi = ctx.fi
        if name in ("self", "cls") and fi is not None and fi.cls is not None and fi.params and fi.params[0] == name:
            return {("self", fi.cls)}
        if fi is not None and name not in fi.globals_:
            env = self.func_env.get(fi.qualname, {})
            if name in env:
                return env[name]
            if name in fi.params:
                return set()
            # closures: the enclosing functions' locals
            q = fi.qualname
            while "." in q:
                q = q.rsplit(".", 1)[0]
                outer = self.mod.funcs.get(q)
                if outer is None:
                    continue
                if ctx.outer is not None and name in ctx.outer:
                    return set(ctx.outer[name])
                oenv = self.func_env.get(q, {})
                if name in oenv:
                    return oenv[name]
                if name in outer.params:
                    return set()
                for f2 in self.mod.funcs.values():     # a sibling nested def of the outer function
                    if f2.qualname == f"{q}.{name}":
                        return {("func", f2.qualname)}
            for f2 in self.mod.funcs.values():          # a def nested in this function
                if f2.qualname == f"{fi.qualname}.{name}":
                    return {("func", f2.qualname)}
        if ctx.outer is not None and name in ctx.outer:
            return set(ctx.outer[name])
        if name in self.module_env:
            return self.module_env[name]
        if name in _BUILTINS:
            return {("builtin", name)}
        if name in ("self", "cls") and fi is not None and fi.cls is not None:
            return {("self", fi.cls)}
        if name == "__file__":          # the solution's own file, in the folder the grader imports it from
            return {("path", "./" + Path(self.mod.filename or "solution.py").name)}
        return set()

    def strs(self, vals: set) -> set[str]:
        return {v[1] for v in vals if v[0] == "str"}

    @staticmethod
    def path_texts(vals: set) -> set[str]:
        """The paths a value may name: constant strings and the paths the code builds (see ("path", ...))."""
        return {v[1] for v in vals if v[0] in ("str", "path") and isinstance(v[1], str)}

    def _path_value(self, parts: list[set], join: str = "/", kind: str | None = None) -> set:
        """The path `parts` joined make (os.path.join, `/`, `+`, an f-string): ("str", s) where every part is
        a constant string, else ("path", s) with each unknown part "\x00"; nothing when no part is known."""
        texts = [self.path_texts(p) or {_UNKNOWN_PART} for p in parts]
        if all(t == {_UNKNOWN_PART} for t in texts):
            return set()
        out = {""}
        for i, t in enumerate(texts):
            nxt = set()
            for a in out:
                for b in t:
                    if join == "/" and i:
                        nxt.add(b if b.startswith("/") else (a.rstrip("/") + "/" + b if a else b))
                    else:
                        nxt.add(a + b)
            out = nxt
            if len(out) > 16:
                return set()
        exact = all(any(v[0] == "str" for v in p) and not any(v[0] == "path" for v in p) for p in parts)
        return {(kind or ("str" if exact else "path"), x) for x in out}

    def ctx(self, fi: Any) -> "Ctx":
        """A fresh evaluation context in `fi` (None: module level), for readers built on this evaluation."""
        return Ctx(fi, None, 0)

    def eval(self, e: ast.AST | None, ctx: "Ctx") -> set:
        if e is None or ctx.depth > 6:
            return set()
        t = e.__class__
        if t is ast.Constant:
            if isinstance(e.value, bytes):     # b"..." names files and writes text as a str does
                return {("str", e.value.decode("latin-1"))}
            return {("str", e.value)} if isinstance(e.value, str) else set()
        if t is ast.Name:
            return self.lookup(e.id, ctx)
        if t is ast.Attribute:
            out: set = set()
            for v in self.eval(e.value, ctx):
                out |= self.attr(v, e.attr, ctx)
            return out
        if t is ast.Subscript:
            out = set()
            keys = self.strs(self.eval(e.slice, ctx))
            for v in self.eval(e.value, ctx):
                for k in keys:
                    out |= self.item(v, k)
                if not keys and v == ("ref", "sys.modules") and not isinstance(e.slice, ast.Constant):
                    out.add(("anymod",))        # sys.modules[name], the name chosen at run time
            return out
        if t is ast.Dict:     # a dict display with constant keys (a table of functions): its entries by key
            return _dict_display(self, e, ctx)
        if t is ast.Call:
            return self.call_value(e, ctx)
        if t is ast.JoinedStr:
            s = self.mod.const_str(e)
            if s is not None:
                return {("str", s)}
            parts: list[set[str]] = []
            vparts: list[set] = []
            known = True
            for v in e.values:
                if isinstance(v, ast.Constant):
                    parts.append({str(v.value)})
                    vparts.append({("str", str(v.value))})
                elif isinstance(v, ast.FormattedValue):
                    vals = self.eval(v.value, ctx)
                    ss = self.strs(vals)
                    known = known and bool(ss) and not any(x[0] == "path" for x in vals)
                    parts.append(ss)
                    vparts.append(vals)
            if known:
                return {("str", s) for s in _product(parts)}
            return {v for v in self._path_value(vparts, "") if v[0] == "path"}     # f"{os.getcwd()}/torch.py"
        if t is ast.BinOp and isinstance(e.op, ast.Add):
            la, ra = self.eval(e.left, ctx), self.eval(e.right, ctx)
            a, b = self.strs(la), self.strs(ra)
            if a and b and not any(v[0] == "path" for v in la | ra):
                return {("str", x + y) for x in a for y in b} if len(a) * len(b) <= 16 else set()
            if any(v[0] == "path" for v in la | ra) or (a or b):
                return {v for v in self._path_value([la, ra], "") if v[0] == "path"}   # dir + "/sitecustomize.py"
            return set()
        if t is ast.BinOp and isinstance(e.op, ast.Div):           # pathlib: Path.cwd() / "torch.py"
            la = self.eval(e.left, ctx)
            if any(v[0] == "path" or v == ("ref", "pathlib.Path") for v in la):
                return {("ref", "pathlib.Path")} | self._path_value([la, self.eval(e.right, ctx)], kind="path")
            return set()
        if t is ast.BinOp and isinstance(e.op, ast.Mod) and isinstance(e.left, ast.Constant) \
                and isinstance(e.left.value, str) and "%s" in e.left.value:     # "%s/usercustomize.py" % d
            fill = e.right.elts if isinstance(e.right, ast.Tuple) else [e.right]
            chunks = e.left.value.split("%s")
            if len(chunks) != len(fill) + 1:
                return set()
            vparts = [{("str", chunks[0])}]
            for f, c in zip(fill, chunks[1:]):
                vparts += [self.eval(f, ctx), {("str", c)}]
            return self._path_value(vparts, "")
        if t is ast.Lambda:
            self.lambdas[id(e)] = e
            if ctx.binding or ctx.outer:
                self.closures[id(e)] = {**(ctx.outer or {}), **(ctx.binding or {})}
            return {("lambda", id(e))}
        if t is ast.IfExp:
            return self.eval(e.body, ctx) | self.eval(e.orelse, ctx)
        if t is ast.BoolOp:
            out = set()
            for v in e.values:
                out |= self.eval(v, ctx)
            return out
        if t is ast.NamedExpr:
            return self.eval(e.value, ctx)
        if t is ast.Starred:
            return self.eval(e.value, ctx)
        return set()

    def attr(self, v: Val, name: str, ctx: "Ctx | None" = None) -> set:
        k = v[0]
        if k == "ref":
            if name == "__dict__":
                return {("dict", v[1])}
            return {("ref", f"{v[1]}.{name}")}
        if k == "dict":
            return {("method", v[1], name)}
        if k in ("class", "self"):
            return self._member(v[1], name, k == "self", ctx or Ctx(None, None, 0), set())
        if k == "anymod":
            return {v} if name == "__dict__" else set()
        if k == "library":
            return {("libmethod", v[1], v[2], name)}
        if k == "builtin" and v[1] == "object" and name in ("__setattr__", "__delattr__", "__getattribute__"):
            return {("builtin", {"__setattr__": "setattr", "__delattr__": "delattr"}.get(name, "getattr"))}
        if k == "str" and name in ("join", "format", "encode", "decode"):
            return {("strmethod", v[1], name)}
        if k == "stream":           # s.wait_stream, s.synchronize, torch.cuda.current_stream().wait_stream
            return {("streammethod", v[1], name)}
        if k == "event":
            return {("eventmethod", v[1], name)}
        if k in ("thread", "pool", "future"):    # t.start, t.join, ex.submit, fut.result, ex.shutdown
            return {("tmethod", v, name)}
        if k == "path":
            if name in ("parent",):
                return {("path", _dirname(v[1]))}
            if name in ("name",):
                return {("str", v[1].rstrip("/").rsplit("/", 1)[-1])}
            if name in _PATH_METHODS:
                return {("pathmethod", v[1], name)}
            if name in _PATH_FILE_METHODS:
                return {("pathbound", v[1], name)}
        return set()

    def _member(self, cls: str, name: str, instance: bool, ctx: "Ctx", seen: set[str]) -> set:
        """What `C.name` (or `self.name` on an instance of C) denotes: what the class body, a method or
        an assignment bound to it, looked up through the class's own bases of this module.  A
        `staticmethod(f)`/`classmethod(f)` wrapper is f (the evaluation of the wrapper call says so);
        on an instance, a property (`name = property(f)` or a method decorated `@property`) is what
        its getter returns."""
        if cls in seen or len(seen) > 8:
            return set()
        seen.add(cls)
        out: set = set()
        for v in self.class_attr.get(cls, {}).get(name, set()):
            if v[0] == "property":
                if instance:
                    for g in v[1]:
                        out |= self._returns(g, [], ctx)
            else:
                out.add(v)
        if instance:
            out |= self.self_attr.get(cls, {}).get(name, set())
        q = self.methods.get(cls, {}).get(name)
        if q:
            fi = self.mod.funcs.get(q)
            if instance and fi is not None and any(_deco_name(d) == "property" for d in fi.node.decorator_list):
                out |= self._returns(("func", q), [], ctx)
            else:
                out.add(("func", q))
        elif instance and name in ("start", "join", "is_alive") and not out and self.thread_class(cls):
            out.add(("tmethod", ("thread", "class:" + cls), name))      # a Thread subclass: start() runs its run()
        if not out:
            for base in self.mod.class_bases.get(cls, []):
                b = base.split(".")[-1]
                if b in self.class_attr or b in self.methods:
                    out |= self._member(b, name, instance, ctx, seen)
        return out

    def exec_tree(self, code: str) -> ast.Module | None:
        """The tree of a string the module runs with exec, parsed once: every reader of it (the sinks, the
        entry's data flow) sees the same nodes, so what one finds at a node the other can name."""
        trees = self.__dict__.setdefault("_exec_parsed", dict(getattr(self.mod, "exec_trees", {})))
        if code not in trees:
            tree = None
            if len(code) <= 200_000:
                try:
                    tree = ast.parse(code)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    tree = None
            trees[code] = tree
        return trees[code]

    def thread_class(self, cls: str, depth: int = 0) -> bool:
        """A class of the solution that is a thread or a process (subclasses threading.Thread, through
        its own bases too)."""
        if depth > 6:
            return False
        for b in self.mod.class_bases.get(cls, []):
            if b in THREAD_BASES or (b.split(".")[-1] in self.mod.class_bases and self.thread_class(b.split(".")[-1], depth + 1)):
                return True
        return False

    def item(self, v: Val, key: str) -> set:
        if v[0] == "ref" and v[1] == "sys.modules":
            return {("ref", key)}
        if v[0] == "ref" and v[1] in ("sys.path", "site.getsitepackages"):
            return {("path", _UNKNOWN_PART)}
        if v[0] == "dictlit":
            return _dict_entry(self, v[1], key)
        if v[0] == "dict":
            if v[1] == "<module>":
                return set(self.module_env.get(key, set())) or {("ref", f"<module>.{key}")}
            return {("ref", f"{v[1]}.{key}")}
        return set()

    def call_value(self, call: ast.Call, ctx: "Ctx") -> set:
        fvals = self.eval(call.func, ctx)
        out: set = set()
        args = [self.eval(a, ctx) for a in call.args]
        for fv in fvals:
            out |= self._apply_value(fv, args, call, ctx)
        if not fvals:   # mod.qn resolves getattr(x, 'c') and aliases the evaluator may not have
            q = self.mod.qn(call.func) or ""
            if q in ("importlib.import_module", "__import__") and args:
                out |= {("ref", s) for s in self.strs(args[0])}
            if isinstance(call.func, ast.Name) and call.func.id in _ELEMENT_MOVERS and args:
                out |= {v for v in args[0] if v[0] == "elems"}     # list(sys.modules.values())
        return out

    def _apply_value(self, fv: Val, args: list[set], call: ast.Call | None, ctx: "Ctx") -> set:
        k = fv[0]
        if k == "builtin":
            name = fv[1]
            if name == "getattr" and len(args) >= 2:
                out: set = set()
                for obj in args[0]:
                    for s in self.strs(args[1]):
                        out |= self.attr(obj, s)
                return out
            if name == "__import__" and args:
                return {("ref", s) for s in self.strs(args[0])}
            if name == "vars" and args:
                return {("dict", o[1]) for o in args[0] if o[0] == "ref"}
            if name in ("globals",):
                return {("dict", "<module>")}
            if name in ("staticmethod", "classmethod") and args:
                return set(args[0])
            if name == "property" and args and args[0]:
                return {("property", frozenset(args[0]))}
            if name == "str" and args:            # str(Path.cwd() / "torch.py"): the path it names
                return {v for v in args[0] if v[0] in ("str", "path")}
            return set()
        if k == "ref":
            q = fv[1]
            if q == "importlib.import_module" and args:
                return {("ref", s) for s in self.strs(args[0])}
            if q in ("sys.modules.get", "sys.modules.__getitem__", "sys.modules.setdefault") and args:
                return {("ref", s) for s in self.strs(args[0])}
            if q in STREAM_CTORS and call is not None:
                return {("stream", id(call))}      # this stream, from its constructor (matched by cap_joins.Joins.side_streams)
            if q in CURRENT_STREAM:
                return {("stream", "current")}     # the caller's own stream (not one of the solution's)
            if q in EVENT_CTORS and call is not None:
                return {("event", id(call))}
            if q in THREAD_CTORS and call is not None:
                return {("thread", id(call))}       # this thread, from its constructor (the thread reading)
            if q in POOL_CTORS and call is not None:
                self.pool_kind[id(call)] = q
                return {("pool", id(call))}
            last = q.rsplit(".", 1)[-1]
            if last in ("values", "items"):          # called directly, through a partial or a lambda
                owner = q.rsplit(".", 1)[0]
                if owner == "sys.modules" or owner.split(".")[0] in GRADER_ROOTS:
                    return {("elems", owner, last)}
            if q in DLL_LOADERS and args:
                libs = self.strs(args[0])
                if libs and all(CUDA_LIBS.search(x) and not _LIBC.search(x) for x in libs):
                    return {("ref", CUDA_HANDLE)}       # its functions: ctypes.<cuda>.cuXxx (_cuda_handle_call)
            if q in ("torch.library.Library", "torch.library._scoped_library") and args:
                kinds = (self.strs(args[1]) if len(args) > 1 else set()) or {"?"}
                return {("library", ns, kind) for ns in (self.strs(args[0]) or {"?"}) for kind in kinds}
            if q in ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath"):
                return {("ref", "pathlib.Path")} | (self._path_value(args, kind="path") if args else set())
            got = self._path_call(q, args)
            if got is not None:
                return got
            if q == "functools.partial" and args and call is not None:
                key = id(call)
                kws = {kw.arg: self.eval(kw.value, ctx) for kw in call.keywords if kw.arg}
                self.partials[key] = (frozenset(args[0]), [frozenset(a) for a in args[1:]], kws)
                self.partial_calls[key] = call
                return {("partial", key)}
            if q in ("builtins.getattr",):
                return self._apply_value(("builtin", "getattr"), args, call, ctx)
            if q in _DESCRIPTOR_WRAPPERS and args:
                return set(args[0])
            if q == "operator.attrgetter" and args:
                return set()
            return set()
        if k == "method":
            owner, m = fv[1], fv[2]
            if m in ("get", "__getitem__", "setdefault") and args:
                out = set()
                for s in self.strs(args[0]):
                    out |= self.item(("dict", owner), s)
                return out
            return set()
        if k == "strmethod" and fv[2] in ("encode", "decode"):
            return {("str", fv[1])}          # the same text as bytes (or back): what a writer puts out
        if k == "strmethod" and fv[2] == "join" and args:
            elts = call.args[0].elts if call is not None and call.args and isinstance(call.args[0], (ast.List, ast.Tuple)) \
                else None
            if elts is None or not fv[1] or len(elts) > 8:
                return set()
            parts: list[set] = []
            for i, el in enumerate(elts):      # "/".join([d, "sitecustomize.py"])
                if i:
                    parts.append({("str", fv[1])})
                parts.append(self.eval(el, ctx))
            return self._path_value(parts, "") if fv[1] in ("/", "\\") else set()
        if k == "streammethod" and fv[2] == "record_event":
            return {("event", ("on", fv[1]))}
        if k == "tmethod" and fv[1][0] == "pool" and fv[2] in POOL_SUBMIT and call is not None:
            return {("future", id(call), fv[1][1])}     # work handed to a pool: its future
        if k == "pathmethod":
            base, m = fv[1], fv[2]
            if m in ("joinpath",):
                return {("ref", "pathlib.Path")} | self._path_value([{("path", base)}, *args], kind="path")
            if m in ("with_name",) and args:
                return self._path_value([{("path", _dirname(base))}, args[0]])
            if m in ("with_suffix",) and args:
                stem = base.rsplit(".", 1)[0] if "." in base.rsplit("/", 1)[-1] else base
                return {("path", stem + x) for x in self.path_texts(args[0])}
            return {("ref", "pathlib.Path"), ("path", base)}      # resolve(), absolute(), expanduser()
        if k in ("func", "closure", "lambda", "partial"):
            return self._returns(fv, args, ctx)
        if k == "class":
            return {("self", fv[1])}
        return set()

    def _path_call(self, q: str, args: list[set]) -> set | None:
        """What a call that builds or names a path returns (None: not such a call)."""
        if q in _CWD_CALLS:
            return {("ref", "pathlib.Path"), ("path", ".")} if q.startswith("pathlib") else {("path", ".")}
        if q in _IMPORT_DIR_CALLS:
            return {("path", _UNKNOWN_PART)}     # a folder on the import path, where the reading cannot say
        if q in _TEMP_DIR_CALLS:
            return {("path", "/tmp" if q == "tempfile.gettempdir" else "/tmp/" + _UNKNOWN_PART)}
        if q == "pathlib.Path.home":
            return {("ref", "pathlib.Path"), ("path", "~")}
        if q == "os.path.join" and args:
            return self._path_value(args)
        if q == "os.path.dirname" and args:
            return {("path", _dirname(p)) for p in self.path_texts(args[0])}
        if q in _SAME_PATH_CALLS and args:
            return {v for v in args[0] if v[0] in ("str", "path")}
        return None

    def _returns(self, fv: Val, args: list[set], ctx: "Ctx") -> set:
        """What a call of the solution's own callable returns, its parameters bound to `args`."""
        if ctx.depth >= 3:
            return set()
        if fv[0] == "partial":
            p = self.partials.get(fv[1])
            if not p:
                return set()
            f, pargs, _ = p
            out: set = set()
            for inner in f:
                out |= self._apply_value(inner, [set(a) for a in pargs] + args, None, ctx.deeper())
            return out
        binding, fn_node, fi, outer = self._bind(fv, args)
        if fn_node is None:
            return set()
        c2 = Ctx(fi, binding, ctx.depth + 1, outer)
        if isinstance(fn_node, ast.Lambda):
            return self.eval(fn_node.body, c2)
        out = set()
        for r in (n for n in (fi.nodes if fi else ()) if isinstance(n, ast.Return) and n.value is not None):
            for v in self.eval(r.value, c2):
                if v[0] == "func" and v[1].startswith(fi.qualname + "."):
                    key = id(r)
                    self.closures[key] = {**(outer or {}), **binding}
                    out.add(("closure", v[1], key))
                else:
                    out.add(v)
        return out

    def _bind(self, fv: Val, args: list[set]):
        if fv[0] == "lambda":
            node = self.lambdas.get(fv[1])
            if node is None:
                return {}, None, None, None
            params = [a.arg for a in node.args.posonlyargs + node.args.args]
            outer = self.closures.get(fv[1])
            return {p: frozenset(a) for p, a in zip(params, args)}, node, None, outer
        q = fv[1]
        fi = self.mod.funcs.get(q)
        if fi is None:
            return {}, None, None, None
        params = list(fi.params)
        if fi.cls is not None and params and params[0] in ("self", "cls"):
            params = params[1:]
        outer = self.closures.get(fv[2]) if fv[0] == "closure" else None
        return {p: frozenset(a) for p, a in zip(params, args)}, fi.node, fi, outer

    def _partial_call(self, key: int, node: ast.AST) -> ast.AST:
        """The call a partial makes when `node` calls it: `partial(f, a, k=1)(b)` is `f(a, b, k=1)`, the
        arguments as written (what the sinks that read argument nodes, a seed, a command, a file mode,
        see).  Made once per partial and call site, at the call's place; its scope is the call's."""
        pc = self.partial_calls.get(key)
        if pc is None or not isinstance(node, ast.Call) or not pc.args:
            return node
        memo = self.__dict__.setdefault("_eff_calls", {})
        eff = memo.get((key, id(node)))
        if eff is None:
            eff = ast.Call(func=pc.args[0], args=list(pc.args[1:]) + list(node.args),
                           keywords=list(pc.keywords) + list(node.keywords))
            ast.copy_location(eff, node)
            memo[(key, id(node))] = eff
            self._origin[id(eff)] = node
        return eff

    def _scope(self, node: ast.AST) -> Any:
        """The function a node (or the call a partial stands for) is in."""
        return self.mod.scope_of(self._origin.get(id(node), node))

    # ------------------------------------------------------------------ shared resolution
    def call_targets(self, call: ast.Call) -> list[tuple[str, ast.Call]]:
        """What a call invokes that the solution did not write, by meaning: each qualified name
        (`torch.empty`, `os._exit`; a builtin by its bare name, `open`) its function expression may
        denote through aliases, locals, class attributes (staticmethod/classmethod/property), getattr,
        namespaces, functools.partial and lambdas, each with the call it amounts to (a partial's bound
        arguments first; a lambda's body call).  Sorted; empty when it denotes only the solution's own
        code or nothing known."""
        ctx = Ctx(self.mod.scope_of(call), None, 0)
        out: set[tuple[str, int]] = set()
        eff: dict[int, ast.Call] = {}
        seen: set[int] = set()
        todo = [(v, call) for v in self.eval(call.func, ctx)]
        while todo and len(out) < _MAX_VALS:
            v, c = todo.pop()
            if v[0] == "ref":
                out.add((v[1], id(c)))
                eff[id(c)] = c
            elif v[0] == "builtin":
                out.add((v[1], id(c)))
                eff[id(c)] = c
            elif v[0] == "partial" and v[1] in self.partials and c is call:
                inner = self._partial_call(v[1], call)
                todo.extend((w, inner) for w in self.partials[v[1]][0])
            elif v[0] == "lambda" and v[1] in self.lambdas and isinstance(self.lambdas[v[1]].body, ast.Call) \
                    and id(self.lambdas[v[1]].body) not in seen:
                body = self.lambdas[v[1]].body      # (lambda: f(a))() is f(a), made where the lambda is called
                seen.add(id(body))
                todo.extend((w, body) for w in self.eval(body.func, Ctx(self.mod.scope_of(body), None, 0)))
        return [(q, eff[k]) for q, k in sorted(out, key=lambda x: (x[0], x[1]))]

    def lambdas_called(self, call: ast.Call) -> list[ast.Lambda]:
        """The lambdas a call runs: `(lambda: BODY)()`, a local or attribute bound to a lambda."""
        ctx = Ctx(self.mod.scope_of(call), None, 0)
        return [self.lambdas[v[1]] for v in self.eval(call.func, ctx) if v[0] == "lambda" and v[1] in self.lambdas]


def _dict_display(ev: Evaluator, e: ast.Dict, ctx: "Ctx") -> set:
    """("dictlit", key) for a dict display whose keys are constant strings (kept with where it is)."""
    if e.keys and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in e.keys):
        ev.dict_lits[id(e)] = (e, ctx)
        return {("dictlit", id(e))}
    return set()


def _dict_entry(ev: Evaluator, lit: int, key: str) -> set:
    """What a dict display's entry under `key` denotes."""
    node, ctx = ev.dict_lits.get(lit, (None, None))
    out: set = set()
    for k, val in zip(node.keys, node.values) if node is not None else ():
        if isinstance(k, ast.Constant) and k.value == key:
            out |= ev.eval(val, ctx.deeper())
    return out


def evaluator(mod: Any) -> Evaluator:
    """The module's one evaluation of what its names denote (built once per module, kept on it): the
    resolution every detector shares, so that a reference rewritten as a class attribute, a partial, a
    lambda or an alias reads as what it reaches wherever it is read."""
    ev = mod.__dict__.get("_fx_evaluator")
    if ev is None:
        ev = mod.__dict__["_fx_evaluator"] = Evaluator(mod, None)
    return ev


def resolve_call(mod: Any, call: ast.Call) -> tuple[str, ast.Call]:
    """(qualified name, the call it amounts to) for detectors that match a call by name: the module's
    syntactic name (`mod.qn`) where it is reached from an import, else the shared evaluation's (a
    class attribute, a local, a partial: `functools.partial(os._exit, 0)()` is `os._exit(0)`)."""
    q = mod.qn(call.func) or ""
    if q and (q.split(".")[0] in mod.aliases or (isinstance(call.func, ast.Name) and q == call.func.id
                                                  and q not in mod.by_name and q in _BUILTIN_NAMES)):
        return q, call
    got = evaluator(mod).call_targets(call)
    return got[0] if got else (q, call)


_BUILTIN_NAMES = frozenset(dir(__import__("builtins")))


def _deco_name(d: ast.AST) -> str:
    """`property` for `@property`, `functools.cache` for `@functools.cache(...)`: a decorator's name."""
    return _target_key(_deco_func(d))


def _product(parts: list[set[str]]) -> set[str]:
    out = {""}
    for p in parts:
        out = {a + b for a in out for b in p}
        if len(out) > 16:
            return set()
    return out
