"""The thread reading and the event-to-stream match, in forms the bench rewriter does not produce.

A thread (threading.Thread, a Thread subclass, an executor's task, a process, a C++ std::thread or
pthread) that the graded entry starts is joined when a join of THAT thread (t.join(), fut.result(),
shutdown, the end of an executor's with block, concurrent.futures.wait) is reached before the entry
returns.  Work left running when it returns is UNJOINED-THREAD (high, decided); a joined worker is
nothing, whatever the form.  A wait for an event joins the stream the event was recorded on, not
every stream.
"""

from __future__ import annotations

import textwrap

import pytest

from lint_util import deciding_rules, worst_rules as rules

HEAD = '''
import concurrent.futures
import functools
import threading
import _thread
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _axpy(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(4):
        acc += tl.load(x + i, mask=m)
    tl.store(y + i, acc, mask=m)


def _fill(x, out):
    _axpy[(1,)](x, out, x.numel(), BLOCK=128)
    return out
'''

ENTRY = '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
{init}
    def forward(self, x):
{fwd}
'''

#: what a look-alike must not raise at medium or above
DECIDING = ("CAP-", "OUTPUT-UNWRITTEN", "INPUT-WRITE", "UNJOINED-STREAM", "UNJOINED-THREAD")


def sol(top: str = "", fwd: str = "return _fill(x, torch.empty_like(x))", init: str = "") -> str:
    ind = lambda s, n: textwrap.indent(textwrap.dedent(s).strip("\n"), " " * n)   # noqa: E731
    return HEAD + textwrap.dedent(top) + ENTRY.format(fwd=ind(fwd, 8), init=ind(init, 8) + "\n" if init else "")


def deciding(src: str) -> dict[str, str]:
    return deciding_rules(src, DECIDING)


# ------------------------------------------------------------------ work left running when the entry returns
OUTLIVES = {
    # a helper class owns the thread; the entry starts it through the helper and never joins it
    "helper_class": sol("class _Worker:\n    def __init__(self, x, out):\n"
                        "        self.t = threading.Thread(target=_fill, args=(x, out))\n\n"
                        "    def go(self):\n        self.t.start()\n\n",
                        fwd="out = torch.empty_like(x)\n_Worker(x, out).go()\nreturn out"),
    # a daemon thread nobody joins
    "daemon_never_joined": sol(fwd="out = torch.empty_like(x)\n"
                                   "t = threading.Thread(target=_fill, args=(x, out), daemon=True)\nt.start()\nreturn out"),
    # the join is on the exception path only: the path that returns never reaches it
    "joined_only_on_exception": sol(fwd="out = torch.empty_like(x)\nt = threading.Thread(target=_fill, args=(x, out))\n"
                                        "t.start()\ntry:\n    scale = float(self.scale)\nexcept Exception:\n"
                                        "    t.join()\n    raise\nreturn out * scale"),
    # an early return skips the join
    "early_return_skips_join": sol(fwd="out = torch.empty_like(x)\nt = threading.Thread(target=_fill, args=(x, out))\n"
                                       "t.start()\nif x.shape[0] > 4:\n    return out\nt.join()\nreturn out"),
    # a join with a timeout returns while the thread runs on
    "join_with_timeout": sol(fwd="out = torch.empty_like(x)\nt = threading.Thread(target=_fill, args=(x, out))\n"
                                 "t.start()\nt.join(0.0001)\nreturn out"),
    # the previous call's thread joined at the start of the next call: this call's thread outlives it
    "joined_next_call": sol(init="self._prev = None", fwd="if self._prev is not None:\n    self._prev.join()\n"
                                 "out = torch.empty_like(x)\nself._prev = threading.Thread(target=_fill, args=(x, out))\n"
                                 "self._prev.start()\nreturn out"),
    # a pool made in __init__, a task handed to it and its future dropped
    "executor_future_dropped": sol(init="self.pool = concurrent.futures.ThreadPoolExecutor(1)",
                                   fwd="out = torch.empty_like(x)\nself.pool.submit(_fill, x, out)\nreturn out"),
    # the pool's map, its results never read, no with block
    "executor_map_unread": sol(init="self.pool = concurrent.futures.ThreadPoolExecutor(2)",
                               fwd="out = torch.empty_like(x)\nself.pool.map(lambda o: _fill(x, o), [out])\nreturn out"),
    # a Thread subclass whose run() does the work
    "thread_subclass": sol("class _Filler(threading.Thread):\n    def __init__(self, x, out):\n        super().__init__()\n"
                           "        self.x, self.out = x, out\n\n    def run(self):\n        _fill(self.x, self.out)\n\n",
                           fwd="out = torch.empty_like(x)\n_Filler(x, out).start()\nreturn out"),
    # the low-level start, with no handle to join
    "start_new_thread": sol(fwd="out = torch.empty_like(x)\n_thread.start_new_thread(_fill, (x, out))\nreturn out"),
    # the start reached through getattr and a partial
    "getattr_partial_start": sol(fwd="out = torch.empty_like(x)\n"
                                     "t = threading.Thread(target=functools.partial(_fill, x, out))\n"
                                     "getattr(t, 'start')()\nreturn out"),
}


@pytest.mark.parametrize("form", sorted(OUTLIVES))
def test_work_on_a_thread_the_entry_leaves_running_is_decided(form):
    got = rules(OUTLIVES[form])
    assert got.get("UNJOINED-THREAD") == "high", (form, got)


JOINED = {
    # a helper class starts and joins its own thread
    "helper_class_joins": sol("class _Worker:\n    def __init__(self, x, out):\n"
                              "        self.t = threading.Thread(target=_fill, args=(x, out))\n\n"
                              "    def run(self):\n        self.t.start()\n        self.t.join()\n\n",
                              fwd="out = torch.empty_like(x)\n_Worker(x, out).run()\nreturn out"),
    # a list of threads, started and joined in loops
    "list_of_threads": sol(fwd="outs = [torch.empty_like(x) for _ in range(2)]\n"
                               "ts = [threading.Thread(target=_fill, args=(x, o)) for o in outs]\n"
                               "for t in ts:\n    t.start()\nfor t in ts:\n    t.join()\nreturn outs[0] + outs[1]"),
    "list_grown_by_append": sol(fwd="out = torch.empty_like(x)\nworkers = []\nfor part in x.chunk(2):\n"
                                    "    w = threading.Thread(target=_fill, args=(part, out))\n    w.start()\n"
                                    "    workers.append(w)\nfor w in workers:\n    w.join()\nreturn out"),
    # an executor in a with block (its end waits), with the return inside the block too
    "executor_with_block": sol(fwd="out = torch.empty_like(x)\n"
                                   "with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:\n"
                                   "    ex.submit(_fill, x, out)\nreturn out"),
    "return_inside_executor_block": sol(fwd="out = torch.empty_like(x)\n"
                                            "with concurrent.futures.ThreadPoolExecutor(1) as ex:\n"
                                            "    ex.submit(_fill, x, out)\n    return out"),
    # the future's result read through an alias of its bound method, and through getattr
    "result_through_alias": sol(init="self.pool = concurrent.futures.ThreadPoolExecutor(1)",
                                fwd="out = torch.empty_like(x)\nfut = self.pool.submit(_fill, x, out)\nwait_for = fut.result\n"
                                    "wait_for()\nreturn out"),
    "result_through_getattr": sol(init="self.pool = concurrent.futures.ThreadPoolExecutor(1)",
                                  fwd="out = torch.empty_like(x)\nfut = self.pool.submit(_fill, x, out)\n"
                                      "return getattr(fut, 'result')()"),
    # every future of a list read, or waited for together
    "futures_comprehension": sol(init="self.pool = concurrent.futures.ThreadPoolExecutor(2)",
                                 fwd="futs = [self.pool.submit(_fill, c, torch.empty_like(c)) for c in x.chunk(2)]\n"
                                     "return torch.cat([f.result() for f in futs])"),
    "futures_wait": sol(init="self.pool = concurrent.futures.ThreadPoolExecutor(2)",
                        fwd="out = torch.empty_like(x)\nfuts = [self.pool.submit(_fill, x, out)]\n"
                            "concurrent.futures.wait(futs)\nreturn out"),
    # joined in a finally block, which runs before the return inside the try
    "joined_in_finally": sol(fwd="out = torch.empty_like(x)\nt = threading.Thread(target=_fill, args=(x, out))\n"
                                 "t.start()\ntry:\n    return out\nfinally:\n    t.join()"),
    # a Thread subclass started and joined
    "thread_subclass_joined": sol("class _Filler(threading.Thread):\n    def __init__(self, x, out):\n"
                                  "        super().__init__()\n        self.x, self.out = x, out\n\n"
                                  "    def run(self):\n        _fill(self.x, self.out)\n\n",
                                  fwd="out = torch.empty_like(x)\nw = _Filler(x, out)\nw.start()\nw.join()\nreturn out"),
    # polled until it is done
    "spin_until_done": sol(fwd="out = torch.empty_like(x)\nt = threading.Thread(target=_fill, args=(x, out))\n"
                               "t.start()\nwhile t.is_alive():\n    pass\nreturn out"),
    # the join through a partial of the bound method
    "join_through_partial": sol(fwd="out = torch.empty_like(x)\nt = threading.Thread(target=_fill, args=(x, out))\n"
                                    "t.start()\nfunctools.partial(t.join)()\nreturn out"),
    # a background build started at import and joined by the entry before it launches anything
    "import_thread_joined_by_entry": sol("_warm = threading.Thread(target=lambda: None)\n_warm.start()\n\n",
                                         fwd="_warm.join()\nreturn _fill(x, torch.empty_like(x))"),
}


@pytest.mark.parametrize("form", sorted(JOINED))
def test_a_worker_joined_before_the_entry_returns_is_not_reported(form):
    got = deciding(JOINED[form])
    assert not got, (form, got)


def test_a_thread_that_only_logs_is_a_capability_not_a_decided_hack():
    got = rules(sol(fwd="threading.Thread(target=print, args=('step',)).start()\n"
                        "return _fill(x, torch.empty_like(x))"))
    assert got.get("CAP-PROCESS") == "medium" and "UNJOINED-THREAD" not in got, got


def test_a_thread_started_at_import_and_never_joined_stays_a_capability():
    got = rules(sol("threading.Thread(target=lambda: None, daemon=True).start()\n"))
    assert got.get("CAP-PROCESS") == "medium" and "UNJOINED-THREAD" not in got, got


# ------------------------------------------------------------------ C++: detach against join
def cpp_sol(cpp: str, fwd: str) -> str:
    src = f"_SRC = r'''\n#include <torch/extension.h>\n#include <thread>\n{textwrap.dedent(cpp)}\n'''\n"
    top = ("from torch.utils.cpp_extension import load_inline\n" + src
           + "_ext = load_inline(name='fx_threads', cpp_sources=[_SRC], functions=None, verbose=False)\n")
    return sol(top, fwd=fwd)


