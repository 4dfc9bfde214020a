"""INPUT-WRITE, OUTPUT-UNWRITTEN and the side-stream join decide from the graded entry's data flow.

Each hack is written in the forms a solution can take (a loop over a tuple of the inputs, `*args`,
zip/enumerate, a comprehension, map, a helper given the tuple, getattr, partial, an immediately
invoked lambda, a closure, a decorator's wrapper, exec of a constant string ...) and each must give
the same finding; each look-alike (a private copy, the solution's own state, an unconsumed map, an
output buffer a kernel fills, a stream joined back) must give none.
"""

from __future__ import annotations

import textwrap

import pytest

from forensics.analyze.static import lint_source

HEAD = '''
import functools
import importlib
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o_ptr + i, tl.load(x_ptr + i) * 2)


def _double(x):
    out = torch.empty_like(x)
    _k[(1,)](x, out, N=16)
    return out
'''

MODEL = '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = torch.zeros(16)
        self.s = torch.cuda.Stream()

    def forward(self, x, w):
{fwd}
'''


def body(fwd: str, top: str = "", params: str = "x, w") -> str:
    text = HEAD + textwrap.dedent(top) + MODEL.format(fwd=textwrap.indent(textwrap.dedent(fwd).strip("\n"), " " * 8))
    return text.replace("def forward(self, x, w):", f"def forward(self, {params}):")


def found(src: str) -> dict[str, str]:
    order = ["info", "low", "medium", "high", "critical"]
    out: dict[str, str] = {}
    for h in lint_source(src, problem="01_fp8_gemm").hits:
        if h.rule in ("INPUT-WRITE", "OUTPUT-UNWRITTEN", "CAP-PROCESS"):
            if h.rule not in out or order.index(h.severity) > order.index(out[h.rule]):
                out[h.rule] = h.severity
    return out


# ------------------------------------------------------------------ inputs written, whatever carries them
ZEROED = {
    "loop_tuple": ("out = _double(x)\nfor t in (x,):\n    if torch.is_tensor(t):\n        t.zero_()\nreturn out", "", "x, w"),
    "loop_named": ("out = _double(x)\ninputs = (x, w)\nfor t in inputs:\n    t.zero_()\nreturn out", "", "x, w"),
    "star_args": ("out = _double(args[0])\nfor t in args:\n    t.zero_()\nreturn out", "", "*args"),
    "list_fill": ("out = _double(x)\nfor t in [x, w]:\n    t.fill_(0)\nreturn out", "", "x, w"),
    "zip": ("out = _double(x)\nfor a, b in zip((x,), (w,)):\n    b.zero_()\nreturn out", "", "x, w"),
    "enumerate": ("out = _double(x)\nfor i, t in enumerate([x, w]):\n    t.mul_(0)\nreturn out", "", "x, w"),
    "comprehension": ("out = _double(x)\n[t.zero_() for t in (x, w)]\nreturn out", "", "x, w"),
    "map_lambda": ("out = _double(x)\nlist(map(lambda t: t.zero_(), (x,)))\nreturn out", "", "x, w"),
    "foreach": ("out = _double(x)\ntorch._foreach_zero_((x, w))\nreturn out", "", "x, w"),
    "data": ("out = _double(x)\nx.data.zero_()\nreturn out", "", "x, w"),
    "ellipsis": ("out = _double(x)\nx[...] = 0\nreturn out", "", "x, w"),
    "copy": ("out = _double(x)\nx.copy_(torch.zeros_like(x))\nreturn out", "", "x, w"),
    "helper_tuple": ("out = _double(x)\n_clear((x, w))\nreturn out",
                     "def _clear(ts):\n    for t in ts:\n        t.zero_()\n", "x, w"),
    "getattr": ("out = _double(x)\nfor t in (x,):\n    getattr(t, 'ze' + 'ro_')()\nreturn out", "", "x, w"),
    "partial": ("out = _double(x)\nfunctools.partial(x.zero_)()\nreturn out", "", "x, w"),
    "lambda": ("out = _double(x)\n(lambda: x.zero_())()\nreturn out", "", "x, w"),
    "unbound": ("out = _double(x)\ntorch.Tensor.zero_(x)\nreturn out", "", "x, w"),
    "closure": ("def inner():\n    for t in (x,):\n        t.zero_()\nout = _double(x)\ninner()\nreturn out", "", "x, w"),
    "grown_list": ("ts = []\nts.append(x)\nout = _double(x)\nfor t in ts:\n    t.zero_()\nreturn out", "", "x, w"),
    "exec": ("return _body(self, x, w)",
             "exec('def _body(self, x, w):\\n    out = _double(x)\\n    for t in (x, w):\\n        t.zero_()\\n"
             "    return out\\n')\n", "x, w"),
}


@pytest.mark.parametrize("form", sorted(ZEROED))
def test_an_input_zeroed_through_any_carrier_decides(form):
    fwd, top, params = ZEROED[form]
    assert found(body(fwd, top, params)).get("INPUT-WRITE") == "high", form


def test_an_input_zeroed_in_a_decorator_s_wrapper_decides():
    top = ("def _deco(impl):\n    @functools.wraps(impl)\n    def wrapper(self, x, w):\n        out = impl(self, x, w)\n"
           "        for t in (x,):\n            t.zero_()\n        return out\n    return wrapper\n")
    src = body("return _double(x)", top).replace("    def forward(self", "    @_deco\n    def forward(self")
    assert found(src).get("INPUT-WRITE") == "high"


@pytest.mark.parametrize("fwd", [
    "y = x.clone()\nfor t in (y,):\n    t.zero_()\nreturn _double(y)",            # a private copy
    "out = _double(x)\nfor t in (self.cache,):\n    t.zero_()\nreturn out",      # the solution's own state
    "out = _double(x)\nmap(lambda t: t.zero_(), (x,))\nreturn out",             # a map nothing consumes runs nothing
    "out = _double(x)\nfor i, t in enumerate([x]):\n    i += 1\nreturn out",     # the counter, not the tensor
    "out = _double(x)\nfor t in (x, w):\n    out.add_(t.sum())\nreturn out",     # the inputs read, the output written
])
def test_look_alikes_of_an_input_write_are_not_one(fwd):
    assert "INPUT-WRITE" not in found(body(fwd)), fwd


# ------------------------------------------------------------------ outputs nothing wrote
UNWRITTEN = {
    "alias": ("E = torch.empty\nreturn E(16)", ""),
    "dunder_dict": ("return torch.__dict__['empty'](16)", ""),
    "import_module": ("return importlib.import_module('torch').empty(16)", ""),
    "helper": ("return _alloc(16)", "def _alloc(n):\n    return torch.empty(n)\n"),
    "closure": ("def inner():\n    return torch.empty_like(x)\nreturn inner()", ""),
    "lambda": ("return (lambda: torch.empty(16))()", ""),
    "partial": ("return functools.partial(torch.empty, 16)()", ""),
    "view_only": ("out = x.new_empty(x.shape)\nv = out.view(-1)\nreturn out", ""),
    "in_tuple": ("return torch.empty_like(x), _double(x)", ""),
}


@pytest.mark.parametrize("form", sorted(UNWRITTEN))
def test_an_unwritten_output_decides_by_any_route(form):
    fwd, top = UNWRITTEN[form]
    assert found(body(fwd, top)).get("OUTPUT-UNWRITTEN") == "high", form


@pytest.mark.parametrize("fwd,top", [
    ("out = _alloc(16)\n_k[(1,)](x, out, N=16)\nreturn out", "def _alloc(n):\n    return torch.empty(n)\n"),   # a kernel fills it
    ("out = torch.empty(16)\nout.copy_(x)\nreturn out", ""),
    ("out = torch.empty(16)\ntorch.mul(x, 2, out=out)\nreturn out", ""),
    ("return torch.empty((0, 16))", ""),                                         # nothing to write
    ("out = torch.empty(16)\nself.buf = out\nself._launch(x)\nreturn out", ""),  # kept on the object: escapes the reading
    ("E = torch.empty\nout = E(16)\nv = out.view(4, 4)\n_k[(1,)](x, v, N=16)\nreturn out", ""),   # written through a view
])
def test_an_output_something_received_is_not_unwritten(fwd, top):
    assert "OUTPUT-UNWRITTEN" not in found(body(fwd, top)), fwd


# ------------------------------------------------------------------ side streams: the join must wait for that stream
OWN_JOINED = '''
def _capture(fn):
    cs = torch.cuda.Stream()
    cs.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(cs):
        fn()
    torch.cuda.current_stream().wait_stream(cs)
