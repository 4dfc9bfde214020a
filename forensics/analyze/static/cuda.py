"""CUDA/C++ source held in solution strings (load_inline, load, NVRTC, CuPy) and in sidecar files.

Strings are resolved statically (constants, concatenation, f-strings with constant parts,
str.join, module-level variables) into a `Blob`: the text plus, for each of its lines, the file
and line it came from, so a finding in embedded CUDA cites solution.py's own line numbers.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from forensics.text import rx as RX

from . import problems as P
from .base import Hit
from .model import walk
from .python import Module

ARCH_RX = re.compile(r"\b(sm|compute)_(\d{2,3})([af]?)\b")
ARCH_LIST_RX = re.compile(r"^\s*(\d{1,2})\.(\d)([af]?)(\+PTX)?\s*$")
ABS_INCLUDE_RX = re.compile(r"^(?:-I|-isystem|-L)?\s*((?:/|~/)[^\s'\"]+)$")
STD_PREFIXES = ("/usr/include", "/usr/local/cuda", "/usr/lib", "/opt/conda/include", "/usr/local/include")
INCLUDEISH = re.compile(r"include|cutlass|third_party|cute|cccl|thunderkittens|\.cuh?$|\.h$|\.hpp$|/src\b|/csrc", re.I)


@dataclass
class Blob:
    text: str
    line_map: list[tuple[str, int | None]]   # per line of text: (file, line)
    origin: str                               # load_inline cuda_sources / sidecar / string
    exact: bool = True
    flags: list[str] = field(default_factory=list)

    def where(self, offset: int) -> tuple[str, int | None]:
        ln = self.text.count("\n", 0, offset)
        if ln < len(self.line_map):
            return self.line_map[ln]
        return self.line_map[-1] if self.line_map else ("?", None)


class _Builder:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.map: list[tuple[str, int | None]] = []
        self.exact = True

    def add(self, text: str, file: str, start: int | None, exact: bool) -> None:
        extra = text.count("\n")          # lines after the first
        if not self.map:
            self.map.append((file, start))
        if exact and start:
            self.map.extend([(file, start + i) for i in range(1, extra + 1)])
        else:
            self.map.extend([(file, start)] * extra)
        self.parts.append(text)
        self.exact &= exact

    def blob(self, origin: str) -> Blob | None:
        if not self.parts:
            return None
        return Blob("".join(self.parts), self.map, origin, self.exact)


def resolve(mod: Module, node: ast.AST, b: _Builder, local: dict[str, list[ast.AST]] | None = None, depth: int = 0) -> bool:
    """Append the static string value of `node` to the builder.  False if it is not static."""
    if depth > 30:
        return False
    f = mod.filename
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        v = node.value
        exact = node.end_lineno is not None and v.count("\n") == node.end_lineno - node.lineno
        b.add(v, f, node.lineno, exact)
        return True
    if isinstance(node, ast.JoinedStr):
        text = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                text.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                s = mod.const_str(v.value)
                if s is None and isinstance(v.value, ast.Name) and isinstance(mod.consts.get(v.value.id), ast.Constant):
                    s = str(mod.consts[v.value.id].value)
                text.append(s if s is not None else "0")
        t = "".join(text)
        exact = node.end_lineno is not None and t.count("\n") == node.end_lineno - node.lineno
        b.add(t, f, node.lineno, exact)
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return resolve(mod, node.left, b, local, depth + 1) and resolve(mod, node.right, b, local, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return resolve(mod, node.left, b, local, depth + 1)
    if isinstance(node, ast.Name):
        vals = (local or {}).get(node.id) or ([mod.consts[node.id]] if node.id in mod.consts else [])
        if vals:
            return resolve(mod, vals[-1], b, local, depth + 1)
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "join" and node.args:
            sep = mod.const_str(node.func.value) or ""
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id in mod.consts:
                arg = mod.consts[arg.id]
            if isinstance(arg, (ast.List, ast.Tuple)):
                ok = False
                for i, e in enumerate(arg.elts):
                    if i and sep:
                        b.add(sep, f, None, False)
                    ok = resolve(mod, e, b, local, depth + 1) or ok
                return ok
        if node.func.attr in ("format", "replace", "strip", "lstrip", "rstrip", "dedent"):
            return resolve(mod, node.func.value, b, local, depth + 1)
    if isinstance(node, ast.Call) and (mod.qn(node.func) or "").endswith("dedent") and node.args:
        return resolve(mod, node.args[0], b, local, depth + 1)
    return False


def _string_list(mod: Module, node: ast.AST | None, local=None) -> list[ast.AST]:
    if node is None:
        return []
    if isinstance(node, ast.Name):
        vals = (local or {}).get(node.id) or ([mod.consts[node.id]] if node.id in mod.consts else [])
        if vals and isinstance(vals[-1], (ast.List, ast.Tuple)):
            node = vals[-1]
    if isinstance(node, (ast.List, ast.Tuple)):
        out = []
        for e in node.elts:
            out.extend(_string_list(mod, e, local) if isinstance(e, (ast.List, ast.Tuple)) else [e])
        return out
    return [node]


SOURCE_KW = {"cpp_sources": "load_inline cpp_sources", "cuda_sources": "load_inline cuda_sources",
             "code": "cupy code", "source": "source", "src": "nvrtc source"}
FLAG_KW = ("extra_cuda_cflags", "extra_cflags", "extra_include_paths", "extra_ldflags", "include_dirs",
           "options", "library_dirs", "sources")


# a string constant that holds CUDA/C++ (and the literals every match begins with)
_CUDA_TEXT = re.compile(r"__global__|#include|asm\s*(volatile)?\s*\(|__device__|extern\s+\"C\"")
_CUDA_TEXT_HEADS = ("__global__", "#include", "asm", "__device__", "extern")


def extract(mod: Module) -> tuple[list[Blob], list[tuple[str, ast.AST]], list[tuple[str, ast.AST]]]:
    """Blobs of C/CUDA text, flag strings (value, node), and source-file references (path, node)."""
    blobs: list[Blob] = []
    flags: list[tuple[str, ast.AST]] = []
    files: list[tuple[str, ast.AST]] = []
    used_nodes: set[int] = set()
    for n in mod.of(ast.Call):
        if not isinstance(n, ast.Call):
            continue
        q = mod.qn(n.func) or ""
        last = q.split(".")[-1]
        fi = mod.scope_of(n)
        local = fi.assigns if fi else None
        src_nodes: list[tuple[str, ast.AST]] = []
        if last == "load_inline":
            pos = {1: "cpp_sources", 2: "cuda_sources"}
            for i, a in enumerate(n.args):
                if i in pos:
                    src_nodes += [(pos[i], e) for e in _string_list(mod, a, local)]
        elif last in ("RawKernel", "RawModule", "ElementwiseKernel", "ReductionKernel", "nvrtcCreateProgram", "Program",
                      "compile_inline", "_create_jit_fn", "SourceModule"):
            if n.args:
                idx = 2 if last == "ElementwiseKernel" else 0
                if len(n.args) > idx:
                    src_nodes.append((f"{last} source", n.args[idx]))
        elif last == "load" and ("cpp_extension" in q or q == "load"):
            for i, a in enumerate(n.args):
                if i == 1:
                    for e in _string_list(mod, a, local):
                        s = mod.const_str(e)
                        if s:
                            files.append((s, e))
        else:
            # strings fed to anything else: still collect arch/include flags from keyword lists
            pass
        for kw in n.keywords:
            if kw.arg in SOURCE_KW and last in ("load_inline", "RawKernel", "RawModule", "Program", "SourceModule"):
                src_nodes += [(SOURCE_KW[kw.arg], e) for e in _string_list(mod, kw.value, local)]
            elif kw.arg in FLAG_KW:
                for e in _string_list(mod, kw.value, local):
                    s = mod.const_str(e)
                    if s is None and isinstance(e, ast.Call) and (mod.qn(e.func) or "").endswith("path.join") and e.args:
                        s = mod.const_str(e.args[0])
                    if s is not None:
                        if kw.arg == "sources":
                            files.append((s, e))
                        else:
                            flags.append((s, e))
        for origin, e in src_nodes:
            bl = _Builder()
            if resolve(mod, e, bl, local):
                blob = bl.blob(origin)
                if blob:
                    blobs.append(blob)
                    for m in walk(e):
                        used_nodes.add(id(m))
                    if isinstance(e, ast.Name) and e.id in mod.consts:
                        for m in walk(mod.consts[e.id]):
                            used_nodes.add(id(m))
    # any other string that holds CUDA/C++ (kernels kept in a constant and passed indirectly)
    for n in mod.of(ast.Constant):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in used_nodes and len(n.value) > 40 and \
                RX.search(_CUDA_TEXT, n.value, _CUDA_TEXT_HEADS):
            bl = _Builder()
            resolve(mod, n, bl)
            blob = bl.blob("string constant")
            if blob:
                blobs.append(blob)
    # arch/include strings anywhere (TORCH_CUDA_ARCH_LIST, candidate include lists)
    for n in mod.of(ast.Assign):
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Subscript) and \
                (mod.qn(n.targets[0].value) or "") == "os.environ" and mod.const_str(n.targets[0].slice) == "TORCH_CUDA_ARCH_LIST":
            s = mod.const_str(n.value)
            if s:
                for part in re.split(r"[;\s]+", s):
                    m = ARCH_LIST_RX.match(part)
                    if m:
                        flags.append((f"sm_{m.group(1)}{m.group(2)}{m.group(3)}", n))
    return blobs, flags, files


_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _blank(m: re.Match) -> str:
    """A comment's text with every character but newlines made a space (offsets and lines kept)."""
    return "\n".join(" " * len(p) for p in m.group(0).split("\n"))


