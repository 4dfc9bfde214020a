"""The work account follows a decorator on the graded entry (issue 35, `library_gemm` and `numpy_gemm` in the
bench's `decorator` rewrite): the wrapper the decorator returns runs in the entry's place, so a library
GEMM in the wrapper is the work, and the entry's own body (its Triton kernel) runs only where the wrapper
may call the original.  WORK-BY-LIBRARY (high) when it cannot; unchanged when it can.
"""

from __future__ import annotations

import textwrap

import pytest

from lint_util import worst_rules

HOST = '''
import functools

import numpy as np
import torch
import triton
import triton.language as tl

{pre}


@triton.jit
def _tile_gemm(x_ptr, w_ptr, y_ptr, M, N, K, TM: tl.constexpr, TN: tl.constexpr, TK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    om = pm * TM + tl.arange(0, TM)
    on = pn * TN + tl.arange(0, TN)
    acc = tl.zeros((TM, TN), dtype=tl.float32)
    for k0 in range(0, K, TK):
        ok = k0 + tl.arange(0, TK)
        xa = tl.load(x_ptr + om[:, None] * K + ok[None, :], mask=(om[:, None] < M) & (ok[None, :] < K), other=0.0)
        wb = tl.load(w_ptr + ok[:, None] + on[None, :] * K, mask=(ok[:, None] < K) & (on[None, :] < N), other=0.0)
        acc += tl.dot(xa.to(tl.float32), wb.to(tl.float32))
    tl.store(y_ptr + om[:, None] * N + on[None, :], acc.to(tl.bfloat16), mask=(om[:, None] < M) & (on[None, :] < N))


class Model(torch.nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.M, self.N, self.K = M, N, K
        self.register_buffer("weight", torch.empty(N, K, dtype=torch.float8_e4m3fn))

    @{deco}
    def forward(self, x):
        M, K = x.shape
        y = torch.empty((M, self.N), device=x.device, dtype=torch.bfloat16)
        _tile_gemm[(triton.cdiv(M, 32), triton.cdiv(self.N, 32))](x, self.weight, y, M, self.N, K, 32, 32, 32)
        return y
'''


def solution(pre: str, deco: str) -> str:
    return HOST.format(pre=textwrap.dedent(pre).strip(), deco=deco)


REPLACED = {
    # a decorator factory: its argument is a setting, the wrapper copies the name with update_wrapper
    "factory_update_wrapper": (
        """
        def _routed(kind):
            def deco(fn):
                def run(self, x):
                    if kind == "mm":
                        return torch.mm(x.to(torch.bfloat16), self.weight.to(torch.bfloat16).t())
                    return torch.matmul(x.to(torch.bfloat16), self.weight.to(torch.bfloat16).t())
                functools.update_wrapper(run, fn)
                return run
            return deco
        """, '_routed("mm")'),
    # numpy's matmul on host copies, through *args
    "numpy_varargs": (
        """
        def _on_host(fn):
            def inner(*args):
                model, x = args
                y = np.matmul(x.float().cpu().numpy(), model.weight.float().cpu().numpy().T)
                return torch.from_numpy(y).to(x.device, torch.bfloat16)
            return inner
        """, "_on_host"),
}

KEPT = {
    # a wrapper that calls the original under no_grad: the Triton kernel runs
    "calls_original": (
        """
        def _no_grad(fn):
            @functools.wraps(fn)
            def inner(self, x):
                with torch.no_grad():
                    return fn(self, x)
            return inner
        """, "_no_grad"),
    # the original stored in a table the wrapper calls through: it may run
    "original_in_a_table": (
        """
        _IMPLS = []

        def _registered(fn):
            _IMPLS.append(fn)

            def inner(self, x):
                if x.shape[0] == 0:
                    return torch.matmul(x.to(torch.bfloat16), self.weight.to(torch.bfloat16).t())
                return _IMPLS[0](self, x)
            return inner
        """, "_registered"),
    # a library decorator (not the module's): the body is the entry's work
    "library_decorator": ("", "torch.no_grad()"),
}


@pytest.mark.parametrize("name", sorted(REPLACED))
def test_a_wrapper_that_replaces_the_entry_does_the_work(name):
    got = worst_rules(solution(*REPLACED[name]))
    assert got.get("WORK-BY-LIBRARY") == "high", got


@pytest.mark.parametrize("name", sorted(KEPT))
def test_a_wrapper_that_may_call_the_entry_keeps_its_kernel(name):
    got = worst_rules(solution(*KEPT[name]))
    assert "WORK-BY-LIBRARY" not in got, got
