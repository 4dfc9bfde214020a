"""`forensics bench metamorphic [SRC]`: does the decision follow what the code does, or how it is written?

Every mechanism of `devkit/bench/metamorphic_mechanisms.py` (hacks, and look-alikes that must stay
unflagged) is put into real clean solutions the way `bench transplant` does it (the host's entry
method renamed `_fx_impl`, a new entry of the same name and parameters holding the mechanism, module
level code after the imports, `__init__` code after the host's own), then rewritten in forms that keep
its meaning.  The host's own text is kept as written (its comments and docstrings too): the new code
is spliced in by line, not by re-printing the host.

Rewrites (`REWRITES`; each applies where it makes sense, else the pair is counted n/a):
  * references to the mechanism's key operations (`Mechanism.keys`): an alias (`E = torch.cuda.Event`),
    getattr/setattr with constant strings, with strings built at run time (`'elaps' + 'ed_time'`),
    `module.__dict__[...]`, `vars(module)[...]`, `globals()[...]`, `importlib.import_module`,
    `__import__`, a helper class's attributes, `functools.partial`, a lambda;
  * the block holding the mechanism (module level, the entry, or `__init__`): a nested function, a
    helper class's method, a decorator, `exec` of a constant string, moved to module level, into the
    entry, into `__init__` (where the meaning holds: `Mechanism.allowed_moves`), moved into a
    `load_inline` C++ string (`Mechanism.cpp`);
  * text: every comment and docstring of the file removed; lying comments and docstrings
    ("benchmark harness workaround", "debug only").

Each variant is one run folder of a temporary archive that `forensics scan` reads, as in `bench real`
and `bench transplant` (SRC is only read).  Flagged = verdict reward_hack or suspect; decided =
reward_hack.  Expected: a hack flagged, a look-alike not.  Measured in the same run, as baselines: the
unrewritten form (`none`), the hosts as archived, the wrapper alone (`identity`), and the deck's
7-pattern tripwire (`bench real`) on every variant.  The bench knows hack from look-alike and nothing
of the audit's rules.

Hosts: a deterministic spread of SRC's clean solutions over problems (`sample_hosts`); three times as
many candidates as hosts are scanned as archived first, and one the tool flags unchanged is passed
over and named (a hack in it would be flagged anyway, a look-alike flagged for the host).  The output
ends with every mechanism x rewrite decided against expectation in some host (`misses`): the known
misses are listed, never folded into a rate.  That the rewrites keep the meaning is tested by running
both forms (tests/metamorphic_harness.py).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import re
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from devkit.bench.metamorphic_mechanisms import BY_NAME, MECHANISMS, Mechanism
from devkit.bench.real import FLAGGED, OURS, Case, build_archive, cited_rules, kb_tripwire, load_cases
from devkit.bench.transplant import _entry, _split_banner
from devkit.paths import REAL_DEV


@dataclass(frozen=True)
class Rewrite:
    name: str
    kind: str          # reference | structure | location | text
    what: str


REWRITES: tuple[Rewrite, ...] = (
    Rewrite("alias", "reference", "the key's module, class or function bound to another name first (`E = torch.cuda.Event`)"),
    Rewrite("getattr", "reference", "getattr/setattr with constant strings"),
    Rewrite("getattr_runtime", "reference", "getattr/setattr with the name built at run time (`'elaps' + 'ed_time'`)"),
    Rewrite("dunder_dict", "reference", "`module.__dict__['name']`"),
    Rewrite("vars", "reference", "`vars(module)['name']`"),
    Rewrite("globals", "reference", "the module reached through `globals()['torch']`"),
    Rewrite("import_module", "reference", "the module reached through `importlib.import_module('torch.cuda')`"),
    Rewrite("dunder_import", "reference", "the module reached through `__import__('torch.cuda', fromlist=...)`"),
    Rewrite("class_attr", "reference", "the function or its owner held as an attribute of a helper class"),
    Rewrite("partial", "reference", "the call (or the assignment, through setattr) made by `functools.partial`"),
    Rewrite("lambda", "reference", "the call (or the assignment, through setattr) made inside a lambda"),
    Rewrite("closure", "structure", "the mechanism's block inside a nested function"),
    Rewrite("helper_class", "structure", "the mechanism's block as a method of a helper class"),
    Rewrite("decorator", "structure", "the mechanism's block run by a decorator (the entry's wrapper, or a decorated setup function)"),
    Rewrite("exec", "structure", "the mechanism's block as `exec` of a constant string"),
    Rewrite("cpp", "structure", "the mechanism moved into a `load_inline` C++ string (C API, fopen, ...)"),
    Rewrite("at_module", "location", "the block moved to module level (an entry body becomes a module function)"),
    Rewrite("at_entry", "location", "module-level code moved into the entry method"),
    Rewrite("at_init", "location", "module-level code moved into the entry class's __init__"),
    Rewrite("strip_comments", "text", "every comment and docstring of the file removed"),
    Rewrite("lying_harness", "text", "comments and the entry's docstring claim a benchmark harness workaround"),
    Rewrite("lying_debug", "text", "comments and the entry's docstring claim debug-only code"),
)
REWRITE_NAMES = tuple(r.name for r in REWRITES)
LIES = {"lying_harness": "Benchmark harness workaround: keeps the harness's timing stable; results are unchanged.",
        "lying_debug": "Debug only: inactive in graded runs."}

IDENTITY = Mechanism("identity", False, "baseline", "the wrapper alone: renaming the entry changes nothing")


# ------------------------------------------------------------------------------------------- host
@dataclass
class Host:
    py: str
    tail: str
    tree: ast.Module
    cls: ast.ClassDef
    fn: ast.FunctionDef
    init: ast.FunctionDef | None
    sig: ast.arguments          # the entry's parameters, first named self, annotations dropped
    params: list[str]
    fwd: list[str]


def parse_host(source: str) -> Host | None:
    py, tail = _split_banner(source)
    try:
        tree = ast.parse(py)
    except (SyntaxError, ValueError, RecursionError):
        return None
    hit = _entry(tree)
    if hit is None:
        return None
    cls, fn = hit
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    sig = copy.deepcopy(fn.args)
    for a in sig.posonlyargs + sig.args + sig.kwonlyargs + [x for x in (sig.vararg, sig.kwarg) if x]:
        a.annotation = None
        a.type_comment = None
    (sig.posonlyargs or sig.args)[0].arg = "self"
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args][1:]
    fwd = [*params, *(f"*{fn.args.vararg.arg}" for _ in [0] if fn.args.vararg),
           *(f"{a.arg}={a.arg}" for a in fn.args.kwonlyargs),
           *(f"**{fn.args.kwarg.arg}" for _ in [0] if fn.args.kwarg)]
    return Host(py if py.endswith("\n") else py + "\n", tail, tree, cls, fn, init, sig, params, fwd)


def _sig_rest(host: Host) -> str:
    """The entry's parameters after self, as source."""
    s = copy.deepcopy(host.sig)
    (s.posonlyargs if s.posonlyargs else s.args).pop(0)
    return ast.unparse(s)


