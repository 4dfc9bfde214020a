"""Static audit: rules over the solution's AST and embedded CUDA, plus grader integrity.

    lint_source(text, problem=...)      one solution, no archive
    lint_run_dir(path)                  a run folder on disk, read-only, no store
    lint_files(files, ...)              the same over any FileAccess (RunFiles from the store)
    analyze(store, run_ids)             the scan's analyzer: findings 'static' and 'integrity'

Solution code is hostile: it is parsed, never imported or executed.
"""

from __future__ import annotations

import ast
import gc
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from forensics.archive.sidecars import split_sidecars

from ..findings import severity_key
from . import cuda as C
from . import language as L
from . import output_forgery as OF
from . import pasted as PASTED
from . import problems as P
from . import python as PY
from . import work as W
from .base import DirFiles, FileAccess, Hit, quote_lines
from .rules import RULES
from .tripwire import official_forbidden

__all__ = ["analyze", "lint_source", "lint_run_dir", "lint_files", "LintReport", "DirFiles", "RULES"]

SIDECAR_EXT = (".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")
MAX_AST_CHARS = 5_000_000


@dataclass
class LintReport:
    hits: list[Hit] = field(default_factory=list)
    problem: str | None = None
    bench: str | None = None
    gpu: str | None = None
    parse: dict[str, Any] = field(default_factory=dict)
    language: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    official_forbidden: dict[str, Any] = field(default_factory=dict)
    state: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def rules(self) -> set[str]:
        return {h.rule for h in self.hits}

    def to_dict(self) -> dict[str, Any]:
        hs = sorted(self.hits, key=lambda h: (severity_key(h.severity), h.file, h.line_start or 0))
        return {"problem": self.problem, "bench": self.bench, "gpu": self.gpu, "files": self.files,
                "parse": self.parse, "language": self.language, "gate": self.gate,
                "official_forbidden": self.official_forbidden, "state": self.state,
                "findings": [h.to_dict() for h in hs]}


def _decode(source: str | bytes) -> tuple[str, str | None]:
    if isinstance(source, str):
        return source, None
    try:
        return source.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return source.decode("utf-8", errors="replace"), f"invalid UTF-8 at byte {e.start}"


FALLBACK_RX = {
    "STACK-SNIFF": r"inspect\.stack|sys\._getframe|inspect\.currentframe",
    "ENV-SNIFF": r"KBH_\w+",
    "GLOBAL-TORCH-FLAG": r"torch\.backends\.[\w.]+\s*=[^=]|set_float32_matmul_precision|reduced_precision_reduction\s*=",
    "PTR-KEYED-CACHE": r"data_ptr\(\)",
    "CUDA-GRAPH-REPLAY": r"CUDAGraph\(|\.replay\(\)",
    "SYSTEM-EXIT": r"sys\.exit\(|os\._exit\(",
    "MONKEYPATCH-TORCH": r"^\s*torch\.[\w.]+\s*=[^=]",
}


def _fallback_hits(text: str, filename: str, lines: list[str]) -> list[Hit]:
    hits = []
    for rid, rx in FALLBACK_RX.items():
        for m in re.finditer(rx, text, re.M):
            ln = text.count("\n", 0, m.start()) + 1
            hits.append(Hit(rid, ln, ln, f"regex fallback (no AST): '{m.group(0).strip()[:40]}'", file=filename,
                            severity="low", quote=quote_lines(lines, ln, ln), data={"fallback": True}))
            break
    return hits


def lint_source(source: str | bytes, filename: str = "solution.py", problem: str | None = None,
                bench: str | None = None, gpu: str | None = None, sidecars: dict[str, str] | None = None,
                allow_triton: bool = False) -> LintReport:
    """Lint one solution (plus optional sidecar texts keyed by their path).

    A published file that carries its sidecars appended after `# ===== sidecar: NAME =====` banners
    (the public archive's form) is split first: the Python above the first banner is the solution,
    each sidecar is analysed as what it is, and every finding keeps the published file's line.

    The cyclic garbage collector is paused while one solution is linted and its young generation
    collected once at the end, here, so that the lint pays for it: the parse and the model
    allocate some 10^5 tracked objects, and the automatic collections they trigger (full ones
    among them, which traverse every object of the process) cost about a tenth of the lint.  If
    the collector was already off (a caller's choice) it is left alone."""
    if not gc.isenabled():
        return _lint_source(source, filename, problem, bench, gpu, sidecars, allow_triton)
    gc.disable()
    try:
        return _lint_source(source, filename, problem, bench, gpu, sidecars, allow_triton)
    finally:
        gc.enable()
        gc.collect(0)   # the lint's own cycles (walk caches kept on AST nodes), now unreachable


