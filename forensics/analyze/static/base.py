"""Shared small types: a raw hit before it becomes a store Finding, and the file-access protocol."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import rules as R


@dataclass
class Hit:
    rule: str
    line_start: int | None
    line_end: int | None
    message: str
    file: str = "solution.py"
    severity: str | None = None
    probe: str | None = "__default__"
    quote: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    extra_evidence: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        rule = R.RULES[self.rule]  # KeyError for an unknown id: by design
        if self.severity is None:
            self.severity = rule.severity
        if self.probe == "__default__":
            self.probe = rule.probe

    @property
    def analyzer(self) -> str:
        return R.RULES[self.rule].analyzer

    @property
    def category(self) -> str:
        return R.RULES[self.rule].category

    def to_dict(self) -> dict[str, Any]:
        d = {"rule": self.rule, "analyzer": self.analyzer, "category": self.category,
             "severity": self.severity, "file": self.file, "line_start": self.line_start,
             "line_end": self.line_end, "message": self.message}
        if self.probe:
            d["probe"] = self.probe
        if self.quote:
            d["quote"] = self.quote
        if self.data:
            d["data"] = self.data
        if self.extra_evidence:
            d["extra_evidence"] = self.extra_evidence
        return d


class FileAccess(Protocol):
    """The read-only subset of forensics.archive.RunFiles that the static analyzer uses."""

    def exists(self, rel: str) -> bool: ...
    def read_bytes(self, rel: str) -> bytes | None: ...
    def read_text(self, rel: str) -> str | None: ...
    def list(self, prefix: str = "") -> list[str]: ...


class DirFiles:
    """FileAccess over a plain run directory.  Opens files read-only; never follows symlinks out."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).resolve()

    def _path(self, rel: str) -> Path | None:
        p = (self.root / rel)
        try:
            rp = p.resolve()
        except OSError:
            return None
        if rp != self.root and self.root not in rp.parents:
            return None  # a symlink pointing outside the run: not evidence of this run
        return p

    def exists(self, rel: str) -> bool:
        p = self._path(rel)
        return bool(p and p.is_file())  # files only, like RunFiles

    def read_bytes(self, rel: str) -> bytes | None:
        """The file's bytes; None when it cannot be read or is over its limit (forensics.limits)."""
        p = self._path(rel)
        if p is None or not p.is_file():
            return None
        from forensics.limits import read_limit
        cap = read_limit(rel).value()
        try:
            with open(p, "rb") as fh:
                data = fh.read(cap + 1)
        except OSError:
            return None
        return None if len(data) > cap else data

    def read_text(self, rel: str) -> str | None:
        b = self.read_bytes(rel)
        return None if b is None else b.decode("utf-8", errors="replace")

    def list(self, prefix: str = "") -> list[str]:
        base = self._path(prefix) if prefix else self.root
        if base is None or not base.is_dir():
            return []
        out = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            # build caches and venvs are not solution evidence
            dirnames[:] = [d for d in dirnames if d not in (".venv", "__pycache__", "cache", "tmp", "node_modules")]
            for fn in filenames:
                full = Path(dirpath) / fn
                out.append(full.relative_to(self.root).as_posix())
        return sorted(out)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def quote_lines(lines: list[str], start: int | None, end: int | None, limit: int = 160) -> str | None:
    if not start or start < 1 or start > len(lines):
        return None
    end = min(end or start, start + 2, len(lines))
    q = " | ".join(l.strip() for l in lines[start - 1:end])
    return q[:limit]
