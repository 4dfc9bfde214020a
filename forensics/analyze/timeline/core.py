"""The timeline analyzer: store rows in, file_versions / check_runs / findings out."""

from __future__ import annotations

import hashlib
import posixpath
import re
from datetime import datetime
from typing import Any

from forensics.text import shell as sh
from forensics.analyze.findings import Evidence, Finding, write_findings
from forensics.analyze.timeline import shell as tshell
from forensics.analyze.timeline.outcome import parse_output, split_task_output
from forensics.analyze.timeline.rebuild import CheckRun, Rebuilder, Version, anchor_with_final
from forensics.store.db import loads_json

ANALYZER = "timeline"
_WEAK_OFF_RX = re.compile(r"^KBH_\w*(STRESS|PROPERTY|CHECKS?)\w*$")          # weakening when set falsy
_WEAK_ANY_RX = re.compile(r"^KBH_\w*(SKIP|QUICK|FAST|TOL|ATOL|RTOL|SHAPES|NO_STRESS)\w*$")  # weakening when set at all
_FALSY = {"0", "false", "no", "off", ""}
_WEAK_ARG_RX = re.compile(r"stress|skip|quick|fast|tol|no-|shapes?=", re.I)


def _under_timeout(command: str | None) -> bool:
    """A simple command of the call runs under `timeout` (/usr/bin/timeout, after sudo/env/nice,
    inside bash -c): its 137/143 exit is the timeout's kill.  Parsed, so `grep timeout log` and
    `echo "timeout 5"` do not count."""
    try:
        return any("timeout" in sh.wrappers(c.words) for c in tshell.parse(command or ""))
    except Exception:  # noqa: BLE001 - an unparsable command: fall back to the word
        return bool(re.search(r"(^|[\s;&|(])timeout\s", command or ""))


# ---------------------------------------------------------------------- store reads
def _load(store, run_id: str) -> dict[str, Any]:
    run = store.query("select * from runs where run_id = ?", [run_id])
    calls = store.query(
        "select call_seq, source, line, call_id, tool, kind, command, paths, cwd, args, ts, parent_id, background "
        "from tool_calls where run_id = ? order by call_seq", [run_id])
    for c in calls:
        c["args"] = _args(c.get("args"))
    res_rows = store.query(
        "select call_seq, call_id, source, line, exit_code, is_error, status, text, ts, running_session "
        "from tool_results where run_id = ? order by line", [run_id])
    results: dict[int, list[dict]] = {}
    for r in res_rows:
        if r["call_seq"] is not None:
            results.setdefault(r["call_seq"], []).append(r)
    end = store.query("select * from session_end where run_id = ?", [run_id])
    return {"run": run[0] if run else {"run_id": run_id}, "calls": calls, "results": results,
            "end": end[0] if end else None}


def _args(v: Any) -> dict:
    try:
        a = loads_json(v)
    except Exception:
        return {"raw": v}
    if isinstance(a, dict):
        return a
    if a is None:
        return {}
    return {"raw": a}


def read_final(store, run: dict) -> bytes | None:
    """The archived final solution.py, read through forensics.archive.RunFiles (read-only)."""
    try:
        from forensics.archive import RunFiles  # type: ignore[attr-defined]
    except ImportError:
        RunFiles = None
    if RunFiles is not None:
        try:
            return RunFiles.from_store(store, run["run_id"]).read_bytes("solution.py")
        except Exception:
            pass
    # fallback while the archive reader is not importable: a plain run directory
    import os
    arch, rel = run.get("archive"), run.get("run_path")
    if arch and os.path.isdir(arch):
        p = os.path.join(arch, rel or "", "solution.py")
        if os.path.isfile(p):
            with open(p, "rb") as f:
                return f.read()
    return None


def _archived_scratch(store, run: dict, problem: str | None):
    """key -> text of the archived copy of an agent file of the problem dir (scratch/<rel>), used
    only to recognise wrapper scripts that the transcript ran but never showed being written."""
    cache: dict[str, str | None] = {}
    rf_box: list = []

    def get(key: str) -> str | None:
        if not problem or f"/problems/{problem}/" not in key:
            return None
        rel = key.split(f"/problems/{problem}/", 1)[1]
        if rel in cache:
            return cache[rel]
        txt = None
        try:
            if not rf_box:
                from forensics.archive import RunFiles
                rf_box.append(RunFiles.from_store(store, run["run_id"]))
            txt = rf_box[0].read_text("scratch/" + rel)
        except Exception:
            txt = None
        cache[rel] = txt
        return txt

    return get


