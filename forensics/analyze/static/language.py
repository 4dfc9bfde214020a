"""Language classification, and a reproduction of the cuda bench language gate.

Two different things are computed and kept apart:

* `gate(...)` reproduces what the graders' regex gate reports (archive-format section 10,
  replay-contract Part C): it runs over raw text, so comments count, exactly as the gate does.
  The patterns are written from the spec's description, not copied from the grader.
* `classify(...)` says what the code is really written in, with evidence tokens and lines, using
  the AST for Python (a Triton mention in a comment is not Triton) and comment-stripped CUDA.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from forensics.text import rx as RX

TRITON_GATE = {
    "import_triton": re.compile(r"^\s*(import\s+triton|from\s+triton)\b", re.M),
    "triton_jit": re.compile(r"@\s*triton\.jit"),
    "triton_language": re.compile(r"triton\.language|\btl\.(program_id|load|store|dot)\b"),
}
DSL_GATE = {
    "thunderkittens": re.compile(r"thunderkittens", re.I),
    "cute_dsl": re.compile(r"(from|import)\s+cutlass\.cute|cutlass\.cute\b|cute\.dsl"),
    "tilelang": re.compile(r"\btilelang\b"),
    "cuda_python_kernel": re.compile(r"cuda\.cooperative|numba\.cuda\.jit|@\s*cuda\.jit"),
}
EVIDENCE = {
    "load_inline": re.compile(r"load_inline|cpp_extension\.load\b"),
    "global_kernel": re.compile(r"__global__\s+(void|__launch_bounds__)"),
    "cuda_header": re.compile(r"#\s*include\s*[<\"]cuda\w*\.h"),
    "ptx_inline": re.compile(r"asm\s+volatile|asm\s*\(|mma\.sync|tcgen05\."),
    "wmma": re.compile(r"\bwmma::|nvcuda::wmma"),
    "cutlass_cpp": re.compile(r"cutlass::|cute::|<cutlass/"),
    "cu_file": re.compile(r"load\s*\([^)]*\.cu['\"]", re.S),
}
FRAMEWORK_RX = {
    "ptx": re.compile(r"asm\s*(volatile)?\s*\(|mma\.sync|ld\.global\.|cp\.async|tcgen05|wgmma"),
    "cutlass3": re.compile(r"cute::|cutlass/gemm/collective|CollectiveBuilder|cutlass::gemm::collective"),
    "cutlass2": re.compile(r"cutlass::gemm::device|cutlass::gemm::kernel|<cutlass/"),
    "cutlass": re.compile(r"cutlass::|cute::|<cutlass/"),
    "cuda_wmma": re.compile(r"\bwmma::"),
    "triton": re.compile(r"@\s*triton\.jit|^\s*import\s+triton", re.M),
    "cuda_raw": re.compile(r"__global__|load_inline|cpp_extension"),
    "cudagraph": re.compile(r"CUDAGraph|cuda\.graph\("),
    "compile": re.compile(r"torch\.compile"),
}
PRIORITY = {
    "hard": ("ptx", "cutlass3", "cutlass2", "cuda_wmma", "triton", "cuda_raw"),
    "mini": ("ptx", "cutlass3", "cutlass2", "cuda_wmma", "triton", "cuda_raw"),
    "cuda": ("ptx", "cutlass", "cuda_wmma", "cuda_raw", "triton"),
    "mega": ("ptx", "cuda_raw", "triton", "cudagraph", "compile"),
}
DEFAULT_LABEL = {"hard": "unknown", "mini": "unknown", "cuda": "pytorch_only", "mega": "eager"}


# a literal every match of the pattern contains: the regex runs only if it is present (speed)
NEEDLE = {"import_triton": "triton", "triton_jit": "triton", "triton_language": "t", "thunderkittens": "",
          "cute_dsl": "cute", "tilelang": "tilelang", "cuda_python_kernel": "cuda", "load_inline": "load",
          "global_kernel": "__global__", "cuda_header": "include", "ptx_inline": "", "wmma": "wmma",
          "cutlass_cpp": "cut", "cu_file": ".cu", "ptx": "", "cutlass3": "cut", "cutlass2": "cutlass", "cutlass": "cut",
          "cuda_wmma": "wmma", "triton": "triton", "cuda_raw": "", "cudagraph": "raph", "compile": "torch.compile"}


# the literals every match of a pattern begins with: the pattern is tried only where one occurs
# (forensics.text.rx; the same answer as a full search, without trying every offset)
HEADS = {"triton_language": ("triton.language", "tl."), "cute_dsl": ("from", "import", "cutlass.cute", "cute.dsl"),
         "cuda_python_kernel": ("cuda.cooperative", "numba.cuda.jit", "@"),
         "load_inline": ("load_inline", "cpp_extension.load"), "ptx_inline": ("asm", "mma.sync", "tcgen05."),
         "wmma": ("wmma::", "nvcuda::wmma"), "cutlass_cpp": ("cutlass::", "cute::", "<cutlass/"),
         "ptx": ("asm", "mma.sync", "ld.global.", "cp.async", "tcgen05", "wgmma"),
         "cutlass3": ("cute::", "cutlass/gemm/collective", "CollectiveBuilder", "cutlass::gemm::collective"),
         "cutlass2": ("cutlass::gemm::device", "cutlass::gemm::kernel", "<cutlass/"),
         "cutlass": ("cutlass::", "cute::", "<cutlass/"), "cuda_wmma": ("wmma::",),
         "cuda_raw": ("__global__", "load_inline", "cpp_extension"), "cudagraph": ("CUDAGraph", "cuda.graph(")}


def _has(name: str, rx: re.Pattern, text: str) -> bool:
    needle = NEEDLE.get(name, "")
    if needle and needle not in text:
        return False
    if name == "thunderkittens" and text.isascii():
        # re.I over ASCII text: ASCII letters match their other case only
        return "thunderkittens" in text.lower()
    heads = HEADS.get(name)
    if heads is not None:
        return RX.search(rx, text, heads) is not None
    return rx.search(text) is not None


def framework_label(text: str, bench: str | None) -> str:
    b = bench if bench in PRIORITY else "cuda"
    for label in PRIORITY[b]:
        if _has(label, FRAMEWORK_RX[label], text):
            return label
    if b == "cuda" and not re.search(r"\btorch\b", text):
        return "unknown"
    return DEFAULT_LABEL[b]


def gate(sources: dict[str, str], bench: str | None = "cuda", allow_triton: bool = False,
         require_cuda_evidence: bool = True) -> dict[str, Any]:
    """The cuda_language.json fields for solution.py plus top-level sidecars (raw text, comments count)."""
    text = "\n".join(sources.values())
    triton_hits = [k for k, rx in TRITON_GATE.items() if _has(k, rx, text)]
    dsl_hits = [k for k, rx in DSL_GATE.items() if _has(k, rx, text)]
    evidence = [k for k, rx in EVIDENCE.items() if _has(k, rx, text)]
    triton_cheat = bool(triton_hits) and not allow_triton
    dsl_cheat = bool(dsl_hits)
    has_ev = bool(evidence)
    return {
        "framework": framework_label(text, bench),
        "triton_cheat": triton_cheat,
        "dsl_cheat": dsl_cheat,
        "has_cuda_evidence": has_ev,
        "cuda_evidence": evidence,
        "forbidden_hits": triton_hits + dsl_hits,
        "ok": (not triton_cheat) and (not dsl_cheat) and (has_ev or not require_cuda_evidence),
    }


# language evidence in comment-stripped CUDA: (language, pattern, the literals its matches begin with)
CLASSIFY_CUDA = (("ptx", re.compile(r"asm\s*(volatile)?\s*\(|mma\.sync|tcgen05\.|wgmma|cp\.async\.bulk"),
                  ("asm", "mma.sync", "tcgen05.", "wgmma", "cp.async.bulk")),
                 ("cutlass_cpp", re.compile(r"cutlass::|cute::|#\s*include\s*[<\"]cutlass/"), ("cutlass::", "cute::", "#")),
                 ("wmma", re.compile(r"\bwmma::"), ("wmma::",)),
                 ("raw_cuda", re.compile(r"__global__\s+"), ("__global__",)),
                 ("cublas", re.compile(r"\bcublas\w*\s*\("), ("cublas",)))


def classify(mod, cuda_texts: list[tuple[str, Any]], py_text: str) -> dict[str, Any]:
    """What the code is written in, from the AST and comment-stripped CUDA, with evidence tokens."""
    ev: dict[str, list[dict[str, Any]]] = {}

    def add(lang: str, token: str, file: str, line: int | None) -> None:
        lst = ev.setdefault(lang, [])
        if len(lst) < 6 and not any(e["token"] == token for e in lst):
            lst.append({"token": token, "file": file, "line": line})

    if mod is not None:
        for n in mod.of(ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.Call):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
                for m in names:
                    root = m.split(".")[0]
                    if m.startswith("cutlass.cute") or (root == "cutlass" and isinstance(n, ast.ImportFrom)
                                                        and any(a.name == "cute" for a in n.names)):
                        add("cute_dsl", f"import {m}", mod.filename, n.lineno)
                    elif root == "tilelang":
                        add("tilelang", f"import {m}", mod.filename, n.lineno)
                    elif root == "thunderkittens":
                        add("thunderkittens", f"import {m}", mod.filename, n.lineno)
                    elif root == "cupy":
                        add("cupy", f"import {m}", mod.filename, n.lineno)
                    elif root == "numba":
                        add("numba", f"import {m}", mod.filename, n.lineno)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in n.decorator_list:
                    q = mod.qn(d.func if isinstance(d, ast.Call) else d) or ""
                    if q.startswith("triton."):
                        add("triton", f"@{q} {n.name}", mod.filename, n.lineno)
                    elif q.startswith(("cutlass.cute", "cute.")):
                        add("cute_dsl", f"@{q} {n.name}", mod.filename, n.lineno)
                    elif q.startswith("tilelang") or q.startswith("T.prim_func"):
                        add("tilelang", f"@{q} {n.name}", mod.filename, n.lineno)
                    elif q.startswith("numba.cuda"):
                        add("numba", f"@{q}", mod.filename, n.lineno)
            elif isinstance(n, ast.Call):
                q = mod.qn(n.func) or ""
                last = q.split(".")[-1]
                if last in ("load_inline",) or q.endswith("cpp_extension.load"):
                    add("cuda_extension", q, mod.filename, n.lineno)
                elif last in ("RawKernel", "RawModule", "ElementwiseKernel"):
                    add("cupy", q, mod.filename, n.lineno)
                elif last in ("nvrtcCreateProgram", "Program"):
                    add("nvrtc", q, mod.filename, n.lineno)
                elif q.startswith("torch.") and not ev.get("pure_torch"):
                    add("pure_torch", q, mod.filename, n.lineno)
    from .cuda import strip_c_comments  # local import: cuda imports python which imports nothing here
    for text, blob in cuda_texts:
        t = strip_c_comments(text)
        for lang, rx, heads in CLASSIFY_CUDA:
            m = RX.search(rx, t, heads)
            if m:
                f, ln = blob.where(m.start())
                add(lang, m.group(0).strip()[:30], f, ln)
    order = ["ptx", "cutlass_cpp", "cute_dsl", "tilelang", "thunderkittens", "wmma", "raw_cuda", "triton", "cupy",
             "numba", "nvrtc", "cuda_extension", "cublas", "pure_torch"]
    present = [l for l in order if l in ev]
    primary = next((l for l in present if l not in ("cuda_extension", "cublas", "nvrtc")), None)
    if primary is None:
        primary = "raw_cuda" if "cuda_extension" in present else ("pure_torch" if mod is not None else "unknown")
    return {"primary": primary, "languages": present, "evidence": ev}
