"""The environments of the capability evaluation: what each name of the module, of each function, of each
class and of each instance is bound to (`Bindings`, a collaborator of the `Evaluator` that fills its
`module_env`, `func_env`, `class_attr` and `self_attr`), iterated until nothing new is bound.  It owns
assignment, for loops over tuples and tables, with-targets and walrus bindings; what an expression denotes
is the evaluator's (evaluation.py)."""

from __future__ import annotations

import ast
from typing import Any

from .values import Ctx, _MAX_VALS


class Bindings:
    """Binds the names of one module for its evaluator (`ev`), until a pass binds nothing new."""

    def __init__(self, ev: Any) -> None:
        self.ev = ev

    # ------------------------------------------------------------------ environments
    def build(self) -> None:
        mod = self.ev.mod
        for name, full in mod.aliases.items():
            self.ev.module_env.setdefault(name, set()).add(("ref", full))
        for fi in mod.funcs.values():
            if fi.cls is None and "." not in fi.qualname:
                self.ev.module_env.setdefault(fi.node.name, set()).add(("func", fi.qualname))
            if fi.cls is not None and fi.qualname == f"{fi.cls}.{fi.node.name}":
                self.ev.methods.setdefault(fi.cls, {})[fi.node.name] = fi.qualname
        for n in mod.of(ast.ClassDef):
            if mod.scope_of(n) is None and isinstance(mod.parent.get(n), ast.Module):
                self.ev.module_env.setdefault(n.name, set()).add(("class", n.name))
        for _ in range(3):
            before = self._size()
            self._bind_module()
            for fi in mod.funcs.values():
                self._bind_function(fi)
            if self._size() == before:
                break

    def _size(self) -> int:
        return (sum(len(v) for v in self.ev.module_env.values())
                + sum(len(v) for e in self.ev.func_env.values() for v in e.values())
                + sum(len(v) for e in self.ev.self_attr.values() for v in e.values())
                + sum(len(v) for e in self.ev.class_attr.values() for v in e.values()))

    def _bind_module(self) -> None:
        ctx = Ctx(None, None, 0)
        for st in self.ev._module_stmts():
            self.bind_stmt(st, ctx, self.ev.module_env)
        for n in self.ev.mod.of(ast.ClassDef):
            attrs = self.ev.class_attr.setdefault(n.name, {})
            for st in n.body:
                if isinstance(st, ast.ClassDef):      # a nested class is an attribute of its owner
                    self._add(attrs, st.name, {("class", st.name)})
                    continue
                # a class body reads the names it bound before (`_a = f; _b = staticmethod(_a)`)
                cctx = Ctx(None, {k: frozenset(v) for k, v in attrs.items()}, 0) if attrs else ctx
                self.bind_stmt(st, cctx, attrs)

    def _bind_function(self, fi: Any) -> None:
        env = self.ev.func_env.setdefault(fi.qualname, {})
        ctx = Ctx(fi, None, 0)
        for n in fi.nodes:
            if isinstance(n, ast.ClassDef):     # a class defined in the function: its name is a local
                self._add(env, n.name, {("class", n.name)})
            elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.For, ast.NamedExpr, ast.withitem)):
                glob = fi.globals_
                target_env = env
                self.bind_stmt(n, ctx, target_env, glob)
                if fi.cls is not None and isinstance(n, (ast.Assign, ast.AnnAssign)):
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" \
                                and n.value is not None:
                            self._add(self.ev.self_attr.setdefault(fi.cls, {}), t.attr, self.ev.eval(n.value, ctx))

    def bind_stmt(self, st: ast.AST, ctx: "Ctx", env: dict[str, set], glob: set | None = None) -> None:
        def put(name: str, vals: set) -> None:
            self._add(self.ev.module_env if glob and name in glob else env, name, vals)

        if isinstance(st, ast.Assign):
            for t in st.targets:
                if isinstance(t, ast.Name):
                    put(t.id, self.ev.eval(st.value, ctx))
                elif isinstance(t, ast.Attribute):      # `Helper.f = torch.empty`, `inst.f = ...`: an attribute
                    for owner in self.ev.eval(t.value, ctx):    # of a class or instance of the solution's
                        if owner[0] == "class":
                            self._add(self.ev.class_attr.setdefault(owner[1], {}), t.attr, self.ev.eval(st.value, ctx))
                        elif owner[0] == "self":
                            self._add(self.ev.self_attr.setdefault(owner[1], {}), t.attr, self.ev.eval(st.value, ctx))
                elif isinstance(t, (ast.Tuple, ast.List)) and isinstance(st.value, (ast.Tuple, ast.List)) \
                        and len(t.elts) == len(st.value.elts):
                    for a, b in zip(t.elts, st.value.elts):
                        if isinstance(a, ast.Name):
                            put(a.id, self.ev.eval(b, ctx))
        elif isinstance(st, ast.AnnAssign) and st.value is not None and isinstance(st.target, ast.Name):
            put(st.target.id, self.ev.eval(st.value, ctx))
        elif isinstance(st, ast.NamedExpr) and isinstance(st.target, ast.Name):
            put(st.target.id, self.ev.eval(st.value, ctx))
        elif isinstance(st, ast.For) and isinstance(st.target, ast.Name) and isinstance(st.iter, (ast.Tuple, ast.List)):
            vals: set = set()
            for e in st.iter.elts:
                vals |= self.ev.eval(e, ctx)
            put(st.target.id, vals)
        elif isinstance(st, ast.For):      # `for m in sys.modules.values()`, `for k, t in TABLE.items()`
            elems = self.elements(self.ev.eval(st.iter, ctx))
            if isinstance(st.target, ast.Name):
                put(st.target.id, {e for e in elems if e[0] != "pair"})
            elif isinstance(st.target, (ast.Tuple, ast.List)) and len(st.target.elts) == 2 \
                    and isinstance(st.target.elts[1], ast.Name):
                put(st.target.elts[1].id, {e[1] for e in elems if e[0] == "pair"})
        elif isinstance(st, ast.withitem) and isinstance(st.optional_vars, ast.Name):
            put(st.optional_vars.id, self.ev.eval(st.context_expr, ctx))

    @staticmethod
    def elements(vals: set) -> set:
        """What iterating a value yields: every loaded module for `sys.modules.values()` (("anymod",)),
        an entry of a grader module's table for its `.values()` (("ref", "<table>.*")); `.items()`
        yields ("pair", that)."""
        out: set = set()
        for v in vals:
            if v[0] == "elems":
                el = ("anymod",) if v[1] == "sys.modules" else ("ref", v[1] + ".*")
                out.add(el if v[2] == "values" else ("pair", el))
        return out

    @staticmethod
    def _add(env: dict[str, set], name: str, vals: set) -> None:
        if vals:
            cur = env.setdefault(name, set())
            if len(cur) < _MAX_VALS:
                cur |= set(list(vals)[:_MAX_VALS - len(cur)])
