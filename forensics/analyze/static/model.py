"""The solution model the Python rules read: import aliases, constants, functions with their
local assignments and identity kinds, extension handles, parent links, per-scope node lists, and
the small AST helpers every rule family shares.  The solution is parsed, never imported or executed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Iterator

from .base import Hit, quote_lines

_PTR_ATTRS = ("data_ptr", "storage_ptr", "_cdata")     # tensor methods that return its address
FORWARD_NAMES = {"forward", "__call__", "step", "decode_steps", "prefill", "run", "decode", "train", "policy_forward"}
IDENT_KINDS = ("ptr", "version", "id", "is")
GRADER_FILES = ("check.py", "benchmark.py", "shapes.py", "problem.yaml", "reference.py", "sota.py",
                "PROMPT.txt", "numeric_stress", "property_stress", "correctness.py", "timing.py",
                "roofline.py", "trusted_entrypoint", "src/eval", "baseline.py", "check.log", "benchmark.log")
GRADER_MODULES = {"check", "benchmark", "shapes", "src.eval", "src", "eval.correctness", "eval.timing",
                  "eval.numeric_stress", "numeric_stress", "property_stress", "trusted_entrypoint"}
#: the reference module's helpers a solution may call (its inputs, its config) ...
REF_HELPERS_OK = {"get_inputs", "get_init_inputs", "init_state", "init_token", "build_config", "Config"}
#: ... and what re-submits the reference: its model class or one of the problem's entry functions
REF_ENTRY = {"Model", "forward", "policy_forward", "run", "step", "decode_steps", "prefill", "decode", "reference",
             "ref_forward", "naive"}
ALLOC_FUNCS = {"torch.empty", "torch.empty_like", "torch.zeros", "torch.zeros_like", "torch.ones",
               "torch.ones_like", "torch.full", "torch.empty_strided", "torch.full_like"}
NON_WORK_TORCH = ALLOC_FUNCS | {"torch.tensor", "torch.as_tensor", "torch.device", "torch.dtype",
                                "torch.cuda.current_stream", "torch.cuda.synchronize", "torch.cuda.current_device",
                                "torch.cuda.get_device_capability", "torch.cuda.is_available", "torch.is_tensor",
                                "torch.no_grad", "torch.inference_mode", "torch.cuda.stream", "torch.cuda.Stream",
                                "torch.cuda.get_device_properties", "torch.cuda.CUDAGraph", "torch.cuda.graph",
                                "torch.Size", "torch.finfo", "torch.iinfo", "torch.cuda.device",
                                "torch.cuda.Event", "torch.get_default_dtype"}
WORK_METHODS = {"copy_", "matmul", "mm", "bmm", "sum", "mean", "softmax", "addmm", "mul", "add", "sub",
                "div", "exp", "float", "half", "bfloat16", "to", "contiguous", "clone", "t", "transpose",
                "permute", "index_select", "gather", "scatter", "zero_", "fill_", "run", "launch",
                "forward", "__call__", "apply", "relu", "sigmoid", "silu", "reshape", "view"}
DERIVE_METHODS = {"contiguous", "clone", "to", "float", "half", "bfloat16", "t", "transpose", "permute",
                  "view", "reshape", "copy_", "flatten", "pad", "narrow", "expand", "repeat", "cat", "stack",
                  "T", "mT", "detach", "cuda", "int", "long", "char", "byte"}
CONTENT_METHODS = {"tolist", "item", "cpu", "numpy", "nonzero", "bincount", "unique", "argsort", "sort", "cumsum",
                   "max", "min"}
REDUCTIONS = {"max", "min", "mean", "std", "var", "sum", "amax", "amin", "norm", "item", "median", "abs"}


#: the classes the decks instantiate, in the order they look for them: the graded entry's methods are theirs
GRADED_CLASSES = ("ModelNew", "Model")


@dataclass
class FuncInfo:
    node: ast.FunctionDef | ast.AsyncFunctionDef
    qualname: str
    cls: str | None
    params: list[str]
    env: dict[str, set[str]] = field(default_factory=dict)      # local name -> identity kinds
    assigns: dict[str, list[ast.AST]] = field(default_factory=dict)  # local name -> assigned values
    returns_kinds: set[str] = field(default_factory=set)
    has_launch: bool = False
    is_triton: bool = False
    nodes: list = field(default_factory=list)          # body nodes, nested defs excluded (computed once)
    globals_: set = field(default_factory=set)         # names declared global/nonlocal
    returned: set = field(default_factory=set)         # names appearing in return values

    def of(self, *types: type) -> list[ast.AST]:
        """The nodes of `nodes` whose exact type is one of `types`, in `nodes` order: what
        `[n for n in fi.nodes if isinstance(n, types)]` gives for parsed nodes (the parser makes no
        subclasses).  One pass indexes every type; a set of several types is merged once."""
        idx = self.__dict__.get("_of")
        if idx is None:
            idx = {}
            for n in self.nodes:
                t = n.__class__
                lst = idx.get(t)
                if lst is None:
                    idx[t] = [n]
                else:
                    lst.append(n)
            self.__dict__["_of"] = idx
        if len(types) == 1:
            return idx.get(types[0], _EMPTY)
        r = idx.get(types)
        if r is None:
            ts = frozenset(types)
            r = idx[types] = [n for n in self.nodes if n.__class__ in ts] if any(t in idx for t in ts) else _EMPTY
        return r


_EMPTY: list = []      # shared and never mutated: what FuncInfo.of returns for an absent type

_SCALAR_FIELDS = frozenset({"ctx", "id", "attr", "name", "arg", "kind", "type_comment", "level", "module",
                            "asname", "conversion", "is_async", "n", "s", "type_ignores"})
_PLANS: dict[type, tuple[tuple[str, ...], int]] = {}


def _plan(t: type) -> tuple[tuple[str, ...], int]:
    """A node type's fields that can hold nodes, and its scope kind: 1 a def, 2 a class or lambda, 0 other."""
    fl = tuple(f for f in t._fields if f not in _SCALAR_FIELDS) if t is not ast.Constant else ()
    kind = 1 if t in (ast.FunctionDef, ast.AsyncFunctionDef) else 2 if t in (ast.ClassDef, ast.Lambda) else 0
    _PLANS[t] = plan = (fl, kind)
    return plan