# ---------------------------------------------------------------------- analysis

def _solution_key(reb, problem: str | None, checks: list[CheckRun]) -> str | None:
    cands = [k for k in reb.versions if posixpath.basename(k) == "solution.py"]
    if not cands:
        return None

    def score(k: str) -> tuple:
        s = 0
        if problem and f"problems/{problem}/solution.py" in k:
            s += 8
        if reb.default_cwd and posixpath.dirname(k) == reb.default_cwd.rstrip("/"):
            s += 4
        if any(c.checker_path and posixpath.dirname(c.checker_path) == posixpath.dirname(k) for c in checks):
            s += 4
        if "/scratch/" in k or k.startswith("/tmp/") or "/backup" in k:
            s -= 6
        return (s, len(reb.versions[k]))

    return max(cands, key=score)


def rel_path(key: str, problem: str | None, cwd: str | None) -> str:
    if problem and f"/problems/{problem}/" in key:
        return key.split(f"/problems/{problem}/", 1)[1]
    if cwd and key.startswith(cwd.rstrip("/") + "/"):
        return key[len(cwd.rstrip("/")) + 1:]
    return key


def weakening(cr: CheckRun) -> list[str]:
    out = []
    for k, v in cr.env.items():
        if k == "KBH_NUMERIC_STRESS" and str(v).strip().lower() in _FALSY:
            out.append(f"{k}={v}")
        elif k != "KBH_NUMERIC_STRESS" and ((_WEAK_OFF_RX.match(k) and str(v).strip().lower() in _FALSY)
                                            or _WEAK_ANY_RX.match(k)) and "TIMEOUT" not in k:
            out.append(f"{k}={v}")
    if cr.script == "check":
        script_idx = next((i for i, a in enumerate(cr.argv) if a.endswith("check.py")), None)
        if script_idx is not None:
            for a in cr.argv[script_idx + 1:]:
                if _WEAK_ARG_RX.search(a):
                    out.append(f"argument {a}")
    return out


def _ts(v):
    return v.isoformat() if isinstance(v, datetime) else v