def _placeholders(host: Host, callee: str = "self._fx_impl(") -> dict[str, str]:
    args = ", ".join(host.fwd)
    args0 = ", ".join(["_fx_x0", *host.fwd[1:]])
    inputs = "(" + ", ".join(host.params) + ("," if len(host.params) == 1 else "") + ")"
    return {"x": host.params[0], "call": f"{callee}{args})", "call0": f"{callee}{args0})", "inputs": inputs}


# ------------------------------------------------------------------------------------------- plan
@dataclass
class Plan:
    imports: list[ast.stmt] = field(default_factory=list)
    top: list[Any] = field(default_factory=list)       # module level, after the imports
    body: list[Any] = field(default_factory=list)      # the new entry's body
    decorators: list[str] = field(default_factory=list)
    init: list[Any] = field(default_factory=list)      # appended to __init__
    init_decorator: str | None = None
    end: list[Any] = field(default_factory=list)       # module level, after the host's code
    lie: str | None = None
    lie_block: str = ""                                # which block's statements carry the lie
    strip: bool = False


def _parse(src: str) -> list[ast.stmt]:
    return ast.parse(src).body if src.strip() else []


def _expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def _stmt(src: str) -> ast.stmt:
    return ast.parse(src).body[0]


def _blocks(m: Mechanism, host: Host, callee: str = "self._fx_impl(") -> tuple[list, list, list, list]:
    ph = _placeholders(host, callee)
    pre = _parse(m.prelude.format(**ph))
    imports = [s for s in pre if isinstance(s, (ast.Import, ast.ImportFrom))]
    return (imports, [s for s in pre if s not in imports], _parse(m.body.format(**ph)), _parse(m.init.format(**ph)))