class Module:
    def __init__(self, tree: ast.Module, text: str, filename: str = "solution.py") -> None:
        self.tree = tree
        #: code a module-level exec of a constant string runs is the module's own: each such string's tree,
        #: its statements put in the module's tree (readers of the string use these very nodes)
        self.exec_trees: dict[str, ast.Module] = _inline_exec(tree) if "exec" in text else {}
        #: per function (qualname), the parameters given a long-lived object of the solution's (the graded
        #: entry's instance handed to a helper: `_Helper().run(self, x)`): state kept on them persists across
        #: calls as `self.x` does.  Filled by roles.bind (it needs the module's evaluation), read by persistent().
        self.owner_params: dict[str, frozenset[str]] = {}
        self.text = text
        self.lines = text.splitlines()
        self.filename = filename
        self.aliases: dict[str, str] = {}
        self.consts: dict[str, ast.AST] = {}
        self.module_assigned: set[str] = set()
        self.mutable_globals: set[str] = set()
        self.funcs: dict[str, FuncInfo] = {}
        self.by_name: dict[str, list[FuncInfo]] = {}
        self.ext_names: set[str] = set()          # names/attrs bound to compiled extensions
        self.class_bases: dict[str, list[str]] = {}
        self.main_block_lines: set[int] = set()
        self.parent: dict[ast.AST, ast.AST] = {}
        self._qn_memo: dict[int, str | None] = {}
        self._launch_memo: dict[int, bool] = {}
        self._collect()

    # ------------------------------------------------------------------ collection
    def _collect(self) -> None:
        self.all_nodes: list[ast.AST] = []
        self.by_type: dict[type, list[ast.AST]] = {}
        self._by_scope: dict[int, list[ast.AST]] = {}
        # one walk: every node, by type, its parent, and the node list of the function it belongs to.
        # A stack entry carries the list of its function scope (None: module level, or inside a
        # class or lambda, whose nodes belong to no function's list).
        stack: list[tuple[ast.AST, list | None]] = [(self.tree, None)]
        pop, push = stack.pop, stack.append
        parent = self.parent
        by_type = self.by_type
        by_scope = self._by_scope
        plans = _PLANS
        AST = ast.AST
        add_node = self.all_nodes.append
        while stack:
            node, sl = pop()
            add_node(node)
            t = node.__class__
            lst = by_type.get(t)
            if lst is None:
                by_type[t] = [node]
            else:
                lst.append(node)
            if sl is not None:
                sl.append(node)
            plan = plans.get(t)
            if plan is None:
                plan = _plan(t)
            fl, kind = plan
            if kind == 1:        # a def: its body is its own scope; decorators, defaults, annotations are not
                own = by_scope[id(node)] = []
            elif kind == 2:      # a class or lambda: nothing under it belongs to the enclosing function
                sl = None
            for f in fl:
                v = getattr(node, f, None)
                if v is None:
                    continue
                cs = own if (kind == 1 and f == "body") else sl
                if v.__class__ is list:
                    for ch in v:
                        if isinstance(ch, AST):
                            parent[ch] = node
                            push((ch, cs))
                elif isinstance(v, AST):
                    parent[v] = node
                    push((v, cs))
        for lst in by_type.values():
            lst.reverse()
        self.all_nodes.reverse()
        for node in self.of(ast.Import, ast.ImportFrom):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.aliases.setdefault(root, root)
            elif isinstance(node, ast.ImportFrom):
                mod = ("." * node.level) + (node.module or "")
                for a in node.names:
                    if a.name == "*":
                        continue
                    self.aliases[a.asname or a.name] = f"{mod}.{a.name}" if mod else a.name
        for st in self.tree.body:
            targets: list[ast.AST] = []
            value = None
            if isinstance(st, ast.Assign):
                targets, value = st.targets, st.value
            elif isinstance(st, ast.AnnAssign) and st.value is not None:
                targets, value = [st.target], st.value
            for t in targets:
                if isinstance(t, ast.Name):
                    self.module_assigned.add(t.id)
                    self.consts[t.id] = value
                    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp)) or (
                            isinstance(value, ast.Call) and (self.qn(value.func) or "").split(".")[-1] in
                            ("dict", "OrderedDict", "defaultdict", "WeakValueDictionary", "WeakKeyDictionary", "list", "set")):
                        self.mutable_globals.add(t.id)
                    q = self.qn(value) if isinstance(value, (ast.Attribute, ast.Name, ast.Call)) else None
                    if q and q.split(".")[0] in {v.split(".")[0] for v in self.aliases.values()} and not isinstance(value, ast.Call):
                        self.aliases[t.id] = q
                    elif isinstance(value, ast.Call) and _getattr_call(value):
                        q2 = self.qn(value)
                        if q2:
                            self.aliases[t.id] = q2
                    elif isinstance(value, ast.Call) and (self.qn(value.func) or "") in ("__import__", "importlib.import_module") \
                            and value.args and self.const_str(value.args[0]):
                        self.aliases[t.id] = self.const_str(value.args[0])   # _ref = __import__("reference")
        self._qn_memo.clear()  # aliases are final from here on
        # functions
        def visit(body: list[ast.stmt], prefix: str, cls: str | None) -> None:
            for st in body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    params = [a.arg for a in st.args.posonlyargs + st.args.args + st.args.kwonlyargs]
                    fi = FuncInfo(st, prefix + st.name, cls, params)
                    fi.is_triton = any((self.qn(_deco_func(d)) or "").startswith(("triton.jit", "triton.autotune", "triton.heuristics"))
                                       for d in st.decorator_list)
                    self.funcs[fi.qualname] = fi
                    self.by_name.setdefault(st.name, []).append(fi)
                    visit(st.body, prefix + st.name + ".", cls)
                elif isinstance(st, ast.ClassDef):
                    self.class_bases[st.name] = [self.qn(b) or "" for b in st.bases]
                    visit(st.body, prefix + st.name + ".", st.name)
                elif isinstance(st, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                    for sub in ("body", "orelse", "finalbody"):
                        visit(getattr(st, sub, []) or [], prefix, cls)
                    for h in getattr(st, "handlers", []) or []:
                        visit(h.body, prefix, cls)
        visit(self.tree.body, "", None)
        del visit   # a recursive closure refers to itself (and to self): drop the cycle now
        # per-function node lists, computed once
        self.scope: dict[int, FuncInfo] = {}
        for fi in self.funcs.values():
            fi.nodes = self._by_scope.get(id(fi.node), [])
            self.scope.update(dict.fromkeys(map(id, fi.nodes), fi))
        # a lambda's body runs in the function that holds the lambda (called there, or handed from there
        # to what calls it): scope_of says that function, though the body is not among its `nodes`
        self._import_reach()
        for fi in list(self.funcs.values()):
            for lam in fi.of(ast.Lambda):
                for n in walk(lam)[1:]:
                    self.scope.setdefault(id(n), fi)
            for n in fi.of(ast.Global, ast.Nonlocal):
                fi.globals_.update(n.names)
            for n in fi.of(ast.Return):
                if n.value is not None:
                    fi.returned |= _names(n.value)
        self._sites: list | None = None
        # nodes that can carry an identity kind (sources, local helper calls) and all their ancestors:
        # kinds() skips every other expression without walking it
        self.ident_marked: set[int] = set()
        for n in self.of(ast.Call, ast.Attribute):
            src = False
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Attribute) and f.attr in ("data_ptr", "storage_ptr", "_cdata", "size", "stride"):
                    src = True
                elif isinstance(f, ast.Name) and (f.id == "id" or f.id in self.by_name):
                    src = True
                elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls") \
                        and f.attr in self.by_name:
                    src = True
                elif not isinstance(f, ast.Attribute) and ident_source(self, n):
                    src = True    # the same reads spelt getattr(t, 'data_ptr')(), builtins.__dict__['id'](t), ...
            elif isinstance(n, ast.Attribute) and n.attr in ("_version", "shape", "dtype", "__cuda_array_interface__", "data_ptr"):
                src = True
            if src:
                m = n
                while m is not None and id(m) not in self.ident_marked:
                    self.ident_marked.add(id(m))
                    m = self.parent.get(m)
        # extension handles: x = load_inline(...) / self._ext = load(...)
        for node in self.of(ast.Assign):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                fq = self.qn(node.value.func) or ""
                # `load` only from torch.utils.cpp_extension: tl.load / np.load / json.load bind no extension
                if fq.split(".")[-1] in ("load_inline", "RawKernel", "RawModule", "get_function",
                                         "ElementwiseKernel", "compile_inline") or fq.endswith("cpp_extension.load"):
                    for t in node.targets:
                        self.ext_names.add(_target_key(t))
        for fi in self.funcs.values():
            self._local_env(fi)
        # helper summaries, fixpoints over intra-module calls: identity kinds a function returns ...
        rets = {fi.qualname: [n.value for n in fi.of(ast.Return) if n.value is not None
                              and id(n.value) in self.ident_marked] for fi in self.funcs.values()}
        callers: dict[str, set[str]] = {}
        for fi in self.funcs.values():
            for c in fi.of(ast.Call):
                if id(c) in self.ident_marked:
                    for callee in self.callees(c, fi):
                        callers.setdefault(callee.qualname, set()).add(fi.qualname)
        for _ in range(4):
            changed: set[str] = set()
            for fi in self.funcs.values():
                rk = set()
                for v in rets[fi.qualname]:
                    rk |= self.kinds(v, fi)
                if rk != fi.returns_kinds:
                    fi.returns_kinds = rk
                    changed.add(fi.qualname)
            if not changed:
                break
            # only a function that calls a changed helper can see new kinds in its locals
            for q in set().union(*[callers.get(c, set()) for c in changed]):
                self._local_env(self.funcs[q])
        # ... and whether it (transitively) launches work
        callee_map: dict[str, list[FuncInfo]] = {}
        for fi in self.funcs.values():
            cl: list[FuncInfo] = []
            for c in fi.of(ast.Call):
                if not fi.has_launch and self._launch_direct(c):
                    fi.has_launch = True
                cl.extend(self.callees(c, fi))
            callee_map[fi.qualname] = cl
        changed = True
        while changed:
            changed = False
            for fi in self.funcs.values():
                if not fi.has_launch and any(c.has_launch for c in callee_map[fi.qualname]):
                    fi.has_launch = changed = True

    def _local_env(self, fi: FuncInfo) -> None:
        """Local assignments (built once) and the identity kinds each local name carries."""
        al = fi.__dict__.get("_assign_list")
        if al is None:
            al = []
            for n in fi.of(ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
                if isinstance(n, ast.Assign):
                    al.append((n.lineno, n.targets, n.value))
                elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and n.value is not None:
                    al.append((n.lineno, [n.target], n.value))
                elif isinstance(n, ast.NamedExpr):
                    al.append((n.lineno, [n.target], n.value))
            al.sort(key=lambda a: a[0])
            al = [(targets, value, [nm for t in targets for nm in _names_in_target(t)]) for _ln, targets, value in al]
            fi.__dict__["_assign_list"] = al
            fi.assigns = {}
            for _targets, value, names in al:
                for name in names:
                    lst = fi.assigns.setdefault(name, [])
                    if value not in lst:
                        lst.append(value)
        marked = self.ident_marked
        for _ in range(2):
            before = sum(len(v) for v in fi.env.values())
            for _targets, value, names in al:
                if id(value) not in marked and not (fi.env and _names(value) & fi.env.keys()):
                    continue   # what kinds() would say without walking: nothing
                k = self.kinds(value, fi)
                if k:
                    for name in names:
                        fi.env[name] = fi.env.get(name, set()) | k
            if sum(len(v) for v in fi.env.values()) == before:
                break          # a second pass only matters when the first one added kinds

    def of(self, *types: type) -> list[ast.AST]:
        """Nodes of the given exact AST types (one pass built them all)."""
        if len(types) == 1:
            return self.by_type.get(types[0], [])
        out: list[ast.AST] = []
        for t in types:
            out.extend(self.by_type.get(t, []))
        return out

    # ------------------------------------------------------------------ resolution helpers
    def qn(self, node: ast.AST | None, depth: int = 0) -> str | None:
        """Dotted name of an expression, through import aliases and getattr(x, 'const')."""
        if node is None or depth > 40:
            return None
        key = id(node)
        memo = self._qn_memo
        if key in memo:
            return memo[key]
        r = self._qn(node, depth)
        memo[key] = r
        return r

    def _qn(self, node: ast.AST, depth: int) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qn(node.value, depth + 1)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and _getattr_call(node):
            s = self.const_str(node.args[1])
            base = self.qn(node.args[0], depth + 1)
            if s is not None and base:
                return f"{base}.{s}"
        if isinstance(node, ast.Subscript):
            return namespace_item(self, node, depth)
        return None

    def applied(self, call: ast.Call) -> ast.Call:
        """The call a call amounts to as written, for readers of its argument nodes:
        `functools.partial(f, a, k=1)(b)` is `f(a, b, k=1)`, `(lambda: f(a))()` is `f(a)` (nested forms
        unwrapped in turn).  The call itself otherwise.  What names denote (a partial bound to a local,
        a class attribute) is the capability evaluation's: evaluation.resolve_call."""
        memo = self.__dict__.setdefault("_applied", {})
        got = memo.get(id(call))
        if got is not None:
            return got
        c = call
        for _ in range(4):
            f = c.func
            if isinstance(f, ast.Lambda) and not c.args and isinstance(f.body, ast.Call):
                c = f.body
            elif isinstance(f, ast.Call) and f.args and (self.qn(f.func) or "") in ("functools.partial", "partial"):
                c2 = ast.Call(func=f.args[0], args=list(f.args[1:]) + list(c.args),
                              keywords=list(f.keywords) + list(c.keywords))
                c = ast.copy_location(c2, c)
            else:
                break
        memo[id(call)] = c
        return c

    def const_str(self, node: ast.AST | None, depth: int = 0) -> str | None:
        if node is None or depth > 20:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = self.const_str(node.left, depth + 1), self.const_str(node.right, depth + 1)
            return a + b if a is not None and b is not None else None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    s = self.const_str(v.value, depth + 1)
                    if s is None:
                        return None
                    parts.append(s)
            return "".join(parts)
        if isinstance(node, ast.Name) and node.id in self.consts:
            return self.const_str(self.consts[node.id], depth + 1)
        return None

    def kinds(self, expr: ast.AST | None, fi: FuncInfo | None = None, depth: int = 0) -> set[str]:
        """Identity kinds (ptr / version / id / shape) an expression is built from."""
        out: set[str] = set()
        if expr is None:
            return out
        if id(expr) not in self.ident_marked and not (fi is not None and fi.env and _names(expr) & fi.env.keys()):
            return out
        for n in walk(expr):
            if isinstance(n, ast.Call):
                f = n.func
                read = attr_read(self, n) if not isinstance(f, ast.Attribute) else None
                if read is not None:          # getattr(t, '_version'): an attribute read, however spelt
                    _attr_kind(read[1], out)
                m = (f.value, f.attr) if isinstance(f, ast.Attribute) else method_call(self, n, fi)
                if m is not None and m[1] in _PTR_ATTRS:
                    out.add("ptr")
                elif builtin_called(self, n) == "id":
                    out.add("id")
                elif m is not None and m[1] in ("size", "stride"):
                    out.add("shape")
                elif depth < 3:
                    for callee in self.callees(n, fi):
                        out |= callee.returns_kinds
            elif isinstance(n, ast.Attribute):
                _attr_kind(n.attr, out)
            elif isinstance(n, ast.Name) and fi is not None and n.id in fi.env:
                out |= fi.env[n.id]
        return out

    def unversioned(self, expr: ast.AST | None, fi: FuncInfo | None = None, depth: int = 0) -> set[str]:
        """Tensors a key identifies by pointer or id() without also reading their _version (source
        text: `self.scales`): their contents can change under the same key.  Only what the key
        expression (and the locals it is built from) spells out; keys built inside helpers give {}."""
        ident, versioned = self._key_tensors(expr, fi, depth)
        return ident - versioned

    def _key_tensors(self, expr: ast.AST | None, fi: FuncInfo | None, depth: int) -> tuple[set[str], set[str]]:
        ident: set[str] = set()
        versioned: set[str] = set()
        if expr is None or depth > 3:
            return ident, versioned
        # `for t in (self.w, self.s)` inside the key: t stands for each listed tensor
        each: dict[str, list[str]] = {}
        for n in walk(expr):
            if isinstance(n, ast.comprehension) and isinstance(n.target, ast.Name) and isinstance(n.iter, (ast.Tuple, ast.List)):
                each[n.target.id] = [_tensor_text(e) for e in n.iter.elts]

        def named(e: ast.AST) -> list[str]:
            t = _tensor_text(e)
            return each.get(t, [t])

        for n in walk(expr):
            if isinstance(n, ast.Call):
                m = method_call(self, n, fi)
                read = attr_read(self, n)
                if m is not None and m[1] in _PTR_ATTRS:
                    ident.update(named(m[0]))
                elif n.args and builtin_called(self, n) == "id":
                    ident.update(named(n.args[0]))
                elif read is not None and read[1] == "_version":
                    versioned.update(named(read[0]))
            elif isinstance(n, ast.Attribute) and n.attr == "_version":
                versioned.update(named(n.value))
            elif isinstance(n, ast.Name) and fi is not None and not isinstance(n.ctx, ast.Store):
                for v in fi.assigns.get(n.id, [])[:4]:   # key = (...); ... self._key != key
                    i2, v2 = self._key_tensors(v, fi, depth + 1)
                    ident |= i2
                    versioned |= v2
        return ident, versioned

    def callees(self, call: ast.Call, fi: FuncInfo | None) -> list[FuncInfo]:
        f = call.func
        if isinstance(f, ast.Name):
            return [x for x in self.by_name.get(f.id, []) if x.cls is None or x.node.name == f.id][:3]
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
            cands = self.by_name.get(f.attr, [])
            if fi is not None and fi.cls:
                same = [x for x in cands if x.cls == fi.cls]
                if same:
                    return same
            return cands[:3]
        return []

    def is_launch(self, call: ast.Call, fi: FuncInfo | None = None, shallow: bool = False) -> bool:
        """Does this call plausibly launch GPU work on current data?"""
        if self._launch_direct(call):
            return True
        return any(c.has_launch for c in self.callees(call, fi))

    def _launch_direct(self, call: ast.Call) -> bool:
        key = id(call)
        r = self._launch_memo.get(key)
        if r is None:
            r = self._launch_memo[key] = self._launch_direct_uncached(call)
        return r

    def _launch_direct_uncached(self, call: ast.Call) -> bool:
        f = call.func
        q = self.qn(f) or ""
        if isinstance(f, ast.Subscript) and not q:  # triton kernel[grid](...); not torch.__dict__['empty'](...)
            return True
        last = q.split(".")[-1] if q else (f.attr if isinstance(f, ast.Attribute) else "")
        if last == "replay":
            return True
        if q.startswith("torch.") and q not in NON_WORK_TORCH and not q.startswith(("torch.backends", "torch.cuda.graph")):
            return True
        key = _target_key(f.value) if isinstance(f, ast.Attribute) else None
        if key and (key in self.ext_names or any(key.endswith(e.split(".")[-1]) for e in self.ext_names if e)):
            return True
        if isinstance(f, ast.Attribute) and (f.attr in WORK_METHODS) and not (
                isinstance(f.value, ast.Name) and f.value.id in self.aliases):
            return True
        if isinstance(f, ast.Name) and self.aliases.get(f.id, "").startswith("torch.") and self.aliases[f.id] not in NON_WORK_TORCH:
            return True
        if isinstance(f, ast.Name) and f.id in self.ext_names:
            return True
        return False

    def persistent(self, node: ast.AST, fi: FuncInfo | None, alias: bool = False) -> str | None:
        """Name of persistent state an expression denotes: self.x, cls.x, Class.x, a module global;
        alias=True (a cache's container position) also through a local that stands for it (`_alias`)."""
        if isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in self.class_bases
                                               or base.id in self.by_name or self._owner(base.id, fi)):
                return f"{base.id}.{node.attr}"
            inner = self.persistent(base, fi, alias)
            if inner:
                return f"{inner}.{node.attr}"
        if isinstance(node, ast.Name):
            if fi is not None and node.id in fi.params:
                return None
            if fi is not None and node.id in fi.assigns and node.id not in fi.globals_:
                return self._alias(node.id, fi) if alias else None
            if node.id in self.module_assigned or (fi is not None and node.id in fi.globals_):
                return node.id
            if fi is not None:
                cell = closure_cell(self, node.id, fi)
                if cell:
                    return cell
        if isinstance(node, ast.Subscript):
            return self.persistent(node.value, fi, alias)
        if isinstance(node, ast.Call) and _getattr_call(node) and isinstance(node.args[0], ast.Name) \
                and (node.args[0].id in ("self", "cls") or self._owner(node.args[0].id, fi)):
            attr = self.const_str(node.args[1])
            if attr:
                return f"{node.args[0].id}.{attr}"
        return None

    def _owner(self, name: str, fi: FuncInfo | None) -> bool:
        """A parameter of `fi` given a long-lived object of the solution's (owner_params)."""
        return fi is not None and name in self.owner_params.get(fi.qualname, ())

    def _alias(self, name: str, fi: FuncInfo) -> str | None:
        """The persistent state a local stands for when every value assigned to it names that one
        state itself (``cache = self._cache``, ``memo = self.__dict__.setdefault("_memo", {})``, ``c =
        getattr(self, "_c")``, ``per = self._plans.setdefault(shape, {})``): a lookup through the
        local is a lookup of the state.  A local assigned anything else as well (``out =
        self._out.get(k)`` then ``out = torch.empty(...)``), an element (``x = self._c[k]``) or a
        value read off a state (``v = self.w._version``) is not."""
        memo = fi.__dict__.setdefault("_aliases", {})
        if name in memo:
            return memo[name]
        memo[name] = None                   # a cycle (a = b; b = a) names nothing
        found = {self._alias_value(v, fi) for v in fi.assigns.get(name, ())}
        memo[name] = found.pop() if len(found) == 1 else None
        return memo[name]

    def _alias_value(self, v: ast.AST, fi: FuncInfo) -> str | None:
        # a state itself (self.x, a global, another alias), never a value read off it (self.w._version)
        if isinstance(v, ast.Name) or (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name)):
            return self.persistent(v, fi, alias=True)
        if isinstance(v, ast.Call) and _getattr_call(v):
            return self.persistent(v, fi)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "setdefault" and v.args:
            base = v.func.value
            if isinstance(base, ast.Attribute) and base.attr == "__dict__" and isinstance(base.value, ast.Name) \
                    and (base.value.id in ("self", "cls") or self._owner(base.value.id, fi)):
                attr = self.const_str(v.args[0])
                return f"{base.value.id}.{attr}" if attr else None
            return self.persistent(base, fi, alias=True)
        return None

    def in_main(self, node: ast.AST) -> bool:
        """`node` never runs when the grader imports the module: it is in the arm of a `__name__ ==
        "__main__"` test that import does not take (at module level, in a function, a method or a
        nested def), or in a function that only such code calls."""
        return id(node) in self.main_only

    def _import_reach(self) -> None:
        """`main_only`: the nodes import never runs (see `in_main`), and `main_block_lines`, their lines.
        Decided by reachability, not by where the block is written: a guard moved into a function is
        still not taken on import, and `def main(): sys.exit(run())` called only from the guard is
        not reached either.  A module that binds `__name__` itself gets none (its guard may be taken)."""
        self.name_rebound = name_rebound(self.of(ast.Name, ast.arg, ast.Attribute, ast.Subscript, ast.Call, ast.FunctionDef,
                                                 ast.AsyncFunctionDef, ast.ClassDef))
        dead = import_dead(self.of(ast.If, ast.IfExp), self.name_rebound)
        # module-level functions every reference of which is in code import never runs (to a fixpoint:
        # a helper of `main`); a name the grader may call (an entry, get_inputs, a dunder) stays live
        cands = {fi.node.name: fi for fi in self.funcs.values() if fi.cls is None and "." not in fi.qualname
                 and fi.node.name not in FORWARD_NAMES and fi.node.name not in _GRADER_CALLED
                 and not fi.node.name.startswith("__") and len(self.by_name.get(fi.node.name, ())) == 1}
        if cands and dead:
            refs: dict[str, list[ast.AST]] = {}
            for n in self.of(ast.Name, ast.Attribute, ast.Constant):
                t = n.__class__
                name = n.id if t is ast.Name else n.attr if t is ast.Attribute else \
                    n.value if t is ast.Constant and isinstance(n.value, str) else None
                if name in cands and not (t is ast.Name and isinstance(n.ctx, ast.Store)):
                    refs.setdefault(name, []).append(n)
            while True:
                more = [fi for name, fi in cands.items() if id(fi.node) not in dead and refs.get(name)
                        and all(id(r) in dead for r in refs[name])]
                if not more:
                    break
                for fi in more:
                    dead.update(map(id, walk(fi.node)))
        self.main_only = dead
        self.main_block_lines = {n.lineno for n in self.all_nodes if id(n) in dead and hasattr(n, "lineno")}

    def scope_of(self, node: ast.AST) -> FuncInfo | None:
        return self.scope.get(id(node))

    def hit(self, rule: str, node: ast.AST, message: str, **kw: Any) -> Hit:
        ls = getattr(node, "lineno", None)
        le = getattr(node, "end_lineno", ls)
        if ls and le and le - ls > 12:
            le = ls
        return Hit(rule, ls, le, message, file=self.filename, quote=quote_lines(self.lines, ls, le), **kw)


