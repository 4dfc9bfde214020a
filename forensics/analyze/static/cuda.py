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
from .model import Module, walk

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


#: what an argument list is split on: brackets, commas, and string or character literals (kept whole, so
#: that a comma or a bracket inside `"nvidia-smi --lock-gpu-clocks=2100,2100"` splits nothing)
_ARG_PUNCT = re.compile(r"[()\[\]{},]|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")


def _split_args(text: str, start: int) -> tuple[list[str], int]:
    """Arguments of a call whose '(' is at text[start-1]; returns (args, end offset: the closing
    bracket, or the end of the text).  Brackets of any kind nest; commas split at depth 1 only; string
    and character literals are kept whole."""
    depth, seg, args = 1, start, []
    for m in _ARG_PUNCT.finditer(text, start):
        c = m.group()
        if len(c) > 1:       # a literal
            continue
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
    """Persisting-L2 controls reached from Python (cuda-python, ctypes on libcudart).  A field's name in a
    ctypes structure's `_fields_` only declares a layout (what is set in it, and passed, is read where the
    call is: cap_process's CUDA-handle reading of the window's hitProp)."""
    hits = []
    declared = {id(el.elts[0]) for st in mod.of(ast.Assign)
                if any(isinstance(t, ast.Name) and t.id == "_fields_" for t in st.targets)
                and isinstance(st.value, (ast.List, ast.Tuple))
                for el in st.value.elts if isinstance(el, (ast.Tuple, ast.List)) and el.elts}
    for n in mod.of(ast.Attribute, ast.Constant):
        if id(n) in declared:
            continue
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


# ----------------------------------------------------------------------------------------- capabilities

# What a C++/CUDA source does, read into the capability audit's own vocabulary (capabilities.py, cap_cpp.py):
# the Python object a call or an assignment reaches (`py::module_::import("gc").attr("get_objects")()`
# is gc.get_objects, `PyObject_SetAttrString(ev, "elapsed_time", f)` with `ev` a torch.cuda.Event is an
# assignment to torch.cuda.Event.elapsed_time), and the libc/C++ library calls that do what a Python
# call does (`std::_Exit(0)` is os._exit(0), `write(1, "PASS\n", 5)` is os.write(1, ...), `fopen(p,
# "w")` is open(p, "w"), `std::system(cmd)` is os.system(cmd), `torch::manual_seed(2026)` is
# torch.manual_seed(2026)).  The audit then applies the rules it applies to Python.  This module only
# reads the text; what is a capability and how severe is decided in cap_cpp.py.

@dataclass(frozen=True)
class CppOp:
    """One operation of a C++ source, named as the Python call or assignment it amounts to.

    kind: "call" (q called with `args`), "store" (attribute `name` of `q` assigned or deleted; `q` None:
    an object the text does not name), "open" (a file opened or moved: `args` its paths, `write`),
    "thread" (a thread started: `joined` says whether the source joins it, `detached` whether it lets it
    go), "stream" (a CUDA stream of its own), "exec" (Python code run from a string), "memo" (a value
    kept in static storage returned without recomputation: `data` says the key and the store),
    "dispatch" (a branch on a reduction of a tensor parameter's values whose arm returns: `args` the
    parameters reduced, `data` the reductions), "phase" (a branch on what the process tells of the
    grader: the RNG's seed, a module in sys.modules; `data` (what is read, the constants compared); `how`
    "if (...)", or "return ..." where the function hands the test's answer to its Python caller)."""
    kind: str
    q: str | None
    offset: int
    end: int
    func: str | None                 # the C++ function the operation is in (None: file scope, a static initialiser)
    args: tuple = ()                 # per argument, a frozenset of values: ("str", s), ("int", n), ("ref", q), ("param", i)
    name: str = ""
    write: bool = False
    joined: bool = False
    detached: bool = False
    how: str = ""
    data: tuple = ()
    entered: bool = False            # a stream its function makes current around work (a guard, a launch on it)


@dataclass(frozen=True)
class TensorFlow:
    """What one C++ function does to the tensors Python hands it and to the tensor it returns, for the
    entry's data flow (entry_flow): `writes` parameter index -> (how, sure: the parameter itself or a
    view of it, not a value that is it only when no copy was needed, offset); `fresh` (how, offset) when
    it returns memory it allocated uninitialised (at::empty ...) that nothing in it wrote."""
    writes: tuple = ()
    fresh: tuple | None = None


@dataclass
class CppReading:
    ops: list[CppOp]
    params: dict[str, list[str]]     # C++ function -> its parameter names, in order
    calls: dict[str, set[str]]       # C++ function -> the functions of this source it calls
    bound: dict[str, str]            # Python name -> C++ function (PYBIND11_MODULE m.def; else every function by its name)
    at_load: set[str]                # functions that run when the extension loads (PYBIND11_MODULE, TORCH_LIBRARY)
    joins: bool                      # the source waits for a stream or the device somewhere
    tensors: dict[str, TensorFlow] = field(default_factory=dict)   # C++ function -> what it does to tensors


_CSTR = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_C_ESC = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_UNKNOWN = "\x00"                    # a part of a string the text does not give (a parameter, getcwd())
_STD = r"(?<![\w.>])(?:(?:std|::|__gnu_cxx)\s*(?:::)?\s*)?"
_IMPORT_CALL = re.compile(r"\b(?:py|pybind11)::module_?::import\s*\(|\bPyImport_(?:ImportModule\w*|AddModule\w*|Import)\s*\(")
_PY_ATTR = re.compile(r"\.\s*attr\s*\(")
#: `["key"]` (or `[k]`) after a Python object: an item of it
_SUBSCRIPT = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]")
#: a dict item's key or value as C++ iterates a py::dict
_PAIR_MEMBER = re.compile(r"\s*\.\s*(?:first|second)\b(?!\s*\()")
#: `obj["key"] = value;`: an item of a Python object set from C++
_ITEM_STORE = re.compile(r"\[\s*(\"(?:[^\"\\\n]|\\.)*\"|[A-Za-z_]\w*)\s*\]\s*=(?!=)")
_INT_NAMES = {"EXIT_SUCCESS": 0, "EXIT_FAILURE": 1, "STDOUT_FILENO": 1, "STDERR_FILENO": 2, "STDIN_FILENO": 0,
              "true": 1, "false": 0}
#: a stream made current around work: a guard, setting the current stream, a launch on a stream argument
_STREAM_ENTER = re.compile(r"\b(?:CUDAStreamGuard|OptionalCUDAStreamGuard|StreamGuard|setCurrentCUDAStream|"
                           r"setCurrentHIPStream)\b|<<<[^<>;]*,[^<>;]*,[^<>;]*,[^<>;]*>>>")
_STREAM_MAKE = re.compile(r"\b(cudaStreamCreate(?:WithFlags|WithPriority)?|cuStreamCreate(?:WithPriority)?|"
                          r"(?:(?:c10|at)::cuda::)?getStreamFromPool|hipStreamCreate\w*)\s*\(")
STREAM_JOIN = re.compile(r"\b(?:cudaStreamSynchronize|cudaDeviceSynchronize|cudaStreamWaitEvent|cudaEventSynchronize|"
                         r"cuStreamSynchronize|cuStreamWaitEvent|cuCtxSynchronize|cuEventSynchronize|hipStreamSynchronize|"
                         r"hipDeviceSynchronize|hipStreamWaitEvent|device_synchronize|stream_synchronize)\s*\(|"
                         r"\.\s*(?:synchronize|block|wait_stream|wait_event)\s*\(|torch::cuda::synchronize\s*\(")
