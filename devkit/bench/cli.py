"""`forensics bench ...`: every benchmark reports ratios against a baseline measured in the same run."""

from __future__ import annotations

import click

from forensics.cli import LazyGroup

# benchmark name -> ("module:attribute" of a click.Command, one-line help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "ingest": ("devkit.bench.ingest:bench_ingest", "End-to-end ingest vs bare orjson parse and DuckDB read_json."),
    "similarity": ("devkit.bench.similarity:bench_similarity", "MinHash/LSH all-pairs vs exact brute force at 1k/10k/100k."),
    "timeline": ("devkit.bench.timeline:bench_timeline", "Timeline rebuild of a 50k-record transcript vs bare parse."),
    "lint": ("devkit.bench.lint:bench_lint", "Lint 10k solutions vs bare read + ast.parse."),
    "scan": ("devkit.bench.scan:bench_scan", "Scan (no replay) of a 1,000-run archive vs ingest only."),
    "real": ("devkit.bench.real:bench_real", "Verdicts on real audited solutions vs the auditors' labels and the deck tripwire."),
    "transplant": ("devkit.bench.transplant:bench_transplant",
                   "Hack mechanisms and look-alikes transplanted into real clean solutions: do the rules still fire?"),
    "pasted": ("devkit.bench.pasted:bench_pasted",
               "Pasted library source: clean solutions' margin below the threshold, and the cost beside ast.parse."),
    "metamorphic": ("devkit.bench.metamorphic:bench_metamorphic",
                    "Mechanisms and look-alikes rewritten in forms that keep their meaning: does the decision change?"),
    "fuzz": ("devkit.bench.fuzz:bench_fuzz", "Mutate every field of every transcript format; ingest+scan lose nothing."),
    "bombs": ("devkit.bench.bombs:bench_bombs", "Resource bombs beside ordinary runs: peak memory and time of the scan."),
    "kernels": ("devkit.bench.kernels:bench_kernels", "Triton references vs the best library op (GPU)."),
    "replay-overhead": ("devkit.bench.replay_overhead:bench_replay_overhead",
                        "A replay's overhead with the reference shared between probes vs without (same run)."),
}


@click.group("bench", cls=LazyGroup, registry=BENCHMARKS, section="Benchmarks")
def bench_cmd() -> None:
    """Benchmarks, each reported beside a baseline measured in the same run."""
