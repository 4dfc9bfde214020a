"""The capability evaluation's vocabulary: the forms an abstract value takes, the context an expression is
evaluated in (`Ctx`), one capability use as the audit records it (`Cap`), and the walks over a statement's
nodes that every reading of the audit shares.  Nothing here reads a module; everything above imports it."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Iterable


# ----------------------------------------------------------------------------------------- values
# An abstract value: what an expression may denote.  Tuples, hashable:
#   ("ref", "torch.cuda.Event")     an object reached from an import (module, class, function, attribute)
#   ("dict", "torch.cuda")          the namespace of one (obj.__dict__, vars(obj)); "<module>": this module's globals()
#   ("str", "elapsed_time")         a constant string
#   ("builtin", "setattr")          a builtin function
#   ("func", qualname)              a function of the solution (FuncInfo qualname)
#   ("closure", qualname, key)      a nested function returned by a call, with the outer call's arguments bound
#   ("lambda", key)                 a lambda (its node in `lambdas`)
#   ("partial", key)                functools.partial(f, *args) (its parts in `partials`)
#   ("class", name) / ("self", name) a class of the solution / an instance of it
#   ("method", owner-key, name)     a bound method of a dict namespace (update, __setitem__, get ...)
#   ("property", getters)           property(f) held as a class attribute: reading it on an instance is f()
#   ("path", "./sitecustomize.py")  a file path the code builds (os.path.join, pathlib `/`, f-strings, `+`,
#                                   os.getcwd(), __file__, sys.path[0] ...): "." is the working directory or
#                                   the solution's own folder (the grader's, when it imports the solution),
#                                   "\x00" a part the reading does not know (a parameter, sys.path[i])
#   ("dictlit", key)                a dict display with constant keys (its node in `dict_lits`): `d['k']` is its entry
Val = tuple

_MAX_VALS = 24


@dataclass
class Cap:
    """One capability use: the rule, where, what it reaches, and the form that reached it."""
    rule: str
    node: ast.AST
    capability: str
    target: str
    message: str
    severity: str
    via: str = ""
    extra: list[tuple[int, str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Ctx:
    fi: Any
    binding: dict[str, frozenset] | None
    depth: int
    outer: dict[str, frozenset] | None = None
    via: str = ""

    def deeper(self) -> "Ctx":
        return Ctx(self.fi, self.binding, self.depth + 1, self.outer, self.via)


# ----------------------------------------------------------------------------------------- helpers
def _scope_walk(st: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a statement, not those of functions or classes defined in it."""
    stack = [st]
    while stack:
        n = stack.pop()
        yield n
        for ch in ast.iter_child_nodes(n):
            if not isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(ch)


def walk_expr(n: ast.AST) -> Iterable[ast.AST]:
    return _scope_walk(n)


def _src(n: ast.AST) -> str:
    try:
        return ast.unparse(n)
    except Exception:   # noqa: BLE001 - a node unparse cannot render is only cited less precisely
        return type(n).__name__
