"""Optional dependencies: which extra installs each, and the usage error a command gives without it.
Below every layer (the replay's commands check it), so the CLI module above them all is not imported."""

from __future__ import annotations

import importlib.util

import click

# The distribution's name on PyPI (pyproject [project] name; tests/test_wheel.py checks they agree).
# `forensics` there is an unrelated project, so every install command the tool prints names this one;
# the import package and the command stay `forensics`.
DISTRIBUTION = "kernel-forensics"

# Optional dependencies and the extra that installs them (pyproject [project.optional-dependencies]).
OPTIONAL_EXTRAS: dict[str, str] = {"torch": "replay", "triton": "replay"}


class MissingExtra(click.ClickException):
    """A command needs an optional dependency that is not installed: exit 2 (input/usage error)."""
    exit_code = 2


# PyTorch's own index of CPU-only wheels (torch ~190 MB, no nvidia-* wheels)
CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def install_command(extra: str) -> str:
    """The pip command that installs an extra of this distribution."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_extra_message(command: str, module: str) -> str:
    extra = OPTIONAL_EXTRAS.get(module, "replay")
    return (f"`forensics {command}` needs {module}, which is not installed. Install the '{extra}' extra "
            f"(torch and triton):\n    {install_command(extra)}\n"
            f"On a machine without a GPU install the CPU build of torch first (PyPI's Linux torch is the "
            f"~3 GB CUDA build):\n    {CPU_TORCH}\n(README, 'Set-up').")


def require_extra(command: str, *modules: str) -> None:
    """Raise MissingExtra (exit 2, the install command in the message) unless every module can be
    imported.  Checked with find_spec, so nothing heavy is imported here."""
    for m in modules:
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtra(missing_extra_message(command, m))


__all__ = ["DISTRIBUTION", "OPTIONAL_EXTRAS", "install_command", "MissingExtra", "missing_extra_message", "require_extra"]
