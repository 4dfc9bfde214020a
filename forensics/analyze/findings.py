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

# The severity order, the categories and the probe names are declared once, in forensics/vocab.py
# (below every layer: the replay uses them without the store's dependencies).
from forensics.vocab import CATEGORIES, SEV_RANK, SEVERITIES, norm_probe, severity_key  # noqa: F401 - re-exported


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
        import orjson  # here, not at import: the replay reads this module's Rule on a GPU machine without orjson
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
        # one statement for all the runs (one per run scanned the table once per run: quadratic in runs)
        store.con.execute("DELETE FROM findings WHERE analyzer = ? AND run_id IN (SELECT unnest(?::VARCHAR[]))",
                          [analyzer, list(run_ids)])
        store.insert_rows("findings", rows.values())
    return len(rows)
