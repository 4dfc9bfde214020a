"""Every rule id the tool emits, in one place: the static and integrity rules (`static/rules.py`,
with their rationale and settling probe), the replay's (`replay/rules.py`, where the replay takes
each finding's severity from) and, here, those of provenance, similarity, timeline and the
pipeline.  `forensics rules` lists them all; a test reads the source of every
analyzer and fails on an emitted id that is not catalogued, on a catalogued id nothing emits, and
on a rule id the verdict names that is not catalogued.

An id resolves to its code in two hops: this catalogue gives its `source` module, the module emits
it.  Severity here is the default; an analyzer may raise or lower a finding's severity (a read of a
same-problem run is worse than one of another problem), never use an id missing from this table.
"""

from __future__ import annotations

import sys

import click
import orjson

from forensics.analyze.findings import Rule
from forensics.analyze.static.rules import all_rules as static_rules
from forensics.replay.rules import REPLAY_RULES

_R = Rule
OTHER_RULES: tuple[Rule, ...] = (
    # ------------------------------------------------------------------- provenance
    _R("foreign-read", "provenance", "contamination", "high", "Deliberate read of another run's artifact",
       "A tool call opened another run's solution, result or log (not a listing, not the harness's own "
       "files). High for a same-problem run, lower for another problem.",
       "the tool call (number, transcript line), the path and the other run", source="analyze/provenance.py"),
    _R("foreign-copy", "provenance", "contamination", "high", "Text of another run reappears in this run's files",
       "Aligned token spans of a foreign file read earlier reappear in what this run wrote.",
       "the read, the write and the shared spans", source="analyze/provenance.py"),
    _R("foreign-exposure", "provenance", "contamination", "info", "Another run's id seen without a read",
       "A listing, an error message or a harness path named another run; exposure alone does not "
       "contaminate.", "the tool result lines that named it", source="analyze/provenance.py"),
    _R("stream-foreign-mention", "provenance", "contamination", "medium",
       "The token stream names another run", "The agent's own text names other runs or archive paths "
       "(transcripts without tool calls: the stream is all there is).", "transcript lines",
       source="analyze/provenance.py"),
    _R("stream-foreign-score", "provenance", "contamination", "medium",
       "The token stream quotes another run's archived score", "A peak_fraction equal to an earlier "
       "same-problem run's archived score appears in the stream.", "the transcript line and the other run",
       source="analyze/provenance.py"),
    _R("contamination-unverifiable", "provenance", "contamination", "info",
       "No tool calls and no token stream", "Foreign-run access cannot be established either way: "
       "contamination is unknown, not clean (CT3).", "the transcript file", source="analyze/provenance.py"),
    # ------------------------------------------------------------------- similarity
    _R("similar-solution", "similarity", "contamination", "low", "Solution similar to another run's",
       "Shingle Jaccard / containment at or above the finding score against another run of the same "
       "problem, after discounting template and common code.", "aligned spans in both files",
       source="analyze/similarity.py"),
    _R("contamination-chain", "similarity", "contamination", "high",
       "Similar to a run this run deliberately read", "A similar pair joined with provenance's read of "
       "the other run: the copy has a source in the transcript.", "the read and the shared spans",
       source="analyze/similarity.py"),
    # ------------------------------------------------------------------- timeline
    _R("final-version", "timeline", "provenance", "info", "Which rebuilt version the archived file is",
       "The archived solution.py matched one of the versions rebuilt from the transcript's edits.",
       "the write's tool call and the sha256", source="analyze/timeline/core.py"),
    _R("final-matches-no-version", "timeline", "provenance", "medium",
       "The archived solution matches no rebuilt version", "Written outside the transcript's tool "
       "calls, or a version could not be rebuilt exactly (then low).", "the sha256 and the versions",
       source="analyze/timeline/core.py"),
    _R("final-version-passed", "timeline", "correctness", "info", "The last PASS ran on the final version",
       "The last in-session PASS of check.py ran on the archived version.", "the check run's tool call",
       source="analyze/timeline/core.py"),
    _R("superseded-pass", "timeline", "provenance", "medium", "The last PASS ran on an older version",
       "The archived file was edited after the last PASS: that PASS belongs to an older version.",
       "the PASS and the later edits", source="analyze/timeline/core.py"),
    _R("edits-after-last-pass", "timeline", "provenance", "low", "Edits after the last PASS",
       "solution.py was edited after the last in-session PASS.", "the first and last such edit",
       source="analyze/timeline/core.py"),
    _R("final-never-checked", "timeline", "correctness", "medium", "The final version was never checked",
       "No check.py run in the session ran on the archived version.", "the write of that version",
       source="analyze/timeline/core.py"),
    _R("stress-disabled", "timeline", "integrity", "high", "A check run with the stress cases weakened",
       "check.py run with KBH_* settings that switch off or weaken the numeric stress cases.",
       "the command and its environment", source="analyze/timeline/core.py"),
    _R("post-session-grade-tied", "timeline", "provenance", "info", "The post-session grade is of the final version",
       "The archived check.log grade was taken on the last in-session version.", "check.log and the version",
       source="analyze/timeline/core.py"),
    _R("post-session-grade-untied", "timeline", "provenance", "medium",
       "The post-session grade cannot be tied to a version", "The archived grade's file differs from every "
       "version the session wrote, or a version could not be rebuilt (then low).", "check.log and why",
       source="analyze/timeline/core.py"),
    _R("score-trajectory", "timeline", "measurement", "info", "In-session benchmark results over versions",
       "The peak fractions the session measured, first, best and last, by version.", "the benchmark runs",
       source="analyze/timeline/core.py"),
    _R("timeline-unavailable", "timeline", "provenance", "info", "No tool calls to place versions in time",
       "The transcript has no tool calls: no version, check run or PASS can be placed.", "the transcript",
       source="analyze/timeline/core.py"),
    _R("transcript-format-unknown", "timeline", "provenance", "medium", "The transcript matches no known format",
       "Its tool calls cannot be read, or only those in the model APIs' own shapes (recovered, with nothing "
       "saying they are all): the session cannot be audited from it.",
       "the file and the format evidence", source="analyze/timeline/core.py"),
    _R("session-cut-off", "timeline", "provenance", "medium", "The session has no terminal record",
       "The transcript ends without its harness's terminal record.", "the last line",
       source="analyze/timeline/core.py"),
    _R("session-ended-api-error", "timeline", "provenance", "medium", "The session ended on a provider error",
       "The last record is an API error of the model provider.", "the error's line",
       source="analyze/timeline/core.py"),
    # ------------------------------------------------------------------- pipeline
    _R("analysis-coverage", "pipeline", "integrity", "info", "Which analyzers ran on the run",
       "An analyzer that failed (or whose required analyzer failed) makes the fields it decides "
       "unknown (then high).", "the analyzers and the reasons", source="verdict.py"),
    _R("input-over-limit", "pipeline", "integrity", "high", "A file of the run was over a per-file limit",
       "A cap of forensics/limits.py kept the file from being read whole (a 1 GiB solution.py, a "
       "transcript past MAX_RECORDS, a sparse sidecar): the verdict fields that rest on it are unknown "
       "(K1); info when no field does.", "the file, its size, the limit and its variable (the ingest's "
       "over_limit parse_errors row)", source="verdict.py"),
)


