"""Process-wide writes (the capability audit's CAP-PATCH family): attributes of modules and classes the
solution did not author set or deleted, the grader's tables changed in place, environment variables,
sys.modules walks, kernels registered for torch's operators, torch modes entered and never left, and
how severe each is against what the deck's check, benchmark and reference call (`reference_calls`,
read from the bundled reference modules).  `Patching` holds the auditor and reports through it."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from forensics.problems import CATALOGUE

from . import problems as P
from .evaluation import CUDA_HANDLE, GRADER_ROOTS
from .model import REF_ENTRY, REF_HELPERS_OK
from .values import Ctx, Val, _src


# ----------------------------------------------------------------------------------------- facts
#: modules whose attributes a solution patches at the grader's expense (the judge's side of the
#: process).  A root not listed (a module of its own, a sidecar) is not "someone else's" code.
FOREIGN_ROOTS = frozenset({
    "torch", "triton", "numpy", "time", "builtins", "sys", "os", "gc", "statistics", "math", "random",
    "functools", "importlib", "inspect", "ctypes", "threading", "operator", "io", "json", "pathlib",
    "subprocess", "signal", "atexit", "traceback", "warnings", "logging", "copy", "collections", "types",
    "reference", "check", "benchmark", "shapes", "src", "eval", "__main__", "cupy", "cuda", "nvidia",
    "yaml", "pickle", "contextlib", "itertools", "weakref", "abc", "typing", "dataclasses",
    "re", "hypothesis", "shutil", "tempfile", "glob", "platform",
})
#: configuration namespaces: assigning them is configuration, not patching
CONFIG_PREFIXES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config", "torch.backends",
                   "torch._C._jit", "triton.knobs", "triton.config", "os.environ", "torch.utils.cpp_extension",
                   "numpy.seterr", "torch._logging", "logging.", "warnings.filters", "sys.dont_write_bytecode",
                   "sys.setrecursionlimit", "torch.set_printoptions", "torch._dynamo.reset")
#: what the decks' check.py, benchmark.py and their src/ call in the solution's process (read from
#: the decks' files): patching one of these changes the grade for certain
GRADER_CALLS = frozenset({
    "torch.allclose", "torch.isclose", "torch.equal", "torch.testing.assert_close", "torch.testing.assert_allclose",
    "torch.isfinite", "torch.isinf", "torch.isnan", "torch.is_floating_point", "torch.nn.functional.cosine_similarity",
    "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time", "torch.cuda.Event.synchronize",
    "torch.cuda.Event.query", "torch.cuda.synchronize", "torch.cuda.current_stream", "torch.cuda.Stream",
    "torch.cuda.Stream.synchronize", "torch.cuda.Stream.wait_stream", "torch.cuda.Stream.record_event",
    "torch.cuda.empty_cache", "torch.cuda.max_memory_allocated", "torch.cuda.reset_peak_memory_stats",
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns",
    "time.process_time", "statistics.median", "statistics.mean", "math.exp", "math.log",
    "torch.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.random.manual_seed",
    "torch.seed", "torch.Generator", "torch.randn", "torch.rand", "torch.randint", "torch.randn_like",
    "torch.rand_like", "torch.randperm", "torch.normal", "torch.no_grad", "torch.inference_mode", "torch.empty",
    "torch.zeros", "torch.zeros_like", "torch.where", "torch.gather", "torch.unique", "torch.tensor", "torch.arange",
    "torch.Tensor", "torch.nn.Module", "torch.nn.Module.load_state_dict", "torch.nn.Module.state_dict",
    "torch.nn.Module.__call__", "torch.nn.Module.to", "torch.nn.Module.eval",
    "builtins.print", "builtins.open", "builtins.len", "builtins.abs", "builtins.max", "builtins.min",
    "builtins.isinstance", "builtins.float", "builtins.sum", "builtins.all", "builtins.any", "builtins.__import__",
    "sys.exit", "sys.stdout", "sys.stderr", "sys.argv", "os._exit",
    # what check.py and benchmark.py call after importing the solution besides comparing and timing:
    # the problem file and the solution's source read and scanned for forbidden operations, the
    # benchmark's formula evaluation, the framework label written
    "pathlib.Path.read_text", "pathlib.Path.exists", "pathlib.Path.write_text", "yaml.safe_load", "re.search",
    "re.escape", "builtins.eval", "torch.unravel_index", "torch.compile", "torch.device", "torch.cuda.is_available",
})

#: methods that change a container in place
_MUTATORS = frozenset({"clear", "update", "pop", "popitem", "setdefault", "__setitem__", "__delitem__", "append",
                       "extend", "insert", "remove", "sort", "reverse", "add", "discard", "__iadd__", "__ior__"})
#: torch's own operator namespaces: an override there changes what every caller of the op computes
_TORCH_NAMESPACES = frozenset({"aten", "prim", "prims", "quantized", "sparse", "_c10d_functional", "c10d", "profiler"})
#: the classes of torch's function and dispatch modes (a mode entered and never left sees every call)
_MODE_BASES = ("TorchFunctionMode", "TorchDispatchMode", "BaseTorchFunctionMode")
_MODE_PUSH = frozenset({"torch._C._push_on_torch_function_stack", "torch._C._push_on_torch_dispatch_stack",
                        "torch.overrides._push_mode", "torch.utils._python_dispatch._push_mode",
                        "torch._C._set_torch_function_mode", "torch._C._enter_dual_level"})
#: registrars of a hook on every nn.Module of the process (torch.nn.modules.module)
_GLOBAL_HOOKS = ("register_module_forward_hook", "register_module_forward_pre_hook", "register_module_full_backward_hook",
                 "register_module_full_backward_pre_hook", "register_module_backward_hook",
                 "register_module_buffer_registration_hook", "register_module_module_registration_hook",
                 "register_module_parameter_registration_hook")

#: Tensor methods the decks' checks call on outputs and inputs (patching torch.Tensor.<one> is certain)
GRADER_TENSOR_METHODS = frozenset({
    "float", "double", "abs", "max", "min", "sum", "sub", "add", "mul", "div", "clone", "copy_", "fill_", "zero_",
    "mul_", "to", "item", "data_ptr", "numel", "stride", "cpu", "cuda", "detach", "normal_", "isfinite", "all", "any",
    "eq", "ne", "lt", "le", "gt", "ge", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__sub__",
    "__abs__", "__add__", "__mul__", "__truediv__", "__matmul__", "allclose", "equal", "flatten", "view", "reshape",
    "contiguous", "storage_offset", "untyped_storage", "tolist", "numpy", "size", "shape", "dtype", "device",
    "__getitem__", "__setitem__", "__bool__", "__float__", "__len__", "argmax", "topk", "sort", "gather",
})


@lru_cache(maxsize=1)
def _grader_ops() -> frozenset[str]:
    """Operator names the decks' check calls (torch functions and Tensor methods of GRADER_CALLS)."""
    return frozenset({q.rsplit(".", 1)[-1] for q in GRADER_CALLS if q.startswith("torch.") and q.count(".") == 1}
                     | GRADER_TENSOR_METHODS)


