"""The problem catalogue: what each problem of the decks is, as data, in one place.

Every layer reads a problem's facts here: the run-id parser (which ids exist, their bench), the
static audit (forbidden ops, main operation, the timed entry point, L2 flushing, the grader's own
calls), the replay (tiny shapes, and through `forensics.kernels.registry.ProblemSpec`, which wraps
an entry with the reference's callables, everything else), the reader's prose (display names).  Standard
library only, so a GPU machine's replay imports it without the store's dependencies, and it sits at
the bottom of the layers (tests/test_layers.py).

    from forensics import problems
    p = problems.get("01_fp8_gemm", "2026-06-01")     # the deck version in force that day
    p.forbidden, p.main_ops, p.writable, p.calls("time"), p.check_seeds
    problems.find(maybe_none_or_unknown)              # None instead of KeyError
    problems.bench_of(pid), problems.problem_in_text(run_dir_name)

The facts are written from the decks' own files (../shared/decks: problem.yaml, PROMPT.txt,
check.py, benchmark.py, src/) and the contract summary (../shared/spec/replay-contract.md, parts
A-E); tests/test_problems.py ties them to both and to `kernels/`.  Only this module spells a
problem's id in forensics/ (the same test scans for it).  Adding a problem: docs/extending.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping

BENCHES = ("hard", "cuda", "mega", "mini", "multi")
#: how the deck calls the solution: Model(*init)(*inputs) ("module"), prefill / decode_steps / run
#: ("decode", cuda 03), Model.step ("step", mega 02), run over a grid ("rollout", cuda 04), or
#: train() (mega 01 PPO, removed from the deck; nothing replays it)
API_KINDS = ("module", "decode", "step", "rollout", "train")
CHECK_ORDERS = ("shape", "seed")
TIMINGS = ("cuda_events_l2_flush", "wall_clock_median", "wall_clock_best_of_3")
FORBIDDEN_KINDS = ("substring", "ast_import")
MAIN_OPS = ("gemm", "attention", "sort")
BENCH_SEED_RULES = ("fixed", "shape", "shape+trial")
#: what a grader call does for the grade: compares outputs, times, seeds, computes the score's
#: statistics, scans the solution's source, reads the deck's configuration, loads the weights into
#: the solution's model, or reads an environment variable that changes what the check runs
ROLES = ("compare", "time", "seed", "stat", "scan", "config", "load", "env")
#: the deck folder of a bench in the benchmark's repository (H100 editions; ../shared/decks)
DECK_EDITIONS = {"hard": "problems-h100", "cuda": "problems-h100", "mega": "problems"}
#: the entry point the static audit starts from when the problem declares none (a plain module)
MODULE_ENTRY = ("forward", "__call__")


@dataclass(frozen=True)
class GraderCall:
    """A function the deck's check.py / benchmark.py (or its src/, or its reference.py) calls in the
    solution's own process: patching it changes the grade.  `name` is dotted as the deck resolves
    it (`torch.allclose`, `torch.cuda.Event.elapsed_time`, `src.eval.timing.time_fn`, a method as
    `Class.method`); `where`: the deck files that call it (relative to the bench's folder for src/,
    to the problem's for the rest); `since`: the first archive date the call exists (None: always)."""
    name: str
    role: str
    where: tuple[str, ...]
    since: str | None = None


@dataclass(frozen=True)
class EntryPoint:
    """A name the deck calls on the solution.  `params` in call order; `inputs`: tensor arguments
    the solution must not write (the deck reuses them or compares against them); `writable`:
    arguments the API hands over for the solution to update in place (state, caches); the rest are
    scalars or the model.  `timed`: the benchmark times this call."""
    name: str
    params: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    required: bool = True
    timed: bool = False


def _frozen(*shapes: Mapping) -> tuple[Mapping, ...]:
    return tuple(MappingProxyType(dict(s)) for s in shapes)


@dataclass(frozen=True)
class Problem:
    """One problem at one deck version.  Problems the benchmark had but this project bundles no
    reference for carry their id, bench and what the static audit needs, nothing more."""
    id: str
    bench: str
    display_name: str | None = None        # what the kernel computes, for a reader who does not know the ids
    deck_version: str | None = None        # version label (forensics.kernels.registry's); None: the only one known
    since: str | None = None               # first archive date this version applies to (None: always)
    until: str | None = None               # first date it no longer applies (exclusive)
    ref_file: str | None = None            # its reference module, kernels/ref/<file> (None: not bundled)
    # what the deck forbids
    forbidden: tuple[str, ...] = ()        # problem.yaml `forbidden`, as written
    forbidden_kind: str | None = None      # how check.py matches it: "substring" (raw regex) or "ast_import"
    forbidden_libraries: tuple[str, ...] = ()   # modules the deck or its prompt forbids importing
    language_gate: bool = False            # check.py runs the CUDA language gate (no Triton/DSL, CUDA evidence)
    # what the solution computes
    main_ops: tuple[str, ...] = ()         # library operations that would do the whole job (MAIN_OPS)
    single_op: bool = False                # the main operation is one op: a library running most of the device time is doing it
    # how the deck calls it
    api_kind: str = "module"
    entry_points: tuple[EntryPoint, ...] = ()
    timed_entry: tuple[str, ...] = MODULE_ENTRY   # function names the static audit starts from, first the timed one
    check_order: str = "shape"             # check.py's trial order: shape-major or seed-major
    # parameter names under which the solution's own functions receive the state the API threads
    # (its writable arguments, the names the deck's reference gives them, the usual synonyms): a
    # write to one is state kept, not an input overwritten (the static audit's INPUT-WRITE)
    state_names: tuple[str, ...] = ()
    check_feeds_state: bool = False        # check.py hands an entry point state the solution did not make
    # timing
    timing: str | None = None
    l2_flush: bool | None = None           # the benchmark flushes L2 before each timed call (None: unknown)
    warmup: int | None = None              # untimed calls before the timed ones
    n_trials: int | None = None            # problem.yaml num_perf_trials
    # shapes, seeds, tolerance
    shapes: tuple[Mapping, ...] = ()       # the benchmark's shapes (kernels' key names)
    check_shapes: tuple[Mapping, ...] = () # what check.py iterates
    tiny_shapes: tuple[Mapping, ...] = ()  # CPU-sized shapes with the deck's globals (the replay's CI path)
    check_seeds: tuple[int, ...] = ()
    bench_seed: int | None = None          # the benchmark's input seed
    bench_seed_rule: str | None = None     # "fixed", "shape" (+ shape index) or "shape+trial" (+ index + trial)
    property_seed: int | None = None       # torch.manual_seed before the property suite's base inputs
    tolerance: Mapping = field(default_factory=lambda: MappingProxyType({}))   # the override check.py applies (problem.yaml)
    grader_calls: tuple[GraderCall, ...] = ()

    def __post_init__(self) -> None:
        bad = []
        if self.bench not in BENCHES:
            bad.append(f"bench {self.bench!r}")
        if self.api_kind not in API_KINDS:
            bad.append(f"api_kind {self.api_kind!r}")
        if self.check_order not in CHECK_ORDERS:
            bad.append(f"check_order {self.check_order!r}")
        if self.timing is not None and self.timing not in TIMINGS:
            bad.append(f"timing {self.timing!r}")
        if self.forbidden_kind is not None and self.forbidden_kind not in FORBIDDEN_KINDS:
            bad.append(f"forbidden_kind {self.forbidden_kind!r}")
        if self.bench_seed_rule is not None and self.bench_seed_rule not in BENCH_SEED_RULES:
            bad.append(f"bench_seed_rule {self.bench_seed_rule!r}")
        bad += [f"main op {o!r}" for o in self.main_ops if o not in MAIN_OPS]
        bad += [f"role {c.role!r} of {c.name}" for c in self.grader_calls if c.role not in ROLES]
        for e in self.entry_points:
            bad += [f"{e.name}: {a!r} is not a parameter" for a in e.inputs + e.writable if a not in e.params]
            bad += [f"{e.name}: writable {a!r} is not in state_names" for a in e.writable if a not in self.state_names]
        if bad:
            raise ValueError(f"{self.id}: " + "; ".join(bad))

    @property
    def bundled(self) -> bool:
        """A reference for it ships under kernels/ (the replay can run it)."""
        return self.ref_file is not None

    @property
    def deck_path(self) -> str | None:
        """Its folder under the benchmark repository's `benchmarks/` (../shared/decks/benchmarks)."""
        ed = DECK_EDITIONS.get(self.bench)
        return f"{self.bench}/{ed}/{self.id}" if ed else None

    def entry(self, name: str) -> EntryPoint | None:
        return next((e for e in self.entry_points if e.name == name), None)

    @property
    def timed_entry_points(self) -> tuple[EntryPoint, ...]:
        return tuple(e for e in self.entry_points if e.timed)

    @property
    def writable(self) -> tuple[str, ...]:
        """`entry.param` of every argument the API lets the solution write in place."""
        return tuple(f"{e.name}.{a}" for e in self.entry_points for a in e.writable)

    @property
    def inputs(self) -> tuple[str, ...]:
        """`entry.param` of every tensor argument the solution must not write."""
        return tuple(f"{e.name}.{a}" for e in self.entry_points for a in e.inputs)

    def calls(self, role: str | None = None) -> tuple[GraderCall, ...]:
        """The grader calls, of one role or all."""
        if role is not None and role not in ROLES:
            raise ValueError(f"unknown role {role!r} (have {', '.join(ROLES)})")
        return tuple(c for c in self.grader_calls if role is None or c.role == role)

    @property
    def substring_bans(self) -> tuple[str, ...]:
        """The literals check.py greps the solution for (none where it matches imports)."""
        return self.forbidden if self.forbidden_kind == "substring" else ()

    @property
    def import_bans(self) -> tuple[str, ...]:
        """The modules whose import (itself, a submodule or a parent) check.py fails, where it
        matches imports by AST (mega); none where it greps substrings."""
        return self.forbidden_libraries if self.forbidden_kind == "ast_import" else ()


# ------------------------------------------------------------------------------- grader calls
def _c(role: str, where: str | tuple[str, ...], *names: str, since: str | None = None) -> tuple[GraderCall, ...]:
    w = (where,) if isinstance(where, str) else tuple(where)
    return tuple(GraderCall(n, role, w, since) for n in names)


def _calls(*groups: Iterable[GraderCall]) -> tuple[GraderCall, ...]:
    """Merge groups: one call per name, its files united, the earliest `since` (None first)."""
    out: dict[str, GraderCall] = {}
    for g in groups:
        for c in g:
            old = out.get(c.name)
            if old is None:
                out[c.name] = c
                continue
            if old.role != c.role:
                raise ValueError(f"{c.name}: roles {old.role} and {c.role}")
            since = None if None in (old.since, c.since) else min(old.since, c.since)  # type: ignore[type-var]
            out[c.name] = GraderCall(c.name, c.role, tuple(dict.fromkeys(old.where + c.where)), since)
    return tuple(out.values())


_CORR = "src/eval/correctness.py"
_STRESS_PY = "src/eval/numeric_stress.py"
_PROP_PY = "src/eval/property_stress.py"
_TIMING_PY = "src/eval/timing.py"
_GATE_PY = "src/eval/cuda_language.py"
_BOTH = ("check.py", "benchmark.py")

# the A1 predicate: shape, NaN/Inf of the solution, then torch.equal or torch.allclose on fp32 copies
A1 = _calls(_c("compare", "check.py", "src.eval.correctness.check_correctness"),
            _c("compare", _CORR, "torch.isnan", "torch.isinf", "torch.Tensor.any", "torch.equal", "torch.allclose"))
# the numeric-stress cases (KBH_NUMERIC_STRESS, read after the solution is imported, turns them off)
STRESS = _calls(_c("compare", "check.py", "src.eval.numeric_stress.numeric_stress_cases",
                   "src.eval.numeric_stress.numeric_stress_context", "src.eval.numeric_stress.tolerance_for_case"),
                _c("env", _STRESS_PY, "os.environ.get"), _c("time", _STRESS_PY, "torch.cuda.synchronize"))
# the hard property suite (added 2026-08-07): its plan is drawn before the solution is imported
_P = "2026-08-07"
PROPERTY = _calls(_c("seed", "check.py", "src.eval.property_stress.generate_property_cases", since=_P),
                  _c("compare", "check.py", "src.eval.property_stress.property_shape_index",
                     "src.eval.property_stress.tolerance_for_property", since=_P),
                  _c("seed", _PROP_PY, "hypothesis.seed", "secrets.randbits", since=_P),
                  _c("env", _PROP_PY, "os.environ.get", since=_P),
                  _c("time", _PROP_PY, "torch.cuda.synchronize", since=_P),
                  _c("compare", _PROP_PY, "src.eval.correctness.check_correctness", since=_P))
PROPERTY_TENSOR = PROPERTY + _c("compare", "check.py", "src.eval.property_stress.check_tensor_properties", since=_P)
PROPERTY_TOPK = PROPERTY + _c("compare", "check.py", "src.eval.property_stress.check_topk_properties", since=_P) \
    + _c("compare", _PROP_PY, "torch.gather", "torch.unique", since=_P)
# check.py's seeding of each trial's inputs, and the benchmark's fixed seed
CHECK_SEED = _c("seed", "check.py", "torch.manual_seed", "torch.cuda.manual_seed_all")
# reading problem.yaml (tolerance, forbidden list, trial count) and the forbidden-op grep, which
# runs after the solution is imported
CONFIG = _c("config", _BOTH, "yaml.safe_load")
SUBSTRING_SCAN = _c("scan", "check.py", "re.search", "re.escape", "pathlib.Path.read_text")
CUDA_GATE = _calls(_c("scan", "check.py", "src.eval.cuda_language.collect_solution_sources",
                      "src.eval.cuda_language.check_cuda_language"), _c("scan", _GATE_PY, "re.search"))
LOAD = _c("load", _BOTH, "torch.nn.Module.load_state_dict", "torch.nn.Module.state_dict")
# src/eval/timing.py: 10 warm-up calls, then per trial an L2 flush, sync, events around the call, sync
EVENTS = _calls(_c("time", "benchmark.py", "src.eval.timing.time_variant"),
                _c("env", "benchmark.py", "src.eval.timing.benchmark_baselines_enabled"),
                _c("time", _TIMING_PY, "src.eval.timing.time_fn", "src.eval.timing._l2_flush", "torch.cuda.synchronize",
                   "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time", "time.perf_counter"),
                _c("stat", _TIMING_PY, "statistics.median"), _c("env", _TIMING_PY, "os.environ.get"))
# the roofline score: per-shape fractions of the hardware's peak, their geometric mean
ROOFLINE = _calls(_c("stat", "benchmark.py", "src.eval.roofline.compute_tflops", "src.eval.roofline.compute_gbps",
                     "src.eval.roofline.peak_fraction", "math.exp", "math.log"),
                  _c("config", "benchmark.py", "src.hardware.get"), _c("seed", "benchmark.py", "torch.manual_seed"))
# a wall-clock loop: perf_counter between synchronizes, the median by sorting (cuda 03/04)
WALL_MEDIAN = _calls(_c("time", "benchmark.py", "time.perf_counter", "torch.cuda.synchronize"),
                     _c("stat", "benchmark.py", "list.sort", "math.exp", "math.log"))
CPU_GENERATOR = _c("seed", "reference.py", "torch.Generator", "torch.Generator.manual_seed")

# the hard template (check.py A4, benchmark.py A5/A6); the cuda stateless checks add the gate
_HARD_CALLS = _calls(A1, STRESS, CHECK_SEED, CONFIG, SUBSTRING_SCAN, LOAD, EVENTS, ROOFLINE)
_HARD_STRESS_SINCE = "2026-06-02"


def _hard_calls(*extra: Iterable[GraderCall]) -> tuple[GraderCall, ...]:
    base = tuple(GraderCall(c.name, c.role, c.where, _HARD_STRESS_SINCE) if c.name.startswith("src.eval.numeric_stress")
                 else c for c in _HARD_CALLS)
    return _calls(base, *extra)


# ----------------------------------------------------------------------------- entry points
def _module(init: tuple[str, ...], forward: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    """Model(*init) and its forward(*inputs): the deck reuses the same input tensors for every timed
    call and for the reference, so none may be written."""
    return (EntryPoint("Model", init), EntryPoint("Model.forward", forward, inputs=forward, timed=True))


# the forbidden lists' shared parts (cuda, mini): Triton, the DSLs, the reference module
_TRITON = ("import triton", "from triton", "@triton.jit", "triton.language")
_DSL = ("import thunderkittens", "from cutlass.cute", "import tilelang")
_REF_IMPORTS = ("import reference", "from reference")
_GATE_LIBS = ("triton", "thunderkittens", "cutlass.cute", "tilelang")

_HARD = dict(bench="hard", forbidden_kind="substring", timing="cuda_events_l2_flush", l2_flush=True, warmup=10,
             check_seeds=(42, 123, 456), bench_seed=2026, bench_seed_rule="fixed", check_order="shape")
_CUDA_EVENTS = dict(_HARD, bench="cuda", language_gate=True)

_FP8_SHAPES = _frozen(dict(M=4096, N=4096, K=4096), dict(M=4096, N=4096, K=4127), dict(M=32, N=8192, K=8192),
                      dict(M=4096, N=14336, K=4096))
_FP8 = dict(_HARD, display_name="FP8 GEMM", forbidden=("torch._scaled_mm", "torch.ops.aten._scaled_mm"),
            main_ops=("gemm",), single_op=True, entry_points=_module(("M", "N", "K"), ("x",)), n_trials=30,
            shapes=_FP8_SHAPES, check_shapes=_FP8_SHAPES, tiny_shapes=_frozen(dict(M=16, N=32, K=64)),
            grader_calls=_hard_calls())

_KDA_SHAPES = _frozen(*(dict(B=b, T=t, H=h, K=128, V=128, CHUNK_SIZE=64)
                        for b, t, h in ((2, 1024, 8), (2, 2048, 8), (1, 4096, 8), (1, 2048, 4))))
_PAGED_KEYS = ("BATCH", "NUM_HEADS", "NUM_KV_HEADS", "HEAD_DIM", "SEQ_LEN", "PAGE_SIZE")
_PAGED_SHAPES = _frozen(*(dict(zip(_PAGED_KEYS, s)) for s in ((8, 32, 8, 128, 1024, 16), (32, 32, 8, 128, 2048, 16),
                                                              (4, 64, 8, 128, 4096, 16), (16, 32, 8, 128, 1535, 16),
                                                              (8, 16, 4, 64, 2000, 16))))
_TOPK_SHAPES = _frozen(dict(batch=1, n=131072, k=64), dict(batch=64, n=8192, k=8), dict(batch=32, n=16384, k=32),
                       dict(batch=16, n=12000, k=16), dict(batch=128, n=4096, k=1))
_SONIC_SHAPES = _frozen(*(dict(zip(("T_total", "H", "I", "E", "K"), s))
                          for s in ((32768, 4096, 1536, 128, 8), (4096, 2048, 1024, 64, 4), (16384, 2048, 4096, 64, 8))))
_W4A16_SHAPES = _frozen(dict(M=1, N=12288, K=4096), dict(M=32, N=12288, K=4096), dict(M=256, N=12288, K=4096),
                        dict(M=1, N=4096, K=4096), dict(M=16, N=14336, K=4096))
_GLM = dict(E=256, top_k=8, n_shared=1, H=4096, I=2048)
_NSA_KEYS = ("B", "H", "S", "D")
_NSA_CHECK = _frozen(dict(B=1, H=4, S=256, D=64), dict(B=1, H=2, S=384, D=64))

CATALOGUE: tuple[Problem, ...] = (
    # ------------------------------------------------------------------------------ hard (B1-B6)
    Problem("01_fp8_gemm", deck_version="pre-2026-06-14", until="2026-06-14",
            ref_file="hard_01_fp8_gemm_pre20260614.py", tolerance=MappingProxyType({"fp8_e4m3fn": 0.15}), **_FP8),
    Problem("01_fp8_gemm", deck_version="2026-06-14", since="2026-06-14", ref_file="hard_01_fp8_gemm.py",
            tolerance=MappingProxyType({"bfloat16": 0.2, "fp8_e4m3fn": 0.2}), **_FP8),
    Problem("02_kda_cutlass", display_name="Kimi delta attention (KDA) chunk kernel", deck_version="2026-06-12",
            ref_file="hard_02_kda.py",
            forbidden=("fla.ops.kda", "fla.ops.chunk_kda", "chunk_kda", "fused_recurrent_kda", "naive_chunk_kda",
                       "naive_recurrent_kda"), forbidden_libraries=("fla.ops.kda", "fla.ops.chunk_kda"),
            main_ops=("gemm",), entry_points=_module(("B", "T", "H", "K", "V", "chunk_size"), ("q", "k", "v", "g", "beta")),
            n_trials=20, shapes=_KDA_SHAPES, check_shapes=_KDA_SHAPES,
            tiny_shapes=_frozen(dict(B=1, T=128, H=2, K=16, V=16, CHUNK_SIZE=64)), property_seed=0xC0DE,
            tolerance=MappingProxyType({"torch.bfloat16": 0.05}),
            # get_inputs reseeds the global generator with 0 itself: every seed draws the same tensors
            grader_calls=_hard_calls(PROPERTY_TENSOR, _c("seed", "reference.py", "torch.manual_seed")), **_HARD),
    Problem("03_paged_attention", display_name="paged-attention decode kernel", deck_version="2026-06-12",
            ref_file="hard_03_paged_attention.py",
            forbidden=("vllm.attention", "flashinfer.batch_decode_with_paged_kv_cache", "flashinfer.decode",
                       "torch.nn.functional.scaled_dot_product_attention", "F.scaled_dot_product_attention"),
            forbidden_libraries=("vllm.attention", "flashinfer.decode"), main_ops=("attention", "gemm"),
            single_op=True,
            entry_points=_module(("batch", "num_heads", "num_kv_heads", "head_dim", "seq_len", "page_size"),
                                 ("query", "kv_cache", "block_table", "seq_lens")),
            n_trials=30, shapes=_PAGED_SHAPES, check_shapes=_PAGED_SHAPES,
            tiny_shapes=_frozen(dict(BATCH=2, NUM_HEADS=4, NUM_KV_HEADS=2, HEAD_DIM=16, SEQ_LEN=40, PAGE_SIZE=16)),
            property_seed=0xC0DE, tolerance=MappingProxyType({"bfloat16": 0.02, "float16": 0.02}),
            grader_calls=_hard_calls(PROPERTY_TENSOR), **_HARD),
    Problem("05_topk_bitonic", display_name="top-k selection kernel", deck_version="2026-06-12",
            ref_file="hard_05_topk.py",
            forbidden=("torch.topk", "torch.kthvalue", "torch.sort", "torch.argsort", "Tensor.topk", "Tensor.kthvalue",
                       "Tensor.sort", "Tensor.argsort", "torch.ops.aten.topk", "torch.ops.aten.sort",
                       "torch.ops.aten.kthvalue"),
            main_ops=("sort",), single_op=True, entry_points=_module(("batch", "n", "k"), ("x",)), n_trials=50,
            shapes=_TOPK_SHAPES, check_shapes=_TOPK_SHAPES, tiny_shapes=_frozen(dict(batch=4, n=512, k=8)),
            property_seed=0xC0DE, tolerance=MappingProxyType({"float32": 1.0e-4}),
            # check.py's own index checks: the range of the indices, then gather(x, indices) vs the values
            grader_calls=_hard_calls(PROPERTY_TOPK, _c("compare", "check.py", "torch.gather", "torch.Tensor.min",
                                                       "torch.Tensor.max")), **_HARD),
    Problem("06_sonic_moe_swiglu", display_name="mixture-of-experts SwiGLU layer", deck_version="2026-06-12",
            ref_file="hard_06_sonic_moe.py",
            forbidden=("torch.matmul", "torch.bmm", "torch.nn.functional.linear", "F.linear", "from sonic_moe",
                       "import sonic_moe"), forbidden_libraries=("sonic_moe",), main_ops=("gemm",), single_op=True,
            entry_points=_module(("T_total", "H", "I", "E", "K"), ("hidden_states", "expert_offsets")), n_trials=20,
            shapes=_SONIC_SHAPES, check_shapes=_SONIC_SHAPES, tiny_shapes=_frozen(dict(T_total=32, H=64, I=32, E=4, K=2)),
            property_seed=0xC0DE, tolerance=MappingProxyType({"bfloat16": 0.02}),
            grader_calls=_hard_calls(PROPERTY_TENSOR), **_HARD),
    Problem("07_w4a16_gemm", display_name="4-bit-weight (W4A16) GEMM", deck_version="2026-06-12",
            ref_file="hard_07_w4a16.py",
            forbidden=("bitsandbytes.functional.dequantize_4bit", "bitsandbytes.functional.gemv_4bit",
                       "marlin_kernel.gemm", "torch.nn.functional.linear"),
            main_ops=("gemm",), single_op=True, entry_points=_module(("M", "N", "K", "group_size"), ("x",)),
            n_trials=50, shapes=_W4A16_SHAPES, check_shapes=_W4A16_SHAPES, tiny_shapes=_frozen(dict(M=2, N=64, K=256)),
            tolerance=MappingProxyType({"bfloat16": 0.10}),
            # Model.__init__ reseeds the global generator (a hash of M, N, K)
            grader_calls=_hard_calls(_c("seed", "reference.py", "torch.manual_seed")), **_HARD),
    # ------------------------------------------------------------------------------ cuda (C1-C4)
    Problem("01_glm52_fused_moe", display_name="fused mixture-of-experts layer (GLM)", deck_version="2026-07-16",
            ref_file="cuda_01_glm_moe.py",
            forbidden=_TRITON + ("import vllm", "from vllm", "flashinfer", "megablocks", "scattermoe",
                                 "torch._grouped_mm") + _DSL + _REF_IMPORTS,
            forbidden_libraries=_GATE_LIBS + ("vllm", "flashinfer", "megablocks", "scattermoe", "reference"),
            main_ops=("gemm",), entry_points=_module(("T", "E", "top_k", "n_shared", "H", "I"),
                                                     ("x", "expert_ids", "expert_weights")),
            n_trials=15, shapes=_frozen(*(dict(T=t, **_GLM) for t in (4096, 4127, 1, 8192, 512, 1000))),
            check_shapes=_frozen(*(dict(T=t, **_GLM) for t in (256, 256, 1, 256, 256, 256))),   # check.py caps T at 256
            # the contract's fixed top_k=8 and n_shared=1 over 16 experts (routing still a choice); the
            # contract's hidden size 4096, so outputs have the deck's magnitude (~1: with H=64 they are
            # ~0.005 and the 0.08 tolerance passes anything); I=128 keeps the weights at 50 MB; an odd
            # token count and the single-token case the deck's shapes also hold
            tiny_shapes=_frozen(dict(T=17, E=16, top_k=8, n_shared=1, H=4096, I=128),
                                dict(T=1, E=16, top_k=8, n_shared=1, H=4096, I=128)),
            tolerance=MappingProxyType({"bfloat16": 0.08, "float32": 1.0e-3}),
            grader_calls=_calls(_HARD_CALLS, CUDA_GATE), **_CUDA_EVENTS),
    Problem("02_deepseek_nsa", display_name="native sparse attention (NSA) kernel", deck_version="2026-07-16",
            ref_file="cuda_02_nsa.py",
            forbidden=_TRITON + ("flash_attn", "flashinfer", "scaled_dot_product_attention",
                                 "F.scaled_dot_product_attention", "torch.nn.functional.scaled_dot_product_attention")
            + _DSL + _REF_IMPORTS,
            forbidden_libraries=_GATE_LIBS + ("flash_attn", "flashinfer", "reference"),
            main_ops=("attention", "gemm"), single_op=True, entry_points=_module(_NSA_KEYS, ("q", "k", "v")),
            n_trials=15,
            shapes=_frozen(*(dict(zip(_NSA_KEYS, s)) for s in ((1, 16, 2048, 64), (1, 16, 4127, 64), (1, 8, 8192, 64),
                                                                (1, 8, 8191, 128), (4, 8, 1024, 64), (2, 8, 3000, 64)))),
            check_shapes=_NSA_CHECK,
            # the deck's own check shapes, CPU-sized already.  Not longer ones: past S = 512 the top-8
            # block selection starts, which check.py never exercises, and near-ties of block means under
            # the small_qkv stress then fail solutions the deck passes (4 of 4 in the corpus at S=577)
            tiny_shapes=_NSA_CHECK, tolerance=MappingProxyType({"bfloat16": 0.1, "float32": 2.0e-3}),
            # the benchmark builds the solution's model but never loads the reference's state into it
            grader_calls=_calls(tuple(c for c in _HARD_CALLS if c.role != "load"), CUDA_GATE,
                                _c("load", "check.py", "torch.nn.Module.load_state_dict", "torch.nn.Module.state_dict")),
            **dict(_CUDA_EVENTS, check_seeds=(42, 123))),
    Problem("03_megaqwen_decode", bench="cuda", display_name="Qwen decode megakernel", deck_version="2026-07-16",
            ref_file="cuda_03_megaqwen.py", forbidden_kind="substring",
            forbidden=_TRITON + ("flash_attn", "flashinfer", "scaled_dot_product_attention",
                                 "F.scaled_dot_product_attention", "import vllm", "from vllm") + _DSL + _REF_IMPORTS,
            forbidden_libraries=_GATE_LIBS + ("flash_attn", "flashinfer", "vllm", "reference"), language_gate=True,
            main_ops=("attention", "gemm"), api_kind="decode",
            entry_points=(EntryPoint("Model", ("num_layers", "max_seq")),
                          EntryPoint("run", ("ctx_len", "n_decode", "seed", "model")),
                          EntryPoint("prefill", ("model", "ctx_len", "seed"), required=False),
                          # the caches are opaque to the benchmark, which threads them through
                          EntryPoint("decode_steps", ("model", "hidden", "k_caches", "v_caches", "start_pos", "n_steps",
                                                      "seed"), inputs=("hidden",), writable=("k_caches", "v_caches"),
                                     required=False, timed=True)),
            timed_entry=("decode_steps", "forward"), check_order="seed",
            # the benchmark feeds decode_steps the caches the solution's own prefill returned; check.py calls run() only
            state_names=("k_caches", "v_caches", "kv_cache", "kv_caches", "caches", "state", "cache"),
            timing="wall_clock_median", l2_flush=False, warmup=1, n_trials=5,
            shapes=_frozen(*(dict(ctx_len=c, n_decode=d) for c, d in ((2048, 64), (8192, 64), (32768, 32), (131072, 16)))),
            check_shapes=_frozen(*(dict(ctx_len=c, n_decode=d) for c, d in ((128, 8), (256, 8), (512, 4)))),
            tiny_shapes=_frozen(dict(ctx_len=4, n_decode=2)),
            check_seeds=(42, 123, 456), bench_seed=2026, bench_seed_rule="shape+trial",
            tolerance=MappingProxyType({"bfloat16": 0.08, "float32": 1.0e-3}),
            grader_calls=_calls(A1, CONFIG, SUBSTRING_SCAN, CUDA_GATE, LOAD, WALL_MEDIAN,
                                # check.py re-draws the reference's weights from a CPU generator per seed
                                _c("seed", "check.py", "torch.Generator", "torch.Generator.manual_seed"),
                                CPU_GENERATOR)),
    Problem("04_grid_mingru_sps", bench="cuda", display_name="MinGRU policy rollout", deck_version="2026-07-16",
            ref_file="cuda_04_mingru.py", forbidden_kind="substring",
            forbidden=_TRITON + _DSL + ("gymnasium", "import gym", "pufferlib") + _REF_IMPORTS,
            forbidden_libraries=_GATE_LIBS + ("gymnasium", "gym", "pufferlib", "reference"), language_gate=True,
            main_ops=("gemm",), api_kind="rollout",
            entry_points=(EntryPoint("Model", ()),
                          EntryPoint("run", ("num_envs", "horizon", "seed", "model"), timed=True),
                          EntryPoint("policy_forward", ("model", "obs", "state"), inputs=("obs", "state"), required=False),
                          EntryPoint("env_step", ("agent", "food", "actions", "rng_state"),
                                     inputs=("agent", "food", "actions", "rng_state"), required=False)),
            timed_entry=("run",), state_names=("state", "agent", "food", "rng_state", "model"),
            timing="wall_clock_median", l2_flush=False, warmup=1, n_trials=3,
            shapes=_frozen(*(dict(num_envs=n, horizon=h) for n, h in ((4096, 32), (16384, 32), (65536, 16), (8192, 64)))),
            check_shapes=_frozen(dict(num_envs=256, horizon=0, part="policy_forward"),
                                 dict(num_envs=256, horizon=1, part="env_step"), dict(num_envs=128, horizon=8, part="run")),
            # the check's three parts, smaller (the canonical check shapes also run on a CPU; the
            # benchmark's 65536 envs do not)
            tiny_shapes=_frozen(dict(num_envs=64, horizon=0, part="policy_forward"),
                                dict(num_envs=64, horizon=1, part="env_step"), dict(num_envs=32, horizon=6, part="run")),
            check_seeds=(42, 123, 456), bench_seed=2026, bench_seed_rule="shape+trial",
            tolerance=MappingProxyType({"float32": 1.0e-3}),      # problem.yaml's `logit_tolerance`, which check.py applies
            grader_calls=_calls(A1, STRESS, CONFIG, SUBSTRING_SCAN, CUDA_GATE, LOAD, WALL_MEDIAN, CPU_GENERATOR,
                                _c("seed", "check.py", "torch.manual_seed"),
                                # env_step and run(): exact positions, food and rng, allclose rewards
                                _c("compare", "check.py", "torch.equal", "torch.allclose"))),
    # ------------------------------------------------------------------------------ mega (D1)
    Problem("02_kimi_linear_decode", bench="mega", display_name="Kimi linear-attention decode step",
            deck_version="2026-07-21", ref_file="mega_02_kimi.py", forbidden_kind="ast_import",
            forbidden=("transformers", "flash_mla", "flashmla", "fla.ops", "flash_linear_attention", "vllm", "sglang",
                       "bitsandbytes", "torchao", "marlin", "auto_gptq", "autoawq", "awq", "exllama") + _REF_IMPORTS
            + ("import baseline", "from baseline"),
            forbidden_libraries=("transformers", "flash_mla", "flashmla", "fla.ops", "flash_linear_attention", "vllm",
                                 "sglang", "bitsandbytes", "torchao", "marlin", "auto_gptq", "autoawq", "awq", "exllama",
                                 "reference", "baseline"),
            main_ops=("attention", "gemm"), api_kind="step",
            entry_points=(EntryPoint("Model", ("cfg",)),
                          # the state may be mutated in place or returned; the next step gets what is returned
                          EntryPoint("Model.step", ("hidden", "state"), inputs=("hidden",), writable=("state",),
                                     timed=True)),
            timed_entry=("step", "forward"), check_order="seed",
            # check.py feeds both models reference.init_state(...) and compares the state step() leaves
            state_names=("state", "st", "states", "cache", "caches"), check_feeds_state=True,
            timing="wall_clock_best_of_3", l2_flush=False, warmup=1, n_trials=3,
            shapes=_frozen(*(dict(ctx=c, steps=s, n_experts=64) for c, s in ((2048, 32), (8192, 16), (16384, 16)))),
            check_shapes=_frozen(dict(ctx=2048, steps=1, n_experts=64), dict(ctx=8192, steps=1, n_experts=64)),
            # a small Config (the full one is GBs of weights), same code; the extra keys are Config fields
            # (forensics.kernels.selftest.KIMI_TINY_CFG), `steps` is the timed run's length
            tiny_shapes=_frozen(dict(ctx=16, steps=4, n_experts=8, hidden=256, kda_heads=2, kda_head_dim=64, mla_heads=2,
                                     kv_lora=128, qk_nope=32, qk_rope=16, v_head=64, n_active=2, moe_inter=128)),
            check_seeds=(0, 1, 2), bench_seed=7, bench_seed_rule="fixed",
            tolerance=MappingProxyType({"cos_sim": 0.98}),
            grader_calls=_calls(
                _c("scan", "check.py", "ast.parse", "pathlib.Path.read_text"), CONFIG,
                _c("compare", _BOTH, "torch.nn.functional.cosine_similarity", "torch.Tensor.item", "torch.isfinite",
                   "torch.Tensor.all"), LOAD,
                _c("time", "benchmark.py", "time.perf_counter", "torch.cuda.synchronize"),
                _c("stat", "benchmark.py", "builtins.min", "math.exp", "math.log"),
                _c("seed", "reference.py", "torch.Generator", "torch.Generator.manual_seed"))),
    # ------------------------------------------------------------------------------ earlier and other decks
    # (no bundled reference: what the static audit and the run-id parser need; spec parts B, D2, E)
    Problem("04_kahan_softmax", bench="hard"),
    Problem("08_metal_lightning_attn", bench="hard"),
    Problem("09_fmha_preattn_mrope", bench="hard"),
    Problem("10_patch_embed_conv3d_gemm", bench="hard"),
    Problem("01_dequant_gemv", bench="mini", forbidden=_REF_IMPORTS, forbidden_kind="substring",
            forbidden_libraries=("reference",), main_ops=("gemm",)),
    Problem("02_segmented_decay_scan", bench="mini", forbidden=_REF_IMPORTS, forbidden_kind="substring",
            forbidden_libraries=("reference",)),
    Problem("03_topp_mask", bench="mini", forbidden=("torch.sort", "torch.topk", "torch.argsort", ".sort(", ".topk(")
            + _REF_IMPORTS, forbidden_kind="substring", forbidden_libraries=("reference",), language_gate=True,
            main_ops=("sort",)),
    Problem("04_flash_attention", bench="mini", forbidden=("scaled_dot_product_attention", "flash_attn", "flashinfer")
            + _REF_IMPORTS, forbidden_kind="substring", forbidden_libraries=("flash_attn", "flashinfer", "reference"),
            language_gate=True, main_ops=("attention", "gemm")),
    Problem("01_rl_grid_ppo", bench="mega", forbidden_kind="ast_import",
            forbidden_libraries=("gymnasium", "gym", "pufferlib", "cleanrl", "stable_baselines3", "tianshou", "envpool",
                                 "sample_factory", "rllib", "torchrl", "reference", "baseline"),
            api_kind="train", entry_points=(EntryPoint("train", ("total_env_steps", "seed"), timed=True),),
            timed_entry=("train",), state_names=("state", "agent", "food", "rng_state", "model", "env"),
            timing="wall_clock_best_of_3", l2_flush=False, n_trials=3),
    Problem("01_allreduce_residual", bench="multi"),
    Problem("07_gemm_allreduce_overlap", bench="multi"),
    Problem("08_ring_attention_cp", bench="multi"),
    Problem("09_moe_ep_dispatch_combine", bench="multi"),
)


# ------------------------------------------------------------------------------------ lookups
def _index() -> dict[str, tuple[Problem, ...]]:
    out: dict[str, list[Problem]] = {}
    for p in CATALOGUE:
        out.setdefault(p.id, []).append(p)
    return {k: tuple(sorted(v, key=lambda p: p.since or "")) for k, v in out.items()}


_BY_ID = _index()
_BY_LEN = sorted(_BY_ID, key=len, reverse=True)


def ids() -> list[str]:
    """Every problem id the benches have had, bundled or not."""
    return list(_BY_ID)


def bundled() -> list[str]:
    """The ids with a reference under kernels/ (some version of them)."""
    return [i for i, vs in _BY_ID.items() if any(p.bundled for p in vs)]


def versions(problem: str) -> tuple[Problem, ...]:
    """Every deck version of a problem, oldest first.  KeyError for an unknown id."""
    try:
        return _BY_ID[problem]
    except KeyError:
        raise KeyError(f"unknown problem {problem!r}") from None


def get(problem: str, version: str | None = None) -> Problem:
    """The entry of `problem` at `version`: None -> the current (latest) version; an exact version
    label ("2026-06-14", "pre-2026-06-14"); or an archive date "YYYY-MM-DD[...]" -> the version in
    force that day.  KeyError for an unknown id or a date no version covers."""
    vs = versions(problem)
    if version is None:
        return vs[-1]
    for p in vs:
        if p.deck_version == version:
            return p
    date = str(version)[:10]
    for p in vs:
        if (p.since is None or p.since <= date) and (p.until is None or date < p.until):
            return p
    raise KeyError(f"{problem}: no deck version for {version!r} (have {[p.deck_version for p in vs]})")


def find(problem: str | None, version: str | None = None) -> Problem | None:
    """`get`, or None for no id, an unknown one, or a date no version covers."""
    if not problem:
        return None
    try:
        return get(problem, version)
    except KeyError:
        return None


def bench_of(problem: str | None) -> str | None:
    p = find(problem)
    return p.bench if p else None


def problem_in_text(text: str) -> str | None:
    """The longest known problem id inside a run id or path, or None."""
    return next((p for p in _BY_LEN if p in text), None)


def run_id_problem(rest: str) -> tuple[str, str] | None:
    """Split '<model_slug>_<problem>' at a known problem id (the longest that ends it), or None."""
    for name in _BY_LEN:
        if rest.endswith("_" + name) and len(rest) > len(name) + 1:
            return rest[: -len(name) - 1], name
    return None
