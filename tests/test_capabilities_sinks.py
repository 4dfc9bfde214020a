"""Sinks decided by what the code does, in forms the bench rewriter does not produce.

Each section holds a mechanism written in several forms of our own (a path built through the
working directory, a helper, f-strings, pathlib; a `__main__` test moved into a function; ...) that
must all give one decision, and honest look-alikes that must stay unreported.
"""

from __future__ import annotations

import textwrap

import pytest

from forensics.analyze.static import lint_source
from lint_util import deciding_rules, worst_rules as rules

HEAD = '''
import functools
import os
import sys
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _dot16(a, b, c, K: tl.constexpr):
    r = tl.arange(0, 16)
    acc = tl.dot(tl.load(a + r[:, None] * K + r[None, :]), tl.load(b + r[:, None] * K + r[None, :]))
    tl.store(c + r[:, None] * 16 + r[None, :], acc)


def _launch(x, w):
    out = torch.empty(16, 16, device=x.device)
    _dot16[(1,)](x, w, out, K=16)
    return out
'''

ENTRY = '''

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(16, 16))

    def forward(self, x):
{fwd}
'''

#: the rules a look-alike must not raise (medium and above)
DECIDING = ("CAP-", "OUTPUT-UNWRITTEN", "INPUT-WRITE", "SYSTEM-EXIT", "UNJOINED-STREAM", "GRADER-")


def sol(top: str = "", fwd: str = "return _launch(x, self.w)", tail: str = "") -> str:
    return (HEAD + textwrap.dedent(top) + ENTRY.format(fwd=textwrap.indent(textwrap.dedent(fwd).strip("\n"), " " * 8))
            + textwrap.dedent(tail))


def deciding(src: str) -> dict[str, str]:
    return deciding_rules(src, DECIDING)


# ------------------------------------------------------------------ code import never runs
EXIT_NOT_ON_IMPORT = {
    # the module's own self-test, as written at module level
    "module_main": sol(tail="\nif __name__ == '__main__':\n    sys.exit(0)\n"),
    # the same test moved into a function the module calls at import, a nested def, a method, the entry
    "in_function": sol("def _selftest():\n    if __name__ == '__main__':\n        os._exit(0)\n\n_selftest()\n"),
    "in_nested_def": sol("def _outer():\n    def _inner():\n        if __name__ == '__main__':\n            sys.exit(0)\n"
                         "    return _inner\n\n_outer()()\n"),
    "in_method": sol("class _Runner:\n    def go(self):\n        if __name__ == '__main__':\n            sys.exit(0)\n\n"
                     "_Runner().go()\n"),
    "in_entry": sol(fwd="if __name__ == '__main__':\n    sys.exit(0)\nreturn _launch(x, self.w)"),
    # the comparison written the other way round, or as membership
    "reversed_compare": sol(tail="\nif '__main__' == __name__:\n    os._exit(0)\n"),
    "membership": sol(tail="\nif __name__ in ('__main__',):\n    sys.exit(0)\n"),
    # the classic `main()` that exits, called only from the guard, and a helper only main calls
    "main_function": sol(tail="\ndef _check():\n    sys.exit(0)\n\ndef main():\n    _check()\n    sys.exit(1)\n\n"
                              "if __name__ == '__main__':\n    main()\n"),
    # exec of a constant string in the module's own globals: its guard is the module's
    "exec_in_module": sol("exec(\"if __name__ == '__main__':\\n    sys.exit(0)\\n\")\n"),
    # a decorator that copies the wrapped function's __name__ binds no module name
    "decorator_copies_name": sol("def _deco(f):\n    def w(*a):\n        return f(*a)\n    w.__name__ = f.__name__\n"
                                 "    return w\n\n", tail="\nif __name__ == '__main__':\n    sys.exit(0)\n"),
}


@pytest.mark.parametrize("form", sorted(EXIT_NOT_ON_IMPORT))
def test_an_exit_import_never_reaches_is_not_reported(form):
    got = deciding(EXIT_NOT_ON_IMPORT[form])
    assert not got, (form, got)