@lru_cache(maxsize=64)
def reference_calls(problem: str | None) -> frozenset[str]:
    """The torch functions and Tensor methods the bundled deck-style reference of `problem` calls:
    patching one changes what the checker compares against.  Read from kernels/ref by AST (the
    catalogue names the reference file); never imported here."""
    if not problem:
        return frozenset()
    files = _reference_files().get(problem, ())
    out: set[str] = set()
    for f in files:
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        aliases: dict[str, str] = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(n, ast.ImportFrom) and n.module:
                for a in n.names:
                    aliases[a.asname or a.name] = f"{n.module}.{a.name}"
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                q = _qn_plain(n.func, aliases)
                if q and q.startswith("torch."):
                    out.add(q)
                elif isinstance(n.func, ast.Attribute):
                    out.add(f"torch.Tensor.{n.func.attr}")
            elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                out.add("torch.Tensor.__matmul__")
                out.add("torch.matmul")
    return frozenset(out)


def _qn_plain(e: ast.AST, aliases: dict[str, str]) -> str | None:
    if isinstance(e, ast.Name):
        return aliases.get(e.id, e.id)
    if isinstance(e, ast.Attribute):
        b = _qn_plain(e.value, aliases)
        return f"{b}.{e.attr}" if b else None
    return None


@lru_cache(maxsize=1)
def _reference_files() -> dict[str, tuple[Path, ...]]:
    """problem id -> its reference file under kernels/ref (the catalogue's `ref_file`), located
    through the package `forensics.kernels` (its folder only: nothing of it that needs torch is
    imported; installed, or kernels/ in a checkout)."""
    import forensics.kernels
    root = Path(list(forensics.kernels.__path__)[0]) / "ref"
    return {p.id: (root / p.ref_file,) for p in CATALOGUE if p.ref_file}


