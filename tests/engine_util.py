"""Helpers of the engine tests: small archives cut from the fixture.  (The table-by-table store
comparison is forensics.engine.compare.)"""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURE_RUNS = Path(__file__).resolve().parent.parent / "corpus" / "fixtures" / "archive" / "outputs"

# Three runs the CPU replays in seconds (tiny shapes): top-k, W4A16, and a top-k run without a solution.
REPLAY_RUNS = ("runs/20260731_140000_claude_claude-opus-4-8_05_topk_bitonic",
               "runs/20260801_090000_claude_claude-opus-4-8_07_w4a16_gemm",
               "runs/20260726_204744_minimax-claude_minimax-m2.7_05_topk_bitonic")
# Six runs of several harnesses and formats for the failure tests.
SIX_RUNS = ("runs/20260424_090742_codex_gpt-5.4_01_fp8_gemm",
            "runs/20260427_135646_claude_claude-opus-4-6_03_paged_attention",
            "runs/20260701_101000_droid_glm-5.1_06_sonic_moe_swiglu",
            "runs/20260702_113200_kimi_kimi-k3_03_paged_attention",
            "runs/20260726_120000_grok_grok-build-2_07_w4a16_gemm",
            "runs-h100/20260805_101000_kinetic-claude_kinetic-0715_1m__05_topk_bitonic")


def cut_archive(dest: Path, runs: tuple[str, ...]) -> Path:
    """An archive of some fixture runs (copied: the fixture itself is never scanned in place here)."""
    for r in runs:
        shutil.copytree(FIXTURE_RUNS / r, dest / "outputs" / r, symlinks=True)
    return dest
