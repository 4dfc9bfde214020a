"""The C++/CUDA sources a solution builds, read for the same capabilities as its Python (`CppSources`):
each operation `cuda.read_cpp` found (C API writes, libc files and processes, dlsym, streams and
whether the source joins them, memos and input dispatch in the extension's functions) judged where
Python calls it, and what each function does to the tensors it is handed (`tensor_flow`, read by
entry_flow).  A finding cites the source line (`CppSite`) and the Python that runs it."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from .cap_patching import GRADER_CALLS, GRADER_TENSOR_METHODS
from .model import _entry_params
from .values import Ctx, walk_expr


#: calls that build (and load) an extension from sources: code that runs as it loads runs there
_BUILD_CALLS = frozenset({"load_inline", "load", "compile_inline", "build_extension", "RawModule", "RawKernel", "SourceModule"})


@dataclass(frozen=True, eq=False)
class CppSite:
    """Where a C++ operation is: its file and lines (a load_inline string cites solution.py's own lines,
    a sidecar its own file), and the Python nodes that run it (references to the extension's function,
    or the build call for code that runs as the extension loads)."""
    file: str
    lineno: int | None
    end_lineno: int | None
    quote: str
    origin: str
    calls: tuple = ()
    at_import: bool = False


@dataclass(frozen=True)
class CppCall:
    """A C++ call standing where a Python sink expects its ast.Call: the Python call it amounts to and
    its arguments' values."""
    q: str
    args: tuple = ()


def _cpp_site(blob: Any, op: Any, calls: list, at_load: bool) -> CppSite:
    f, ln = blob.where(op.offset)
    f2, ln2 = blob.where(max(op.offset, op.end - 1))
    quote = blob.text[op.offset:op.end].strip().replace("\n", " ")[:160]
    return CppSite(f, ln, ln2 if f2 == f else ln, quote, blob.origin, tuple(calls), at_load)


def _cpp_paths(vals: set) -> set[str]:
    from .cuda import _path_strings
    return _path_strings(vals)


