"""Resuming a scan (issue 36: `scan --force`, resumes, a resume after kill -9; issue 38 item 4: stages
declare what invalidates them).

Each test failed on the code before the fix: `scan --force` did not re-ingest (a transcript edited
in place with the same size and mtime kept its old rows), a resume was keyed on paths, sizes and
mtimes and on a hand-kept list of code folders without transcripts/ or kernels/ (a parser fix kept
the old parse), every stage of a run was redone or none, and a scan killed mid-way and resumed
ended with another store and report than an uninterrupted one.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import forensics
from forensics import pipeline as P
from forensics.analyze import registry as R
from forensics.engine.compare import diff_stores
from forensics.store.db import Store

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "corpus" / "fixtures" / "archive"
RUNS = ("20260730_150000_claude_claude-opus-4-8_01_fp8_gemm", "20260729_101500_codex_gpt-5.5-codex_01_fp8_gemm",
        "20260803_201500_or-fable_qwen_qwen3.8-max_01_fp8_gemm", "20260801_090000_claude_claude-opus-4-8_07_w4a16_gemm",
        "20260702_113200_kimi_kimi-k3_03_paged_attention", "20260802_210000_or-fable_qwen_qwen3.8-max_02_deepseek_nsa")
CLAUDE = RUNS[0]
STAGES = ("ingest", "provenance", "similarity", "timeline", "static", "verdict", "report")


def _archive(dest: Path) -> Path:
    for name in RUNS:
        src = next(FIXTURE.glob(f"outputs/*/{name}"))
        shutil.copytree(src, dest / src.relative_to(FIXTURE), symlinks=True)
    return dest


def _edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Replace `old` by `new` (as long) in `path`, keeping its size and its mtime."""
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def _first_command(db: Path, rid: str) -> str:
    with Store(db, read_only=True) as s:
        return s.scalar("select command from tool_calls where run_id = ? and command like '%python%' "
                        "order by call_seq limit 1", [rid])


# ----------------------------------------------------------------------------------- --force
def test_force_redoes_every_stage_and_an_in_place_edit_is_seen(tmp_path):
    arch = _archive(tmp_path / "a")
    out = tmp_path / "r"
    first = P.scan(arch, out=out, progress=False)
    assert first.stages == {s: len(RUNS) for s in STAGES}
    again = P.scan(arch, out=out, progress=False)
    assert again.stages == {s: 0 for s in STAGES} and again.analyzed == []
    forced = P.scan(arch, out=out, progress=False, force=True)
    assert forced.stages == {s: len(RUNS) for s in STAGES}, "--force redoes every stage, the ingest included"
    # a transcript edited in place, same size and mtime: seen by a plain resume (its content changed)
    cmd = _first_command(out / "audit.duckdb", CLAUDE)
    word = re.search(r"python3?", cmd).group(0).encode()
    t = next(arch.glob(f"outputs/*/{CLAUDE}/transcript.jsonl"))
    _edit_in_place(t, b'"command":"' + cmd.encode()[:20], b'"command":"' + cmd.encode()[:20].replace(word, b"P" * len(word), 1))
    res = P.scan(arch, out=out, progress=False)
    assert res.stages["ingest"] == 1 and _first_command(out / "audit.duckdb", CLAUDE) != cmd
    assert res.analyzed == [CLAUDE] or CLAUDE in res.analyzed


def test_a_listing_vouches_for_an_unchanged_run_and_a_changed_stat_costs_one_hash(tmp_path, monkeypatch):
    """A rescan reads no file of a run whose listing stamp (inode, ctime, mtime, size) is the stored
    one; a file whose stat changed but not its content (its ctime only) gets its run hashed once,
    found unchanged, not parsed, and restamped.  (The first ingest fingerprints from the hashes its
    parse took: each file read once.)"""
    from forensics.archive import source as SRC
    from forensics.store import ingest as I
    monkeypatch.setattr(SRC, "STAMP_SETTLE_NS", 0)     # the copy is seconds old: trust its stat now
    arch = _archive(tmp_path / "a")
    out = tmp_path / "r"
    hashed: list[str] = []
    orig = I.run_fingerprint

    def counting(src, run, ctx, known=None):
        if known is None:
            hashed.append(run.run_id)
        return orig(src, run, ctx, known)
    monkeypatch.setattr(I, "run_fingerprint", counting)
    assert P.scan(arch, out=out, progress=False).stages["ingest"] == len(RUNS)
    assert hashed == []                                  # parsed, fingerprinted from the parse's own hashes
    with Store(out / "audit.duckdb", read_only=True) as s:
        assert s.scalar("select count(*) from runs where stamp is null") == 0
    assert P.scan(arch, out=out, progress=False).stages == {s: 0 for s in STAGES} and hashed == []
    t = next(arch.glob(f"outputs/*/{CLAUDE}/transcript.jsonl"))
    st = t.stat()
    os.utime(t, ns=(st.st_atime_ns, st.st_mtime_ns))     # its ctime moves; its content and mtime do not
    assert P.scan(arch, out=out, progress=False).stages == {s: 0 for s in STAGES}
    assert hashed == [CLAUDE]
    hashed.clear()
    assert P.scan(arch, out=out, progress=False).stages == {s: 0 for s in STAGES} and hashed == []


