"""Heartbeat runs: the parser's HeartbeatRun events and the store's record_spans table lose
nothing.  Expanded, a run is exactly the per-line Heartbeat records it replaces, and the
`records` view of a store written with spans equals, row for row and column for column, the
`records` of a store written with one row per line."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import FIXTURE_ARCHIVE
from forensics.store import ingest as I
from forensics.store import schema as S
from forensics.store.db import Store
from forensics.transcripts import parse
from forensics.transcripts import parse_source
from forensics.transcripts.events import Heartbeat, HeartbeatRun, ParseError
from forensics.transcripts.reader import HUGE_LINE

INIT = b'{"type":"system","subtype":"init","cwd":"/w"}'
HB_LINES = [
    b'{"type":"system","subtype":"task_progress","task_id":"b1"}',
    b'{"type":"system","subtype":"task_progress","task_id":"b22","n":3}',
    b'{"type":"system","subtype":"status","status":"x"}',
    b'{"type":"system","subtype":"task_started","task_id":"b1"}',
    b'{"subtype":"task_progress","type":"system"}',                            # keys reordered: decoded
    '{"type":"system","subtype":"task_progress","d":"caf\u00e9"}'.encode(),  # non-ASCII: decoded
    b'{"type":"system","subtype":"task_progress","task_id":"b1"}   ',         # trailing blanks: decoded
]
OTHER = [
    INIT, b"", b"   ", b"{", b"\xff\xfe", b"null",
    b'{"type":"system","subtype":"task_progress"',                             # heartbeat prefix, cut
    b'{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"hi"}]}}',
    b'{"type":"system","subtype":"init","model":"m"}',
]


def _expand(events):
    out = []
    for e in events:
        out.extend(e.expand() if isinstance(e, HeartbeatRun) else [e])
    return out


def _both(data: bytes):
    per_line = list(parse_source(io.BytesIO(data), source="transcript.jsonl", harness="claude"))
    runs = list(parse_source(io.BytesIO(data), source="transcript.jsonl", harness="claude", heartbeat_runs=True))
    return per_line, runs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(HB_LINES * 3 + OTHER), max_size=60),
       sep=st.sampled_from([b"\n", b"\r\n"]), tail=st.booleans(), gz=st.booleans())
@example(parts=[HB_LINES[0], b"", HB_LINES[0], HB_LINES[0]], sep=b"\n", tail=True, gz=False)  # a gap ends a run
@example(parts=[HB_LINES[0], HB_LINES[2], HB_LINES[0]], sep=b"\n", tail=True, gz=False)       # so does a subtype
@example(parts=[HB_LINES[0], HB_LINES[5], HB_LINES[0], HB_LINES[0]], sep=b"\r\n", tail=False, gz=True)
def test_runs_expand_to_exactly_the_per_line_events(parts, sep, tail, gz):
    data = sep.join(parts) + (sep if tail else b"")
    if gz:
        data = gzip.compress(data)
    per_line, runs = _both(data)
    assert _expand(runs) == per_line  # same events, same order, same offsets and sizes
    assert not any(isinstance(e, Heartbeat) for e in runs)
    for r in runs:
        if isinstance(r, HeartbeatRun):
            assert r.offsets and r.end_offset >= r.offsets[-1]


def test_long_runs_are_split_and_still_expand_exactly(monkeypatch):
    hb = HB_LINES[0]
    lines = [INIT] + [hb] * 5000 + [HB_LINES[2]] * 3000 + [b""] + [hb] * 4000 + [OTHER[7]] + [hb] * 2000
    data = b"\n".join(lines) + b"\n"
    monkeypatch.setattr(parse, "RUN_MAX", 700)  # checked once per read block (64 KiB, ~1000 lines here)
    per_line, runs = _both(data)
    spans = [r for r in runs if isinstance(r, HeartbeatRun)]
    assert _expand(runs) == per_line
    assert sum(len(r.offsets) for r in spans) == 14000
    assert len(spans) > 4 and max(len(r.offsets) for r in spans) < 2 * 1100  # split at block boundaries
    assert {r.subtype for r in spans} == {"task_progress", "status"}


HUGE = b'{"type":"user","message":{"content":"' + b"x" * (HUGE_LINE + 10) + b'"}}'


def test_an_oversize_line_ends_the_run_before_its_error():
    hb = HB_LINES[0]
    data = b"\n".join([INIT, hb, hb, HUGE, hb, hb]) + b"\n"
    per_line, runs = _both(data)
    assert _expand(runs) == per_line
    kinds = [type(e).__name__ for e in runs]
    assert kinds[:5] == ["Record", "HeartbeatRun", "ParseError", "Record", "HeartbeatRun"]
    assert runs[2].reason == "huge_line" and runs[4].first_line == 5 and isinstance(runs[2], ParseError)


# ------------------------------------------------------------------ the store
def _run_dir(root: Path, rid: str, raw: bytes, name: str = "transcript.jsonl") -> None:
    d = root / rid
    d.mkdir(parents=True)
    (d / name).write_bytes(raw)
    (d / "result.json").write_text(json.dumps({"problem": "01_fp8_gemm", "harness": "claude"}))


@pytest.fixture(scope="module")
def tricky_archive(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("spans") / "outputs" / "runs"
    hb, st_, nonascii, reordered = HB_LINES[0], HB_LINES[2], HB_LINES[5], HB_LINES[4]
    body = [INIT, hb, hb, b"", hb, st_, st_, nonascii, hb, reordered, hb, b"{", hb, OTHER[7], hb]
    _run_dir(root, "20260801_120000_claude_claude-opus-4-8_01_fp8_gemm", b"\n".join(body) + b"\n")
    _run_dir(root, "20260801_120100_claude_claude-opus-4-8_01_fp8_gemm", b"\r\n".join(body + [hb]))  # CRLF, no final newline
    _run_dir(root, "20260801_120200_claude_claude-opus-4-8_01_fp8_gemm",
             gzip.compress(b"\n".join([INIT] + [hb] * 3000 + [OTHER[7]] + [st_] * 10) + b"\n"), "transcript.jsonl.gz")
    _run_dir(root, "20260801_120300_claude_claude-opus-4-8_01_fp8_gemm", b"\n".join([hb] * 50))  # heartbeats only
    _run_dir(root, "20260801_120400_claude_claude-opus-4-8_01_fp8_gemm", b"\n".join([INIT, hb, hb, HUGE, hb, hb]) + b"\n")
    return root


def _records(st: Store) -> list[tuple]:
    cols = ", ".join(f'"{c}"' for c in S.VIEW_BY_NAME["records"].column_names())
    return st.con.execute(f"select {cols} from records order by all").fetchall()


@pytest.mark.parametrize("which", ["tricky", "fixture"])
def test_records_view_equals_one_row_per_line(which, tricky_archive, tmp_path, monkeypatch):
    archive = tricky_archive if which == "tricky" else FIXTURE_ARCHIVE
    with Store(tmp_path / "spans.duckdb") as a:
        I.ingest_archive(a, archive)
        spans = _records(a)
        n_spans = a.scalar("select count(*) from record_spans")
        n_records = a.con.execute("select run_id, n_records from runs order by 1").fetchall()
    monkeypatch.setattr(I, "HEARTBEAT_SPANS", False)
    with Store(tmp_path / "rows.duckdb") as b:
        I.ingest_archive(b, archive)
        rows = _records(b)
        assert b.scalar("select count(*) from record_spans") == 0
        assert b.con.execute("select run_id, n_records from runs order by 1").fetchall() == n_records
    assert n_spans > 0 and len(spans) > 2 * n_spans  # spans were used, and they hold many lines each
    assert spans == rows


def test_an_old_store_with_a_records_table_is_migrated(tmp_path):
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    old = S.Table("records", "old", S.RECORD_COLUMNS)
    con.execute(old.ddl())
    con.execute("insert into records (run_id, source, line, rtype, text) values ('r1', 'transcript.jsonl', 7, 'text', 'hi')")
    con.close()
    with Store(db) as st:
        kinds = dict(st.con.execute("select table_name, table_type from information_schema.tables").fetchall())
        assert kinds["records"] == "VIEW" and kinds["record_rows"] == "BASE TABLE"
        assert st.con.execute("select run_id, line, rtype, text from records").fetchall() == [("r1", 7, "text", "hi")]
        assert st.scalar("select comment from duckdb_tables() where table_name = 'record_rows'") == \
            S.TABLE_BY_NAME["record_rows"].comment


def test_a_changed_view_definition_is_restored_with_its_comments(tmp_path):
    db = tmp_path / "v.duckdb"
    Store(db).close()
    con = duckdb.connect(str(db))
    con.execute("create or replace view records as select 1 as x")
    con.close()
    with Store(db) as st:
        cols = st.con.execute("select column_name, comment from duckdb_columns() where table_name = 'records'").fetchall()
        assert [c for c, _ in cols] == S.VIEW_BY_NAME["records"].column_names()
        assert all(comment for _, comment in cols)
        assert st.scalar("select comment from duckdb_views() where view_name = 'records'") == S.VIEW_BY_NAME["records"].comment