def _lint_source(source: str | bytes, filename: str, problem: str | None, bench: str | None, gpu: str | None,
                 sidecars: dict[str, str] | None, allow_triton: bool) -> LintReport:
    text, enc_err = _decode(source)
    appended = split_sidecars(text)
    appended_cuda: list[C.Blob] = []
    appended_py: list[str] = []
    if appended.has_sidecars:
        text = appended.python
        for sc in appended.sidecars:
            if sc.name.endswith(".py"):
                appended_py.append("\n" * (sc.first_line - 1) + sc.text)
            else:
                appended_cuda.append(C.Blob(sc.text, [(filename, sc.first_line + i) for i in range(sc.text.count("\n") + 1)],
                                            f"appended sidecar {sc.name}"))
    bench = bench or P.bench_of(problem)
    rep = LintReport(problem=problem, bench=bench, gpu=gpu, files=[filename] + sorted(sidecars or {}))
    lines = text.splitlines()
    mod: PY.Module | None = None
    err = None
    if enc_err:
        rep.hits.append(Hit("PARSE-FALLBACK", None, None, f"{enc_err}; decoded with replacement characters "
                            "(Python refuses to import such a file)", file=filename, severity="low"))
    if len(text) > MAX_AST_CHARS:
        err = f"file has {len(text)} characters, above the {MAX_AST_CHARS} AST limit"
    else:
        try:
            tree = ast.parse(text, filename=filename)
            mod = PY.Module(tree, text, filename)
        except SyntaxError as e:
            err = f"SyntaxError: {e.msg} (line {e.lineno})"
        except (RecursionError, MemoryError, ValueError) as e:
            err = f"{type(e).__name__}: {str(e)[:80] or 'nesting too deep'}"
    blobs: list[C.Blob] = []
    if mod is not None:
        try:
            rep.hits.extend(PY.analyse(mod, problem, bench))
            blobs, flags, _files = C.extract(mod)
            for b in blobs:
                rep.hits.extend(C.analyse_blob(b))
            rep.hits.extend(C.check_flags(mod, flags, gpu))
            rep.hits.extend(C.python_l2_window(mod))
            rep.hits.extend(OF.check_forged_writes(mod))
            rep.state = PY.state_inventory(mod)
        except RecursionError:
            err = "RecursionError: AST nested too deeply for the rule walkers"
            rep.hits = [h for h in rep.hits if h.rule == "PARSE-FALLBACK"]
            mod = None
    if mod is None:
        rep.hits.append(Hit("PARSE-FALLBACK", _err_line(err), _err_line(err),
                            f"{err}; AST rules did not run, a regex pass ran instead", file=filename,
                            data={"error": err}))
        whole = C.Blob(text, [(filename, i + 1) for i in range(text.count("\n") + 1)], "whole file (fallback)")
        blobs = [whole]
        rep.hits.extend(C.analyse_blob(whole))
        rep.hits.extend(_fallback_hits(text, filename, lines))
    rep.parse = {"ok": mod is not None, "error": err, "encoding_error": enc_err, "lines": len(lines), "bytes": len(text.encode("utf-8", "replace"))}
    # sidecar CUDA files
    for path, stext in sorted((sidecars or {}).items()):
        if path.endswith(SIDECAR_EXT):
            sb = C.Blob(stext, [(path, i + 1) for i in range(stext.count("\n") + 1)], f"sidecar {path}")
            blobs.append(sb)
            rep.hits.extend(C.analyse_blob(sb))
    for sb in appended_cuda:
        blobs.append(sb)
        rep.hits.extend(C.analyse_blob(sb))
    for body in appended_py:
        sub = lint_source(body, filename, problem, bench, gpu)
        rep.hits.extend(h for h in sub.hits if h.rule not in ("LANGUAGE", "FORBIDDEN-TRIPWIRE", "WORK-ACCOUNT", "WORK-BY-LIBRARY")
                        + PASTED.RULE_IDS)   # the whole file's parts are compared once, below
    if appended.has_sidecars:
        rep.parse["appended_sidecars"] = [{"name": sc.name, "first_line": sc.first_line, "size_matches": sc.size_matches}
                                          for sc in appended.sidecars]
    if mod is not None:
        rep.hits.extend(W.check_work(mod, blobs, problem))
        # a persisting-L2 call through a CUDA library handle is read by the capability audit; the text
        # reading of its name (python_l2_window) may have cited the same line already: one finding a line
        seen_l2 = {(h.file, h.line_start) for h in rep.hits if h.rule == "L2-PERSISTING-WINDOW"}
        rep.hits.extend(h for h in PY.check_capabilities(mod, problem, blobs, result_funcs=PY.result_functions(mod))
                        if h.rule != "L2-PERSISTING-WINDOW" or (h.file, h.line_start) not in seen_l2)
    rep.hits.extend(PASTED.check_solution(mod, filename, text, appended.sidecars, sidecars, problem, blobs=blobs))
    # forbidden ops: the official substring verdict next to the AST's
    sources = {filename: text}
    if bench == "cuda":
        sources.update({p: t for p, t in (sidecars or {}).items() if p.endswith(SIDECAR_EXT)})
    real = {}
    for h in rep.hits:
        if h.rule == "FORBIDDEN-OP":
            real.setdefault(h.data.get("forbidden"), []).append(h.line_start)
    if bench != "mega":
        for path, t in sources.items():
            for lit, lns in official_forbidden(t, problem).items():
                used = sorted(set(real.get(lit, []))) if path == filename else []
                rep.official_forbidden.setdefault(path, {})[lit] = lns
                rep.hits.append(Hit("FORBIDDEN-TRIPWIRE", lns[0], lns[-1] if len(lns) < 4 else lns[0],
                                    f"official substring check fails on '{lit}' at {path}:{','.join(map(str, lns[:8]))}; "
                                    + (f"the code really uses it at line(s) {','.join(map(str, used))}" if used
                                       else "the code never uses it (comment, string or non-call mention)"),
                                    file=path, severity="low" if used else "medium",
                                    quote=quote_lines(t.splitlines(), lns[0], lns[0]),
                                    data={"literal": lit, "lines": lns, "ast_use_lines": used}))
    # language
    cuda_texts = [(b.text, b) for b in blobs]
    rep.language = L.classify(mod, cuda_texts, text)
    gate_sources = {filename: text}
    gate_sources.update({p: t for p, t in (sidecars or {}).items() if p.endswith(SIDECAR_EXT)})
    gate_sources.update({f"{filename}#{sc.name}": sc.text for sc in appended.sidecars if not sc.name.endswith(".py")})
    rep.gate = L.gate(gate_sources, bench, allow_triton=allow_triton) if bench in ("cuda", "mini", None) else {
        "framework": L.framework_label(text, bench)}
    ev_lines = "; ".join(f"{k}: {', '.join(e['token'] + '@' + str(e['line']) for e in v[:3])}"
                         for k, v in rep.language["evidence"].items())
    rep.hits.append(Hit("LANGUAGE", None, None, f"primary language {rep.language['primary']}; gate framework="
                        f"{rep.gate.get('framework')}; evidence {ev_lines[:300] or 'none'}", file=filename,
                        data={"language": rep.language, "gate": rep.gate}))
    gate_bench = bench == "cuda" or (bench == "mini" and P.language_gate(problem))
    if gate_bench and not rep.gate.get("ok", True):
        why = []
        if rep.gate["triton_cheat"]:
            why.append("Triton found")
        if rep.gate["dsl_cheat"]:
            why.append("DSL found")
        if not rep.gate["has_cuda_evidence"]:
            why.append("no CUDA evidence")
        rep.hits.append(Hit("LANGUAGE-GATE-FAIL", None, None, f"cuda language gate fails: {', '.join(why)} "
                            f"(forbidden_hits={rep.gate['forbidden_hits']})", file=filename, data={"gate": rep.gate}))
    _l2_without_flush(rep.hits, problem)
    _caches_by_contract(rep.hits, problem)
    if mod is not None:
        _forbidden_off_path(rep.hits)
        _l2_off_timed_path(mod, rep.hits, problem)
    return rep


