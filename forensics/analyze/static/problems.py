"""Per-problem facts the static rules need: bench, forbidden ops, the deck's GPU.

Paraphrased from spec/replay-contract.md (Parts B-E).  The forbidden lists are the graders'
literal substrings; `forbidden_targets` turns each into what the AST matcher looks for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

TRITON_SET = ("import triton", "from triton", "@triton.jit", "triton.language")
DSL_SET = ("import thunderkittens", "from cutlass.cute", "import tilelang")
REF_IMPORTS = ("import reference", "from reference")

FORBIDDEN: dict[str, tuple[str, ...]] = {
    # hard
    "01_fp8_gemm": ("torch._scaled_mm", "torch.ops.aten._scaled_mm"),
    "02_kda_cutlass": ("fla.ops.kda", "fla.ops.chunk_kda", "chunk_kda", "fused_recurrent_kda",
                       "naive_chunk_kda", "naive_recurrent_kda"),
    "03_paged_attention": ("vllm.attention", "flashinfer.batch_decode_with_paged_kv_cache",
                           "flashinfer.decode", "torch.nn.functional.scaled_dot_product_attention",
                           "F.scaled_dot_product_attention"),
    "05_topk_bitonic": ("torch.topk", "torch.kthvalue", "torch.sort", "torch.argsort", "Tensor.topk",
                        "Tensor.kthvalue", "Tensor.sort", "Tensor.argsort", "torch.ops.aten.topk",
                        "torch.ops.aten.sort", "torch.ops.aten.kthvalue"),
    "06_sonic_moe_swiglu": ("torch.matmul", "torch.bmm", "torch.nn.functional.linear", "F.linear",
                            "from sonic_moe", "import sonic_moe"),
    "07_w4a16_gemm": ("bitsandbytes.functional.dequantize_4bit", "bitsandbytes.functional.gemv_4bit",
                      "marlin_kernel.gemm", "torch.nn.functional.linear"),
    # cuda
    "01_glm52_fused_moe": TRITON_SET + ("import vllm", "from vllm", "flashinfer", "megablocks", "scattermoe",
                                        "torch._grouped_mm", "import thunderkittens", "from cutlass.cute",
                                        "import tilelang") + REF_IMPORTS,
    "02_deepseek_nsa": TRITON_SET + ("flash_attn", "flashinfer", "scaled_dot_product_attention",
                                     "F.scaled_dot_product_attention",
                                     "torch.nn.functional.scaled_dot_product_attention") + DSL_SET + REF_IMPORTS,
    "03_megaqwen_decode": TRITON_SET + ("flash_attn", "flashinfer", "scaled_dot_product_attention",
                                        "F.scaled_dot_product_attention", "import vllm", "from vllm")
                          + DSL_SET + REF_IMPORTS,
    "04_grid_mingru_sps": TRITON_SET + DSL_SET + ("gymnasium", "import gym", "pufferlib") + REF_IMPORTS,
    # mini (substring lists include the reference imports)
    "01_dequant_gemv": REF_IMPORTS,
    "02_segmented_decay_scan": REF_IMPORTS,
    "03_topp_mask": ("torch.sort", "torch.topk", "torch.argsort", ".sort(", ".topk(") + REF_IMPORTS,
    "04_flash_attention": ("scaled_dot_product_attention", "flash_attn", "flashinfer") + REF_IMPORTS,
}

# mega: AST import bans (module, submodule or parent), not substrings
MEGA_IMPORT_BANS: dict[str, tuple[str, ...]] = {
    "02_kimi_linear_decode": ("transformers", "flash_mla", "flashmla", "fla.ops", "flash_linear_attention",
                              "vllm", "sglang", "bitsandbytes", "torchao", "marlin", "auto_gptq", "autoawq",
                              "awq", "exllama", "reference", "baseline"),
    "01_rl_grid_ppo": ("gymnasium", "gym", "pufferlib", "cleanrl", "stable_baselines3", "tianshou", "envpool",
                       "sample_factory", "rllib", "torchrl", "reference", "baseline"),
}

# the problem's core op, for LIBRARY-DOES-WORK: which library calls would do the whole job
CORE_LIBRARY_OPS: dict[str, tuple[str, ...]] = {
    "gemm": ("torch.mm", "torch.matmul", "torch.bmm", "torch.addmm", "torch.einsum", "torch.nn.functional.linear",
             "torch._scaled_mm", "torch.ops.aten._scaled_mm", "torch._grouped_mm", "torch.baddbmm",
             "torch.tensordot", "torch.ops.aten.mm", "torch.ops.aten.matmul", "torch.inner", "@"),
    "attention": ("torch.nn.functional.scaled_dot_product_attention", "torch.ops.aten._scaled_dot_product_flash_attention",
                  "torch.ops.aten._scaled_dot_product_efficient_attention"),
    "sort": ("torch.topk", "torch.sort", "torch.argsort", "torch.kthvalue", ".topk", ".sort", ".argsort"),
    "compile": ("torch.compile", "torch._dynamo.optimize", "torch.jit.script", "torch.jit.trace"),
}

PROBLEM_BENCH: dict[str, str] = {
    "01_fp8_gemm": "hard", "02_kda_cutlass": "hard", "03_paged_attention": "hard", "05_topk_bitonic": "hard",
    "06_sonic_moe_swiglu": "hard", "07_w4a16_gemm": "hard", "04_kahan_softmax": "hard",
    "09_fmha_preattn_mrope": "hard", "10_patch_embed_conv3d_gemm": "hard",
    "01_glm52_fused_moe": "cuda", "02_deepseek_nsa": "cuda", "03_megaqwen_decode": "cuda",
    "04_grid_mingru_sps": "cuda",
    "01_dequant_gemv": "mini", "02_segmented_decay_scan": "mini", "03_topp_mask": "mini",
    "04_flash_attention": "mini",
    "02_kimi_linear_decode": "mega", "01_rl_grid_ppo": "mega",
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


# Problems whose benchmark flushes L2 between timed calls (cuda_events_l2_flush: the decks'
# time_variant writes 128 MiB before each call).  The decode/rollout problems time a wall-clock
# loop with no flush, so an L2 residency hint there cannot defeat a flush.
L2_FLUSHED = frozenset({"01_fp8_gemm", "02_kda_cutlass", "03_paged_attention", "05_topk_bitonic",
                        "06_sonic_moe_swiglu", "07_w4a16_gemm", "01_glm52_fused_moe", "02_deepseek_nsa"})
L2_UNFLUSHED = frozenset({"03_megaqwen_decode", "04_grid_mingru_sps", "02_kimi_linear_decode", "01_rl_grid_ppo"})


def l2_flushed(problem: str | None) -> bool | None:
    """True / False when the problem's timing is known to flush L2 or not; None when unknown."""
    if problem in L2_FLUSHED:
        return True
    if problem in L2_UNFLUSHED:
        return False
    return None


