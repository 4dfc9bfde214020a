"""Replay entry points a notebook, the CLI and the store analyzer all call.

    from forensics.replay.api import replay_run_dir, replay_solution
    out = replay_run_dir("runs/<run id>", device="cuda", probes=["all"])
    out.rows, out.findings, out.info

Only torch, the standard library, `kernels` and the problem catalogue are imported here (no duckdb/orjson), so a GPU
machine without the store dependencies can replay run folders.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterable

from forensics.problems import CATALOGUE
# Probe names, the static rules' phrases ("same-buffer overwrite" -> same-buffer + fresh-inputs) and
# the --probe shorthands are declared once, in forensics/vocab.py (static_probe re-exported here).
from forensics.vocab import ALL_PROBES, BUILD, PROBE_ALIASES, static_probe  # noqa: F401

from .outcome import Limits, Outcome
from .session import Session
from .runner import Scratch

# Tiny shapes for the CPU path (CI): same globals as the deck's shapes, small enough for seconds
# (the catalogue's, forensics/problems.py, which says why each is what it is).
TINY_SHAPES: dict[str, list[dict]] = {p.id: [dict(s) for s in p.tiny_shapes] for p in CATALOGUE if p.tiny_shapes}

_DATA = Path(__file__).resolve().parent.parent / "data" / "deck-hashes.json"


def expand_probes(probes: Iterable[str] | None) -> list[str]:
    if not probes:
        return list(ALL_PROBES)
    out: list[str] = []
    for p in probes:
        for q in PROBE_ALIASES.get(p, (p,)):
            if q not in ALL_PROBES:
                raise ValueError(f"unknown probe {q!r} (have {', '.join(ALL_PROBES)}, all)")
            if q not in out:
                out.append(q)
    return [p for p in ALL_PROBES if p in out]  # canonical order: check first, timing last


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def template_date(problem: str, template_files: dict[str, bytes]) -> tuple[str | None, list[str]]:
    """Commit date of the deck version the archive's own template files match (deck-hashes.json)."""
    try:
        hist = json.loads(_DATA.read_text())["history"]
    except (OSError, ValueError, KeyError):
        return None, ["deck-hashes.json unreadable"]
    notes: list[str] = []
    dates: list[str] = []
    for name in ("reference.py", "check.py", "problem.yaml"):
        data = template_files.get(name)
        if data is None:
            continue
        sha = _sha(data)
        hit = None
        for key, versions in hist.items():
            if key.endswith(f"/{problem}/{name}"):
                for v in versions:
                    if v["sha256"] == sha:
                        hit = v["commit_date"]
        if hit:
            dates.append(hit)
            notes.append(f"template {name} matches the deck version committed {hit}")
        else:
            notes.append(f"template {name} sha256 {sha[:12]} matches no known deck version")
    return (max(dates) if dates else None), notes


def choose_spec(problem: str, archive_date: str | None, template_files: dict[str, bytes] | None = None,
                deck_version: str | None = None):
    """(spec, how, notes): the kernels ProblemSpec of the run's deck version."""
    from forensics.kernels import registry
    notes: list[str] = []
    if deck_version:
        return registry.get(problem, deck_version=deck_version), "forced", notes
    tdate, tnotes = template_date(registry.get(problem).name, template_files or {})
    notes += tnotes
    if tdate:
        try:
            spec = registry.get(problem, deck_version=tdate)
            if archive_date:
                by_date = registry.get(problem, deck_version=archive_date[:10])
                if by_date.deck_version != spec.deck_version:
                    notes.append(f"archive date {archive_date[:10]} implies version {by_date.deck_version}; "
                                 f"the template files win")
            return spec, "template-hash", notes
        except KeyError as e:
            notes.append(str(e))
    if archive_date:
        return registry.get(problem, deck_version=archive_date[:10]), "archive-date", notes
    return registry.get(problem), "current (no date, no matching template)", notes


def reference_file(spec) -> Path:
    from forensics.kernels.common import REF_DIR
    return Path(REF_DIR) / spec.ref_file


