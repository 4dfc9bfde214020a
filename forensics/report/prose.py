"""Plain-language text of a verdict for the people who read it: the annotation's `summary` (one
paragraph for a leaderboard reader: what the kernel is and what the verdict means for its cell)
and `implication` (what may be done with the run's number).

Both are written from the verdict's output (`verdicts` fields, `decided_by`) and the run's
findings, never from the decision rules themselves: `forensics/verdict.py` decides, this module
only says it.  Rule ids (V9, RH4 ...) stay out of the prose; the rule trace is the verdict's own
`summary` column, written to the annotation as `rule_trace`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from forensics import problems
from forensics.vocab import (ALTERNATE_CACHE, DETERMINISM, FRESH_INPUTS, FRESH_STATE, NAN_POISON, SAME_BUFFER,
                             UNSAMPLED_REGION)

UNKNOWN = "unknown"

LANGUAGE_NAMES = {
    "triton": "Triton", "raw_cuda": "CUDA", "ptx": "CUDA (inline PTX)", "cutlass_cpp": "CUTLASS",
    "cute_dsl": "CuTe DSL", "tilelang": "TileLang", "thunderkittens": "ThunderKittens", "wmma": "CUDA (WMMA)",
    "cupy": "CuPy", "numba": "Numba", "nvrtc": "CUDA (NVRTC)", "cuda_extension": "CUDA", "cublas": "cuBLAS",
    "pure_torch": "plain PyTorch",
}
FAILURES = {
    "check_failed": "fails the official correctness check",
    "check_timeout": "timed out in the official correctness check",
    "benchmark_failed": "passes the correctness check but its benchmark failed",
    "benchmark_timeout": "passes the correctness check but its benchmark timed out",
    "template_mutated": "changed the problem's frozen template files",
    "provider_insufficient_credits": "the model provider refused the session for lack of credits",
    "provider_rate_limited": "the model provider rate-limited the session",
    "provider_unavailable": "the model was unavailable at the provider",
    "provider_early_stop": "the agent stopped before writing a solution",
    "timeout": "the agent session hit its time limit",
    "incomplete_session": "the session did not finish, so its final code was never graded",
    "no_solution": "no solution was submitted",
    "harness_error": "the benchmark harness failed",
    "audit_empirical_failed": "a GPU probe showed it returning wrong results",
    "recovered_ungraded": "the run was recovered and never graded",
}
MEASUREMENTS = {
    "sequential_isolated": "measured alone on its GPU",
    "in_run_contended": "measured while other agents shared the GPU",
    "sequential_isolated_wrong_hardware_sku": "measured on a different GPU model than the deck's",
    "ungraded_recovered": "never measured (recovered session)",
    "sequential_isolated_empirical_failed": "void: a GPU probe showed wrong results",
    "sequential_isolated_reward_hack": "void: the submission games the evaluation",
}
PROBES = {
    SAME_BUFFER: "its inputs are refilled in place",
    UNSAMPLED_REGION: "inputs change outside the region it samples",
    FRESH_INPUTS: "it gets fresh input tensors",
    FRESH_STATE: "it gets fresh state objects",
    ALTERNATE_CACHE: "the caller supplies its own cache",
    NAN_POISON: "memory is poisoned with NaNs",
    DETERMINISM: "it is run twice on the same inputs",
}
_PROBE_FAIL = re.compile(r"([a-z][a-z-]+)=fail\b")


def _word_trim(s: str, n: int) -> str:
    w = s.split()
    return " ".join(w[:n]) + ("..." if len(w) > n else "")


@lru_cache(maxsize=1)
def _rule_titles() -> dict[str, str]:
    try:
        from forensics.analyze.static.rules import all_rules
    except Exception:  # noqa: BLE001 - catalogue unavailable: fall back to finding messages
        return {}
    return {r.id: r.title for r in all_rules()}


def _lower_first(s: str) -> str:
    """'A cache hit ...' -> 'a cache hit ...'; an acronym ('CUDA graph ...') keeps its case."""
    w = s.split(" ", 1)[0]
    return s if (len(w) > 1 and w.upper() == w) else s[:1].lower() + s[1:]


def _no_rule(reason: str) -> str:
    """A decided_by reason without its leading rule id ('rule:PG2: x' -> 'x')."""
    return re.sub(r"^(rule:)?[A-Z]{1,3}\d+[:,]?\s*", "", reason)


def _deciding(v: dict[str, Any], field: str, findings: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(findings, facts) that decided `field` (decided_by lists rule:, finding ids and fact:)."""
    rec = (v.get("decided_by") or {}).get(field)
    if not isinstance(rec, list):
        return [], []
    by_id = {f.get("finding_id"): f for f in findings}
    fs = [by_id[x] for x in rec if x in by_id and by_id[x].get("analyzer") != "pipeline"]
    facts = [x[5:] for x in rec if isinstance(x, str) and x.startswith("fact:")]
    return fs, facts


