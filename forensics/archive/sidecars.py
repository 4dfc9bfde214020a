"""Split a solution file that carries its sidecar sources appended after it.

The public KernelBench archive publishes each run's final ``solution.py`` with the files the run
kept in ``scratch/`` (raw CUDA/C++, a second Python module) appended below it, each announced by a
banner::

    # ==================================================================
    # ===== sidecar: NAME (N bytes, loaded by solution.py) =====
    # ==================================================================
    <blank line>
    <N bytes of NAME, verbatim>

The whole file is then no longer valid Python (the CUDA after the banner is not), so an analysis
that parses it must first split it back into the solution and its sidecars.  The byte count in the
banner is used when the bytes that follow agree with it (the next banner, or the end of the file,
comes right after); otherwise a sidecar runs to the next banner or to the end of the file.  Line
numbers are kept so that a finding in a sidecar can cite its line in the published file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULE = r"# =+[ \t]*\r?\n"
# the banner, with the rule lines around it when they are there
_BANNER = re.compile(
    r"(?m)^(?:" + _RULE + r")?"
    r"# ===== sidecar: (?P<name>[^\r\n]+?) \((?P<size>\d+) bytes(?:, [^)\r\n]*)?\) =====[ \t]*\r?\n"
    r"(?:" + _RULE + r")?(?:[ \t]*\r?\n)?")


@dataclass(frozen=True)
class Sidecar:
    name: str           # the file name the banner gives (a bare name, never a path)
    text: str
    first_line: int     # 1-based line of the published file where the sidecar's text starts
    declared_size: int  # the banner's byte count
    size_matches: bool  # whether the text's length (in UTF-8 bytes or in characters) equals it


@dataclass(frozen=True)
class Split:
    python: str                    # the solution proper (the text above the first banner)
    sidecars: tuple[Sidecar, ...]  # in file order

    @property
    def has_sidecars(self) -> bool:
        return bool(self.sidecars)


def _safe_name(name: str) -> str:
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return base if base not in ("", ".", "..") else "sidecar"


def first_banner(text: str) -> int | None:
    """Offset where the first sidecar banner (with its rule line) starts, or None."""
    m = _BANNER.search(text)
    return m.start() if m else None


def split_sidecars(text: str) -> Split:
    """Split `text` (a published solution file) into its Python part and appended sidecars.

    A file without a banner comes back whole as `python` with no sidecars."""
    banners = list(_BANNER.finditer(text))
    if not banners:
        return Split(text, ())
    python = text[: banners[0].start()].rstrip("\n") + "\n"
    out: list[Sidecar] = []
    for i, m in enumerate(banners):
        start = m.end()
        limit = banners[i + 1].start() if i + 1 < len(banners) else len(text)
        size = int(m.group("size"))
        body = text[start:limit]
        matches = False
        encoded = body.encode("utf-8", "surrogatepass")
        if len(encoded) >= size and not encoded[size:].strip():    # the count is of bytes
            body, matches = encoded[:size].decode("utf-8", "replace"), True
        elif len(body) >= size and not body[size:].strip():        # or of characters
            body, matches = body[:size], True
        out.append(Sidecar(name=_safe_name(m.group("name")), text=body,
                           first_line=text.count("\n", 0, start) + 1, declared_size=size,
                           size_matches=matches))
    return Split(python, tuple(out))
