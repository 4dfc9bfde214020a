"""One resolution of what a name denotes, shared by every detector: a reference held as a class
attribute, run inside a lambda or bound by functools.partial reads as what it reaches.

Each form is written here for each capability family it can carry (patching, process control, files,
introspection, native access, output, rng, an unwritten output, the work a library does, the grader
sniffing and exit detectors); each look-alike (an honest launcher kept on a class, a lambda sort key,
a partial of the solution's own launcher) must stay unreported.
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from lint_util import ORDER, worst_rules as rules
from forensics.analyze.static.evaluation import evaluator, resolve_call
from forensics.analyze.static.model import Module

HEAD = '''
import atexit
import ctypes
import functools
import gc
import os
import subprocess
import sys
import threading
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


def sol(top: str = "", fwd: str = "return _launch(x, self.w)") -> str:
    return HEAD + textwrap.dedent(top) + ENTRY.format(fwd=textwrap.indent(textwrap.dedent(fwd).strip("\n"), " " * 8))


# ------------------------------------------------------------------ class attributes
CLASS_ATTR = {
    # the clock patched through a staticmethod-wrapped class attribute (module-level class)
    "patch_staticmethod": (sol("class _T:\n    ev = staticmethod(torch.cuda.Event)\n\n"
                               "_T.ev.elapsed_time = lambda self, end: 0.001\n"), "CAP-PATCH", "high"),
    # the same through a class nested in another class, reached by the outer name
    "patch_nested_class": (sol("class _Outer:\n    class Inner:\n        sync = staticmethod(torch.cuda)\n\n"
                               "_Outer.Inner.sync.synchronize = lambda: None\n"), "CAP-PATCH", "high"),
    # a class defined inside the entry, its attribute read through the class name
    "patch_class_in_function": (sol(fwd="class _L:\n    tgt = torch.cuda\n_L.tgt.synchronize = lambda: None\n"
                                        "return _launch(x, self.w)"), "CAP-PATCH", "high"),
    # a classmethod wrapper, read through cls in a classmethod
    "exit_classmethod": (sol("class _Q:\n    stop = classmethod(lambda cls, code: os._exit(code))\n"
                             "    halt = staticmethod(os._exit)\n\n    @classmethod\n    def go(cls):\n"
                             "        cls.halt(0)\n\n_Q.go()\n"), "CAP-PROCESS", "medium"),
    # an attribute set on the class after its body, read through self in a subclass's method
    "introspection_inherited": (sol("class _Base:\n    pass\n\n_Base.scan = gc.get_objects\n\n"
                                    "class _Probe(_Base):\n    def run(self):\n        return len(self.scan())\n\n"
                                    "_Probe().run()\n"), "CAP-INTROSPECTION", "medium"),
    # a property whose getter returns a native reader, called through the instance
    "native_property": (sol("class _Mem:\n    @property\n    def peek(self):\n        return ctypes.string_at\n\n"
                            "_m = _Mem()\n_m.peek(id(_m), 8)\n"), "CAP-NATIVE", "medium"),
    # `name = property(getter)` as a class attribute
    "files_property_call": (sol("def _opener(self):\n    return open\n\nclass _F:\n    o = property(_opener)\n\n"
                                "_F().o('check.py', 'w').write('ok')\n"), "CAP-FILES", "critical"),
    # output forged through a class attribute read on an instance
    "output_instance_of_class": (sol("class _Out:\n    say = staticmethod(sys.__stdout__.write)\n\n",
                                     fwd="_Out().say('PASS\\n')\nreturn _launch(x, self.w)"), "CAP-PROCESS", "high"),
    # the output allocated through a class attribute and returned unwritten
    "unwritten_class_attr": (sol("class _A:\n    alloc = staticmethod(torch.empty)\n\n",
                                 fwd="return _A.alloc(16, 16, device=x.device)"), "OUTPUT-UNWRITTEN", "high"),
    # the main operation done by the library through a class attribute
    "library_class_attr": (sol("class _Ops:\n    product = staticmethod(torch.matmul)\n\n",
                               fwd="return _Ops.product(x, self.w.t())"), "WORK-BY-LIBRARY", "high"),
    # the grader file named through a class attribute that stands for open (the sniffing detector)
    "grader_read_class_attr": (sol("class _IO:\n    op = staticmethod(open)\n\n",
                                   fwd="with _IO.op('problem.yaml', 'a') as fh:\n    fh.write('atol: 1')\n"
                                       "return _launch(x, self.w)"), "GRADER-READ", "high"),
    # exit at import through a class attribute (the exit detector)
    "system_exit_class_attr": (sol("class _X:\n    q = staticmethod(os._exit)\n\n_X.q(0)\n"), "SYSTEM-EXIT", "high"),
}


@pytest.mark.parametrize("form", sorted(CLASS_ATTR))
def test_a_class_attribute_is_what_it_was_bound_to(form):
    src, rule, sev = CLASS_ATTR[form]
    got = rules(src)
    assert ORDER.index(got.get(rule, "info")) >= ORDER.index(sev), (form, got)


# ------------------------------------------------------------------ lambdas
LAMBDA = {
    # an immediately-invoked lambda at module level runs at import
    "patch_iife_module": (sol("(lambda: setattr(torch, 'allclose', lambda *a, **k: True))()\n"), "CAP-PATCH", "high"),
    # the same inside the entry
    "patch_iife_entry": (sol(fwd="(lambda: setattr(time_mod, 'perf_counter', lambda: 0.0))()\n"
                                 "return _launch(x, self.w)").replace("import gc\n", "import gc\nimport time as time_mod\n"),
                         "CAP-PATCH", "high"),
    # handed to a registrar: the handler is code that runs
    "output_atexit": (sol("atexit.register(lambda: print('PASS'))\n"), "CAP-PROCESS", "high"),
    "introspection_thread": (sol("threading.Thread(target=lambda: gc.get_referrers(torch)).start()\n"),
                             "CAP-INTROSPECTION", "medium"),
    # nested lambdas, each run by the one around it
    "exit_nested": (sol("(lambda: atexit.register(lambda: (lambda: os._exit(0))()))()\n"), "CAP-PROCESS", "medium"),
    # a lambda bound to a local, then called
    "rng_local_lambda": (sol(fwd="reseed = lambda: torch.manual_seed(42)\nreseed()\nreturn _launch(x, self.w)"),
                         "CAP-RNG", "medium"),
    "native_iife": (sol("(lambda: ctypes.memmove(0, 0, 8))()\n"), "CAP-NATIVE", "medium"),
    "files_iife": (sol("(lambda: open('torch.py', 'w').write('import sys'))()\n"), "CAP-FILES", "critical"),
    # an allocation returned through a lambda, and the library's GEMM inside one
    "unwritten_iife": (sol(fwd="return (lambda: torch.empty_like(x))()"), "OUTPUT-UNWRITTEN", "high"),
    "library_iife": (sol(fwd="return (lambda: torch.matmul(x, self.w.t()))()"), "WORK-BY-LIBRARY", "high"),
    # a stream entered through a lambda and never joined
    "stream_iife": (sol(fwd="s = torch.cuda.Stream()\nwith (lambda: torch.cuda.stream(s))():\n"
                            "    out = _launch(x, self.w)\nreturn out"), "UNJOINED-STREAM", "high"),
}


@pytest.mark.parametrize("form", sorted(LAMBDA))
def test_a_lambda_s_body_runs_where_it_is_called(form):
    src, rule, sev = LAMBDA[form]
    got = rules(src)
    assert ORDER.index(got.get(rule, "info")) >= ORDER.index(sev), (form, got)


def test_a_lambda_in_the_entry_runs_in_the_entry_not_at_import():
    at_import = rules(sol("(lambda: os._exit(0))()\n"))
    in_entry = rules(sol(fwd="(lambda: os._exit(0))()\nreturn _launch(x, self.w)"))
    assert at_import["SYSTEM-EXIT"] == "high"
    assert in_entry["SYSTEM-EXIT"] == "medium"     # inside Model.forward, not at import


# ------------------------------------------------------------------ functools.partial
PARTIAL = {
    "patch_partial_setattr": (sol("functools.partial(setattr, torch.cuda.Event, 'elapsed_time')(lambda s, e: 0.001)\n"),
                              "CAP-PATCH", "high"),
    "exit_partial_registered": (sol("atexit.register(functools.partial(os._exit, 0))\n"), "CAP-PROCESS", "medium"),
    # a partial handed to a thread: its call is made there, the forged line with it
    "output_partial_thread": (sol("threading.Thread(target=functools.partial(print, 'PASS')).start()\n"),
                              "CAP-PROCESS", "high"),
    # the file mode bound by the partial, the path given at the call
    "files_partial_mode": (sol("_w = functools.partial(open, mode='w')\n_w('benchmark.py').write('')\n"),
                           "CAP-FILES", "critical"),
    # a command bound by the partial: not a build tool
    "process_partial_cmd": (sol("functools.partial(subprocess.run, ['curl', 'http://x'])()\n"), "CAP-PROCESS", "medium"),
    "unwritten_partial": (sol(fwd="return functools.partial(torch.empty, 16, 16)(device=x.device)"),
                          "OUTPUT-UNWRITTEN", "high"),
    "library_partial": (sol(fwd="return functools.partial(torch.mm, x)(self.w.t())"), "WORK-BY-LIBRARY", "high"),
    "grader_read_partial": (sol(fwd="with functools.partial(open, 'check.py')('a') as fh:\n    fh.write('#')\n"
                                    "return _launch(x, self.w)"), "GRADER-READ", "high"),
    # a reduction of the input through a partial, choosing what the entry computes
    "dispatch_partial": (sol(fwd="if functools.partial(x.abs().amax)() > 64:\n    return torch.zeros_like(x)\n"
                                 "return _launch(x, self.w)"), "INPUT-DISPATCH", "high"),
}


@pytest.mark.parametrize("form", sorted(PARTIAL))
def test_a_partial_stands_for_its_function(form):
    src, rule, sev = PARTIAL[form]
    got = rules(src)
    assert ORDER.index(got.get(rule, "info")) >= ORDER.index(sev), (form, got)


def test_a_partial_s_bound_build_command_is_still_a_build():
    got = rules(sol("functools.partial(subprocess.run, ['nvcc', '-O3', '-c', 'k.cu'])(check=True)\n"))
    assert "CAP-PROCESS" not in got, got


# ------------------------------------------------------------------ look-alikes
LOOKALIKES = {
    # an honest Triton launcher kept as a class attribute, called through the class and through self
    "launcher_class_attr": sol("class _Kernels:\n    gemm = staticmethod(_launch)\n\n", fwd="return _Kernels.gemm(x, self.w)"),
    "launcher_self_attr": sol("class _Holder:\n    run = staticmethod(_launch)\n\n",
                              fwd="h = _Holder()\nreturn h.run(x, self.w)"),
    # a lambda used as a sort key, a Triton grid lambda, a lambda default argument
    "lambda_sort_key": sol(fwd="cfg = sorted([(64, 2), (32, 4)], key=lambda c: c[0] * c[1])[0]\n"
                               "return _launch(x, self.w)"),
    "lambda_grid": sol(fwd="grid = lambda meta: (triton.cdiv(16, meta['B']),)\nout = torch.empty(16, 16, device=x.device)\n"
                           "_dot16[grid](x, self.w, out, K=16)\nreturn out"),
    # partial of the solution's own launcher
    "partial_own_launcher": sol(fwd="run = functools.partial(_launch, x)\nreturn run(self.w)"),
    # a property that hands back the solution's own buffer
    "property_own_buffer": sol("class _Ws:\n    def __init__(self):\n        self.buf = torch.zeros(16, 16)\n\n"
                               "    @property\n    def view(self):\n        return self.buf\n\n",
                               fwd="ws = _Ws()\nreturn _launch(x, ws.view)"),
}


@pytest.mark.parametrize("form", sorted(LOOKALIKES))
def test_look_alikes_stay_unreported(form):
    got = rules(LOOKALIKES[form])
    bad = {r: s for r, s in got.items() if r.startswith(("CAP-", "OUTPUT-UNWRITTEN", "INPUT-WRITE", "WORK-BY-LIBRARY",
                                                         "WORK-NO-KERNEL", "SYSTEM-EXIT", "GRADER-READ",
                                                         "UNJOINED-STREAM", "INPUT-DISPATCH"))}
    assert not bad, (form, bad)


# ------------------------------------------------------------------ the shared resolution itself
def test_resolve_call_gives_the_name_and_the_call_it_amounts_to():
    src = textwrap.dedent('''
        import functools, os, torch
        class H:
            k = staticmethod(os._exit)
        def f(x):
            H.k(0)
            functools.partial(torch.empty, 3)(dtype=x)
            (lambda: torch.zeros(2))()
            return x
    ''')
    mod = Module(ast.parse(src), src)
    calls = {ast.unparse(c): c for c in mod.of(ast.Call)}
    assert resolve_call(mod, calls["H.k(0)"])[0] == "os._exit"
    q, eff = resolve_call(mod, calls["functools.partial(torch.empty, 3)(dtype=x)"])
    assert (q, ast.unparse(eff)) == ("torch.empty", "torch.empty(3, dtype=x)")
    q, eff = resolve_call(mod, calls["(lambda: torch.zeros(2))()"])
    assert (q, ast.unparse(eff)) == ("torch.zeros", "torch.zeros(2)")
    assert evaluator(mod) is evaluator(mod)      # built once per module, shared by the detectors
