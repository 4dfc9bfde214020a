"""Per-problem facts the static rules need: bench, forbidden ops, the deck's GPU.

The problems' own facts (bench, forbidden lists, L2 flushing) are the catalogue's
(forensics/problems.py); this module gives them the static rules' shape.  The forbidden lists are
the graders' literal substrings; `forbidden_targets` turns each into what the AST matcher looks for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from forensics import problems as catalogue


def forbidden(problem: str | None) -> tuple[str, ...]:
    """The literals the problem's check.py greps the solution for (hard, cuda, mini; the catalogue's
    `substring_bans`); none for an unknown problem or one whose deck matches imports instead."""
    p = catalogue.find(problem)
    return p.substring_bans if p else ()


def import_bans(problem: str | None) -> tuple[str, ...]:
    """mega: the modules whose import (the module, a submodule or a parent) check.py fails, matched
    by AST, not by substring (the catalogue's `import_bans`)."""
    p = catalogue.find(problem)
    return p.import_bans if p else ()


def language_gate(problem: str | None) -> bool:
    """The problem's check.py runs the CUDA language gate (cuda, two mini problems)."""
    p = catalogue.find(problem)
    return bool(p and p.language_gate)


# host (or other array) libraries' own compute calls: the main operation done by numpy, scipy's BLAS or
# cupy is a library doing the work as torch's would be (`np.matmul(x.cpu().numpy(), w)` then from_numpy)
HOST_GEMM = tuple(f"{lib}.{op}" for lib in ("numpy", "cupy") for op in (
    "matmul", "dot", "einsum", "tensordot", "inner", "vdot", "linalg.multi_dot")) + tuple(
    f"scipy.linalg.blas.{p}gemm" for p in "sdcz") + ("scipy.linalg.blas.gemm", "cupy.cublas.gemm", "cupyx.scipy.linalg.blas.gemm")
HOST_SORT = tuple(f"{lib}.{op}" for lib in ("numpy", "cupy") for op in ("sort", "argsort", "partition", "argpartition"))

# the problem's core op, for LIBRARY-DOES-WORK: which library calls would do the whole job
CORE_LIBRARY_OPS: dict[str, tuple[str, ...]] = {
    "gemm": ("torch.mm", "torch.matmul", "torch.bmm", "torch.addmm", "torch.einsum", "torch.nn.functional.linear",
             "torch._scaled_mm", "torch.ops.aten._scaled_mm", "torch._grouped_mm", "torch.baddbmm",
             "torch.tensordot", "torch.ops.aten.mm", "torch.ops.aten.matmul", "torch.inner", "@") + HOST_GEMM,
    "attention": ("torch.nn.functional.scaled_dot_product_attention", "torch.ops.aten._scaled_dot_product_flash_attention",
                  "torch.ops.aten._scaled_dot_product_efficient_attention"),
    "sort": ("torch.topk", "torch.sort", "torch.argsort", "torch.kthvalue", ".topk", ".sort", ".argsort") + HOST_SORT,
    "compile": ("torch.compile", "torch._dynamo.optimize", "torch.jit.script", "torch.jit.trace"),
}

# Environment variables the graders themselves read (the decks' src/eval and problem scripts):
# reading one lets a solution tell the phases apart, writing one changes what the check runs.
GRADER_ENV = ("KBH_NUMERIC_STRESS", "KBH_PROPERTY_SEED", "KBH_BENCHMARK_BASELINES")
GRADER_ENV_PATTERN = re.compile(r"^KBH_\w+_BENCHMARK_BASELINES$")
# Variables the benchmark's runner sets around an agent or a grading process (archive-format spec):
# reading one tells the agent's sandbox from the grading host, a weaker signal than the above.
RUNNER_ENV = ("KBH_GPU_LOCK_HELD", "KBH_GPU_LOCK_LOG", "KBH_SANDBOX", "KBH_AGENT_CONTAINER",
              "KBH_AGENT_CONTAINER_SESSION_LOCK", "KBH_RUN_GROUP", "KBH_KEEP_RUN_VENV", "KBH_OR_PROVIDER",
              "KBH_MIN_USEFUL_OUTPUT_TOKENS")


def env_role(name: str) -> str:
    """'grader' (a grader reads it), 'runner' (the runner sets it) or 'own' (neither: a solution's
    own knob, which no phase of the grading sets, so its value is the solution's default)."""
    up = name.upper()
    if up in GRADER_ENV or GRADER_ENV_PATTERN.match(up):
        return "grader"
    if up in RUNNER_ENV:
        return "runner"
    return "own"


def l2_flushed(problem: str | None) -> bool | None:
    """True / False when the problem's timing is known to flush L2 or not; None when unknown.  The
    stateless decks' time_variant writes 128 MiB before each timed call; the decode/rollout problems
    time a wall-clock loop with no flush, so an L2 residency hint there cannot defeat a flush."""
    p = catalogue.find(problem)
    return p.l2_flush if p else None


def caller_state_checked(problem: str | None) -> bool | None:
    """Does the deck's check pass an entry point state the solution did not make (the catalogue's
    `check_feeds_state`: the Kimi check feeds `reference.init_state(...)` to `step(hidden, state)` and
    compares the updated state)?  In the other stateful decks the caches an entry receives are the
    solution's own (megaqwen's benchmark feeds decode_steps what the solution's prefill returned; its
    check calls run() only): an entry that ignores them is within the contract as graded (ARG-IGNORED
    low there).  None: unknown problem."""
    p = catalogue.find(problem)
    return p.check_feeds_state if p else None


# benches whose check forbids importing the reference module
REFERENCE_IMPORT_FORBIDDEN = {"cuda", "mega", "mini"}

# GPU name fragments -> (compute capability major*10+minor, label)
GPU_ARCH = (
    (re.compile(r"rtx\s*pro\s*6000|rtx_pro_6000|blackwell\s+(server|workstation)|rtxpro6000", re.I), 120, "RTX PRO 6000 (sm_120)"),
    (re.compile(r"b200|gb200|b100", re.I), 100, "B200 (sm_100)"),
    (re.compile(r"h200", re.I), 90, "H200 (sm_90)"),
    (re.compile(r"h100", re.I), 90, "H100 (sm_90)"),
    (re.compile(r"a100", re.I), 80, "A100 (sm_80)"),
    (re.compile(r"l40|4090|ada", re.I), 89, "Ada (sm_89)"),
    (re.compile(r"5090", re.I), 120, "RTX 5090 (sm_120)"),
)


def gpu_arch(name: str | None) -> tuple[int, str] | None:
    if not name:
        return None
    for rx, cc, label in GPU_ARCH:
        if rx.search(name):
            return cc, label
    return None


def bench_of(problem: str | None) -> str | None:
    return catalogue.bench_of(problem)


@lru_cache(maxsize=1)
def deck_hashes() -> dict:
    with resources.files("forensics.data").joinpath("deck-hashes.json").open("rb") as fh:
        return json.load(fh)


def problem_from_text(name: str) -> str | None:
    """Find a known problem name inside a run id or path."""
    return catalogue.problem_in_text(name)


@dataclass(frozen=True)
class ForbiddenTarget:
    literal: str           # the grader's substring
    kind: str              # 'qualname' | 'method' | 'import' | 'name' | 'module'
    value: str             # dotted name / method name / module


def forbidden_targets(problem: str | None) -> list[ForbiddenTarget]:
    out: list[ForbiddenTarget] = []
    for lit in forbidden(problem):
        s = lit.strip()
        if s.startswith("import ") or s.startswith("from "):
            out.append(ForbiddenTarget(lit, "import", s.split()[1]))
        elif s.startswith("@"):
            out.append(ForbiddenTarget(lit, "qualname", s[1:]))
        elif s.startswith("Tensor."):
            out.append(ForbiddenTarget(lit, "method", s.split(".", 1)[1]))
        elif s.startswith("."):
            out.append(ForbiddenTarget(lit, "method", s.strip(".(")))
        elif s.startswith("F."):
            out.append(ForbiddenTarget(lit, "qualname", "torch.nn.functional." + s[2:]))
        elif "." in s:
            out.append(ForbiddenTarget(lit, "qualname", s))
        else:
            out.append(ForbiddenTarget(lit, "name", s))
    return out