def _forbidden_off_path(hits: list[Hit]) -> None:
    """A forbidden call decides only where it does the graded entry's main operation: the work
    account's library calls of the graded entry (WORK-BY-LIBRARY / WORK-ACCOUNT data).  A forbidden op
    that sorts a side value or sits in a helper the graded path never reaches is reported (medium)."""
    lib_lines: set[int] = set()
    graded: set[str] = set()
    for h in hits:
        if h.rule in ("WORK-BY-LIBRARY", "WORK-NO-KERNEL", "WORK-UNRESOLVED") or h.rule == "WORK-ACCOUNT":
            for item in (h.data or {}).get("library", []) or []:
                try:
                    lib_lines.add(int(str(item).rsplit("@", 1)[1]))
                except (IndexError, ValueError):
                    pass
    for h in hits:
        if h.rule != "FORBIDDEN-OP" or h.severity not in ("high", "critical"):
            continue
        if (h.data or {}).get("import") or h.line_start is None or h.line_start in lib_lines:
            continue
        h.severity = "medium"
        h.message += " (not a call doing the graded entry's main operation: a side value or an off-path helper)"
        h.data = {**(h.data or {}), "on_graded_path": False}


def _l2_off_timed_path(mod: Any, hits: list[Hit], problem: str | None) -> None:
    """An L2 residency hint can only defeat the flush in a kernel the timed calls launch: a Triton
    kernel launched only from construction or a one-off preparation (a weight repack in __init__) is
    low."""
    from .capabilities import Auditor
    tri = [h for h in hits if h.rule in L2_RULES and h.severity in ("high", "medium") and (h.data or {}).get("kernel")]
    if not tri:
        return
    reach = Auditor(mod, problem).entry_reach()
    for h in tri:
        kname = str(h.data["kernel"]).rsplit(".", 1)[-1]
        launchers = set()
        for n in mod.of(ast.Subscript):
            if isinstance(n.value, ast.Name) and n.value.id == kname and isinstance(mod.parent.get(n), ast.Call):
                sc = mod.scope_of(n)
                launchers.add(sc.qualname if sc is not None else "<module>")
        if launchers and not (launchers & reach):
            h.severity = "low"
            h.message += f" (the kernel is launched only from {', '.join(sorted(launchers)[:3])}, not from the timed calls)"
            h.data = {**h.data, "launched_on_timed_path": False}


