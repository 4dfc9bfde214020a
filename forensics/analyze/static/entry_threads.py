"""Threads, processes and pool tasks in the entry data flow (`ThreadFlow`, a collaborator of
`EntryFlow`): what starts one (a constructor and its start, `_thread.start_new_thread`, a pool's submit or
map), the target it runs, read as code the entry's path reaches, and what joins it back (a join, a future's
result, a pool's shutdown or its with block, `concurrent.futures.wait`, a join with a timeout too short to
matter); what is still running when an entry returns is what UNJOINED-THREAD reports (cap_joins.py)."""

from __future__ import annotations

import ast
from typing import Any, Iterable

from .entry_values import _Frame, _MAX, _src


#: what starts a thread, a process or a pool of them (the thread reading: `cap_joins.Joins.thread_joins`, entry_flow)
THREAD_CTORS = frozenset({"threading.Thread", "threading.Timer", "multiprocessing.Process", "multiprocessing.context.Process",
                          "torch.multiprocessing.Process"})
POOL_CTORS = frozenset({"concurrent.futures.ThreadPoolExecutor", "concurrent.futures.ProcessPoolExecutor",
                        "concurrent.futures.thread.ThreadPoolExecutor", "concurrent.futures.process.ProcessPoolExecutor",
                        "multiprocessing.Pool", "multiprocessing.pool.Pool", "multiprocessing.pool.ThreadPool",
                        "multiprocessing.dummy.Pool", "torch.multiprocessing.Pool"})
START_NOW = frozenset({"_thread.start_new_thread", "_thread.start_new"})
#: what a pool hands work to (each gives a future; a multiprocessing pool's map/apply wait for their results)
POOL_SUBMIT = frozenset({"submit", "map", "apply_async", "map_async", "starmap_async", "imap", "imap_unordered"})
#: waits: a thread's or process's join, a future's result, a pool's shutdown/join/terminate
THREAD_JOIN = frozenset({"join"})
FUTURE_JOIN = frozenset({"result", "exception", "get", "wait"})
POOL_JOIN = frozenset({"shutdown", "join", "terminate"})
#: a class of the solution that subclasses one of these is a thread: `W().start()` runs `W.run`
THREAD_BASES = frozenset({"threading.Thread", "multiprocessing.Process", "multiprocessing.context.Process",
                          "torch.multiprocessing.Process"})
#: waits for a collection of futures (every one, unless told to return at the first)
WAIT_ALL = frozenset({"concurrent.futures.wait", "concurrent.futures.as_completed"})


def _target_of(q: str, args: list[set], kws: dict[str, set], elements: Any) -> tuple:
    """(target values, positional arguments, keyword arguments) of a thread constructor's call."""
    if q == "threading.Timer":
        target = kws.get("function") or (args[1] if len(args) > 1 else set())
        a = kws.get("args") or (args[2] if len(args) > 2 else set())
        kw = kws.get("kwargs") or (args[3] if len(args) > 3 else set())
    elif q in START_NOW:
        target = args[0] if args else set()
        a = args[1] if len(args) > 1 else set()
        kw = args[2] if len(args) > 2 else set()
    else:                        # Thread(group, target, name, args, kwargs) and Process alike
        target = kws.get("target") or (args[1] if len(args) > 1 else set())
        a = kws.get("args") or (args[3] if len(args) > 3 else set())
        kw = kws.get("kwargs") or (args[4] if len(args) > 4 else set())
    del kw       # keyword arguments by name are not followed: their values still reach the target's reading
    return frozenset(target), _positional(a, elements), {}


def _positional(vals: set, elements: Any) -> list[set]:
    """The positional arguments a tuple value holds (`args=(x, out)`), else its elements for each."""
    tups = [v for v in vals if v[0] == "tup"]
    if tups:
        n = max(len(t[1]) for t in tups)
        return [set().union(*(t[1][i] for t in tups if i < len(t[1]))) for i in range(n)]
    el = elements(vals) if vals else set()
    return [el] if el else []


def _const_arg(call: Any, name: str, pos: int) -> ast.AST | None:
    if not isinstance(call, ast.Call):
        return None
    kw = next((k.value for k in call.keywords if k.arg == name), None)
    if kw is not None:
        return kw
    return call.args[pos] if len(call.args) > pos and not isinstance(call.args[pos], ast.Starred) else None