def all_rules() -> tuple[Rule, ...]:
    """The static catalogue first, then the replay's (forensics/replay/rules.py), then the others."""
    return static_rules() + REPLAY_RULES + OTHER_RULES


def by_id() -> dict[str, Rule]:
    return {r.id: r for r in all_rules()}


@click.command("rules")
@click.option("--analyzer", default=None, help="Only this analyzer's rules (static, integrity, provenance, ...).")
@click.option("--json", "as_json", is_flag=True, help="Print the rules as JSON.")
def rules_cmd(analyzer: str | None, as_json: bool) -> None:
    """Every rule id the tool emits: id, analyzer, category, default severity, what it cites."""
    rules = [r for r in all_rules() if analyzer is None or r.analyzer == analyzer]
    if as_json:
        sys.stdout.buffer.write(orjson.dumps([r.to_dict() for r in rules], option=orjson.OPT_INDENT_2) + b"\n")
        return
    for r in rules:
        click.echo(f"{r.id:<28} {r.analyzer:<10} {r.category:<12} {r.severity:<8} {r.title}")
        click.echo(f"{'':<28} evidence: {r.evidence}")
        if r.probe:
            click.echo(f"{'':<28} probe: {r.probe}")
        click.echo(f"{'':<28} {r.rationale}")


__all__ = ["OTHER_RULES", "all_rules", "by_id", "rules_cmd"]
