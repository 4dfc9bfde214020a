"""Transcript parsers: every harness format of spec/archive-format.md §5, normalized into the
events of ``forensics.transcripts.events``.

    from forensics.transcripts import parse_source, detect_format
    for ev in parse_source(binary_stream, source="transcript.jsonl", harness="claude", fmt=None):
        ...  # Record | ToolCall | ToolResult | ParseError, then exactly one SessionEnd, last

With ``heartbeat_runs=True`` consecutive Claude heartbeat lines come as one ``HeartbeatRun``
each instead of one ``Heartbeat`` (a Record) per line.

See docs/transcripts.md.
"""

from .parse import parse_source
from .sniff import FORMATS, detect_format

__all__ = ["parse_source", "detect_format", "FORMATS"]
