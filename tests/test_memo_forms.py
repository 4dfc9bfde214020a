"""Memoized outputs, call counters and dispatch on input values, read by what the code does.

Issue 35: the static reading must decide from what a solution does, not how it is written.  Each case
below is a form of the memo / replay / magnitude-dispatch mechanisms that `bench metamorphic`'s rewriter
does not produce (written here by hand: `operator.methodcaller`, a dict of functions, `functools.lru_cache`,
a `WeakKeyDictionary`, an instance's `__call__`, a helper two calls deep, a bound method held in a local,
`exec` of a named constant with `globals()`, a C++ helper with a local statistic), and each honest
look-alike beside it must stay unflagged (a cache keyed by shape and dtype, a weight prepack keyed by the
weight's pointer that computes from the live input, a finiteness guard, a scale choice in a helper).
"""

from __future__ import annotations

import textwrap

import pytest

from forensics.analyze.static import lint_source

SERIOUS = ("medium", "high", "critical")


def _hits(src: str, rule: str, problem: str | None = None) -> list:
    return [h for h in lint_source(textwrap.dedent(src), problem=problem).hits if h.rule == rule and h.severity in SERIOUS]


def _flags(src: str, rule: str, severity: str = "high") -> None:
    hits = _hits(src, rule)
    assert hits, f"{rule} not found"
    assert any(h.severity == severity for h in hits), [(h.severity, h.message) for h in hits]


def _clean(src: str, *rules: str) -> None:
    text = textwrap.dedent(src)
    bad = [(h.rule, h.severity, h.message) for h in lint_source(text).hits
           if h.rule in rules and h.severity in SERIOUS]
    assert not bad, bad


# ------------------------------------------------------------------------------- memoized outputs
def test_a_pointer_key_read_through_a_module_level_methodcaller():
    _flags("""
        import operator
        import torch

        _PTR = operator.methodcaller("data_ptr")

        class ModelNew(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self._seen = {}

            def forward(self, x, w):
                key = (_PTR(x), _PTR(w))
                hit = self._seen.get(key)
                if hit is not None:
                    return hit
                out = torch.relu(x @ w)
                self._seen[key] = out
                return out
        """, "CACHED-OUTPUT-RETURN")


def test_a_pointer_key_read_through_attrgetter():
    _flags("""
        import operator
        import torch

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                key = operator.attrgetter("data_ptr")(x)()
                memo = self.__dict__.setdefault("_m", {})
                if key in memo:
                    return memo[key]
                memo[key] = torch.tanh(x)
                return memo[key]
        """, "CACHED-OUTPUT-RETURN")


def test_a_memo_in_a_helper_reached_through_a_dict_of_functions_with_the_instance_as_a_parameter():
    _flags("""
        import torch

        def _lookup(model, x):
            memo = model.__dict__.setdefault("_memo", {})
            k = (x.data_ptr(), x.shape)
            if k in memo:
                return memo[k]
            memo[k] = torch.sigmoid(x)
            return memo[k]

        _STAGES = {"main": _lookup}

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _STAGES["main"](self, x)
        """, "CACHED-OUTPUT-RETURN")


def test_a_memo_two_calls_deep_with_the_state_on_the_instance_it_was_handed():
    _flags("""
        import torch

        def _inner(m, x):
            cache = m._cache
            ptr = x.data_ptr()
            if ptr in cache:
                return cache[ptr]
            y = torch.exp(x)
            cache[ptr] = y
            return y

        def _outer(m, x):
            return _inner(m, x)

        class ModelNew(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self._cache = {}

            def forward(self, x):
                y = _outer(self, x)
                return y
        """, "CACHED-OUTPUT-RETURN")


def test_a_memo_in_an_instance_call_keyed_by_identity_and_version_on_the_owner():
    _flags("""
        import torch

        class _Memo:
            def __call__(self, owner, x):
                key = (id(x), x._version)
                if getattr(owner, "_k", None) == key:
                    return owner._v
                owner._v = owner.compute(x)
                owner._k = key
                return owner._v

        class ModelNew(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self._memo = _Memo()

            def compute(self, x):
                return torch.relu(x) * 2

            def forward(self, x):
                return self._memo(self, x)
        """, "CACHED-OUTPUT-RETURN")


def test_lru_cache_keyed_by_the_data_pointer_and_the_tensor_itself():
    _flags("""
        import functools
        import torch

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return self._cached(x.data_ptr(), x)

            @functools.lru_cache(maxsize=8)
            def _cached(self, ptr, x):
                return torch.relu(x) * 2
        """, "CACHED-OUTPUT-RETURN")