# ---------------------------------------------------------------------- what a call or read amounts to
def namespace_item(mod: Module, node: ast.Subscript, depth: int) -> str | None:
    """A module's namespace read by key: `mod.__dict__['name']`, `vars(mod)['name']`,
    `sys.modules['mod']`, `globals()['name']` (this module's)."""
    key = mod.const_str(node.slice)
    if not key:
        return None
    v = node.value
    if isinstance(v, ast.Attribute) and v.attr == "__dict__":
        base = mod.qn(v.value, depth + 1)
        return f"{base}.{key}" if base else None
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and not v.keywords:
        if v.func.id == "vars" and len(v.args) == 1 and not shadowed(mod, "vars"):
            base = mod.qn(v.args[0], depth + 1)
            return f"{base}.{key}" if base else None
        if v.func.id == "globals" and not v.args and not shadowed(mod, "globals"):
            return mod.aliases.get(key, key)
        return None
    if (mod.qn(v, depth + 1) or "") == "sys.modules":
        return key
    return None


def shadowed(mod: Module, name: str) -> bool:
    """A builtin's name bound by the module (imported, assigned or defined): not the builtin."""
    return name in mod.aliases or name in mod.module_assigned or name in mod.by_name


def closure_cell(mod: Module, name: str, fi: FuncInfo) -> str | None:
    """`name` read in a nested function from the closure of the function that defines it (no `nonlocal`
    needed to mutate a dict), where that function hands the nested one out to outlive it: returns it
    (a factory, a decorator) or stores it (`self._run = run`, a global).  The cell is then state kept
    across calls, as a global is: `outer.name`.  A function called and dropped in the call that defines
    it (a closure run inside the entry) sees a fresh cell each time: not state."""
    parts = fi.qualname.split(".")
    for i in range(len(parts) - 1, 0, -1):
        outer = mod.funcs.get(".".join(parts[:i]))
        if outer is None:
            continue
        if name not in outer.params and name not in outer.assigns:
            continue
        if outer.node.name in FORWARD_NAMES:
            return None
        child = parts[i]
        memo = mod.__dict__.setdefault("_fx_handed", {})
        if (outer.qualname, child) not in memo:
            memo[(outer.qualname, child)] = any(
                ((isinstance(n, ast.Return) and n.value is not None) or (
                    isinstance(n, ast.Assign) and any(not isinstance(t, ast.Name) or t.id in outer.globals_
                                                      for t in n.targets)))
                and any(isinstance(m, ast.Name) and m.id == child for m in walk(n.value))
                for n in walk(outer.node))
        return f"{outer.qualname}.{name}" if memo[(outer.qualname, child)] else None
    return None