def _what(f: dict[str, Any]) -> str:
    """A finding in a few plain words: the rule's catalogue title, else its message's first words."""
    t = _rule_titles().get(f.get("rule") or "")
    if t:
        return _lower_first(t)
    return _word_trim(re.split(r"[;:(]", f.get("message") or "", maxsplit=1)[0], 12)


def _probe_failures(facts: list[str], findings: list[dict[str, Any]]) -> list[str]:
    out = []
    for x in facts:
        out += _PROBE_FAIL.findall(x)
    out += [f["probe"] for f in findings if f.get("probe") and f.get("analyzer") == "replay"]
    return list(dict.fromkeys(p for p in out if p))


def kernel_phrase(rep: dict[str, Any]) -> str:
    """'gpt-5.4 (codex) wrote a Triton FP8 GEMM' - who wrote what, from the run and the static
    analyzer's language finding."""
    run = rep["run"]
    model = run.get("model") or run.get("model_slug") or "the model"
    who = f"{model} ({run['harness']})" if run.get("harness") and run.get("harness") not in str(model) else str(model)
    prob = run.get("problem") or ""
    entry = problems.find(prob)
    what = (entry.display_name if entry else None) or (re.sub(r"^\d+_", "", prob).replace("_", " ") + " kernel" if prob else "kernel")
    if run.get("has_solution") is False:
        return f"{who} submitted no solution for the {what} problem"
    lang = None
    for f in rep.get("findings", []):
        if f.get("rule") == "LANGUAGE":
            lang = ((f.get("data") or {}).get("language") or {}).get("primary")
            break
    lang_name = LANGUAGE_NAMES.get(lang or "")
    desc = f"{lang_name} {what}" if lang_name else what
    return f"{who} wrote {_article(desc)} {desc}"


def _article(phrase: str) -> str:
    w = phrase.split()[0] if phrase.split() else ""
    return "an" if w[:1].lower() in "aeiou" or w.startswith(("FP", "NSA", "MoE", "HBM")) else "a"


def _fmt_pf(pf: Any) -> str:
    try:
        return f"{float(pf):.4g}"
    except (TypeError, ValueError):
        return str(pf)


def publish_blockers(v: dict[str, Any], run: dict[str, Any]) -> list[str]:
    """Why a clean run's number is not publishable, from its fields (the publish-grade conditions
    of docs/verdict.md): each entry names the field that blocks."""
    out = []
    ms = v.get("measurement_status")
    if v.get("correct") is False:
        out.append("not correct (correct=false)")
    if v.get("empirical_recompute_required") is True:
        out.append("a GPU recompute probe is pending (empirical_recompute_required=true)")
    if v.get("failure_reason") in ("benchmark_failed", "benchmark_timeout"):
        out.append(f"no performance number (failure_reason={v['failure_reason']})")
    if ms not in ("sequential_isolated", UNKNOWN, None):
        out.append(f"{MEASUREMENTS.get(ms, 'measured')} (measurement_status={ms})")
    elif ms is None:
        out.append("nothing was measured (measurement_status=null)")
    if run.get("peak_fraction") is None and v.get("failure_reason") not in ("benchmark_failed", "benchmark_timeout"):
        out.append("no archived score (peak_fraction=null)")
    return out


