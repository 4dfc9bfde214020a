"""Helpers of the engine tests: small archives cut from the fixture, and a table-by-table store
comparison that leaves out only the columns that record when or how fast something ran."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from forensics.store import schema as S

FIXTURE_RUNS = Path(__file__).resolve().parent.parent / "corpus" / "fixtures" / "archive" / "outputs"

# when a row was written, and what a replay measured (the clock, not the verdict)
TIMING_COLUMNS = {("archives", "ingested_at"), ("runs", "ingested_at"), ("verdicts", "adjudicated_at"),
                  ("replay_results", "ran_at"), ("replay_results", "ms"), ("replay_results", "tflops"),
                  ("replay_results", "gbps"), ("replay_results", "data")}

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


def table_rows(db: str | Path, table: str, where: str = "") -> list[tuple]:
    t = S.TABLE_BY_NAME[table]
    cols = ", ".join(f'"{c}"' for c in t.column_names() if (table, c) not in TIMING_COLUMNS)
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(f"select {cols} from {table} {where} order by all").fetchall()
    finally:
        con.close()


def diff_stores(a: str | Path, b: str | Path, where: str = "", tables=None) -> dict[str, tuple[int, int]]:
    """Tables (all, or `tables`) whose rows differ, timing columns left out: name -> (rows in a,
    rows in b).  `where` filters the tables that have a run_id."""
    out = {}
    for t in S.TABLES:
        if tables is not None and t.name not in tables:
            continue
        w = where if (where and "run_id" in t.column_names()) else ""
        ra, rb = table_rows(a, t.name, w), table_rows(b, t.name, w)
        if ra != rb:
            out[t.name] = (len(ra), len(rb))
    return out


def count_rows(db: str | Path) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return sum(con.execute(f"select count(*) from {t.name}").fetchone()[0] for t in S.TABLES)
    finally:
        con.close()
