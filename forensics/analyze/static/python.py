"""AST analysis of solution.py: the Python rule families and their driver.

The solution is parsed, never imported or executed.  `model.Module` holds what every rule needs;
each family module holds its `check_*` functions:

    caches     identity-keyed caches, pointer compares, sampled validation, graphs, retained inputs
    behaviour  call counters, ignored arguments, dispatch on input values
    sniffing   stack/frame access, environment variables, grader files, the reference module
    numerics   torch precision flags, precision split, monkeypatching, exits, forged output
    forbidden  forbidden ops, library calls doing the main operation (evidence)
    l2         Triton L2 hints and intra-call reuse
    work       work accounting (who computes the main operation), run from lint_source with the CUDA
"""

from __future__ import annotations

from .base import Hit
from .capabilities import check_capabilities  # noqa: F401 - registers the capability rules
from .behaviour import check_arg_ignored, check_call_counter, check_input_dispatch
from .caches import _result_functions as result_functions  # noqa: F401 - the entries' result functions (roles)
from .caches import (
    check_caches,
    check_graphs,
    check_persistent_output,
    check_ptr_compare,
    check_retained_input,
    check_sampled_validation,
    state_inventory,
)
from .forbidden import _fallback_context, check_forbidden, check_library
from .l2 import check_triton_hints
from .model import (
    FORWARD_NAMES,
    NON_WORK_TORCH,
    FuncInfo,
    Module,
    _deco_func,
    _entry_params,
    _names,
    _names_in_target,
    walk,
)
from .numerics import check_exit_and_output, check_torch_state
from .sniffing import check_reference, check_sniffing

__all__ = ["Module", "FuncInfo", "analyse", "state_inventory", "FORWARD_NAMES", "NON_WORK_TORCH", "walk", "_names",
           "_names_in_target", "_deco_func", "_entry_params", "_fallback_context"]

# ---------------------------------------------------------------------- driver
def analyse(mod: Module, problem: str | None, bench: str | None) -> list[Hit]:
    hits: list[Hit] = []
    for fn in (check_caches, check_ptr_compare, check_sampled_validation, check_persistent_output, check_graphs, check_call_counter,
               check_arg_ignored, check_retained_input, check_input_dispatch, check_torch_state, check_exit_and_output, check_triton_hints):
        hits.extend(fn(mod))
    hits.extend(check_sniffing(mod, bench))
    hits.extend(check_reference(mod, bench))
    hits.extend(check_forbidden(mod, problem, bench))
    hits.extend(check_library(mod, problem))
    return hits
