"""Small helpers shared by the problem modules."""
from __future__ import annotations

import importlib

from ..common import NOMINAL, StressCase


def stress(name, atol, rtol, inputs=(), scale=1.0, state=None, dtype_key="bfloat16"):
    return StressCase(name, {i: scale for i in inputs}, dict(state or {}), atol, rtol, dtype_key)


def cases(*cs):
    return [NOMINAL, *cs]


def lazy_triton(module: str, attr: str = "forward"):
    """A triton_fn that imports forensics.kernels.triton.<module> on first call (so importing the registry
    never imports triton, and TRITON_INTERPRET can be set before that first import)."""
    def fn(model, inputs):
        mod = importlib.import_module(f"forensics.kernels.triton.{module}")
        return getattr(mod, attr)(model, inputs)
    fn.__name__ = f"triton_{module}"
    fn.triton_module = f"forensics.kernels.triton.{module}"
    return fn
