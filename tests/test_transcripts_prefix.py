"""A transcript whose first line is not JSON and whose second line is a JSON string was read as one
multi-line JSON document: 1 record of 20 kept, the format `unknown`.  Line-oriented reading wins
whenever most lines are JSON objects: with that two-line prefix, every transcript format keeps its
format, every record and every tool call, and the two prefix lines are a parse error and a kept text
line.  A JSON document spread over several lines is still read as one."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from forensics.transcripts import parse_source
from forensics.transcripts.events import ParseError, Record, SessionEnd, ToolCall

DATA = Path(__file__).parent / "data" / "transcripts"
JSONL = sorted([*DATA.glob("*.jsonl"), *(DATA / "current").glob("*.jsonl")])
PREFIXES = [b'{"unterminated": \n"a json string"\n', b'{not json\n"x"\n', b'[2026-08-01 nope\n"\\u00e9t\\u00e9"\n',
            b'{"cut": \n"looks_like_a_key": 1\n']


def parse(data: bytes, name: str):
    ev = list(parse_source(io.BytesIO(data), source=name))
    recs = {e.line: (e.rtype, e.subtype, e.role) for e in ev if isinstance(e, Record)}
    calls = [(c.line, c.tool, c.call_id) for c in ev if isinstance(c, ToolCall)]
    errs = {e.line: e.reason for e in ev if isinstance(e, ParseError) and e.line is not None}
    end = next(e for e in ev if isinstance(e, SessionEnd))
    return recs, calls, errs, end.format


def test_every_format_is_here():
    formats = {parse(p.read_bytes(), p.name)[3] for p in JSONL}
    assert {"claude", "claude_session", "codex", "codex_exec", "cursor", "droid", "gemini", "grok_stream", "grok_chat",
            "kimi", "kimi_wire", "opencode"} <= formats


@pytest.mark.parametrize("prefix", PREFIXES, ids=["object-cut", "not-json", "bracket", "key-line"])
@pytest.mark.parametrize("path", JSONL, ids=lambda p: p.name)
def test_two_line_prefix_keeps_every_record(path, prefix):
    data = path.read_bytes()
    recs, calls, _errs, fmt = parse(data, path.name)
    precs, pcalls, perrs, pfmt = parse(prefix + data, path.name)
    assert pfmt == fmt != "unknown"
    assert {ln - 2: r for ln, r in precs.items() if ln > 2} == recs
    assert [(ln - 2, *rest) for ln, *rest in pcalls] == calls
    for ln in (1, 2):                     # each prefix line is a record (kept text) or a parse error
        assert ln in precs or ln in perrs, (ln, precs.get(ln), perrs.get(ln))


@pytest.mark.parametrize("doc", [
    b'{\n  "sessionId": "s",\n  "messages": [\n    {"type": "user", "content": "hi"},\n    {"type": "gemini"}\n  ]\n}\n',
    b'{"sessionId": "s",\n"messages": [\n{"type": "user", "content": "hi"},\n{"type": "gemini", "content": "ok"}\n]}\n',
])
def test_a_multi_line_document_is_still_one_document(doc):
    ev = list(parse_source(io.BytesIO(doc), source="chat.json"))
    end = next(e for e in ev if isinstance(e, SessionEnd))
    assert end.format == "gemini_chat"
    assert not [e for e in ev if isinstance(e, ParseError) and e.reason in ("invalid_json", "truncated_line")]


@pytest.mark.parametrize("prefix", PREFIXES[:2])
def test_a_plain_text_transcript_stays_plain_text(prefix):
    data = (DATA / "codex_transcript.txt").read_bytes()
    assert parse(prefix + data, "transcript.jsonl")[3] == parse(data, "transcript.jsonl")[3] == "codex_text"