# libc / C++ library calls and the Python call each amounts to
_LIBC: dict[str, str] = {
    "exit": "sys.exit", "_exit": "os._exit", "_Exit": "os._exit", "quick_exit": "os._exit", "abort": "os.abort",
    "terminate": "os.abort", "kill": "os.kill", "killpg": "os.killpg", "raise": "signal.raise_signal",
    "signal": "signal.signal", "sigaction": "signal.signal", "alarm": "signal.alarm", "setitimer": "signal.setitimer",
    "atexit": "atexit.register", "at_quick_exit": "atexit.register", "Py_AtExit": "atexit.register",
    "system": "os.system", "popen": "os.popen", "fork": "os.fork", "vfork": "os.fork", "execv": "os.execv",
    "execve": "os.execve", "execvp": "os.execvp", "execvpe": "os.execvpe", "execl": "os.execl", "execle": "os.execle",
    "execlp": "os.execlp", "posix_spawn": "os.posix_spawn", "posix_spawnp": "os.posix_spawnp",
    "socket": "socket.socket", "connect": "socket.socket.connect", "getaddrinfo": "socket.getaddrinfo",
    "gethostbyname": "socket.gethostbyname",
    "printf": "builtins.print", "puts": "builtins.print", "fprintf": "builtins.print", "fputs": "builtins.print",
    "dprintf": "os.write", "write": "os.write", "fwrite": "builtins.print",
    "manual_seed": "torch.manual_seed", "manual_seed_all": "torch.cuda.manual_seed_all", "set_current_seed": "torch.manual_seed",
    "dlopen": "ctypes.CDLL", "memmove": "ctypes.memmove", "memcpy": "ctypes.memmove", "memset": "ctypes.memset",
    "cudaMemcpy": "ctypes.memmove", "cudaMemcpyAsync": "ctypes.memmove", "cudaMemset": "ctypes.memset",
    "PyEval_GetFrame": "sys._getframe", "PyFrame_GetBack": "sys._getframe", "PyThreadState_GetFrame": "sys._getframe",
    "PyEval_GetGlobals": "sys._getframe", "PyEval_GetLocals": "sys._getframe", "PyEval_GetFrameGlobals": "sys._getframe",
    "PyEval_GetFrameLocals": "sys._getframe", "PyThreadState_Get": "sys._current_frames",
    "PyEval_SetTrace": "sys.settrace", "PyEval_SetProfile": "sys.setprofile", "PySys_AddAuditHook": "sys.addaudithook",
    "PyGC_Collect": "gc.collect", "PyRun_SimpleString": "builtins.exec", "PyRun_String": "builtins.exec",
    "PyRun_SimpleStringFlags": "builtins.exec", "PyRun_StringFlags": "builtins.exec",
}
_LIBC_CALL = re.compile(r"(?<![\w.>$])(?:(?:std|::|at|torch|c10)\s*::\s*)*(?:torch\s*::\s*cuda\s*::\s*)?\b(" + "|".join(
    sorted(_LIBC, key=len, reverse=True)) + r")\s*\(")
_CUDA_SEED = re.compile(r"\b(?:torch|at)::cuda::manual_seed(_all)?\s*\(")
_DEFAULT_GEN = re.compile(r"getDefault(?:CPU|CUDA)Generator|defaultGenerator|default_generator")
_FILE_OPEN = re.compile(r"(?<![\w.>])(?:(?:std|::)\s*::\s*)?\b(fopen|freopen|open|creat|rename|remove|unlink|truncate)\s*\(|"
                        r"\bstd::(?:filesystem::|experimental::filesystem::)?(rename|copy_file|copy|remove_all|remove|"
                        r"create_symlink|resize_file)\s*\(|"
                        r"\b(?:std::)?(ofstream|ifstream|fstream)\s*(?:(\w+)\s*)?[({]")
_FSTREAM_OPEN = re.compile(r"\b(\w+)\s*\.\s*open\s*\(")
def _walked(text: str, name: str, verb: str) -> bool:
    """The source calls `verb` (join, detach) on every thread of the container `name` (a range-for over it,
    or its elements by index)."""
    return bool(re.search(r"for\s*\((?:[^;:)]|::)*?(\w+)\s*:\s*" + name + r"\s*\)\s*\{?\s*(?:if\s*\([^)]*\)\s*)?\1\s*"
                          r"(?:\.|->)\s*" + verb + r"\s*\(", text)
                or re.search(r"\b" + name + r"\s*\[[^\]]*\]\s*(?:\.|->)\s*" + verb + r"\s*\(", text))


_THREAD_VEC = re.compile(r"\bstd::(?:vector|deque|list)\s*<\s*std::thread\s*>\s*(\w+)")
_THREAD = re.compile(r"\bstd::(thread|jthread)\s*(?:(\w+)\s*)?[({]|\bpthread_create\s*\(\s*&?\s*(\w+)|"
                     r"\bstd::async\s*\(\s*std::launch::async")
_STREAM_OUT = re.compile(r"\b(?:std::)?(cout|cerr|clog)\s*<<")
_MEMO_CONTAINER = re.compile(r"\bstatic\s+(?:thread_local\s+)?(?:const\s+)?(?:auto\s*\*?\s*|[\w:<>,\s*&]+?\s*\*?\s*)(\w+)\s*(?:=|;|\{|\()")


def _c_unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            out.append(_C_ESC.get(s[i + 1], s[i + 1]))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _c_split_top(expr: str, sep: str) -> list[str]:
    """`expr` split at `sep` outside brackets and string literals."""
    parts, depth, start, i, n = [], 0, 0, 0, len(expr)
    while i < n:
        c = expr[i]
        if c == '"':
            m = _CSTR.match(expr, i)
            i = m.end() if m else i + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(sep, i):
            parts.append(expr[start:i])
            start = i + len(sep)
            i += len(sep)
            continue
        i += 1
    parts.append(expr[start:])
    return parts


