"""`forensics timeline RUN_DIR` (text, --json, --plot), the superseded-passes query, and the
timeline benchmark's generator at a small size (counts only; no timing assertions)."""

from __future__ import annotations

import hashlib

import orjson
from click.testing import CliRunner

from forensics.cli import main
from devkit.generator.run import RunBuilder

V1 = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"


def _run_dir(tmp_path):
    b = RunBuilder("hard", "01_fp8_gemm", "claude", "E4", "20260803_194356", "model-x", seed=2)
    s = b.session
    s.write("solution.py", V1)
    b.check(style="tail")
    b.benchmark(target=0.2)
    s.edit("solution.py", "x * 2", "x * 3")
    s.end("Done.")
    b.grade("PASS", peak_fraction=0.2)
    b.write(tmp_path / "arch")
    return next((tmp_path / "arch" / "outputs" / "runs").iterdir())


def test_cli_text_json_and_plot(tmp_path):
    run = _run_dir(tmp_path)
    before = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file())).hexdigest()
    r = CliRunner().invoke(main, ["timeline", str(run)])
    assert r.exit_code == 0, r.output
    assert "v1" in r.output and "v2" in r.output and "superseded-pass" in r.output
    assert "final-never-checked" in r.output
    png = tmp_path / "traj.png"
    r = CliRunner().invoke(main, ["timeline", str(run), "--json", "--plot", str(png)])
    assert r.exit_code == 0, r.output
    d = orjson.loads(r.output)
    assert [v["version"] for v in d["solution"]["versions"]] == [1, 2] and d["solution"]["final_version"] == 2
    assert [(c["script"], c["outcome"], c["solution_version"]) for c in d["checks"]] == [
        ("check", "PASS", 1), ("benchmark", "OK", 1)]
    assert [e["event"] for e in d["trajectory"]][:3] == ["version", "check", "benchmark"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    after = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file())).hexdigest()
    assert before == after   # the archive is evidence: nothing written inside it


def test_superseded_passes_query(tmp_path):
    from forensics.analyze.timeline import analyze
    from forensics.store.db import Store
    from forensics.store.ingest import ingest_path
    from forensics.store.queries import run_named

    run = _run_dir(tmp_path)
    store = Store(":memory:")
    ingest_path(store, run)
    analyze(store)
    cols, rows = run_named(store, "superseded-passes")
    got = [dict(zip(cols, r)) for r in rows]
    assert len(got) == 1
    assert (got[0]["solution_version"], got[0]["final_version"], got[0]["edits_after"], got[0]["final_checked"]) == \
        (1, 2, 1, False)
    assert run_named(store, "superseded-passes", run="no-such-run")[1] == []


def test_bench_generator_counts(tmp_path):
    from devkit.bench.timeline import run_bench

    r = run_bench(records=3000, edits=20, checks=4, repeat=1, work=tmp_path)
    assert r["records"] >= 3000
    assert r["solution_versions"] == 21 and r["gaps"] == 0 and r["check_runs"] == 4
    assert r["parse_seconds"]["events"] >= 3000 and r["ratio_analyze_over_parse"] > 0
