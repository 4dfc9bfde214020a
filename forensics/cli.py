"""Command-line interface: a thin skin over the Python API.

Each command lives beside the code it drives and is imported lazily, so `forensics --help` is
fast and a missing optional dependency (torch for `replay`) only affects its own command.
Every command takes `--json` for scripts.

`forensics bench` and `forensics corpus` are developer commands: their modules are in devkit/,
beside forensics/ in a source checkout (installed there with `pip install -e ./devkit`), never in
the wheel.  This table names them as strings, the product's only mention of the devkit
(tests/test_layers.py); without it they say so in one line.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from forensics import __version__
from forensics.cliutil import InputError, os_error_text
from forensics.extras import DISTRIBUTION, OPTIONAL_EXTRAS, MissingExtra, missing_extra_message, require_extra  # noqa: F401


def _missing_extra_command(name: str, module: str) -> click.Command:
    """Stands in for a command whose module cannot be imported without an optional dependency:
    whatever the arguments (--help included), it prints which extra to install and exits 2."""
    def run(args: tuple[str, ...]) -> None:
        raise MissingExtra(missing_extra_message(name, module))
    return click.Command(name, callback=run, params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
                         add_help_option=False, help=f"(needs the '{OPTIONAL_EXTRAS[module]}' extra)",
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


class DevkitMissing(click.ClickException):
    """A developer command (its module in devkit/) on an install without the devkit: exit 2."""
    exit_code = 2


def _devkit_missing_command(name: str) -> click.Command:
    """Stands in for a developer command when devkit/ is not installed (a wheel): whatever the
    arguments (--help included), one line says where it is available, and exit 2."""
    def run(args: tuple[str, ...]) -> None:
        raise DevkitMissing(f"`forensics {name}` is a developer command, available from a source checkout of "
                            f"forensics (pip install -e ./devkit there); this installation has no devkit.")
    return click.Command(name, callback=run, params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
                         add_help_option=False, help="(developer command: a source checkout's devkit)",
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


# command name -> ("module:attribute" of a click.Command, one-line help shown by --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "scan": ("forensics.pipeline:scan_cmd", "Ingest, analyse, (replay), adjudicate and report an archive."),
    "ingest": ("forensics.store.ingest:ingest_cmd", "Ingest an archive into the DuckDB store."),
    "query": ("forensics.store.queries:query_cmd", "Run a named query (forensics/queries/*.sql; --list)."),
    "sql": ("forensics.store.queries:sql_cmd", "Run ad-hoc SQL over the store."),
    "schema": ("forensics.store.queries:schema_cmd", "Show the documented store schema."),
    "corpus": ("devkit.generator.cli:corpus_cmd", "Generate realistic synthetic archives (developer command)."),
    "bench": ("devkit.bench.cli:bench_cmd", "Benchmarks, each beside its baseline (developer command)."),
    "similar": ("forensics.analyze.similarity:similar_cmd", "Most similar solution pairs with aligned spans."),
    "timeline": ("forensics.analyze.timeline:timeline_cmd", "Versions of the solution and the checks that ran on each."),
    "lint": ("forensics.analyze.static.cli:lint_cmd", "Static audit of a solution or a run folder."),
    "rules": ("forensics.analyze.catalogue:rules_cmd", "Every rule id the tool emits (the catalogue)."),
    "replay": ("forensics.replay.cli:replay_cmd", "Replay a run's solution against the bundled reference (GPU)."),
    "kernels": ("forensics.replay.cli:kernels_cmd", "List and check the bundled reference kernels."),
}


class LazyGroup(click.Group):
    """A group whose commands are imported only when invoked.

    `registry` maps a command name to ("module:attribute" of a click.Command, one-line help);
    listing the commands (--help) shows the help texts without importing any of them (torch for
    replay, matplotlib for plots)."""

    def __init__(self, *args, registry: dict[str, tuple[str, str]], section: str = "Commands", **kwargs):
        super().__init__(*args, **kwargs)
        self.registry = registry
        self.section = section

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.registry)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = self.registry.get(name)
        if entry is None:
            return None
        mod, attr = entry[0].split(":")
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:   # light install: torch/triton absent -> say which extra, exit 2
            root = (e.name or "").split(".")[0]
            prefix = ctx.command_path.split(" ", 1)[1] + " " if " " in ctx.command_path else ""
            if root in OPTIONAL_EXTRAS:
                return _missing_extra_command(prefix + name, root)
            if root == "devkit" and mod.startswith("devkit."):   # a wheel: the devkit is a checkout's
                return _devkit_missing_command(prefix + name)
            raise
        return getattr(module, attr)

    def invoke(self, ctx: click.Context) -> Any:
        """A file a command could not read or write (a read-only file system, a missing folder, no
        permission) is one line, `Error: Read-only file system: PATH`, and exit 2, wherever it
        happened; a closed stdout (`| head`) is left to click."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise InputError(os_error_text(e)) from e

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section(self.section):
            formatter.write_dl([(name, self.registry[name][1]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, registry=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="forensics",   # not from the distribution's metadata:
                      message=f"%(prog)s %(version)s (distribution {DISTRIBUTION})")   # a plain checkout has none
def main() -> None:
    """Audit AI-agent GPU-kernel benchmark run archives, with cited evidence."""


if __name__ == "__main__":  # pragma: no cover
    main()