def analyze_run(store, run_id: str) -> dict[str, Any]:
    """Rebuild one run's timeline. Returns {'versions', 'checks', 'findings', 'summary'} (rows ready
    for the store plus the Finding objects)."""
    d = _load(store, run_id)
    run, calls, results, end = d["run"], d["calls"], d["results"], d["end"]
    problem = run.get("problem")
    reb = Rebuilder(calls, results, problem, external=_archived_scratch(store, run, problem)).run()
    sol = _solution_key(reb, problem, reb.checks)
    final_bytes = read_final(store, run)
    final_sha = run.get("solution_sha256") or (hashlib.sha256(final_bytes).hexdigest() if final_bytes is not None else None)
    final_text = final_bytes.decode("utf-8", "replace") if final_bytes is not None else None
    n_anchored = anchor_with_final(reb.versions[sol], final_text) if sol else 0
    sol_versions: list[Version] = reb.versions.get(sol, []) if sol else []
    source = next((c.get("source") for c in calls if c.get("source")), run.get("tool_source") or "transcript.jsonl")

    # ---- version rows
    vrows = []
    for key, vs in reb.versions.items():
        rp = rel_path(key, problem, reb.default_cwd)
        for v in vs:
            c = v.content
            vrows.append({
                "run_id": run_id, "path": key, "rel_path": rp, "version": v.version, "call_seq": v.call_seq,
                "line": v.line, "ts": v.ts, "op": v.op, "tool": v.tool, "sha256": v.sha256,
                "size": len(c.encode("utf-8", "surrogatepass")) if c is not None else None,
                "n_lines": (c.count("\n") + (0 if c.endswith("\n") or c == "" else 1)) if c is not None else None,
                "gap": v.gap, "gap_reason": v.gap_reason, "basis": v.basis, "deleted": v.deleted,
                "is_solution": key == sol,
                "matches_final": (key == sol and v.sha256 is not None and v.sha256 == final_sha),
                "content": c,
            })

    # ---- check rows
    crow = []
    for cr in reb.checks:
        texts, ec, still = [], None, False
        last_line = None
        for r in cr.results:
            out, xec, status = split_task_output(_unwrap_json_result(r.get("text") or ""))
            if xec is None:
                xec = _json_exit(r.get("text") or "")
            texts.append(out)
            if r.get("exit_code") is not None:
                ec = r["exit_code"]
            elif xec is not None:
                ec = xec
            still = status == "running" or (bool(r.get("running_session")) and r.get("exit_code") is None)
            last_line = r.get("line")
        text = "\n".join(texts)
        if cr.background and not any(_has_output(t) for t in texts[1:]) and len(cr.results) <= 1:
            still = True
        o = parse_output(text, cr.script, ec, cr.filtered_by, bool(cr.results), still,
                         under_timeout=_under_timeout(cr.command))
        v = _version_at(sol_versions, cr.order)
        later = [x for x in sol_versions if x.order > cr.order]
        vsha = v.sha256 if v else None
        changed_later = any(x.deleted or x.sha256 is None or x.sha256 != vsha for x in later) if v else bool(later)
        is_final = bool(vsha and final_sha and vsha == final_sha)
        superseded = (not is_final) if final_sha else changed_later
        crow.append({
            "run_id": run_id, "call_seq": cr.call_seq, "line": cr.line, "result_line": last_line, "ts": cr.ts,
            "script": cr.script, "command": cr.command, "env_weakening": weakening(cr), "outcome": o.outcome,
            "fail_reason": o.fail_reason, "exit_code": o.exit_code, "peak_fraction": o.peak_fraction,
            "shape_lines": o.shape_lines, "solution_version": v.version if v else None,
            "solution_sha256": vsha, "is_final_version": is_final,
            "superseded": superseded, "background": cr.background,
            "details": {k: val for k, val in {
                "peak_fractions": o.peak_fractions or None, "result_labels": o.result_labels or None,
                "filtered_by": cr.filtered_by, "wrapper_path": cr.wrapper_path, "task_id": cr.task_id,
                "checker_path": cr.checker_path, "reason": o.reason, "n_pass_lines": o.n_pass_lines or None,
                "n_results": len(cr.results),
                "version_is_gap": bool(v and v.gap) or None,
                "changed_later": changed_later}.items() if val is not None},
        })

    summary = _summary(run, sol, sol_versions, crow, end, calls, final_sha, final_bytes is not None, n_anchored, reb)
    findings = _findings(run_id, source, summary, sol_versions, crow, reb, calls)
    return {"versions": vrows, "checks": crow, "findings": findings, "summary": summary, "rebuild": reb}


def _json_result(text: str) -> dict | None:
    """A shell result left as the harness's JSON object (Cursor `{"success"|"failure": {stdout,
    stderr, exitCode}}`): the parts a check run needs, or None."""
    t = text.lstrip()
    if not t.startswith("{") or '"stdout"' not in t[:20000] and '"exitCode"' not in t[:20000]:
        return None
    try:
        import orjson
        d = orjson.loads(t)
    except Exception:
        return None
    if isinstance(d, dict) and len(d) == 1 and isinstance(next(iter(d.values())), dict):
        d = next(iter(d.values()))
    return d if isinstance(d, dict) and ("stdout" in d or "exitCode" in d) else None


def _unwrap_json_result(text: str) -> str:
    d = _json_result(text)
    if d is None:
        return text
    return "\n".join(str(d.get(k) or "") for k in ("stdout", "stderr") if d.get(k))


def _json_exit(text: str) -> int | None:
    d = _json_result(text)
    v = d.get("exitCode") if d else None
    return v if isinstance(v, int) else None


def _has_output(t: str) -> bool:
    return bool(t and t.strip())


def _version_at(vs: list[Version], order: tuple) -> Version | None:
    cur = None
    for v in vs:
        if v.order < order:
            cur = v
        else:
            break
    if cur is not None and cur.deleted:
        return None
    return cur


