"""End-to-end timeline cases: a synthetic run per (pattern, harness format) written by the corpus
RunBuilder, ingested through the real parsers (`ingest_path`), analysed, and compared exactly
with the builder's ground-truth labels (solution versions with their sha256, and every check or
benchmark run with the version it ran on and whether it is superseded)."""

from __future__ import annotations

import pytest

from forensics.analyze.timeline import analyze, timeline, trajectory_entries
from devkit.generator.run import RunBuilder
from forensics.store.db import Store, loads_json
from forensics.store.ingest import ingest_path

V1 = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
      "        super().__init__()\n        self.scale = 2\n\n    def forward(self, x):\n"
      "        return x * 2\n")
L2, L3, L4, L5, L6 = ("        return x * %d\n" % k for k in (2, 3, 4, 5, 6))
FORMATS = ["claude", "codex", "opencode", "kimi", "gemini"]


def _first_write(b, content):
    s = b.session
    # the generator renders a Codex Add File with one extra '+' line per trailing newline; a
    # here-doc is exact in every harness, so Codex starts from one (see docs/timeline.md)
    if b.harness == "codex":
        return s.heredoc("solution.py", content)
    return s.write("solution.py", content)


def _run(tmp_path, harness, build):
    b = RunBuilder("hard", "01_fp8_gemm", harness, "E4", "20260803_194356", "model-x", seed=11)
    build(b, b.session)
    labels = b.write(tmp_path / harness)
    label = list(labels["runs"].values())[0] if "runs" in labels else labels
    store = Store(":memory:")
    ingest_path(store, tmp_path / harness)
    rid = store.run_ids()[0]
    analyze(store, [rid])
    return label, store, rid


def _versions(store, rid):
    return store.query("select version, call_seq, sha256, op, gap, gap_reason, basis, matches_final from file_versions "
                       "where run_id = ? and is_solution order by version", [rid])


def _checks(store, rid):
    return store.query("select call_seq, script, outcome, solution_version, superseded, is_final_version, "
                       "env_weakening, background, peak_fraction from check_runs where run_id = ? "
                       "order by call_seq, script", [rid])


def _rules(store, rid):
    rows = store.query("select rule, severity, message, call_seq, transcript_line, data "
                                              "from findings where run_id = ? and analyzer = 'timeline'", [rid])
    for r in rows:
        r["data"] = loads_json(r["data"])
    return {r["rule"]: r for r in rows}


def _assert_matches_labels(label, store, rid):
    got_v = [(v["version"], v["call_seq"], v["sha256"]) for v in _versions(store, rid)]
    exp_v = [(v["version"], v["call_seq"], v["sha256"]) for v in label["solution_versions"]]
    assert got_v == exp_v
    got_c = [(c["call_seq"], c["script"], c["solution_version"], c["superseded"],
              "PASS" if c["outcome"] == "OK" else c["outcome"]) for c in _checks(store, rid)]
    exp_c = [(c["call_seq"], c["script"], c["solution_version"], c["superseded"], c["outcome"])
             for c in label["check_runs"]]
    assert got_c == exp_c
    final = [v["version"] for v in _versions(store, rid) if v["matches_final"]]
    assert (final[-1] if final else None) == label["final_version"]


# ---------------------------------------------------------------------- patterns

def superseded_pass(b, s):
    _first_write(b, V1)
    b.check(style="tail")                       # PASS on v1
    b.benchmark(target=0.21)
    s.edit("solution.py", L2, L3)               # v2, the archived file: never checked
    s.end("Done.")
    b.grade("PASS", peak_fraction=0.2)


def clean_last_edit_before_pass(b, s):
    _first_write(b, V1)
    b.check("FAIL", fail_line="FAIL: shape 0 {'M': 128} seed 42 case nominal: solution contains NaN")
    s.edit("solution.py", L2, L3)
    b.check(style="plain")                      # PASS on v2 = final
    b.benchmark(target=0.33)
    s.end("Done.")
    b.grade("PASS", peak_fraction=0.33)


def background_check(b, s):
    _first_write(b, V1)
    seq = b.check(style="plain", background=True)
    s.text("waiting for the check")
    s.task_output(seq)
    s.edit("solution.py", L2, L3)
    s.end("Done.")
    b.grade("PASS", peak_fraction=0.1)


def patch_chain(b, s):
    _first_write(b, V1)
    s.apply_patch("solution.py", [(L2, L3)])
    b.check(style="plain")
    # two hunks, in file order (apply_patch seeks each hunk after the previous one)
    s.apply_patch("solution.py", [("        self.scale = 2\n", "        self.scale = 4\n"), (L3, L4)])
    s.apply_patch("solution.py", [(L4, L5)])
    b.check(style="plain")
    s.end("Done.")
    b.grade("PASS", peak_fraction=0.1)