def test_lru_cache_wrapping_a_function_bound_at_module_level():
    _flags("""
        import functools
        import torch

        def _impl(x):
            return torch.relu(x) + 1

        _fast = functools.lru_cache(maxsize=None)(_impl)

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _fast(x)
        """, "CACHED-OUTPUT-RETURN")


def test_a_weak_key_dictionary_keyed_by_the_input_tensor():
    _flags("""
        import weakref
        import torch

        _SEEN = weakref.WeakKeyDictionary()

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                if x in _SEEN:
                    return _SEEN[x]
                out = torch.softmax(x, dim=-1)
                _SEEN[x] = out
                return out
        """, "CACHED-OUTPUT-RETURN")


def test_exec_of_a_named_constant_with_globals_defines_a_memo_the_entry_returns():
    _flags('''
        import torch

        _SRC = (
            "def _step(m, x):\\n"
            "    d = m.__dict__.setdefault('_d', {})\\n"
            "    p = x.data_ptr()\\n"
            "    if p in d:\\n"
            "        return d[p]\\n"
            "    d[p] = torch.relu(x)\\n"
            "    return d[p]\\n"
        )
        exec(_SRC, globals())

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _step(self, x)
        ''', "CACHED-OUTPUT-RETURN")


# look-alikes
def test_a_plan_cache_keyed_by_shape_and_dtype_in_a_helper_stays_unflagged():
    _clean("""
        import torch

        def _build(n):
            return lambda t: torch.relu(t) * n

        class _Planner:
            def get(self, owner, x):
                plans = owner.__dict__.setdefault("_plans", {})
                key = (tuple(x.shape), x.dtype)
                fn = plans.get(key)
                if fn is None:
                    fn = plans[key] = _build(x.shape[-1])
                return fn(x)

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _Planner().get(self, x)
        """, "CACHED-OUTPUT-RETURN", "PTR-KEYED-CACHE", "ID-KEYED-STATE")


@pytest.mark.parametrize("ret", ["x @ self._pack", "x.matmul(self._pack)", "torch.matmul(x, self._pack)"])
def test_a_weight_prepack_keyed_by_the_weights_pointer_that_computes_from_the_live_input_stays_unflagged(ret):
    """The hit path returns the live input times the stored packed weight: work on this call's input,
    not a stored answer (main read `x @ self._pack` as a stored return)."""
    _clean(f"""
        import torch

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                w = self.weight
                key = w.data_ptr()
                if getattr(self, "_pack_key", None) != key:
                    self._pack = w.t().contiguous()
                    self._pack_key = key
                return {ret}
        """, "CACHED-OUTPUT-RETURN")


def test_the_same_prepack_in_a_helper_given_the_instance_stays_unflagged():
    _clean("""
        import torch

        def _run(model, x):
            w = model.weight
            key = w.data_ptr()
            if getattr(model, "_pack_key", None) != key:
                model._pack = w.t().contiguous()
                model._pack_key = key
            return x @ model._pack

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _run(self, x)
        """, "CACHED-OUTPUT-RETURN")


def test_lru_cache_on_a_builder_given_shapes_stays_unflagged():
    _clean("""
        import functools
        import torch

        @functools.lru_cache(maxsize=None)
        def _config(n, dtype):
            return max(16, min(128, n // 4)), str(dtype)

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                block, _ = _config(x.shape[-1], x.dtype)
                return torch.relu(x) * block
        """, "CACHED-OUTPUT-RETURN")


# ---------------------------------------------------------------------------- call counters
def test_a_call_counter_on_the_instance_handed_to_a_helper_through_a_table():
    _flags("""
        import torch

        def _step(owner, x):
            owner._n = getattr(owner, "_n", 0) + 1
            if owner._n > 5 and getattr(owner, "_last", None) is not None:
                return owner._last
            owner._last = torch.relu(x)
            return owner._last

        _TABLE = {"step": _step}

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _TABLE["step"](self, x)
        """, "CALL-COUNTER")


def test_a_call_count_kept_without_a_branch_on_it_stays_unflagged():
    _clean("""
        import torch

        def _step(owner, x):
            owner._n = getattr(owner, "_n", 0) + 1
            return torch.relu(x)

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _step(self, x)
        """, "CALL-COUNTER")


# ------------------------------------------------------------------------- dispatch on values
def test_a_magnitude_test_through_a_bound_method_held_in_a_local():
    _flags("""
        import torch

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                peak = x.abs().amax
                if peak() > 64:
                    return torch.zeros_like(x)
                return torch.relu(x) * 3
        """, "INPUT-DISPATCH")


