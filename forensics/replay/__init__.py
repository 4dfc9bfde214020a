"""Replay: run an archived solution against the bundled reference, in an isolated child process.

    from forensics.replay import analyze
    analyze(store, run_ids=None, probes=None)   # -> number of findings written

Reads `runs` and the static analyzer's findings (their `probe` column says which probes a run
requires), reads the run's files through `forensics.archive.RunFiles` (never writing into the
archive), writes `replay_results` rows and findings of analyzer 'replay'.  See docs/replay.md.

The store-free entry points are in `forensics.replay.api` (`replay_run_dir`, `replay_solution`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable

from forensics.vocab import BUILD

ANALYZER = "replay"


def _device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def required_probes(static_probes: Iterable[str], device: str, spec: Any = None) -> list[str]:
    """check always (and, for a step API, the chained state-drift probe that used to be part of it);
    for a plain module API (`spec` given) nan-poison and kernel-trace, which settle at run time what
    static reading cannot (an output never written; the operators and kernels that did the work);
    the probes the static findings call for; on a GPU timing, and the outputs of the timed calls
    under the benchmark's calling pattern (timed-outputs)."""
    from forensics.vocab import ALL_PROBES, CHECK, KERNEL_TRACE, NAN_POISON, STATE_DRIFT, TIMED_OUTPUTS, TIMING

    from .api import static_probe
    want = [CHECK]
    kind = None
    if spec is not None:
        from .registry import MODULE, STEP, api_kind
        kind = api_kind(spec)
        if kind == STEP:
            want.append(STATE_DRIFT)
        if kind == MODULE:
            # runtime evidence that costs a few calls and settles what static reading cannot (issue 35):
            # outputs never written (poisoned memory) and which operators / kernels did the work
            want += [NAN_POISON, KERNEL_TRACE]
    for p in static_probes:
        for q in static_probe(p):
            if q in ALL_PROBES and q not in want:
                want.append(q)
    if device.startswith("cuda"):   # on a GPU: timed, and the timed calls' outputs checked (issue 21)
        for p in (TIMED_OUTPUTS, TIMING):
            if p not in want:
                want.append(p)
    return [p for p in ALL_PROBES if p in want]