@lru_cache(maxsize=64)
def strip_c_comments(text: str) -> str:
    """`text` with its // and /* */ comments blanked.  Computed once per text: the CUDA rules, the
    language classifier and the work accounting all read the same blobs."""
    return _C_COMMENT.sub(_blank, text)


def _hit(blob: Blob, rule: str, offset: int, end: int, message: str, **kw: Any) -> Hit:
    f, ln = blob.where(offset)
    f2, ln2 = blob.where(end)
    snippet = blob.text[offset:end].strip().replace("\n", " ")[:160]
    data = kw.pop("data", {})
    data.setdefault("origin", blob.origin)
    if not blob.exact:
        data["line_mapping"] = "approximate (string built from pieces or escaped newlines)"
    return Hit(rule, ln, ln2 if f2 == f else ln, message, file=f, quote=snippet, data=data, **kw)


L2_HINT = re.compile(r"L2::evict_last|evict_last|createpolicy\.fractional[^;\"]*|cuda::access_property::persisting|"
                     r"__nv_associate_access_property|access_property\(\s*[^)]*persisting")
L2_WINDOW = re.compile(r"cudaAccessPolicyWindow|accessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaAccessPropertyPersisting|"
                       r"cudaStreamAttributeAccessPolicyWindow|hitProp\s*=|persistingL2CacheMaxSize|CU_LIMIT_PERSISTING_L2_CACHE_SIZE|"
                       r"CU_ACCESS_PROPERTY_PERSISTING")