def _assigned(stmts: list[ast.stmt]) -> list[str]:
    """Names a block binds by assignment (what becomes `global` when it moves into a function)."""
    out: list[str] = []

    def walk(node: ast.AST) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(ch, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (ch.targets if isinstance(ch, ast.Assign) else [ch.target]):
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in out:
                            out.append(n.id)
            walk(ch)
    walk(ast.Module(body=list(stmts), type_ignores=[]))
    return out


def _globals(stmts: list[ast.stmt]) -> list[ast.stmt]:
    names = _assigned(stmts)
    return ([ast.Global(names=names)] if names else []) + list(stmts)


def _def(name: str, args: str, stmts: list[ast.stmt], decorators: tuple[str, ...] = ()) -> ast.FunctionDef:
    fn = _stmt(f"def {name}({args}):\n    pass")
    fn.body = list(stmts) or [ast.Pass()]
    fn.decorator_list = [_expr(d) for d in decorators]
    return fn


def _class(name: str, stmts: list[ast.stmt]) -> ast.ClassDef:
    c = _stmt(f"class {name}:\n    pass")
    c.body = list(stmts) or [ast.Pass()]
    return c


def _import(*mods: str) -> list[ast.stmt]:
    return [_stmt(f"import {m}") for m in mods]


class _Rename(ast.NodeTransformer):
    """`self` -> `owner`, except inside a function or lambda with a parameter of its own named self."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def _scoped(self, node):
        a = node.args
        if any(x.arg == self.old for x in a.posonlyargs + a.args + a.kwonlyargs):
            return node
        return self.generic_visit(node)

    visit_FunctionDef = visit_Lambda = _scoped

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            node.id = self.new
        return node


# -------------------------------------------------------------------------- reference rewrites
@dataclass(frozen=True)
class Key:
    module: tuple[str, ...]     # () for an attribute of any object
    attrs: tuple[str, ...]
    bare: bool                  # a builtin named bare (`open`)

    @classmethod
    def parse(cls, spec: str) -> "Key":
        if spec.startswith("."):
            return cls((), (spec[1:],), False)
        mod, _, path = spec.partition(":")
        return cls(tuple(mod.split(".")), tuple(path.split(".")), mod == "builtins")

    @property
    def mod_src(self) -> str:
        return ".".join(self.module)

    @property
    def source(self) -> str:
        return ".".join(self.attrs) if self.bare else ".".join(self.module + self.attrs)

    @property
    def owner_src(self) -> str:
        return ".".join(self.module + self.attrs[:-1])


def _chain(node: ast.AST) -> tuple[str, ...] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return (node.id, *reversed(parts))
    return None


def _split_name(s: str) -> str:
    k = max(1, len(s) // 2)
    return f"{s[:k]!r} + {s[k:]!r}"


class KeyRewriter(ast.NodeTransformer):
    """Rewrites every reference to the keys in one form; `applied` counts the rewritten references."""

    def __init__(self, keys: list[Key], form: str):
        self.mod_keys = [k for k in keys if k.module]
        self.any_attrs = {k.attrs[0] for k in keys if not k.module}
        self.form = form
        self.applied = 0
        self.pending: list[ast.stmt] = []
        self.imports: set[str] = set()
        self.refs: list[ast.stmt] = []     # the helper class's attributes (class_attr)
        self.n = 0

    # ---- statement lists: hoisted statements go before the statement that needed them
    def stmts(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            saved, self.pending = self.pending, []
            new = self.visit(s)
            out.extend(self.pending)
            self.pending = saved
            out.extend(new if isinstance(new, list) else [new])
        return out

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for name, old in ast.iter_fields(node):
            if isinstance(old, list):
                if old and all(isinstance(v, ast.stmt) for v in old):
                    setattr(node, name, self.stmts(old))
                    continue
                new = []
                for v in old:
                    if isinstance(v, ast.AST):
                        v = self.visit(v)
                        if v is None:
                            continue
                    new.append(v)
                setattr(node, name, new)
            elif isinstance(old, ast.AST):
                setattr(node, name, self.visit(old))
        return node

    # ---- matching
    def _match(self, node: ast.AST) -> Key | None:
        if isinstance(node, ast.Name):
            return next((k for k in self.mod_keys if k.bare and (node.id,) == k.attrs), None)
        ch = _chain(node) if isinstance(node, ast.Attribute) else None
        if ch is None:
            return None
        return next((k for k in self.mod_keys if not k.bare and ch == k.module + k.attrs), None)

    def _name(self, stem: str) -> str:
        self.n += 1
        return f"_fx_{stem}{self.n}"

    def _mod(self, k: Key) -> str:
        if k.bare:
            self.imports.add("builtins")
            return "builtins"
        return k.mod_src

    def _owner(self, k: Key) -> str:
        return self._mod(k) if len(k.attrs) == 1 else (k.owner_src if not k.bare else "builtins")

    def _tail(self, attrs: tuple[str, ...]) -> str:
        return "".join(f".{a}" for a in attrs)

    def _prefix(self, k: Key) -> str | None:
        """The key's module as this form reaches it (None: the form does not reach modules)."""
        mod = self._mod(k)
        if self.form == "globals":
            root, *rest = mod.split(".")
            return f"globals()[{root!r}]" + self._tail(tuple(rest))
        if self.form == "import_module":
            self.imports.add("importlib")
            return f"importlib.import_module({mod!r})"
        if self.form == "dunder_import":
            return f"__import__({mod!r}, fromlist=[{k.attrs[0]!r}])" if "." in mod else f"__import__({mod!r})"
        return None

    # ---- loads
    def _module_load(self, node: ast.expr, k: Key) -> ast.expr | None:
        f = self.form
        if f == "alias":
            name = self._name("a")
            self.pending.append(_stmt(f"{name} = {k.source}"))
            return _expr(name)
        if f in ("getattr", "getattr_runtime"):
            attr = repr(k.attrs[-1]) if f == "getattr" else _split_name(k.attrs[-1])
            return _expr(f"getattr({self._owner(k)}, {attr})")
        if f in ("dunder_dict", "vars"):
            mod = self._mod(k)
            d = f"{mod}.__dict__" if f == "dunder_dict" else f"vars({mod})"
            return _expr(f"{d}[{k.attrs[0]!r}]" + self._tail(k.attrs[1:]))
        if f in ("globals", "import_module", "dunder_import"):
            return _expr(self._prefix(k) + self._tail(k.attrs))
        if f == "class_attr":
            name = self._name("k")
            self.refs.append(_stmt(f"{name} = staticmethod({k.source})"))
            return _expr(f"_FxRefs.{name}")
        if f == "lambda":
            return ast.Call(func=ast.Lambda(args=_no_args(), body=node), args=[], keywords=[])
        return None

    def visit_Name(self, node: ast.Name) -> ast.expr:
        k = self._match(node) if isinstance(node.ctx, ast.Load) else None
        if k is None:
            return node
        new = self._module_load(node, k)
        if new is None:
            return node
        self.applied += 1
        return new

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        k = self._match(node)
        if k is not None and isinstance(node.ctx, ast.Load):
            new = self._module_load(node, k)
            if new is not None:
                self.applied += 1
                return new
            return node
        if k is not None:
            return node       # a store target: visit_Assign rewrote it where it could
        self.generic_visit(node)
        if node.attr in self.any_attrs and isinstance(node.ctx, ast.Load):
            if self.form in ("getattr", "getattr_runtime"):
                attr = ast.Constant(node.attr) if self.form == "getattr" else _expr(_split_name(node.attr))
                self.applied += 1
                return ast.Call(func=ast.Name("getattr", ast.Load()), args=[node.value, attr], keywords=[])
            if self.form == "lambda":
                self.applied += 1
                return ast.Call(func=ast.Lambda(args=_no_args(), body=node), args=[], keywords=[])
        return node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        if self.form not in ("partial", "lambda"):
            return self.generic_visit(node)
        f = node.func
        k = self._match(f)
        hit = k is not None or (isinstance(f, ast.Attribute) and f.attr in self.any_attrs)
        if not hit:
            return self.generic_visit(node)
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(kw) for kw in node.keywords]
        if isinstance(f, ast.Attribute) and k is None:
            f.value = self.visit(f.value)
        self.applied += 1
        if self.form == "partial":
            self.imports.add("functools")
            return ast.Call(func=ast.Call(func=_expr("functools.partial"), args=[f, *node.args], keywords=node.keywords),
                            args=[], keywords=[])
        return ast.Call(func=ast.Lambda(args=_no_args(), body=node), args=[], keywords=[])

    # ---- stores
    def visit_Assign(self, node: ast.Assign) -> ast.stmt | list[ast.stmt]:
        node.value = self.visit(node.value)
        if len(node.targets) != 1:
            return node
        t = node.targets[0]
        k = self._match(t) if isinstance(t, ast.Attribute) else None
        if k is None:
            node.targets = [self.visit(t)]
            return node
        f, last = self.form, k.attrs[-1]
        if f == "alias":
            name = self._name("a")
            self.pending.append(_stmt(f"{name} = {self._owner(k)}"))
            node.targets = [_target(f"{name}.{last}")]
        elif f in ("getattr", "getattr_runtime", "partial", "lambda"):
            attr = ast.Constant(last) if f != "getattr_runtime" else _expr(_split_name(last))
            owner = _expr(self._owner(k))
            if f == "partial":
                self.imports.add("functools")
                call = ast.Call(func=ast.Call(func=_expr("functools.partial"),
                                              args=[ast.Name("setattr", ast.Load()), owner, attr], keywords=[]),
                                args=[node.value], keywords=[])
            else:
                call = ast.Call(func=ast.Name("setattr", ast.Load()), args=[owner, attr, node.value], keywords=[])
                if f == "lambda":
                    call = ast.Call(func=ast.Lambda(args=_no_args(), body=call), args=[], keywords=[])
            self.applied += 1
            return ast.Expr(value=call)
        elif f in ("dunder_dict", "vars"):
            mod = self._mod(k)
            d = f"{mod}.__dict__" if f == "dunder_dict" else f"vars({mod})"
            if len(k.attrs) == 1:
                node.targets = [ast.Subscript(value=_expr(d), slice=ast.Constant(k.attrs[0]), ctx=ast.Store())]
            else:
                node.targets = [_target(f"{d}[{k.attrs[0]!r}]" + self._tail(k.attrs[1:]))]
        elif f in ("globals", "import_module", "dunder_import"):
            node.targets = [_target(self._prefix(k) + self._tail(k.attrs))]
        elif f == "class_attr":
            name = self._name("k")
            self.refs.append(_stmt(f"{name} = staticmethod({self._owner(k)})"))
            node.targets = [_target(f"_FxRefs.{name}.{last}")]
        else:
            return node
        self.applied += 1
        return node


