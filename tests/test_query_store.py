"""`forensics query` / `forensics sql` find the store without --db: --db > $FORENSICS_DB >
./report/audit.duckdb (where `scan` writes it) > ./audit.duckdb; no store is exit 2 (input error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from forensics.cli import main
from forensics.store.db import Store


def _store(path: Path, run_id: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with Store(path) as st:
        st.insert_rows("runs", [{"run_id": run_id, "run_name": run_id, "problem": "01_fp8_gemm"}])
    return str(path)


def _which(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["sql", "select run_id from runs", "--json", *args], env=env or {"FORENSICS_DB": ""})
    if r.exit_code:
        return r.exit_code, r.output
    return 0, json.loads(r.output)[0]["run_id"]


def test_resolution_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "audit.duckdb", "plain")
    assert _which([]) == (0, "plain")
    _store(tmp_path / "report" / "audit.duckdb", "scan")
    assert _which([]) == (0, "scan")                       # scan's store beats ./audit.duckdb
    env_db = _store(tmp_path / "elsewhere" / "x.duckdb", "env")
    assert _which([], {"FORENSICS_DB": env_db}) == (0, "env")
    cli_db = _store(tmp_path / "given.duckdb", "given")
    assert _which(["--db", cli_db], {"FORENSICS_DB": env_db}) == (0, "given")
    # the named queries resolve the same way
    r = CliRunner().invoke(main, ["query", "largest-transcripts", "--json"], env={"FORENSICS_DB": ""})
    assert r.exit_code == 0, r.output


def test_no_store_is_exit_2_and_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for cmd in (["sql", "select 1"], ["query", "parse-errors"]):
        r = CliRunner().invoke(main, cmd, env={"FORENSICS_DB": ""})
        assert r.exit_code == 2, (cmd, r.exit_code, r.output)
        assert "report/audit.duckdb" in r.output and "audit.duckdb" in r.output and "FORENSICS_DB" in r.output
    r = CliRunner().invoke(main, ["sql", "select 1"], env={"FORENSICS_DB": str(tmp_path / "missing.duckdb")})
    assert r.exit_code == 2 and "missing.duckdb" in r.output
    r = CliRunner().invoke(main, ["sql", "select 1", "--db", "nope.duckdb"], env={"FORENSICS_DB": ""})
    assert r.exit_code == 2 and "nope.duckdb" in r.output


@pytest.mark.parametrize("args", [["query", "no-such-query"], ["query", "parse-errors", "-p", "novalue"],
                                  ["sql", "selec 1"], ["schema", "no_such_table"]])
def test_other_input_errors_exit_2(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "report" / "audit.duckdb", "x")
    r = CliRunner().invoke(main, args, env={"FORENSICS_DB": ""})
    assert r.exit_code == 2, (args, r.exit_code, r.output)
