"""The registry of bundled reference problems.

    from forensics.kernels import registry
    spec = registry.get("01_fp8_gemm", deck_version="2026-06-14")   # or an archive date
    ref_mod = spec.reference_module(spec.shapes[0])   # register as sys.modules["reference"]
    model = spec.build_reference(spec.shapes[0], "cuda")
    inputs = spec.make_inputs(spec.shapes[0], seed=42, device="cuda")
    out = model(*inputs)                              # the deck's reference semantics
    res = spec.compare(out, solution_out, case="nominal", inputs=inputs)

Full description: docs/kernels.md.  Every problem is a `ProblemSpec`; the deck's
`reference.py` semantics live in `kernels/ref/<bench>_<name>[_<version>].py`, loaded as a fresh
module per call; oracles are in `kernels/problems/`, Triton kernels in `kernels/triton/`
(imported lazily, on the first `triton_forward` call).
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from forensics import problems as catalogue
from forensics.problems import Problem

from .common import (NOMINAL, StressCase, apply_stress, check_tensor, eval_formula,
                     load_reference_module, lookup_tolerance, merge_results, to_device,
                     tolerance_for_case)

Shape = Mapping[str, Any]


@dataclass(frozen=True)
class PropertyCase:
    """One deterministic property example (A3: the `@example` canonical case of a problem, or one
    we add).  `mutate(spec, shape, inputs) -> inputs` builds the case's inputs from base inputs
    (cloned; the A3 flow of mutating the same storage is the runner's job: it may copy_ the
    returned tensors into the original storage)."""
    name: str
    shape_index: int
    params: Mapping[str, Any]
    mutate: Callable[["ProblemSpec", Shape, list], list]
    atol: float
    rtol: float
    canonical: bool = True          # the deck's own @example (False: one we add)
    base_seed: int = 0xC0DE         # A3 base inputs: torch.manual_seed(0xC0DE); get_inputs()
    expected: str | None = None     # a closed-form expectation, if any (e.g. "all ones")


API_KINDS = ("module", "decode", "step", "rollout")
CHECK_ORDERS = ("shape", "seed")


class _FromEntry:
    """The default of a ProblemSpec field that comes from its catalogue entry."""

    def __repr__(self) -> str:
        return "<from the catalogue entry>"


FROM_ENTRY: Any = _FromEntry()


@dataclass
class ProblemSpec:
    """A catalogue entry (forensics/problems.py: the deck's facts: id, bench, version dates, shapes,
    seeds, tolerance, forbidden list, API kind, timing) wrapped with what only the replay needs: the
    reference module's callables, the stress and property cases, the roofline formulas.  A problem
    module passes `entry=` and never repeats the entry's data; the fields marked "entry" below are
    copied from it (dataclasses.replace can still override one, as tests do)."""
    entry: Problem                              # forensics.problems.get(<id>, <deck version>)
    regime: str                                 # "compute" | "memory" | "tok_s" | "sps" | "speedup"
    peak_key: str | None                        # key into Hardware.peak_tflops_dense, or peak_tok_s etc.
    global_names: tuple[str, ...]               # module globals check.py sets on `reference`
    stress_cases: list[StressCase]              # nominal first
    flops_expr: str
    bytes_expr: str
    interface: dict                             # class/forward/state_dict contract, see docs/kernels.md
    # entry: identity and version
    name: str = FROM_ENTRY                      # "01_fp8_gemm"
    bench: str = FROM_ENTRY                     # "hard" | "cuda" | "mega"
    deck_version: str = FROM_ENTRY              # "2026-06-14", "pre-2026-06-14", "2026-08-07", ...
    since: str | None = FROM_ENTRY              # first archive date this version applies to (None: always)
    until: str | None = FROM_ENTRY              # first date it no longer applies (exclusive)
    # entry: the deck's shapes, seeds, tolerance, timing, forbidden list, API
    shapes: list[dict] = FROM_ENTRY             # canonical benchmark shapes (shapes.py / benchmark)
    check_shapes: list[dict] = FROM_ENTRY       # what check.py iterates (NSA fixed, GLM T<=256, ...)
    seeds: tuple[int, ...] = FROM_ENTRY         # check seeds
    ref_file: str = FROM_ENTRY                  # kernels/ref/<file>
    tolerance: dict = FROM_ENTRY                # problem.yaml `tolerance:` (as written, long/short keys)
    n_trials: int = FROM_ENTRY
    timing: str = FROM_ENTRY                    # "cuda_events_l2_flush" | "wall_clock_median" | "wall_clock_best_of_3"
    forbidden: list[str] = FROM_ENTRY           # problem.yaml `forbidden:`, as written
    forbidden_kind: str = FROM_ENTRY            # "substring" | "ast_import"
    # how the replay calls it: "module" (Model(*init)(*inputs), every problem but three), "decode"
    # (cuda 03: prefill / decode_steps / run), "step" (mega 02: Model.step), "rollout" (cuda 04: run)
    api_kind: str = FROM_ENTRY
    # the order of check.py's trials: "shape" (for shape: for seed, every problem but two) or "seed"
    # (for seed: for shape; cuda 03 megaqwen, mega 02 Kimi).  A cache keyed by id() or capacity sees
    # the trials in this order, so the replay keeps it (CHECK_ORDERS, check_pairs)
    check_order: str = FROM_ENTRY
    oracle_fn: Callable | None = None           # oracle(model, inputs)
    triton_fn: Callable | None = None           # triton_forward(model, inputs) or None
    compare_fn: Callable | None = None          # problem-specific comparison (topk, multi-output)
    make_inputs_fn: Callable | None = None      # overrides the get_inputs path (stateful problems)
    init_args_fn: Callable | None = None        # overrides get_init_inputs (cuda 03: max_seq per shape)
    reference_fn: Callable | None = None        # overrides model(*inputs) (stateful problems)
    build_fn: Callable | None = None            # build_fn(spec, shape, device, exact_init, module) -> model or None
    deck_fn: Callable | None = None             # the literal deck call when reference_fn is a faster equivalent
    deck_tolerance: dict | None = None          # reference_fn vs deck_fn: dict(atol, rtol, rel_l2); None: bitwise
    reinit_fn: Callable | None = None           # reinit_fn(spec, model, seed, exact) (check's per-seed re-init)
    baseline_fn: Callable | None = None         # baseline_fn(spec, model, inputs): the deck's speedup denominator
    property_cases: list[PropertyCase] = field(default_factory=list)
    property_since: str | None = None           # A3 suite exists in archives from this date
    stress_since: str | None = None             # A2 suite exists from this date
    stateful: dict | None = None                # cuda 03 / cuda 04 / mega 02 API metadata
    peak_value: float | None = None             # tok_s / sps denominators (yaml peak_tok_s, peak_sps)
    notes: list[str] = field(default_factory=list)
    default_dtype_key: str = "bfloat16"

    def __post_init__(self) -> None:
        e = self.entry
        if not e.bundled:
            raise ValueError(f"{e.id}: the catalogue entry names no reference module (ref_file)")
        copies = dict(name=e.id, bench=e.bench, deck_version=e.deck_version, since=e.since, until=e.until,
                      shapes=[dict(s) for s in e.shapes], check_shapes=[dict(s) for s in e.check_shapes],
                      seeds=tuple(e.check_seeds), ref_file=e.ref_file, tolerance=dict(e.tolerance), n_trials=e.n_trials,
                      timing=e.timing, forbidden=list(e.forbidden), forbidden_kind=e.forbidden_kind,
                      api_kind=e.api_kind, check_order=e.check_order)
        for k, v in copies.items():
            if getattr(self, k) is FROM_ENTRY:
                setattr(self, k, v)
        if self.api_kind not in API_KINDS:
            raise ValueError(f"{self.name}: api_kind {self.api_kind!r} is not one of {API_KINDS}")
        if self.check_order not in CHECK_ORDERS:
            raise ValueError(f"{self.name}: check_order {self.check_order!r} is not one of {CHECK_ORDERS}")
        if (self.api_kind == "module") != (self.stateful is None):
            raise ValueError(f"{self.name}: a stateful API (stateful=...) needs an api_kind other than module, "
                             "and only a stateful one has one")
        if self.api_kind == "module" and self.check_order != "shape":
            # Replay.probe_check builds one model per shape and runs its seeds on it: shape-major
            # only.  A module deck whose check.py went seed-major needs that probe reordered first.
            raise ValueError(f"{self.name}: a module problem's check replays shape-major; "
                             f"check_order {self.check_order!r} is for the stateful APIs")

    def check_pairs(self, shapes: Sequence[dict], seeds: Sequence[int]) -> list[tuple[dict, int]]:
        """The (shape, seed) trials of check.py, in its order."""
        if self.check_order == "seed":
            return [(s, seed) for seed in seeds for s in shapes]
        return [(s, seed) for s in shapes for seed in seeds]

    # -- identity -----------------------------------------------------------------------------
    @property
    def key(self) -> str:
        return f"{self.bench}/{self.name}"

    def __repr__(self) -> str:  # dataclass repr would print the callables
        return f"ProblemSpec({self.key}@{self.deck_version})"

    # -- shapes and modules -----------------------------------------------------------------
    def shape_globals(self, shape: Shape) -> dict:
        """Module globals check.py sets on `reference` before building the models."""
        return {k: shape[k] for k in self.global_names if k in shape}

    def reference_module(self, shape: Shape | None = None):
        """A fresh module object with the deck's `reference.py` names (Model, get_inputs,
        get_init_inputs, the shape globals and helpers).  Not put in sys.modules: the caller
        registers it as `reference` when a solution imports it."""
        return load_reference_module(self.ref_file, "reference", self.shape_globals(shape) if shape else None)

    def init_args(self, shape: Shape, module=None) -> list:
        if self.init_args_fn is not None:
            return list(self.init_args_fn(self, shape))
        mod = module or self.reference_module(shape)
        return list(mod.get_init_inputs())

    def make_inputs(self, shape: Shape, seed: int, device: str | torch.device = "cpu", exact: bool | None = None,
                    info: dict | None = None) -> list:
        """`torch.manual_seed(seed)` (+ cuda) then the reference `get_inputs()`.

        exact=True: the deck's way, generation on the CPU (quirks included: KDA reseeds 0 itself),
        then moved to `device`: the exact deck inputs.  exact=False: `get_inputs()` runs under
        `with torch.device(device)`, so its factory calls draw from the device generator seeded
        with the same seed: same distributions, different numbers, no multi-GB CPU generation
        and host->device copy.  A `get_inputs` that passes an explicit CPU generator or mixes
        explicit CPU tensors fails there with a device error; it is then rerun the exact way.
        Default (None): exact on the CPU, on-device elsewhere (as `build_reference(exact_init=)`).
        Problems with their own input rule (`make_inputs_fn`: cuda 03 run arguments, cuda 04 and
        mega 02, which draw on the device as the deck does) ignore `exact`.  `info`, if given,
        receives `mode`: "exact_cpu", "device", "exact_cpu_fallback" or "problem_rule"."""
        if self.make_inputs_fn is not None:
            if info is not None:
                info["mode"] = "problem_rule"
            return self.make_inputs_fn(self, shape, seed, device)
        dev = torch.device(device)
        if exact is None:
            exact = dev.type == "cpu"
        mod = self.reference_module(shape)
        mode = "exact_cpu"
        out = None
        if not exact and dev.type != "cpu":
            _seed_all(seed)
            try:
                with dev:
                    out = list(mod.get_inputs())
                mode = "device"
            except RuntimeError as exc:
                if "device" not in str(exc).lower():
                    raise
                out, mode = None, "exact_cpu_fallback"
        if out is None:
            _seed_all(seed)
            out = list(mod.get_inputs())
        if info is not None:
            info["mode"] = mode
        return to_device(out, device)

    def build_reference(self, shape: Shape, device: str | torch.device = "cpu", exact_init: bool | None = None,
                        module=None) -> torch.nn.Module:
        """`reference.Model(*get_init_inputs())` in eval mode on `device`.

        exact_init=True builds on the CPU with the deck's generator calls and then moves it (the
        exact deck weights); False builds directly on `device` (same distributions, different
        numbers; much faster for multi-GB weights).  Default: exact on CPU, on-device elsewhere.
        Correctness probes load these weights into the solution, so either is valid there.
        A problem whose Model draws from an explicit CPU generator (mega 02: seed 1234) supplies
        `build_fn`, which does the same draws from a device generator when exact_init is False."""
        mod = module or self.reference_module(shape)
        dev = torch.device(device)
        if exact_init is None:
            exact_init = dev.type == "cpu"
        if self.build_fn is not None:
            model = self.build_fn(self, shape, dev, exact_init, mod)
            if model is not None:
                return model.eval()
        args = self.init_args(shape, mod)
        if exact_init:
            model = mod.Model(*args).to(dev)
        else:
            with dev:
                model = mod.Model(*args)
            model = model.to(dev)
        return model.eval()

    def reinit(self, model, seed: int, exact: bool | None = None):
        """The check's per-seed re-initialisation (cuda 03 / cuda 04: `reset_parameters(seed)`, a
        CPU generator).  exact=False (default on a GPU) lets a problem draw the same
        distributions from a device generator instead (`reinit_fn`); the solution loads these
        weights, so either is valid for a check.  No-op for problems without one."""
        if self.reinit_fn is None and self.name not in ("03_megaqwen_decode", "04_grid_mingru_sps"):
            return model
        if exact is None:
            exact = next(model.parameters()).device.type == "cpu"
        if self.reinit_fn is not None:
            return self.reinit_fn(self, model, seed, exact)
        if self.name in ("03_megaqwen_decode", "04_grid_mingru_sps") and hasattr(model, "reset_parameters"):
            model.reset_parameters(seed)
        return model

    # -- computations -----------------------------------------------------------------------
    def oracle(self, model, inputs):
        """Simple, obviously right fp32/fp64 computation of the same semantics."""
        if self.oracle_fn is None:
            raise NotImplementedError(f"{self.key}: no oracle")
        with torch.no_grad():
            return self.oracle_fn(model, inputs)

    @property
    def has_triton(self) -> bool:
        return self.triton_fn is not None

    def triton_forward(self, model, inputs):
        """The fast Triton reference (checked against the oracle), or raise if there is none."""
        if self.triton_fn is None:
            raise NotImplementedError(f"{self.key}: no Triton reference")
        with torch.no_grad():
            return self.triton_fn(model, inputs)

    def reference_forward(self, model, inputs):
        """What check.py compares against: the deck reference semantics, `model(*inputs)`
        (stateful problems: their `run`/`step` path, see `stateful`)."""
        with torch.no_grad():
            if self.reference_fn is not None:
                return self.reference_fn(self, model, inputs)
            return model(*inputs)

    def deck_forward(self, model, inputs):
        """The deck's own call, literally (`model(*inputs)` / `reference.run`).  Differs from
        `reference_forward` only where that one is a faster formulation of the same values
        (`deck_fn` set: cuda 01, cuda 03); tests and verify check the two are equal (bitwise, or
        within `deck_tolerance` where one is set: cuda 03)."""
        with torch.no_grad():
            if self.deck_fn is not None:
                return self.deck_fn(self, model, inputs)
            if self.reference_fn is not None:
                return self.reference_fn(self, model, inputs)
            return model(*inputs)

    # -- tolerances and comparison ----------------------------------------------------------
    def stress_case(self, case: str | StressCase | PropertyCase = "nominal"):
        if isinstance(case, (StressCase, PropertyCase)):
            return case
        for c in self.stress_cases:
            if c.name == case:
                return c
        for c in self.property_cases:
            if c.name == case:
                return c
        raise KeyError(f"{self.key}: no stress or property case {case!r}")

    def tolerance_for(self, dtype: torch.dtype, case: str | StressCase | PropertyCase = "nominal") -> tuple[float, float]:
        c = self.stress_case(case)
        if isinstance(c, PropertyCase):
            return c.atol, c.rtol
        return lookup_tolerance(dtype, tolerance_for_case(self.tolerance, c if c.name != "nominal" else None))

    def compare(self, ref_out, sol_out, case: str | StressCase | PropertyCase = "nominal", inputs=None,
                dtype: torch.dtype | None = None) -> dict:
        """A1 predicate (plus the problem's special rules) -> dict(ok, max_abs, max_rel, n_bad,
        n_total, worst_index, atol, rtol, msg[, parts]).  `dtype` overrides the tolerance-lookup
        dtype (default: the reference output's dtype); pass the deck output dtype when `ref_out` is
        an fp32/fp64 oracle output."""
        if self.compare_fn is not None:
            return self.compare_fn(self, ref_out, sol_out, self.stress_case(case), inputs)
        if isinstance(ref_out, (tuple, list)):
            if not isinstance(sol_out, (tuple, list)) or len(sol_out) != len(ref_out):
                return check_tensor(torch.zeros(1), None, 0, 0, "output structure")
            parts = {}
            for i, (r, s) in enumerate(zip(ref_out, sol_out)):
                atol, rtol = self.tolerance_for(dtype or r.dtype, case)
                parts[f"out{i}"] = check_tensor(r, s, atol, rtol, f"out{i}")
            return merge_results(parts)
        atol, rtol = self.tolerance_for(dtype or ref_out.dtype, case)
        return check_tensor(ref_out, sol_out, atol, rtol)

    def apply_stress(self, model_ref, model_sol, inputs, case: str | StressCase):
        """Context manager: `with spec.apply_stress(ref, sol, inputs, "small_weight") as x: ...`"""
        return apply_stress(model_ref, model_sol, inputs, self.stress_case(case))

    # -- property cases -----------------------------------------------------------------------
    def property_inputs(self, case: str | PropertyCase, device: str | torch.device = "cpu") -> tuple[dict, list]:
        """(shape, inputs) of a property case: base inputs from manual_seed(0xC0DE) on the case's
        shape, then the case mutation."""
        c = self.stress_case(case)
        assert isinstance(c, PropertyCase)
        shape = self.shapes[c.shape_index]
        base = self.make_inputs(shape, c.base_seed, "cpu")
        return shape, to_device(c.mutate(self, shape, base), device)

    # -- roofline -------------------------------------------------------------------------------
    def flops(self, shape: Shape) -> float:
        return eval_formula(self.flops_expr, shape)

    def bytes(self, shape: Shape) -> float:
        return eval_formula(self.bytes_expr, shape)

    def describe(self) -> dict:
        """JSON-friendly summary (for `forensics kernels list` and docs)."""
        return dict(name=self.name, bench=self.bench, deck_version=self.deck_version, since=self.since,
                    until=self.until, regime=self.regime, peak_key=self.peak_key, shapes=self.shapes,
                    check_shapes=self.check_shapes, seeds=list(self.seeds), global_names=list(self.global_names),
                    tolerance=self.tolerance,
                    stress_cases=[dict(name=c.name, input_scales=dict(c.input_scales), state_scales=dict(c.state_scales),
                                       atol=c.atol, rtol=c.rtol) for c in self.stress_cases],
                    property_cases=[dict(name=c.name, shape_index=c.shape_index, params=dict(c.params), atol=c.atol,
                                         rtol=c.rtol, canonical=c.canonical) for c in self.property_cases],
                    flops=self.flops_expr, bytes=self.bytes_expr, n_trials=self.n_trials, timing=self.timing,
                    forbidden=self.forbidden, forbidden_kind=self.forbidden_kind, interface=self.interface,
                    stateful=self.stateful, has_oracle=self.oracle_fn is not None, has_triton=self.has_triton,
                    notes=self.notes)


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

#: every module of kernels/problems/ but the helpers (`_util`): adding one is adding a problem
_PROBLEM_MODULES = tuple(f"forensics.kernels.problems.{m.name}" for m in sorted(
    pkgutil.iter_modules([str(Path(__file__).resolve().parent / "problems")]), key=lambda m: m.name)
    if not m.name.startswith("_"))

#: name -> {deck_version -> spec}, every version
VERSIONS: dict[str, dict[str, ProblemSpec]] = {}
#: name -> the current (latest) version's spec
PROBLEMS: dict[str, ProblemSpec] = {}


def _register(spec: ProblemSpec) -> None:
    VERSIONS.setdefault(spec.name, {})[spec.deck_version] = spec


#: problem module -> "ExcType: message" for modules that failed to import (they are skipped,
#: so one broken problem never hides the others; `get` on it raises KeyError naming the error)
LOAD_ERRORS: dict[str, str] = {}


def _load() -> None:
    for modname in _PROBLEM_MODULES:
        try:
            mod = importlib.import_module(modname)
        except Exception as exc:  # noqa: BLE001 - recorded, reported by get()/names()
            LOAD_ERRORS[modname] = f"{type(exc).__name__}: {exc}"
            continue
        for spec in mod.SPECS:
            _register(spec)
    for name, versions in VERSIONS.items():
        PROBLEMS[name] = max(versions.values(), key=lambda s: s.since or "")


def _resolve_name(problem: str) -> str:
    p = problem.strip().rstrip("/").split("/")[-1]
    if p in VERSIONS:
        return p
    hits = [n for n in VERSIONS if n.split("_", 1)[1] == p or n.startswith(p + "_") or p in n]
    if len(hits) == 1:
        return hits[0]
    broken = [m for m in LOAD_ERRORS if p in m]
    raise KeyError(f"unknown problem {problem!r}" + (f" (ambiguous: {hits})" if hits else "")
                   + (f" (failed to load: {LOAD_ERRORS[broken[0]]})" if broken else ""))


def deck_versions(problem: str) -> list[str]:
    """Deck versions of a problem, oldest first."""
    return [s.deck_version for s in sorted(VERSIONS[_resolve_name(problem)].values(), key=lambda s: s.since or "")]


def get(problem: str, deck_version: str | None = None) -> ProblemSpec:
    """The spec of `problem` ("01_fp8_gemm", "hard/01_fp8_gemm" or "fp8_gemm").

    deck_version: None -> the current version; an exact version label ("2026-06-14",
    "pre-2026-06-14"); or an archive date "YYYY-MM-DD[...]" -> the version in force that day
    (the catalogue's rule, `forensics.problems.get`)."""
    name = _resolve_name(problem)
    versions = VERSIONS[name]
    try:
        entry = catalogue.get(name, deck_version)
    except KeyError:
        raise KeyError(f"{name}: no deck version for {deck_version!r} (have {sorted(versions)})") from None
    if entry.deck_version not in versions:
        raise KeyError(f"{name}: deck version {entry.deck_version} has no bundled spec (have {sorted(versions)})")
    return versions[entry.deck_version]


def names() -> list[str]:
    return sorted(PROBLEMS)


_load()