def _caches_by_contract(hits: list[Hit], problem: str | None) -> None:
    """An entry that ignores the caches or state its caller passes games the contract only where the
    deck's check passes state the solution did not make; elsewhere (megaqwen: the caches decode_steps
    receives are always its own prefill's) it is a caveat, not a pending rubric leak."""
    if P.caller_state_checked(problem) is not False:
        return
    for h in hits:
        if h.rule == "ARG-IGNORED" and h.severity not in ("info", "low"):
            h.severity = "low"
            h.message += (f" ({problem}'s check and benchmark only ever pass it the solution's own objects: within the "
                          "contract as graded)")
            h.data = {**(h.data or {}), "caller_state_checked": False}


L2_RULES = ("L2-EVICT-LAST", "L2-PERSISTING-WINDOW")


def _l2_without_flush(hits: list[Hit], problem: str | None) -> None:
    """An L2 residency hint can only defeat a flush the benchmark performs: the decode and rollout
    problems time a wall-clock loop with no L2 flush, so there the hint is a performance choice (info)."""
    if P.l2_flushed(problem) is not False:
        return
    for h in hits:
        if h.rule in L2_RULES and h.severity != "info":
            h.severity = "info"
            h.message += f" ({problem} times a wall-clock loop with no L2 flush: the hint cannot defeat one)"
            h.data = {**(h.data or {}), "problem_flushes_l2": False}


