"""`forensics corpus ...`: generate synthetic archives and the committed labeled fixture."""

from __future__ import annotations

import time
from pathlib import Path

import click
import orjson


def _tree_bytes(root: Path) -> tuple[int, int]:
    n = size = 0
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            n += 1
            size += p.stat().st_size
    return n, size


@click.group("corpus")
def corpus_cmd() -> None:
    """Generate realistic synthetic run archives (spec archive-format.md section 12) with labels."""


@corpus_cmd.command("generate")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--runs", "-n", default=40, show_default=True, help="Number of runs.")
@click.option("--seed", "-s", default=0, show_default=True, help="Seed; same args give a byte-identical tree.")
@click.option("--scale", default=1.0, show_default=True, help="Multiplies tool calls and progress noise per run.")
@click.option("--tiny", is_flag=True, help="Small runs (10-40 kB: prompt read, solution written, check, benchmark) "
              "with distinct valid run ids, for scaling measurements (devkit/generator/tiny.py).")
@click.option("--progress/--no-progress", default=False, help="Show a progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def generate_cmd(out: str, runs: int, seed: int, scale: float, tiny: bool, progress: bool, as_json: bool) -> None:
    """Write OUT/outputs/runs*/<run_id>/... and OUT/labels.json."""
    t0 = time.perf_counter()
    if tiny:
        from .tiny import generate_tiny
        n_runs = generate_tiny(out, runs, seed, progress_bar=progress)["runs"]
    else:
        from .generate import generate
        n_runs = len(generate(out, runs, seed, scale, progress_bar=progress)["runs"])
    dt = time.perf_counter() - t0
    n, size = _tree_bytes(Path(out))
    summary = {"out": str(out), "runs": n_runs, "files": n, "bytes": size, "seconds": round(dt, 3),
               "mb_per_s": round(size / 1e6 / dt, 1) if dt else None}
    if as_json:
        click.echo(orjson.dumps(summary).decode())
    else:
        click.echo(f"wrote {summary['runs']} runs, {n} files, {size / 1e6:.1f} MB in {dt:.2f}s "
                   f"({summary['mb_per_s']} MB/s) -> {out}")


@corpus_cmd.command("fixture")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def fixture_cmd(out: str, as_json: bool) -> None:
    """Write the labeled fixture archive: OUT/outputs/... and OUT/labels.json (corpus/fixtures is this output)."""
    from .fixture import build_fixture

    doc = build_fixture(out)
    n, size = _tree_bytes(Path(out))
    summary = {"out": str(out), "runs": len(doc["runs"]), "files": n, "bytes": size,
               "scenarios": sorted({r["scenario"] for r in doc["runs"].values()})}
    if as_json:
        click.echo(orjson.dumps(summary).decode())
    else:
        click.echo(f"wrote fixture: {summary['runs']} runs, {n} files, {size / 1e6:.2f} MB -> {out}")


@corpus_cmd.command("validate")
@click.argument("labels", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def validate_cmd(labels: str, as_json: bool) -> None:
    """Check a labels.json against the schema in devkit/generator/labels.py."""
    from .labels import load, validate

    errs = validate(load(labels))
    if as_json:
        click.echo(orjson.dumps({"errors": errs}).decode())
    else:
        click.echo("\n".join(errs) if errs else "ok")
    raise SystemExit(1 if errs else 0)
