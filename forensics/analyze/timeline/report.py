"""Reading the timeline back from the store: text, JSON, trajectory entries and the plot."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from forensics.store.db import loads_json


def _iso(v):
    return v.isoformat() if isinstance(v, datetime) else v


def timeline(store, run_id: str) -> dict[str, Any]:
    """The run's timeline as plain data (from file_versions, check_runs, findings, runs, session_end)."""
    run = (store.query("select run_id, problem, harness, transcript_format, solution_sha256, check_verdict, correct, "
                       "peak_fraction, benchmark_peak_fraction, failure_reason from runs where run_id = ?", [run_id])
           or [{"run_id": run_id}])[0]
    vers = store.query("select path, rel_path, version, call_seq, line, ts, op, tool, sha256, size, n_lines, gap, "
                       "gap_reason, basis, deleted, is_solution, matches_final from file_versions where run_id = ? "
                       "order by is_solution desc, path, version", [run_id])
    checks = store.query("select call_seq, line, result_line, ts, script, command, env_weakening, outcome, fail_reason, "
                         "exit_code, peak_fraction, shape_lines, solution_version, solution_sha256, is_final_version, "
                         "superseded, background, details from check_runs where run_id = ? order by call_seq, script",
                         [run_id])
    finds = store.query("select rule, category, severity, message, call_seq, transcript_line, data from findings "
                        "where run_id = ? and analyzer = 'timeline' order by call_seq nulls last, rule", [run_id])
    end = store.query("select end_reason, api_error_status, api_error_line, terminal_line, last_line, last_ts, cut_off "
                      "from session_end where run_id = ?", [run_id])
    for r in vers + checks:
        r["ts"] = _iso(r.get("ts"))
    for c in checks:
        c["shape_lines"] = loads_json(c["shape_lines"])
        c["details"] = loads_json(c["details"])
    for f in finds:
        f["data"] = loads_json(f["data"])
    sol = [v for v in vers if v["is_solution"]]
    others: dict[str, list] = {}
    for v in vers:
        if not v["is_solution"]:
            others.setdefault(v["path"], []).append(v)
    final = next((v for v in reversed(sol) if v["matches_final"]), None)
    e = end[0] if end else None
    if e:
        e["last_ts"] = _iso(e.get("last_ts"))
    return {"run": run, "solution": {"path": sol[0]["path"] if sol else None, "versions": sol,
                                     "final_version": final["version"] if final else None},
            "other_files": [{"path": p, "n_versions": len(vs), "n_gaps": sum(1 for v in vs if v["gap"]),
                             "versions": vs} for p, vs in others.items()],
            "checks": checks, "end": e, "findings": finds,
            "trajectory": trajectory_entries(store, run_id, _data=(sol, checks, run, e))}