def heredoc_rewrites(b, s):
    _first_write(b, V1)
    s.heredoc("solution.py", V1.replace(L2, L4))
    b.check(style="plain")
    s.sed_i("solution.py", "x * 4", "x * 6")
    s.cp("solution.py", "solution_backup.py")
    s.heredoc("solution.py", V1.replace(L2, L5))
    s.cp("solution_backup.py", "solution.py")   # restore v3's content: archived = v5 (same sha as v3)
    s.end("Done.")
    b.grade("PASS", peak_fraction=0.1)


def stress_disabled(b, s):
    _first_write(b, V1)
    b.check(style="nostress")
    s.end("Done.")
    b.grade("PASS", peak_fraction=0.1)


def cut_by_402_after_last_edit(b, s):
    _first_write(b, V1)
    b.check(style="plain")
    s.edit("solution.py", L2, L6)
    s.bash("ls -la", "total 8\n", 0)
    s.api_error(402, "API Error: 402 Insufficient credits")
    if b.harness == "claude":
        s.end("API Error: 402", is_error=True, subtype="error", terminal_reason="api_error", api_error_status=402)
    # elsewhere the error record is the last line (OpenCode/Gemini error event; Codex and Kimi
    # carry it only in stderr.log, so their session simply stops without a terminal marker)
    b.grade("PASS", peak_fraction=0.1)


PATTERNS = {
    "superseded_pass": (superseded_pass, FORMATS),
    "clean": (clean_last_edit_before_pass, FORMATS),
    "background": (background_check, ["claude", "codex"]),   # the only formats with deferred output (spec 5.2, 5.3)
    "patch_chain": (patch_chain, FORMATS),
    "heredoc": (heredoc_rewrites, FORMATS),
    "stress": (stress_disabled, FORMATS),
    "cut_402": (cut_by_402_after_last_edit, FORMATS),
}
CASES = [(p, h) for p, (_, hs) in PATTERNS.items() for h in hs]


@pytest.mark.parametrize("pattern,harness", CASES, ids=[f"{p}-{h}" for p, h in CASES])
def test_labels_exact(tmp_path, pattern, harness):
    label, store, rid = _run(tmp_path, harness, PATTERNS[pattern][0])
    _assert_matches_labels(label, store, rid)
    rules = _rules(store, rid)
    checks = _checks(store, rid)
    vs = _versions(store, rid)
    assert all(not v["gap"] for v in vs)
    for f in rules.values():  # every finding cites a tool call or a transcript line
        assert f["call_seq"] is not None or f["transcript_line"] is not None or f["rule"].startswith("post-session")
    if pattern == "superseded_pass":
        assert len(vs) == 2 and [c["solution_version"] for c in checks] == [1, 1]
        assert "superseded-pass" in rules and "final-never-checked" in rules
        assert rules["superseded-pass"]["call_seq"] == checks[0]["call_seq"]
        assert "edits-after-last-pass" in rules and rules["edits-after-last-pass"]["data"]
        assert "final-version-passed" not in rules
    elif pattern == "clean":
        assert [c["outcome"] for c in checks] == ["FAIL", "PASS", "OK"]
        assert checks[1]["is_final_version"] and not checks[1]["superseded"]
        assert "final-version-passed" in rules
        assert "superseded-pass" not in rules and "final-never-checked" not in rules
        assert "edits-after-last-pass" not in rules
    elif pattern == "background":
        assert checks[0]["background"] and checks[0]["outcome"] == "PASS"
        assert "superseded-pass" in rules
    elif pattern == "patch_chain":
        assert len(vs) == 4 and [c["solution_version"] for c in checks] == [2, 4]
        assert checks[-1]["is_final_version"] and "final-version-passed" in rules
    elif pattern == "heredoc":
        assert [v["op"] for v in vs] == ["write" if harness != "codex" else "heredoc", "heredoc", "sed_i", "heredoc", "cp"]
        assert vs[-1]["sha256"] == vs[2]["sha256"]
        # the check ran on v2; the archived file is v5
        assert checks[0]["solution_version"] == 2 and checks[0]["superseded"]
    elif pattern == "stress":
        assert checks[0]["env_weakening"] == ["KBH_NUMERIC_STRESS=0"]
        assert rules["stress-disabled"]["severity"] == "high"
        assert rules["stress-disabled"]["call_seq"] == checks[0]["call_seq"]
    elif pattern == "cut_402":
        end_rule = "session-ended-api-error" if "session-ended-api-error" in rules else "session-cut-off"
        assert end_rule in rules
        data = rules[end_rule]["data"]
        assert data["calls_after_last_edit"] == 1     # the `ls` after the last edit
        assert "superseded-pass" in rules and "final-never-checked" in rules