EXIT_ON_IMPORT = {
    # the else arm of the guard is what import runs
    "else_arm": sol(tail="\nif __name__ == '__main__':\n    pass\nelse:\n    os._exit(0)\n"),
    "not_main": sol(tail="\nif __name__ != '__main__':\n    os._exit(0)\n"),
    # the module makes its own guard true
    "name_rebound": sol(tail="\n__name__ = '__main__'\nif __name__ == '__main__':\n    os._exit(0)\n"),
    "name_via_globals": sol(tail="\nglobals()['__name__'] = '__main__'\nif __name__ == '__main__':\n    sys.exit(0)\n"),
}


@pytest.mark.parametrize("form", sorted(EXIT_ON_IMPORT))
def test_an_exit_import_reaches_is_reported_at_import(form):
    got = rules(EXIT_ON_IMPORT[form])
    assert got.get("SYSTEM-EXIT") == "high", (form, got)


def test_a_helper_called_at_import_and_from_the_guard_is_reached():
    got = rules(sol(tail="\ndef _stop():\n    os._exit(0)\n\n_stop()\nif __name__ == '__main__':\n    _stop()\n"))
    assert got.get("SYSTEM-EXIT") == "medium" and got.get("CAP-PROCESS") == "medium", got   # inside _stop


def test_exec_given_a_main_namespace_runs_its_guard():
    src = sol("exec(\"if __name__ == '__main__':\\n    os._exit(0)\\n\", {'__name__': '__main__', 'os': os})\n")
    assert rules(src).get("CAP-PROCESS") == "medium", rules(src)


def test_an_input_write_inside_a_guard_the_entry_never_takes_is_not_one():
    src = sol(fwd="if __name__ == '__main__':\n    x.zero_()\nreturn _launch(x, self.w)")
    assert "INPUT-WRITE" not in rules(src)
    src = sol(fwd="if __name__ != '__main__':\n    x.zero_()\nreturn _launch(x, self.w)")
    assert rules(src).get("INPUT-WRITE") == "high"


# ------------------------------------------------------------------ a file the interpreter or an import executes
EXECUTED_WRITES = {
    "join_getcwd": sol("with open(os.path.join(os.getcwd(), 'sitecustomize.py'), 'w') as fh:\n    fh.write('import torch')\n"),
    "dirname_file": sol(fwd="open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'usercustomize.py'), 'w')"
                            ".write('x')\nreturn _launch(x, self.w)"),
    "pathlib_cwd": sol("import pathlib\n(pathlib.Path.cwd() / 'sitecustomize.py').write_text('import torch')\n"),
    "pathlib_parent_package": sol("from pathlib import Path\n_P = Path(__file__).resolve().parent / 'torch'\n"
                                  "_P.joinpath('__init__.py').write_text('raise SystemExit')\n"),
    "sys_path_entry": sol("open(sys.path[0] + '/torch.py', 'w').write('import sys')\n"),
    "fstring": sol("_d = os.getcwd()\nopen(f'{_d}/fx_hook.pth', 'w').write('import fx_hook')\n"),
    "percent_format": sol("open('%s/usercustomize.py' % os.getcwd(), 'w').write('x')\n"),
    "str_join": sol("open('/'.join([os.getcwd(), 'sitecustomize.py']), 'w').write('x')\n"),
    # the folder handed to a helper as a parameter, and the helper's own parameter unknown
    "helper_param": sol("def _put(folder, text):\n    with open(os.path.join(folder, 'sitecustomize.py'), 'w') as f:\n"
                        "        f.write(text)\n\n_put(os.getcwd(), 'import torch')\n"),
    "os_open_flags_site": sol("import site\n_fd = os.open(os.path.join(site.getusersitepackages(), 'fx.pth'), "
                              "os.O_WRONLY | os.O_CREAT)\n"),
    "copy_into_cwd": sol("import shutil\nshutil.copy('/tmp/fx_mod.py', os.path.join(os.getcwd(), 'reference.py'))\n"),
    "rename_into_cwd": sol("os.replace('/tmp/fx.tmp', os.path.join(os.getcwd(), 'fx.pth'))\n"),
    "bound_method_alias": sol("import pathlib\n_w = (pathlib.Path.cwd() / 'sitecustomize.py').write_text\n_w('x')\n"),
    "str_of_path": sol("import pathlib\nopen(str(pathlib.Path.cwd() / 'torch.py'), 'w').write('x')\n"),
    "partial_opener": sol("_w = functools.partial(open, mode='w')\n_w(os.path.join(os.getcwd(), 'sitecustomize.py')).write('x')\n"),
}