LIB_WORK = re.compile(r"\b(cublas(?:Lt)?\w*|at::(?:matmul|mm|bmm|addmm|linear|_scaled_mm|einsum|scaled_dot_product_attention|baddbmm)|"
                      r"torch::(?:matmul|mm|bmm|addmm|linear|einsum)|cudnn\w+)\s*\(")
# the literals every match of a pattern begins with (forensics.text.rx: the pattern is tried only there)
L2_WINDOW_HEADS = ("cudaAccessPolicyWindow", "accessPolicyWindow", "cudaLimitPersistingL2CacheSize",
                   "cudaAccessPropertyPersisting", "cudaStreamAttributeAccessPolicyWindow", "hitProp",
                   "persistingL2CacheMaxSize", "CU_LIMIT_PERSISTING_L2_CACHE_SIZE", "CU_ACCESS_PROPERTY_PERSISTING")
LIB_WORK_HEADS = ("cublas", "at::", "torch::", "cudnn")
_IF = re.compile(r"\bif\s*\(")
SHFL = re.compile(r"__shfl(?:_xor|_up|_down)?_sync\s*\(")
ATOMIC = re.compile(r"\batomic(Add|Sub|Max|Min|And|Or|Xor|Inc|Dec|Exch)\s*\(\s*&?\s*\(?\s*([A-Za-z_]\w*)")
SMALL_DECL = re.compile(r"\b(unsigned\s+short|short|uint16_t|int16_t|unsigned\s+char|signed\s+char|char|uint8_t|int8_t|bool)"
                        r"\s*\*?\s*(?:__restrict__\s+)?([A-Za-z_]\w*)\s*(?:\[|=|;|,|\))")
SMALL_DECL_HEADS = ("unsigned", "short", "uint16_t", "int16_t", "signed", "char", "uint8_t", "int8_t", "bool")
LANE_SEEDS = {"threadIdx", "laneid", "lane", "lane_id", "laneId", "tid", "ltid", "thread_id", "tx", "warp_lane"}


_ARG_PUNCT = re.compile(r"[()\[\]{},]")


def _split_args(text: str, start: int) -> tuple[list[str], int]:
    """Arguments of a call whose '(' is at text[start-1]; returns (args, end offset: the closing
    bracket, or the end of the text).  Brackets of any kind nest; commas split at depth 1 only."""
    depth, seg, args = 1, start, []
    for m in _ARG_PUNCT.finditer(text, start):
        c = m.group()
        if c == ",":
            if depth == 1:
                args.append(text[seg:m.start()])
                seg = m.start() + 1
        elif c in "([{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                i = m.start()
                args.append(text[seg:i])
                return [a.strip() for a in args], i
    args.append(text[seg:])
    return [a.strip() for a in args], max(start, len(text))


