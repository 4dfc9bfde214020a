"""Provenance: classification of foreign references, copy detection, token streams, findings."""

from __future__ import annotations

from datetime import datetime

import pytest

from devkit.bench import contamination_eval as E
from forensics.analyze import provenance
from forensics.store.db import Store


@pytest.fixture(scope="module")
def cases_store():
    cases = E.read_cases()
    return cases, E.run_read_cases(cases)


def _strongest(store, rid):
    rank = {"benign_exposure": 0, "deliberate_read": 1, "copy": 2}
    out = {}
    for r in store.query("select foreign_run_id, classification from foreign_refs where run_id = ?", [rid]):
        k = r["foreign_run_id"]
        if k not in out or rank[r["classification"]] > rank[out[k]]:
            out[k] = r["classification"]
    return out


@pytest.mark.parametrize("kind", ["benign_ls", "benign_ps", "benign_venv", "benign_lock", "read_cat", "read_glob",
                                  "read_cd", "read_grep", "read_cache", "copy_write", "copy_renamed", "copy_heredoc",
                                  "copy_cp"])
def test_each_harness_style_classifies(cases_store, kind):
    cases, store = cases_store
    for c in [c for c in cases if c["kind"] == kind]:
        got = _strongest(store, c["run_id"])
        for other, want in c["labels"].items():
            assert got.get(other) == want, (c["id"], other, got)


def test_findings_severity_and_pointers(cases_store):
    cases, store = cases_store
    c = next(c for c in cases if c["id"] == "claude:copy_write")
    f = store.query("select * from findings where run_id = ? and analyzer = 'provenance'", [c["run_id"]])
    rules = {r["rule"]: r for r in f}
    assert rules["foreign-copy"]["severity"] == "high" and rules["foreign-copy"]["call_seq"] is not None
    assert rules["foreign-copy"]["transcript_line"] is not None
    o = next(c for c in cases if c["id"] == "codex:read_other_problem")
    f = store.query("select rule, severity from findings where run_id = ? and rule = 'foreign-read'", [o["run_id"]])
    assert f and f[0]["severity"] == "medium"
    b = next(c for c in cases if c["id"] == "opencode:benign_ps")
    f = store.query("select rule, severity from findings where run_id = ?", [b["run_id"]])
    assert {(r["rule"], r["severity"]) for r in f} == {("foreign-exposure", "info")}


def test_foreign_started_before_and_same_problem(cases_store):
    cases, store = cases_store
    c = next(c for c in cases if c["id"] == "kimi:read_cat")
    r = store.query("select * from foreign_refs where run_id = ? and classification = 'deliberate_read'", [c["run_id"]])
    assert r and r[0]["same_problem"] is True and r[0]["foreign_started_before"] is True
    assert r[0]["artifact"] == "solution" and r[0]["foreign_file"] == "solution.py"


def test_reanalysis_is_idempotent(cases_store):
    cases, store = cases_store
    rid = cases[0]["run_id"]
    n1 = store.scalar("select count(*) from foreign_refs where run_id = ?", [rid])
    provenance.analyze(store, [rid])
    assert store.scalar("select count(*) from foreign_refs where run_id = ?", [rid]) == n1


def test_token_stream_mentions_and_scores():
    me = "20260803_120000_grok_grok-5_04_kahan_softmax"
    a = "20260801_090000_claude_claude-fable-5_04_kahan_softmax"
    later = "20260804_090000_codex_gpt-5.5_04_kahan_softmax"
    store = Store(":memory:")
    store.insert_rows("runs", [
        {"run_id": me, "run_name": me, "problem": "04_kahan_softmax", "run_ts": datetime(2026, 8, 3, 12),
         "transcript_format": "grok_stream"},
        {"run_id": a, "run_name": a, "problem": "04_kahan_softmax", "run_ts": datetime(2026, 8, 1, 9), "peak_fraction": 0.0412},
        {"run_id": later, "run_name": later, "problem": "04_kahan_softmax", "run_ts": datetime(2026, 8, 4, 9),
         "peak_fraction": 0.0777}])
    text = (f"Let me cat /home/u/outputs/runs/{a}/solution.py to see what worked. It scored 0.0412 there; "
            "the other got 0.0777 which I cannot know.")
    # split the stream into token deltas, breaking the run id across records
    pieces = [text[i:i + 7] for i in range(0, len(text), 7)]
    store.insert_rows("record_rows", [{"run_id": me, "source": "transcript.jsonl", "line": i + 1, "rtype": "thought",
                                   "text": p} for i, p in enumerate(pieces)])
    provenance.analyze(store, [me])
    refs = store.query("select * from foreign_refs where run_id = ?", [me])
    assert any(r["foreign_run_id"] == a and r["classification"] == "deliberate_read" and r["where"] == "stream"
               for r in refs)
    f = {r["rule"]: r for r in store.query("select * from findings where run_id = ?", [me])}
    assert f["stream-foreign-mention"]["severity"] == "high"
    assert f["stream-foreign-score"]["message"].count("0.0412") == 1
    assert "0.0777" not in str(store.query("select message from findings where run_id = ?", [me]))
    ln = f["stream-foreign-score"]["transcript_line"]
    assert text.find("0.0412") // 7 + 1 == ln


def test_no_timeline_is_unverifiable_not_clean():
    store = Store(":memory:")
    rid = "20260803_120000_claude_m_04_kahan_softmax"
    store.insert_rows("runs", [{"run_id": rid, "run_name": rid, "problem": "04_kahan_softmax"}])
    provenance.analyze(store)
    f = store.query("select rule from findings where run_id = ?", [rid])
    assert [r["rule"] for r in f] == ["contamination-unverifiable"]


def test_artifact_classes():
    assert provenance.artifact_of("solution.py") == "solution"
    assert provenance.artifact_of("result.json") == "result"
    assert provenance.artifact_of("check.contended.log") == "check_log"
    assert provenance.artifact_of("benchmark.log") == "benchmark_log"
    assert provenance.artifact_of("codex_session.jsonl") == "transcript"
    assert provenance.artifact_of("agent_home/.codex/sessions/2026/08/01/rollout-x.jsonl") == "session_store"
    assert provenance.artifact_of("cache/torch_extensions/ext/cuda.cu") == "build_cache"
    assert provenance.artifact_of("scratch/kernel.cu") == "scratch"
    assert provenance.artifact_of("repo/.venv/bin/python") == "other"
    assert provenance.artifact_of(None) == "dir"


def test_foreign_reads_query(cases_store):
    from forensics.store.queries import run_named
    cases, store = cases_store
    c = next(c for c in cases if c["id"] == "gemini:read_result")
    cols, rows = run_named(store, "foreign-reads", run=c["run_id"])
    assert rows and all(r[cols.index("classification")] in ("deliberate_read", "copy") for r in rows)
    b = next(c for c in cases if c["id"] == "gemini:benign_ls")
    assert run_named(store, "foreign-reads", run=b["run_id"])[1] == []
    assert run_named(store, "foreign-reads", run=b["run_id"], include_benign="1")[1]
