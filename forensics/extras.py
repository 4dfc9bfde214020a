"""Optional dependencies: which extra installs each, and the usage error a command gives without it.
Below every layer (the replay's commands check it), so the CLI module above them all is not imported."""

from __future__ import annotations

import importlib.util

import click

# Optional dependencies and the extra that installs them (pyproject [project.optional-dependencies]).
OPTIONAL_EXTRAS: dict[str, str] = {"torch": "replay", "triton": "replay"}


class MissingExtra(click.ClickException):
    """A command needs an optional dependency that is not installed: exit 2 (input/usage error)."""
    exit_code = 2


def missing_extra_message(command: str, module: str) -> str:
    extra = OPTIONAL_EXTRAS.get(module, "replay")
    return (f"`forensics {command}` needs {module}, which is not installed. Install the '{extra}' extra "
            f"(torch and triton):\n    pip install 'forensics[{extra}]'\n"
            f"On a machine without a GPU use the CPU build of torch (README, 'Set-up').")


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


__all__ = ["OPTIONAL_EXTRAS", "MissingExtra", "missing_extra_message", "require_extra"]