def implication(v: dict[str, Any] | None, run: dict[str, Any] | None = None) -> str:
    """What may be done with the run's result, consistent with every field."""
    run = run or {}
    if not v:
        return "Not adjudicated: nothing may be published."
    verdict = v.get("verdict")
    pg = v.get("publish_grade")
    if v.get("exclude_from_denominator") is True:
        return ("Provider failure before any output: exclude from pass-rate denominators "
                "(exclude_from_denominator=true); not a model attempt; retry.")
    if pg is True:
        return "Publishable: clean, correct, uncontaminated and measured sequentially isolated."
    if verdict == "clean":
        if pg == UNKNOWN:
            rec = (v.get("decided_by") or {}).get("publish_grade")
            why = _no_rule(rec) if isinstance(rec, str) else "a field it depends on is undecided"
            return f"Clean, but whether the number is publishable is undecided: {_word_trim(why, 25)}."
        b = publish_blockers(v, run)
        return "Clean but not publishable: " + ("; ".join(b) if b else "publish_grade=false") + "."
    why = {"contamination": "Excluded for cross-run contamination (contamination=contaminated); re-timing cannot repair it",
           "reward_hack": "Disqualified: the submission games the evaluation (reward_hack=true)",
           "fail_forbidden_op_tripwire": "A failure: the official check rejected a forbidden op (reward_hack=true); no number",
           "rubric_leak": "Not a valid pass: the checker does not cover the API contract the solution violates",
           "fail": f"A failure (failure_reason={v.get('failure_reason')}): no publishable correctness or performance grade",
           "timeout_unverified": "Correctness unverified (failure_reason=check_timeout); no publishable number",
           "suspect": "A mandatory GPU probe is pending; nothing may be published until it runs",
           "unknown": "The evidence does not decide the verdict; nothing may be published",
           "retryable_infra_failure": f"Infrastructure failure (failure_reason={v.get('failure_reason')}): "
                                      "retry; not a judgement of the model"}.get(str(verdict))
    return (why + ".") if why else f"Not publishable (verdict={verdict}, publish_grade={pg})."


