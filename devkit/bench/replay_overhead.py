"""`forensics bench replay-overhead`: a replay's overhead with the reference shared between probes,
beside the same replays without it (`reuse=False`: every probe builds its own reference model and
computes its own outputs, the path before), measured in the same run.

Each case is a planted solution of corpus/replay/ replayed with the probes its kind has (tiny
shapes; on the CPU, TRITON_INTERPRET=1 where a case uses Triton), the two modes alternating
round by round so the machine's load falls on both alike.  Per case and mode: the median wall time
of the replay, its account (forensics/replay/account.py: the solution's share, the overhead, the
reference's own seconds) and the reference calls and models it computed and reused.  The ratios
are reuse / no-reuse.  On a GPU (`--device cuda`, `--shapes canonical`) the same command measures
the canonical shapes, where the reference's cost is large enough to matter."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import click

from devkit.paths import CORPUS_DIR

CORPUS = CORPUS_DIR / "replay"

#: name -> (problem, solution file, sidecars, probes (None: all), seeds)
CASES: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...] | None, tuple[int, ...]]] = {
    "topk": ("05_topk_bitonic", "topk_honest.py", (), None, (42, 123)),
    "fp8": ("01_fp8_gemm", "fp8_version_cache.py", (), None, (42, 123)),
    "kimi": ("02_kimi_linear_decode", "kimi_honest.py", ("kimi_core.py",),
             ("check", "state-drift", "same-buffer", "alternate-cache", "fresh-state"), (0, 1)),
    "mingru": ("04_grid_mingru_sps", "mingru_honest.py", ("mingru_core.py",), None, (0,)),
    "megaqwen": ("03_megaqwen_decode", "mq_honest.py", ("mq_core.py",), None, (42, 123)),
}


def run_case(name: str, reuse: bool, device: str, shapes: str, cache_root: Path) -> dict:
    from forensics.replay.api import replay_solution
    from forensics.replay.outcome import Limits
    problem, sol, side, probes, seeds = CASES[name]
    t0 = time.perf_counter()
    out = replay_solution(problem, (CORPUS / sol).read_bytes(), {s: (CORPUS / s).read_bytes() for s in side},
                          device=device, shapes=shapes, probes=list(probes) if probes else None, seeds=seeds,
                          limits=Limits(build_s=300, call_s=240, probe_s=600, time_s=120), cache_root=cache_root,
                          reuse=reuse)
    wall = time.perf_counter() - t0
    a = out.info.get("account") or {}
    c = a.get("counts") or {}
    return {"status": out.status(), "wall_s": wall, "total_s": a.get("total_s"), "overhead_s": a.get("overhead_s"),
            "solution_share_s": round(sum(a.get(k) or 0.0 for k in ("build_s", "construct_s", "solution_s")), 3),
            "reference_s": round((a.get("reference_s") or 0.0) + (a.get("reference_model_s") or 0.0), 3),
            "reference_computed": c.get("reference_computed", 0), "reference_reused": c.get("reference_reused", 0),
            "models_built": c.get("reference_model_built", 0), "models_reused": c.get("reference_model_reused", 0),
            "weights_drawn": c.get("reference_weights_drawn", 0), "weights_reused": c.get("reference_weights_reused", 0),
            "reference_model_s": a.get("reference_model_s") or 0.0,
            "rows": [(r["probe"], r["status"], r["case_name"]) for r in out.rows],
            "not_passed": [(r["probe"], r["status"], r["case_name"], (r.get("detail") or "")[:200]) for r in out.rows
                           if r["status"] not in ("pass", "skipped")]}


def _median(rows: list[dict], k: str) -> float:
    return round(statistics.median(float(r[k] or 0.0) for r in rows), 3)


@click.command("replay-overhead")
@click.option("--cases", "-c", multiple=True, type=click.Choice(sorted(CASES)), help="Default: all.")
@click.option("--rounds", type=int, default=3, show_default=True, help="Replays per case and mode (alternating).")
@click.option("--device", default="cpu", show_default=True, help="cpu, or cuda on a GPU machine.")
@click.option("--shapes", type=click.Choice(["tiny", "canonical"]), default="tiny", show_default=True,
              help="The CPU path's tiny shapes, or the deck's (a GPU).")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Also write the JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_replay_overhead(cases, rounds, device, shapes, out, as_json) -> None:
    """A replay's overhead and reference calls with the reference shared between probes vs without."""
    import tempfile
    res: dict = {"device": device, "shapes": shapes, "rounds": rounds, "cases": {}}
    with tempfile.TemporaryDirectory(prefix="bench-replay-overhead-") as tmp:
        for name in cases or sorted(CASES):
            runs: dict[str, list[dict]] = {"reuse": [], "no_reuse": []}
            for i in range(rounds):
                order = ("reuse", "no_reuse") if i % 2 == 0 else ("no_reuse", "reuse")
                for mode in order:
                    runs[mode].append(run_case(name, mode == "reuse", device, shapes, Path(tmp) / "cache"))
            same = all(r["rows"] == runs["no_reuse"][0]["rows"] for r in runs["reuse"] + runs["no_reuse"])
            entry: dict = {"same_rows": same,
                           "not_passed": {m: [r["not_passed"] for r in rs if r["not_passed"]] for m, rs in runs.items()}}
            for mode, rs in runs.items():
                entry[mode] = {"status": sorted({r["status"] for r in rs}),
                               **{k: _median(rs, k) for k in ("wall_s", "overhead_s", "solution_share_s", "reference_s",
                                                              "reference_model_s")},
                               **{k: rs[0][k] for k in ("reference_computed", "reference_reused", "models_built",
                                                        "models_reused", "weights_drawn", "weights_reused")}}
            a, b = entry["reuse"], entry["no_reuse"]
            entry["ratio"] = {k: (round(a[k] / b[k], 3) if b[k] else None)
                              for k in ("wall_s", "overhead_s", "reference_s", "reference_model_s", "reference_computed",
                                        "models_built")}
            res["cases"][name] = entry
    if out:
        out.write_text(json.dumps(res, indent=1))
    if as_json:
        click.echo(json.dumps(res, indent=1))
        return
    click.echo(f"replay overhead, {device}, {shapes} shapes, median of {rounds} per mode (reuse / no reuse)")
    click.echo(f"{'case':<8} {'wall s':>15} {'overhead s':>15} {'reference s':>15} {'ref computed':>13} "
               f"{'reused':>7} {'models':>9} {'same rows':>9}")
    for name, e in res["cases"].items():
        a, b = e["reuse"], e["no_reuse"]
        click.echo(f"{name:<8} {a['wall_s']:>7.2f}/{b['wall_s']:<7.2f} {a['overhead_s']:>7.2f}/{b['overhead_s']:<7.2f} "
                   f"{a['reference_s']:>7.3f}/{b['reference_s']:<7.3f} {a['reference_computed']:>6}/"
                   f"{b['reference_computed']:<6} {a['reference_reused']:>7} {a['models_built']:>4}/"
                   f"{b['models_built']:<4} {e['same_rows']!s:>9}")
        click.echo(f"{'':<8} ratio: wall {e['ratio']['wall_s']}, overhead {e['ratio']['overhead_s']}, reference "
                   f"{e['ratio']['reference_s']} (models {e['ratio']['reference_model_s']}), reference calls "
                   f"{e['ratio']['reference_computed']}, models {e['ratio']['models_built']}; seeded weights drawn "
                   f"{a['weights_drawn']}, reused {a['weights_reused']}")