def _err_line(err: str | None) -> int | None:
    m = re.search(r"line (\d+)", err or "")
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------- run folders
def _gpu_for_run(fa: FileAccess, result: dict, integrity_hits: list[Hit], problem: str | None) -> str | None:
    rg = result.get("regrade") if isinstance(result.get("regrade"), dict) else {}
    for v in (rg.get("gpu_name"), result.get("gpu_name")):
        if v:
            return str(v)
    g = fa.read_text("gpu")
    if g and g.strip():
        return g.strip()
    for h in integrity_hits:
        if h.rule == "DECK-IDENTIFIED":
            decks = {m["deck"] for m in h.data["matches"]}
            if len(decks) == 1:
                d = decks.pop()
                return {"problems-h100": "H100", "problems-h100sxm": "H100 SXM", "problems-rtxpro6000": "RTX PRO 6000",
                        "problems-b200": "B200", "problems-h100x4": "H100"}.get(d)
    for rel in ("template_files/problem.yaml", f"repo/problems/{problem}/problem.yaml"):
        y = fa.read_text(rel)
        if y:
            m = re.search(r"hardware:\s*\n?\s*-?\s*\[?\s*['\"]?([A-Za-z0-9_ ]+)", y)
            if m:
                return m.group(1).strip()
    return None


def _yaml_flag(fa: FileAccess, problem: str | None, key: str) -> bool | None:
    for rel in ("template_files/problem.yaml", f"repo/problems/{problem}/problem.yaml"):
        y = fa.read_text(rel)
        if y:
            m = re.search(rf"^\s*{key}\s*:\s*(\w+)", y, re.M)
            if m:
                return m.group(1).lower() in ("true", "yes", "1")
    return None