_MEMBER = re.compile(r"(\.|->)\s*[A-Za-z_]\w*")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_ASSIGN = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*[+\-*/|&^]?=(?!=)\s*([^;]+);")


def _idents(expr: str) -> set[str]:
    """Identifiers of an expression, member names dropped (`blockIdx.x` -> blockIdx, `p.L[l]` -> p, l)."""
    return set(_IDENT.findall(_MEMBER.sub("", expr)))


def _lane_varying(text: str) -> set[str]:
    """Names whose value differs between the threads of a block, within one function's text:
    seeded by threadIdx/lane ids and spread through assignments.  blockIdx, loop counters that start
    from a uniform value and names assigned only from uniform values are uniform."""
    var = set(LANE_SEEDS)
    # each right-hand side read once (the fixpoint below visits them up to five times)
    assigns = [(name, _idents(rhs), "%laneid" in rhs) for name, rhs in _ASSIGN.findall(text)]
    for _ in range(5):
        changed = False
        for name, rhs_ids, laneid in assigns:
            if name in var:
                continue
            if rhs_ids & var or laneid:
                var.add(name)
                changed = True
        if not changed:
            break
    return var


FOR_HEAD = re.compile(r"\bfor\s*\(\s*(?:const\s+)?(?:int|unsigned(?:\s+int)?|auto|size_t|long|int64_t|int32_t|uint32_t)\s+"
                      r"([A-Za-z_]\w*)\s*=\s*([^;]+);")


def _uniform_loop_counters(text: str, pos: int, varying: set[str]) -> set[str]:
    """Counters of the for-loops enclosing `pos` that start from a uniform value: every lane runs
    the same iteration (`for (int g = 0; g < 2; ++g) __shfl_xor_sync(m, v[g], 1)` ships the same slot
    on every lane), whatever the same name means elsewhere in the function."""
    lo, _ = _scope(text, pos)
    out = set()
    for m in RX.finditer(FOR_HEAD, text, ("for",), lo, pos):
        name, init = m.group(1), m.group(2)
        if _idents(init) & (varying - {name}):
            continue
        _, hdr_end = _split_args(text, text.index("(", m.start()) + 1)
        j = hdr_end + 1
        while j < len(text) and text[j] in " \t\n":
            j += 1
        end = brace_close(text).get(j, len(text)) if j < len(text) and text[j] == "{" else text.find(";", j)
        if hdr_end < pos <= end:
            out.add(name)
    return out


def _scope(text: str, pos: int) -> tuple[int, int]:
    """The enclosing function of offset `pos`, from its parameter list to its closing brace, or the
    whole text at file scope: of the functions opened at or before `pos` (outline order is by
    opening brace), the last one that is still open at `pos` (functions do not nest in C++)."""
    funcs, opens, max_close = _outline_index(text)
    i = bisect_right(opens, pos) - 1
    if i >= 0 and max_close[i] >= pos:
        while i >= 0:
            f = funcs[i]
            if f.close >= pos:
                return f.params, f.close
            i -= 1
    return 0, len(text)


CREATEPOLICY = re.compile(r"createpolicy\.(?:fractional|range)(?P<kinds>(?:\.L2::\w+)+)(?:\.b64)?\s*(?P<ops>[^;\"\\]*)")
L2_DIRECT = re.compile(r"\.L2::evict_last\b|cuda::access_property::persisting|__nv_associate_access_property|"
                       r"access_property\(\s*[^)]*persisting")
L2_DIRECT_HEADS = (".L2::evict_last", "cuda::access_property::persisting", "__nv_associate_access_property", "access_property(")
PERSIST_PROP = re.compile(r"cudaAccessPropertyPersisting|CU_ACCESS_PROPERTY_PERSISTING")
HIT_PROP = re.compile(r"hitProp\s*=\s*([\w:]+)")