CPP_DETACH = """
void fx_fill_async(at::Tensor x, at::Tensor out) {
    std::thread worker([x, out]() mutable { out.copy_(x * 2); });
    worker.detach();
}
"""
CPP_PTHREAD = """
#include <pthread.h>
static void* fx_body(void* p) { static_cast<at::Tensor*>(p)->mul_(2); return nullptr; }
void fx_fill_async(at::Tensor out) {
    static pthread_t tid;
    pthread_create(&tid, nullptr, fx_body, new at::Tensor(out));
}
"""
CPP_POOL_KEPT = """
#include <vector>
static std::vector<std::thread> fx_workers;
void fx_fill_async(at::Tensor x, at::Tensor out) {
    fx_workers.emplace_back([x, out]() mutable { out.copy_(x * 2); });
}
"""
CPP_POOL_JOINED = """
#include <vector>
void fx_fill_async(at::Tensor x, at::Tensor out) {
    std::vector<std::thread> parts;
    for (int64_t i = 0; i < 2; ++i) parts.emplace_back([x, out, i]() mutable { out[i].copy_(x[i] * 2); });
    for (std::thread& p : parts) p.join();
}
"""
CPP_JOIN = """
void fx_fill_async(at::Tensor x, at::Tensor out) {
    std::thread worker([x, out]() mutable { out.copy_(x * 2); });
    worker.join();
}
"""