class _CppEval:
    """Values of C++ expressions: strings (literals and their concatenation), integers, and the Python
    objects the C API or pybind11 reaches.  Flow-insensitive: every assignment of a name in the source
    counts, as the Python audit's environments do."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.env: dict[str, set] = {}
        self.ptr_from_data: set[str] = set()     # names holding a tensor's data pointer
        # declarations and assignments: `T name = expr;`, `name = expr;`, `T name(expr);` (strings)
        for m in re.finditer(r"(?<![\w.>])([A-Za-z_]\w*)\s*(?:=(?!=)\s*([^;{}]+);|\(\s*([^;{}]*)\)\s*;)", text):
            name, expr = m.group(1), m.group(2) if m.group(2) is not None else m.group(3)
            if name in _CONTROL or name in ("return", "delete", "new") or not expr:
                continue
            if m.group(3) is not None and not re.search(r"\b(?:std::)?string\s*$", text[max(0, m.start() - 40):m.start()]):
                continue     # a call `f(x);`, not a constructor of a string
            self.env.setdefault(name, []).append(expr)
            if re.search(r"\bdata_ptr\b|\.data\s*\(\s*\)|\bdata_ptr<", expr):
                self.ptr_from_data.add(name)
        # `for (auto item : table)`: the loop variable is an item of what it walks (a py::dict's pair, a list's
        # element), read as `table["*"]`
        for m in re.finditer(r"\bfor\s*\(\s*(?:const\s+)?(?:auto|py::handle|py::object|[\w:<>,\s]+?)\s*&{0,2}\s*(\w+)\s*:\s*"
                             r"([A-Za-z_][\w:.]*(?:\s*(?:\.|->)\s*attr\s*\([^()]*\))*)\s*\)", text):
            self.env.setdefault(m.group(1), []).append(m.group(2) + '["*"]')
        self._memo: dict[tuple[str, int], set] = {}

    def value(self, expr: str, depth: int = 0) -> set:
        expr = expr.strip()
        if depth > 8 or not expr:
            return set()
        key = (expr, depth)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = set()
        out = self._value(expr, depth)
        self._memo[key] = out
        return out

    def _value(self, expr: str, depth: int) -> set:
        # casts and wrappers that keep the value
        m = re.fullmatch(r"\(\s*[\w:<>\s*&]+\*?\s*\)\s*(.+)", expr, re.S)
        if m and not expr.startswith("((") and re.match(r"\(\s*[A-Za-z_][\w:<>\s]*\**\s*\)", expr):
            return self.value(m.group(1), depth + 1)
        if expr.startswith("(") and expr.endswith(")") and _split_args(expr, 1)[1] == len(expr) - 1:
            return self.value(expr[1:-1], depth + 1)
        parts = _c_split_top(expr, "+")
        if len(parts) > 1:
            strs = [self.strs(self.value(p, depth + 1)) or {_UNKNOWN} for p in parts]
            out = {""}
            for p in strs:
                out = {a + b for a in out for b in p}
                if len(out) > 16:
                    return set()
            return {("str", s) for s in out if s != _UNKNOWN * len(parts)}
        m = _CSTR.fullmatch(expr)
        if m or re.fullmatch(r'(?:"(?:[^"\\\n]|\\.)*"\s*)+', expr):
            return {("str", "".join(_c_unescape(x) for x in _CSTR.findall(expr)))}
        if re.fullmatch(r"-?\d+[uUlL]*", expr):
            return {("int", int(re.sub(r"[uUlL]+$", "", expr)))}
        if expr in _INT_NAMES:
            return {("int", _INT_NAMES[expr])}
        if expr in ("stdout", "stderr", "std::cout", "std::cerr"):
            return {("stream", expr.split(":")[-1])}
        # trailing member calls that keep the value: .c_str(), .ptr(), .data(), .string()
        m = re.fullmatch(r"(.+?)\s*(?:\.|->)\s*(?:c_str|ptr|release|string|inc_ref|get)\s*\(\s*\)", expr, re.S)
        if m:
            return self.value(m.group(1), depth + 1)
        # wrappers: std::string(x), py::str(x), reinterpret_borrow<...>(x), PyUnicode_FromString(x), py::cast(x)
        m = re.fullmatch(r"(?:std::string|std::filesystem::path|py::str|pybind11::str|py::object|py::handle|"
                         r"(?:py|pybind11)::reinterpret_(?:borrow|steal)\s*<[^>]*>|PyUnicode_FromString|PyUnicode_InternFromString|"
                         r"py::cast|py::module_?|static_cast\s*<[^>]*>|reinterpret_cast\s*<[^>]*>|const_cast\s*<[^>]*>|"
                         r"Py_NewRef|Py_XNewRef)\s*\((.*)\)", expr, re.S)
        if m:
            args, _ = _split_args(expr, expr.index("(") + 1)
            return self.value(args[0], depth + 1) if args else set()
        # a ternary: either branch
        parts = _c_split_top(expr, "?")
        if len(parts) == 2:
            alts = _c_split_top(parts[1], ":")
            if len(alts) >= 2:
                return self.value(alts[0], depth + 1) | self.value(":".join(alts[1:]), depth + 1)
        # Python objects: imports and attribute chains
        m = _IMPORT_CALL.match(expr)
        if m:
            args, end = _split_args(expr, m.end())
            mods = self.strs(self.value(args[0], depth + 1)) if args else set()
            base = {("ref", s) for s in mods}
            return self._chain(base, expr, end + 1, depth)
        m = re.match(r"(?:PyObject_GetAttrString|PyObject_GetAttr|(?:py|pybind11)::getattr)\s*\(", expr)
        if m:
            args, end = _split_args(expr, m.end())
            if len(args) >= 2:
                base = {("ref", f"{v[1]}.{s}") for v in self.value(args[0], depth + 1) if v[0] == "ref"
                        for s in self.strs(self.value(args[1], depth + 1))}
                return self._chain(base, expr, end + 1, depth)
            return set()
        if re.fullmatch(r"PyImport_GetModuleDict\s*\(\s*\)", expr):
            return {("ref", "sys.modules")}
        m = re.match(r"PyModule_GetDict\s*\(", expr)
        if m:
            args, _ = _split_args(expr, m.end())
            return {("dict", v[1]) for v in self.value(args[0], depth + 1) if v[0] == "ref"} if args else set()
        m = re.match(r"([A-Za-z_]\w*)\b", expr)
        if m and m.group(1) in self.env:
            base = set()
            for e in self.env[m.group(1)][-6:]:
                base |= self.value(e, depth + 1)
            return self._chain(base, expr, m.end(), depth)
        return set()

    def _chain(self, base: set, expr: str, pos: int, depth: int) -> set:
        """`base` followed by `.attr("x")` accesses, `["key"]` subscripts (`sys.modules["name"]` is the module
        itself; another object's item is `obj[key]`) and a dict item's `.first`/`.second` (and nothing else)
        up to the end of `expr`."""
        cur = base
        while pos < len(expr):
            sm = _SUBSCRIPT.match(expr, pos)
            if sm:
                keys = self.strs(self.value(sm.group(1), depth + 1)) or {"*"}
                cur = {("ref", k if v[1] == "sys.modules" else f"{v[1]}[{k}]") for v in cur if v[0] == "ref" for k in keys}
                pos = sm.end()
                continue
            pm = _PAIR_MEMBER.match(expr, pos)
            if pm:
                pos = pm.end()
                continue
            m = _PY_ATTR.match(expr, pos) or re.compile(r"\s*\.\s*attr\s*\(").match(expr, pos)
            if not m:
                rest = expr[pos:].strip()
                if rest and not re.fullmatch(r"(?:\.|->)\s*(?:ptr|release|inc_ref)\s*\(\s*\)", rest):
                    return set()
                return cur
            args, end = _split_args(expr, m.end())
            names = self.strs(self.value(args[0], depth + 1)) if args else set()
            cur = {("ref", f"{v[1]}.{n}") for v in cur if v[0] == "ref" for n in names}
            pos = end + 1
        return cur

    @staticmethod
    def strs(vals: set) -> set[str]:
        return {v[1] for v in vals if v[0] == "str"}

    def ints(self, expr: str) -> set[int]:
        return {v[1] for v in self.value(expr) if v[0] == "int"}


def _path_strings(vals: set) -> set[str]:
    """Paths of string values: a part the text does not give is dropped with the separator after it
    (`dir + "/problem.yaml"` names problem.yaml in a folder the text does not say)."""
    out = set()
    for v in vals:
        if v[0] == "str":
            s = re.sub(_UNKNOWN + r"+/*", "", v[1])
            if s:
                out.add(s)
    return out


def _enclosing(text: str, pos: int) -> CFunc | None:
    funcs, opens, max_close = _outline_index(text)
    i = bisect_right(opens, pos) - 1
    while i >= 0 and max_close[i] >= pos:
        f = funcs[i]
        if f.open <= pos <= f.close:
            return f
        i -= 1
    return None


def _params(text: str, f: CFunc) -> list[str]:
    args, _ = _split_args(text, f.params + 1)
    names = []
    for a in args:
        a = a.split("=")[0].strip()
        m = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?$", a)
        names.append(m.group(1) if m and a and a != "void" else "")
    return [n for n in names] if names != [""] else []


@lru_cache(maxsize=64)
def read_cpp(text_raw: str) -> CppReading:
    """The operations of one C++/CUDA source in the capability audit's vocabulary (CppOp), with what
    the audit needs to place them: the functions and their parameters, the source's own call graph,
    the names Python reaches them by, and whether the source joins streams anywhere."""
    text = strip_c_comments(text_raw)
    ev = _CppEval(text)
    funcs = outline(text)
    names = {f.name for f in funcs}
    params = {f.name: _params(text, f) for f in funcs}
    calls: dict[str, set[str]] = {}
    for f in funcs:
        body = f.body(text)
        calls.setdefault(f.name, set()).update(n for n in re.findall(r"\b([A-Za-z_]\w*)\s*\(", body) if n in names and n != f.name)
    bound: dict[str, str] = {n: n for n in names}
    at_load = {f.name for f in funcs if f.name in ("PYBIND11_MODULE", "TORCH_LIBRARY", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT",
                                                   "PYBIND11_EMBEDDED_MODULE")}
    for m in re.finditer(r"\.\s*def\s*\(\s*\"(\w+)\"\s*,\s*&?\s*([\w:]+)", text):
        bound[m.group(1)] = m.group(2).split("::")[-1]
    ops: list[CppOp] = []

    def fn_at(pos: int) -> str | None:
        f = _enclosing(text, pos)
        return f.name if f else None

    def add(kind: str, q: str | None, start: int, end: int, args: list[str] = (), **kw: Any) -> None:
        vals = tuple(frozenset(_with_params(ev, a, params.get(fn_at(start) or "", []))) for a in args)
        ops.append(CppOp(kind, q, start, end, fn_at(start), vals, **kw))

    # Python calls and stores through the C API / pybind11
    for m in _PY_ATTR.finditer(text):
        args, end = _split_args(text, m.end())
        if not args:
            continue
        j = end + 1
        k = j
        while k < len(text) and text[k] in " \t\n":
            k += 1
        head = _expr_before(text, m.start())
        full = text[head:j]
        owner = ev.value(text[head:m.start()])
        attr_names = ev.strs(ev.value(args[0]))
        if k < len(text) and text[k] == "=" and text[k:k + 2] != "==":
            owner = _with_params(ev, text[head:m.start()], params.get(fn_at(head) or "", []))
            f = _enclosing(text, head)
            base = re.escape(text[head:m.start()].strip())
            for n in attr_names:
                # the function also returns what it set there (`return x.attr("n");`): a value kept on that object
                back = bool(f and re.search(rf"\breturn\s+{base}\s*(?:\.|->)\s*attr\s*\(\s*\"{re.escape(n)}\"\s*\)",
                                            f.body(text)))
                ops.append(CppOp("store", None, head, j, fn_at(head), (frozenset(owner),), name=n, how=f"`{full[:60]}` = ...",
                                 data=("returned",) if back else ()))
        elif k < len(text) and text[k] == "(" and not _PY_ATTR.match(text, k):
            cargs, cend = _split_args(text, k + 1)
            for v in ev.value(full):
                if v[0] == "ref":
                    add("call", v[1], head, cend + 1, [a for a in cargs if a], how=f"`{text[head:cend + 1][:80]}`")
    for m in re.finditer(r"\b(PyObject_(?:Set|Del)Attr(?:String)?|(?:py|pybind11)::(?:set|del)attr|PyModule_AddObject\w*|"
                         r"PyDict_(?:Set|Del)ItemString|PyObject_CallMethod\w*|PyObject_Call(?:Object|Function\w*|NoArgs|OneArg)?|"
                         r"PyObject_Vectorcall\w*)\s*\(", text):
        fn = m.group(1)
        args, end = _split_args(text, m.end())
        if not args:
            continue
        owner = _with_params(ev, args[0], params.get(fn_at(m.start()) or "", []))
        if re.search(r"Set|Del|setattr|delattr|AddObject", fn) and len(args) >= 2:
            for n in ev.strs(ev.value(args[1])) or ({"*"} if "String" not in fn else set()):
                ops.append(CppOp("store", None, m.start(), end + 1, fn_at(m.start()), (frozenset(owner),), name=n,
                                 how=f"{fn}(..., {n!r})"))
        elif "CallMethod" in fn and len(args) >= 2:
            for n in ev.strs(ev.value(args[1])):
                for v in owner:
                    if v[0] == "ref":
                        add("call", f"{v[1]}.{n}", m.start(), end + 1, args[2:], how=f"{fn}(..., {n!r})")
        elif "Call" in fn:
            for v in owner:
                if v[0] == "ref":
                    add("call", v[1], m.start(), end + 1, args[1:], how=fn)
    # items set on a Python object the source reaches (`environ["K"] = ...`, `sys.modules["m"] = ...`, a grader's
    # table's entry): the Python `obj.__setitem__(key, value)`
    for m in _ITEM_STORE.finditer(text):
        head = _expr_before(text, m.start())
        keys = ev.strs(ev.value(m.group(1))) or {"*"}
        for v in ev.value(text[head:m.start()]):
            if v[0] == "ref":
                for k in keys:
                    ops.append(CppOp("call", f"{v[1]}.__setitem__", head, m.end(), fn_at(head), (frozenset({("str", k)}),),
                                     how=f"`{text[head:m.end()][:60]}` ..."))
    # a dict the source builds item by item (`py::dict d; d["K"] = v;`) handed to a Python object's update(): each
    # of its keys set on that object
    for op in list(ops):
        if op.kind != "call" or not (op.q or "").endswith(".update") or not op.how.startswith("`"):
            continue
        am = re.search(r"\(\s*([A-Za-z_]\w*)\s*\)\s*$", text[op.offset:op.end])
        if not am:
            continue
        built = {k for k in re.findall(rf"(?<![\w.>]){re.escape(am.group(1))}\s*\[\s*(\"(?:[^\"\\\n]|\\.)*\")\s*\]\s*=(?!=)",
                                       text)}
        for lit in sorted(built):
            for k in ev.strs(ev.value(lit)):
                ops.append(CppOp("call", op.q[:-len("update")] + "__setitem__", op.offset, op.end, op.func,
                                 (frozenset({("str", k)}),), how=f"{op.how} with {k!r}"))
    # a name that holds a Python callable, called: `get_objects()` after `auto get_objects = gc.attr(...)`
    for name in ev.env:
        vals = {v for v in ev.value(name) if v[0] == "ref"}
        if not vals:
            continue
        for m in re.finditer(rf"(?<![\w.>]){re.escape(name)}\s*\(", text):
            args, end = _split_args(text, m.end())
            for v in vals:
                add("call", v[1], m.start(), end + 1, [a for a in args if a], how=f"`{name}(...)`")
    # libc and C++ library calls that do what a Python call does
    for m in _LIBC_CALL.finditer(text):
        word = m.group(1)
        pre = text[max(0, m.start() - 40):m.start()]
        if re.search(r"(?:\b(?:void|int|bool|auto|static|inline|extern|char|long|size_t|ssize_t|PyObject\s*\*)\s*\**\s*|\.\s*|->\s*)$", pre) \
                and word not in ("set_current_seed",):
            continue     # a declaration of a function of that name, or a method of an object of its own
        args, end = _split_args(text, m.end())
        q = _LIBC[word]
        if word in ("manual_seed", "manual_seed_all") and not re.search(r"(?:torch|at)\s*::\s*(?:cuda\s*::\s*)?$", text[max(0, m.start() - 20):m.start(1)]):
            continue
        if word == "set_current_seed" and not _DEFAULT_GEN.search(text[max(0, m.start() - 200):m.start()]):
            continue     # a generator of its own
        if _CUDA_SEED.match(text, m.start()):
            q = "torch.cuda.manual_seed_all" if "_all" in text[m.start():m.end()] else "torch.cuda.manual_seed"
        if word in ("socket",) and not (args and re.match(r"(AF_|PF_)", args[0])):
            continue
        if word == "connect" and len(args) != 3:
            continue
        if word in ("fprintf", "fputs", "fwrite", "dprintf", "write") and args:
            target = args[0] if word in ("fprintf", "dprintf", "write") else args[-1]
            ints = ev.ints(target)
            streams = {v[1] for v in ev.value(target) if v[0] == "stream"}
            if word in ("fprintf", "fputs", "fwrite") and not streams:
                continue     # a file of its own
            if word in ("write", "dprintf") and not ints & {1, 2}:
                continue
            text_args = [args[1]] if word in ("fprintf", "dprintf", "write") else [args[0]]
            add("call", "os.write" if ints & {1, 2} else "builtins.print", m.start(), end + 1,
                [str(next(iter(ints)))] + text_args if ints else text_args, how=f"{word}()")
            continue
        if q == "ctypes.memmove" or q == "ctypes.memset":
            ptrs = args[:2] if q == "ctypes.memmove" else args[:1]
            if not any(_below_data(ev, a) for a in ptrs):
                continue     # a copy inside its own buffers
        if q in ("sys.exit", "os._exit") and args:
            add("call", q, m.start(), end + 1, args[:1], how=f"{word}()")
            continue
        add("call", q, m.start(), end + 1, [a for a in args if a], how=f"{word}()")
    for m in _STREAM_OUT.finditer(text):
        stop = text.find(";", m.end())
        lits = "".join(_c_unescape(s) for s in _CSTR.findall(text[m.end():stop]))
        if lits:
            ops.append(CppOp("call", "builtins.print", m.start(), stop, fn_at(m.start()),
                             (frozenset({("str", lits)}),), how=f"std::{m.group(1)} <<"))
    # dlsym: a symbol of a CUDA library is a launch; another one, or one looked up past every library
    # (RTLD_NEXT, RTLD_DEFAULT: a hook), reaches code the solution did not build
    for m in re.finditer(r"\bdlsym\s*\(", text):
        args, end = _split_args(text, m.end())
        sym = ev.strs(ev.value(args[1])) if len(args) > 1 else set()
        if sym and all(re.match(r"(cu|cuda|nvrtc|cublas|nvJitLink|cudnn|nccl|nvml)[A-Z_]", s) for s in sym) \
                and not (args and "RTLD_NEXT" in args[0]):
            continue
        add("call", "ctypes.pythonapi" if not sym else "native.dlsym", m.start(), end + 1, args[1:2], how="dlsym()")
    for m in re.finditer(r"\b(mprotect|dl_iterate_phdr|process_vm_readv|process_vm_writev|ptrace|cupti\w+)\s*\(", text):
        args, end = _split_args(text, m.end())
        add("call", f"native.{m.group(1)}", m.start(), end + 1, how=f"{m.group(1)}()")
    # files
    for m in _FILE_OPEN.finditer(text):
        word = m.group(1) or m.group(2) or m.group(3)
        pre = text[max(0, m.start() - 30):m.start()]
        if m.group(1) and re.search(r"(?:\.|->)\s*$", pre):
            continue
        if m.group(3):
            if m.group(4) is None and text[m.end() - 1] == "{" or text[m.end() - 1] == "{" and m.group(4):
                continue
            args, end = _split_args(text, m.end())
            write = word != "ifstream"
            if m.group(4):          # `std::ofstream out;` then out.open(path)
                for o in _FSTREAM_OPEN.finditer(text, m.end()):
                    if o.group(1) == m.group(4):
                        a2, e2 = _split_args(text, o.end())
                        add("open", "builtins.open", o.start(), e2 + 1, a2[:1], write=write, how=f"std::{word}.open()")
            if args and args[0]:
                add("open", "builtins.open", m.start(), end + 1, args[:1], write=write, how=f"std::{word}()")
            continue
        args, end = _split_args(text, m.end())
        if not args or not args[0]:
            continue
        if word in ("fopen", "freopen"):
            modes = ev.strs(ev.value(args[1])) if len(args) > 1 else set()
            write = any(c in md for md in modes for c in "wa+")
            add("open", "builtins.open", m.start(), end + 1, args[:1], write=write, how=f"{word}()")
        elif word == "open":
            if len(args) < 2 or not re.search(r"\bO_[A-Z]+", args[1]):
                continue     # not POSIX open(path, flags)
            add("open", "os.open", m.start(), end + 1, args[:1], write=bool(re.search(r"O_(?:WRONLY|RDWR|CREAT|TRUNC|APPEND)", args[1])),
                how="open()")
        elif word == "creat":
            add("open", "os.open", m.start(), end + 1, args[:1], write=True, how="creat()")
        elif word in ("rename", "copy_file", "copy", "create_symlink"):
            if len(args) >= 2:
                add("open", "os.rename", m.start(), end + 1, args[:2], write=True, how=f"{word}()")
        else:
            add("open", "os.remove", m.start(), end + 1, args[:1], write=True, how=f"{word}()")
    # threads
    for m in _THREAD.finditer(text):
        var = m.group(2) or m.group(3)
        tail = text[m.end():m.end() + 2000]
        if m.group(0).startswith("std::async"):
            continue    # a future joins in its destructor
        if m.group(1) == "jthread":
            continue    # joins in its destructor
        stop = _split_args(text, m.end())[1] if text[m.end() - 1] in "({" else m.end()
        rest = text[stop:stop + 40]
        detached = bool(re.match(r"\s*[)}]?\s*\.\s*detach\s*\(", rest)) or bool(var and re.search(
            rf"\b{re.escape(var)}\s*(?:\.|->)\s*detach\s*\(|pthread_detach\s*\(\s*{re.escape(var)}\b", text))
        joined = bool(var and re.search(rf"\b{re.escape(var)}\s*(?:\.|->)\s*join\s*\(|pthread_join\s*\(\s*{re.escape(var)}\b", text)) \
            or bool(re.search(r"\.\s*join\s*\(", tail) and not var)
        if not var and not detached and not re.search(r"\.\s*join\s*\(", tail):
            joined = False
        ops.append(CppOp("thread", "threading.Thread", m.start(), stop + 1, fn_at(m.start()), joined=joined and not detached,
                         detached=detached, how=m.group(0).strip()[:40]))
    # threads kept in a container (`std::vector<std::thread> ts; ts.emplace_back(...)`): joined or detached where
    # the source walks it (`for (auto& t : ts) t.join();`, `ts[i].join()`); one in static storage or at file
    # scope that nothing joins runs on after the call ("kept")
    for dm in _THREAD_VEC.finditer(text):
        name = re.escape(dm.group(1))
        joined, detached = _walked(text, name, "join"), _walked(text, name, "detach")
        kept = fn_at(dm.start()) is None or bool(re.search(r"\bstatic\s+(?:thread_local\s+)?$", text[max(0, dm.start() - 30):dm.start()]))
        for am in re.finditer(r"\b" + name + r"\s*(?:\.|->)\s*(emplace_back|push_back|emplace)\s*\(", text):
            _, end = _split_args(text, am.end())
            if re.match(r"\s*std::thread\b", text[am.end():am.end() + 20]):
                continue     # `ts.push_back(std::thread(...))`: read above as the thread it constructs
            ops.append(CppOp("thread", "threading.Thread", am.start(), end + 1, fn_at(am.start()),
                             joined=joined and not detached, detached=detached, how=f"{dm.group(1)}.{am.group(1)}(...)",
                             data=("kept",) if kept and not joined else ()))
    # streams of its own
    for m in _STREAM_MAKE.finditer(text):
        pre = text[max(0, m.start() - 30):m.start()]
        if re.search(r"(?:\.|->)\s*$", pre):
            continue
        _, end = _split_args(text, m.end())
        f = _enclosing(text, m.start())
        ops.append(CppOp("stream", m.group(1).split("::")[-1], m.start(), end + 1, fn_at(m.start()), how=m.group(1),
                         entered=bool(_STREAM_ENTER.search(f.body(text) if f else text))))
    # caches of results in static storage
    ops.extend(_memo_returns(text, ev, fn_at))
    # branches on the values of a tensor parameter
    ops.extend(_value_branches(text, funcs, params))
    ops.extend(_process_branches(text, funcs, ev))
    ops.sort(key=lambda o: o.offset)
    tensors = {}
    for f in funcs:
        if not _TENSOR_TOUCH.search(text, f.open, f.close + 1):
            continue          # no in-place call, fill or allocation in it: nothing to say
        tf = tensor_flow(text, f, params.get(f.name, []))
        if tf.writes or tf.fresh:
            tensors[f.name] = tf
    return CppReading(ops, params, calls, bound, at_load, bool(STREAM_JOIN.search(text)), tensors)


# ---- what a C++ function does to the tensors it is handed and to the tensor it returns
#: view methods: the result is the same memory
_CPP_VIEWS = r"view|reshape|flatten|select|narrow|slice|t|transpose|permute|squeeze|unsqueeze|expand|as_strided|" \
             r"unflatten|diagonal|view_as|expand_as|index|detach|alias|chunk|split|unbind|movedim|real|imag|" \
             r"contiguous|to|type_as"
_CPP_MAYBE = frozenset({"contiguous", "to", "type_as"})
_CPP_NOT_INPLACE = frozenset({"record_stream_", "requires_grad_", "share_memory_", "retain_grad_", "set_requires_grad_"})
_CPP_ALLOC = re.compile(r"(?:\b(?:at|torch)\s*::\s*)(empty|empty_like|empty_strided)\s*\(|\.\s*(new_empty|new_empty_strided)\s*\(")
#: uses of a tensor that read its metadata only: neither a write nor a hand-off
_CPP_META = re.compile(r"\s*(?:\.|->)\s*(?:size|sizes|numel|dim|stride|strides|options|dtype|scalar_type|device|"
                       r"is_contiguous|is_cuda|element_size|nbytes|ndimension|get_device|layout|defined)\s*\(")
_CPP_INPLACE_FN = re.compile(r"\b(?:at|torch)\s*::\s*(\w+_)\s*\(\s*(\w+)\b")
_CPP_FILL = re.compile(r"\b(?:std::)?(memset|cudaMemset(?:Async)?|cudaMemset2D(?:Async)?|std::fill|std::fill_n|fill_n|"
                       r"cuMemsetD8(?:Async)?|cuMemsetD32(?:Async)?)\s*\(")


#: what tensor_flow looks for in a function at all (an in-place method or function, a fill, an allocation)
_TENSOR_TOUCH = re.compile(r"\w_\s*\(|\b(?:memset|cudaMemset\w*|fill_n|fill|cuMemsetD\w+)\s*\(|\bempty(?:_like|_strided)?\s*\(")


def tensor_flow(text: str, f: CFunc, params: list[str]) -> TensorFlow:
    """The in-place writes of tensor parameters (t.zero_(), t.fill_(v), at::zero_(t), memset or
    cudaMemset on t.data_ptr(), through views, loop variables over a vector of tensors and local
    aliases) and the return of an allocation nothing wrote (`return at::empty(...)`, or a local
    allocated so and returned with no kernel, call or method given it in between)."""
    body = f.body(text)
    base = f.open
    # names that stand for a parameter: (param index, sure)
    alias: dict[str, tuple[int, bool]] = {p: (i, True) for i, p in enumerate(params) if p}
    ptr: dict[str, tuple[int, bool]] = {}
    chain = rf"(?:\s*\[[^\]\[;]*\])?(?:\s*(?:\.|->)\s*(?:{_CPP_VIEWS})\s*\([^;]*?\))*"
    for _ in range(3):                   # to a fixpoint, short: alias of an alias
        n0 = len(alias) + len(ptr)
        for m in re.finditer(r"\bfor\s*\(\s*[^;(){}]*?\b(\w+)\s*:\s*(\w+)\s*\)", body):
            if m.group(2) in alias and m.group(1) not in alias:
                alias[m.group(1)] = alias[m.group(2)]
        for m in re.finditer(r"(?:\bauto|\b(?:at|torch)::Tensor|\bTensor)\s*&{0,2}\s*(\w+)\s*=\s*(\w+)(" + chain + r")\s*;", body):
            src = alias.get(m.group(2))
            if src is not None and m.group(1) not in alias:
                maybe = any(re.search(rf"\.\s*{w}\s*\(", m.group(3)) for w in _CPP_MAYBE)
                alias[m.group(1)] = (src[0], src[1] and not maybe)
        for m in re.finditer(r"\b(\w+)\s*\*?\s*\*\s*(\w+)\s*=\s*(?:\([^()]*\)\s*|(?:static|reinterpret)_cast\s*<[^>]*>\s*\()?"
                             r"\s*(\w+)\s*(?:\.|->)\s*(?:data_ptr|mutable_data_ptr|data)\s*(?:<[^>]*>)?\s*\(", body):
            src = alias.get(m.group(3))
            if src is not None:
                ptr[m.group(2)] = src
        if len(alias) + len(ptr) == n0:
            break
    writes: dict[int, tuple[str, bool, int]] = {}

    def wrote(idx: tuple[int, bool], how: str, at: int) -> None:
        i, sure = idx
        if i not in writes or (sure and not writes[i][1]):
            writes[i] = (how, sure, base + at)

    for m in re.finditer(rf"(?<![\w.>])(\w+){chain}\s*(?:\.|->)\s*(\w+_)\s*\(", body):     # t.zero_(), t.view(..).fill_(v)
        name, meth = m.group(1), m.group(2)
        if name in alias and meth not in _CPP_NOT_INPLACE and not meth.startswith("_"):
            wrote(alias[name], f"`{name}.{meth}(...)` writes into it", m.start())
    for m in _CPP_INPLACE_FN.finditer(body):                                              # at::zero_(t)
        if m.group(2) in alias and m.group(1) not in _CPP_NOT_INPLACE:
            wrote(alias[m.group(2)], f"`{m.group(1)}({m.group(2)}, ...)` writes into it", m.start())
    for m in _CPP_FILL.finditer(body):
        args, _ = _split_args(body, m.end())
        if not args:
            continue
        a0 = args[0]
        hit = re.match(r"\s*(?:\([^()]*\)\s*)?(?:(?:static|reinterpret)_cast\s*<[^>]*>\s*\(\s*)?(\w+)\s*(?:(?:\.|->)\s*"
                       r"(?:data_ptr|mutable_data_ptr|data)\s*(?:<[^>]*>)?\s*\(\s*\))?", a0)
        if hit and hit.group(1) in alias and re.search(r"data_ptr|\bdata\s*\(", a0):
            wrote(alias[hit.group(1)], f"`{m.group(1)}({hit.group(1)}.data_ptr(), ...)` overwrites its memory", m.start())
        elif hit and hit.group(1) in ptr:
            wrote(ptr[hit.group(1)], f"`{m.group(1)}({hit.group(1)}, ...)` overwrites the memory of the tensor it points into",
                  m.start())
    return TensorFlow(tuple(sorted(writes.items())), _fresh_return(body, base))


def _zero_sized(args: list[str]) -> bool:
    return bool(args) and bool(re.match(r"\s*\{\s*0\s*[,}]|\s*0\s*$", args[0]))


def _fresh_return(body: str, base: int) -> tuple | None:
    """(how, offset) when the function returns an allocation nothing wrote, else None."""
    for r in _RETURN.finditer(body):
        e = r.group(1).strip()
        m = _CPP_ALLOC.match(e) if e else None
        if m:
            args, end = _split_args(e, m.end())
            if end >= len(e) - 1 and not _zero_sized(args):
                return (f"returns `{e[:60]}`, memory allocated uninitialised", base + r.start())
            continue
        if not re.fullmatch(r"\w+", e or "-"):
            continue
        name = e
        decl = re.search(rf"(?:\bauto|\b(?:at|torch)::Tensor|\bTensor)\s+{re.escape(name)}\s*=\s*", body)
        if decl is None:
            continue
        rhs = body[decl.end():body.find(";", decl.end())]
        m = _CPP_ALLOC.search(rhs)
        if m is None or m.start() > 40 or rhs[:m.start()].strip() not in ("", "torch::", "at::"):
            continue
        if _zero_sized(_split_args(rhs, m.end())[0]):
            continue
        at_decl = decl.start() + decl.group(0).index(name)
        uses = [u for u in re.finditer(rf"(?<![\w.>]){re.escape(name)}\b", body)
                if u.start() != at_decl and not re.search(r"\breturn\s*$", body[max(0, u.start() - 12):u.start()])]
        if all(_CPP_META.match(body, u.end()) for u in uses):
            return (f"returns `{name}`, allocated uninitialised (`{rhs.strip()[:50]}`) and given to nothing before",
                    base + r.start())
    return None


def _with_params(ev: _CppEval, expr: str, params: list[str]) -> set:
    """The value of an argument expression, a bare parameter of the enclosing function kept as
    ("param", index) (the audit binds it to what the Python caller passes)."""
    e = expr.strip()
    e2 = re.sub(r"\s*(?:\.|->)\s*(?:ptr|c_str|release)\s*\(\s*\)$", "", e)
    if re.fullmatch(r"[A-Za-z_]\w*", e2) and e2 in params and e2 not in ev.env:
        return {("param", params.index(e2))}
    return ev.value(e)


def _below_data(ev: _CppEval, expr: str) -> bool:
    """A pointer expression that steps back from a tensor's data pointer (`p - n` with p from
    data_ptr()): memory before the tensor's own storage."""
    m = re.match(r"\s*(?:\([^()]*\)\s*)?\(?\s*([A-Za-z_]\w*)\s*(?:\)\s*)?-\s*[^-]", expr)
    if m and (m.group(1) in ev.ptr_from_data):
        return True
    return bool(re.search(r"data_ptr\s*(?:<[^>]*>)?\s*\(\s*\)\s*\)?\s*-\s*\w", expr))