def l2_hints(blob: Blob, text: str) -> list[Hit]:
    """What an L2 policy in CUDA source actually requests.

    * `createpolicy ... L2::evict_last` (first kind named) and `ld/cp ... .L2::evict_last` request that
      lines outlive other traffic: L2-EVICT-LAST, high (intra-call reuse is not readable here; the
      timing probe settles it).  `createpolicy ... L2::evict_first / evict_normal / evict_unchanged`
      request the opposite or nothing: no finding.  A fraction of 0.0 requests nothing.  When one
      function builds evict_last and another kind under a run-time switch, which one the graded
      shapes get is not readable: medium.
    * An access-policy window is L2-PERSISTING-WINDOW only when a persisting property is requested
      (hitProp = cudaAccessPropertyPersisting); a window whose properties are streaming or normal,
      or a persisting-size limit of 0, asks for no persistence (info)."""
    hits: list[Hit] = []
    spans: list[tuple[int, int]] = []
    policies = []
    for m in CREATEPOLICY.finditer(text):
        spans.append((m.start(), m.end()))
        kinds = re.findall(r"L2::(\w+)", m.group("kinds"))
        ops = [o.strip() for o in m.group("ops").split(",")]
        frac = ops[1] if len(ops) > 1 else "1.0"
        policies.append((m, kinds[0] if kinds else "?", frac))
    for m, primary, frac in policies:
        if primary != "evict_last":
            continue
        if re.fullmatch(r"0(\.0*)?f?", frac):
            continue
        lo, hi = _function_start(text, m.start()), _function_end(text, m.start())
        others = {k for m2, k, _ in policies if m2 is not m and lo <= m2.start() <= hi and k != "evict_last"}
        if others:
            hits.append(_hit(blob, "L2-EVICT-LAST", m.start(), m.end(),
                             f"L2 policy in {blob.origin} is chosen at run time between evict_last and "
                             f"{', '.join(sorted(others))}: which one the graded shapes get is not readable from the source",
                             severity="medium", data={"policy": "evict_last", "alternatives": sorted(others), "fraction": frac}))
        else:
            hits.append(_hit(blob, "L2-EVICT-LAST", m.start(), m.end(),
                             f"L2 policy createpolicy ... evict_last (fraction {frac}) in {blob.origin}; intra-call reuse "
                             f"cannot be read from CUDA source here, so the timing probe must settle it", severity="high",
                             data={"policy": "evict_last", "fraction": frac}))
    for m in RX.finditer(L2_DIRECT, text, L2_DIRECT_HEADS):
        if any(a <= m.start() < b for a, b in spans):
            continue
        hits.append(_hit(blob, "L2-EVICT-LAST", m.start(), m.end(),
                         f"L2 persistence hint '{m.group(0)[:40]}' in {blob.origin}; intra-call reuse cannot be read from "
                         f"CUDA source here, so the timing probe must settle it", severity="high",
                         data={"policy": m.group(0)[:40]}))
    window = list(RX.finditer(L2_WINDOW, text, L2_WINDOW_HEADS))
    if window:
        persisting = list(PERSIST_PROP.finditer(text))
        props = sorted({p.group(1).split("::")[-1] for p in HIT_PROP.finditer(text)})
        first = persisting[0] if persisting else window[0]
        if persisting:
            hits.append(_hit(blob, "L2-PERSISTING-WINDOW", first.start(), first.end(),
                             f"persisting-L2 request '{first.group(0)}' in {blob.origin} (hitProp {', '.join(props) or '?'})",
                             data={"hit_props": props, "controls": sorted({w.group(0) for w in window})}))
        else:
            hits.append(_hit(blob, "L2-PERSISTING-WINDOW", first.start(), first.end(),
                             f"L2 access-policy control '{first.group(0)}' in {blob.origin} requests no persistence "
                             f"(hitProp {', '.join(props) or 'not set'}): nothing is pinned across the flush",
                             severity="info", probe=None, data={"hit_props": props, "persisting": False}))
    return hits