def analyze(store: Any, run_ids: list[str] | None = None, probes: list[str] | None = None,
            device: str | None = None, limits: Any = None) -> int:
    """Replay every run with a solution (or `run_ids`); write replay_results and findings."""
    from forensics.analyze.findings import Evidence, Finding, write_findings
    from forensics.archive import RunFiles

    from .api import TINY_SHAPES, expand_probes, replay_solution
    from .timing import parse_benchmark_log

    device = device or _device()
    where = "" if run_ids is None else "where run_id in (select unnest(?))"
    params = [] if run_ids is None else [list(run_ids)]
    runs = store.query(
        "select run_id, problem, bench, run_ts, started_at, has_solution, solution_sha256, peak_fraction, "
        f"gpu_name from runs {where} order by run_id", params)
    findings: list[Finding] = []
    done: list[str] = []
    now = datetime.now(timezone.utc)
    for run in runs:
        rid = run["run_id"]
        done.append(rid)
        rows: list[dict] = []
        fs: list[dict] = []
        static = store.query("select distinct probe from findings where run_id = ? and analyzer = 'static' "
                             "and probe is not null", [rid])
        static_probes = [r["probe"] for r in static]
        try:
            from forensics.kernels import registry as _reg
            _spec = _reg.get(run["problem"]) if run.get("problem") else None
        except KeyError:
            _spec = None
        want = expand_probes(probes) if probes else required_probes(static_probes, device, _spec)
        date = None
        for k in ("run_ts", "started_at"):
            if run.get(k) is not None:
                date = str(run[k])[:10]
                break
        if not run.get("has_solution") or not run.get("problem"):
            rows.append(_row(BUILD, "skipped", "no solution.py" if not run.get("has_solution") else "problem unknown"))
        else:
            try:
                from forensics.kernels import registry
                registry.get(run["problem"])
                known = True
            except KeyError:
                known = False
            if not known:
                rows.append(_row(BUILD, "skipped", f"no bundled reference for {run['problem']}"))
                fs.append(dict(rule="replay-no-reference", severity="info", category="info", probe=None,
                               message=f"No bundled reference for problem {run['problem']}; not replayed.", data={}))
            else:
                try:
                    rf = RunFiles.from_store(store, rid)
                    sol = rf.read_bytes("solution.py")
                    side = {p[len("scratch/"):]: rf.read_bytes(p) for p in rf.list("scratch/")}
                    side = {k: v for k, v in side.items() if v is not None}
                    templates = {p.split("/")[-1]: rf.read_bytes(p) for p in rf.list("template_files/")}
                    templates = {k: v for k, v in templates.items() if v is not None}
                    bl = rf.read_text("benchmark.log") if rf.exists("benchmark.log") else None
                except Exception as e:  # noqa: BLE001 - an unreadable run is reported, not fatal
                    sol, side, templates, bl = None, {}, {}, None
                    rows.append(_row(BUILD, "error", f"cannot read the run's files: {e}"))
                if sol is not None:
                    shapes = "canonical"
                    from forensics.kernels import registry as _r
                    if not device.startswith("cuda") and _r.get(run["problem"]).name in TINY_SHAPES:
                        shapes = "tiny"
                    archived = {"peak_fraction": run.get("peak_fraction"), "gpu": run.get("gpu_name"),
                                "shapes": parse_benchmark_log(bl) if bl else {}}
                    kw = {} if limits is None else {"limits": limits}
                    try:
                        out = replay_solution(run["problem"], sol, side, device=device, probes=want, shapes=shapes,
                                              archive_date=date, template_files=templates, archived=archived, **kw)
                        rows.extend(out.rows)
                        fs.extend(out.findings)
                        info = {k: v for k, v in out.info.items() if k != "hello"}
                        built = [r["status"] for r in out.rows if r["probe"] == BUILD]
                        rows.append(_row(BUILD, built[0] if built else "pass",
                                         f"replay summary: overall status {out.status()}, probes {', '.join(want)}",
                                         data={"info": info, "required_by_static": static_probes,
                                               "overall_status": out.status()}))
                        if not device.startswith("cuda"):
                            fs.append(dict(rule="replay-cpu-only", severity="info", category="measurement", probe=None,
                                           message=f"Replayed on the CPU with {shapes} shapes; a GPU replay of the "
                                                   "official shapes (and timing) is still required.", data={}))
                    except Exception as e:  # noqa: BLE001 - fail closed: recorded, never clean
                        rows.append(_row(BUILD, "error", f"replay could not run: {type(e).__name__}: {e}"))
                        fs.append(dict(rule="replay-error", severity="medium", category="correctness", probe=None,
                                       message=f"The replay itself failed ({type(e).__name__}: {str(e)[:200]}); "
                                               "correctness is unknown.", data={}))
        for r in rows:
            r["run_id"] = rid
            r["ran_at"] = now
        store.replace_run("replay_results", rid, rows)
        for f in fs:
            ev = [Evidence(file="solution.py", sha256=run.get("solution_sha256"),
                           note=f"replay probe {f.get('probe') or 'run'}")]
            ev = _sites(f, run.get("solution_sha256")) or ev
            findings.append(Finding(run_id=rid, analyzer=ANALYZER, rule=f["rule"], severity=f["severity"],
                                    message=f["message"], category=f["category"], evidence=ev,
                                    probe=f.get("probe"), data=f.get("data")))
    return write_findings(store, ANALYZER, done, findings)


def _sites(f: dict, sha: str | None) -> list:
    """Evidence at the solution's own lines a runtime finding cites (the audit hook's events: the file
    of the solution's scratch copy and the line that caused each one; sidecars live under scratch/ in
    the run folder)."""
    from forensics.analyze.findings import Evidence
    out = []
    for e in ((f.get("data") or {}).get("events") or [])[:5]:
        file, line = e.get("file"), e.get("line")
        if not file or not isinstance(file, str) or file.startswith(("<", "/")):
            continue
        rel = file if file == "solution.py" else f"scratch/{file}"
        out.append(Evidence(file=rel, line_start=line if isinstance(line, int) and line > 0 else None,
                            sha256=sha if rel == "solution.py" else None,
                            note=f"replay: {e.get('event')} ({e.get('why') or e.get('route') or ''})"[:300]))
    return out


def _row(probe: str, status: str, detail: str, data: dict | None = None) -> dict:
    return {"probe": probe, "status": status, "shape": None, "seed": None, "case_name": None, "max_abs": None,
            "max_rel": None, "n_bad": None, "n_total": None, "worst_index": None, "ms": None, "tflops": None,
            "gbps": None, "device": None, "detail": detail, "data": data}


__all__ = ["analyze", "required_probes", "ANALYZER"]