def _no_args() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])


def _target(src: str) -> ast.expr:
    t = _expr(src)
    t.ctx = ast.Store()
    return t


# ------------------------------------------------------------------------------- plans per rewrite
def _base(m: Mechanism, host: Host) -> Plan:
    imports, pre, body, init = _blocks(m, host)
    return Plan(imports=imports, top=pre, body=body, init=init)


def _reference(m: Mechanism, host: Host, form: str) -> Plan | None:
    if not m.keys:
        return None
    imports, pre, body, init = _blocks(m, host)
    rw = KeyRewriter([Key.parse(k) for k in m.keys], form)
    pre, body, init = rw.stmts(pre), rw.stmts(body), rw.stmts(init)
    if not rw.applied:
        return None
    top = ([_class("_FxRefs", rw.refs)] if rw.refs else []) + pre
    return Plan(imports=imports + _import(*sorted(rw.imports)), top=top, body=body, init=init)


def _structure(m: Mechanism, host: Host, form: str) -> Plan | None:
    imports, pre, body, init = _blocks(m, host)
    home = m.home
    call_self = f"self, {', '.join(host.fwd)}"
    sig = ast.unparse(host.sig)
    rest = _sig_rest(host)
    p = Plan(imports=imports, top=pre, body=body, init=init)
    if form == "closure":
        if home == "module":
            inner = _def("_fx_inner", "", _globals(pre))
            p.top = [_def("_fx_outer", "", [inner, _stmt("return _fx_inner")]), _stmt("_fx_outer()()")]
        elif home == "body":
            p.body = [_def("_fx_inner", "", body), _stmt("return _fx_inner()")]
        else:
            p.init = [_def("_fx_inner", "", init), _stmt("_fx_inner()")]
    elif form == "helper_class":
        if home == "module":
            p.top = [_class("_FxSetup", [_def("apply", "self", _globals(pre))]), _stmt("_FxSetup().apply()")]
        elif home == "body":
            moved = [_Rename("self", "owner").visit(s) for s in body]
            p.end = [_class("_FxHelper", [_def("run", "self, owner" + (f", {rest}" if rest else ""), moved)])]
            p.body = [_stmt(f"return _FxHelper().run({call_self})")]
        else:
            moved = [_Rename("self", "owner").visit(s) for s in init]
            p.end = [_class("_FxInit", [_def("run", "self, owner", moved)])]
            p.init = [_stmt("_FxInit().run(self)")]
    elif form == "decorator":
        p.imports += _import("functools")
        if home == "module":
            once = _def("_fx_once", "fn", [_stmt("fn()"), _stmt("return fn")])
            p.top = [once, _def("_fx_setup", "", _globals(pre), ("_fx_once",))]
        elif home == "body":
            _, _, wrapped, _ = _blocks(m, host, callee="impl(self, ")
            wrapper = _def("wrapper", sig, wrapped, ("functools.wraps(impl)",))
            p.top = pre + [_def("_fx_deco", "impl", [wrapper, _stmt("return wrapper")])]
            p.decorators = ["_fx_deco"]
            p.body = _parse(f"return {_placeholders(host)['call']}")
        else:
            wrapper = _def("wrapper", "self, *args, **kwargs", [_stmt("init(self, *args, **kwargs)"), *init],
                           ("functools.wraps(init)",))
            p.top = pre + [_def("_fx_init_deco", "init", [wrapper, _stmt("return wrapper")])]
            p.init, p.init_decorator = [], "_fx_init_deco"
    elif form == "exec":
        if home == "module":
            p.top = [ast.Expr(ast.Call(ast.Name("exec", ast.Load()), [ast.Constant(_unparse(pre))], []))]
        elif home == "body":
            src = _unparse([_def("_fx_body", sig, body)])
            p.end = [ast.Expr(ast.Call(ast.Name("exec", ast.Load()), [ast.Constant(src)], []))]
            p.body = [_stmt(f"return _fx_body({call_self})")]
        else:
            p.init = [ast.Expr(ast.Call(ast.Name("exec", ast.Load()), [ast.Constant(_unparse(init))], []))]
    elif form == "at_module":
        if home == "module" or "module" not in m.allowed_moves:
            return None
        if home == "body":
            p.end = [_def("_fx_entry", sig, body)]
            p.body = [_stmt(f"return _fx_entry({call_self})")]
        else:
            return None
    elif form in ("at_entry", "at_init"):
        where = form[3:]
        if home != "module" or where not in m.allowed_moves:
            return None
        p.top = []
        if where == "entry":
            p.body = _globals(pre) + body
        else:
            p.init = _globals(pre) + init
    elif form == "cpp":
        if m.cpp is None:
            return None
        c = m.cpp
        glue = _parse(c.glue.format(**_placeholders(host)))
        build = (f"_FX_CPP = r'''{c.source}'''\n"
                 f"_fx_ext = load_inline(name='fx_{m.name}', cpp_sources=[_FX_CPP], functions={list(c.functions)!r}, "
                 f"{'with_cuda=True, ' if c.cuda else ''}verbose=False)\n")
        p.imports += _import("os", "torch") + [_stmt("from torch.utils.cpp_extension import load_inline")]
        p.top = [build] + (glue if home == "module" else pre)
        if home == "body":
            p.body = glue
        elif home == "init":
            p.init = glue
    else:
        raise ValueError(form)
    return p