def replay_solution(problem: str, solution: bytes, sidecars: dict[str, bytes] | None = None, *,
                    device: str = "cuda", probes: Iterable[str] | None = None, shapes: str = "canonical",
                    archive_date: str | None = None, template_files: dict[str, bytes] | None = None,
                    deck_version: str | None = None, limits: Limits | None = None,
                    cache_root: Path | None = None, keep_scratch: bool = False, archived: dict | None = None,
                    seeds: Iterable[int] | None = None, ref_impl: str = "reference", on_event=None,
                    shape_list: list[dict] | None = None, python: str | None = None,
                    hide: Iterable[str | Path] = (), reuse: bool = True) -> Outcome:
    """Replay one solution against the bundled reference.  Never raises for the solution's sake; a
    problem without a bundled reference is an Outcome `not_replayable` too.

    `python`: the child's interpreter (default this one); `hide`: paths the child's sandbox must
    keep out of its view even where a bound tree holds them (the run folder, the archive); `reuse`
    False: no reference model or output shared between probes (the path before, for measuring it)."""
    try:
        spec, how, notes = choose_spec(problem, archive_date, template_files, deck_version)
    except KeyError as e:
        return no_reference(problem, str(e).strip("'\""), device=device, shapes=shapes)
    solution, sidecars, split = split_published(solution, sidecars)
    if shapes == "tiny" and not getattr(spec, "tiny_shapes", None):
        tiny = TINY_SHAPES.get(spec.name)
        if tiny is None:
            raise ValueError(f"no tiny shapes for {spec.name}; use --shapes canonical")
        spec_tiny = tiny
    else:
        spec_tiny = None
    scratch = Scratch(solution, sidecars, reference_src=reference_file(spec), cache_root=cache_root, keep=keep_scratch,
                      hide=[str(h) for h in hide])
    if shape_list:   # the caller's shapes (a CPU run of a solution that only takes some sizes)
        spec_tiny = shape_list
    rp = Session(spec, scratch, device=device, shapes=shapes, limits=limits, archive_date=archive_date,
                 seeds=seeds, ref_impl=ref_impl, python=python, archived=archived, on_event=on_event,
                 shape_list=spec_tiny, reuse=reuse)
    if split:
        rp.emit({"event": "sidecars", "split": split})
    try:
        from .drivers import run as run_probes
        out = run_probes(rp, expand_probes(probes))
    except KeyboardInterrupt as e:   # ReplayInterrupted (a signal) or Ctrl-C: the result so far
        out = rp.outcome
        out.info["interrupted"] = str(e) or type(e).__name__
    finally:
        try:
            _judge_evidence(rp, scratch, python)
        finally:
            try:   # what this replay left in the persistent build cache; caps and LRU eviction (buildcache.py)
                from .buildcache import account
                scratch.cache_report = account(scratch.cache, scratch.claim_fd)
            except Exception as e:  # noqa: BLE001 - the accounting never costs the replay its result
                scratch.cache_report = {"dir": str(scratch.cache), "error": f"{type(e).__name__}: {e}"[:300]}
            scratch.cleanup()
    out.info.update(problem=spec.name, bench=spec.bench, deck_version=spec.deck_version, version_choice=how,
                    version_notes=notes, solution_sha256=scratch.sha256, scratch_skipped=scratch.skipped,
                    cache_dir=str(scratch.cache), device=device, shapes=shapes, status=out.status(),
                    official=out.official())
    if split:
        out.info["sidecars_split"] = split
    if scratch.io_root_refused:   # /dev/shm/forensics-replay-io was not safely ours (runner.shared_io_root)
        out.info["io_root_refused"] = scratch.io_root_refused
    if scratch.swept:   # scratches of replays killed before their cleanup (runner.sweep_dead_scratches)
        out.info["dead_scratches_removed"] = scratch.swept
    if scratch.cache_report is not None:   # what it left in the persistent build cache (buildcache.py)
        out.info["build_cache"] = scratch.cache_report
    if scratch.stale_build_locks:   # a killed replay of this solution had left them (claim_build_cache)
        out.info["stale_build_locks_removed"] = scratch.stale_build_locks
    if keep_scratch:
        out.info["scratch_root"] = str(scratch.root)
    out.info["sandbox"] = sandbox_info(scratch.sandbox_reports)
    sb = out.info["sandbox"]
    if sb.get("missing"):
        out.findings.append({
            "rule": "replay-sandbox-partial", "severity": "info", "category": "info", "probe": None,
            "message": "The replay's sandbox lacked layers on this machine: " + "; ".join(sb["missing"])[:600]
                       + f". In force: {sb.get('summary', '')[:300]}.", "data": {"sandbox": sb}})
    if how.startswith("current"):
        rp.finding("replay-contract-unknown", f"The run's deck version could not be established (no archive date, "
                   f"no matching template files); replayed against the current version {spec.deck_version}.",
                   {"notes": notes})
    return out