def attr_read(mod: Module, node: ast.AST) -> tuple[ast.AST, str] | None:
    """(object, name) when `node` reads attribute `name` of `object`, however it is spelt: `o.name`,
    `getattr(o, 'name'[, default])` with the name a constant or built from constants,
    `operator.attrgetter('name')(o)`."""
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    if not isinstance(node, ast.Call) or not node.args:
        return None
    if _getattr_call(node) and not shadowed(mod, "getattr"):
        s = mod.const_str(node.args[1])
        return (node.args[0], s) if s else None
    f = node.func
    if isinstance(f, ast.Call) and len(f.args) == 1 and len(node.args) == 1 \
            and (mod.qn(f.func) or "") == "operator.attrgetter":
        s = mod.const_str(f.args[0])
        if s and "." not in s:
            return node.args[0], s
    return None


def method_call(mod: Module, call: ast.Call, fi: FuncInfo | None = None) -> tuple[ast.AST, str] | None:
    """(receiver, method) when `call` calls a method of an object, however it is spelt: `r.m()`,
    `getattr(r, 'm')()`, `operator.methodcaller('m')(r)`, `functools.partial(r.m)()`,
    `(lambda: r.m())()`, or a bound method held in a local (`m = r.m` ... `m()`)."""
    c = mod.applied(call)
    f = c.func
    got = attr_read(mod, f)
    if got is not None:
        return got
    if isinstance(f, ast.Name):      # a caller or a bound method held in a local or a module global
        vals: Any = ()
        if fi is not None and f.id not in fi.params and f.id not in fi.globals_:
            vals = fi.assigns.get(f.id, ())
        if not vals and f.id in mod.consts and (fi is None or f.id not in fi.assigns):
            vals = (mod.consts[f.id],)
        if len(vals) != 1:
            return None
        f = vals[0]
        if isinstance(f, (ast.Attribute, ast.Call)) and attr_read(mod, f) is not None:
            return attr_read(mod, f)
    if isinstance(f, ast.Call) and f.args and c.args and (mod.qn(f.func) or "") == "operator.methodcaller":
        s = mod.const_str(f.args[0])
        return (c.args[0], s) if s else None
    return None