@pytest.mark.parametrize("form", sorted(EXECUTED_WRITES))
def test_writing_a_file_the_interpreter_executes_decides_whatever_builds_its_path(form):
    got = rules(EXECUTED_WRITES[form])
    assert got.get("CAP-FILES") == "critical", (form, got)


HONEST_WRITES = {
    # a tuning cache: in a scratch folder, in ~/.cache, beside the solution, in the working folder
    "tune_tmp": sol("import json, tempfile\n_C = os.path.join(tempfile.gettempdir(), 'fx_tune')\n"
                    "os.makedirs(_C, exist_ok=True)\njson.dump({'BLOCK': 64}, open(os.path.join(_C, 'gemm.json'), 'w'))\n"),
    "tune_mkdtemp": sol("import json, tempfile\njson.dump({}, open(os.path.join(tempfile.mkdtemp(), 'tune.json'), 'w'))\n"),
    "tune_home_cache": sol("import json\n_C = os.path.join(os.path.expanduser('~'), '.cache', 'fx')\n"
                           "json.dump({}, open(os.path.join(_C, 'tune.json'), 'w'))\n"),
    "tune_beside": sol("import json\njson.dump({}, open(os.path.join(os.path.dirname(__file__), 'tune.json'), 'w'))\n"),
    "tune_pathlib_cwd": sol("import pathlib\n(pathlib.Path.cwd() / 'fx_tune.json').write_text('{}')\n"),
    # a generated kernel module of its own beside it, a binary checkpoint named .pth
    "own_module": sol("open(os.path.join(os.path.dirname(__file__), 'fx_kernels_gen.py'), 'w').write('K = 1')\n"),
    "checkpoint_pth_const": sol("torch.save({'w': torch.zeros(1)}, 'fx_weights.pth')\n"),
    "checkpoint_pth": sol("torch.save({'w': torch.zeros(1)}, os.path.join(os.getcwd(), 'fx_weights.pth'))\n"),
    # a library's folder read relative to an unknown root (torch's own install): a read, not a write
    "library_relative_read": sol("import glob\n_T = os.path.dirname(torch.__file__)\n"
                                 "_L = glob.glob(os.path.join(_T, '..', 'nvidia', 'lib', 'libcublas.so*'))\n"),
    # sitecustomize only read, never written
    "read_only": sol("_has = os.path.exists(os.path.join(os.getcwd(), 'sitecustomize.py'))\n"),
}


@pytest.mark.parametrize("form", sorted(HONEST_WRITES))
def test_a_solution_s_own_files_are_not_executed_writes(form):
    got = deciding(HONEST_WRITES[form])
    assert not got, (form, got)


def test_the_replay_counts_the_same_writes_as_evidence(tmp_path):
    """The runtime side: the child's audit hook gives absolute paths (childaudit makes them so); a write
    of a file the next interpreter executes is grader access, high, wherever its folder came from."""
    from types import SimpleNamespace

    from forensics.replay.capabilities import Places, classify

    dirs = {k: tmp_path / k for k in ("sol", "ref", "harness", "io", "home", "cache")}
    for d in dirs.values():
        d.mkdir()
    site = tmp_path / "py" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    scratch = SimpleNamespace(root=tmp_path, sol_dir=dirs["sol"], ref_dir=dirs["ref"], harness=dirs["harness"],
                              io=dirs["io"], home=dirs["home"], cache=dirs["cache"])
    places = Places(scratch, [str(tmp_path / "py"), str(site)])

    def judged(path: str, mode: str = "w"):
        return classify({"ev": "open", "args": [path, mode, 0]}, places, set())

    for p in (dirs["sol"] / "sitecustomize.py", dirs["sol"] / "torch.py", dirs["sol"] / "torch" / "__init__.py",
              dirs["home"] / ".local" / "lib" / "python3.11" / "site-packages" / "fx.pth", site / "usercustomize.py",
              tmp_path / "elsewhere" / "sitecustomize.py"):
        got = judged(str(p))
        assert got is not None and got[:2] == ("grader-access", "high"), (p, got)
    for p in (dirs["sol"] / "fx_tune.json", tmp_path / "tmpdir" / "gemm.json", dirs["cache"] / "fx" / "torch.py"):
        got = judged(str(p))
        assert got is None or got[1] != "high", (p, got)
    assert judged(str(dirs["sol"] / "sitecustomize.py"), "r") is None       # read, not written


