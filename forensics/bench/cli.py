"""`forensics bench ...`: every benchmark reports ratios against a baseline measured in the same run."""

from __future__ import annotations

import importlib

import click

# benchmark name -> ("module:attribute" of a click.Command, one-line help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "ingest": ("forensics.bench.ingest:bench_ingest", "End-to-end ingest vs bare orjson parse and DuckDB read_json."),
    "similarity": ("forensics.bench.similarity:bench_similarity", "MinHash/LSH all-pairs vs exact brute force at 1k/10k/100k."),
    "timeline": ("forensics.bench.timeline:bench_timeline", "Timeline rebuild of a 50k-record transcript vs bare parse."),
    "lint": ("forensics.bench.lint:bench_lint", "Lint 10k solutions vs bare read + ast.parse."),
    "scan": ("forensics.bench.scan:bench_scan", "Scan (no replay) of a 1,000-run archive vs ingest only."),
    "kernels": ("forensics.bench.kernels:bench_kernels", "Triton references vs the best library op (GPU)."),
}


class _LazyBench(click.Group):
    def list_commands(self, ctx):
        return sorted(BENCHMARKS)

    def get_command(self, ctx, name):
        entry = BENCHMARKS.get(name)
        if entry is None:
            return None
        mod, attr = entry[0].split(":")
        return getattr(importlib.import_module(mod), attr)

    def format_commands(self, ctx, formatter):
        with formatter.section("Benchmarks"):
            formatter.write_dl([(n, BENCHMARKS[n][1]) for n in self.list_commands(ctx)])


@click.group("bench", cls=_LazyBench)
def bench_cmd() -> None:
    """Benchmarks, each reported beside a baseline measured in the same run."""