def builtin_called(mod: Module, call: ast.Call) -> str | None:
    """The builtin function a call invokes, by its bare name (`id`), where the module does not rebind
    the name: `id(t)`, `builtins.id(t)`, `getattr(builtins, 'id')(t)`, `builtins.__dict__['id'](t)`."""
    f = call.func
    if isinstance(f, ast.Name):
        return f.id if f.id in _BUILTIN_NAMES and not shadowed(mod, f.id) else None
    q = mod.qn(f) or ""
    if q.startswith("builtins.") and q.count(".") == 1:
        return q[9:]
    return None


def ident_source(mod: Module, call: ast.Call) -> bool:
    """Is the call (func not a plain attribute) a read of a tensor's identity or metadata?"""
    read = attr_read(mod, call)
    if read is not None and read[1] in _IDENT_ATTRS:
        return True
    m = method_call(mod, call)
    if m is not None and m[1] in _IDENT_ATTRS:
        return True
    return builtin_called(mod, call) == "id"


# ---------------------------------------------------------------------- small AST helpers
_BUILTIN_NAMES = frozenset(dir(__import__("builtins")))
#: attributes whose read is a tensor's identity or metadata (a cache key's source)
_IDENT_ATTRS = frozenset(_PTR_ATTRS + ("size", "stride", "_version", "shape", "dtype", "__cuda_array_interface__"))