def _expr_before(text: str, pos: int) -> int:
    """Start of the postfix expression ending at `pos` (`py::module_::import("gc")` before `.attr(`)."""
    i = pos
    while i > 0:
        j = i - 1
        while j >= 0 and text[j] in " \t\n":
            j -= 1
        if j < 0:
            return 0
        c = text[j]
        if c in ")]":       # a call's arguments, or a subscript (`modules["name"]` before `.attr(`)
            close, open_ = c, "(" if c == ")" else "["
            depth, k = 0, j
            while k >= 0:
                if text[k] == close:
                    depth += 1
                elif text[k] == open_:
                    depth -= 1
                    if depth == 0:
                        break
                k -= 1
            i = k
            continue
        if c.isalnum() or c == "_" or c == ":" or c == ">" and text[j - 1:j + 1] == "->" or c == "-" and text[j:j + 2] == "->":
            k = j
            while k >= 0 and (text[k].isalnum() or text[k] in "_:"):
                k -= 1
            i = k + 1
            if i > 0 and text[i - 1] == ".":
                i -= 1
                continue
            if i > 1 and text[i - 2:i] == "->":
                i -= 2
                continue
            if i > 0 and text[i - 1] == ">":     # template arguments: reinterpret_borrow<py::object>(
                lt = text.rfind("<", max(0, i - 80), i)
                if lt > 0:
                    i = lt
                    continue
            return i
        if c == ".":
            i = j
            continue
        return i
    return 0