def analyse_blob(blob: Blob) -> list[Hit]:
    hits: list[Hit] = []
    text = strip_c_comments(blob.text)
    hits.extend(l2_hints(blob, text))
    for m in re.finditer(r"#\s*include\s*[<\"]((?:/|~/)[^\">]+)[\">]", text):
        path = m.group(1)
        if not path.startswith(STD_PREFIXES):
            hits.append(_hit(blob, "NONPORTABLE-INCLUDE", m.start(), m.end(), f"absolute #include '{path}'",
                             data={"path": path}))
    for m in RX.finditer(LIB_WORK, text, LIB_WORK_HEADS):
        name = m.group(1)
        gemmish = bool(re.match(r"cublas|at::(matmul|mm|bmm|addmm|linear|_scaled_mm|einsum|baddbmm)|torch::|at::scaled", name))
        if gemmish:
            hits.append(_hit(blob, "LIBRARY-DOES-WORK", m.start(), m.end(), f"C++ calls {name} in {blob.origin}",
                             data={"call": name, "fallback": None}))
        else:
            hits.append(_hit(blob, "CUDA-LIBRARY-CALL", m.start(), m.end(), f"C++ calls {name}", data={"call": name}))
    # shuffles whose shipped value indexes a register array by a lane-varying slot
    scopes: dict[tuple[int, int], set[str]] = {}

    def varying_at(pos: int) -> set[str]:
        sc = _scope(text, pos)
        if sc not in scopes:
            scopes[sc] = _lane_varying(text[sc[0]:sc[1]])
        return scopes[sc]

    for m in SHFL.finditer(text):
        args, end = _split_args(text, m.end())
        if len(args) < 3:
            continue
        val = args[1]
        varying = varying_at(m.start()) - _uniform_loop_counters(text, m.start(), varying_at(m.start()))
        for sub in re.finditer(r"\[([^\]]+)\]", val):
            ids = _idents(sub.group(1))
            if ids & varying and not re.fullmatch(r"\s*\d+\s*", sub.group(1)):
                hits.append(_hit(blob, "SHFL-LANE-VARYING", m.start(), end,
                                 f"shuffle ships '{val[:50]}', indexed by lane-varying '{', '.join(sorted(ids & varying))}': "
                                 f"the source lane evaluates its own slot", data={"value": val[:80]}))
                break
    # a value reduced with __shfl_down_sync is valid only in lane 0; re-reading it from a lane-varying
    # source lane (instead of broadcasting lane 0) hands each lane another lane's partial
    reduced = set()
    for m in re.finditer(r"__shfl_down_sync\s*\(", text):
        args, _ = _split_args(text, m.end())
        if len(args) >= 2 and re.fullmatch(r"[A-Za-z_]\w*", args[1]):
            reduced.add(args[1])
    for m in re.finditer(r"__shfl_sync\s*\(", text):
        args, end = _split_args(text, m.end())
        if len(args) >= 3 and args[1] in reduced:
            src_ids = _idents(args[2])
            if src_ids & varying_at(m.start()):
                hits.append(_hit(blob, "SHFL-LANE-VARYING", m.start(), end,
                                 f"'{args[1]}' was reduced with __shfl_down_sync (valid in lane 0 only) and is then read from "
                                 f"lane-varying source '{args[2][:40]}'", data={"value": args[1], "src_lane": args[2][:80]}))
    # divergent barriers (only where a barrier exists at all; the branch body is read before the
    # lane-variance of its condition, which costs more)
    for m in (RX.finditer(_IF, text, ("if",)) if "__syncthreads" in text else ()):
        cond, cend = _split_args(text, m.end())
        j = cend + 1
        while j < len(text) and text[j] in " \t\n":
            j += 1
        if j < len(text) and text[j] == "{":
            k = brace_close(text).get(j, len(text) - 1) + 1
            body = text[j:k]
        else:
            k = text.find(";", j)
            body = text[j:k + 1]
        barrier_in = "__syncthreads" in body and not re.search(r"\b(for|while)\b", body)
        early_return = not barrier_in and re.match(r"\s*return\s*;", body.strip("{} \n")) \
            and text.find("__syncthreads", k, _scope(text, k)[1]) != -1
        if not (barrier_in or early_return):
            continue
        cond_s = ",".join(cond)
        if not _idents(cond_s) & varying_at(m.start()):
            continue   # a block-uniform condition (blockIdx, a loop bound, a kernel argument)
        if barrier_in:
            hits.append(_hit(blob, "BARRIER-RACE", m.start(), k, f"__syncthreads() inside thread-dependent branch if({cond_s[:40]})",
                             data={"condition": cond_s[:80]}))
        else:
            hits.append(_hit(blob, "BARRIER-RACE", m.start(), k,
                             f"thread-dependent early return if({cond_s[:40]}) before a later __syncthreads()",
                             severity="low", data={"condition": cond_s[:80]}))
    # atomics on types without an overload: the declaration in the atomic's own function (or at file
    # scope), not a same-named variable of another function
    small_decls: list[re.Match] | None = None     # SMALL_DECL over the whole text, when first needed
    for m in RX.finditer(ATOMIC, text, ("atomic",)):
        name = m.group(2)
        lo, hi = _scope(text, m.start())
        decl = None
        for d in RX.finditer(SMALL_DECL, text, SMALL_DECL_HEADS, lo, m.start()):
            if d.group(2) == name:
                decl = d
        if decl is None:
            # every declaration the pattern finds spells the name: without it in the function, none
            if text.find(name, lo, m.start()) != -1 and re.search(
                    rf"\b[\w:<>]+\s*\*?\s*{re.escape(name)}\s*[=;,)\[]", text[lo:m.start()]):
                continue   # declared in this function with another type
            if small_decls is None:
                small_decls = list(RX.finditer(SMALL_DECL, text, SMALL_DECL_HEADS))
            for d in small_decls:
                if d.group(2) == name and _scope(text, d.start()) == (0, len(text)):
                    decl = d   # a file-scope declaration
        if decl is not None:
            hits.append(_hit(blob, "ATOMIC-TYPE", m.start(), m.end(),
                             f"atomic{m.group(1)} on '{name}' declared as {decl.group(1)}",
                             data={"variable": name, "declared_line": blob.where(decl.start())[1]}))
    # one-shot cudaFuncSetAttribute guarded by a static in a template function
    for m in re.finditer(r"cudaFuncSetAttribute\s*\(", text):
        lo = max(0, m.start() - 600)
        region = text[lo:m.start()]
        sts = list(re.finditer(r"\bstatic\s+(?:bool|int|size_t|unsigned|std::atomic<\w+>|thread_local\s+\w+)\s+(\w+)", region))
        st = sts[-1] if sts else None
        if st is None:
            continue
        st_abs = lo + st.start()
        head = text[max(0, st_abs - 300):st_abs]
        # the nearest function header above the static must be a template
        hdr = list(re.finditer(r"(template\s*<[^>]*>\s*)?(?:(?:static|inline|__host__|__device__|__forceinline__|constexpr)\s+)*"
                               r"[\w:<>]+\s+\w+\s*\([^;{]*\)\s*\{", head))
        if hdr and hdr[-1].group(1) and st.group(1) in text[lo + st.end():m.start() + 200]:
            hits.append(_hit(blob, "ATTR-ONCE-TEMPLATE", st_abs, m.end(),
                             f"static once-flag '{st.group(1)}' guards cudaFuncSetAttribute inside a template: every "
                             f"specialization sharing the instantiation skips the attribute after the first",
                             data={"flag": st.group(1)}))
    # (arch flags inside source text are rare; flags are collected from options)
    return hits