def _timeout(call: Any, pos: int) -> bool:
    """A wait given a timeout (`t.join(0.1)`, `timeout=5`) may return while the thread still runs."""
    a = _const_arg(call, "timeout", pos)
    return a is not None and not (isinstance(a, ast.Constant) and a.value is None)


#: a constant join timeout below this many seconds is read as no join at all: the wait returns before any
#: real work can finish (`t.join(0.0001)`); a longer or computed one may well see the thread end
SHORT_JOIN_S = 1.0


def _short_timeout(call: Any, pos: int) -> bool:
    a = _const_arg(call, "timeout", pos)
    return isinstance(a, ast.Constant) and isinstance(a.value, (int, float)) and not isinstance(a.value, bool) \
        and a.value < SHORT_JOIN_S


def _false_arg(call: Any, name: str, pos: int) -> bool:
    a = _const_arg(call, name, pos)
    return isinstance(a, ast.Constant) and a.value is False


def _first_only(call: Any) -> bool:
    """concurrent.futures.wait(fs, return_when=FIRST_COMPLETED): returns when one has."""
    a = _const_arg(call, "return_when", 2)
    return a is not None and "FIRST" in _src(a)


def _unknown_join(name: str, call: ast.Call) -> bool:
    """A method call on a receiver the reading cannot name that waits like a join: `.join()` (no arguments:
    not str.join), `.result()`, `.shutdown()` (not wait=False)."""
    if name == "join":
        return not call.args and not call.keywords
    if name == "result":
        return True
    if name == "shutdown":
        return not _false_arg(call, "wait", 0)
    return False