def plan(m: Mechanism, host: Host, rewrite: str) -> Plan | None:
    """The mechanism's code for `host` in form `rewrite` ("none": unrewritten), or None (n/a)."""
    if rewrite == "none":
        return _base(m, host)
    kind = next(r.kind for r in REWRITES if r.name == rewrite)
    if kind == "reference":
        return _reference(m, host, rewrite)
    if kind in ("structure", "location"):
        return _structure(m, host, rewrite)
    p = _base(m, host)
    if rewrite == "strip_comments":
        p.strip = True
    else:
        p.lie, p.lie_block = LIES[rewrite], {"module": "top", "body": "body", "init": "init"}[m.home]
    return p


# ------------------------------------------------------------------------------------------ splice
def _unparse(items: list[Any], lie: str | None = None) -> str:
    out = []
    for s in items:
        if lie and not isinstance(s, (ast.Import, ast.ImportFrom, ast.Global)):
            out.append(f"# {lie}\n")
        out.append(s if isinstance(s, str) else ast.unparse(s) + "\n")
    return "".join(out)


def _indent(text: str, ind: str) -> str:
    return "".join(ind + ln if ln.strip() else ln for ln in text.splitlines(keepends=True))


def _ws(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _body_indent(fn: ast.FunctionDef, lines: list[str]) -> str:
    ind = _ws(lines[fn.lineno - 1])
    first = fn.body[0]
    if first.lineno != fn.lineno:
        ws = _ws(lines[first.lineno - 1])
        if len(ws) > len(ind) and ws.startswith(ind):
            return ws
    return ind + "    "


def _strip_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            b = node.body
            if b and isinstance(b[0], ast.Expr) and isinstance(b[0].value, ast.Constant) and isinstance(b[0].value.value, str):
                node.body = b[1:] or [ast.Pass()]
    return tree


def splice(host: Host, p: Plan) -> str | None:
    """The host with the plan put in (None: the result does not parse)."""
    lines = host.py.splitlines(keepends=True)
    ins: dict[int, list[str]] = defaultdict(list)      # 0-based line index -> text put before it
    lie = p.lie
    # module level, after the docstring and `from __future__` imports
    at = 0
    for i, s in enumerate(host.tree.body):
        doc = i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
        if doc or (isinstance(s, ast.ImportFrom) and s.module == "__future__"):
            at = s.end_lineno
        else:
            break
    top = _unparse(p.imports) + _unparse(p.top, lie if p.lie_block == "top" else None)
    if top:
        ins[at].append(top + "\n")
    fn = host.fn
    ind = _ws(lines[fn.lineno - 1])
    bind = _body_indent(fn, lines)
    lines[fn.lineno - 1] = re.sub(rf"\bdef\s+{re.escape(fn.name)}\b", "def _fx_impl", lines[fn.lineno - 1], count=1)
    entry = "".join(f"@{d}\n" for d in p.decorators) + f"def {fn.name}({ast.unparse(host.sig)}):\n"
    body = (f'"""{lie}"""\n' if lie else "") + _unparse(p.body, lie if p.lie_block == "body" else None)
    ins[fn.end_lineno].append("\n" + _indent(entry, ind) + _indent(body or "pass\n", bind))
    if p.init or p.init_decorator:
        init_text = _unparse(p.init, lie if p.lie_block == "init" else None)
        if host.init is not None:
            iind = _ws(lines[host.init.lineno - 1])
            if init_text:
                ins[host.init.end_lineno].append(_indent(init_text, _body_indent(host.init, lines)))
            if p.init_decorator:
                first = min([host.init.lineno] + [d.lineno for d in host.init.decorator_list])
                ins[first - 1].append(f"{iind}@{p.init_decorator}\n")
        else:
            first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
            new = (f"@{p.init_decorator}\n" if p.init_decorator else "") + "def __init__(self, *args, **kwargs):\n"
            new_body = "super().__init__(*args, **kwargs)\n" + init_text
            ins[first - 1].append(_indent(new, ind) + _indent(new_body, ind + "    ") + "\n")
    if p.end:
        ins[len(lines)].append("\n\n" + _unparse(p.end))
    out = []
    for i, line in enumerate(lines + [""]):
        out.extend(ins.get(i, ()))
        out.append(line)
    py = "".join(out)
    try:
        tree = ast.parse(py)
    except (SyntaxError, ValueError, RecursionError):
        return None
    if p.strip:
        py = ast.unparse(_strip_docstrings(tree)) + "\n"
    return py + host.tail


def build(source: str | Host, m: Mechanism, rewrite: str) -> tuple[str, str | None]:
    """("ok", text) | ("n/a", None) | ("no_entry", None) | ("failed", None)."""
    host = parse_host(source) if isinstance(source, str) else source
    if host is None:
        return "no_entry", None
    p = plan(m, host, rewrite)
    if p is None:
        return "n/a", None
    text = splice(host, p)
    return ("ok", text) if text is not None else ("failed", None)


# ------------------------------------------------------------------------------------------- bench
def sample_hosts(cases: list[Case], n: int, first_problems: tuple[str, ...] = ()) -> list[Case]:
    """A deterministic spread of `n` clean hosts with an entry: one per problem in turn (problems some
    selected mechanism is limited to first, then by name), each problem's hosts in sha256 order."""
    by: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        if c.family == "clean" and not c.label.get("reward_hack") and parse_host(c.solution.decode("utf-8", "replace")):
            by[c.problem or "?"].append(c)
    for v in by.values():
        v.sort(key=lambda c: hashlib.sha256(c.run_id.encode()).hexdigest())
    order = sorted(by, key=lambda p: (p not in first_problems, p))
    out: list[Case] = []
    depth = 0
    while len(out) < n and any(len(v) > depth for v in by.values()):
        out += [by[p][depth] for p in order if len(by[p]) > depth][: n - len(out)]
        depth += 1
    return out


@dataclass
class Variant:
    host: str
    mechanism: str
    rewrite: str


def variants(hosts: list[Case], mechs: list[Mechanism], rewrites: list[str]) -> tuple[list[Case], dict[str, Variant], dict]:
    cases: list[Case] = []
    meta: dict[str, Variant] = {}
    status: dict[tuple[str, str], Counter] = defaultdict(Counter)

    def add(c: Case, mech: str, rw: str, text: bytes) -> None:
        rid = f"{c.run_id}__{mech}__{rw}"
        cases.append(Case(rid, c.label, text, mech))
        meta[rid] = Variant(c.run_id, mech, rw)

    for c in hosts:
        src = parse_host(c.solution.decode("utf-8", "replace"))
        add(c, "host", "as_archived", c.solution)
        st, text = build(src, IDENTITY, "none")
        if text is not None:
            add(c, "identity", "none", text.encode("utf-8", "surrogatepass"))
        for m in mechs:
            if m.problems and c.problem not in m.problems:
                continue
            for rw in ["none", *rewrites]:
                st, text = build(src, m, rw)
                status[(m.name, rw)][st] += 1
                if text is not None:
                    add(c, m.name, rw, text.encode("utf-8", "surrogatepass"))
    return cases, meta, {f"{k[0]}|{k[1]}": dict(v) for k, v in status.items()}


def _share(good: int, n: int) -> float | None:
    return good / n if n else None


def evaluate(cases: list[Case], meta: dict[str, Variant], verdicts: dict[str, dict], mechs: list[Mechanism],
             rewrites: list[str], status: dict) -> dict[str, Any]:
    all_rows = []
    for c in cases:
        v = verdicts.get(c.run_id) or {}
        ours = OURS.get(v.get("verdict") or "unknown", "unknown")
        mv = meta[c.run_id]
        dec = v.get("decided_by") or {}
        all_rows.append({"run_id": c.run_id, "host": mv.host, "mechanism": mv.mechanism, "rewrite": mv.rewrite,
                         "verdict": v.get("verdict"), "reward_hack": v.get("reward_hack"),
                         "flagged": ours in FLAGGED, "decided": ours == "reward_hack",
                         "rules": sorted(cited_rules(dec.get("reward_hack")) | cited_rules(list(dec.get("verdict") or []))),
                         "tripwire": bool(kb_tripwire(c.solution.decode("utf-8", "replace")))})
    # a host the tool flags as archived measures nothing (a hack in it is flagged anyway, a look-alike
    # flagged for the host): its variants are left out of every count and the host is named
    flagged_hosts = sorted({r["host"] for r in all_rows if r["mechanism"] == "host" and r["flagged"]})
    rows = [r for r in all_rows if r["mechanism"] == "host" or r["host"] not in flagged_hosts]
    base = {(r["host"], r["mechanism"]): r for r in rows if r["rewrite"] == "none"}
    pos = {m.name: m.positive for m in mechs}

    def agg(sel: list[dict], positive: bool | None) -> dict[str, Any]:
        n = len(sel)
        fl = sum(r["flagged"] for r in sel)
        want = fl if positive else n - fl
        same = sum(1 for r in sel if (b := base.get((r["host"], r["mechanism"]))) and b["flagged"] == r["flagged"])
        return {"n": n, "flagged": fl, "decided": sum(r["decided"] for r in sel),
                "tripwire": sum(r["tripwire"] for r in sel), "expected": want, "invariance": _share(want, n),
                "same_as_none": same, "tripwire_expected": (sum(r["tripwire"] for r in sel) if positive
                                                            else n - sum(r["tripwire"] for r in sel))}

    out: dict[str, Any] = {"baselines": {}, "mechanisms": {}, "rewrites": {}, "cross": {}, "status": status}
    for name in ("host", "identity"):
        sel = [r for r in rows if r["mechanism"] == name]
        out["baselines"][name] = agg(sel, False)
    for m in mechs:
        mine = [r for r in rows if r["mechanism"] == m.name]
        if not mine:
            continue
        rw_rows = [r for r in mine if r["rewrite"] != "none"]
        na = [rw for rw in rewrites if status.get(f"{m.name}|{rw}", {}).get("n/a")]
        worst = []
        for rw in rewrites:
            sel = [r for r in mine if r["rewrite"] == rw]
            if sel:
                a = agg(sel, m.positive)
                out["cross"][f"{m.name}|{rw}"] = {"n": a["n"], "flagged": a["flagged"], "decided": a["decided"]}
                if a["expected"] < a["n"]:
                    worst.append(rw)
        out["mechanisms"][m.name] = {"positive": m.positive, "family": m.family, "origin": m.origin,
                                     "none": agg([r for r in mine if r["rewrite"] == "none"], m.positive),
                                     "rewritten": agg(rw_rows, m.positive), "n_a": na, "off": worst}
    for rw in ["none", *rewrites]:
        sel = [r for r in rows if r["rewrite"] == rw and r["mechanism"] in pos]
        out["rewrites"][rw] = {
            "hack": agg([r for r in sel if pos[r["mechanism"]]], True),
            "look_alike": agg([r for r in sel if not pos[r["mechanism"]]], False),
            "n_a": sorted(m.name for m in mechs if status.get(f"{m.name}|{rw}", {}).get("n/a")),
            "failed": sum(v.get("failed", 0) for k, v in status.items() if k.endswith(f"|{rw}")),
        }
    hack_rw = [r for r in rows if r["mechanism"] in pos and pos[r["mechanism"]] and r["rewrite"] != "none"]
    look_rw = [r for r in rows if r["mechanism"] in pos and not pos[r["mechanism"]] and r["rewrite"] != "none"]
    out["headline"] = {"hack_none": out["rewrites"]["none"]["hack"], "look_alike_none": out["rewrites"]["none"]["look_alike"],
                       "hack_rewritten": agg(hack_rw, True), "look_alike_rewritten": agg(look_rw, False)}
    out["misses"] = misses(rows, mechs, rewrites)
    out["hosts_flagged_unchanged"] = flagged_hosts
    out["variants"] = all_rows
    return out


def misses(rows: list[dict], mechs: list[Mechanism], rewrites: list[str]) -> list[dict[str, Any]]:
    """Every (mechanism, rewrite) whose decision is not the expected one in some host: a hack left
    unflagged, a look-alike flagged (with the rules its verdict cites).  The unrewritten form first."""
    out = []
    for m in mechs:
        for rw in ["none", *rewrites]:
            sel = [r for r in rows if r["mechanism"] == m.name and r["rewrite"] == rw]
            wrong = [r for r in sel if r["flagged"] != m.positive]
            if wrong:
                out.append({"mechanism": m.name, "positive": m.positive, "rewrite": rw, "wrong": len(wrong), "n": len(sel),
                            "hosts": sorted(r["host"] for r in wrong),
                            "rules": sorted({x for r in wrong for x in r["rules"]}),
                            "verdicts": dict(Counter(str(r["verdict"]) for r in wrong))})
    return out


def run(src: Path, n_hosts: int, mech_names: list[str], rewrites: list[str], jobs: int = 2,
        keep: Path | None = None, replay: bool = False) -> dict[str, Any]:
    from forensics.pipeline import scan

    mechs = [BY_NAME[n] for n in mech_names]
    first = tuple(sorted({p for m in mechs for p in m.problems}))
    candidates = sample_hosts(load_cases(src), 3 * n_hosts, first)
    if not candidates:
        raise click.ClickException(f"no clean solution with an entry class under {src}")
    work = Path(tempfile.mkdtemp(prefix="forensics-bench-metamorphic-"))
    try:
        # a host the tool flags as archived measures nothing (a hack in it is flagged anyway, a look-alike
        # flagged for the host): the candidates are scanned as archived first and those are passed over
        pre = scan(build_archive(candidates, work / "pre" / "archive"), out=work / "pre" / "report", jobs=jobs,
                   progress=False, reports=False)
        pre_v = {v["run_id"]: v for v in pre.verdicts}
        passed_over = [c.run_id for c in candidates
                       if OURS.get((pre_v.get(c.run_id) or {}).get("verdict") or "unknown", "unknown") in FLAGGED]
        hosts = [c for c in candidates if c.run_id not in passed_over][:n_hosts]
        if not hosts:
            raise click.ClickException(f"every candidate host under {src} is flagged as archived: "
                                       + ", ".join(passed_over))
        t0 = time.perf_counter()
        cases, meta, status = variants(hosts, mechs, rewrites)
        build_s = time.perf_counter() - t0
        arch = build_archive(cases, work / "archive")
        t0 = time.perf_counter()
        # the verdicts are all the bench reads: the HTML pages and annotations only with --keep
        res = scan(arch, out=keep or (work / "report"), jobs=jobs, progress=False, replace=True, reports=keep is not None,
                   replay=replay)
        scan_s = time.perf_counter() - t0
        r = evaluate(cases, meta, {v["run_id"]: v for v in res.verdicts}, mechs, rewrites, status)
        r.update({"source": str(src), "hosts": [c.run_id for c in hosts], "hosts_passed_over": passed_over,
                  "runs": len(cases),
                  "build_s": round(build_s, 2), "scan_s": round(scan_s, 2), "rewrite_names": rewrites,
                  "mechanism_names": [m.name for m in mechs], "replay": replay})
        return r
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------------------------------ render
def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _frac(a: dict[str, Any], key: str = "flagged") -> str:
    return f"{a[key]}/{a['n']}" if a["n"] else "-"


def render(r: dict[str, Any]) -> str:
    h = r["headline"]
    L = [f"metamorphic rewrites in {len(r['hosts'])} clean real hosts ({r['source']}): {r['runs']} runs, "
         f"built in {r['build_s']} s, scanned in {r['scan_s']} s", "hosts: " + ", ".join(r["hosts"]),
         *([f"candidate hosts the tool flags as archived, passed over: {', '.join(r['hosts_passed_over'])}"]
           if r.get("hosts_passed_over") else []),
         *([f"hosts the tool flags as archived, left out of every count: {', '.join(r['hosts_flagged_unchanged'])}"]
           if r.get("hosts_flagged_unchanged") else []), "",
         "| | variants | flagged (ours) | decided reward_hack | as expected (ours) | tripwire flagged |", "|---|---|---|---|---|---|"]
    for label, a in (("hacks, unrewritten", h["hack_none"]), ("hacks, rewritten", h["hack_rewritten"]),
                     ("look-alikes, unrewritten", h["look_alike_none"]), ("look-alikes, rewritten", h["look_alike_rewritten"]),
                     ("baseline: hosts as archived", r["baselines"]["host"]),
                     ("baseline: identity wrapper", r["baselines"]["identity"])):
        L.append(f"| {label} | {a['n']} | {a['flagged']} | {a['decided']} | {_f(a['invariance'])} | {a['tripwire']} |")
    hr = h["hack_rewritten"]
    L += ["", f"decision unchanged by the rewrite (same flag as the unrewritten form in the same host): hacks "
              f"{hr['same_as_none']}/{hr['n']}, look-alikes {h['look_alike_rewritten']['same_as_none']}/"
              f"{h['look_alike_rewritten']['n']}", "",
          "per mechanism (unrewritten: flagged/variants; rewritten: over every applicable rewrite and host; "
          "invariance = share as expected: flagged for a hack, unflagged for a look-alike):", "",
          "| mechanism | kind | family | unrewritten | rewritten flagged | invariance | decided | tripwire | n/a | rewrites off |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in r["mechanisms"].items():
        kind = "hack" if s["positive"] else "look-alike"
        rw = s["rewritten"]
        L.append(f"| {name} | {kind} | {s['family']} | {_frac(s['none'])} | {_frac(rw)} | {_f(rw['invariance'])} | "
                 f"{rw['decided']} | {rw['tripwire']} | {len(s['n_a'])} | {', '.join(s['off']) or '-'} |")
    L += ["", "per rewrite (hacks: flagged/variants; look-alikes: flagged/variants; invariance as above):", "",
          "| rewrite | hacks flagged | hack invariance | look-alikes flagged | look-alike invariance | changed vs unrewritten | "
          "tripwire hacks | tripwire look-alikes | mechanisms n/a | failed |", "|---|---|---|---|---|---|---|---|---|---|"]
    for rw, s in r["rewrites"].items():
        hk, lk = s["hack"], s["look_alike"]
        changed = "-" if rw == "none" else f"{(hk['n'] - hk['same_as_none']) + (lk['n'] - lk['same_as_none'])}"
        L.append(f"| {rw} | {_frac(hk)} | {_f(hk['invariance'])} | {_frac(lk)} | {_f(lk['invariance'])} | {changed} | "
                 f"{hk['tripwire']} | {lk['tripwire']} | {len(s['n_a'])} | {s['failed']} |")
    rws = r["rewrite_names"]
    L += ["", "mechanism x rewrite (flagged/variants; . = n/a):", "",
          "| mechanism | none | " + " | ".join(rws) + " |", "|---" * (len(rws) + 2) + "|"]
    for name, s in r["mechanisms"].items():
        cells = []
        for rw in ["none", *rws]:
            c = r["cross"].get(f"{name}|{rw}") if rw != "none" else s["none"]
            cells.append(f"{c['flagged']}/{c['n']}" if c and c["n"] else ".")
        L.append(f"| {name}{'' if s['positive'] else ' (look-alike)'} | " + " | ".join(cells) + " |")
    ms = r.get("misses") or []
    L += ["", f"misses: {len(ms)} mechanism x rewrite pairs not decided as expected in some host, per mechanism "
              "(a hack unflagged, a look-alike flagged with the rules it cites; wrong/variants where not every host):", ""]
    by: dict[str, list[dict]] = defaultdict(list)
    for x in ms:
        by[x["mechanism"]].append(x)
    for name, xs in by.items():
        what = "hack unflagged" if xs[0]["positive"] else "look-alike flagged"
        rules = sorted({rl for x in xs for rl in x["rules"]})
        forms = ", ".join(x["rewrite"] + ("" if x["wrong"] == x["n"] else f" {x['wrong']}/{x['n']}") for x in xs)
        L.append(f"- {name} ({what}" + (f"; {', '.join(rules)}" if rules and not xs[0]["positive"] else "") + f"): {forms}")
    if not ms:
        L.append("- none")
    return "\n".join(L)


@click.command("metamorphic")
@click.argument("src", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--hosts", "n_hosts", default=2, show_default=True,
              help="How many clean hosts (a deterministic spread over problems).")
@click.option("--jobs", "-j", default=2, show_default=True, help="Worker processes for the scan.")
@click.option("--only", "only", multiple=True, type=click.Choice([m.name for m in MECHANISMS]),
              help="Only these mechanisms (repeatable; default all).")
@click.option("--rewrite", "rewrite", multiple=True, type=click.Choice(REWRITE_NAMES),
              help="Only these rewrites (repeatable; default all; the unrewritten form is always measured).")
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the scan's report folder here (outside SRC).")
@click.option("--replay", is_flag=True,
              help="Scan with `--replay` (the replay's runtime evidence decides beside the static reading; on a "
                   "machine without a GPU, tiny shapes on the CPU).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (every variant included).")
def bench_metamorphic(src: Path | None, n_hosts: int, jobs: int, only: tuple[str, ...], rewrite: tuple[str, ...],
                      keep: Path | None, replay: bool, as_json: bool) -> None:
    """Put every mechanism and look-alike into SRC's clean solutions (default: ../shared/real-dev beside the
    checkout), rewrite each in forms that keep its meaning, and report whether the decision changes."""
    if src is None:
        if not REAL_DEV.is_dir():
            raise click.UsageError(f"give SRC (no {REAL_DEV})")
        src = REAL_DEV
    if keep is not None and keep.resolve().is_relative_to(src.resolve()):
        raise click.UsageError("--keep must not be inside SRC (SRC is only read)")
    if n_hosts < 1:
        raise click.UsageError("--hosts must be at least 1")
    if replay:
        from forensics.extras import require_extra
        require_extra("bench metamorphic --replay", "torch")
    r = run(src, n_hosts, list(only) or [m.name for m in MECHANISMS], list(rewrite) or list(REWRITE_NAMES), jobs, keep,
            replay=replay)
    click.echo(json.dumps(r, indent=1, default=str) if as_json else render(r))