def _summary(run, sol, vs, crow, end, calls, final_sha, have_final, n_anchored, reb) -> dict[str, Any]:
    live = [v for v in vs if not v.deleted]
    final_idx = [v.version for v in vs if v.sha256 is not None and v.sha256 == final_sha]
    last = vs[-1] if vs else None
    checks = [c for c in crow if c["script"] in ("check", "wrapper")]
    passes = [c for c in checks if c["outcome"] == "PASS"]
    last_pass = passes[-1] if passes else None
    last_call = calls[-1] if calls else None
    edits_after_pass = [v for v in vs if last_pass and (v.call_seq or 0) > last_pass["call_seq"]]
    s = {
        "run_id": run["run_id"], "problem": run.get("problem"), "harness": run.get("harness"),
        "transcript_format": run.get("transcript_format"), "format_evidence": run.get("format_evidence"),
        "solution_path": sol,
        "n_versions": len(vs), "n_gaps": sum(1 for v in vs if v.gap), "n_anchored": n_anchored,
        "n_other_files": len([k for k in reb.versions if k != sol]),
        "final_sha256": final_sha, "have_final": have_final,
        "final_versions": final_idx, "final_version": final_idx[-1] if final_idx else None,
        "last_version": last.version if last else None,
        "last_version_is_final": bool(last and last.sha256 and last.sha256 == final_sha),
        "last_edit_call_seq": last.call_seq if last else None, "last_edit_line": last.line if last else None,
        "last_edit_ts": _ts(last.ts) if last else None,
        "n_checks": len(checks), "n_benchmarks": sum(1 for c in crow if c["script"] == "benchmark"),
        "n_pass": len(passes),
        "last_pass": {k: last_pass[k] for k in ("call_seq", "line", "solution_version", "is_final_version",
                                                   "superseded", "script")} if last_pass else None,
        "n_superseded_pass": sum(1 for c in passes if c["superseded"]),
        "edits_after_last_pass": len(edits_after_pass),
        "final_checked": any(c["is_final_version"] and c["script"] in ("check", "wrapper") for c in crow),
        "final_passed": any(c["is_final_version"] and c["outcome"] == "PASS" for c in checks),
        "n_calls": len(calls), "last_call_seq": last_call["call_seq"] if last_call else None,
        "end": None, "post_session": None,
    }
    if end:
        e = {k: end.get(k) for k in ("end_reason", "api_error_status", "api_error_text", "api_error_line",
                                      "terminal_line", "terminal_type", "cut_off", "last_line", "rate_limited",
                                      "source")}
        e["last_ts"] = _ts(end.get("last_ts"))
        e["session_complete"] = run.get("session_complete")
        e["harness_exit_code"] = run.get("harness_exit_code")
        if last:
            e["calls_after_last_edit"] = (s["last_call_seq"] or 0) - (last.call_seq or 0)
            if end.get("last_line") and last.line:
                e["lines_after_last_edit"] = end["last_line"] - last.line
            if isinstance(last.ts, datetime) and isinstance(end.get("last_ts"), datetime):
                e["seconds_after_last_edit"] = (end["last_ts"] - last.ts).total_seconds()
        s["end"] = e
    s["post_session"] = {
        "check_verdict": run.get("check_verdict"), "correct": run.get("correct"),
        "peak_fraction": run.get("peak_fraction"), "benchmark_peak_fraction": run.get("benchmark_peak_fraction"),
        "failure_reason": run.get("failure_reason"), "graded_sha256": run.get("solution_sha256"),
    }
    traj = []
    for c in crow:
        if c["script"] == "benchmark" and c["peak_fraction"] is not None:
            traj.append((c["solution_version"], c["peak_fraction"]))
    s["trajectory"] = traj
    return s


def _ev(source, seq, line, **kw) -> Evidence:
    return Evidence(file=source, transcript_line=line, call_seq=seq, **kw)