def _attr_kind(attr: str, out: set[str]) -> None:
    """The identity kind an attribute read gives a key (`t._version`, `t.shape`, `t.data_ptr`)."""
    if attr == "_version":
        out.add("version")
    elif attr in ("shape", "dtype"):
        out.add("shape")
    elif attr in ("__cuda_array_interface__", "data_ptr"):
        out.add("ptr")


def _inline_exec(tree: ast.Module, depth: int = 0) -> dict[str, ast.Module]:
    """Module-level `exec` of a constant string (no namespace argument, or `globals()`) runs its code in
    the module's own namespace: its statements are the module's, as if written there.  They are put in
    the tree right after the exec, every node placed on the exec's lines (a finding in them cites the
    exec), so that every rule reads them as the module's own code.  A string that does not parse, or an
    `exec` the module rebinds, is left as it is (the capability audit still reads the string).  Returns
    each inlined string's tree by its code."""
    trees: dict[str, ast.Module] = {}
    if depth > 2:
        return trees
    strs: dict[str, str] = {}
    for st in tree.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            s = _fold_str(st.value, strs)
            if s is not None:
                strs[st.targets[0].id] = s
    if _has_exec(tree.body, strs) and "exec" not in _bound_names(tree):
        _inline_body(tree.body, strs, depth, trees)
    return trees