# ------------------------------------------------------------------ C++ functions and the entry's inputs and outputs
def cpp_sol(cpp: str, fwd: str, holder: str = "module", defs: str = "") -> str:
    """A solution whose extension is built from `cpp` with load_inline (kept as `_ext` at module level, or
    as `self._ext` in __init__); the entry runs `fwd`.  Parsed only, never built."""
    src = f"_SRC = r'''\n#include <torch/extension.h>\n{textwrap.dedent(cpp)}\n'''\n"
    build = "load_inline(name='fx_ext', cpp_sources=[_SRC], functions=None, verbose=False)"
    top = "from torch.utils.cpp_extension import load_inline\n" + src
    if holder == "module":
        top += f"_ext = {build}\n"
    out = sol(top + textwrap.dedent(defs), fwd=fwd)
    if holder == "self":
        out = out.replace("        self.w = nn.Parameter(torch.zeros(16, 16))\n",
                          f"        self.w = nn.Parameter(torch.zeros(16, 16))\n        self._ext = {build}\n")
    return out


ZERO_VEC = "void fx_clear(std::vector<at::Tensor> ts) { for (auto& t : ts) t.zero_(); }\n"
ZERO_ONE = """
void fx_wipe(torch::Tensor a) {
    float* p = a.data_ptr<float>();
    cudaMemsetAsync(p, 0, a.numel() * sizeof(float));
}
"""
FILL_VIEW = "void fx_fill(torch::Tensor a, double v) {\n    auto flat = a.view({-1});\n    flat.fill_(v);\n}\n"
ZERO_FREE = "void fx_z(torch::Tensor a) { at::zero_(a); }\n"
BOUND = ("void wipe_impl(torch::Tensor a) { std::memset(a.data_ptr(), 0, a.nbytes()); }\n"
         "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"clear_inputs\", &wipe_impl); }\n")

CPP_INPUT_WRITES = {
    "vector_loop": cpp_sol(ZERO_VEC, "out = _launch(x, self.w)\n_ext.fx_clear([t for t in (x,) if torch.is_tensor(t)])\n"
                                     "return out"),
    "memset_through_pointer": cpp_sol(ZERO_ONE, "out = _launch(x, self.w)\n_ext.fx_wipe(x)\nreturn out"),
    "fill_through_view": cpp_sol(FILL_VIEW, "out = _launch(x, self.w)\n_ext.fx_fill(x, 0.0)\nreturn out"),
    "free_function": cpp_sol(ZERO_FREE, "out = _launch(x, self.w)\n_ext.fx_z(x)\nreturn out"),
    # the name pybind gives it, not the C++ one
    "pybind_name": cpp_sol(BOUND, "out = _launch(x, self.w)\n_ext.clear_inputs(x)\nreturn out"),
    # the extension on self, the function through getattr and through a local alias
    "on_self": cpp_sol(ZERO_ONE, "out = _launch(x, self.w)\nself._ext.fx_wipe(x)\nreturn out", holder="self"),
    "getattr": cpp_sol(ZERO_ONE, "out = _launch(x, self.w)\ngetattr(_ext, 'fx_wipe')(x)\nreturn out"),
    "alias": cpp_sol(ZERO_ONE, "wipe = _ext.fx_wipe\nout = _launch(x, self.w)\nwipe(x)\nreturn out"),
    # the inputs handed on by a helper of the solution's own
    "through_helper": cpp_sol(ZERO_VEC, "out = _launch(x, self.w)\n_done(x)\nreturn out",
                              defs="def _done(*ts):\n    _ext.fx_clear(list(ts))\n\n"),
}