_RETURN = re.compile(r"\breturn\b\s*([^;]*);")
#: reductions of a tensor's values (ATen methods and functions): what tells one value distribution from another
_CPP_REDUCTION = re.compile(r"(?:\.|->|\b(?:at|torch)\s*::\s*)\s*(amax|amin|max|min|norm|mean|std|var|sum|median|"
                            r"linalg_vector_norm|frobenius_norm)\s*\(")
_CPP_LOCAL = re.compile(r"(?:^|[;{}]\s*)(?:const\s+)?(?:auto|(?:at|torch)::Tensor|float|double|int64_t|int|bool|"
                        r"(?:at|c10)::Scalar)\s*&?\s*([A-Za-z_]\w*)\s*=\s*([^;]+);", re.MULTILINE)


def _value_branches(text: str, funcs: tuple, params: dict[str, list[str]]) -> list[CppOp]:
    """`if (...)` tests in a function that read a reduction of a tensor parameter's values (directly,
    through a local tensor derived from it, or through a local scalar that holds the reduction) and
    whose arm returns: the function answers differently for inputs of another magnitude.  A test on a
    parameter's sizes (`x.size(0)`), a finiteness check (`isfinite(x).all()`) or an arm that only throws
    reads no statistic or takes no second path."""
    out: list[CppOp] = []
    for f in funcs:
        ps = params.get(f.name, [])
        if not ps:
            continue
        body = f.body(text)
        if not _CPP_REDUCTION.search(body) or "if" not in body:
            continue
        carries: dict[str, set[int]] = {p: {i} for i, p in enumerate(ps) if p}
        stats: dict[str, tuple[set[int], set[str]]] = {}
        for m in _CPP_LOCAL.finditer(body):
            name, expr = m.group(1), m.group(2)
            src = {i for n in re.findall(r"\b[A-Za-z_]\w*\b", expr) for i in carries.get(n, ())}
            if not src or name in carries:
                continue
            red = set(_CPP_REDUCTION.findall(expr))
            if red:
                stats[name] = (src, red)
            else:
                carries[name] = src
        for m in re.finditer(r"\bif\s*\(", body):
            _, end = _split_args(body, m.end())
            cond = body[m.end():end]
            idents = set(re.findall(r"\b[A-Za-z_]\w*\b", cond))
            src: set[int] = set()
            red: set[str] = set()
            if _CPP_REDUCTION.search(cond):
                src |= {i for n in idents for i in carries.get(n, ())}
                red |= set(_CPP_REDUCTION.findall(cond)) if src else set()
            for n in idents & stats.keys():
                src |= stats[n][0]
                red |= stats[n][1]
            if not src:
                continue
            arm = body[end + 1:]
            arm = arm[:_statement_end(arm)]
            if not re.search(r"\breturn\b", arm):
                continue
            out.append(CppOp("dispatch", None, f.open + m.start(), f.open + end + 1, f.name,
                             (frozenset(("param", i) for i in sorted(src)),), how=f"if ({cond.strip()[:80]})",
                             data=tuple(sorted(red))))
    return out