def _has_exec(body: list[ast.stmt], strs: dict[str, str]) -> bool:
    """Is there a module-level exec of a constant string among these statements (or their blocks)?"""
    for st in body:
        if _exec_code(st, strs) is not None:
            return True
        if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for sub in ("body", "orelse", "finalbody"):
                inner = getattr(st, sub, None)
                if isinstance(inner, list) and _has_exec(inner, strs):
                    return True
            if any(_has_exec(h.body, strs) for h in getattr(st, "handlers", []) or []):
                return True
    return False


def _inline_body(body: list[ast.stmt], strs: dict[str, str], depth: int, trees: dict[str, ast.Module]) -> None:
    """_inline_exec on one block of module-level statements (and the blocks of its if/try/with/for)."""
    i = 0
    while i < len(body):
        st = body[i]
        if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for sub in ("body", "orelse", "finalbody"):
                inner = getattr(st, sub, None)
                if isinstance(inner, list):
                    _inline_body(inner, strs, depth, trees)
            for h in getattr(st, "handlers", []) or []:
                _inline_body(h.body, strs, depth, trees)
        code = _exec_code(st, strs)
        new: list[ast.stmt] = []
        if code is not None and len(code) <= 200_000:
            try:
                sub_tree = ast.parse(code)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                sub_tree = None
            if sub_tree is not None:
                trees[code] = sub_tree
                trees.update(_inline_exec(sub_tree, depth + 1))
                for n in ast.walk(sub_tree):
                    if hasattr(n, "lineno"):
                        n.lineno, n.end_lineno = st.lineno, st.end_lineno
                        n.col_offset, n.end_col_offset = st.col_offset, st.end_col_offset
                new = sub_tree.body
        body[i + 1:i + 1] = new
        i += 1 + len(new)


def _bound_names(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.alias):
            out.add(n.asname or n.name.split(".")[0])
    return out


def _fold_str(e: ast.AST, strs: dict[str, str]) -> str | None:
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return e.value
    if isinstance(e, ast.Name):
        return strs.get(e.id)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        a, b = _fold_str(e.left, strs), _fold_str(e.right, strs)
        return a + b if a is not None and b is not None else None
    return None


def _exec_code(st: ast.stmt, strs: dict[str, str]) -> str | None:
    """The code of `exec(CONST)` / `exec(CONST, globals())` as a statement, else None."""
    if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)):
        return None
    c = st.value
    if not (isinstance(c.func, ast.Name) and c.func.id == "exec" and c.args and not c.keywords and len(c.args) <= 2):
        return None
    if len(c.args) == 2 and not (isinstance(c.args[1], ast.Call) and isinstance(c.args[1].func, ast.Name)
                                 and c.args[1].func.id == "globals" and not c.args[1].args):
        return None
    return _fold_str(c.args[0], strs)


def _is_main_test(test: ast.AST) -> bool:
    return main_guard(test) == "body"


#: module-level functions a deck's grader may call by name from the solution's module
_GRADER_CALLED = frozenset({"get_inputs", "get_init_inputs", "make_inputs", "setup", "reference"})


