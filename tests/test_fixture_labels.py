"""The ingest reproduces every ingest-level label of the committed fixture archive
(corpus/fixtures/labels.json): identity, era, format, tool-call counts by tool, records per
source, planted parse errors with their line numbers, the session end, foreign references found
in the tool calls, and the agent's own check runs with their outcomes."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURE_ARCHIVE, FIXTURE_LABELS
from forensics.store.db import Store
from forensics.store.ingest import ingest_archive
from forensics.store.queries import run_named

LABELS = json.loads(FIXTURE_LABELS.read_text())["runs"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = Store(tmp_path_factory.mktemp("fx") / "fixture.duckdb")
    ingest_archive(st, FIXTURE_ARCHIVE)
    yield st
    st.close()


@pytest.fixture(scope="module")
def runs(store):
    return {(r["run_name"], r["root"]): r for r in store.query("select * from runs")}


def _run(runs, label):
    r = runs.get((label["run_id"], label["root"]))
    assert r is not None, f"run {label['run_id']} under {label['root']} not discovered"
    return r


def test_every_labeled_run_is_discovered(runs):
    assert len(runs) == len(LABELS)


@pytest.mark.parametrize("key", sorted(LABELS))
def test_identity_format_era(key, runs):
    L = LABELS[key]
    r = _run(runs, L)
    assert r["problem"] == L["problem"] and r["harness"] == L["harness"] and r["bench"] == L["bench"]
    assert r["collision_suffix"] == L["collision_suffix"]
    assert r["era"] == L["era"], r["era_evidence"]
    assert r["container_mode"] == L["container"]
    assert r["transcript_format"] == L["transcript_format"], r["format_evidence"]
    assert r["tool_source"] == L["tool_source"]


@pytest.mark.parametrize("key", sorted(LABELS))
def test_tool_calls_records_parse_errors(key, store, runs):
    L = LABELS[key]
    rid = _run(runs, L)["run_id"]
    by_tool = dict(store.con.execute("select tool, count(*) from tool_calls where run_id=? group by 1", [rid]).fetchall())
    assert by_tool == L["tool_calls"]["by_tool"]
    assert sum(by_tool.values()) == L["tool_calls"]["total"]
    recs = dict(store.con.execute("select source, count(*) from records where run_id=? group by 1", [rid]).fetchall())
    assert recs == {s: n for s, n in L["records"].items() if n}
    types = {}
    for src, rtype, n in store.con.execute(
            "select source, rtype, count(*) from records where run_id=? group by 1, 2", [rid]).fetchall():
        types.setdefault(src, {})[rtype] = n
    for src, want in L.get("record_types", {}).items():
        if want:
            assert types.get(src) == want, src
    errs = sorted(store.con.execute("select source, line, reason from parse_errors where run_id=?", [rid]).fetchall(),
                  key=str)
    assert errs == sorted(((e["source"], e["line"], e["reason"]) for e in L["parse_errors"]), key=str)


@pytest.mark.parametrize("key", sorted(LABELS))
def test_session_end(key, store, runs):
    L = LABELS[key]
    rid = _run(runs, L)["run_id"]
    row = store.query("select * from session_end where run_id=?", [rid])[0]
    want = L["session_end"]
    assert row["end_reason"] == want["end_reason"]
    assert row["api_error_status"] == want["api_error_status"]
    assert bool(row["truncated_last_line"]) == bool(want["truncated_last_line"])
    if want.get("output_tokens_dedup") is not None:
        assert row["output_tokens"] == want["output_tokens_dedup"]


@pytest.mark.parametrize("key", sorted(k for k in LABELS if LABELS[k]["foreign_refs"]))
def test_foreign_references_found(key, store, runs):
    L = LABELS[key]
    rid = _run(runs, L)["run_id"]
    seen = set(store.con.execute("select call_seq, foreign_run_id from file_accesses where run_id=? and owner='foreign'",
                                 [rid]).fetchall())
    for ref in L["foreign_refs"]:
        if ref["classification"] == "copy":
            continue  # a copy is the agent's own write; the provenance analyzer links it (tests/test_provenance*)
        assert (ref["call_seq"], ref["foreign_run_id"]) in seen, ref


def test_agent_check_runs_query_matches_labels(store, runs):
    cols, rows = run_named(store, "agent-check-runs")
    got = {(r[0], r[1]): (r[cols.index("script")], r[cols.index("outcome")]) for r in rows}
    n = 0
    for L in LABELS.values():
        rid = _run(runs, L)["run_id"]
        for c in L["check_runs"]:
            if c["result_call_seq"] != c["call_seq"]:
                continue  # background runs: output arrives in a later call (the timeline's check_runs)
            assert got.get((rid, c["call_seq"]), (None, None))[0] == c["script"], (rid, c)
            if c["outcome"] in ("PASS", "FAIL"):
                want = "OK" if c["outcome"] == "PASS" and c["script"] == "benchmark" else c["outcome"]
                assert got[(rid, c["call_seq"])][1] == want, (rid, c)
            n += 1
    assert n > 20