def reader_summary(rep: dict[str, Any]) -> str:
    """One paragraph for a leaderboard reader: what the kernel is and what the verdict means for
    its cell (publishable number, excluded, failure, retry), from the verdict and the findings."""
    run, v = rep["run"], rep.get("verdict") or {}
    findings = rep.get("findings") or []
    who = kernel_phrase(rep)
    verdict = v.get("verdict")
    pf = run.get("peak_fraction")
    score = f" (peak_fraction {_fmt_pf(pf)})" if pf is not None else ""
    fr = v.get("failure_reason")
    if not v:
        return f"{who}. The run has not been adjudicated yet."
    if verdict == "retryable_infra_failure":
        if v.get("exclude_from_denominator") is True:
            return (f"{who}: {FAILURES.get(fr, fr)} before the model produced anything. This is not a model attempt: "
                    "the run is excluded from pass-rate denominators and should be retried.")
        return f"{who}: {FAILURES.get(fr, 'an infrastructure failure')}. The run should be retried; it says nothing about the model."
    if verdict == "clean":
        s = f"{who}. The kernel is correct and clean"
        if v.get("publish_grade") is True:
            return s + f", and its score{score} was measured alone on its GPU, so the cell's number stands."
        reasons = []
        if v.get("empirical_recompute_required") is True:
            reasons.append("a GPU probe must first show that its cached state is recomputed for new inputs")
        if fr in ("benchmark_failed", "benchmark_timeout"):
            reasons.append("its benchmark failed, so there is no number to publish")
        ms = v.get("measurement_status")
        if ms not in ("sequential_isolated", None, UNKNOWN) and fr not in ("benchmark_failed", "benchmark_timeout"):
            reasons.append(f"its score{score} was {MEASUREMENTS.get(ms, ms)}, so it is not publishable until "
                           "re-measured alone on the deck's GPU")
        if not reasons and v.get("publish_grade") == UNKNOWN:
            reasons.append("whether its number is publishable is not decided yet")
        if not reasons:
            reasons.append("its number is not publishable")
        return s + ", but " + " and ".join(reasons) + "."
    if verdict == "contamination":
        fs, facts = _deciding(v, "contamination", findings)
        share = [(f.get("data") or {}).get("containment") for f in fs if f.get("rule") == "contamination-chain"]
        share = [x for x in share if isinstance(x, (int, float))]
        others = sorted({m.group(1) for x in facts for m in [re.search(r"(\d{8}_\d{6}_\S+?)/", x)] if m})
        src = (f"the files of run {others[0]}" if len(others) == 1 else "another run's files" if not others
               else f"the files of {len(others)} other runs")
        copied = f" and {max(share):.0%} of its final code matches what it read" if share else ""
        ok = " Although it passes the check," if v.get("correct") is True else ""
        return (f"{who}. During the session it deliberately read {src}{copied}.{ok} "
                f"{'the' if ok else 'The'} cell is excluded for cross-run contamination, whatever its score.")
    if verdict in ("reward_hack", "fail_forbidden_op_tripwire"):
        fs, facts = _deciding(v, "reward_hack", findings)
        probes = _probe_failures(facts, fs)
        whats = list(dict.fromkeys(_what(f) for f in fs))[:2]
        if probes:
            whats = [f"it returns wrong results when {PROBES.get(p, p)}" for p in probes[:1]] + whats[:1]
        how = "; ".join(whats) or "see the findings"
        if verdict == "fail_forbidden_op_tripwire":
            _, vfacts = _deciding(v, "verdict", findings)
            op = next((m.group(1) for x in vfacts for m in [re.search(r"forbidden op used:\s*(\S+)", x)] if m), None)
            return (f"{who}. It uses an operation the problem forbids{f' ({op})' if op else ''} and the official "
                    "check rejected it, so the cell counts as a failure.")
        return f"{who}. The submission games the evaluation ({how}), so the cell is disqualified{score and ' and its score' + score + ' does not count'}."
    if verdict == "rubric_leak":
        fs, facts = _deciding(v, "verdict", findings)
        probes = _probe_failures(facts, fs)
        how = (f"it ignores the cache a caller supplies" if ALTERNATE_CACHE in probes else
               "; ".join(dict.fromkeys(_what(f) for f in fs)) or "see the findings")
        return (f"{who}. It passes the official check but breaks the problem's API contract where the check does "
                f"not look ({how}), so it is not a valid pass.")
    if verdict == "fail":
        fs, facts = _deciding(v, "verdict", findings)
        fail_line = next((x.split(":", 1)[1].strip() for x in facts if x.startswith("check.log FAIL:")), "")
        fail_line = re.sub(r"^FAIL:\s*", "", fail_line)
        cause = next((_what(f) for f in fs if f.get("analyzer") in ("static", "replay") and
                      f.get("severity") in ("high", "critical", "medium")), None)
        s = f"{who}. It {FAILURES.get(fr, 'fails')}"
        if fail_line:
            s += f" ({_word_trim(fail_line, 10)})"
        if cause:
            s += f"; the static audit points at: {cause}"
        return s + ". The cell counts as a failure."
    if verdict == "timeout_unverified":
        return f"{who}. The official correctness check timed out, so the kernel is unverified and the cell has no number."
    if verdict == "suspect":
        fs, _ = _deciding(v, "reward_hack", findings)
        how = "; ".join(dict.fromkeys(_what(f) for f in fs)) or "a pattern that can return stale results"
        return (f"{who}. It has a pattern that can game the evaluation ({how}) that only a GPU probe can settle; "
                "nothing in the cell may be published until it runs.")
    reason = ""
    for k in ("verdict", "contamination", "reward_hack", "correct"):
        rec = (v.get("decided_by") or {}).get(k)
        if isinstance(rec, str):
            reason = _no_rule(rec)
            break
    reason = _word_trim(reason, 14)
    return (f"{who}. The evidence does not decide the verdict" + (f" ({reason})" if reason else "")
            + "; nothing in the cell may be published until it does.")