@pytest.mark.parametrize("cpp,fwd", [
    (CPP_DETACH, "out = torch.empty_like(x)\n_ext.fx_fill_async(x, out)\nreturn out"),
    (CPP_PTHREAD, "out = x.clone()\n_ext.fx_fill_async(out)\nreturn out"),
    (CPP_POOL_KEPT, "out = torch.empty_like(x)\n_ext.fx_fill_async(x, out)\nreturn out"),
], ids=["detach", "pthread_never_joined", "static_vector_never_joined"])
def test_a_cpp_thread_the_entry_leaves_running_is_decided(cpp, fwd):
    got = rules(cpp_sol(cpp, fwd))
    assert got.get("UNJOINED-THREAD") == "high", got


@pytest.mark.parametrize("cpp", [CPP_JOIN, CPP_POOL_JOINED], ids=["join", "vector_joined_in_a_loop"])
def test_a_cpp_thread_joined_before_it_returns_is_not_reported(cpp):
    got = deciding(cpp_sol(cpp, "out = torch.empty_like(x)\n_ext.fx_fill_async(x, out)\nreturn out"))
    assert not got, got


def test_a_detached_cpp_thread_off_the_graded_path_stays_a_capability():
    got = rules(cpp_sol(CPP_DETACH, "return _fill(x, torch.empty_like(x))")
                + "\n\ndef warm(x):\n    _ext.fx_fill_async(x, torch.empty_like(x))\n")
    assert got.get("CAP-PROCESS") == "medium" and "UNJOINED-THREAD" not in got, got