def lint_files(fa: FileAccess, run_name: str = "", problem: str | None = None, bench: str | None = None,
               result: dict | None = None, gpu: str | None = None, deck: dict | None = None) -> LintReport:
    from .integrity import check_integrity

    result = result if isinstance(result, dict) else {}
    if result == {}:
        raw = fa.read_bytes("result.json")
        if raw:
            try:
                result = orjson.loads(raw)
            except orjson.JSONDecodeError:
                result = {}
            result = result if isinstance(result, dict) else {}
    problem = problem or result.get("problem") or P.problem_from_text(run_name)
    if not problem:
        dirs = sorted({p.split("/")[2] for p in fa.list("repo/problems/") if p.count("/") >= 3})
        problem = dirs[0] if len(dirs) == 1 else None
    bench = bench if bench not in (None, "unknown") else P.bench_of(problem)
    integ = check_integrity(fa, problem, result, deck)
    gpu = gpu or _gpu_for_run(fa, result, integ, problem)
    sol_path = "solution.py" if fa.exists("solution.py") else (
        f"repo/problems/{problem}/solution.py" if problem and fa.exists(f"repo/problems/{problem}/solution.py") else None)
    sidecars: dict[str, str] = {}
    for p in fa.list("scratch/"):
        if p.count("/") == 1 and p.endswith(SIDECAR_EXT):
            t = fa.read_text(p)
            if t is not None:
                sidecars[p] = t
    src = fa.read_bytes(sol_path) if sol_path is not None else None
    if src is None:
        why = "no solution.py in the run folder" if sol_path is None else \
            f"{sol_path} could not be read (over its size limit, not a regular file, or an I/O error: the run's " \
            "parse_errors say which)"
        rep = LintReport(problem=problem, bench=bench, gpu=gpu, parse={"ok": False, "error": why})
        rep.hits.append(Hit("SOLUTION-UNREAD", None, None, why, file=sol_path or "solution.py"))
    else:
        allow_triton = bool(_yaml_flag(fa, problem, "allow_triton"))
        rep = lint_source(src, sol_path, problem, bench, gpu, sidecars, allow_triton=allow_triton)
        # local Python modules the solution imports from the problem dir (archived in scratch/)
        try:
            tree = ast.parse(src.decode("utf-8", "replace"))
            mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
                (n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
        except (SyntaxError, RecursionError, ValueError, MemoryError):
            mods = set()
        for m in sorted(mods):
            rel = f"scratch/{m}.py"
            if m not in ("reference", "check", "benchmark", "shapes") and fa.exists(rel):
                sub = lint_source(fa.read_bytes(rel) or b"", rel, problem, bench, gpu)
                rep.hits.extend(h for h in sub.hits if h.rule not in ("LANGUAGE", "FORBIDDEN-TRIPWIRE"))
                rep.files.append(rel)
        _compare_archived_gate(fa, rep)
    rep.hits.extend(integ)
    return rep


def _compare_archived_gate(fa: FileAccess, rep: LintReport) -> None:
    raw = fa.read_bytes("scratch/cuda_language.json")
    if raw:
        try:
            arch = orjson.loads(raw)
        except orjson.JSONDecodeError:
            arch = None
        if isinstance(arch, dict) and rep.gate:
            diff = {k: {"archived": arch.get(k), "reproduced": rep.gate.get(k)} for k in
                    ("framework", "triton_cheat", "dsl_cheat", "has_cuda_evidence", "ok")
                    if k in arch and k in rep.gate and arch.get(k) != rep.gate.get(k)}
            ev_a, ev_r = set(arch.get("cuda_evidence") or []), set(rep.gate.get("cuda_evidence") or [])
            if "cuda_evidence" in arch and ev_a != ev_r:
                diff["cuda_evidence"] = {"archived": sorted(ev_a), "reproduced": sorted(ev_r)}
            if diff:
                rep.hits.append(Hit("LANGUAGE-GATE-MISMATCH", None, None,
                                    f"scratch/cuda_language.json differs from the gate reproduced on the final source in "
                                    f"{', '.join(sorted(diff))} (sidecar may come from an earlier revision)",
                                    file="scratch/cuda_language.json", data={"diff": diff}))
    fw = fa.read_text("scratch/framework.txt")
    if fw and fw.strip() and rep.gate.get("framework") and fw.strip() != rep.gate["framework"]:
        rep.hits.append(Hit("LANGUAGE-GATE-MISMATCH", 1, 1, f"scratch/framework.txt says {fw.strip()!r}, the final source "
                            f"classifies as {rep.gate['framework']!r}", file="scratch/framework.txt",
                            data={"archived": fw.strip(), "reproduced": rep.gate["framework"]}))


def lint_run_dir(path: str | Path, deck: dict | None = None) -> LintReport:
    """Lint a run folder on disk: the solution, sidecars in scratch/, and grader integrity."""
    p = Path(path)
    return lint_files(DirFiles(p), p.resolve().name, deck=deck)


# ---------------------------------------------------------------------- store analyzer
def _to_finding(run_id: str, h: Hit):
    from forensics.analyze.findings import Evidence, Finding

    ev = [Evidence(file=h.file, line_start=h.line_start, line_end=h.line_end, quote=h.quote,
                   sha256=(h.data.get("workspace_sha256") or h.data.get("template_sha256")) if h.data else None)]
    for e in h.extra_evidence:
        ev.append(Evidence(**{k: v for k, v in e.items() if k in ("file", "line_start", "line_end", "sha256", "quote", "note")}))
    return Finding(run_id=run_id, analyzer=h.analyzer, rule=h.rule, severity=h.severity, message=h.message,
                   category=h.category, evidence=ev, probe=h.probe, data=h.data or None)


def findings_for(run_id: str, rep: LintReport) -> tuple[list, list]:
    static, integ = [], []
    for h in rep.hits:
        (static if h.analyzer == "static" else integ).append(_to_finding(run_id, h))
    return static, integ


def analyze(store, run_ids: list[str] | None = None) -> int:
    """Write 'static' and 'integrity' findings for run_ids (all runs if None); return #findings."""
    from forensics.analyze.findings import write_findings

    sql = "SELECT run_id, run_name, bench, problem, gpu_name, result_json FROM runs"
    rows = store.query(sql + (" WHERE run_id IN (SELECT unnest(?))" if run_ids is not None else ""),
                       [list(run_ids)] if run_ids is not None else None)
    ids = [r["run_id"] for r in rows]
    static_all, integ_all = [], []
    for r in rows:
        rid = r["run_id"]
        result = r.get("result_json")
        if isinstance(result, (str, bytes)):
            try:
                result = orjson.loads(result)
            except orjson.JSONDecodeError:
                result = None
        try:
            from forensics.archive import RunFiles

            fa = RunFiles.from_store(store, rid)
            rep = lint_files(fa, r.get("run_name") or rid, r.get("problem"), r.get("bench"),
                             result if isinstance(result, dict) else None, r.get("gpu_name"))
        except Exception as e:  # fail closed: say the run could not be read, never call it clean
            rep = LintReport(hits=[Hit("INTEGRITY-UNVERIFIED", None, None,
                                       f"run files could not be read: {type(e).__name__}: {str(e)[:120]}",
                                       file="", data={"error": repr(e)[:300]})])
        s, i = findings_for(rid, rep)
        static_all += s
        integ_all += i
    n = write_findings(store, "static", ids, static_all)
    n += write_findings(store, "integrity", ids, integ_all)
    return n