def _judge_evidence(rp: Session, scratch: Scratch, python: str | None) -> None:
    """What the solution's processes did (their audit hooks' evidence, capabilities.judge), once every
    child has ended; a failure here is the tool's (`replay-tool-error`), never the solution's."""
    import sys
    from . import capabilities
    for ch in scratch.children:   # an interrupted replay may have left one: its evidence ends with it
        if ch.alive():
            ch.kill()
    try:
        from .sandbox import python_paths
        dirs = python_paths(python or sys.executable)
    except Exception:  # noqa: BLE001 - without them site-packages reads count as outside
        dirs = list(dict.fromkeys([sys.prefix, sys.base_prefix, sys.exec_prefix]))
    try:
        rp.info["evidence"] = capabilities.judge(rp, scratch, dirs)
    except Exception as e:  # noqa: BLE001
        import traceback
        rp.finding("replay-tool-error", f"The replay could not judge the solution's audit evidence ({type(e).__name__}: "
                   f"{str(e)[:200]}); what it did at run time says nothing here.",
                   {"probe": "capabilities", "traceback": traceback.format_exc()[-3000:]}, key="tool-error:evidence")


def split_published(solution: bytes, sidecars: dict[str, bytes] | None) -> tuple[bytes, dict[str, bytes], list[dict]]:
    """The public archive's form: sidecar sources appended to solution.py after `# ===== sidecar:
    NAME (N bytes ...) =====` banners (forensics.archive.sidecars).  -> (the Python part as
    solution.py, sidecars with each appended file added under its name unless the run's own
    scratch/ already has one, what was split).  A file without banners comes back as it was."""
    side = dict(sidecars or {})
    if b"# ===== sidecar: " not in solution:
        return solution, side, []
    try:
        from forensics.archive.sidecars import split_sidecars
    except ImportError:  # pragma: no cover - the package is always there beside replay
        return solution, side, []
    text = solution.decode("utf-8", "surrogateescape")
    sp = split_sidecars(text)
    if not sp.has_sidecars:
        return solution, side, []
    done = []
    for sc in sp.sidecars:
        data = sc.text.encode("utf-8", "surrogateescape")
        kept = sc.name in side
        if not kept and sc.name not in ("solution.py", "reference.py"):
            side[sc.name] = data
        done.append({"name": sc.name, "bytes": len(data), "declared": sc.declared_size,
                     "size_matches": sc.size_matches, "first_line": sc.first_line,
                     "written": not kept and sc.name not in ("solution.py", "reference.py"),
                     **({"note": "the run's own scratch/ copy kept"} if kept else {})})
    return sp.python.encode("utf-8", "surrogateescape"), side, done


def no_reference(problem: str, why: str, device: str = "cuda", shapes: str = "canonical") -> Outcome:
    """The Outcome of a run whose problem has no bundled reference: not replayable, with the reason."""
    out = Outcome()
    reason = f"no bundled reference for {problem}"
    out.rows.append({"probe": BUILD, "status": "not_replayable", "shape": None, "seed": None, "case_name": None,
                     "max_abs": None, "max_rel": None, "n_bad": None, "n_total": None, "worst_index": None,
                     "ms": None, "tflops": None, "gbps": None, "device": device, "detail": f"{reason} ({why})",
                     "data": None})
    out.findings.append({"rule": "replay-not-replayable", "severity": "info", "category": "portability",
                         "probe": BUILD, "message": f"Not replayed: {reason} ({why}). Not a correctness failure.",
                         "data": {"reason": reason}})
    out.info.update(problem=problem, device=device, shapes=shapes, not_replayable=reason, status=out.status(),
                    official=out.official())
    return out