#: the global RNG's seed read in C++ (the default CPU/CUDA generator's current or initial seed)
_CPP_SEED_READ = re.compile(r"\b(?:getDefault(?:CPU|CUDA)Generator|defaultGenerator|default_generator)\s*\([^;{}]*?\)"
                            r"\s*(?:\.|->)\s*(?:current_seed|initial_seed|seed)\s*\(|"
                            r"(?:\.|->)\s*attr\s*\(\s*\"initial_seed\"\s*\)")
#: a membership test on a Python mapping: `modules.contains("name")`, PyDict_Contains / PyDict_GetItemString
_CPP_CONTAINS = re.compile(r"(?:\.|->)\s*contains\s*\(|\bPyDict_(?:Contains|GetItemString|GetItem)\s*\(|"
                           r"\bPyMapping_HasKeyString\s*\(")


def _process_branches(text: str, funcs: tuple, ev: _CppEval) -> list[CppOp]:
    """`if (...)` tests in a function that read the process the way phase detection does: the global
    RNG's seed (the decks seed their inputs; the check and the benchmark with different seeds), or whether
    a module is in `sys.modules`.  `data` holds ("read", what) and the constants compared: strings (a module
    name tested for) and integers (a seed).  A function that returns such a test is read too (its Python
    caller branches on it).  Whether they are the grader's identity is decided in cap_cpp.py, as for
    the same test written in Python."""
    out: list[CppOp] = []
    for f in funcs:
        body = f.body(text)
        if not (_CPP_SEED_READ.search(body) or _DEFAULT_GEN.search(body) or _CPP_CONTAINS.search(body)):
            continue
        tests = []
        for m in re.finditer(r"\bif\s*\(", body):
            _, end = _split_args(body, m.end())
            tests.append((m.start(), end + 1, body[m.end():end], "if"))
        for m in _RETURN.finditer(body):        # a function that answers the test: its caller branches on it
            tests.append((m.start(), m.end(), m.group(1), "return"))
        for start, stop, cond, how in tests:
            reads: set[str] = set()
            ids: set = set()
            if _CPP_SEED_READ.search(cond) or any(_CPP_SEED_READ.search(" ".join(ev.env.get(n, [])))
                                                   for n in re.findall(r"\b[A-Za-z_]\w*\b", cond)) or any(
                    _DEFAULT_GEN.search(" ".join(ev.env.get(g.group(1), [])))
                    for g in re.finditer(r"\b([A-Za-z_]\w*)\s*(?:\.|->)\s*(?:current_seed|initial_seed|seed)\s*\(", cond)):
                reads.add("torch.initial_seed")
                ids |= {int(x) for x in re.findall(r"(?<![\w.])(\d+)(?![\w.])", cond)}
            for c in _CPP_CONTAINS.finditer(cond):
                args, _ = _split_args(cond, c.end())
                if c.group(0).lstrip(".->").strip().startswith("contains"):
                    owner, keys = cond[_expr_before(cond, c.start()):c.start()], args[:1]
                else:
                    owner, keys = (args[0] if args else ""), args[1:2]
                if ("ref", "sys.modules") in ev.value(owner):
                    reads.add("sys.modules")
                    ids |= {s for k in keys for s in ev.strs(ev.value(k))}
            if reads and ids:
                out.append(CppOp("phase", None, f.open + start, f.open + stop, f.name,
                                 how=f"{how} ({cond.strip()[:80]})" if how == "if" else f"return {cond.strip()[:80]}",
                                 data=(tuple(sorted(reads)), tuple(sorted(ids, key=str)))))
    return out