@pytest.mark.parametrize("harness", ["claude", "opencode", "gemini"])
def test_402_is_reported_as_api_error(tmp_path, harness):
    _, store, rid = _run(tmp_path, harness, cut_by_402_after_last_edit)
    rules = _rules(store, rid)
    assert "session-ended-api-error" in rules
    assert "402" in rules["session-ended-api-error"]["message"]


# ---------------------------------------------------------------------- gaps and anchoring

def _native_edit(b, path, old, new):
    """A native edit call of the harness, made without the generator's file model (so it can edit
    a file the transcript never wrote)."""
    s = b.session
    p = s.path(path)
    h = b.harness
    if h == "claude":
        return s.tool("Edit", {"file_path": p, "old_string": old, "new_string": new},
                      f"The file {p} has been updated successfully.")
    if h == "opencode":
        return s.tool("edit", {"filePath": p, "oldString": old, "newString": new}, "Edit applied successfully.")
    if h == "kimi":
        return s.tool("StrReplaceFile", {"path": p, "edit": {"old": old, "new": new}},
                      "<system>File successfully edited. Applied 1 edit(s) with 1 total replacement(s).</system>")
    if h == "gemini":
        return s.tool("replace", {"file_path": p, "old_string": old, "new_string": new},
                      f"Successfully modified file: {p} (1 replacements).")
    raise ValueError(h)


@pytest.mark.parametrize("harness", ["claude", "opencode", "kimi", "gemini"])
def test_gap_from_unknown_base_resolved_by_final(tmp_path, harness):
    final = V1.replace(L2, L5).replace("self.scale = 2", "self.scale = 9")

    def build(b, s):
        _native_edit(b, "solution.py", L2, L4)              # v1: first edit, base never written
        b.check(style="plain")
        _native_edit(b, "solution.py", L4, L5)              # v2
        _native_edit(b, "solution.py", "self.scale = 2", "self.scale = 9")  # v3
        s.end("Done.")
        b.final_solution = final
        b.grade("PASS", peak_fraction=0.1)

    _, store, rid = _run(tmp_path, harness, build)
    vs = _versions(store, rid)
    assert len(vs) == 3
    # walking back from the archived final through the reversible edits resolves every gap
    assert [v["basis"] for v in vs] == ["anchor", "anchor", "anchor"]
    assert vs[-1]["matches_final"] and not any(v["gap"] for v in vs)
    t = timeline(store, rid)
    contents = store.query("select version, content from file_versions where run_id = ? and is_solution "
                           "order by version", [rid])
    assert contents[0]["content"] == V1.replace(L2, L4).replace("self.scale = 2", "self.scale = 2")
    assert contents[1]["content"] == V1.replace(L2, L5)
    assert t["checks"][0]["solution_version"] == 1 and t["checks"][0]["superseded"]


@pytest.mark.parametrize("harness", ["claude", "opencode", "kimi", "gemini"])
def test_gap_stays_when_final_does_not_fit(tmp_path, harness):
    def build(b, s):
        _native_edit(b, "solution.py", L2, L4)              # unknown base: gap
        b.check(style="plain")
        s.end("Done.")
        b.final_solution = "something else entirely\n"       # last edit's new text is not in the final
        b.grade("PASS", peak_fraction=0.1)

    _, store, rid = _run(tmp_path, harness, build)
    vs = _versions(store, rid)
    assert len(vs) == 1 and vs[0]["gap"] and "unknown base" in vs[0]["gap_reason"]
    rules = _rules(store, rid)
    assert "final-matches-no-version" in rules and rules["final-matches-no-version"]["severity"] == "low"
    assert "post-session-grade-untied" in rules


@pytest.mark.parametrize("harness", ["claude", "codex", "opencode", "gemini"])
def test_final_matches_no_version(tmp_path, harness):
    def build(b, s):
        _first_write(b, V1)
        b.check(style="plain")
        s.end("Done.")
        b.final_solution = V1.replace(L2, L6)                # changed outside the recorded calls
        b.grade("PASS", peak_fraction=0.1)

    label, store, rid = _run(tmp_path, harness, build)
    _assert_matches_labels(label, store, rid)
    rules = _rules(store, rid)
    assert rules["final-matches-no-version"]["severity"] == "medium"
    assert "post-session-grade-untied" in rules and "final-never-checked" in rules
    assert _checks(store, rid)[0]["superseded"]


# ---------------------------------------------------------------------- detection details