def trajectory_entries(store, run_id: str, _data=None) -> list[dict[str, Any]]:
    """The auditors' annotation `trajectory` field: ordered entries, each
    {event, version, call_seq, transcript_line, outcome, peak_fraction, text}.

    Events: `version` (a solution version that was run, or the first/last one; `edits` says how
    many changes it stands for), `check` / `benchmark` (an in-session run on that version),
    `final` (the archived solution.py), `end` (how the session ended) and `grade` (the
    post-session check.log / result.json)."""
    if _data is None:
        t = timeline(store, run_id)
        return t["trajectory"]
    sol, checks, run, end = _data
    out: list[dict[str, Any]] = []
    ran = {c["solution_version"] for c in checks if c["solution_version"] is not None}
    last_ver = sol[-1]["version"] if sol else None
    pending = 0
    events: list[tuple[tuple, dict]] = []
    for v in sol:
        pending += 1
        keep = v["version"] in ran or v["version"] in (1, last_ver) or v["matches_final"]
        if not keep:
            continue
        what = ("deleted" if v["deleted"] else "gap: " + (v["gap_reason"] or "?") if v["gap"]
                else f"{v['n_lines']} lines, sha256 {v['sha256'][:12]}")
        events.append(((v["call_seq"] or 0, 0), {
            "event": "version", "version": v["version"], "call_seq": v["call_seq"], "transcript_line": v["line"],
            "outcome": None, "peak_fraction": None, "edits": pending,
            "text": f"v{v['version']} by {v['op']} ({what})" + (f"; {pending} change(s) since the previous entry"
                                                                 if pending > 1 else "")
            + ("; = archived final" if v["matches_final"] else "")}))
        pending = 0
    for c in checks:
        sup = " (superseded)" if c["superseded"] else ""
        if c["script"] == "benchmark":
            txt = (f"benchmark on v{c['solution_version']}: peak_fraction {c['peak_fraction']}" if c["peak_fraction"] is not None
                   else f"benchmark on v{c['solution_version']}: {c['outcome']}")
        else:
            txt = f"{'check' if c['script'] == 'check' else 'wrapper check'} on v{c['solution_version']}: {c['outcome']}"
            if c["fail_reason"]:
                txt += f" ({c['fail_reason'][:80]})"
        if c["env_weakening"]:
            txt += " with " + ", ".join(c["env_weakening"])
        if c["background"]:
            txt += " [background]"
        events.append(((c["call_seq"] or 0, 1), {
            "event": "benchmark" if c["script"] == "benchmark" else "check", "version": c["solution_version"],
            "call_seq": c["call_seq"], "transcript_line": c["line"], "outcome": c["outcome"],
            "peak_fraction": c["peak_fraction"], "text": txt + sup}))
    events.sort(key=lambda x: x[0])
    out = [e for _, e in events]
    fv = next((v for v in reversed(sol) if v["matches_final"]), None)
    if run.get("solution_sha256"):
        out.append({"event": "final", "version": fv["version"] if fv else None, "call_seq": fv["call_seq"] if fv else None,
                    "transcript_line": fv["line"] if fv else None, "outcome": None, "peak_fraction": None,
                    "text": (f"archived solution.py = v{fv['version']}" if fv else "archived solution.py matches no rebuilt version")
                    + f" (sha256 {run['solution_sha256'][:12]})"})
    if end:
        last = sol[-1] if sol else None
        extra = ""
        if last and end.get("last_line") and last["line"]:
            extra = f"; {end['last_line'] - last['line']} line(s) after the last edit"
        out.append({"event": "end", "version": last_ver, "call_seq": None,
                    "transcript_line": end.get("api_error_line") or end.get("terminal_line") or end.get("last_line"),
                    "outcome": end.get("end_reason"), "peak_fraction": None,
                    "text": f"session end: {end.get('end_reason')}"
                    + (f" (status {end['api_error_status']})" if end.get("api_error_status") else "") + extra})
    if run.get("check_verdict") not in (None, "") or run.get("correct") is not None:
        out.append({"event": "grade", "version": fv["version"] if fv else None, "call_seq": None, "transcript_line": None,
                    "outcome": run.get("check_verdict"), "peak_fraction": run.get("peak_fraction"),
                    "text": f"post-session grade: check.log {run.get('check_verdict')}, correct={run.get('correct')}, "
                            f"peak_fraction={run.get('peak_fraction')}"})
    return out