def main_guard(test: ast.AST) -> str | None:
    """Which arm of a test on `__name__` import never takes: "body" for `__name__ == "__main__"` (also
    written `"__main__" == __name__`, `__name__ in ("__main__",)`), "orelse" for `!=` / `not in`."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    a, b, op = test.left, test.comparators[0], test.ops[0]
    if isinstance(b, ast.Name) and b.id == "__name__":
        a, b = b, a
    if not (isinstance(a, ast.Name) and a.id == "__name__"):
        return None
    if isinstance(op, (ast.Eq, ast.NotEq)):
        if not (isinstance(b, ast.Constant) and b.value == "__main__"):
            return None
    elif isinstance(op, (ast.In, ast.NotIn)):
        if not (isinstance(b, (ast.Tuple, ast.List, ast.Set)) and b.elts
                and all(isinstance(e, ast.Constant) and e.value == "__main__" for e in b.elts)):
            return None
    else:
        return None
    return "body" if isinstance(op, (ast.Eq, ast.In)) else "orelse"


def name_rebound(nodes) -> bool:
    """The code may bind the module's `__name__` itself (an assignment, a parameter, `globals()[
    '__name__'] = ...`, `.update(__name__=...)`, setattr or an attribute store on something that is not
    one of its own functions or classes, whose `__name__` a decorator sets): a `__name__ == "__main__"`
    test may then be taken on import."""
    nodes = list(nodes)
    own = {n.name for n in nodes if n.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)}

    def owned(e: ast.AST) -> bool:
        return isinstance(e, ast.Name) and e.id in own

    for n in nodes:
        t = n.__class__
        if t is ast.Name and n.id == "__name__" and not isinstance(n.ctx, ast.Load):
            return True
        if t is ast.arg and n.arg == "__name__":
            return True
        if t is ast.Attribute and n.attr == "__name__" and not isinstance(n.ctx, ast.Load) and not owned(n.value):
            return True
        if t is ast.Subscript and not isinstance(n.ctx, ast.Load) and isinstance(n.slice, ast.Constant) \
                and n.slice.value == "__name__":
            return True
        if t is ast.Call:
            f = n.func
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            consts = [a for a in n.args if isinstance(a, ast.Constant) and a.value == "__name__"]
            if fname in ("setattr", "__setattr__") and consts and not (n.args and owned(n.args[0])):
                return True
            if fname in ("update", "__setitem__", "setdefault") and (
                    consts or any(kw.arg == "__name__" for kw in n.keywords)
                    or any(isinstance(a, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "__name__"
                                                           for k in a.keys) for a in n.args)):
                return True
    return False


def import_dead(nodes, rebound: bool = False) -> set[int]:
    """The ids of the nodes in an arm of a `__name__` test that import does not take (see `main_guard`),
    wherever the test is (module level, a function, a method, a nested def), for the tests among `nodes`
    (a tree's If and IfExp nodes; a tree: all of them)."""
    dead: set[int] = set()
    if rebound:
        return dead
    if isinstance(nodes, ast.AST):
        nodes = [n for n in ast.walk(nodes) if n.__class__ in (ast.If, ast.IfExp)]
    for n in nodes:
        if n.__class__ in (ast.If, ast.IfExp) and id(n) not in dead:
            arm = main_guard(n.test)
            if arm is None:
                continue
            part = getattr(n, arm)
            for st in (part if isinstance(part, list) else [part]):
                dead.update(map(id, ast.walk(st)))
    return dead


def _getattr_call(n: ast.Call) -> bool:
    return isinstance(n.func, ast.Name) and n.func.id == "getattr" and len(n.args) >= 2


def _deco_func(d: ast.AST) -> ast.AST:
    return d.func if isinstance(d, ast.Call) else d


def _target_key(t: ast.AST) -> str:
    if isinstance(t, ast.Name):
        return t.id
    if isinstance(t, ast.Attribute):
        inner = _target_key(t.value)
        return f"{inner}.{t.attr}" if inner else t.attr
    return ""


def _names_in_target(t: ast.AST) -> Iterator[str]:
    if isinstance(t, ast.Name):
        yield t.id
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _names_in_target(e)
    elif isinstance(t, ast.Starred):
        yield from _names_in_target(t.value)


def _walk_func(fn: ast.AST) -> Iterator[ast.AST]:
    """Walk a function body without descending into nested function or class definitions."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(n))


def _declared_global(fn: ast.AST, name: str) -> bool:
    return any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in _walk_func(fn))


# fields that hold an identifier, a number or a flag in every node type (never a node)
_NON_NODE_FIELDS = frozenset({"id", "attr", "name", "arg", "kind", "type_comment", "level", "module", "asname",
                              "conversion", "is_async"})
_WALK_FIELDS: dict[type, tuple[str, ...]] = {}


def _walk_below(node: ast.AST) -> tuple[ast.AST, ...]:
    """tuple(ast.walk(node))[1:]: the nodes under `node` in ast.walk's (breadth-first) order, without
    ast.walk's generator per node and getattr of fields that never hold a node."""
    out = [node]
    append = out.append
    fields_of = _WALK_FIELDS
    AST = ast.AST
    for n in out:              # the list grows while it is read: a FIFO queue, as ast.walk's deque
        t = n.__class__
        fl = fields_of.get(t)
        if fl is None:
            fl = fields_of[t] = () if t is ast.Constant else tuple(f for f in t._fields if f not in _NON_NODE_FIELDS)
        for f in fl:
            v = getattr(n, f, None)
            if isinstance(v, AST):
                append(v)
            elif isinstance(v, list):
                for item in v:
                    if isinstance(item, AST):
                        append(item)
    return tuple(out[1:])


def walk(node: ast.AST) -> tuple[ast.AST, ...]:
    """tuple(ast.walk(node)), its walk below the node computed once per node (kept on the node): the
    rules walk the same expressions many times (keys, cached values, branch tests).  What is kept
    leaves the node itself out, so that no node refers to itself: the tree is freed by reference
    counting when the lint drops it, not left to the cyclic collector."""
    r = node.__dict__.get("_fx_walk")
    if r is None:
        r = node.__dict__["_fx_walk"] = _walk_below(node)
    return (node,) + r


def unparse(node: ast.AST) -> str:
    """ast.unparse(node), computed once per node (kept on the node, like walk)."""
    r = node.__dict__.get("_fx_unparse")
    if r is None:
        r = node.__dict__["_fx_unparse"] = ast.unparse(node)
    return r


def _names(expr: ast.AST) -> frozenset[str]:
    """Names read or written anywhere in `expr`; computed once per node (kept on the node)."""
    r = expr.__dict__.get("_fx_names")
    if r is None:
        r = frozenset(n.id for n in walk(expr) if n.__class__ is ast.Name)
        expr.__dict__["_fx_names"] = r
    return r


def _tensor_text(e: ast.AST) -> str:
    """`self.w` for `self.w`, `self.w.untyped_storage()` or `self.w.detach()`: the tensor a key part names."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.args and e.func.attr in (
            "untyped_storage", "storage", "detach", "contiguous"):
        e = e.func.value
    return ast.unparse(e)


def _entries(mod: Module) -> Iterator[FuncInfo]:
    """The solution's entry points (forward/step/decode_steps/...), Triton kernels excluded."""
    return (fi for fi in mod.funcs.values() if fi.node.name in FORWARD_NAMES and not fi.is_triton)


def _entry_params(fi: FuncInfo) -> list[str]:
    """The parameters a caller supplies: a method's first one (self or cls, whatever it is named) left out,
    a staticmethod's kept; a function nested in a method drops only a first parameter named self or cls."""
    p = fi.params
    if not p or fi.cls is None:
        return list(p)
    direct = fi.qualname.split(".")[-2:-1] == [fi.cls]
    static = any(_target_key(_deco_func(d)).split(".")[-1] == "staticmethod" for d in fi.node.decorator_list)
    if (direct and not static) or p[0] in ("self", "cls"):
        return p[1:]
    return list(p)


def _module_scope(mod: Module, n: ast.AST) -> bool:
    return mod.scope_of(n) is None
