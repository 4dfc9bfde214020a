"""The one line grammar of check/benchmark output (`forensics.archive.lines`), read by the runner
log parsers (`forensics.archive.logs`) and by the timeline's outcome of in-transcript runs."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analyze.timeline.outcome import parse_output
from forensics.archive.lines import classify
from forensics.archive.logs import parse_benchmark_log, parse_check_log

CHECK = ("building...\nPROPERTY_SEED: 7\nFAILED to import apex (optional)\n"
         "FAIL: shape 2 {'m': 64} seed 42 case large_input: tolerance exceeded\nPASS\n")
BENCH = ("shape=0 variant=solution tflops=1.5 ms=0.080\nshape=0 solution_peak_fraction=0.1335\n"
         "shape ctx=2048: solution 0.41 ms/tok (ref 0.9) speedup 2.20x\npeak_fraction: 0.1162\nRESULT: OK\n")


def test_fail_line_is_fail_or_fail_colon_for_both_readers():
    s = parse_check_log(CHECK)
    assert s.verdict == "FAIL" and s.fail_reason.startswith("FAIL: shape 2")
    fails = [r for r in s.rows if r["kind"] == "fail"]
    assert len(fails) == 1 and fails[0]["shape"] == 2 and fails[0]["case_name"] == "large_input"
    o = parse_output(CHECK, "check", 0, None, True)
    assert o.outcome == "FAIL" and o.fail_reason == s.fail_reason
    assert parse_check_log("FAILED to import apex\nPASS\n").verdict == "PASS"
    assert parse_output("FAILED to import apex\nPASS\n", "check", 0, None, True).outcome == "PASS"
    assert parse_check_log("FAIL\n").verdict == "FAIL" and parse_output("FAIL\n", "check", 0, None, True).outcome == "FAIL"


def test_benchmark_lines_agree():
    b = parse_benchmark_log(BENCH)
    o = parse_output(BENCH, "benchmark", 0, None, True)
    assert b.peak_fraction == o.peak_fraction == 0.1162 and b.n_peak_lines == 1 and o.result_labels == ["OK"]
    kinds = [r["kind"] for r in b.rows]
    assert kinds == ["shape", "shape_fraction", "shape", "peak_fraction", "result"]
    assert b.rows[2]["fields"] == {"ctx": 2048, "ms_per_tok": 0.41, "speedup": 2.2}
    assert o.shape_lines[0] == {"shape": 0, "variant": "solution", "tflops": 1.5, "ms": 0.08}
    assert o.shape_lines[2]["speedup"] == 2.2


def test_peak_fraction_values():
    assert classify("peak_fraction: -inf").value == -math.inf
    assert math.isnan(classify("peak_fraction: NaN").value)
    bad = classify("peak_fraction: 1.2.3")          # a peak line the grader cannot read
    assert bad.kind == "peak_fraction" and bad.value is None
    assert parse_benchmark_log("peak_fraction: 1.2.3\n").n_peak_lines == 1
    assert parse_output("peak_fraction: 1.2.3\n", "benchmark", 0, None, True).peak_fraction is None
    assert classify("kv_cache=0x7PASS") is None and classify("  PASS") is None   # callers strip


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(CHECK.splitlines() + BENCH.splitlines() + ["", "x", "ValueError: bad", "WARN: y"]),
                max_size=12))
def test_both_readers_see_the_same_pass_fail_and_peak(lines):
    text = "\n".join(lines)
    s, b = parse_check_log(text), parse_benchmark_log(text)
    o = parse_output(text, "benchmark", 0, None, True)
    assert o.n_pass_lines == s.n_pass_lines
    assert (o.outcome == "FAIL") == (s.verdict == "FAIL")
    if s.verdict == "FAIL":
        assert o.fail_reason == s.fail_reason
    assert len(o.peak_fractions) == b.n_peak_lines and (b.peak_fraction is None) == (not o.peak_fractions)