@dataclass(frozen=True)
class CFunc:
    """A C/C++/CUDA function definition in a source text: its name, the '(' of its parameter list,
    and the offsets of its body's braces."""
    name: str
    params: int
    open: int
    close: int

    def body(self, text: str) -> str:
        return text[self.open:self.close + 1]


_BODY_OPEN = re.compile(r"\)\s*(?:(?:const|noexcept|override|final|mutable|volatile)\b\s*)*(?:->\s*[\w:<>*&\s]+?\s*)?\{")
_CONTROL = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof", "do", "else", "defined", "decltype",
                      "alignof", "static_assert", "__launch_bounds__", "__attribute__", "asm", "volatile"})


def _matches(text: str, pattern: str, open_c: str) -> dict[int, int]:
    """close offset -> open offset for one bracket pair, in one pass over the brackets only."""
    out: dict[int, int] = {}
    stack: list[int] = []
    push, pop = stack.append, stack.pop
    for i in [m.start() for m in re.compile(pattern).finditer(text)]:
        if text[i] == open_c:
            push(i)
        elif stack:
            out[i] = pop()
    return out


@lru_cache(maxsize=64)
def brace_close(text: str) -> dict[int, int]:
    """'{' offset -> its matching '}' offset, computed once per text."""
    return {o: c for c, o in _matches(text, r"[{}]", "{").items()}


@lru_cache(maxsize=64)
def _outline_index(text: str) -> tuple[tuple[CFunc, ...], list[int], list[int]]:
    """outline(text), its opening-brace offsets, and the running maximum of its closing offsets."""
    funcs = outline(text)
    opens = [f.open for f in funcs]
    max_close: list[int] = []
    hi = -1
    for f in funcs:
        hi = max(hi, f.close)
        max_close.append(hi)
    return funcs, opens, max_close


def _name_before(text: str, i: int) -> str:
    """The identifier right before offset i, skipping blanks and one template argument list
    (`name <T> (`); '' when the token before is not an identifier (a lambda's `]`, a cast's `)`)."""
    j = i - 1
    while j >= 0 and text[j] in " \t\n\r":
        j -= 1
    if j >= 0 and text[j] == ">":
        k = text.rfind("<", max(0, j - 200), j)
        if k < 0:
            return ""
        j = k - 1
        while j >= 0 and text[j] in " \t\n\r":
            j -= 1
    e = j + 1
    while j >= 0 and (text[j].isalnum() or text[j] == "_"):
        j -= 1
    name = text[j + 1:e]
    return name if name and not name[0].isdigit() else ""


@lru_cache(maxsize=64)
def outline(text: str) -> tuple[CFunc, ...]:
    """Every named function definition of `text` (lambdas and control blocks are not functions), in
    source order.  Computed once per text."""
    close_of = brace_close(text)
    parens = _matches(text, r"[()]", "(")
    out = []
    for m in _BODY_OPEN.finditer(text):
        rparen, lbrace = m.start(), m.end() - 1
        lparen = parens.get(rparen)
        if lparen is None:
            continue
        name = _name_before(text, lparen)
        if not name or name in _CONTROL:
            continue
        out.append(CFunc(name, lparen, lbrace, close_of.get(lbrace, len(text) - 1)))
    return tuple(out)


