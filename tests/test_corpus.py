"""Tests of the synthetic corpus: determinism, spec invariants, labels that match the files written,
and the committed fixture equal to a fresh `forensics corpus fixture`."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from devkit.generator.cli import corpus_cmd
from devkit.generator.generate import generate
from devkit.generator.labels import validate
from devkit.generator.session import is_check_command

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "corpus" / "fixtures"


# ----------------------------------------------------------------------------- helpers
def tree(root: Path) -> dict[str, bytes | str]:
    """relative path -> bytes (files) or 'link:<target>' (symlinks)."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                out[rel] = p.read_bytes()
    return out


def read_source(p: Path) -> bytes:
    data = p.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def json_lines(data: bytes):
    for ln in data.split(b"\n"):
        if not ln.startswith(b"{"):
            continue
        try:
            yield orjson.loads(ln.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            continue


_CURSOR = re.compile(r"^(\w+)ToolCall$")


def recount_calls(fmt: str, data: bytes) -> tuple[list[str], list[dict]]:
    """Independent re-parse of the tool source: (tool names in order, input dicts in order)."""
    names, inputs = [], []
    for o in json_lines(data):
        if fmt == "claude" and o.get("type") == "assistant":
            for b in o["message"]["content"]:
                if b.get("type") == "tool_use":
                    names.append(b["name"])
                    inputs.append(b["input"])
        elif fmt == "codex" and o.get("type") == "response_item":
            pl = o["payload"]
            if pl.get("type") == "function_call":
                names.append(pl["name"])
                inputs.append(orjson.loads(pl["arguments"]))
            elif pl.get("type") == "custom_tool_call":
                names.append(pl["name"])
                inputs.append({"input": pl["input"]})
        elif fmt == "opencode" and o.get("type") == "tool_use":
            names.append(o["part"]["tool"])
            inputs.append(o["part"]["state"]["input"])
        elif fmt == "cursor" and o.get("type") == "tool_call" and o.get("subtype") == "started":
            (key, val), = o["tool_call"].items()
            names.append(_CURSOR.match(key).group(1))
            inputs.append(val["args"])
        elif fmt == "gemini" and o.get("type") == "tool_use":
            names.append(o["tool_name"])
            inputs.append(o["parameters"])
        elif fmt == "kimi" and o.get("role") == "assistant":
            for tc in o.get("tool_calls") or []:
                names.append(tc["function"]["name"])
                try:
                    inputs.append(orjson.loads(tc["function"]["arguments"]))
                except orjson.JSONDecodeError:
                    inputs.append({})
        elif fmt == "droid" and o.get("type") == "tool_call":
            names.append(o["toolName"])
            inputs.append(o["parameters"])
        elif fmt == "grok_chat" and o.get("type") == "assistant":
            for tc in o.get("tool_calls") or []:
                names.append(tc["name"])
                inputs.append(orjson.loads(tc["arguments"]))
    return names, inputs


def parse_run_id(rid: str, problems: set[str]):
    m = re.match(r"^(\d{8})_(\d{6})_([^_]+)_(.+)$", rid)
    assert m, rid
    rest = m.group(4)
    suffix = None
    s = re.match(r"^(.+)_(\d+)_(\d{1,3})$", rest)
    if s and not any(rest.endswith(p) for p in problems):
        rest, suffix = s.group(1), f"{s.group(2)}_{s.group(3)}"
    prob = next(p for p in sorted(problems, key=len, reverse=True) if rest.endswith("_" + p))
    return datetime.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S"), m.group(3), rest[: -len(prob) - 1], prob, suffix


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def gen40(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen40")
    doc = generate(out, runs=40, seed=11, scale=0.15)
    return out, doc


@pytest.fixture(scope="module")
def fixture_doc():
    return orjson.loads((FIXTURE / "labels.json").read_bytes())


def all_runs(root: Path, doc: dict):
    for key, lab in doc["runs"].items():
        yield key, lab, root / lab["path"]


# ----------------------------------------------------------------------------- tests
def test_generate_is_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    generate(a, runs=10, seed=5, scale=0.1)
    generate(b, runs=10, seed=5, scale=0.1)
    ta, tb = tree(a), tree(b)
    assert ta.keys() == tb.keys()
    diff = [k for k in ta if ta[k] != tb[k]]
    assert not diff, diff[:5]
    c = tmp_path / "c"
    generate(c, runs=10, seed=6, scale=0.1)
    assert tree(c) != ta


def test_every_format_and_era_in_40_runs(gen40):
    out, doc = gen40
    runs = doc["runs"].values()
    fmts = {r["transcript_format"] for r in runs}
    assert {"claude", "codex_text", "opencode", "cursor", "gemini", "kimi", "droid", "grok_stream"} <= fmts
    assert {r["era"] for r in runs} == {"E0", "E1", "E2", "E3", "E4", "E5"}
    assert any(r["container"] for r in runs) and any(not r["container"] for r in runs)
    assert validate(doc) == []


def check_invariants(res: dict, run_dir: Path, era: str) -> None:
    if res.get("correct"):
        assert res["has_solution"] and not res.get("template_mutated", False)
        if era in ("E3", "E4", "E5") and res.get("check_exit_code") is not None:
            assert res["check_exit_code"] == 0
    if res.get("correct") and res.get("benchmark_exit_code") == 0 and "failure_reason" in res:
        assert res["failure_reason"] == "pass"
    if res.get("peak_fraction") is not None:
        assert res["correct"]
        bl = (run_dir / "benchmark.log").read_text()
        line = next(ln for ln in bl.splitlines() if ln.startswith("peak_fraction:"))
        assert float(line.split(":")[1]) == res["peak_fraction"]
    if not res["has_solution"]:
        assert res.get("check_exit_code") is None and res.get("benchmark_exit_code") is None
        assert not (run_dir / "check.log").exists() and not (run_dir / "benchmark.log").exists()
    if res.get("check_exit_code") not in (None, 0):
        assert res.get("benchmark_exit_code") is None and not (run_dir / "benchmark.log").exists()
    if res["harness_exit_code"] == 124:
        assert res["session_complete"] is False
    if era != "E0":
        assert res["end_epoch"] - res["start_epoch"] == res["total_elapsed_seconds"]
        assert res["harness_end_epoch"] - res["start_epoch"] == res["elapsed_seconds"]
        used = res["elapsed_seconds"] + (res["check_elapsed_seconds"] or 0) + (res["benchmark_elapsed_seconds"] or 0)
        if "regrade" not in res:
            assert res["total_elapsed_seconds"] >= used
        st = datetime.fromisoformat(res["started_at"]).replace(tzinfo=None)
        ts = datetime.strptime("_".join(run_dir.name.split("_")[:2]), "%Y%m%d_%H%M%S")
        assert abs((st - ts).total_seconds()) <= 1
    else:
        assert len(res) == 11 and not (run_dir / "repo").exists() and not (run_dir / "gpu_lock.log").exists()


@pytest.mark.parametrize("which", ["gen40", "fixture"])
def test_result_json_invariants(which, gen40, fixture_doc):
    root, doc = (gen40 if which == "gen40" else (FIXTURE / "archive", fixture_doc))
    for key, lab, run_dir in all_runs(root, doc):
        res = orjson.loads((run_dir / "result.json").read_bytes())
        check_invariants(res, run_dir, lab["era"])
        # usage object inline on one line, 4-space indentation (spec 3.1)
        txt = (run_dir / "result.json").read_text()
        assert re.search(r'^    "usage": \{.*\}', txt, re.M), key


@pytest.mark.parametrize("which", ["gen40", "fixture"])
def test_run_ids_parse_back(which, gen40, fixture_doc):
    from devkit.generator import decks
    root, doc = (gen40 if which == "gen40" else (FIXTURE / "archive", fixture_doc))
    problems = {p for (_, p) in decks.PROBLEMS}
    for key, lab, run_dir in all_runs(root, doc):
        ts, harness, slug, prob, suffix = parse_run_id(lab["run_id"], problems)
        assert harness == lab["harness"] and prob == lab["problem"]
        assert suffix == lab["collision_suffix"]
        model = lab["model"]
        assert slug == re.sub(r"[/:\[\] ]", "_", model)
        try:
            from forensics.archive.runid import parse_run_id as theirs
        except ImportError:  # pragma: no cover - the archive package is another part of the tool
            continue
        r = theirs(lab["run_id"])
        assert r is not None and r.problem == lab["problem"] and r.harness == lab["harness"]


def _tool_fmt(lab: dict) -> str | None:
    return lab["tool_source_format"]


@pytest.mark.parametrize("which", ["gen40", "fixture"])
def test_labels_match_files(which, gen40, fixture_doc):
    root, doc = (gen40 if which == "gen40" else (FIXTURE / "archive", fixture_doc))
    for key, lab, run_dir in all_runs(root, doc):
        src = lab["tool_source"]
        if src is None or lab["transcript_format"] in ("empty", "missing"):
            assert lab["tool_calls"]["total"] == 0
            continue
        data = read_source(run_dir / src)
        names, inputs = recount_calls(_tool_fmt(lab), data)
        assert len(names) == lab["tool_calls"]["total"], key
        by: dict[str, int] = {}
        for n in names:
            by[n] = by.get(n, 0) + 1
        assert by == lab["tool_calls"]["by_tool"], key
        # records: physical non-empty lines of every labelled source
        for s, n in lab["records"].items():
            d = read_source(run_dir / s)
            assert sum(1 for ln in d.split(b"\n") if ln.strip()) == n, (key, s)
        # check runs point at shell calls that run check.py / benchmark.py
        for c in lab["check_runs"]:
            inp = inputs[c["call_seq"] - 1]
            cmd = inp.get("command") or inp.get("cmd")
            assert cmd and is_check_command(cmd) == c["script"], (key, cmd)
            assert c["superseded"] == (c["solution_version"] != lab["final_version"])
        # versions: call numbers increase; the final version's hash is the archived solution's
        seqs = [v["call_seq"] for v in lab["solution_versions"]]
        assert seqs == sorted(seqs)
        if lab["final_version"] is not None:
            sol = run_dir / "solution.py"
            if not sol.exists():
                sol = run_dir / "repo" / "problems" / lab["problem"] / "solution.py"
            h = hashlib.sha256(sol.read_bytes()).hexdigest()
            assert lab["solution_versions"][lab["final_version"] - 1]["sha256"] == h == lab["final_sha256"]


def test_foreign_refs_are_real_earlier_runs(fixture_doc, gen40):
    for root, doc in ((FIXTURE / "archive", fixture_doc), gen40):
        by_id = {lab["run_id"]: lab for lab in doc["runs"].values()}
        for key, lab, run_dir in all_runs(root, doc):
            for fr in lab["foreign_refs"]:
                other = by_id[fr["foreign_run_id"]]
                assert other["run_id"] != lab["run_id"]
                assert other["run_id"][:15] < lab["run_id"][:15], (key, fr)
                if fr["classification"] != "benign_exposure" and fr["foreign_file"]:
                    assert (root / other["path"] / fr["foreign_file"]).exists(), fr
            if lab["expected"]["contamination"] == "contaminated":
                assert any(f["classification"] in ("deliberate_read", "copy") for f in lab["foreign_refs"])


def test_copy_text_reappears_in_later_write(fixture_doc):
    root = FIXTURE / "archive"
    for key, lab, run_dir in all_runs(root, fixture_doc):
        for fr in lab["foreign_refs"]:
            if fr["classification"] != "copy":
                continue
            other = next(x for x in fixture_doc["runs"].values() if x["run_id"] == fr["foreign_run_id"])
            foreign = (root / other["path"] / fr["foreign_file"]).read_bytes()
            version = next(v for v in lab["solution_versions"] if v["call_seq"] == fr["call_seq"])
            assert version["sha256"] == hashlib.sha256(foreign).hexdigest()


def test_sizes_are_realistic(tmp_path):
    out = tmp_path / "g"
    doc = generate(out, runs=9, seed=2, scale=1.0)
    claude = [r for r in doc["runs"].values() if r["transcript_format"] == "claude" and r["tool_calls"]["total"]]
    assert claude
    for r in claude:
        assert 100 <= r["tool_calls"]["total"] <= 520
        assert r["transcript_bytes"] >= 2_000_000
        assert r["record_types"]["transcript.jsonl"].get("system", 0) >= 10_000
    others = [r for r in doc["runs"].values() if r["transcript_format"] not in ("claude",) and r["tool_calls"]["total"]]
    assert all(20 <= r["tool_calls"]["total"] <= 260 for r in others)


def test_fixture_covers_formats_eras_and_cases(fixture_doc):
    runs = list(fixture_doc["runs"].values())
    assert validate(fixture_doc) == []
    fmts = {r["transcript_format"] for r in runs}
    assert {"claude", "codex_text", "opencode", "cursor", "gemini", "kimi", "droid", "grok_stream", "empty",
            "missing"} <= fmts
    assert {r["era"] for r in runs} == {"E0", "E1", "E2", "E3", "E4", "E5"}
    reasons = {e["reason"] for r in runs for e in r["parse_errors"]}
    assert {"invalid_json", "invalid_utf8", "unknown_record", "truncated_line", "empty_file", "missing_file"} <= reasons
    assert {r["transcript_encoding"] for r in runs} >= {"gzip_file", "gzip_bytes", "plain"}
    verdicts = {r["expected"]["verdict"] for r in runs}
    assert {"clean", "reward_hack", "contamination", "rubric_leak", "fail", "retryable_infra_failure"} <= verdicts
    ms = {r["expected"]["measurement_status"] for r in runs}
    assert {"in_run_contended", "sequential_isolated", "sequential_isolated_empirical_failed", "ungraded_recovered",
            "sequential_isolated_wrong_hardware_sku", "sequential_isolated_reward_hack"} <= ms
    assert any(r["expected"]["exclude_from_denominator"] for r in runs)
    assert any(c["superseded"] for r in runs for c in r["check_runs"])
    assert any(c["numeric_stress_disabled"] for r in runs for c in r["check_runs"])
    assert {"benign_exposure", "deliberate_read", "copy"} == {f["classification"] for r in runs for f in r["foreign_refs"]}
    assert any(r["root"] != "runs" for r in runs) and any(r["collision_suffix"] for r in runs)
    total = sum(len(v) for v in tree(FIXTURE / "archive").values())
    assert total <= 6_000_000


PATTERNS = {
    "ptr_keyed_cache": r"data_ptr\(\)", "sampled_window_cache": r"\[:SAMPLE\]", "evict_last_flush_defeat": r"evict_last",
    "persisting_l2": r"cudaAccessPropertyPersisting", "global_torch_flag": r"allow_bf16_reduced_precision_reduction = True",
    "id_keyed_state": r"id\(state\)", "decode_ignores_caches": r"kc, vc = model\._rt", "cuda_compile_error": r"(mt \* 16 < D|unsigned short blk_cnt)",
    "nonportable_include": r"/opt/pytorch/.*/cutlass/include", "forbidden_op": r"torch\.topk\(",
    "shfl_lane_bug": r"__shfl_sync\(0xffffffff, bv, src\)", "launch_state_bug": r"static int configured",
    "cuda_graph_replay_ok": r"static_\w+\.copy_\(|dst\.copy_\(src\)", "version_keyed_weight_cache_ok": r"_version",
    "ptr_keyed_launch_plan": r"expert_offsets\.data_ptr\(\)", "grid_sync_race": r"_env_step_blocks",
    "id_keyed_weight_cache": r"id\(model\)",
}


def test_planted_patterns_are_in_the_final_source(fixture_doc):
    root = FIXTURE / "archive"
    for key, lab, run_dir in all_runs(root, fixture_doc):
        sol = run_dir / "solution.py"
        if not sol.exists():
            sol = run_dir / "repo" / "problems" / lab["problem"] / "solution.py"
        if not sol.exists():
            continue
        src = sol.read_text()
        for d in lab["defects"]:
            if d in PATTERNS:
                assert re.search(PATTERNS[d], src), (key, d)
        if "ptr_keyed_cache" not in lab["defects"] and "sampled_window_cache" not in lab["defects"]:
            assert "SAMPLE]" not in src


def test_sampled_pad_cache_is_really_stale_and_lookalike_is_not(tmp_path):
    """The planted sampled-window pad cache returns stale data after an in-place change outside its
    4096-byte sample; the pointer+_version look-alike recomputes."""
    torch = pytest.importorskip("torch")
    import importlib.util

    from devkit.generator import solutions

    same = {}
    for variant in ("sampled_ptr", "ptr_version"):
        p = tmp_path / f"sol_{variant}.py"
        p.write_text(solutions.solution("01_fp8_gemm", pad_cache=variant))
        spec = importlib.util.spec_from_file_location(f"sol_{variant}", p)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        M, N, K = 256, 32, 40  # odd K -> padded path; row 255 starts at byte 10200 > 4096
        m = mod.Model(M, N, K)
        g = torch.Generator().manual_seed(0)
        m.weight.copy_((torch.rand(N, K, generator=g) * 8 - 4).to(torch.float8_e4m3fn))
        x = (torch.rand(M, K, generator=g) * 8 - 4).to(torch.float8_e4m3fn)
        m(x)
        x[-1].copy_(torch.full((K,), 2.0).to(torch.float8_e4m3fn))
        got = m(x)
        mod._pad_cache.clear()
        ref = m(x)
        same[variant] = torch.equal(got, ref)
    assert same == {"sampled_ptr": False, "ptr_version": True}


def test_committed_fixture_equals_fresh_output(tmp_path):
    r = CliRunner().invoke(corpus_cmd, ["fixture", str(tmp_path / "fx"), "--json"])
    assert r.exit_code == 0, r.output
    fresh = tree(tmp_path / "fx")
    committed = {"archive/" + k: v for k, v in tree(FIXTURE / "archive").items()}
    committed["labels.json"] = (FIXTURE / "labels.json").read_bytes()
    assert set(committed) == set(fresh), sorted(set(committed) ^ set(fresh))[:10]
    bad = [k for k in committed if committed[k] != fresh[k]]
    assert not bad, bad[:10]


def test_cli_generate_json(tmp_path):
    r = CliRunner().invoke(corpus_cmd, ["generate", str(tmp_path / "o"), "--runs", "3", "--seed", "1", "--scale", "0.1",
                                        "--json"])
    assert r.exit_code == 0, r.output
    s = orjson.loads(r.output)
    assert s["runs"] == 3 and s["bytes"] > 0
    assert (tmp_path / "o" / "labels.json").exists()