class ThreadFlow:
    """The thread reading of one EntryFlow (`fl`): what is started, what it runs, and what joins it."""

    def __init__(self, fl: Any) -> None:
        self.fl = fl

    # ------------------------------------------------------------------ threads
    def tmethod(self, v: tuple, name: str, args: list[set], kws: dict[str, set], call: ast.Call | None, fi: Any,
                 depth: int) -> set:
        """A method of a thread, a process, a pool or a future: start, submit, join, result, shutdown."""
        kind, site = v[0], v[1]
        if kind == "thread":
            if name == "start":
                self.start(site, call, fi, depth)
            elif name == "run":                   # t.run() runs the target here, in this thread
                self._run_target(site, call, fi, depth)
            elif name in THREAD_JOIN and not _short_timeout(call, 0):
                if _timeout(call, 0):            # joined, but only for a while: the replay tells whether it ended
                    self.fl.timed_joins.setdefault(site, call)
                self.join({site})
            return set()
        if kind == "pool":
            if name in POOL_SUBMIT and call is not None and args:
                sync = self.fl.ev.pool_kind.get(site, "").startswith(("multiprocessing", "torch.multiprocessing")) \
                    and name == "map"           # a multiprocessing pool's map waits for its results
                if name == "submit":
                    fargs, fkws = args[1:], kws
                elif name == "apply_async":
                    fargs = _positional(args[1] if len(args) > 1 else kws.get("args", set()), lambda x: self.fl._elements(x, fi, depth))
                    fkws = {}
                else:
                    fargs, fkws = [self.fl._elements(a, fi, depth) for a in args[1:2]], {}
                fut = id(call)
                self.fl.thread_spec[fut] = (f"{self.fl.ev.pool_kind.get(site, 'a pool')}.{name}", frozenset(args[0]), fargs, fkws)
                if sync:
                    self._run_target(fut, call, fi, depth)
                    return set()
                self.fl.pool_futs.setdefault(site, set()).add(fut)
                self.start(fut, call, fi, depth)
                return {("future", fut, site)}
            if name in POOL_JOIN and not (name == "shutdown" and _false_arg(call, "wait", 0)):
                self.join(self.pool_members([site]))
            return set()
        if kind == "future" and name in FUTURE_JOIN and not (name == "wait" and _timeout(call, 0)):
            self.join({site})
        return set()

    def start(self, site: Any, call: ast.AST | None, fi: Any, depth: int) -> None:
        """A thread (a process, a pool's task) starts: pending on this path until a join reaches it; its target
        is read now, what it does counted as the thread's."""
        info = self.fl.threads.setdefault(site, {"node": call, "entry": self.fl.entry, "work": False,
                                              "what": (self.fl.thread_spec.get(site) or self._spec_of(site) or ("a thread",))[0]})
        if info["node"] is None:
            info["node"] = call
        if self.fl.pend is not None:
            self.fl.pend = self.fl.pend | {site}
        self._run_target(site, call, fi, depth)

    def _run_target(self, site: Any, call: ast.AST | None, fi: Any, depth: int) -> None:
        spec = self.fl.thread_spec.get(site) or self._spec_of(site)
        targets = [t for t in (spec[1] if spec else ()) if t[0] in ("lam", "loc", "func", "closure", "lambda", "pt",
                                                                    "partial", "ref", "bm", "cpp", "tmethod",
                                                                    "builtin", "class")]
        if site not in self.fl.threads:
            self.fl.threads[site] = {"node": call, "entry": self.fl.entry, "work": False, "what": spec[0] if spec else "a thread"}
        if not targets:
            self.fl.threads[site]["work"] = True      # a target the reading cannot name: it may do anything
            self.fl._tctx.append(site)
            try:                                    # with what it was handed
                for a in (spec[2] if spec else ()):
                    self.fl._use(set(a))
            finally:
                self.fl._tctx.pop()
            return
        saved = self.fl.pend
        self.fl._tctx.append(site)
        self.fl._frames.append(_Frame(barrier=True))
        try:
            for t in targets[:_MAX]:
                self.fl.pend = saved
                self.fl.call_flow.call(t, [set(a) for a in spec[2]], {k: set(b) for k, b in spec[3].items()}, call, fi, depth)
        finally:
            self.fl._frames.pop()
            self.fl._tctx.pop()
        # a thread's own raise or return ends only its own path; the threads it starts join the caller's state
        self.fl.pend = None if saved is None else saved | (self.fl.pend or frozenset())

    def _spec_of(self, site: Any) -> tuple | None:
        """What a thread made outside the entry's reading runs (`self.t = Thread(target=self._loop)` in
        __init__, a Thread subclass's run), read with the module's reference evaluation."""
        if isinstance(site, str) and site.startswith("class:"):
            cls = site[6:]
            run = {v for v in self.fl.ev.attr(("self", cls), "run", self.fl.ev.ctx(None)) if v[0] == "func"}
            spec = ("a " + cls + " thread", frozenset(run), [], {})
            self.fl.thread_spec[site] = spec
            return spec
        if self.fl._calls_by_id is None:
            self.fl._calls_by_id = {id(c): c for c in self.fl.mod.of(ast.Call)}
        call = self.fl._calls_by_id.get(site) if isinstance(site, int) else None
        if call is None:
            return None
        ctx = self.fl.ev.ctx(self.fl.mod.scope_of(call))
        q = next((v[1] for v in self.fl.ev.eval(call.func, ctx) if v[0] == "ref" and v[1] in THREAD_CTORS), None)
        if q is None:
            return None
        args = [self.fl.ev.eval(a, ctx) for a in call.args]
        kws = {k.arg: self.fl.ev.eval(k.value, ctx) for k in call.keywords if k.arg}
        spec = (q, *_target_of(q, args, kws, lambda v: set()))
        self.fl.thread_spec[site] = spec
        return spec

    def join(self, sites: Iterable[Any]) -> None:
        sites = set(sites)
        if not sites:
            return
        self.fl._joins_seen.extend(sites)
        if self.fl.pend is not None:
            self.fl.pend = self.fl.pend - sites

    def pool_members(self, pools: Iterable[Any]) -> set:
        out: set = set()
        for p in pools:
            out |= {p} | self.fl.pool_futs.get(p, set())
        return out

    def spun_on(self, test: ast.AST, env: dict[str, set], fi: Any, depth: int) -> set:
        """The threads and futures a while loop's test polls (`t.is_alive()`, `fut.done()`): the loop ends
        when they have."""
        out: set = set()
        for n in ast.walk(test):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("is_alive", "done", "ready"):
                out |= {v[1] for v in self.fl._eval(n.func.value, env, fi, depth) if v[0] in ("thread", "future")}
        return out