# ---------------------------------------------------------------------------- code of a stage
@pytest.fixture
def code_copy(tmp_path, monkeypatch):
    """The project's code copied: stage digests are computed over the copy (`forensics.__file__`
    points there), so editing a file of the copy is what editing the installed package is to them."""
    root = Path(forensics.__file__).resolve().parent.parent
    dest = tmp_path / "code"
    for _pkg, folder in R.code_folders():     # forensics/ and kernels/ (forensics.kernels)
        rel = Path(folder).relative_to(root)
        shutil.copytree(folder, dest / rel, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(forensics, "__file__", str(dest / "forensics" / "__init__.py"))
    return dest


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _readers(code: Path, rel: str) -> set[str]:
    """The stages whose code (registry.code_files: import closure, package roots) holds `rel`."""
    f = code / rel
    return {s.name for s in R.STAGES if f in set(R.code_files(s.roots()))}


@pytest.mark.parametrize("rel,text", [("forensics/analyze/static/rules.py", "\n# a comment: still code\n"),
                                      ("forensics/analyze/timeline/core.py", "\n# a comment: still code\n"),
                                      ("forensics/transcripts/claude.py", "\n# a comment: still code\n"),
                                      ("kernels/ref/hard_01_fp8_gemm.py", "\n# a comment: still code\n"),
                                      ("forensics/data/deck-hashes.json", "\n")])
def test_an_edited_file_redoes_exactly_the_stages_that_run_it(tmp_path, code_copy, rel, text):
    """An edit of a file of the code that changes no result: every stage whose code holds it is
    redone for every run (a static rule file: the static audit; a parser: the ingest; a reference of
    kernels/: the similarity; the deck hashes the static audit reads), and no other stage, since
    none of the rows they read changed."""
    arch = _archive(tmp_path / "a")
    out = tmp_path / "r"
    assert P.scan(arch, out=out, progress=False).stages == {s: len(RUNS) for s in STAGES}
    assert P.scan(arch, out=out, progress=False).stages == {s: 0 for s in STAGES}
    want = _readers(code_copy, rel) - {"replay"}
    assert want and want != set(STAGES), want
    _append(code_copy / rel, text)
    st = P.scan(arch, out=out, progress=False).stages
    assert st == {s: len(RUNS) if s in want else 0 for s in STAGES}, (rel, want, st)
    assert P.scan(arch, out=out, progress=False).stages == {s: 0 for s in STAGES}


def _outputs(db: Path) -> dict[tuple[str, str], str]:
    with Store(db, read_only=True) as s:
        got = {(r, st): o for r, st, o in s.con.execute("select run_id, stage, output from stage_runs").fetchall()}
        got.update({(r, "ingest"): o for r, o in s.con.execute("select run_id, output from runs").fetchall()})
    return got


def test_a_changed_run_redoes_its_stages_and_what_reads_them(tmp_path):
    """One run's solution.py edited: that run is ingested again and its per-run analyzers redone;
    the similarity (it compares every run's code) for all; the verdict and report of exactly the runs
    one of whose inputs' outputs changed - the edited one, and another only where its similarity
    rows changed."""
    arch = _archive(tmp_path / "a")
    out = tmp_path / "r"
    P.scan(arch, out=out, progress=False)
    before = _outputs(out / "audit.duckdb")
    sol = next(arch.glob(f"outputs/*/{CLAUDE}/solution.py"))
    _append(sol, "\n\ndef _an_edit_after_the_session(x):\n    return x * 2 + 1\n")
    res = P.scan(arch, out=out, progress=False)
    after = _outputs(out / "audit.duckdb")
    changed = {(r, st) for (r, st), o in after.items() if before.get((r, st)) != o}
    assert {st for r, st in changed if r != CLAUDE} <= {"similarity", "verdict"}, changed
    assert "ingest" in {st for r, st in changed if r == CLAUDE}, changed
    st = res.stages
    assert st["ingest"] == st["provenance"] == st["timeline"] == st["static"] == 1, st
    assert st["similarity"] == len(RUNS), st
    # the verdict: the edited run, and each run whose similarity rows changed
    want = {CLAUDE} | {r for r, s in changed if s == "similarity"}
    assert st["verdict"] == len(want), (st, want)
    assert st["report"] == len({r for r, s in changed} | want), st
    assert P.scan(arch, out=out, progress=False).stages == {s: 0 for s in STAGES}


def test_an_annotation_in_the_run_folder_redoes_the_verdict(tmp_path):
    """The verdict reads an annotation file inside the run folder (its archived verdict): editing
    it redoes that run's verdict and report, and nothing it does not feed."""
    arch = _archive(tmp_path / "a")
    out = tmp_path / "r"
    run = next(arch.glob(f"outputs/*/{CLAUDE}"))
    (run / f"{CLAUDE}.yaml").write_text("verdict: clean\nreward_hack: false\n")
    P.scan(arch, out=out, progress=False)
    (run / f"{CLAUDE}.yaml").write_text("verdict: reward_hack\nreward_hack: true\n")
    res = P.scan(arch, out=out, progress=False)
    assert res.stages["ingest"] == 1 and res.stages["verdict"] == 1 and res.stages["report"] == 1, res.stages
    v = next(v for v in res.verdicts if v["run_id"] == CLAUDE)
    assert "reward_hack" in orjson.dumps(v["archived"]).decode()


def test_every_stage_declares_its_code_and_inputs():
    files = {s.name: {p.relative_to(R._project_root()).as_posix() for p in R.code_files(s.roots())} for s in R.STAGES}
    assert "forensics/transcripts/claude.py" in files["ingest"] and "forensics/archive/source.py" in files["ingest"]
    assert "forensics/limits.py" in files["ingest"]
    assert any(f.startswith("kernels/") for f in files["replay"]) and "forensics/data/deck-hashes.json" in files["static"]
    assert "forensics/analyze/registry.py" not in files["ingest"]        # orchestration: not a stage's code
    from forensics.store import schema as S
    names = [s.name for s in R.STAGES]
    for i, s in enumerate(R.STAGES):
        # a stage reads only what comes before it
        assert set(s.inputs) <= set(names[:i]) | set(R.EXTERNAL), s.name
        for rows in (*s.reads_all, *s.outputs()):
            cols = S.TABLE_BY_NAME[rows.table].column_names()
            assert rows.columns == ("*",) or set(rows.columns) <= set(cols), (s.name, rows.table)
            assert set(rows.keys) <= set(cols), (s.name, rows.table)
    for a in R.ANALYZERS:   # what it requires is what it reads of another analyzer; its output is what it writes
        assert set(a.requires) <= {x.name for x in R.ANALYZERS} and set(a.requires) <= set(a.inputs) | {"provenance"}
        assert {o.table for o in a.outputs()} == set(a.writes), a.name


def test_a_data_file_a_stage_reads_is_its_code():
    """A file of the project that is not Python (forensics/data/...) and is named in a stage's code
    is in that stage's code: editing it redoes the stage (the replay reads deck-hashes.json too)."""
    root = R._project_root()
    data = [p for _pkg, folder in R.code_folders() for p in Path(folder).rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc", ".md") and "__pycache__" not in p.parts]
    assert data
    for s in R.STAGES:
        files = set(R.code_files(s.roots()))
        text = "\n".join(f.read_text(errors="replace") for f in files if f.suffix == ".py")
        for d in data:
            if d.name in text:
                assert d in files, (s.name, d.relative_to(root).as_posix())


# ------------------------------------------------------------------ a parser fix, end to end
def _cli_scan(code: Path, arch: Path, out: Path, *extra: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "forensics.cli", "scan", str(arch), "--out", str(out), "--json",
                        "--no-progress", *extra], env={**os.environ, "PYTHONPATH": str(code)},
                       cwd=str(code), capture_output=True, timeout=600)   # (-m puts the cwd first on sys.path)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    return orjson.loads(r.stdout)


def test_a_parser_fix_reaches_a_resumed_scan(tmp_path, code_copy):
    """The scan runs the copied code (a subprocess); a fix of the Claude parser in the copy is in the
    store after a plain resumed scan, and nothing else of the ingest changed."""
    arch = _archive(tmp_path / "a")
    out = tmp_path / "r"
    _cli_scan(code_copy, arch, out)
    _append(code_copy / "forensics" / "transcripts" / "claude.py", (
        "\n\n_finish = ClaudeParser.finish\n\n\ndef _fixed(self, se, truncated):\n    _finish(self, se, truncated)\n"
        "    se.num_turns = 4242\n\n\nClaudeParser.finish = _fixed\n"))
    d = _cli_scan(code_copy, arch, out)
    assert d["stages"]["ingest"] == len(RUNS)
    with Store(out / "audit.duckdb", read_only=True) as s:
        assert s.scalar("select num_turns from session_end where run_id = ?", [CLAUDE]) == 4242
    assert _cli_scan(code_copy, arch, out)["stages"]["ingest"] == 0


# --------------------------------------------------------------------------- kill -9 mid-scan
_KILLER = """
import os, signal, sys
point, arch, out = sys.argv[1:4]
def die():
    os.kill(os.getpid(), signal.SIGKILL)
if point == "analyzer":          # the second chunk of the timeline, its first one written
    from forensics.analyze import registry as R
    orig, n = R.run_isolated, [0]
    def run_isolated(fn, store, ids):
        if fn.__module__.startswith("forensics.analyze.timeline"):
            n[0] += 1
            if n[0] == 2:
                die()
        return orig(fn, store, ids)
    R.run_isolated = run_isolated
elif point == "verdict":         # the verdicts written, their fingerprints not
    from forensics import verdict as V
    orig = V.adjudicate
    def adjudicate(*a, **k):
        orig(*a, **k)
        die()
    V.adjudicate = adjudicate
elif point == "report":          # three pages rendered
    import forensics.report as RP
    orig, n = RP.render_run, [0]
    def render_run(args):
        n[0] += 1
        if n[0] == 4:
            die()
        return orig(args)
    RP.render_run = render_run
from forensics.cli import main
main(["scan", arch, "--out", out, "--no-progress"])
"""


def _report_files(out: Path) -> dict[str, bytes]:
    """The report folder's files, but the store and the lines that time the scan (index.html's
    timings, scan.json's "scan" block)."""
    got = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if not p.is_file() or rel.startswith("audit.duckdb"):
            continue
        data = p.read_bytes()
        if rel == "index.html":
            data = re.sub(rb'<p class="muted">Timings \(s\):[^<]*</p>', b"", data)
        elif rel == "scan.json":
            d = orjson.loads(data)
            d.pop("scan")
            data = orjson.dumps(d, option=orjson.OPT_SORT_KEYS)
        got[rel] = data
    return got


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    arch = _archive(tmp / "a")
    res = P.scan(arch, out=tmp / "r", progress=False)
    assert res.exit_code == 0 and len(res.run_ids) == len(RUNS)
    return arch, tmp / "r"


def test_every_row_a_stage_writes_is_in_its_output(reference):
    """Each row of a table an analyzer or the verdict writes is in some stage's declared output
    (registry Stage.outputs): a row outside every output would change without the stages reading
    it being redone (the static audit writes its grader findings as "integrity")."""
    from forensics.store import schema as S
    _arch, ref = reference
    outs: dict[str, list[R.Rows]] = {}
    for st in R.STAGES:
        for o in st.outputs():
            outs.setdefault(o.table, []).append(o)
    with Store(ref / "audit.duckdb", read_only=True) as s:
        for t in S.TABLES:
            if t.name in S.INGEST_TABLES or t.name == "archives" or t.owner == "pipeline":   # (resume state)
                continue
            n = s.scalar(f"select count(*) from {t.name}")
            covered = " or ".join(f"({o.where or 'true'})" for o in outs.get(t.name, [])) or "false"
            assert s.scalar(f"select count(*) from {t.name} where {covered}") == n, (t.name, n)


@pytest.mark.parametrize("point", ["analyzer", "verdict", "report"])
def test_a_scan_killed_mid_way_resumes_to_the_uninterrupted_result(reference, tmp_path, point):
    arch, ref = reference
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-c", _KILLER, point, str(arch), str(out)],
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, timeout=600)
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    res = P.scan(arch, out=out, progress=False)
    assert res.exit_code == 0
    assert diff_stores(ref / "audit.duckdb", out / "audit.duckdb") == {}
    # and the resume state (the report's fingerprint takes its folder in: the two folders differ)
    assert diff_stores(ref / "audit.duckdb", out / "audit.duckdb", where="where stage <> 'report'",
                       tables={"stage_runs"}) == {}
    want, got = _report_files(ref), _report_files(out)
    assert sorted(got) == sorted(want)
    assert [k for k in want if want[k] != got[k]] == []
    assert any(k.endswith(".timeline.png") for k in got)