def _findings(run_id, source, s, vs, crow, reb, calls) -> list[Finding]:
    F: list[Finding] = []

    def add(rule, category, severity, message, ev, data=None):
        F.append(Finding(run_id, ANALYZER, rule, severity, message, category, ev, data=data))

    sol_name = s["solution_path"] or "solution.py"
    last_v = vs[-1] if vs else None
    final_sha = s["final_sha256"]
    checks = [c for c in crow if c["script"] in ("check", "wrapper")]
    passes = [c for c in checks if c["outcome"] == "PASS"]
    if calls and s.get("transcript_format") == "unknown":
        # calls recovered from the model APIs' shapes (transcripts.structural): evidence where they
        # show something, but nothing says they are all the session's calls
        e = s.get("end") or {}
        esrc = e.get("source") or source
        add("transcript-format-unknown", "provenance", "medium",
            f"The transcript {esrc} matches no known format ({s.get('format_evidence') or 'no evidence'}); "
            f"{len(calls)} tool calls were recovered from the model APIs' own call shapes in its lines, but "
            "nothing says they are all of the session's calls, so what it did not do cannot be established.",
            [Evidence(file=esrc, note=(s.get("format_evidence") or "")[:300] or None)],
            {"transcript_format": "unknown", "format_evidence": s.get("format_evidence"),
             "recovered_calls": len(calls)})
    if not calls:
        fmt = s.get("transcript_format")
        add("timeline-unavailable", "provenance", "info",
            f"The transcript (format {fmt}) has no tool calls, so no solution version, check run or PASS can be "
            "placed in time; the archived solution.py cannot be tied to the session.",
            [Evidence(file=source, sha256=final_sha, note="no tool calls")], {"transcript_format": fmt})
        # what can still be said without calls: the transcript is unreadable, or the session was cut off
        e = s.get("end") or {}
        esrc = e.get("source") or source
        if fmt == "unknown":
            add("transcript-format-unknown", "provenance", "medium",
                f"The transcript {esrc} matches no known format ({s.get('format_evidence') or 'no evidence'}); "
                "its tool calls, if any, cannot be read, so the session cannot be audited from it.",
                [Evidence(file=esrc, note=(s.get("format_evidence") or "")[:300] or None)],
                {"transcript_format": fmt, "format_evidence": s.get("format_evidence")})
        if e.get("end_reason") == "cut_off" or e.get("cut_off"):
            add("session-cut-off", "provenance", "medium",
                f"The session has no terminal record (cut off); its last line is {e.get('last_line')}, and the "
                "transcript has no tool calls.",
                [Evidence(file=esrc, transcript_line=e.get("last_line"))],
                {"end_reason": e.get("end_reason"), "terminal_type": e.get("terminal_type")})
        return F
    # which version is the archived file
    if final_sha and vs:
        if s["final_version"] is not None:
            fv = next(v for v in vs if v.version == s["final_version"])
            extra = "" if s["last_version_is_final"] else f"; the last in-session version is v{last_v.version}"
            add("final-version", "provenance", "info",
                f"The archived solution.py (sha256 {final_sha[:12]}) is v{fv.version} of {len(vs)} rebuilt versions, "
                f"written at call {fv.call_seq} (line {fv.line}){extra}.",
                [_ev(source, fv.call_seq, fv.line, sha256=final_sha), Evidence(file="solution.py", sha256=final_sha)],
                {"version": fv.version, "n_versions": len(vs), "basis": fv.basis})
        else:
            n_gaps = s["n_gaps"]
            add("final-matches-no-version", "provenance", "low" if n_gaps else "medium",
                f"The archived solution.py (sha256 {final_sha[:12]}) matches none of the {len(vs)} rebuilt versions"
                + (f"; {n_gaps} version(s) could not be rebuilt exactly" if n_gaps else
                   "; it was changed outside the recorded tool calls") + ".",
                [_ev(source, last_v.call_seq, last_v.line, sha256=last_v.sha256), Evidence(file="solution.py", sha256=final_sha)],
                {"n_versions": len(vs), "n_gaps": n_gaps})
    elif final_sha and not vs:
        add("final-matches-no-version", "provenance", "medium",
            f"The archived solution.py (sha256 {final_sha[:12]}) was never written by a recorded tool call.",
            [Evidence(file="solution.py", sha256=final_sha)], {"n_versions": 0})
    # last PASS vs the final version
    if passes:
        lp = passes[-1]
        if lp["is_final_version"]:
            add("final-version-passed", "correctness", "info",
                f"The last in-session PASS (call {lp['call_seq']}, line {lp['line']}) ran on v{lp['solution_version']}, "
                f"the archived final version; {s['edits_after_last_pass']} edit(s) followed it.",
                [_ev(source, lp["call_seq"], lp["line"], sha256=lp["solution_sha256"])],
                {"version": lp["solution_version"]})
        if lp["superseded"] or (final_sha and not lp["is_final_version"]):
            nsup = sum(1 for c in passes if c["superseded"] or not c["is_final_version"])
            add("superseded-pass", "provenance", "medium",
                f"The last in-session PASS (call {lp['call_seq']}, line {lp['line']}) ran on "
                f"{'v' + str(lp['solution_version']) if lp['solution_version'] else 'no rebuilt version'} of {sol_name.rsplit('/', 1)[-1]}, "
                f"not the archived final"
                + (f" (v{s['final_version']})" if s["final_version"] else "") + f"; {nsup} of {len(passes)} PASS record(s) "
                "belong to superseded versions and are not evidence for the archived file.",
                [_ev(source, lp["call_seq"], lp["line"], sha256=lp["solution_sha256"])]
                + [_ev(source, c["call_seq"], c["line"]) for c in passes[:-1] if c["superseded"]][:10],
                {"last_pass_version": lp["solution_version"], "final_version": s["final_version"],
                 "n_superseded": nsup, "n_pass": len(passes)})
        after = [v for v in vs if (v.call_seq or 0) > lp["call_seq"]]
        if after:
            add("edits-after-last-pass", "provenance", "low",
                f"{len(after)} edit(s) of solution.py followed the last in-session PASS (call {lp['call_seq']}, "
                f"line {lp['line']}); the first at call {after[0].call_seq} (line {after[0].line}), the last at "
                f"call {after[-1].call_seq} (line {after[-1].line}).",
                [_ev(source, after[0].call_seq, after[0].line), _ev(source, after[-1].call_seq, after[-1].line),
                 _ev(source, lp["call_seq"], lp["line"])],
                {"n_edits": len(after), "last_pass_call_seq": lp["call_seq"]})
    if vs and not s["final_checked"]:
        tgt = next((v for v in vs if v.version == s["final_version"]), last_v)
        what = f"v{tgt.version}" + (" (the archived file)" if s["final_version"] else " (the last rebuilt version)")
        add("final-never-checked", "correctness", "medium" if checks else "low",
            f"The final solution version {what}, written at call {tgt.call_seq} (line {tgt.line}), was never run "
            f"through check.py in the session ({len(checks)} check run(s) in total, all on other versions).",
            [_ev(source, tgt.call_seq, tgt.line, sha256=tgt.sha256)],
            {"version": tgt.version, "n_checks": len(checks)})
    # weakened official-looking runs
    for c in crow:
        if c["env_weakening"]:
            add("stress-disabled", "integrity", "high",
                f"{c['script']} run at call {c['call_seq']} (line {c['line']}) weakened the official check: "
                + ", ".join(c["env_weakening"]) + f" (outcome {c['outcome']}).",
                [_ev(source, c["call_seq"], c["line"], quote=c["command"][:200])],
                {"settings": c["env_weakening"], "outcome": c["outcome"]})
    for seq, line, var, val in reb.exports:
        if var == "KBH_NUMERIC_STRESS" and val.strip().lower() in _FALSY and \
                not any(c["call_seq"] == seq and c["env_weakening"] for c in crow):
            add("stress-disabled", "integrity", "medium",
                f"Call {seq} (line {line}) exported {var}={val}, disabling numeric stress for what follows in that shell.",
                [_ev(source, seq, line, quote=f"export {var}={val}")], {"settings": [f"{var}={val}"]})
    # session end
    e = s.get("end")
    if e:
        gap_txt = ""
        if e.get("calls_after_last_edit") is not None:
            gap_txt = f"; {e['calls_after_last_edit']} call(s)"
            if e.get("seconds_after_last_edit") is not None:
                gap_txt += f" and {e['seconds_after_last_edit']:.0f} s"
            gap_txt += f" passed between the last solution edit (call {s['last_edit_call_seq']}, line {s['last_edit_line']}) and the end"
        last_call_line = calls[-1].get("line") if calls else None
        provider_last = bool(e.get("api_error_status") and e.get("api_error_line")
                             and (last_call_line is None or e["api_error_line"] > last_call_line))
        if e.get("end_reason") in ("api_error", "rate_limited") or provider_last:
            st = e.get("api_error_status")
            add("session-ended-api-error", "provenance", "medium",
                f"The session ended on a provider error{(' ' + str(st)) if st else ''} at line "
                f"{e.get('api_error_line') or e.get('terminal_line') or e.get('last_line')}{gap_txt}.",
                [Evidence(file=source, transcript_line=e.get("api_error_line") or e.get("terminal_line") or e.get("last_line"),
                          quote=(e.get("api_error_text") or "")[:200] or None, call_seq=s["last_call_seq"])],
                {k: e.get(k) for k in ("end_reason", "api_error_status", "calls_after_last_edit",
                                        "seconds_after_last_edit", "lines_after_last_edit")})
        elif e.get("end_reason") == "cut_off" or e.get("cut_off") or (
                e.get("end_reason") == "no_marker_format" and (e.get("session_complete") is False or
                                                               e.get("harness_exit_code") not in (0, None))):
            how = ("has no terminal record (cut off)" if e.get("end_reason") != "no_marker_format" else
                   f"did not complete (the format has no terminal record; harness exit code "
                   f"{e.get('harness_exit_code')}, session_complete={e.get('session_complete')})")
            add("session-cut-off", "provenance", "medium",
                f"The session {how}; its last line is {e.get('last_line')}{gap_txt}.",
                [Evidence(file=source, transcript_line=e.get("last_line"), call_seq=s["last_call_seq"])],
                {k: e.get(k) for k in ("end_reason", "calls_after_last_edit", "seconds_after_last_edit")})
    # post-session grade
    ps = s["post_session"]
    graded = ps.get("graded_sha256") or final_sha
    if graded and ps.get("check_verdict") in ("PASS", "FAIL"):
        tied = s["last_version_is_final"] and graded == final_sha
        ev = [Evidence(file="check.log", quote=f"check_verdict={ps.get('check_verdict')}"),
              Evidence(file="solution.py", sha256=graded)]
        if last_v:
            ev.insert(0, _ev(source, last_v.call_seq, last_v.line, sha256=last_v.sha256))
        if tied:
            add("post-session-grade-tied", "provenance", "info",
                f"The post-session grade (check.log {ps.get('check_verdict')}, correct={ps.get('correct')}, "
                f"peak_fraction={ps.get('peak_fraction')}) was taken on the archived solution.py, which is the last "
                f"in-session version v{last_v.version}.", ev, ps)
        else:
            why = ("it matches no rebuilt version" if s["final_version"] is None else
                   f"it is v{s['final_version']}, not the last in-session version v{last_v.version}") if last_v else \
                "no in-session version of solution.py was rebuilt"
            add("post-session-grade-untied", "provenance", "low" if s["n_gaps"] else "medium",
                f"The post-session grade (check.log {ps.get('check_verdict')}, correct={ps.get('correct')}) cannot be "
                f"tied to the final in-session version: {why}.", ev, ps)
    # trajectory
    if s["trajectory"]:
        bench = [c for c in crow if c["script"] == "benchmark" and c["peak_fraction"] is not None]
        best = max(bench, key=lambda c: c["peak_fraction"])
        lastb = bench[-1]
        add("score-trajectory", "measurement", "info",
            f"{len(bench)} in-session benchmark result(s) over {len({c['solution_version'] for c in bench})} version(s): "
            f"first {bench[0]['peak_fraction']:.4g} (v{bench[0]['solution_version']}), best {best['peak_fraction']:.4g} "
            f"(v{best['solution_version']}, call {best['call_seq']}), last {lastb['peak_fraction']:.4g} "
            f"(v{lastb['solution_version']}, call {lastb['call_seq']}"
            + (", the final version)" if lastb["is_final_version"] else ")") + ".",
            [_ev(source, best["call_seq"], best["line"]), _ev(source, lastb["call_seq"], lastb["line"])],
            {"points": [[c["solution_version"], c["peak_fraction"], c["call_seq"]] for c in bench]})
    return F


# ---------------------------------------------------------------------- entry point

def analyze(store, run_ids: list[str] | None = None) -> int:
    """Write file_versions, check_runs and the timeline findings for `run_ids` (all runs if None)."""
    ids = run_ids if run_ids is not None else store.run_ids()
    if run_ids is None:
        extra = [r["run_id"] for r in store.query("select distinct run_id from tool_calls")]
        ids = sorted(set(ids) | set(extra))
    total = 0
    for rid in ids:
        out = analyze_run(store, rid)
        with store.transaction():
            store.delete_run("file_versions", rid)
            store.insert_rows("file_versions", out["versions"])
            store.delete_run("check_runs", rid)
            store.insert_rows("check_runs", out["checks"])
        total += write_findings(store, ANALYZER, [rid], out["findings"])
    return total