class Patching:
    """Patches and other process-wide writes of one module, reported through its auditor (`aud`)."""

    def __init__(self, aud: Any) -> None:
        self.aud = aud

    # ------------------------------------------------------------------ what the process shares with the grader
    def process_wide(self, q: str, args: list[set], kws: dict[str, set], node: ast.AST, at: ast.AST) -> bool:
        """Calls that change or watch what the whole process shares with the grader, whatever the
        form: the environment the check reads after importing the solution, the grader's own tables,
        every loaded module, the dispatcher's kernels for torch's operators, a function or dispatch
        mode, a hook on every nn.Module, the running script's module.  True when `q` was one."""
        head, _, last = q.rpartition(".")
        if q in ("os.environ.update", "os.environ.setdefault", "os.environ.__setitem__", "os.putenv", "os.environ.pop",
                 "os.unsetenv", "os.environ.__delitem__"):
            if q == "os.environ.update":
                keys = self.aud._dict_keys(node, args, kws) if isinstance(node, ast.Call) else set(kws)
            else:
                keys = self.aud.strs(args[0]) if args else set()
            self.env_write(keys, at, f"{q}()")
            return True
        if q in ("sys.modules.values", "sys.modules.items", "sys.modules.keys", "sys.modules.copy", "sys.modules.__iter__"):
            self.walks_modules(at, f"{q}()")
            return True
        if q in ("importlib.import_module", "builtins.__import__") and args and "__main__" in self.aud.strs(args[0]):
            self.running_script(at, f"{q}('__main__')")
            return True
        if last in _MUTATORS and head.count(".") >= 1 and head.split(".")[0] in GRADER_ROOTS:
            self.mutate(head, at, f"{q}()")
            return True
        if q.startswith("torch.library.") and last in ("impl", "register_kernel", "register_autograd", "register_fake",
                                                          "impl_abstract", "register_torch_dispatch") and args:
            libs = [v for v in args[0] if v[0] == "library"]
            if libs:       # the older spelling: impl(lib, name, key)
                for lib in libs:
                    for op in (self.aud.strs(args[1]) if len(args) > 1 else set()) or {"*"}:
                        self.dispatch_override(lib[1], lib[2], op, at, f"{q}({op!r})")
            else:
                for qual in self.aud.strs(args[0]) or {"?::*"}:
                    ns, _, op = qual.partition("::")
                    self.dispatch_override(ns, "IMPL", op or "*", at, f"{q}({qual!r})")
            return True
        if q in _MODE_PUSH:
            self.aud._cap("CAP-PATCH", at, "patching", "torch mode stack", f"calls {q}(): pushes a torch function or "
                      "dispatch mode for the rest of the process, so every later torch call, the check's comparison "
                      "and the reference's operators among them, goes through the solution's handler", "high")
            return True
        if last in _GLOBAL_HOOKS and q.startswith("torch.nn"):
            self.aud._cap("CAP-INTROSPECTION", at, "introspection", q, f"calls {q}(): a hook on every nn.Module of the "
                      "process, which sees the inputs and outputs of the grader's reference model", "medium")
            return True
        return False

    def reference_call(self, q: str, node: Any, at: Any) -> None:
        """The grader's reference module's model or entry point called from the solution's code, however
        the module was reached (sys.modules, importlib, a helper, C++): the reference does the work.  The
        plain spelling (`reference.Model(...)` after `import reference`) is REFERENCE-CALL's own reading."""
        attr = q.split(".")[1] if q.count(".") >= 1 else ""
        if not attr or attr in REF_HELPERS_OK or attr.isupper():
            return
        if isinstance(node, ast.Call) and (self.aud.mod.qn(node.func) or "").startswith("reference."):
            return
        entry = attr in REF_ENTRY or attr.startswith("Model")
        self.aud._cap("REFERENCE-CALL", at, "reference", q, f"calls {q} (the grader's reference module, reached at run "
                  "time)" + ("" if entry else ": a helper of the reference computes part of the work"),
                  "high" if entry else "medium", data={"call": q, "entry": entry})

    def env_write(self, keys: Iterable[str], at: ast.AST, how: str) -> None:
        """An environment variable set in the process: one the deck's check or benchmark reads (after the
        solution is imported) changes what the grader runs; the solution's own build variables are its own."""
        for k in sorted(keys):
            role = P.env_role(k) if k != "*" else "own"
            if role == "own":
                continue
            grader = role == "grader"
            self.aud._cap("CAP-PATCH", at, "patching", f"os.environ[{k!r}]",
                      f"{how}: sets {k}, which " + ("the deck's check or benchmark reads after importing the solution: "
                                                    "it changes what the grader runs" if grader else
                                                    "the benchmark's runner sets: the solution overrides it")
                      , "critical" if grader else "high", via=how)

    def walks_modules(self, at: ast.AST, how: str) -> None:
        self.aud._cap("CAP-INTROSPECTION", at, "introspection", "sys.modules[*]", f"{how}: walks every module loaded in the "
                  "process (the running script's and the grader's among them)", "medium")

    def running_script(self, at: ast.AST, how: str) -> None:
        self.aud._cap("CAP-INTROSPECTION", at, "introspection", "__main__", f"{how}: the running script's module (the deck's "
                  "check or benchmark): its globals and its file name", "medium")

    def mutate(self, path: str, at: ast.AST, how: str) -> None:
        """The grader's or the reference's data changed in place (a table's entry set, a list cleared)."""
        sev, why = self._patch_severity(path, "*", path)
        self.aud._cap("CAP-PATCH", at, "patching", path, f"{how}: changes {path} in place ({why})", sev, via=how)

    def _own_namespaces(self) -> set[str]:
        """Operator namespaces the solution defines itself (Library(ns, "DEF"), torch.library.define /
        custom_op / triton_op of "ns::name", TORCH_LIBRARY(ns, m) in a C++ source)."""
        got = self.__dict__.get("_own_ns")
        if got is not None:
            return got
        got = set()
        for c in self.aud.mod.of(ast.Call):
            ctx = Ctx(self.aud.mod.scope_of(c), None, 0)
            for v in self.aud.eval(c.func, ctx):
                if v[0] != "ref" or not c.args:
                    continue
                first = self.aud.strs(self.aud.eval(c.args[0], ctx))
                if v[1] in ("torch.library.Library", "torch.library._scoped_library"):
                    kinds = self.aud.strs(self.aud.eval(c.args[1], ctx)) if len(c.args) > 1 else set()
                    if "DEF" in kinds:
                        got |= first
                elif v[1] in ("torch.library.define", "torch.library.custom_op", "torch.library.triton_op"):
                    got |= {s.split("::")[0] for s in first if "::" in s}
        for b in self.aud.blobs:
            got |= set(re.findall(r"\bTORCH_LIBRARY\s*\(\s*(\w+)\s*,", getattr(b, "text", "") or ""))
        self.__dict__["_own_ns"] = got
        return got

    def dispatch_override(self, ns: str, kind: str, op: str, at: Any, how: str) -> None:
        """A kernel registered for an operator of a namespace the solution did not define (torch.library
        IMPL/FRAGMENT, TORCH_LIBRARY_IMPL in C++): every caller of the operator in the process runs it."""
        if ns in self._own_namespaces() or kind == "DEF":
            return
        name = op.split(".")[0]
        torch_op = ns in _TORCH_NAMESPACES or ns in ("?", "*")
        grader = torch_op and (name in _grader_ops() or f"torch.{name}" in reference_calls(self.aud.problem)
                               or f"torch.Tensor.{name}" in reference_calls(self.aud.problem))
        self.aud._cap("CAP-PATCH", at, "patching", f"{ns}::{op}",
                  f"{how}: registers a kernel for {ns}::{op}, an operator the solution did not define: every caller "
                  "of it in the process runs the solution's code instead"
                  + (" (the deck's check or the reference calls it)" if grader else ""),
                  "high" if grader else "medium", via=how)

    def mode_entered(self, call: ast.Call, ctx: Ctx, site: ast.AST | None) -> None:
        """`mode.__enter__()` called by hand on a torch function or dispatch mode of the solution's, with no
        `__exit__` of it anywhere: the mode stays on for the rest of the process."""
        recv = call.func.value
        classes = {v[1] for v in self.aud.eval(recv, ctx) if v[0] in ("self", "class")}
        if not any(self._is_mode_class(c, set()) for c in classes):
            return
        text = _src(recv)
        if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "__exit__"
               and _src(c.func.value) == text for c in self.aud.mod.of(ast.Call)):
            return
        self.aud._cap("CAP-PATCH", site or call, "patching", "torch mode stack",
                  f"enters `{text[:40]}` ({', '.join(sorted(classes))}, a torch function or dispatch mode) by hand and "
                  "never leaves it: every later torch call in the process, the check's comparison and the "
                  "reference's operators among them, goes through the solution's handler", "high")

    def _is_mode_class(self, name: str, seen: set[str]) -> bool:
        if name in seen or len(seen) > 8:
            return False
        seen.add(name)
        nodes = [c for c in self.aud.mod.of(ast.ClassDef) if isinstance(c, ast.ClassDef) and c.name == name]
        if name in self.aud.exec_classes:
            nodes.append(self.aud.exec_classes[name])
        for cdef in nodes:
            ctx = Ctx(self.aud.mod.scope_of(cdef), None, 0)
            for b in cdef.bases:
                for v in self.aud.eval(b, ctx) or ({("ref", self.aud.mod.qn(b) or "")} if self.aud.mod.qn(b) else set()):
                    if v[0] == "ref" and v[1].startswith("torch.") and v[1].endswith(_MODE_BASES):
                        return True
                    if v[0] == "class" and self._is_mode_class(v[1], seen):
                        return True
        return False

    def patch(self, v: Val, name: str, at: ast.AST, how: str) -> None:
        if v[0] == "anymod":
            self.aud._cap("CAP-PATCH", at, "patching", f"sys.modules[*].{name}",
                      f"{how}: replaces {name} in every loaded module it reaches by walking sys.modules (the running "
                      "script's and the grader's modules among them)", "critical", via=how)
            return
        if v[0] == "dict":
            v = ("ref", v[1])
        if v[0] != "ref":
            return      # the solution's own class, instance or function: its own state
        path = v[1]
        if path.startswith(CUDA_HANDLE):
            return      # `_rt.cuLaunchKernel.argtypes = [...]`: declaring a foreign function's signature
        root = path.split(".")[0]
        if root == "<module>" or root not in FOREIGN_ROOTS:
            return
        target = f"{path}.{name}"
        if target.startswith(CONFIG_PREFIXES) or path.startswith(CONFIG_PREFIXES):
            return
        sev, why = self._patch_severity(path, name, target)
        self.aud._cap("CAP-PATCH", at, "patching", target, f"{how}: replaces {target} ({why})", sev, via=how)

    def _patch_severity(self, path: str, name: str, target: str) -> tuple[str, str]:
        root = path.split(".")[0]
        if root in ("reference", "check", "benchmark", "shapes", "src", "eval", "__main__"):
            return "critical", "the grader's or the reference's own module"
        if target in GRADER_CALLS or path in GRADER_CALLS and path != "torch.Tensor":
            return "high", "the deck's check or benchmark calls it"
        if path in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase") and (name in GRADER_TENSOR_METHODS or name == "*"):
            return "high", "the deck's check calls this tensor method on every output"
        if target in reference_calls(self.aud.problem):
            return "high", "the problem's reference computes with it"
        if root in ("time", "builtins", "statistics"):
            return "high", "the grader's clock and builtins live there"
        if name == "*" and root in ("torch", "sys", "time", "builtins"):
            return "high", "an attribute chosen at run time on the grader's side of the process"
        return "medium", "not a call the deck's grader is known to make; still someone else's code"

    def module_table(self, key: str, at: ast.AST, how: str) -> None:
        root = key.split(".")[0]
        if key != "*" and root not in FOREIGN_ROOTS:
            return    # registering a module of its own (a sidecar) under its name
        sev = "critical" if root in ("reference", "check", "benchmark", "shapes", "src", "eval", "__main__") else \
            "high" if root in ("torch", "time", "builtins", "statistics", "numpy", "triton") or key == "*" else "medium"
        self.aud._cap("CAP-PATCH", at, "patching", f"sys.modules[{key!r}]",
                  f"{how}: replaces the module {key!r} for every later import in the process", sev, via=how)