def test_a_magnitude_test_through_methodcaller():
    _flags("""
        import operator
        import torch

        _NORM = operator.methodcaller("norm")

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                if _NORM(x) > 1e3:
                    return x.new_zeros(x.shape)
                return torch.relu(x) * 3
        """, "INPUT-DISPATCH")


def test_a_magnitude_test_two_calls_deep_through_a_method_and_a_helper():
    _flags("""
        import torch

        def _pick(a, w):
            if a.float().abs().max().item() > 448:
                return torch.zeros_like(a)
            return torch.relu(a @ w)

        class ModelNew(torch.nn.Module):
            def _stage(self, x):
                return _pick(x, self.weight)

            def forward(self, x):
                return self._stage(x)
        """, "INPUT-DISPATCH")


def test_a_magnitude_test_in_a_helper_reached_through_a_dict_of_functions():
    _flags("""
        import torch

        def _guarded(model, x):
            s = x.std()
            if s > 10.0:
                return torch.zeros_like(x)
            return torch.tanh(x @ model.weight)

        _PATHS = {"fwd": _guarded}

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _PATHS["fwd"](self, x)
        """, "INPUT-DISPATCH")


def test_a_magnitude_test_in_a_cpp_helper_through_a_local_statistic():
    _flags('''
        import torch
        from torch.utils.cpp_extension import load_inline

        _SRC = r"""
        #include <torch/extension.h>
        torch::Tensor guarded(torch::Tensor x) {
            auto peak = at::max(at::abs(x)).item<float>();
            if (peak > 448.f) {
                return at::zeros_like(x);
            }
            return at::relu(x);
        }
        """
        _ext = load_inline(name="g", cpp_sources=[_SRC], functions=["guarded"])

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.guarded(x)
        ''', "INPUT-DISPATCH")


# look-alikes
def test_a_finiteness_guard_in_a_helper_the_entry_returns_stays_unflagged():
    _clean("""
        import torch

        def _checked(model, x):
            if not torch.isfinite(x).all():
                raise ValueError("non-finite input")
            return torch.relu(x @ model.weight)

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _checked(self, x)
        """, "INPUT-DISPATCH")


def test_a_scale_chosen_from_the_input_in_a_helper_whose_result_is_not_returned_stays_unflagged():
    _clean("""
        import torch

        def _scale(x):
            amax = x.abs().amax()
            return amax / 448.0 if amax > 0 else torch.ones((), device=x.device)

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                s = _scale(x)
                return torch.relu(x / s) * s
        """, "INPUT-DISPATCH")


def test_a_shape_dispatch_in_a_helper_stays_unflagged():
    _clean("""
        import torch

        def _route(x):
            if x.shape[-1] >= 64 and getattr(x, "dim")() > 1:
                return torch.relu(x)
            return torch.relu(x.contiguous())

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _route(x)
        """, "INPUT-DISPATCH")


@pytest.mark.parametrize("cond", ["x.size(0) > 64", "!at::isfinite(x).all().item<bool>()", "w.abs().max().item<float>() > 1"])
def test_cpp_tests_on_sizes_finiteness_or_a_weight_stay_unflagged(cond):
    _clean(f'''
        import torch
        from torch.utils.cpp_extension import load_inline

        _SRC = r"""
        #include <torch/extension.h>
        torch::Tensor run(torch::Tensor x, torch::Tensor w) {{
            if ({cond}) {{
                return at::relu(x).mm(w);
            }}
            return x.mm(w);
        }}
        """
        _ext = load_inline(name="r", cpp_sources=[_SRC], functions=["run"])

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.run(x, self.weight)
        ''', "INPUT-DISPATCH")


# ------------------------------------------------------------------------- exec inlined
def test_code_inlined_from_exec_is_the_one_tree_every_reader_sees():
    """The exec'd string's statements are the module's own (the memo, counter and dispatch rules read
    them there), and the capability audit's reading of the same string names those very nodes: a thread
    the exec'd function starts and joins is joined, not a thread nothing joins."""
    _clean('''
        import threading
        import torch

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _fx_body(self, x)

        exec("def _fx_body(self, x):\\n    box = []\\n    th = threading.Thread(target=lambda: box.append(torch.relu(x)))\\n"
             "    th.start()\\n    th.join()\\n    return box[0]\\n")
        ''', "CAP-PROCESS", "UNJOINED-THREAD")