def _statement_end(s: str) -> int:
    """The end of the statement `s` starts with: a `{...}` block or text up to its `;`."""
    t = s.lstrip()
    off = len(s) - len(t)
    if t.startswith("{"):
        depth = 0
        for i, c in enumerate(t):
            depth += c == "{"
            depth -= c == "}"
            if depth == 0:
                return off + i + 1
        return len(s)
    j = t.find(";")
    return off + (j + 1 if j >= 0 else len(t))


#: a few elements of a tensor read into a value at constant positions: `flat[0].item<double>()`,
#: `x.index({0, -1}).item<float>()`, `x.narrow(0, 0, 1).sum().item<float>()`
_CPP_SAMPLE = re.compile(r"\[\s*-?\d+\s*\]\s*(?:\.|->)\s*item\s*[<(]|"
                         r"(?:\.|->)\s*index\s*\(\s*\{\s*-?\d+[^;]*?\)\s*(?:\.|->)\s*item\s*[<(]|"
                         r"(?:\.|->)\s*(?:narrow|slice|select)\s*\((?:\s*-?\d+\s*,?)+\)\s*(?:(?:\.|->)\s*\w+\s*\(\s*\)\s*)*"
                         r"(?:\.|->)\s*item\s*[<(]")


def _memo_returns(text: str, ev: _CppEval, fn_at) -> list[CppOp]:
    """A function that returns a value it kept in static storage (a static container's entry, an
    object behind a static pointer) on a path that does not compute it again: the result of an earlier
    call handed back.  The key the lookup compares (a data pointer, a Python object's address, a call
    count, nothing) is kept in the op's data; the rules decide in cap_cpp.py.  A static that only
    selects a plan or a workspace and returns nothing of it is not a memo."""
    statics: dict[str, int] = {}
    for m in _MEMO_CONTAINER.finditer(text):
        decl = text[m.start():text.find(";", m.start()) + 1]
        if re.search(r"\bstatic\s+(?:inline\s+|constexpr\s+|__device__|__global__|__host__|void\b|bool\s+\w+\s*\()", decl):
            continue
        if "(" in decl.split("=")[0] and not re.search(r"\b(?:map|unordered_map|vector|object|Tensor)\b", decl.split("=")[0]):
            continue     # a static function's declaration
        statics[m.group(1)] = m.start()
    if not statics:
        return []
    out = []
    for f in outline(text):
        head = text[max(0, f.params - 160):f.params]
        ret = re.search(r"([\w:<>,*&\s]+?)\s*\b" + re.escape(f.name) + r"\s*$", head)
        if not ret or "&" in ret.group(1) or not re.search(r"\b(?:py::object|object|Tensor|tuple|list|PyObject|auto|"
                                                            r"vector\s*<\s*(?:at::|torch::)?Tensor)\b", ret.group(1)):
            continue     # what it returns is a plan or a reference of the source's own, not a result for Python
        body = f.body(text)
        used = {s for s in statics if re.search(rf"\b{re.escape(s)}\b", body)}
        if not used:
            continue
        iters = set()
        for m in re.finditer(r"\b(?:auto|\w+::iterator|\w+::const_iterator)\s*&?\s*(\w+)\s*=\s*\(?\s*\*?\s*(\w+)\s*\)?\s*(?:->|\.)\s*find\s*\(", body):
            if m.group(2) in used:
                iters.add(m.group(1))
        for r in _RETURN.finditer(body):
            e = r.group(1).strip()
            ids = set(re.findall(r"\b[A-Za-z_]\w*\b", e))
            hit = None
            if ids & iters and re.search(r"(?:->|\.)\s*second\b", e):
                hit = "a static container's entry"
            elif ids & used and re.search(r"\*\s*(\w+)|(\w+)\s*(?:->|\.)\s*(?:at|find)\s*\(|(\w+)\s*\[|\(\s*\*\s*(\w+)\s*\)\s*\[", e) \
                    and not re.search(r"\b(?:at|torch)::\w+\s*\(", e):
                hit = "an object in static storage"
            if hit is None:
                continue
            # the same function computes it on another path (a call of a Python callable, a kernel, an op)
            computes = bool(re.search(r"\bimpl\s*\(|\w+\s*\(\s*\)\s*;|<<<|\bat::|\btorch::|\.\s*attr\s*\(|\w+\(\s*[^)]*\)", body[:r.start()]
                                      + body[r.end():]))
            key = set()
            pre = body[:r.start()]
            if re.search(r"data_ptr|\bdata\s*\(\s*\)", body):
                key.add("ptr")
            if re.search(r"\.\s*ptr\s*\(\s*\)|\bid\s*\(", body) and re.search(r"reinterpret_cast\s*<\s*(?:intptr_t|int64_t|uintptr_t|long)", body):
                key.add("id")
            if re.search(r"_version\s*\(", body):
                key.add("version")
            if re.search(r"\+\+\s*\w+|\w+\s*\+\+|\w+\s*\+=\s*1\b", body) and re.search(r"\bif\s*\([^)]*\b\w+\s*[<>]=?\s*\d", pre):
                key.add("count")
            if re.search(r"\.sizes\s*\(|\.size\s*\(\s*-?\d|\.shape\b|\.numel\s*\(", body):
                key.add("shape")
            if _CPP_SAMPLE.search(body):
                key.add("sampled")      # the values of a few elements at constant positions, never the rest
            abs_off = f.open + r.start()
            out.append(CppOp("memo", None, abs_off, f.open + r.end(), f.name, how=hit,
                             data=tuple(sorted(key)) + (("computes",) if computes else ())))
            break     # the first such return is the hit's; a later one hands back what was just stored
    return out
