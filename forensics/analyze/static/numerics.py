"""Global numerics and the interpreter: torch precision flags by what they request, the per-path
precision split, replaced torch/time functions, exits and forged grader output.
"""

from __future__ import annotations

import ast
import re

from .base import Hit
from .evaluation import resolve_call
from .model import FuncInfo, Module, _entries, _module_scope

NUMERIC_FLAGS = {"allow_tf32", "allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction",
                 "enabled", "allow_fp16_accumulation"}
# flags whose True lowers matmul/conv precision (False restores full precision)
LOWERING_FLAGS = {"allow_tf32", "allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction",
                  "allow_fp16_accumulation"}
FLAG_CALLS = {"torch.set_float32_matmul_precision": "high", "torch.set_flush_denormal": "high",
              "torch.set_default_dtype": "high", "torch.use_deterministic_algorithms": "low",
              "torch.backends.cuda.preferred_blas_library": "medium", "torch.backends.cuda.preferred_linalg_library": "low",
              "torch.set_default_tensor_type": "high", "torch.backends.cuda.enable_math_sdp": "low",
              "torch.backends.cuda.enable_flash_sdp": "low", "torch.backends.cuda.enable_mem_efficient_sdp": "low"}


def _flag_direction(mod: Module, flag: str, value: ast.AST | None) -> str:
    """'lowers' / 'raises' the precision of every matmul in the process (the checker's reference
    included), or 'unknown' when the value is computed at run time; 'other' for non-precision flags."""
    const = value.value if isinstance(value, ast.Constant) else None
    if flag in LOWERING_FLAGS:
        return {True: "lowers", False: "raises"}.get(const, "unknown") if isinstance(const, (bool, type(None))) or const in (0, 1) \
            else "unknown"
    if flag == "torch.set_float32_matmul_precision":
        arg = mod.const_str(value) if value is not None else None
        return {"highest": "raises", "high": "lowers", "medium": "lowers"}.get(arg or "", "unknown")
    if flag == "torch.set_flush_denormal":
        return {True: "lowers", False: "raises"}.get(const, "unknown") if isinstance(const, bool) else "unknown"
    return "other"


def _restores(mod: Module, node: ast.AST, value: ast.AST | None, source: str) -> bool:
    """Is `value` a local saved from `source` (the flag read before it was changed)?"""
    fi = mod.scope_of(node)
    if not isinstance(value, ast.Name):
        return False
    vals = fi.assigns.get(value.id, []) if fi is not None else ([mod.consts[value.id]] if value.id in mod.consts else [])
    return any((mod.qn(v.func if isinstance(v, ast.Call) else v) or "") == source for v in vals)


# severity of a global numerics change by direction: lowering the precision of the checker's own
# reference narrows the gap a low-precision kernel has to hide (the auditors still accepted it when
# openly documented); raising it only makes the reference stricter (a policy caveat)
DIRECTION_SEVERITY = {"lowers": "medium", "unknown": "medium", "raises": "low", "other": "low"}