@pytest.mark.parametrize("harness", ["claude", "codex", "opencode", "kimi"])
def test_inspections_are_not_runs_and_wrappers_are(tmp_path, harness):
    wrapper = ("import subprocess, sys\n"
               "r = subprocess.run([sys.executable, 'check.py'], capture_output=True, text=True)\n"
               "print(r.stdout)\n")

    def build(b, s):
        _first_write(b, V1)
        s.bash("sed -n '1,40p' check.py", b.template("check.py")[:400], 0)
        s.bash("rg -n 'PASS' check.py", "88:    print('PASS')\n", 0)
        s.bash("cat benchmark.py | head -5", b.template("benchmark.py")[:200], 0)
        s.heredoc("full_validate.py", wrapper)
        s.bash("uv run python full_validate.py", "PASS\n", 0)
        s.bash("uv run python check.py 2>&1 | grep -E 'shape=|peak'", "", 1)
        s.end("Done.")
        b.grade("PASS", peak_fraction=0.1)

    _, store, rid = _run(tmp_path, harness, build)
    checks = _checks(store, rid)
    assert [(c["script"], c["outcome"]) for c in checks] == [("wrapper", "PASS"), ("check", "UNKNOWN")]
    details = store.query("select details from check_runs where run_id = ? order by call_seq", [rid])
    assert "full_validate.py" in details[0]["details"]
    assert "grep" in details[1]["details"]


def test_trajectory_entries_order_and_content(tmp_path):
    def build(b, s):
        _first_write(b, V1)
        b.check(style="plain")
        b.benchmark(target=0.12)
        s.edit("solution.py", L2, L3)
        s.edit("solution.py", "self.scale = 2", "self.scale = 3")
        b.check(style="plain")
        b.benchmark(target=0.25)
        s.end("Done.")
        b.grade("PASS", peak_fraction=0.25)

    _, store, rid = _run(tmp_path, "claude", build)
    tr = trajectory_entries(store, rid)
    events = [e["event"] for e in tr]
    assert events == ["version", "check", "benchmark", "version", "check", "benchmark", "final", "end", "grade"]
    seqs = [e["call_seq"] for e in tr[:6]]
    assert seqs == sorted(seqs) and None not in seqs
    assert tr[3]["version"] == 3 and tr[3]["edits"] == 2
    assert tr[2]["peak_fraction"] is not None and tr[5]["peak_fraction"] is not None
    assert tr[6]["version"] == 3 and all(e["text"] for e in tr)
    assert all(e["transcript_line"] for e in tr[:6])


def test_wrapper_known_only_from_the_archived_scratch_copy(tmp_path):
    def build(b, s):
        _first_write(b, V1)
        s.bash("python3 full_validate.py", "all shapes ok\nPASS\n", 0)   # never written in the transcript
        s.end("Done.")
        b.scratch["full_validate.py"] = b"import os, subprocess\nos.environ['KBH_NUMERIC_STRESS'] = '0'\n" \
            b"subprocess.run(['python', 'check.py'])\n"
        b.grade("PASS", peak_fraction=0.1)

    _, store, rid = _run(tmp_path, "opencode", build)
    (c,) = _checks(store, rid)
    assert c["script"] == "wrapper" and c["outcome"] == "PASS" and c["is_final_version"]
    assert c["env_weakening"] == ["KBH_NUMERIC_STRESS=0"]
    assert "stress-disabled" in _rules(store, rid)


# ---------------------------------------------------------------------- a generated archive

def test_generated_archive_agrees_with_labels(tmp_path):
    """Every run of a generated archive (all harness formats the generator writes): versions and
    check runs equal the labels.  Two documented differences are allowed: a Codex `*** Add File`
    is rebuilt with real apply_patch semantics (one line per '+' line, so the generator's trailing
    '+' line adds a blank line the label does not have), and a run whose call has no result at all
    (session cut off mid-command) is kept as UNKNOWN where the labels leave it out."""
    from devkit.generator import generate

    labels = generate(tmp_path / "arch", runs=14, seed=9)["runs"]
    store = Store(":memory:")
    ingest_path(store, tmp_path / "arch")
    analyze(store)
    known = set(store.run_ids())
    n_checked = 0
    for key, lab in labels.items():
        rid = key if key in known else key.split("@")[0]
        assert rid in known
        got_c = [(c["call_seq"], c["script"], c["solution_version"], c["superseded"],
                  {"OK": "PASS", "PASS": "PASS", "FAIL": "FAIL"}.get(c["outcome"], "UNKNOWN"))  # label vocabulary
                 for c in store.query("select * from check_runs where run_id = ? order by call_seq, script", [rid])
                 if loads_json(c["details"]).get("n_results", 0) > 0]
        exp_c = [(c["call_seq"], c["script"], c["solution_version"], c["superseded"], c["outcome"])
                 for c in lab["check_runs"]]
        assert got_c == exp_c, rid
        vs = _versions(store, rid)
        assert [(v["version"], v["call_seq"]) for v in vs] == \
            [(v["version"], v["call_seq"]) for v in lab["solution_versions"]], rid
        if lab["harness"] != "codex":
            assert [v["sha256"] for v in vs] == [v["sha256"] for v in lab["solution_versions"]], rid
        n_checked += 1
    assert n_checked == len(labels)
