"""What the capability tests read from `lint_source`: the worst severity each rule reached, over the
findings a reader acts on (medium and above; the language and deck-tripwire notes left out)."""

from __future__ import annotations

from forensics.analyze.static import lint_source
from forensics.vocab import SEVERITIES

ORDER = list(SEVERITIES)


def worst_rules(src: str, problem: str = "01_fp8_gemm") -> dict[str, str]:
    """rule -> worst severity of its medium-and-above findings on `src`."""
    out: dict[str, str] = {}
    for h in lint_source(src, problem=problem).hits:
        if h.severity in ("medium", "high", "critical") and h.rule not in ("LANGUAGE", "FORBIDDEN-TRIPWIRE"):
            if h.rule not in out or ORDER.index(h.severity) > ORDER.index(out[h.rule]):
                out[h.rule] = h.severity
    return out


def deciding_rules(src: str, prefixes: tuple[str, ...]) -> dict[str, str]:
    """`worst_rules` limited to the rules whose id starts with one of `prefixes`."""
    return {r: s for r, s in worst_rules(src).items() if r.startswith(prefixes)}