def check_torch_state(mod: Module) -> list[Hit]:
    hits: list[Hit] = []
    for n in mod.of(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Call):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if not isinstance(t, ast.Attribute):
                    continue
                q = mod.qn(t) or ""
                if q.startswith("torch.backends."):
                    at_import = _module_scope(mod, n)
                    direction = _flag_direction(mod, t.attr, getattr(n, "value", None)) if t.attr in NUMERIC_FLAGS else "other"
                    if direction == "unknown" and _restores(mod, n, getattr(n, "value", None), q):
                        continue   # `flag = prev` after `prev = flag`: puts back what it found
                    sev = DIRECTION_SEVERITY[direction]
                    hits.append(mod.hit("GLOBAL-TORCH-FLAG", n, f"sets {q} {'at import' if at_import else 'at run time'}"
                                        + ("" if direction == "other" else f" ({direction} the precision of every matmul "
                                                                           "in the process, the checker's reference included)"),
                                        severity=sev, data={"flag": q, "at_import": at_import, "direction": direction}))
                elif q.startswith(("torch.", "time.", "statistics.", "builtins.", "numpy.")) and not q.startswith(
                        ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")):
                    hits.append(mod.hit("MONKEYPATCH-TORCH", n, f"replaces {q}", data={"target": q}))
                elif (mod.qn(t.value) or "") in ("torch.Tensor", "torch.nn.Module"):
                    hits.append(mod.hit("MONKEYPATCH-TORCH", n, f"replaces {q}", data={"target": q}))
        elif isinstance(n, ast.Call):
            q = mod.qn(n.func) or ""
            if q in FLAG_CALLS:
                at_import = _module_scope(mod, n)
                arg = mod.const_str(n.args[0]) if n.args else None
                if q == "torch.set_float32_matmul_precision" and arg == "highest":
                    continue   # the default: nothing changes
                direction = _flag_direction(mod, q, n.args[0] if n.args else None)
                if direction == "unknown" and n.args and _restores(mod, n, n.args[0], "torch.get_float32_matmul_precision"):
                    continue
                if direction == "other":
                    sev = FLAG_CALLS[q] if at_import or FLAG_CALLS[q] == "low" else "medium"
                else:
                    sev = DIRECTION_SEVERITY[direction]
                hits.append(mod.hit("GLOBAL-TORCH-FLAG", n, f"calls {q}({arg or ''}) {'at import' if at_import else 'at run time'}"
                                    + ("" if direction == "other" else f" ({direction} matmul precision)"),
                                    severity=sev, data={"flag": q, "at_import": at_import, "direction": direction}))
            elif isinstance(n.func, ast.Name) and n.func.id == "setattr" and len(n.args) >= 2:
                base = mod.qn(n.args[0]) or ""
                attr = mod.const_str(n.args[1]) or "?"
                if base.startswith("torch.backends"):
                    direction = _flag_direction(mod, attr, n.args[2] if len(n.args) > 2 else None) if attr in NUMERIC_FLAGS else "other"
                    hits.append(mod.hit("GLOBAL-TORCH-FLAG", n, f"setattr({base}, '{attr}')",
                                        severity=DIRECTION_SEVERITY[direction],
                                        data={"flag": f"{base}.{attr}", "direction": direction}))
                elif base.split(".")[0] in ("torch", "time", "statistics", "builtins"):
                    hits.append(mod.hit("MONKEYPATCH-TORCH", n, f"setattr({base}, '{attr}')", data={"target": f"{base}.{attr}"}))
    hits.extend(_precision_split(mod, [h for h in hits if h.rule == "GLOBAL-TORCH-FLAG"]))
    return hits


def _precision_split(mod: Module, flag_hits: list[Hit]) -> list[Hit]:
    """PRECISION-SPLIT: one entry point lowers matmul precision around its own work (at run time,
    not at import) while another entry point of the same solution runs at full precision: the
    grader checks the full-precision path tightly and the lowered one only where it is cheap to
    check, and times the lowered one.  Look-alikes: the same flag set at import (every path and the
    checker's reference share it), a single entry point, or a flag that raises precision."""
    lowering = [h for h in flag_hits if h.data.get("direction") in ("lowers", "unknown")]
    if not lowering or any(h.data.get("at_import") for h in lowering):
        return []
    entries = [fi for fi in _entries(mod)]
    if len({fi.node.name for fi in entries}) < 2:
        return []
    by_line = {h.line_start: h for h in lowering}

    def lowers(fi: FuncInfo, depth: int = 0, seen: set | None = None) -> Hit | None:
        seen = seen if seen is not None else set()
        if depth > 2 or fi.qualname in seen:
            return None
        seen.add(fi.qualname)
        for n in fi.nodes:
            h = by_line.get(getattr(n, "lineno", -1))
            if h is not None:
                return h
            if isinstance(n, ast.Call):
                for c in mod.callees(n, fi):
                    r = lowers(c, depth + 1, seen)
                    if r is not None:
                        return r
        return None

    low = {fi.qualname: lowers(fi) for fi in entries}
    del lowers   # a recursive closure is a reference cycle: drop it now
    full = [fi for fi in entries if low[fi.qualname] is None]
    out = []
    for fi in entries:
        h = low[fi.qualname]
        if h is None or not full:
            continue
        others = sorted({f.qualname for f in full if f.node.name != fi.node.name})
        if not others:
            continue
        out.append(Hit("PRECISION-SPLIT", h.line_start, h.line_end,
                       f"{fi.qualname} lowers matmul precision around its own work ({h.message.split(' (')[0]}) while "
                       f"{', '.join(others[:3])} run{'s' if len(others) == 1 else ''} at full precision: the lowered path is "
                       "the one a tight check does not see", file=mod.filename, quote=h.quote,
                       data={"function": fi.qualname, "full_precision_entries": others, "flag": h.data.get("flag")}))
    return out


EXIT_CALLS = {"sys.exit", "os._exit", "exit", "quit", "os.abort", "os.kill", "signal.raise_signal"}


def check_exit_and_output(mod: Module) -> list[Hit]:
    hits: list[Hit] = []
    for n in mod.of(ast.Call, ast.Raise):
        if mod.in_main(n):
            continue
        if isinstance(n, ast.Call):
            q, c = resolve_call(mod, n)     # by meaning: an alias, a class attribute, a partial
            if q in EXIT_CALLS:
                sev = "high" if _module_scope(mod, n) else "medium"
                hits.append(mod.hit("SYSTEM-EXIT", n, f"calls {q}() {'at import' if sev == 'high' else 'inside ' + mod.scope_of(n).qualname}",
                                    severity=sev, data={"call": q}))
            elif q == "atexit.register":
                hits.append(mod.hit("SYSTEM-EXIT", n, "registers an atexit handler", severity="medium", data={"call": q}))
            elif q in ("exec", "eval", "compile", "builtins.exec", "builtins.eval", "marshal.loads", "types.FunctionType",
                       "runpy.run_path", "runpy.run_module") or (q in ("importlib.import_module", "__import__") and n.args
                                                                 and mod.const_str(n.args[0]) is None):
                if q == "compile" and "compile" in mod.aliases:
                    continue
                if q in ("exec", "eval", "compile", "builtins.exec", "builtins.eval") and n.args \
                        and mod.const_str(n.args[0]) is not None:
                    continue    # a constant string: the capability audit reads it as code
                hits.append(mod.hit("DYNAMIC-EXEC", n, f"calls {q}(); code it runs is not visible to static analysis",
                                    data={"call": q}))
        elif isinstance(n, ast.Raise) and n.exc is not None:
            q = mod.qn(n.exc.func if isinstance(n.exc, ast.Call) else n.exc) or ""
            if q == "SystemExit":
                sev = "high" if _module_scope(mod, n) else "medium"
                hits.append(mod.hit("SYSTEM-EXIT", n, "raises SystemExit", severity=sev, data={"call": "raise SystemExit"}))
    return hits