def _function_end(text: str, pos: int) -> int:
    depth = 0
    for i in range(pos, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return i
    return len(text)


def _function_start(text: str, pos: int) -> int:
    depth = 0
    for i in range(pos, -1, -1):
        c = text[i]
        if c == "}":
            depth += 1
        elif c == "{":
            if depth == 0:
                # function body brace if preceded by ')' (possibly with qualifiers)
                back = text[max(0, i - 200):i].rstrip()
                if back.endswith(")") or re.search(r"\)\s*(const|noexcept|override)?\s*$", back):
                    return i
            else:
                depth -= 1
    return 0


def arch_targets(flag_strings: list[tuple[str, Any]], blobs: list[Blob]) -> list[tuple[int, str, str, Any]]:
    """(cc, suffix, kind sm|compute, where) from option strings."""
    out = []
    for s, where in flag_strings:
        for m in ARCH_RX.finditer(s):
            out.append((int(m.group(2)), m.group(3), m.group(1), where))
    return out


def runs_on(targets: list[tuple[int, str, str, Any]], device_cc: int) -> bool:
    for cc, suffix, kind, _ in targets:
        if suffix in ("a", "f"):
            if cc == device_cc or (suffix == "f" and cc // 10 == device_cc // 10 and cc <= device_cc):
                return True
        elif kind == "compute":
            if cc <= device_cc:
                return True
        elif cc // 10 == device_cc // 10 and cc <= device_cc:
            return True
    return False


def check_flags(mod: Module, flags: list[tuple[str, ast.AST]], gpu: str | None) -> list[Hit]:
    hits: list[Hit] = []
    for s, node in flags:
        m = ABS_INCLUDE_RX.match(s.strip())
        if m and not m.group(1).startswith(STD_PREFIXES):
            hits.append(mod.hit("NONPORTABLE-INCLUDE", node, f"absolute build path '{s}' from the author's machine",
                                data={"path": m.group(1)}))
    # candidate include paths kept in constants (tried with os.path.exists, etc.)
    flagged = {h.data.get("path") for h in hits}
    for n in mod.of(ast.Constant):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 300 and "\n" not in n.value:
            m = ABS_INCLUDE_RX.match(n.value.strip())
            if m and m.group(1) not in flagged and not m.group(1).startswith(STD_PREFIXES + ("/tmp", "/dev", "/proc")) \
                    and INCLUDEISH.search(m.group(1)):
                flagged.add(m.group(1))
                hits.append(mod.hit("NONPORTABLE-INCLUDE", n, f"absolute path '{n.value}' used for the build",
                                    data={"path": m.group(1)}))
    targets = arch_targets(flags, [])
    if targets:
        labels = sorted({f"{k}_{cc}{sfx}" for cc, sfx, k, _ in targets})
        node = targets[0][3]
        dev = P.gpu_arch(gpu)
        h200 = runs_on(targets, 90)
        if dev and not runs_on(targets, dev[0]):
            hits.append(mod.hit("ARCH-MISMATCH", node,
                                f"builds only for {', '.join(labels)} but the run's GPU is {dev[1]}",
                                data={"targets": labels, "gpu": gpu, "gpu_cc": dev[0], "replayable_on_h200": h200}))
        else:
            hits.append(mod.hit("ARCH-TARGET", node, f"pins {', '.join(labels)}"
                                f"{'' if h200 else ' (not replayable on an sm_90 H200)'}",
                                data={"targets": labels, "gpu": gpu, "replayable_on_h200": h200}))
    return hits


def python_l2_window(mod: Module) -> list[Hit]:
    """Persisting-L2 controls reached from Python (cuda-python, ctypes on libcudart)."""
    hits = []
    for n in mod.of(ast.Attribute, ast.Constant):
        name = n.attr if isinstance(n, ast.Attribute) else (n.value if isinstance(n, ast.Constant) and isinstance(n.value, str)
                                                             and len(n.value) < 80 else None)
        if isinstance(name, str) and L2_WINDOW.fullmatch(name.strip()) or (isinstance(name, str) and name in (
                "cudaDeviceSetLimit", "cudaStreamSetAttribute", "cuStreamSetAttribute") and _near_persist(mod, n)):
            hits.append(mod.hit("L2-PERSISTING-WINDOW", n, f"persisting-L2 control '{name}' from Python", data={"name": name}))
    return hits


def _near_persist(mod: Module, n: ast.AST) -> bool:
    ln = getattr(n, "lineno", 0)
    window = "\n".join(mod.lines[max(0, ln - 4):ln + 4])
    return bool(re.search(r"[Pp]ersist|accessPolicy|0x06|cudaLimitPersisting", window))