# ------------------------------------------------------------------ an event joins the stream it was recorded on
SIDE = "s = torch.cuda.Stream()\nev = torch.cuda.Event()\nwith torch.cuda.stream(s):\n    out = _fill(x, torch.empty_like(x))\n"

EVENT_JOINS_NOTHING = {
    # the event is recorded on the caller's stream: waiting for it waits for nothing of s
    "recorded_on_current": sol(fwd=SIDE + "ev.record(torch.cuda.current_stream())\n"
                                          "torch.cuda.current_stream().wait_event(ev)\nreturn out"),
    # recorded without a stream after the block: the current stream again
    "recorded_after_block": sol(fwd=SIDE + "ev.record()\nev.wait()\nreturn out"),
    # recorded on another side stream than the one doing the work
    "recorded_on_other_stream": sol(fwd="a = torch.cuda.Stream()\nb = torch.cuda.Stream()\nev = torch.cuda.Event()\n"
                                        "a.record_event(ev)\nwith torch.cuda.stream(b):\n"
                                        "    out = _fill(x, torch.empty_like(x))\n"
                                        "torch.cuda.current_stream().wait_event(ev)\nreturn out"),
    # the caller's stream records its own event and the side stream waits for it: the wrong direction
    "wrong_direction": sol(fwd="s = torch.cuda.Stream()\nready = torch.cuda.current_stream().record_event()\n"
                               "s.wait_event(ready)\nwith torch.cuda.stream(s):\n    out = _fill(x, torch.empty_like(x))\n"
                               "return out"),
}


@pytest.mark.parametrize("form", sorted(EVENT_JOINS_NOTHING))
def test_an_event_recorded_elsewhere_does_not_join_the_side_stream(form):
    got = rules(EVENT_JOINS_NOTHING[form])
    assert got.get("UNJOINED-STREAM") == "high", (form, got)


