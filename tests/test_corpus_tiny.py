"""`forensics corpus generate --tiny` (issue 39's scaling input): deterministic; valid, distinct run
ids whatever the count; every harness format; solutions that parse and differ; the copies it plants
labelled as such and found by the ingest's file accesses; everything discovered as a run."""

from __future__ import annotations

import ast
import os
from collections import Counter
from pathlib import Path

import orjson
from click.testing import CliRunner

from devkit.generator.cli import corpus_cmd
from devkit.generator.session import transcript_format
from forensics.archive.discover import discover_runs
from forensics.archive.runid import parse_run_id
from forensics.archive.source import open_source
from forensics.store.db import Store
from forensics.store.ingest import ingest_archive

from tests.test_corpus import tree


def _gen(dest: Path, runs: int, seed: int = 3) -> dict:
    r = CliRunner().invoke(corpus_cmd, ["generate", str(dest), "--runs", str(runs), "--seed", str(seed), "--tiny",
                                        "--json"])
    assert r.exit_code == 0, r.output
    return orjson.loads(r.output)


def test_tiny_runs_are_valid_distinct_and_cover_every_format(tmp_path: Path):
    s = _gen(tmp_path / "a", 120)
    assert s["runs"] == 120
    labels = orjson.loads((tmp_path / "a" / "labels.json").read_bytes())
    assert labels["generator"]["kind"] == "tiny" and len(labels["runs"]) == 120
    names = sorted(os.listdir(tmp_path / "a" / "outputs" / "runs"))
    assert len(names) == 120 == len(set(names))
    parsed = [parse_run_id(n) for n in names]
    assert all(p is not None and p.problem_known for p in parsed)
    assert sorted(p.timestamp for p in parsed) == [p.timestamp for p in parsed]    # strictly increasing
    assert len({p.timestamp for p in parsed}) == 120
    assert {transcript_format(p.harness) for p in parsed} == {"claude", "codex_text", "opencode", "cursor", "gemini",
                                                             "kimi", "droid", "grok_stream"}
    skipped: list = []
    assert len(discover_runs(open_source(tmp_path / "a"), skipped=skipped)) == 120 and skipped == []
    sols = [(tmp_path / "a" / "outputs" / "runs" / n / "solution.py").read_text() for n in names]
    for sol in sols:
        ast.parse(sol)
    assert all(1_000 < len(s) < 6_000 for s in sols)
    copies = [(rid, f) for rid, lab in labels["runs"].items() for f in lab.get("foreign_refs") or []
              if f["classification"] == "copy"]
    assert copies, "120 runs at 2% copy some"
    by_name = dict(zip(names, sols))
    for rid, f in copies:      # a copy is the other run's solution, byte for byte
        assert by_name[rid] == by_name[f["foreign_run_id"]]
    assert len(set(sols)) == len(sols) - len(copies)


def test_tiny_generation_is_deterministic_and_ingests_cleanly(tmp_path: Path):
    _gen(tmp_path / "a", 30, seed=5)
    _gen(tmp_path / "b", 30, seed=5)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    _gen(tmp_path / "c", 30, seed=6)
    assert tree(tmp_path / "a") != tree(tmp_path / "c")
    with Store(tmp_path / "s.duckdb") as st:
        rep = ingest_archive(st, tmp_path / "a")
        assert len(rep.run_ids) == 30 and not rep.skipped_folders
        assert st.scalar("select count(*) from parse_errors") == 0
        fmts = Counter(r[0] for r in st.con.execute("select transcript_format from runs").fetchall())
        assert len(fmts) == 8, fmts
        assert st.scalar("select count(*) from tool_calls") >= 30 * 3
