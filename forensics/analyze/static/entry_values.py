"""What the readings of the entry data flow share (entry_flow.py, entry_calls.py, entry_threads.py): the
limit on how many values an expression may denote, the builtins that carry elements from one container
into another, and the frames of the functions being read (their returns, and the try/with blocks that
see them first)."""

from __future__ import annotations

import ast


#: builtins that carry elements from one container into another (and what `map`/`filter` apply)
_MOVERS = frozenset({"tuple", "list", "iter", "reversed", "sorted", "set", "frozenset", "zip", "enumerate", "map",
                     "filter", "next", "getattr", "any", "all", "sum", "max", "min"})

_MAX = 24


def _cap(vals: set) -> set:
    return vals if len(vals) <= _MAX else set(list(vals)[:_MAX])


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


def _src(n: ast.AST) -> str:
    try:
        return ast.unparse(n)
    except Exception:   # noqa: BLE001 - a node unparse cannot render is only cited less precisely
        return type(n).__name__