@pytest.mark.parametrize("form", sorted(CPP_INPUT_WRITES))
def test_a_cpp_function_that_zeroes_its_inputs_writes_the_caller_s_inputs(form):
    got = rules(CPP_INPUT_WRITES[form])
    assert got.get("INPUT-WRITE") == "high", (form, got)


EMPTY_DIRECT = "at::Tensor fx_alloc(at::Tensor proto) { return at::empty(proto.sizes(), proto.options()); }\n"
EMPTY_LOCAL = """
torch::Tensor fx_out(torch::Tensor x) {
    auto out = torch::empty({x.size(0), 16}, x.options());
    if (out.numel() == 0) return out;
    return out;
}
"""
CPP_UNWRITTEN = {
    "returned_directly": cpp_sol(EMPTY_DIRECT, "return _ext.fx_alloc(_launch(x, self.w))"),
    "local_then_returned": cpp_sol(EMPTY_LOCAL, "return _ext.fx_out(x)"),
    "on_self": cpp_sol(EMPTY_DIRECT, "o = self._ext.fx_alloc(x)\nreturn o", holder="self"),
    "partial": cpp_sol(EMPTY_DIRECT, "return functools.partial(_ext.fx_alloc, x)()"),
}


@pytest.mark.parametrize("form", sorted(CPP_UNWRITTEN))
def test_a_cpp_function_that_returns_an_unwritten_allocation_is_an_unwritten_output(form):
    got = rules(CPP_UNWRITTEN[form])
    assert got.get("OUTPUT-UNWRITTEN") == "high", (form, got)


