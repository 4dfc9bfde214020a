"""What the commands share: exit codes, the one-line usage error, colour and progress on a terminal.

The conventions (docs/cli.md):

* exit 0: done; 1: the command ran and found what it is asked to fail on (`lint` findings at or
  above `--fail-on`, `scan --strict` flagged runs, a replay's high finding); 2: usage or input
  error (click's own usage errors too), one line `Error: ...` on stderr, never a traceback;
* results on stdout, progress and warnings on stderr;
* colour only on a terminal and never with NO_COLOR set; progress bars only on a terminal.

Imports click and the standard library only: every layer may use it.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

import click

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class InputError(click.ClickException):
    """Bad input or a usage error found by the command itself: click prints `Error: MESSAGE` on
    stderr and the process exits 2, as for click's own usage errors."""
    exit_code = EXIT_USAGE


def os_error_text(e: OSError) -> str:
    """`Read-only file system: /mnt/ro/report` rather than `[Errno 30] ...`."""
    what = e.strerror or str(e) or type(e).__name__
    names = [str(n) for n in (e.filename, e.filename2) if n is not None]
    return f"{what}: {' -> '.join(names)}" if names else what


def one_line(text: str) -> str:
    """A message of several lines (a library's bulleted list) as one: `first rest1; rest2`."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    return lines[0] + " " + "; ".join(ln.lstrip("-* ").strip() for ln in lines[1:])


def check_writable_dir(path: str | os.PathLike, what: str) -> None:
    """Create `path` if needed and write and remove a probe file in it, so that a folder the command
    cannot write is a usage error before any work (InputError naming `what`, e.g. '--out')."""
    import tempfile
    from pathlib import Path
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p, prefix=".forensics-probe-"):
            pass
    except OSError as e:
        raise InputError(f"cannot write {what} {path}: {os_error_text(e)}") from e


def colour(stream: IO[Any] | None = None) -> bool:
    """Whether to colour what goes to `stream` (default stdout): a terminal, and NO_COLOR unset or
    empty (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    s = sys.stdout if stream is None else stream
    try:
        return bool(s.isatty())
    except (AttributeError, ValueError, OSError):
        return False


SEVERITY_STYLE: dict[str, dict[str, Any]] = {
    "critical": {"fg": "red", "bold": True}, "high": {"fg": "red"}, "medium": {"fg": "yellow"},
    "low": {"fg": "cyan"}, "info": {"dim": True}}


def style(text: str, how: dict[str, Any] | None, on: bool) -> str:
    """`text` styled `how` when `on` (see colour()), else unchanged."""
    return click.style(text, **how) if on and how else text


def progress_on(requested: bool, stream: IO[Any] | None = None) -> bool:
    """Progress bars when asked for and stderr (or `stream`) is a terminal: no `\\r` frames in a log."""
    s = sys.stderr if stream is None else stream
    try:
        return requested and bool(s.isatty())
    except (AttributeError, ValueError, OSError):
        return False


__all__ = ["EXIT_FINDINGS", "EXIT_OK", "EXIT_USAGE", "InputError", "SEVERITY_STYLE", "check_writable_dir",
           "colour", "one_line", "os_error_text", "progress_on", "style"]
