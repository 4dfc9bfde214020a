"""Shared grading machinery of the replay contract (Part A): tolerances, the A1 correctness
predicate, numeric-stress cases (A2) and the helpers that load a deck-style `reference` module.

Imports only torch and the standard library, so the runner and the GPU verify script can use it.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch

REF_DIR = Path(__file__).resolve().parent / "ref"
#: elements per chunk of check_tensor's fp32 statistics (64 Mi: ~1.5 GiB of temporaries)
CHECK_CHUNK = 1 << 26

# ---------------------------------------------------------------------------------------------
# A1. Tolerances
# ---------------------------------------------------------------------------------------------

#: Default (atol, rtol) by short dtype name (A1).  Integer types are exact.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
    "float8_e4m3fn": (0.1, 0.1),
    "float8_e5m2": (0.1, 0.1),
    "int8": (0.0, 0.0),
    "int32": (0.0, 0.0),
    "int64": (0.0, 0.0),
}


def short_dtype_name(dtype: torch.dtype) -> str:
    """`torch.bfloat16` -> `"bfloat16"` (what problem.yaml uses as the short key)."""
    return str(dtype).replace("torch.", "")


def _parse_tol(value: Any) -> tuple[float, float]:
    if isinstance(value, Mapping):
        return float(value["atol"]), float(value["rtol"])
    v = float(value)  # strings are parsed as floats too
    return v, v


def tolerance_for_case(yaml_tol: Mapping[str, Any] | None, case: "StressCase | None") -> dict[str, Any]:
    """Merge a stress case's tolerance into the problem override under the SHORT key (dict update),
    exactly as numeric_stress.tolerance_for_case does; a long key (`torch.bfloat16`) in the yaml
    therefore still shadows it (the KDA quirk)."""
    merged: dict[str, Any] = dict(yaml_tol or {})
    if case is not None and case.atol is not None:
        merged.update({case.dtype_key: {"atol": case.atol, "rtol": case.rtol}})
    return merged


def lookup_tolerance(dtype: torch.dtype, override: Mapping[str, Any] | None) -> tuple[float, float]:
    """A1 lookup: `str(dtype)` first (long key), then the short name, then the defaults; an
    unknown dtype falls back to fp32."""
    override = override or {}
    long_key, short_key = str(dtype), short_dtype_name(dtype)
    if long_key in override:
        return _parse_tol(override[long_key])
    if short_key in override:
        return _parse_tol(override[short_key])
    return DEFAULT_TOLERANCES.get(short_key, DEFAULT_TOLERANCES["float32"])


# ---------------------------------------------------------------------------------------------
# A1. Correctness predicate with statistics
# ---------------------------------------------------------------------------------------------

def _result(ok: bool, msg: str, **kw: Any) -> dict[str, Any]:
    out = dict(ok=ok, max_abs=None, max_rel=None, n_bad=None, n_total=None, worst_index=None,
               atol=None, rtol=None, msg=msg)
    out.update(kw)
    return out


def _unravel(flat_index: int, shape: Sequence[int]) -> list[int]:
    idx = []
    for dim in reversed(list(shape)):
        idx.append(flat_index % dim if dim else 0)
        flat_index = flat_index // dim if dim else 0
    return list(reversed(idx))


def check_tensor(ref: torch.Tensor, sol: Any, atol: float, rtol: float, label: str = "output") -> dict[str, Any]:
    """The A1 predicate on one tensor, with error statistics.

    Order: shape, NaN in the solution, Inf in the solution; then `torch.equal` when
    atol = rtol = 0, else `|ref - sol| <= atol + rtol*|sol|` in fp32 (rtol scales with the
    *solution*, as torch.allclose(ref, sol) does).  `n_bad` counts elements failing that same
    predicate (the official failure message counts against |ref| instead; see docs/kernels.md).
    """
    if not isinstance(sol, torch.Tensor):
        return _result(False, f"{label}: solution output is {type(sol).__name__}, not a tensor", atol=atol, rtol=rtol)
    if tuple(ref.shape) != tuple(sol.shape):
        return _result(False, f"{label}: shape mismatch ref {tuple(ref.shape)} vs sol {tuple(sol.shape)}",
                       atol=atol, rtol=rtol, n_total=ref.numel())
    s = sol.detach()
    r = ref.detach().to(s.device)
    n_total = r.numel()
    if s.is_floating_point() or s.is_complex():
        nan = torch.isnan(s)
        if bool(nan.any()):
            first = int(nan.flatten().nonzero()[0].item())
            return _result(False, f"{label}: solution has {int(nan.sum())} NaN", atol=atol, rtol=rtol,
                           n_bad=int(nan.sum()), n_total=n_total, worst_index=_unravel(first, s.shape))
        inf = torch.isinf(s)
        if bool(inf.any()):
            first = int(inf.flatten().nonzero()[0].item())
            return _result(False, f"{label}: solution has {int(inf.sum())} Inf", atol=atol, rtol=rtol,
                           n_bad=int(inf.sum()), n_total=n_total, worst_index=_unravel(first, s.shape))
    if n_total == 0:
        return _result(True, f"{label}: empty", max_abs=0.0, max_rel=0.0, n_bad=0, n_total=0, atol=atol, rtol=rtol)
    # element statistics in chunks of the flattened tensors: the fp32 temporaries of a whole
    # multi-GB output (a MoE's) ran the replay's own process out of memory (issue 21); the result is
    # the same as one pass (max of maxima, sum of counts, the first index of the largest excess)
    rflat, sflat = r.reshape(-1), s.reshape(-1)
    exact = atol == 0 and rtol == 0
    max_abs = max_rel = -math.inf
    n_bad = 0
    ok = True
    best, worst = -math.inf, 0
    for a in range(0, n_total, CHECK_CHUNK):
        rc, sc = rflat[a:a + CHECK_CHUNK], sflat[a:a + CHECK_CHUNK]
        rf, sf = rc.to(torch.float32), sc.to(torch.float32)
        diff = torch.nan_to_num((rf - sf).abs(), nan=float("inf"))  # NaN in ref makes the element bad
        max_abs = max(max_abs, float(diff.max()))
        max_rel = max(max_rel, float((diff / sf.abs().clamp_min(1e-30)).max()))
        if exact:
            ok = ok and (torch.equal(rc, sc) if rc.dtype == sc.dtype else bool((diff == 0).all()))
            bad = diff != 0
        else:
            bad = diff > atol + rtol * sf.abs()
            ok = ok and not bool(bad.any())
        n_bad += int(bad.sum())
        excess = diff - (atol + rtol * sf.abs())
        i = int(torch.argmax(excess).item())
        e = float(excess[i])
        if e > best:
            best, worst = e, a + i
        del rf, sf, diff, bad, excess
    msg = (f"{label}: ok" if ok else f"{label}: {n_bad}/{n_total} elements outside atol={atol} rtol={rtol}") + \
        f" (max_abs={max_abs:.6g}, max_rel={max_rel:.6g})"
    return _result(ok, msg, max_abs=max_abs, max_rel=max_rel, n_bad=n_bad, n_total=n_total,
                   worst_index=_unravel(worst, r.shape), atol=atol, rtol=rtol)


def merge_results(parts: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Combine per-output results: ok if all ok; stats from the worst part; parts kept."""
    oks = [p["ok"] for p in parts.values()]
    first_bad = next((k for k, p in parts.items() if not p["ok"]), None)
    worst_key = first_bad or max(parts, key=lambda k: parts[k].get("max_abs") or 0.0)
    w = parts[worst_key]
    out = dict(w)
    out["ok"] = all(oks)
    out["n_bad"] = sum((p.get("n_bad") or 0) for p in parts.values())
    out["n_total"] = sum((p.get("n_total") or 0) for p in parts.values())
    out["max_abs"] = max((p.get("max_abs") or 0.0) for p in parts.values())
    out["max_rel"] = max((p.get("max_rel") or 0.0) for p in parts.values())
    out["worst_part"] = worst_key
    out["msg"] = "; ".join(p["msg"] for p in parts.values())
    out["parts"] = dict(parts)
    return out


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a = a.detach().float().flatten()
    b = b.detach().float().flatten().to(a.device)
    den = a.norm() * b.norm()
    if float(den) == 0.0:
        return 1.0 if float(a.norm()) == float(b.norm()) else 0.0
    return float((a @ b) / den)


