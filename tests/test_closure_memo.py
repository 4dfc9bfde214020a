"""State kept in a closure's cell (issue 35, found by hand): a dict that only a nested function holds, a
local of the factory or decorator that built it and handed the nested function out.  It outlives every
call, as a global does, so a memo there is read as one kept on the instance or the module is: an output
returned on a pointer- or shape-keyed hit is CACHED-OUTPUT-RETURN.  None of the forms below is the bench's
(`closure_cell_memo`: a factory's lookup(x, compute) keyed by data_ptr and shape).  A closure built and
dropped inside the entry's own call sees a fresh cell each time: not state.

The host is test_memo_gaps' small Triton GEMM; PRE is module-level code, BODY the first lines of forward.
"""

from __future__ import annotations

import pytest

from lint_util import worst_rules
from test_memo_gaps import solution

CELL_MEMOS = {
    # a decorator's dict, keyed by the input's shape: the wrapper returns what it kept
    "decorator_dict_by_shape": dict(pre="""
        import functools

        def _by_shape(fn):
            box = {}

            @functools.wraps(fn)
            def inner(self, x):
                if tuple(x.shape) in box:
                    return box[tuple(x.shape)]
                box[tuple(x.shape)] = y = fn(self, x)
                return y
            return inner""", body="return self._wrapped(x)", methods="""
        @_by_shape
        def _wrapped(self, x):
            return gemm(x, self.weight)
    """),
    # a closure built in __init__ and kept on the instance, its dict keyed by the data pointer
    "init_closure_by_pointer": dict(pre="""
        def _make_runner(model):
            outs = {}

            def run(x):
                p = x.data_ptr()
                if p in outs:
                    return outs[p]
                outs[p] = gemm(x, model.weight)
                return outs[p]
            return run""", body="""
        if not hasattr(self, "_run"):
            self._run = _make_runner(self)
        return self._run(x)"""),
    # a factory's single slot through nonlocal names
    "nonlocal_slot": dict(pre="""
        def _last_slot():
            last_key = None
            last_out = None

            def get(x, make):
                nonlocal last_key, last_out
                if last_key == x.data_ptr():
                    return last_out
                last_key = x.data_ptr()
                last_out = make()
                return last_out
            return get

        _SLOT = _last_slot()""", body="return _SLOT(x, lambda: gemm(x, self.weight))"),
}

LOOKALIKES = {
    # a closure built inside forward: its dict is new on every call
    "closure_inside_the_entry": dict(body="""
        seen = {}

        def get(k):
            if k not in seen:
                seen[k] = gemm(x, self.weight)
            return seen[k]
        return get(x.data_ptr())"""),
    # a decorator's dict of launch grids by shape: the wrapper runs the function every call
    "decorator_grid_by_shape": dict(pre="""
        import functools

        def _gridded(fn):
            grids = {}

            @functools.wraps(fn)
            def inner(self, x):
                if tuple(x.shape) not in grids:
                    grids[tuple(x.shape)] = (triton.cdiv(x.shape[0], 32), triton.cdiv(self.N, 32))
                self._grid = grids[tuple(x.shape)]
                return fn(self, x)
            return inner""", body="return self._wrapped(x)", methods="""
        @_gridded
        def _wrapped(self, x):
            return gemm(x, self.weight)
    """),
}


@pytest.mark.parametrize("name", sorted(CELL_MEMOS))
def test_a_memo_in_a_closure_cell_returns_a_stale_output(name):
    got = worst_rules(solution(**CELL_MEMOS[name]))
    assert got.get("CACHED-OUTPUT-RETURN") == "high", got


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_closure_lookalikes_stay_quiet(name):
    got = worst_rules(solution(**LOOKALIKES[name]))
    assert "CACHED-OUTPUT-RETURN" not in got and "PTR-KEYED-CACHE" not in got, got