# Problems whose deck check hands an entry point state or caches the solution did not make (the Kimi
# check feeds `reference.init_state(...)` to `step(hidden, state)` and compares the updated state).  In
# the other stateful decks the caches an entry receives are the solution's own (megaqwen's benchmark
# feeds decode_steps what the solution's prefill returned; its check calls run() only): an entry that
# ignores them is within the contract as graded (ARG-IGNORED low there).
CALLER_STATE_CHECKED = frozenset({"02_kimi_linear_decode"})


def caller_state_checked(problem: str | None) -> bool | None:
    """Does the deck's check pass an entry point state the solution did not make?  None: unknown problem."""
    if not problem or problem not in PROBLEM_BENCH:
        return None
    return problem in CALLER_STATE_CHECKED


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
    if not problem:
        return None
    return PROBLEM_BENCH.get(problem)


@lru_cache(maxsize=1)
def deck_hashes() -> dict:
    with resources.files("forensics.data").joinpath("deck-hashes.json").open("rb") as fh:
        return json.load(fh)


def problem_from_text(name: str) -> str | None:
    """Find a known problem name inside a run id or path."""
    for p in sorted(PROBLEM_BENCH, key=len, reverse=True):
        if p in name:
            return p
    return None


@dataclass(frozen=True)
class ForbiddenTarget:
    literal: str           # the grader's substring
    kind: str              # 'qualname' | 'method' | 'import' | 'name' | 'module'
    value: str             # dotted name / method name / module


def forbidden_targets(problem: str | None) -> list[ForbiddenTarget]:
    out: list[ForbiddenTarget] = []
    for lit in FORBIDDEN.get(problem or "", ()):
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