# ---------------------------------------------------------------------------------------------
# A2. Numeric stress
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StressCase:
    """One numeric-stress case.  `atol`/`rtol` None means the problem's own tolerance
    (the nominal case).  `dtype_key` is the short key under which the case's tolerance is merged."""
    name: str
    input_scales: Mapping[int, float] = field(default_factory=dict)
    state_scales: Mapping[str, float] = field(default_factory=dict)
    atol: float | None = None
    rtol: float | None = None
    dtype_key: str = "bfloat16"


NOMINAL = StressCase("nominal")


def scale_inputs(inputs: Sequence[Any], case: StressCase) -> list[Any]:
    """`input_scales {i: s}` -> positional input i replaced by `(x.float()*s).to(x.dtype)` (a new
    tensor).  Non-tensor or non-float inputs raise, as the grader does."""
    out = list(inputs)
    for i, s in case.input_scales.items():
        x = out[i]
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError(f"stress case {case.name}: input {i} is not a floating tensor")
        out[i] = (x.float() * s).to(x.dtype)
    return out


def _named_tensor(model: torch.nn.Module, name: str) -> torch.Tensor:
    tensors = dict(model.named_parameters())
    tensors.update(dict(model.named_buffers()))
    if name not in tensors:
        raise KeyError(f"state tensor {name!r} not found in {type(model).__name__}")
    t = tensors[name]
    if not t.is_floating_point():
        raise TypeError(f"state tensor {name!r} is not floating point")
    return t