def render_text(t: dict[str, Any]) -> str:
    r = t["run"]
    L = [f"run {r['run_id']}  harness={r.get('harness')}  format={r.get('transcript_format')}  problem={r.get('problem')}"]
    sol = t["solution"]
    vs = sol["versions"]
    L.append(f"solution: {sol['path'] or '(never written in the transcript)'}  versions={len(vs)}  "
             f"gaps={sum(1 for v in vs if v['gap'])}  archived final="
             + (f"v{sol['final_version']}" if sol["final_version"] else "matches no version"))
    runs_on: dict[int, list[str]] = {}
    for c in t["checks"]:
        if c["solution_version"] is not None:
            runs_on.setdefault(c["solution_version"], []).append(
                (c["script"][0].upper() + ":" + (f"{c['peak_fraction']:.4g}" if c["peak_fraction"] is not None else c["outcome"])))
    for v in vs:
        what = ("deleted" if v["deleted"] else f"GAP ({v['gap_reason']})" if v["gap"]
                else f"{v['n_lines']:>5} lines  {v['sha256'][:12]}")
        mark = "  <= final" if v["matches_final"] else ""
        basis = f" [{v['basis']}]" if v["basis"] not in ("exact", "deleted") else ""
        ran = ("  runs: " + " ".join(runs_on[v["version"]])) if v["version"] in runs_on else ""
        L.append(f"  v{v['version']:<3} call {v['call_seq']:>5}  line {v['line']:>7}  {v['op']:<12} {what}{basis}{mark}{ran}")
    L.append(f"checks and benchmarks: {len(t['checks'])}")
    for c in t["checks"]:
        pf = f" peak_fraction={c['peak_fraction']}" if c["peak_fraction"] is not None else ""
        fr = f" ({c['fail_reason'][:70]})" if c["fail_reason"] else ""
        why = (c.get("details") or {}).get("reason")
        L.append(f"  call {c['call_seq']:>5}  line {c['line']:>7}  {c['script']:<9} {c['outcome']:<7}{pf}{fr} on "
                 f"{'v' + str(c['solution_version']) if c['solution_version'] else 'no version'}"
                 + (" (final)" if c["is_final_version"] else " (superseded)" if c["superseded"] else "")
                 + (" [background]" if c["background"] else "")
                 + (" [" + ", ".join(c["env_weakening"]) + "]" if c["env_weakening"] else "")
                 + (f"  - {why}" if why and c["outcome"] == "UNKNOWN" else ""))
    e = t["end"]
    if e:
        L.append(f"end: {e.get('end_reason')}" + (f" status {e['api_error_status']}" if e.get("api_error_status") else "")
                 + f" at line {e.get('api_error_line') or e.get('terminal_line') or e.get('last_line')}")
    if t["other_files"]:
        L.append("other files written: " + ", ".join(f"{o['path']} ({o['n_versions']})" for o in t["other_files"][:20])
                 + (" ..." if len(t["other_files"]) > 20 else ""))
    L.append("findings:")
    for f in t["findings"]:
        L.append(f"  [{f['severity']}] {f['rule']}: {f['message']}")
    return "\n".join(L)


def plot(t: dict[str, Any], out_path: str, x: str = "call") -> str:
    """Trajectory plot: in-session benchmark scores against call number (or time), marking solution
    versions, check outcomes and the archived final version."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def xof(row):
        if x == "time" and row.get("ts"):
            return datetime.fromisoformat(row["ts"]) if isinstance(row["ts"], str) else row["ts"]
        return row["call_seq"]

    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=110)
    vs = t["solution"]["versions"]
    for v in vs:
        if v["call_seq"] is None:
            continue
        ax.axvline(xof(v), color="#ff7f0e" if v["matches_final"] else "#cccccc",
                   lw=2 if v["matches_final"] else 0.7, zorder=0)
    bench = [c for c in t["checks"] if c["script"] == "benchmark" and c["peak_fraction"] is not None]
    if bench:
        ax.plot([xof(c) for c in bench], [c["peak_fraction"] for c in bench], "-o", color="#1f77b4",
                label="in-session peak_fraction")
        for c in bench:
            ax.annotate(f"v{c['solution_version']}", (xof(c), c["peak_fraction"]), textcoords="offset points",
                        xytext=(0, 6), ha="center", fontsize=7)
    ymax = max([c["peak_fraction"] for c in bench] + [t["run"].get("peak_fraction") or 0, 0.01])
    checks = [c for c in t["checks"] if c["script"] != "benchmark"]
    for outc, mk, col in (("PASS", "^", "#2ca02c"), ("FAIL", "x", "#d62728"), ("ERROR", "x", "#9467bd"),
                          ("TIMEOUT", "s", "#8c564b"), ("UNKNOWN", ".", "#7f7f7f")):
        pts = [c for c in checks if c["outcome"] == outc]
        if pts:
            ax.scatter([xof(c) for c in pts], [-0.04 * ymax] * len(pts), marker=mk, color=col, label=f"check {outc}",
                       zorder=3)
    if t["run"].get("peak_fraction") is not None:
        ax.axhline(t["run"]["peak_fraction"], color="#ff7f0e", ls="--", lw=1, label="post-session grade")
    ax.plot([], [], color="#cccccc", label="solution version")
    ax.plot([], [], color="#ff7f0e", lw=2, label="archived final version")
    ax.set_ylim(-0.1 * ymax, ymax * 1.18)
    ax.set_xlabel("tool call" if x == "call" else "time")
    ax.set_ylabel("peak_fraction")
    ax.set_title(f"{t['run']['run_id']}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out_path)
    plt.close(fig)
    return out_path