def sandbox_info(reports: list[dict]) -> dict:
    """What held for this replay's children (one report each): the first report's layers, every
    layer missing in any child, the peak memory of the largest one."""
    from .sandbox import summary
    if not reports:
        return {"missing": [], "children": 0, "summary": "no child started"}
    out = {k: v for k, v in reports[0].items() if k not in ("peak_bytes", "oom_kill", "errors")}
    out["missing"] = list(dict.fromkeys(m for r in reports for m in (r.get("missing") or [])))
    errs = list(dict.fromkeys(e for r in reports for e in (r.get("errors") or [])))
    if errs:
        out["errors"] = errs
    peaks = [r["peak_bytes"] for r in reports if r.get("peak_bytes")]
    out["peak_bytes"] = max(peaks) if peaks else None
    out["oom_kill"] = sum(r.get("oom_kill") or 0 for r in reports)
    out["children"] = len(reports)
    out["summary"] = summary(out)
    return out


_RUN_DATE = re.compile(r"(?:^|/)(20\d{2})(\d{2})(\d{2})_\d{6}_")


def _run_files(run_dir: Path):
    """The run folder through the archive's read-only view (`RunFiles`), as `scan` reads it: a
    link is never followed (a hostile `solution.py` -> `~/.aws/credentials` was read, and run as
    the solution, whose errors the report quotes), a named pipe or device never opened."""
    from forensics.archive import RunFiles
    return RunFiles.from_dir(run_dir)


def read_run_dir(run_dir: Path) -> dict[str, Any]:
    """What replay needs from a run folder (read-only): problem, date, template files, archived numbers."""
    run_dir = Path(run_dir)
    rf = _run_files(run_dir)
    res: dict = {}
    raw = rf.read_bytes("result.json")
    if raw is not None:
        try:
            res = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            res = {}
        res = res if isinstance(res, dict) else {}
    problem = res.get("problem")
    date = None
    try:
        from forensics.archive.runid import parse_run_id
        rid = parse_run_id(run_dir.name)
        if rid is not None:
            problem = problem or rid.problem
            date = rid.timestamp.strftime("%Y-%m-%d")
    except ImportError:  # pragma: no cover - GPU machine without the package deps
        pass
    if date is None:
        m = _RUN_DATE.search(str(run_dir.name))
        if m:
            date = "-".join(m.groups())
    if date is None and res.get("started_at"):
        date = str(res["started_at"])[:10]
    templates = {}
    for rel in rf.list("template_files/"):
        data = rf.read_bytes(rel) if rel.count("/") == 1 else None
        if data is not None:
            templates[rel.split("/", 1)[1]] = data
    from .timing import parse_benchmark_log
    bl = rf.read_text("benchmark.log")
    archived = {"peak_fraction": res.get("peak_fraction"),
                "gpu": (res.get("regrade") or {}).get("gpu_name") if isinstance(res.get("regrade"), dict) else res.get("gpu_name"),
                "shapes": parse_benchmark_log(bl) if bl is not None else {}}
    return {"problem": problem, "date": date, "templates": templates, "archived": archived, "result": res}


def replay_run_dir(run_dir: str | Path, problem: str | None = None, **kw: Any) -> Outcome:
    run_dir = Path(run_dir)
    meta = read_run_dir(run_dir)
    problem = problem or meta["problem"]
    if not problem:
        raise ValueError(f"{run_dir}: cannot tell the problem (no result.json problem, unparseable run id)")
    rf = _run_files(run_dir)
    sol = rf.read_bytes("solution.py")
    if sol is None:
        raise ValueError(f"{run_dir}: solution.py is missing, a link or not a regular file: not read")
    sidecars: dict[str, bytes] = {}
    for rel in rf.list("scratch/"):
        e = rf.entry(rel)
        if e is not None and e.size <= 256 * 2**20:
            data = rf.read_bytes(rel)
            if data is not None:
                sidecars[rel.split("/", 1)[1]] = data
    kw.setdefault("archive_date", meta["date"])
    kw.setdefault("hide", [str(run_dir.resolve())])
    out = replay_solution(problem, sol, sidecars, template_files=meta["templates"], archived=meta["archived"], **kw)
    res = meta["result"] or {}
    out.info["archived_check"] = out.compare_archived(
        res.get("correct"), "result.json" if meta["result"] else "no result.json")
    return out
