"""The findings contract shared by every analyzer.

An analyzer is a function from the store (and the archive, read-only) to `Finding`s.  Analyzers
never call each other: they read tables and write rows.  `write_findings` replaces one
analyzer's findings for the given runs atomically, so re-running is idempotent.

Every finding cites evidence: at least one `Evidence` pointer with a file and line range, a
transcript line, a tool-call number or a hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

SEVERITIES = ("info", "low", "medium", "high", "critical")
#: the one ordering of severities: info 0 ... critical 4
SEV_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def severity_key(severity: str | None) -> int:
    """Sort key, most severe first (critical 0 ... info 4); an unknown severity last (9)."""
    r = SEV_RANK.get(severity or "")
    return 9 if r is None else len(SEVERITIES) - 1 - r


CATEGORIES = ("contamination", "reward_hack", "correctness", "measurement", "integrity",
              "provenance", "portability", "info")


def norm_probe(p: str | None) -> str:
    """A probe's one name, whoever spelled it (a static rule's prose, an auditor's log, the replay)."""
    p = (p or "").strip().lower().replace("_", "-").replace(" ", "-")
    aliases = {"same-buffer-overwrite": "same-buffer", "unsampled-row-mutation": "unsampled-region",
               "unsampled-region-mutation": "unsampled-region", "fresh-state-object": "fresh-state",
               "alternate-caller-caches": "alternate-cache", "alternate-caches": "alternate-cache",
               "alternate-cache-probe": "alternate-cache", "l2-persistence-reset-timing": "timing-l2-reset",
               "unsampled-row": "unsampled-region", "same-buffer-probe": "same-buffer", "fresh-state-probe": "fresh-state",
               "cache-contract": "alternate-cache", "fresh-input-pointers": "fresh-inputs",
               "timed-call-outputs": "timed-calls", "timed-outputs": "timed-calls", "kernel-trace": "kernel-name-trace"}
    return aliases.get(p, p)


# A rule is data: every rule id any analyzer emits is one (forensics.analyze.catalogue lists them).
@dataclass(frozen=True)
class Rule:
    id: str
    analyzer: str            # who emits it: static, integrity, provenance, similarity, timeline, replay, pipeline
    category: str
    severity: str            # default severity
    title: str
    rationale: str
    evidence: str            # what a finding cites
    probe: str | None = None # empirical probe required when static reading cannot decide
    source: str = "ast"      # static: ast | cuda | regex | files | gate; the others: the module that emits it

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Evidence:
    """A pointer to the exact place a finding came from."""

    file: str | None = None            # relative to the run dir (solution.py, transcript.jsonl, check.log...)
    line_start: int | None = None
    line_end: int | None = None
    transcript_line: int | None = None
    call_seq: int | None = None
    sha256: str | None = None
    quote: str | None = None           # verbatim excerpt (kept short)
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Finding:
    run_id: str
    analyzer: str
    rule: str
    severity: str
    message: str
    category: str = "info"
    evidence: list[Evidence] = field(default_factory=list)
    probe: str | None = None
    data: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"bad severity {self.severity!r}")
        if self.category not in CATEGORIES:
            raise ValueError(f"bad category {self.category!r}")

    @property
    def finding_id(self) -> str:
        h = hashlib.sha256(orjson.dumps([e.to_dict() for e in self.evidence], option=orjson.OPT_SORT_KEYS)
                           + self.message.encode()).hexdigest()[:12]
        return f"{self.analyzer}:{self.rule}:{h}"

    def to_row(self) -> dict[str, Any]:
        first = self.evidence[0] if self.evidence else Evidence()
        return {
            "run_id": self.run_id,
            "finding_id": self.finding_id,
            "analyzer": self.analyzer,
            "rule": self.rule,
            "category": self.category,
            "severity": self.severity,
            "message": self.message,
            "evidence": [e.to_dict() for e in self.evidence],
            "file": first.file,
            "line_start": first.line_start,
            "line_end": first.line_end,
            "transcript_line": first.transcript_line,
            "call_seq": first.call_seq,
            "probe": self.probe,
            "data": self.data,
        }


def write_findings(store, analyzer: str, run_ids: Sequence[str], findings: Iterable[Finding]) -> int:
    """Replace `analyzer`'s findings for `run_ids` with `findings` in one transaction."""
    rows: dict[str, dict[str, Any]] = {}
    for f in findings:
        if f.analyzer != analyzer:
            raise ValueError(f"finding from {f.analyzer} written as {analyzer}")
        row = f.to_row()
        rows[(row["run_id"], row["finding_id"])] = row  # identical evidence+message => one row
    with store.transaction():
        for rid in run_ids:
            store.con.execute("DELETE FROM findings WHERE run_id = ? AND analyzer = ?", [rid, analyzer])
        store.insert_rows("findings", rows.values())
    return len(rows)