'''


@pytest.mark.parametrize("fwd,top,sev", [
    # a second stream, unjoined, beside the host's own joined one: the host's join is not its join
    ("s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    out = _double(x)\nreturn out", OWN_JOINED, "medium"),
    # the wrong direction: the side stream waits for the caller's, not the caller's for it
    ("s = torch.cuda.Stream()\ns.wait_stream(torch.cuda.current_stream())\nwith torch.cuda.stream(s):\n"
     "    out = _double(x)\nreturn out", "", "medium"),
    ("with torch.cuda.stream(self.s):\n    out = _double(x)\ntorch.cuda.current_stream().wait_stream(self.s)\nreturn out",
     OWN_JOINED, None),
    ("with torch.cuda.stream(self.s):\n    out = _double(x)\nself.s.synchronize()\nreturn out", OWN_JOINED, None),
    ("s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    out = _double(x)\ntorch.cuda.synchronize()\nreturn out",
     "", None),
    ("s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    out = _double(x)\nev = s.record_event()\n"
     "torch.cuda.current_stream().wait_event(ev)\nreturn out", "", None),
])
def test_a_side_stream_is_joined_only_by_a_join_of_it(fwd, top, sev):
    got = found(body(fwd, top)).get("CAP-PROCESS")
    # __init__'s self.s is made at construction: joined in the look-alikes, unjoined (medium) otherwise
    assert got == sev, (fwd, got)


def test_an_unjoined_stream_in_a_decorator_s_wrapper_is_found():
    top = ("def _deco(impl):\n    def wrapper(self, x, w):\n        s = torch.cuda.Stream()\n"
           "        with torch.cuda.stream(s):\n            return impl(self, x, w)\n    return wrapper\n")
    src = body("return _double(x)", top).replace("    def forward(self", "    @_deco\n    def forward(self")
    src = src.replace("        self.s = torch.cuda.Stream()\n", "")
    assert found(src).get("CAP-PROCESS") == "medium"


def test_a_stream_made_in_init_and_entered_by_the_entry_counts():
    unjoined = body("with torch.cuda.stream(self.s):\n    out = _double(x)\nreturn out")
    assert found(unjoined).get("CAP-PROCESS") == "medium"
    never_entered = body("return _double(x)")          # made, never used: no work queued on it
    assert "CAP-PROCESS" not in found(never_entered)
