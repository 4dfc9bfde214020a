"""`forensics scan` end to end over a generated archive: outputs, exit codes, resume, fail-closed
analyzer failures, parallel == sequential, and the archive left byte-identical."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml
from click.testing import CliRunner

from forensics import pipeline as P
from forensics import verdict as V
from forensics.store.db import Store


def _generate(dest: Path, runs: int, seed: int) -> Path:
    r = subprocess.run([sys.executable, "-m", "forensics.cli", "corpus", "generate", str(dest), "--runs", str(runs),
                        "--seed", str(seed)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"corpus generator unavailable: {r.stderr[-300:]}")
    return dest


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    return _generate(tmp_path_factory.mktemp("arch") / "a", 10, 7)


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def scanned(archive, tmp_path_factory):
    before = tree_hash(archive)
    out = tmp_path_factory.mktemp("rep") / "report"
    res = P.scan(archive, out=out, progress=False)
    return archive, out, res, before


def test_outputs_exist_for_every_run(scanned):
    archive, out, res, _ = scanned
    assert res.run_ids and len(res.verdicts) == len(res.run_ids)
    assert (out / "index.html").is_file() and (out / "scan.json").is_file() and (out / "audit.duckdb").is_file()
    for rid in res.run_ids:
        name = re.sub(r"[^A-Za-z0-9._@-]", "_", rid)
        assert (out / "runs" / f"{name}.html").is_file()
        assert (out / "annotations" / f"{name}.yaml").is_file()
    data = orjson.loads((out / "scan.json").read_bytes())
    assert {r["run_id"] for r in data["runs"]} == set(res.run_ids)
    assert sum(data["verdict_counts"].values()) == len(res.run_ids)


def test_archive_unchanged(scanned):
    archive, _, _, before = scanned
    assert tree_hash(archive) == before


def test_every_field_decided_or_explained(scanned):
    _, out, res, _ = scanned
    with Store(out / "audit.duckdb", read_only=True) as s:
        for row in s.query("select * from verdicts"):
            v = V.verdict_dict(row)
            for k in V.FIELDS:
                rec = v["decided_by"][k]
                if v[k] == V.UNKNOWN:
                    assert isinstance(rec, str) and rec.startswith("rule:"), (k, rec)
                else:
                    assert isinstance(rec, list) and rec[0].startswith("rule:"), (k, rec)
                    assert rec[0][5:] == v["rules"][k]


def test_annotation_yaml_schema_and_verbatim_quotes(scanned):
    archive, out, res, _ = scanned
    n_quotes = 0
    with Store(out / "audit.duckdb", read_only=True) as s:
        paths = {r["run_id"]: (r["archive"], r["run_path"]) for r in s.query("select run_id, archive, run_path from runs")}
    for rid in res.run_ids:
        name = re.sub(r"[^A-Za-z0-9._@-]", "_", rid)
        d = yaml.safe_load((out / "annotations" / f"{name}.yaml").read_text())
        for k in ("run_id", "model", "harness", "problem", "peak_fraction", "verdict", "summary", "quotes",
                  "implication", "trajectory", *V.FIELDS):
            assert k in d, k
        run_dir = Path(paths[rid][0]) / (paths[rid][1] or "")
        for q in d["quotes"]:
            a, b = q["lines"]
            raw = (run_dir / q["file"]).read_bytes()
            if raw[:2] == b"\x1f\x8b":
                import gzip
                raw = gzip.decompress(raw)
            lines = raw.decode("utf-8", "replace").splitlines()
            cited = "\n".join(lines[a - 1:b])
            assert q["text"] and q["text"] in cited, (rid, q["file"], a, b)
            n_quotes += 1
    assert n_quotes > 0


def test_resume_skips_unchanged_and_redoes_changed(archive, tmp_path):
    import shutil
    arch = tmp_path / "copy"
    shutil.copytree(archive, arch, symlinks=True)
    out = tmp_path / "r"
    first = P.scan(arch, out=out, progress=False)
    assert len(first.analyzed) == len(first.run_ids)
    second = P.scan(arch, out=out, progress=False)
    assert second.analyzed == [] and len(second.skipped) == len(first.run_ids)
    assert [v["verdict"] for v in second.verdicts] == [v["verdict"] for v in first.verdicts]
    # change one run's check.log: only that run is analysed again
    with Store(out / "audit.duckdb", read_only=True) as s:
        rid, rp = s.query("select run_id, run_path from runs where check_verdict is not null order by run_id limit 1")[0].values()
    log = arch / rp / "check.log"
    if not log.exists():
        log = arch / rp / "result.json"
    log.write_bytes(log.read_bytes() + b"\n")
    os.utime(log, (1_900_000_000, 1_900_000_000))
    third = P.scan(arch, out=out, progress=False)
    assert third.analyzed == [rid]
    # a deleted report page is re-rendered without re-analysis
    page = next((out / "runs").glob("*.html"))
    page.unlink()
    fourth = P.scan(arch, out=out, progress=False)
    assert fourth.analyzed == [] and page.exists()


def test_failing_analyzer_fails_closed(archive, tmp_path, monkeypatch):
    mod = tmp_path / "mods"
    mod.mkdir()
    (mod / "boom_analyzer.py").write_text("def analyze(store, run_ids=None):\n    raise RuntimeError('planted failure')\n")
    monkeypatch.syspath_prepend(str(mod))
    mods = tuple((n, "boom_analyzer" if n == "static" else m, c) for n, m, c in P.ANALYZER_MODULES)
    monkeypatch.setattr(P, "ANALYZER_MODULES", mods)
    res = P.scan(archive, out=tmp_path / "r", progress=False)
    assert res.coverage["failed"].get("static") == len(res.run_ids)
    for v in res.verdicts:
        if v["decided_by"]["reward_hack"] and isinstance(v["decided_by"]["reward_hack"], str):
            assert "planted failure" in v["decided_by"]["reward_hack"]
        assert v["empirical_recompute_required"] in (V.UNKNOWN, False)
        if v["empirical_recompute_required"] is False:
            assert v["rules"]["empirical_recompute_required"] == "ER2"  # only for runs without a solution
        assert v["publish_grade"] is not True
    with Store(tmp_path / "r" / "audit.duckdb", read_only=True) as s:
        n = s.scalar("select count(*) from findings where analyzer = 'pipeline' and rule = 'analysis-coverage' "
                     "and severity = 'high'")
    assert n == len(res.run_ids)


def test_parallel_matches_sequential(archive, tmp_path, scanned):
    _, _, seq, _ = scanned
    par = P.scan(archive, out=tmp_path / "p", jobs=2, progress=False)
    a = {v["run_id"]: {k: v[k] for k in V.FIELDS} for v in seq.verdicts}
    b = {v["run_id"]: {k: v[k] for k in V.FIELDS} for v in par.verdicts}
    assert a == b
    with Store(tmp_path / "p" / "audit.duckdb", read_only=True) as s1, \
            Store(scanned[1] / "audit.duckdb", read_only=True) as s2:
        q = "select run_id, analyzer, rule, finding_id from findings where analyzer <> 'pipeline' order by 1, 2, 3, 4"
        assert s1.query(q) == s2.query(q)


def test_cli_exit_codes(archive, tmp_path):
    runner = CliRunner()
    from forensics.cli import main
    r = runner.invoke(main, ["scan", str(tmp_path / "nope"), "--out", str(tmp_path / "x"), "--no-progress"])
    assert r.exit_code == 2 and "archive not found" in r.output
    r = runner.invoke(main, ["scan", str(archive), "--out", str(tmp_path / "y"), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "verdict" in r.output and "runs (" in r.output
    r = runner.invoke(main, ["scan", str(archive), "--out", str(tmp_path / "y"), "--no-progress", "--strict", "--json"])
    data = orjson.loads(r.output)
    expect = 1 if (data["flagged"] or data["disagreements"]) else 0
    assert r.exit_code == expect
    assert data["exit_code"] == expect and len(data["verdicts"]) == data["runs"]
    r = runner.invoke(main, ["scan", str(archive), "--out", str(archive / "inside"), "--no-progress"])
    assert r.exit_code == 2 and not (archive / "inside").exists()


def test_annotations_dir_confirm_and_refute(archive, tmp_path):
    first = P.scan(archive, out=tmp_path / "a", progress=False, reports=False)
    v0, v1 = first.verdicts[0], first.verdicts[1]
    ann = tmp_path / "ann"
    ann.mkdir()
    wrong = "reward_hack" if v0["verdict"] != "reward_hack" else "clean"
    (ann / f"{v0['run_name']}.yaml").write_text(f"run_id: {v0['run_name']}\nverdict: {wrong}\n"
                                                f"correct: {str(v0['correct']).lower()}\n")
    # invalid YAML (an unclosed flow sequence): the key: value fallback still reads the verdict
    (ann / f"{v1['run_name']}_b200.yaml").write_text(f"run_id: {v1['run_name']}\nverdict: {v1['verdict']}\n"
                                                     "notes: [unclosed, list\n  - x: y: z\n")
    runner = CliRunner()
    from forensics.cli import main
    r = runner.invoke(main, ["scan", str(archive), "--out", str(tmp_path / "b"), "--no-progress", "--strict",
                             "--annotations", str(ann), "--json"])
    data = orjson.loads(r.output)
    assert r.exit_code == 1 and v0["run_id"] in data["disagreements"]
    with Store(tmp_path / "b" / "audit.duckdb", read_only=True) as s:
        a0 = V.verdict_dict(s.query("select * from verdicts where run_id = ?", [v0["run_id"]])[0])["archived"]
        a1 = V.verdict_dict(s.query("select * from verdicts where run_id = ?", [v1["run_id"]])[0])["archived"]
    assert a0["fields"]["verdict"]["status"] == "disagree" and a0["fields"]["verdict"]["evidence"][0].startswith("rule:")
    if v0["correct"] != V.UNKNOWN:
        assert a0["fields"]["correct"]["status"] == "agree"
    assert a0["fields"]["contamination"]["status"] == "cannot_tell"
    assert a1["annotation_error"].startswith("invalid YAML")
    assert a1["fields"]["verdict"]["status"] == ("cannot_tell" if v1["verdict"] == V.UNKNOWN else "agree")
    name = re.sub(r"[^A-Za-z0-9._@-]", "_", v0["run_id"])
    y = yaml.safe_load((tmp_path / "b" / "annotations" / f"{name}.yaml").read_text())
    assert y["archived_verdict_check"]["verdict"]["status"] == "disagree"


def test_code_digest_follows_contents_not_mtimes(tmp_path, monkeypatch):
    """A stage's code digest (forensics.analyze.registry): two clones of one commit (same bytes, other
    mtimes) agree; an edited module of the stage's import closure changes it (so the scan redoes it)."""
    import shutil

    import forensics
    from forensics.analyze import registry as R
    root = Path(forensics.__file__).resolve().parent.parent
    for _pkg, folder in R.code_folders():     # forensics/ and kernels/ (forensics.kernels)
        shutil.copytree(folder, tmp_path / Path(folder).relative_to(root), ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(forensics, "__file__", str(tmp_path / "forensics" / "__init__.py"))
    before = R.code_digest(R.VERDICT)
    target = tmp_path / "forensics" / "verdict.py"
    os.utime(target, (1_000_000, 1_000_000))
    assert R.code_digest(R.VERDICT) == before
    target.write_text(target.read_text() + "\n# edited\n")
    assert R.code_digest(R.VERDICT) != before