EVENT_JOINS = {
    # recorded inside the block without a stream: on s
    "recorded_inside_block": sol(fwd=SIDE + "    ev.record()\ntorch.cuda.current_stream().wait_event(ev)\nreturn out"),
    # recorded by a helper the entry calls inside the block
    "recorded_by_helper_in_block": sol("def _mark(ev):\n    ev.record()\n\n",
                                       fwd=SIDE + "    _mark(ev)\nev.synchronize()\nreturn out"),
    # s.record_event(ev) and the event waited for through an alias
    "record_event_alias_wait": sol(fwd=SIDE + "s.record_event(ev)\nwait = torch.cuda.current_stream().wait_event\n"
                                              "wait(ev)\nreturn out"),
    # an event made by the side stream itself
    "side_stream_event": sol(fwd="s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n"
                                 "    out = _fill(x, torch.empty_like(x))\ndone = s.record_event()\n"
                                 "torch.cuda.current_stream().wait_event(done)\nreturn out"),
}


@pytest.mark.parametrize("form", sorted(EVENT_JOINS))
def test_an_event_recorded_on_the_side_stream_joins_it(form):
    got = deciding(EVENT_JOINS[form])
    assert not got, (form, got)


def test_what_a_joined_thread_with_an_unreadable_target_was_handed_counts_as_written():
    src = sol("_FILLERS = {torch.float32: _fill}\n\n",
              fwd="out = torch.empty_like(x)\nt = threading.Thread(target=_FILLERS[x.dtype], args=(x, out))\n"
                  "t.start()\nt.join()\nreturn out")
    got = deciding(src)
    assert not got, got


GEMM = """
@triton.jit
def _mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        acc += tl.dot(tl.load(a + rm[:, None] * K + rk[None, :]), tl.load(b + rn[None, :] * K + rk[:, None]))
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


def _gemm(x, w, out):
    if not x.is_cuda:
        return torch.matmul(x, w.t(), out=out)
    _mm[(1, 1)](x, w, out, 16, 16, 16, BM=16, BN=16, BK=16)
"""


@pytest.mark.parametrize("fwd,rule,sev", [
    # the library's GEMM reached through the module's namespace: the library does the work (main: an
    # unresolved "launch", WORK-UNRESOLVED medium)
    ("return torch.__dict__['mm'](x, self.w.t())", "WORK-BY-LIBRARY", "high"),
    # a joined worker made through threading's namespace: nothing (main: the same unresolved "launch",
    # hidden behind the worker's CAP-PROCESS)
    ("out = torch.empty(16, 16, device=x.device)\nt = threading.__dict__['Thread'](target=_gemm, args=(x, self.w, out))\n"
     "t.start()\nt.join()\nreturn _gemm(x, self.w, out)", None, None),
], ids=["library_gemm_through_dict", "thread_through_dict"])
def test_a_call_through_a_module_dict_is_that_call_not_a_kernel_launch(fwd, rule, sev):
    got = rules(sol(GEMM, fwd=fwd, init="self.w = nn.Parameter(torch.zeros(16, 16))"))
    assert "WORK-UNRESOLVED" not in got and (rule is None or got.get(rule) == sev), got
    if rule is None:
        assert not {r for r in got if r.startswith(DECIDING + ("WORK-",))}, got


# ------------------------------------------------------------------ a join bounded by a timeout
@pytest.mark.parametrize("join", ["t.join(60)", "t.join(timeout=self.wait_s)", "t.join(timeout=2.5)"])
def test_a_join_for_a_while_is_a_pending_question_not_a_decided_hack(join):
    """`t.join(60)` waits until the work ends or the time is up: reading the code cannot tell which comes
    first, so the thread is reported for the replay to settle (medium: suspect), not decided, and not
    passed as joined either."""
    src = sol(init="self.wait_s = 30.0", fwd="out = torch.empty_like(x)\nt = threading.Thread(target=_fill, args=(x, out))\n"
                                           f"t.start()\n{join}\nreturn out")
    assert rules(src).get("UNJOINED-THREAD") == "medium", (join, rules(src))


def test_a_join_shorter_than_any_work_is_no_join():
    src = sol(fwd="out = torch.empty_like(x)\nt = threading.Thread(target=_fill, args=(x, out))\n"
                  "t.start()\nt.join(timeout=0.001)\nreturn out")
    assert rules(src).get("UNJOINED-THREAD") == "high"
