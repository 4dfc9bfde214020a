"""Run-id parsing (spec archive-format.md section 1.2).

    <YYYYMMDD>_<HHMMSS>_<harness>_<model_slug>_<problem>[_<shellpid>_<attempt>]

Harness slugs never contain '_'; model slugs do; problem names (NN_snake_name) do too, so the
problem is found by matching the known deck names, longest first, and only then by a generic
NN_name pattern.  Multi runs (`run_agent.sh`) use the same shape with '/' replaced by '-'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

# Every problem name the decks have had (spec archive-format 3.1, replay-contract B-E).
PROBLEM_BENCH: dict[str, str] = {
    # hard
    "01_fp8_gemm": "hard", "02_kda_cutlass": "hard", "03_paged_attention": "hard",
    "04_kahan_softmax": "hard", "05_topk_bitonic": "hard", "06_sonic_moe_swiglu": "hard",
    "07_w4a16_gemm": "hard", "08_metal_lightning_attn": "hard", "09_fmha_preattn_mrope": "hard",
    "10_patch_embed_conv3d_gemm": "hard",
    # cuda
    "01_glm52_fused_moe": "cuda", "02_deepseek_nsa": "cuda", "03_megaqwen_decode": "cuda",
    "04_grid_mingru_sps": "cuda",
    # mini
    "01_dequant_gemv": "mini", "02_segmented_decay_scan": "mini", "03_topp_mask": "mini",
    "04_flash_attention": "mini",
    # mega
    "01_rl_grid_ppo": "mega", "02_kimi_linear_decode": "mega",
    # multi
    "01_allreduce_residual": "multi", "07_gemm_allreduce_overlap": "multi",
    "08_ring_attention_cp": "multi", "09_moe_ep_dispatch_combine": "multi",
}
_KNOWN_BY_LEN = sorted(PROBLEM_BENCH, key=len, reverse=True)

_HEAD = re.compile(r"^(?P<date>\d{8})_(?P<time>\d{6})_(?P<harness>[^_]+)_(?P<rest>.+)$")
_SUFFIX = re.compile(r"^(?P<body>.+)_(?P<pid>\d+)_(?P<attempt>\d{1,3})$")
_GENERIC_PROBLEM = re.compile(r"_(\d\d_[a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)*)$")
RUN_ID_SHAPE = re.compile(r"\b(20\d{6}_\d{6}_[A-Za-z0-9.\-]+_[A-Za-z0-9_.\-\[\]]+?_\d\d_[a-z][a-z0-9_]*?)(?=[/\s'\"`:;,)]|$)")


@dataclass(frozen=True)
class RunId:
    raw: str
    timestamp: datetime
    harness: str
    model_slug: str
    problem: str | None
    collision_suffix: str | None
    bench: str | None

    @property
    def problem_known(self) -> bool:
        return self.problem in PROBLEM_BENCH


def _split_problem(rest: str) -> tuple[str, str | None]:
    """Split '<model_slug>_<problem>' into (model_slug, problem)."""
    for name in _KNOWN_BY_LEN:
        if rest.endswith("_" + name) and len(rest) > len(name) + 1:
            return rest[: -len(name) - 1], name
    m = _GENERIC_PROBLEM.search(rest)
    if m and m.start() > 0:
        # choose the earliest NN_ token so "model_1_5_01_foo" style slugs keep their digits
        return rest[: m.start()], m.group(1)
    return rest, None


def parse_run_id(name: str) -> RunId | None:
    """Parse a run directory name; None if it is not run-id shaped."""
    m = _HEAD.match(name)
    if not m:
        return None
    try:
        ts = datetime.strptime(m["date"] + m["time"], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    rest = m["rest"]
    model, problem = _split_problem(rest)
    suffix = None
    if problem is None:
        sm = _SUFFIX.match(rest)
        if sm:
            model2, problem2 = _split_problem(sm["body"])
            if problem2 is not None:
                model, problem, suffix = model2, problem2, f"{sm['pid']}_{sm['attempt']}"
    if problem is None:
        return RunId(name, ts, m["harness"], model, None, None, None)
    return RunId(name, ts, m["harness"], model, problem, suffix, PROBLEM_BENCH.get(problem))


def bench_of_problem(problem: str | None) -> str | None:
    return PROBLEM_BENCH.get(problem or "")


# --------------------------------------------------------------------------- per-run file names
_UNSAFE = re.compile(r"[^a-z0-9._@-]")   # what a file name keeps as is (lower case: case-folding file systems)
FILE_NAME_MAX = 150


def run_file_name(run_id: str) -> str:
    """The file-name stem of a run's per-run files (report page, annotation YAML, timeline plot).

    Injective over run ids, also on case-insensitive file systems: an id made only of
    ``[a-z0-9._@-]`` (not starting with '.', at most FILE_NAME_MAX characters) is its own name;
    any other id has its unsafe characters replaced by '_', is cut to FILE_NAME_MAX characters
    and gets ``~`` and 12 hex digits of the SHA-256 of the exact id appended - '~' never occurs in
    an unchanged name, so a changed name cannot equal an unchanged one, and two changed names differ
    by their hashes (``a‹b`` and ``a>b`` both fold to ``a_b`` but keep distinct names)."""
    import hashlib
    base = _UNSAFE.sub("_", run_id)
    if base.startswith("."):
        base = "_" + base[1:]
    if base == run_id and 0 < len(base) <= FILE_NAME_MAX:
        return base
    h = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{base[:FILE_NAME_MAX]}~{h}"