class CppSources:
    """The capabilities of the C++/CUDA sources one module builds, reported through its auditor (`aud`)."""

    def __init__(self, aud: Any) -> None:
        self.aud = aud

    # ------------------------------------------------------------------ C/C++ sources
    def read_sources(self) -> None:
        """The C++/CUDA sources the solution builds, read into the same vocabulary (cuda.read_cpp: the
        Python object a C API or pybind11 call reaches, the libc call that does what a Python call does)
        and put through the same sinks.  Each operation is placed where Python runs it: the references
        to the extension's functions (`ext.fx_apply(...)`, `self.ext.run`) through the source's own call
        graph, and the build call for code that runs as the extension loads (PYBIND11_MODULE, static
        initialisers); a parameter of the C++ function is what the Python call passes."""
        from .cuda import read_cpp
        if not self.aud.blobs:
            return
        loads = [n for n in self.aud.mod.of(ast.Call) if isinstance(n, ast.Call)
                 and (self.aud.mod.qn(n.func) or "").split(".")[-1] in _BUILD_CALLS]
        attrs = [n for n in self.aud.mod.of(ast.Attribute) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
                 and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))]
        for b in self.aud.blobs:
            text = getattr(b, "text", "") or ""
            if not text.strip():
                continue
            r = read_cpp(text)
            if r.joins:
                self.aud.cpp_joins = True
            if not r.ops:
                continue
            sites: dict[str, list[ast.AST]] = {}
            for n in attrs:
                fn = r.bound.get(n.attr)
                if fn is not None:
                    sites.setdefault(fn, []).append(n)
            for fn in r.at_load:
                sites.setdefault(fn, []).extend(loads)
            todo = list(sites)
            while todo:      # a function the source calls runs where its caller does
                f = todo.pop()
                for c in r.calls.get(f, ()):
                    new = [n for n in sites.get(f, []) if n not in sites.get(c, [])]
                    if new:
                        sites.setdefault(c, []).extend(new)
                        todo.append(c)
            for op in r.ops:
                py = sites.get(op.func, []) if op.func else loads
                self._cpp_op(b, r, op, _cpp_site(b, op, py, op.func is None or op.func in r.at_load))

    def tensor_flow(self) -> dict[str, tuple[str, Any]]:
        """Python name -> (C++ function, cuda.TensorFlow) for the functions of the solution's C++ sources that
        write a tensor they are handed or return one nothing wrote (what the entry's data flow applies)."""
        from .cuda import read_cpp
        out: dict[str, tuple[str, Any]] = {}
        for b in self.aud.blobs:
            text = getattr(b, "text", "") or ""
            if not text.strip():
                continue
            r = read_cpp(text)
            for py, cfn in r.bound.items():
                tf = r.tensors.get(cfn)
                if tf is not None:
                    out.setdefault(py, (cfn, tf))
        return out

    def read_dispatch(self) -> None:
        """`TORCH_LIBRARY_IMPL(ns, Key, m) { m.impl("op", ...); }` (or a FRAGMENT) in a C++ source the
        solution builds: the kernel registered runs for every caller of ns::op once the extension
        loads, whatever the Python does."""
        from .cuda import strip_c_comments
        loads = [n for n in self.aud.mod.of(ast.Call) if isinstance(n, ast.Call)
                 and (self.aud.mod.qn(n.func) or "").split(".")[-1] in _BUILD_CALLS]
        for b in self.aud.blobs:
            raw = getattr(b, "text", "") or ""
            if "TORCH_LIBRARY" not in raw:
                continue
            text = strip_c_comments(raw)
            for m in re.finditer(r"\bTORCH_LIBRARY_(IMPL|FRAGMENT)\s*\(\s*(\w+)\s*,", text):
                body_at = text.find("{", m.end())
                if body_at < 0:
                    continue
                depth, end = 0, len(text)
                for i in range(body_at, len(text)):
                    depth += {"{": 1, "}": -1}.get(text[i], 0)
                    if depth == 0:
                        end = i
                        break
                for op in re.finditer(r"\.\s*impl\s*\(\s*(?:TORCH_SELECTIVE_NAME\s*\(\s*)?\"([\w:.]+)\"", text[body_at:end]):
                    name = op.group(1).split("::")[-1]
                    f, ln = b.where(m.start())
                    site = CppSite(f, ln, ln, text[m.start():m.start() + 120].replace("\n", " "), b.origin,
                                   tuple(loads), True)
                    self.aud.patching.dispatch_override(m.group(2), m.group(1), name, site,
                                            f"C++ ({b.origin}): TORCH_LIBRARY_{m.group(1)}({m.group(2)}, ...) impl({name!r})")

    def _cpp_values(self, vals: frozenset, site: "CppSite") -> set:
        """A C++ argument's values, a parameter bound to what each Python call passes in its place."""
        out = set()
        for v in vals:
            if v[0] != "param":
                out.add(v)
                continue
            for n in site.calls:
                call = self.aud.mod.parent.get(n)
                if isinstance(call, ast.Call) and call.func is n and v[1] < len(call.args):
                    out |= self.aud.eval(call.args[v[1]], Ctx(self.aud.mod.scope_of(call), None, 0))
        return out

    def _cpp_op(self, b: Any, r: Any, op: Any, site: "CppSite") -> None:
        ctx = Ctx(None, None, 0)
        args = [self._cpp_values(a, site) for a in op.args]
        where = f"C++ ({b.origin}): {op.how}"
        if self.aud._in_main(site):
            return
        if op.kind == "store":
            if "returned" in op.data and op.args:
                self._cpp_input_stash(op, site, where)
            owners = {v for v in args[0] if v[0] in ("ref", "dict")} if args else set()
            for v in owners:
                self.aud.patching.patch(v, op.name, site, where)
            if not owners and (op.name in GRADER_TENSOR_METHODS or op.name in {g.split(".")[-1] for g in GRADER_CALLS}):
                self.aud._cap("CAP-PATCH", site, "patching", op.name, f"{where}: sets {op.name!r} on an object the source "
                          "does not name, through the C API: a name the deck's grader calls", "high", via=where)
            return
        if op.kind == "open":
            paths = [_cpp_paths(a) for a in args]
            for i, ps in enumerate(paths):
                for p in sorted(ps)[:6]:
                    self.aud.files.classify_path(p, op.write, f"{where}", site)
            return
        if op.kind == "thread":
            if op.joined:
                self.aud.legit.append(("CAP-PROCESS", "threading.Thread", site.lineno, f"{where}: a thread joined before it returns"))
                return
            # detached (or a pthread never joined: it runs on) in a function the graded entry calls: the thread
            # reading's decision, as for a Python thread the entry leaves running
            reach = self.aud.entry_reach()
            graded = any(s is not None and s.qualname in reach for s in (self.aud.mod.scope_of(n) for n in site.calls))
            if graded and (op.detached or op.how.startswith("pthread_create") or "kept" in op.data):
                self.aud._cap("UNJOINED-THREAD", site, "process", "std::thread", f"{where}: the C++ function the graded "
                          "entry calls starts a thread it " + ("detaches" if op.detached else "never joins"
                                                               + (" (kept in static storage)" if "kept" in op.data else ""))
                          + " and returns: the work runs after the caller's timer stops and may write the output "
                          "after the check reads it", "high", via=where)
            self.aud._cap("CAP-PROCESS", site, "process", "std::thread", f"{where}: starts a thread that "
                      + ("it detaches" if op.detached else "nothing joins") + ": its work can outlive the call and the "
                      "caller's timer", "medium", via=where)
            return
        if op.kind == "stream":
            if not r.joins:      # joined by its own source: a stream or event wait, a device synchronize
                self.aud.streams.append((site, f"{op.q} (C++)", None, op.entered))
            return
        if op.kind == "memo":
            self._cpp_memo(r, op, site, where)
            return
        if op.kind == "dispatch":
            self._cpp_input_dispatch(r, op, site, where)
            return
        if op.kind == "phase":
            self._cpp_phase(op, site, where)
            return
        q = op.q or ""
        if q.startswith("native."):
            self.aud._cap("CAP-NATIVE", site, "native", q[7:], f"{where}: resolves, patches or watches native code or memory "
                      "(symbols, page protections, another process, CUPTI)", "medium", via=where)
            return
        if q in ("sys.exit", "os._exit", "os.abort"):
            status = {v[1] for v in args[0] if v[0] == "int"} if args else set()
            if q == "os.abort" or (status and 0 not in status):
                self.aud._cap("CAP-PROCESS", site, "process", q, f"{where}: ends the process with a failure "
                          f"({'status ' + ', '.join(map(str, sorted(status))) if status else 'abort'}): the run fails, "
                          "no grade is gained", "low", via=where)
                return
            early = site.at_import or any(self.aud.mod.scope_of(n) is None for n in site.calls)
            self.aud._cap("CAP-PROCESS", site, "process", q, f"{where}: exits the process "
                      + ("with status 0 " if status == {0} else "") + ("as the module loads, before the check can "
                                                                       "print its verdict" if early else
                                                                       "from the solution's code"),
                      "high" if early else "medium", via=where)
            return
        if q == "builtins.exec":
            codes = self.aud.strs(args[0]) if args else set()
            for code in list(codes)[:4]:
                self.aud._exec_string(code, site, ctx)
            if not codes:
                self.aud._cap("CAP-NATIVE", site, "native", q, f"{where}: runs Python code the source builds at run time",
                          "medium", via=where)
            return
        if q == "ctypes.CDLL":
            self.aud.process.native(q, args, site)
            return
        self.aud._ref_call(q, args, {}, CppCall(q, tuple(args)), site, ctx)

    def _cpp_memo(self, r: Any, op: Any, site: "CppSite", where: str) -> None:
        """A function Python calls that returns a result kept in static storage: the result of an
        earlier call handed back (CACHED-OUTPUT-RETURN), or after a count of calls (CALL-COUNTER)."""
        if not any(self._returned_by_entry(n) for n in site.calls
                   if isinstance(n, ast.Attribute) and r.bound.get(n.attr) == op.func):
            return     # a helper's cache (a packed weight, a plan): not what an entry returns
        keys = set(op.data) - {"computes"}
        if "count" in keys:
            self.aud._cap("CALL-COUNTER", site, "state", op.func, f"{where}: {op.func} counts its calls in static storage and "
                      "then returns a result it kept instead of computing one", "high", via=where,
                      data={"function": op.func, "key_kinds": sorted(keys)})
            return
        ident = sorted(keys & {"ptr", "id", "version", "sampled"})     # sampled: a few elements, never the rest
        sev = "high" if ident or not keys else "medium"
        self.aud._cap("CACHED-OUTPUT-RETURN", site, "state", op.func, f"{where}: {op.func} returns {op.how} on a "
                  + ("/".join(ident) + "-keyed " if ident else "keyed " if keys else "") + "hit without computing it "
                  "again: the result of an earlier call, whatever the inputs now hold", sev, via=where,
                  data={"function": op.func, "key_kinds": sorted(keys), "hit_returns_stored": True})

    def _cpp_input_stash(self, op: Any, site: "CppSite", where: str) -> None:
        """A C++ function that sets an attribute of an object a parameter holds and returns that attribute
        (`x.attr("out") = y; ... return x.attr("out");`), where a graded entry passes one of its inputs in that
        position: the answer is kept on the caller's input, as the same code written in Python."""
        idx = {v[1] for v in op.args[0] if v[0] == "param"}
        reach = self.aud.entry_reach()
        for n in site.calls:
            call = self.aud.mod.parent.get(n)
            fi = self.aud.mod.scope_of(n)
            if fi is None or fi.qualname not in reach or not isinstance(call, ast.Call) or call.func is not n:
                continue
            own = set(_entry_params(fi))
            for i in sorted(idx):
                a = call.args[i] if i < len(call.args) else None
                if isinstance(a, ast.Name) and a.id in own:
                    self.aud._cap("CAP-PATCH", site, "patching", f"{fi.qualname}({a.id}).{op.name}",
                                  f"{where}: keeps {op.name!r} as an attribute of {fi.qualname}'s input {a.id!r}, an "
                                  "object the caller owns, and returns it: the answer comes back with the same object "
                                  "whatever its values are by then (the benchmark passes the same inputs to every call)",
                                  "medium", via=where, data={"entry": fi.qualname, "input": a.id, "attribute": op.name})
                    return

    def _cpp_phase(self, op: Any, site: "CppSite", where: str) -> None:
        """A C++ test on what the process tells (the global RNG's seed, a module in sys.modules) against the
        grader's identity (a seed the decks draw their inputs with, a module of the grader's): a branch in a
        function the graded entry's path calls, or the answer of a function whose Python call an entry's
        branch tests.  The check and the benchmark take different paths (phase detection), as the same test
        written in Python (cap_entry's phase test)."""
        reads, consts = op.data
        ids = self.aud.entries.phase_identities(reads, consts)
        if not ids:
            return
        reach = self.aud.entry_reach()
        graded = []
        for n in site.calls:
            call = self.aud.mod.parent.get(n)
            fi = self.aud.mod.scope_of(n)
            if fi is None or fi.qualname not in reach or not isinstance(call, ast.Call) or call.func is not n:
                continue
            if not op.how.startswith("return"):
                graded.append(n)
                continue
            p = self.aud.mod.parent.get(call)      # the answer tested by a branch (`if ext.f():`, `not ext.f()`, `and`)
            while isinstance(p, (ast.UnaryOp, ast.BoolOp, ast.Compare)):
                p = self.aud.mod.parent.get(p)
            if isinstance(p, (ast.If, ast.IfExp, ast.While)) and any(x is call for x in walk_expr(p.test)):
                graded.append(n)
        if not graded:
            return
        self.aud._cap("CAP-INTROSPECTION", site, "introspection", f"phase test: {reads[0]}",
                      f"{where}: {'returns' if op.how.startswith('return') else 'branches on'} {', '.join(reads)} "
                      f"compared with {', '.join(map(repr, ids[:2]))}" + (", and the graded entry branches on the answer"
                                                                       if op.how.startswith("return") else "")
                      + ": the check and the benchmark take different paths (phase detection)", "high", via=where,
                      data={"reads": list(reads), "identities": [str(i) for i in ids[:4]]})

    def _cpp_input_dispatch(self, r: Any, op: Any, site: "CppSite", where: str) -> None:
        """A C++ function an entry's path calls with its inputs that branches on a reduction of them and
        returns from that branch: inputs of another magnitude take another path (INPUT-DISPATCH, as the
        same branch written in Python)."""
        idx = {v[1] for v in op.args[0] if v[0] == "param"} if op.args else set()
        inputs: set[str] = set()
        for n in site.calls:
            call = self.aud.mod.parent.get(n)
            fi = self.aud.mod.scope_of(call) if isinstance(call, ast.Call) and call.func is n else None
            if fi is None or fi.qualname not in self.aud.entry_reach():
                continue
            own = set(_entry_params(fi))
            for i in idx:
                if i < len(call.args):
                    inputs |= {x.id for x in ast.walk(call.args[i]) if isinstance(x, ast.Name) and x.id in own}
        if not inputs:
            return      # a helper's own tensors (weights, a workspace), not what the caller passed
        stats = set(op.data)
        self.aud._cap("INPUT-DISPATCH", site, "dispatch", op.func or "?",
                  f"{where}: {op.func} branches on {'/'.join(sorted(stats))} of the caller's "
                  f"{', '.join(sorted(inputs))} and returns from that branch: inputs of another magnitude than "
                  "the checker's take another path", "high",
                  data={"function": op.func, "inputs": sorted(inputs), "reductions": sorted(stats), "arms_differ": True})

    def _returned_by_entry(self, ref: ast.AST) -> bool:
        """`ref` is called on an entry's path and the call's value is what that function returns (directly,
        or through a local it returns)."""
        call = self.aud.mod.parent.get(ref)
        if not isinstance(call, ast.Call) or call.func is not ref:
            return False
        fi = self.aud.mod.scope_of(call)
        if fi is None or fi.qualname not in self.aud.entry_reach():
            return False
        st = self.aud.mod.parent.get(call)
        if isinstance(st, ast.Return):
            return True
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            name = st.targets[0].id
            return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Name) and n.value.id == name
                       for n in fi.nodes)
        return False