class apply_stress:
    """Context manager for one stress case (A2).

    >>> with apply_stress(model_ref, model_sol, inputs, case) as scaled_inputs: ...

    Scales the named parameters/buffers of BOTH models in place (`state_scales`), yields the
    scaled inputs (`input_scales`) and restores the state by `copy_` after a CUDA sync.
    A missing name raises KeyError, a non-float tensor TypeError (the check then fails).
    `model_sol` may be None (reference-only timing)."""

    def __init__(self, model_ref, model_sol, inputs, case: StressCase):
        self.models = [m for m in (model_ref, model_sol) if m is not None]
        self.inputs, self.case = inputs, case
        self._saved: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __enter__(self) -> list[Any]:
        with torch.no_grad():
            for name, s in self.case.state_scales.items():
                for m in self.models:
                    t = _named_tensor(m, name)
                    self._saved.append((t, t.detach().clone()))
                    t.data.copy_((t.data.float() * s).to(t.dtype))
        return scale_inputs(self.inputs, self.case)

    def __exit__(self, *exc) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        with torch.no_grad():
            for t, saved in self._saved:
                t.data.copy_(saved)
        self._saved.clear()


# ---------------------------------------------------------------------------------------------
# Deck-style `reference` modules
# ---------------------------------------------------------------------------------------------

def load_reference_module(filename: str, module_name: str = "reference", globals_: Mapping[str, Any] | None = None) -> types.ModuleType:
    """Execute `kernels/ref/<filename>` as a FRESH module named `module_name` (not inserted into
    sys.modules; the caller registers it as `reference` when a solution imports it) and set the
    module globals check.py sets (`setattr` per shape key)."""
    path = REF_DIR / filename
    mod = types.ModuleType(module_name, f"bundled reference {filename}")
    mod.__file__ = str(path)
    code = compile(path.read_text(), str(path), "exec")
    # dataclasses look the defining module up in sys.modules while a class body is processed:
    # execute under a private registered name, then rename everything to `module_name`.
    private = f"_kernels_ref_{path.stem}_{id(mod):x}"
    mod.__dict__["__name__"] = private
    sys.modules[private] = mod
    try:
        exec(code, mod.__dict__)  # noqa: S102 - our own bundled file
    finally:
        sys.modules.pop(private, None)
        mod.__dict__["__name__"] = module_name
    for obj in list(mod.__dict__.values()):
        if getattr(obj, "__module__", None) == private:
            try:
                obj.__module__ = module_name
            except (AttributeError, TypeError):
                pass
    for k, v in (globals_ or {}).items():
        setattr(mod, k, v)
    return mod


def to_device(obj: Any, device: str | torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, list):
        return [to_device(o, device) for o in obj]
    if isinstance(obj, tuple):
        return tuple(to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def eval_formula(expr: str, shape: Mapping[str, Any]) -> float:
    """problem.yaml flops/bytes strings are Python-evaluated with the shape dict as variables."""
    return float(eval(expr, {"__builtins__": {}, "math": math, "min": min, "max": max}, dict(shape)))  # noqa: S307