KERNEL_WRITES = """
__global__ void fx_k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
torch::Tensor fx_run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    fx_k<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
CPP_HONEST = {
    # torch::empty, then a kernel that writes it
    "empty_then_kernel": cpp_sol(KERNEL_WRITES, "return _ext.fx_run(x)"),
    # at::empty filled by copy_ before it is returned
    "empty_then_copy": cpp_sol("at::Tensor fx_fill(at::Tensor o) {\n    at::Tensor out = at::empty(o.sizes(), o.options());\n"
                               "    out.copy_(o);\n    return out;\n}\n", "return _ext.fx_fill(_launch(x, self.w))"),
    # a stateful write of the solution's own state, and a workspace it allocated, zeroed in C++
    "own_state": cpp_sol("void fx_acc(at::Tensor state, at::Tensor out) { state.add_(out); }\n",
                         "out = _launch(x, self.w)\nif not hasattr(self, 'acc'):\n    self.acc = torch.zeros_like(out)\n"
                         "_ext.fx_acc(self.acc, out)\nreturn out"),
    "own_workspace": cpp_sol(ZERO_ONE, "ws = torch.empty(16, 16, device=x.device)\n_ext.fx_wipe(ws)\n"
                                       "return _launch(x, ws)"),
    # a private copy written in C++, and a zero-sized allocation
    "clone_written": cpp_sol("torch::Tensor fx_c(torch::Tensor x) { auto y = x.clone(); y.zero_(); return y; }\n",
                             "z = _ext.fx_c(x)\nreturn _launch(x, self.w) + z"),
    "zero_sized": cpp_sol("torch::Tensor fx_e(torch::Tensor x) { return torch::empty({0}, x.options()); }\n",
                          "extra = _ext.fx_e(x)\nreturn _launch(x, self.w), extra"),
}


@pytest.mark.parametrize("form", sorted(CPP_HONEST))
def test_cpp_functions_that_write_their_own_memory_are_not_input_writes_or_unwritten(form):
    got = {r: s for r, s in rules(CPP_HONEST[form]).items() if r in ("INPUT-WRITE", "OUTPUT-UNWRITTEN")}
    assert not got, (form, got)


# ------------------------------------------------------------------ work on a stream nothing joins: one join reading
UNJOINED = {
    # the stream made current by set_stream, not by a with block
    "set_stream": sol(fwd="s = torch.cuda.Stream()\ntorch.cuda.set_stream(s)\nout = _launch(x, self.w)\n"
                          "torch.cuda.set_stream(torch.cuda.default_stream())\nreturn out"),
    # a StreamContext kept in a local and entered later
    "stream_context_local": sol(fwd="ctx = torch.cuda.StreamContext(torch.cuda.Stream())\nwith ctx:\n"
                                    "    out = _launch(x, self.w)\nreturn out"),
    # made in __init__, entered in a helper method the entry calls
    "init_stream_helper": sol("class _Side:\n    def __init__(self):\n        self.s = torch.cuda.Stream()\n\n"
                              "    def run(self, x, w):\n        with torch.cuda.stream(self.s):\n"
                              "            return _launch(x, w)\n\n_SIDE = _Side()\n",
                              fwd="return _SIDE.run(x, self.w)"),
    # another stream is joined, not this one
    "other_stream_joined": sol(fwd="a = torch.cuda.Stream()\nb = torch.cuda.Stream()\nwith torch.cuda.stream(a):\n"
                                   "    warm = _launch(x, self.w)\ntorch.cuda.current_stream().wait_stream(a)\n"
                                   "with torch.cuda.stream(b):\n    out = _launch(x, self.w)\nreturn out"),
    # the wrong direction: the side stream waits for the caller's
    "wrong_direction": sol(fwd="s = torch.cuda.Stream()\ns.wait_stream(torch.cuda.current_stream())\n"
                               "with torch.cuda.stream(s):\n    out = _launch(x, self.w)\nreturn out"),
    # the only join is in the module's own __main__ self-test, which import never runs
    "join_only_in_main": sol(fwd="with torch.cuda.stream(self.side):\n    out = _launch(x, self.w)\nreturn out",
                             tail="\nif __name__ == '__main__':\n    torch.cuda.synchronize()\n"
                             ).replace("        self.w = nn.Parameter(torch.zeros(16, 16))\n",
                                       "        self.w = nn.Parameter(torch.zeros(16, 16))\n        self.side = torch.cuda.Stream()\n"),
}


@pytest.mark.parametrize("form", sorted(UNJOINED))
def test_graded_work_on_a_stream_nothing_joins_is_decided(form):
    got = rules(UNJOINED[form])
    assert got.get("UNJOINED-STREAM") == "high", (form, got)


CPP_SIDE = """
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
py::object fx_on_side(py::function impl) {
    auto side = c10::cuda::getStreamFromPool(true);
    c10::cuda::CUDAStreamGuard guard(side);
    return impl();
}
"""
CPP_LAUNCH_ON_SIDE = """
#include <cuda_runtime.h>
__global__ void fx_k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }
torch::Tensor fx_run(torch::Tensor x) {
    static cudaStream_t side = nullptr;
    if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    auto y = torch::empty_like(x);
    fx_k<<<1, 32, 0, side>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""


@pytest.mark.parametrize("cpp,fwd", [
    (CPP_SIDE, "return _ext.fx_on_side(lambda: _launch(x, self.w))"),
    (CPP_LAUNCH_ON_SIDE, "return _ext.fx_run(x)"),
], ids=["stream_guard", "launch_on_side"])
def test_a_cpp_function_running_the_work_on_its_own_stream_is_decided(cpp, fwd):
    got = rules(cpp_sol(cpp, fwd))
    assert got.get("UNJOINED-STREAM") == "high", got


JOINED = {
    # joined by an event the side stream records and the caller's stream waits for
    "event_wait": sol(fwd="s = torch.cuda.Stream()\nev = torch.cuda.Event()\nwith torch.cuda.stream(s):\n"
                          "    out = _launch(x, self.w)\n    ev.record(s)\ntorch.cuda.current_stream().wait_event(ev)\n"
                          "return out"),
    "record_event_then_wait": sol(fwd="s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    out = _launch(x, self.w)\n"
                                      "done = s.record_event()\ndone.wait()\nreturn out"),
    # the join reached through getattr, an alias of current_stream, a partial, an alias of synchronize
    "getattr_join": sol(fwd="s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    out = _launch(x, self.w)\n"
                            "getattr(torch.cuda.current_stream(), 'wait_stream')(s)\nreturn out"),
    "alias_current": sol("_cur = torch.cuda.current_stream\n", fwd="s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n"
                         "    out = _launch(x, self.w)\n_cur().wait_stream(s)\nreturn out"),
    "partial_join": sol(fwd="s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    out = _launch(x, self.w)\n"
                            "functools.partial(torch.cuda.current_stream().wait_stream, s)()\nreturn out"),
    "alias_sync": sol("_sync = torch.cuda.synchronize\n", fwd="s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n"
                      "    out = _launch(x, self.w)\n_sync()\nreturn out"),
    "stream_synchronized": sol(fwd="s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    out = _launch(x, self.w)\n"
                                   "s.synchronize()\nreturn out"),
    # the caller's own stream, entered explicitly; a side-stream block that queues nothing
    "current_stream_block": sol(fwd="with torch.cuda.stream(torch.cuda.current_stream()):\n    out = _launch(x, self.w)\n"
                                    "return out"),
    # the graph-capture warm-up every real solution with a side stream does
    "graph_warmup": sol(fwd="s = torch.cuda.Stream()\ns.wait_stream(torch.cuda.current_stream())\n"
                            "with torch.cuda.stream(s):\n    for _ in range(3):\n        _launch(x, self.w)\n"
                            "torch.cuda.current_stream().wait_stream(s)\nreturn _launch(x, self.w)"),
}


@pytest.mark.parametrize("form", sorted(JOINED))
def test_a_side_stream_joined_back_in_any_form_is_not_unjoined(form):
    got = deciding(JOINED[form])
    assert not got, (form, got)


def test_a_cpp_side_stream_joined_by_an_event_is_not_unjoined():
    cpp = CPP_SIDE.replace("    return impl();\n", "    py::object out = impl();\n    at::cuda::CUDAEvent done;\n"
                           "    done.record(side);\n    done.block(c10::cuda::getCurrentCUDAStream());\n    return out;\n")
    got = deciding(cpp_sol("#include <ATen/cuda/CUDAEvent.h>\n" + cpp, "return _ext.fx_on_side(lambda: _launch(x, self.w))"))
    assert not got, got


# ------------------------------------------------------------------ one splitter, one reading of an entry's parameters
def test_one_argument_splitter_keeps_string_and_character_literals_whole():
    from forensics.analyze.static import cuda

    text = 'f("nvidia-smi -lgc 2100,2100", \',\', g(a, b)[0], "(") tail'
    args, end = cuda._split_args(text, 2)
    assert args == ['"nvidia-smi -lgc 2100,2100"', "','", "g(a, b)[0]", '"("'] and text[end] == ")"
    assert not hasattr(cuda, "_cargs")          # the C++ capability reading uses the same one


def test_one_reading_of_the_parameters_a_caller_supplies():
    from forensics.analyze.static.model import Module, _entry_params

    src = textwrap.dedent('''
        class M:
            def forward(this, x, w):
                def inner(a, b):
                    return a
                return inner(x, w)

            @staticmethod
            def step(x, w):
                return x

        def run(x):
            return x
    ''')
    import ast
    mod = Module(ast.parse(src), src)
    got = {q: _entry_params(fi) for q, fi in mod.funcs.items()}
    assert got == {"M.forward": ["x", "w"], "M.forward.inner": ["a", "b"], "M.step": ["x", "w"], "run": ["x"]}


def test_a_staticmethod_entry_s_first_argument_is_a_caller_s_argument():
    src = sol(fwd="return _launch(x, self.w)").replace(
        "    def forward(self, x):\n", "    @staticmethod\n    def step(x, w):\n        return _launch(w, w)\n\n"
                                      "    def forward(self, x):\n")
    hits = [h for h in lint_source(src, problem="01_fp8_gemm").hits if h.rule == "ARG-IGNORED"]
    assert any(h.data.get("function") == "Model.step" and h.data.get("parameter") == "x" for h in hits), hits
