"""Work outside the timed window (`Joins`): CUDA streams of the solution's own and threads, processes and
pool tasks, and whether anything joins them back (a wait_stream, a synchronize, an event waited for; a
join, a future's result, a pool's shutdown) by value, anywhere the module runs or on the graded entry's
path before it returns.  UNJOINED-STREAM / UNJOINED-THREAD where the graded entry leaves such work
running, CAP-PROCESS where the module does."""

from __future__ import annotations

import ast
import re
from typing import Any

from .cap_cpp import CppSite
from .cap_process import ENTRY_NAMES
from .entry_threads import (FUTURE_JOIN, POOL_CTORS, POOL_JOIN, POOL_SUBMIT, THREAD_JOIN, WAIT_ALL, _false_arg,
                            _short_timeout, _timeout, _unknown_join)
from .values import Ctx, Val, _src


_JOIN_CALL = re.compile(r"\.(wait_stream|wait_event|synchronize)\s*\(")

_STREAM_CONTEXTS = frozenset({"torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.streams.StreamContext",
                              "torch.cuda.use_stream"})
#: what joins a stream back: a wait of the caller's stream, a synchronize, an event waited for
_JOIN_NAMES = frozenset({"wait_stream", "wait_event", "synchronize", "query", "wait"})

PROCESS_CALLS = {
    "sys.exit": "exits the process", "os._exit": "exits the process at once", "os.abort": "aborts the process",
    "os.kill": "signals a process", "os.killpg": "signals a process group", "signal.signal": "installs a signal handler",
    "signal.alarm": "schedules SIGALRM", "signal.setitimer": "schedules a timer signal", "signal.pthread_kill": "signals a thread",
    "atexit.register": "runs code when the process exits", "threading.Thread": "starts a thread",
    "threading.Timer": "starts a timer thread", "_thread.start_new_thread": "starts a thread",
    "multiprocessing.Process": "starts a process", "multiprocessing.Pool": "starts worker processes",
    "concurrent.futures.ThreadPoolExecutor": "starts a thread pool", "concurrent.futures.ProcessPoolExecutor": "starts worker processes",
    "os.fork": "forks the process", "os.forkpty": "forks the process", "pty.spawn": "spawns a process",
    "os.system": "runs a shell command", "os.popen": "runs a shell command",
}


def _thread_desc(what: str, verb: str = "") -> str:
    """How a thread site reads in a message: `a thread (threading.Thread)`, `a task on a pool
    (concurrent.futures.ThreadPoolExecutor.submit)`, `_Filler (a threading.Thread subclass)`; with a verb,
    the call that makes it (`calls threading.Thread() (starts a thread)`)."""
    if what.startswith("class:"):
        return f"{'starts ' if verb else ''}{what[6:]} (a thread subclass)"
    if what.startswith("a ") and what.endswith(" thread"):
        return what
    if verb:
        return f"calls {what}() ({PROCESS_CALLS.get(what, 'starts a thread')})"
    if what in POOL_CTORS or what.rsplit(".", 1)[0] in POOL_CTORS:
        return f"a task on a pool ({what})"
    return f"{'a process' if 'Process' in what else 'a thread'} ({what})"


class Joins:
    """Side streams and threads of one module and what joins them back, reported through its auditor (`aud`)."""

    def __init__(self, aud: Any) -> None:
        self.aud = aud

    # ------------------------------------------------------------------ work outside the timed window
    def side_streams(self) -> None:
        """Work on a stream of its own that nothing joins back, read once (`stream_joins`) for every form:
        UNJOINED-STREAM (high) where the graded entry's own data flow makes such a stream current around its
        work (a with block or set_stream in the entry, a helper, a decorator's wrapper, an exec'd function;
        a C++ function the entry calls that guards its stream around work): the benchmark's events, recorded
        on the caller's stream, close before that work runs.  CAP-PROCESS (medium) for a stream of its own,
        made on the graded path or at import, that nothing joins (what it queues can outlive the timer)."""
        if not self.aud.streams and not getattr(self.aud, "_entered", None):
            return          # no stream of its own anywhere: nothing to join
        joined, every = self.stream_joins()
        graded = {fi.qualname: fi for fi in self.aud.entries.graded_entries()}
        for node, streams, unknown, entry in getattr(self.aud, "_entered", []):
            side = {v[1] for v in streams if v[1] != "current"}
            if (not side and not unknown) or every or (side and side <= joined) or (unknown and joined):
                continue
            fi = graded.get(entry) or next(iter(graded.values()), None)
            if fi is None:
                continue
            at = self.aud.entries.in_module(node, fi)
            how = _src(node.items[0].context_expr)[:60] if isinstance(node, ast.With) else _src(node)[:60]
            fn = getattr(self.aud.mod.scope_of(at), "qualname", entry)
            who = entry if fn == entry else f"{fn}, on {entry}'s path,"
            self.aud._cap("UNJOINED-STREAM", at, "process", entry,
                      f"{who} runs its work on a side stream ({how}) and nothing makes the caller's stream wait for "
                      "it (no wait_stream of it, no synchronize of it or of the device, no event waited for): events "
                      "recorded on the caller's stream time nothing of it", "high",
                      data={"entry": entry, "function": fn})
        reach = self.aud.entry_reach()
        for entry in self.aud.streams:
            at = entry[0]
            if isinstance(at, CppSite) and len(entry) > 3 and entry[3] and not every \
                    and any(s is not None and s.qualname in reach for s in (self.aud.mod.scope_of(n) for n in at.calls)):
                self.aud._cap("UNJOINED-STREAM", at, "process", entry[1],
                          f"the C++ function the graded entry calls makes its own stream current ({entry[1]}) around "
                          "the work and nothing joins it back (no stream or event wait, no device synchronize, in the "
                          "source or in Python): events recorded on the caller's stream time nothing of it", "high")
        used = self._streams_entered(reach)
        made = []
        for entry in self.aud.streams:
            at, q = entry[0], entry[1]
            node = entry[2] if len(entry) > 2 else None
            scope = self.aud._scope(at)
            if scope is None or scope.qualname in reach or (node is not None and id(node) in used):
                made.append((scope.qualname if scope else "the module", at, q, id(node) if node is not None else None))
        if not made or every:
            return
        cpp = [m for m in made if isinstance(m[1], CppSite)]
        if cpp:      # a stream the C++ source made and its source does not join (read_cpp): joined only from Python
            where, at, q, _ = cpp[0]
            self.aud._cap("CAP-PROCESS", at, "process", q,
                      f"{where} queues work on a stream the C++ source makes ({q}) and nothing joins it back (no "
                      "stream or event wait, no device synchronize in the source, no torch.cuda.synchronize): that "
                      "work can outlive the caller's timer", "medium")
        left = [m for m in made if not isinstance(m[1], CppSite) and m[3] not in joined]
        if not left:
            return
        where, at, q, _ = left[0]
        self.aud._cap("CAP-PROCESS", at, "process", q,
                  f"{where} queues work on a stream of its own ({q}) and nothing in the module joins that stream "
                  "back (no wait_stream of it, no synchronize of it or the device, no event waited for): that work "
                  "can outlive the caller's timer", "medium")

    def threads(self) -> None:
        """Work on a thread nothing joins, read once for every form (the thread reading, parallel to the stream
        one): UNJOINED-THREAD (high) where the graded entry's data flow starts a thread, a process or a pool's
        task that does work and returns on a path no join of that thread reaches (entry_flow: the join by value,
        on the path, before the return); CAP-PROCESS (medium) for a thread, process or pool the module starts
        and nothing joins (`thread_joins`: a join of it by value anywhere the module runs).  A thread joined
        before the entry returns is not reported."""
        flow = getattr(self.aud, "_flow", None)
        seen = flow.threads if flow is not None else {}
        pool_of = {f: p for p, fs in (flow.pool_futs.items() if flow is not None else ()) for f in fs}
        left: dict[Any, str] = {}
        for site, entry in (flow.outlived if flow is not None else ()):
            left.setdefault(site, entry)
            info = seen.get(site, {})
            if not info.get("work"):
                continue
            fi = next((f for f in self.aud.entries.graded_entries() if f.qualname == entry), None)
            at = self.aud.entries.in_module(info.get("node"), fi) if fi is not None else info.get("node")
            if at is None:
                continue
            fn = getattr(self.aud.mod.scope_of(at), "qualname", entry)
            who = entry if fn == entry else f"{fn}, on {entry}'s path,"
            self.aud._cap("UNJOINED-THREAD", at, "process", str(info.get("what")),
                      f"{who} starts {_thread_desc(str(info.get('what')))} that does work and returns on a path where "
                      "nothing joins it "
                      "(no join, result() or shutdown of it reached before the return): the work runs after the "
                      "caller's timer stops and may write the output after the check reads it", "high",
                      data={"entry": entry, "function": fn})
        for site, call in (flow.timed_joins.items() if flow is not None else ()):
            info = seen.get(site, {})
            if site in left or not info.get("work"):
                continue              # left running (high, above), or nothing of the call's work on it
            entry = info.get("entry")
            fi = next((f for f in self.aud.entries.graded_entries() if f.qualname == entry), None)
            at = self.aud.entries.in_module(call, fi) if fi is not None else call
            if at is None:
                continue
            self.aud._cap("UNJOINED-THREAD", at, "process", str(info.get("what")),
                      f"{entry} joins {_thread_desc(str(info.get('what')))} that does work only for a while "
                      f"(`{ast.unparse(call)[:80]}`): if the work takes longer the entry returns while it runs on, "
                      "after the caller's timer stops; reading the code cannot tell how long it takes (the replay's "
                      "timed-outputs probe does)", "medium", data={"entry": entry, "timeout": True})
        flow_pending = set(left) | {pool_of[f] for f in left if f in pool_of}
        flow_seen = set(seen) | {pool_of[f] for f in seen if f in pool_of}
        joined, every = self.thread_joins()
        sites = [(at, q, id(node)) for at, q, node in self.aud.thread_sites]
        for cls in sorted(self.thread_classes_started):
            node = next((n for n in self.aud.mod.of(ast.ClassDef) if n.name == cls), None)
            if node is not None:
                sites.append((node, "class:" + cls, "class:" + cls))
        for at, q, sid in sites:
            if sid in flow_seen:
                if sid not in flow_pending:
                    self.aud.legit.append(("CAP-PROCESS", q, getattr(at, "lineno", None), "joined before the entry returns"))
                    continue
            elif every or sid in joined or self._pool_done(sid, joined):
                self.aud.legit.append(("CAP-PROCESS", q, getattr(at, "lineno", None), "joined where the module runs"))
                continue
            self.aud._cap("CAP-PROCESS", at, "process", q, f"{_thread_desc(q, 'calls')} and nothing joins it"
                      + (" before the entry returns" if sid in flow_pending else "") + ": what it runs can outlive "
                      "the call and the caller's timer", "medium")

    def _pool_done(self, sid: Any, joined: set) -> bool:
        """A pool whose every task's result is read (or that was never handed any) leaves no work running."""
        futs = self._pool_futures.get(sid)
        return isinstance(sid, int) and sid in self.aud.pool_kind and (not futs or futs <= joined)

    def thread_joins(self) -> tuple[set, bool]:
        """The one reading of what joins a thread, a process, a pool or a future, by what the code denotes
        (an alias, getattr, a class attribute, a partial): (the sites some join waits for: a thread's or
        pool's constructor call, a future's submit call; whether some join waits for every one).  `t.join()`
        (no timeout), `fut.result()`, `ex.shutdown()` (not wait=False), a pool's with block, `pool.join()`;
        a join whose receiver the reading cannot name (`.join()` with no arguments, `.result()`) and
        `concurrent.futures.wait` join every one.  A join import never runs (a __main__ self-test) joins
        nothing."""
        memo = self.__dict__.get("_tjoins")
        if memo is not None:
            return memo
        joined: set = set()
        every = False
        self._pool_futures: dict[Any, set] = {}
        if self.aud.thread_sites or any(isinstance(n, ast.ClassDef) and self.aud.thread_class(n.name) for n in self.aud.mod.of(ast.ClassDef)):
            for c in self.aud.mod.of(ast.Call):
                if not isinstance(c, ast.Call) or self.aud.mod.in_main(c):
                    continue
                ctx = Ctx(self.aud.mod.scope_of(c), None, 0)
                fvals = self.aud.eval(c.func, ctx)
                if not fvals:
                    if isinstance(c.func, ast.Attribute) and _unknown_join(c.func.attr, c):
                        every = True
                    continue
                for fv in fvals:
                    if fv[0] == "ref" and fv[1] in WAIT_ALL:
                        every = every or not _timeout(c, 1)
                    if fv[0] != "tmethod":
                        continue
                    (kind, site), name = fv[1][:2], fv[2]
                    if kind == "thread" and name in THREAD_JOIN and not _short_timeout(c, 0):
                        joined.add(site)
                    elif kind == "future" and name in FUTURE_JOIN and not (name == "wait" and _timeout(c, 0)):
                        joined.add(site)
                    elif kind == "pool" and name in POOL_JOIN and not (name == "shutdown" and _false_arg(c, "wait", 0)):
                        joined.add(site)
                    elif kind == "pool" and name in POOL_SUBMIT:
                        self._pool_futures.setdefault(site, set()).add(id(c))
                        if name == "map" and not isinstance(self.aud.mod.parent.get(c), ast.Expr):
                            joined.add(id(c))     # its results are read (an unread map is not)
            for w in self.aud.mod.of(ast.With, ast.AsyncWith):
                if self.aud.mod.in_main(w):
                    continue
                ctx = Ctx(self.aud.mod.scope_of(w), None, 0)
                for it in w.items:
                    joined |= {v[1] for v in self.aud.eval(it.context_expr, ctx) if v[0] == "pool"}
        self.__dict__["_tjoins"] = (joined, every)
        return joined, every

    @property
    def thread_classes_started(self) -> set[str]:
        """The solution's Thread subclasses something starts (`W(...).start()`, by any name)."""
        out: set[str] = set()
        if not any(self.aud.thread_class(n.name) for n in self.aud.mod.of(ast.ClassDef)):
            return out
        for c in self.aud.mod.of(ast.Call):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "start" \
                    and not self.aud.mod.in_main(c):
                for v in self.aud.eval(c.func, Ctx(self.aud.mod.scope_of(c), None, 0)):
                    if v[0] == "tmethod" and isinstance(v[1][1], str) and v[1][1].startswith("class:"):
                        out.add(v[1][1][6:])
        return out

    def _streams_entered(self, reach: set[str]) -> set[int]:
        """Streams (by constructor) the graded path makes current (`torch.cuda.stream(s)`), wherever they
        were made (`self.s = torch.cuda.Stream()` in __init__)."""
        out: set[int] = set()
        for q in reach:
            fi = self.aud.mod.funcs.get(q)
            if fi is None:
                continue
            ctx = Ctx(fi, None, 0)
            for c in fi.of(ast.Call):
                if c.args and any(v[0] == "ref" and v[1] in ("torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.set_stream")
                                  for v in self.aud.eval(c.func, ctx)):
                    out |= {v[1] for v in self.aud.eval(c.args[0], ctx) if v[0] == "stream"}
        return out

    def stream_joins(self) -> tuple[set, bool]:
        """The one reading of what joins a stream back, by what the code denotes (whatever names it:
        an alias, getattr, a class attribute, a partial, a lambda): (the streams some join waits for, by
        constructor; whether some join waits for every stream).  `current_stream().wait_stream(s)` and
        `s.synchronize()` join s; a wait for an event (`wait_event(e)`, `e.wait()`, `e.synchronize()`) joins
        the streams that event is recorded on (`e.record(s)`, `s.record_event(e)`, `s.record_event()`, an
        argument-less `e.record()` on the stream current where it runs); `torch.cuda.synchronize()` joins
        every stream; so does a wait whose stream or event the reading cannot name, an event recorded where
        the reading cannot tell on which stream, a join in code run from a string, and a wait or device
        synchronize in a C++ source the solution builds.  A join import never runs (a __main__ self-test)
        joins nothing."""
        memo = self.__dict__.get("_joins")
        if memo is not None:
            return memo
        joined: set = set()
        every = any(_JOIN_CALL.search(n.value) for n in self.aud.mod.of(ast.Constant) if isinstance(n.value, str)) \
            or bool(getattr(self.aud, "cpp_joins", False))
        for c in self.aud.mod.of(ast.Call):
            if every:
                break
            if not isinstance(c, ast.Call) or self.aud.mod.in_main(c):
                continue
            ctx = Ctx(self.aud.mod.scope_of(c), None, 0)
            fvals = self.aud.eval(c.func, ctx)
            if not fvals:
                f = c.func       # a receiver the reading does not know: the method's name says it is a join
                if isinstance(f, ast.Attribute) and f.attr in _JOIN_NAMES:
                    if f.attr != "wait_stream":
                        every = True
                    else:
                        every = self._join_of(("streammethod", None, "wait_stream"), [self.aud.eval(a, ctx) for a in c.args],
                                              joined)
                continue
            args = [self.aud.eval(a, ctx) for a in c.args]
            for fv in fvals:
                every = every or self._join_of(fv, args, joined)
        self.__dict__["_joins"] = (joined, every)
        return joined, every

    def _join_of(self, fv: Val, args: list[set], joined: set, depth: int = 0) -> bool:
        """Add the streams the call `fv(*args)` joins to `joined`; True when it joins every stream."""
        k = fv[0]
        if k == "ref":
            if fv[1] in ("torch.cuda.synchronize", "torch.cuda.streams.synchronize", "torch.synchronize"):
                return True                   # the device: every stream
            if fv[1].endswith(".wait_stream") and fv[1].startswith("torch."):      # Stream.wait_stream(cur, s)
                return self._join_of(("streammethod", None, "wait_stream"), args[1:], joined)
            return False
        if k == "streammethod":
            if fv[2] == "wait_stream":
                if not args:
                    return False
                streams = {v[1] for v in args[0] if v[0] == "stream"}
                joined |= streams - {"current"}
                return not streams           # a stream the reading cannot name: maybe this one
            if fv[2] == "synchronize":
                if fv[1] not in (None, "current"):
                    joined.add(fv[1])
                return fv[1] is None
            if fv[2] == "query":              # polled from the host: that stream
                if fv[1] not in (None, "current"):
                    joined.add(fv[1])
                return fv[1] is None
            if fv[2] == "wait_event":
                events = {v for v in args[0] if v[0] == "event"} if args else set()
                return not events or any(self._event_join(v, joined) for v in events)
            return False
        if k == "eventmethod":
            return fv[2] in ("wait", "synchronize", "query") and self._event_join(("event", fv[1]), joined)
        if k == "partial" and depth < 3:
            p = self.aud.partials.get(fv[1])
            if p:
                f, pargs, _ = p
                return any(self._join_of(inner, [set(a) for a in pargs] + args, joined, depth + 1) for inner in f)
        return False

    def _event_join(self, ev: Val, joined: set) -> bool:
        """A wait for the event `ev` joins the streams it is recorded on; True where the reading cannot say
        which (then it may be any stream)."""
        key = ev[1]
        if isinstance(key, tuple) and key[0] == "on":      # s.record_event(): recorded on s
            streams = {key[1]} if key[1] is not None else None
        else:
            streams = self._event_records().get(key)      # never recorded where the reading sees: unknown
        if streams is None:
            return True
        joined |= set(streams) - {"current"}
        return False

    def _event_records(self) -> dict[Any, set | None]:
        """Each event (by constructor) -> the streams it is recorded on (None: one the reading cannot name)."""
        memo = self.__dict__.get("_ev_records")
        if memo is not None:
            return memo
        rec: dict[Any, set | None] = {}

        def add(key: Any, streams: set | None) -> None:
            if streams is None or key in rec and rec[key] is None:
                rec[key] = None
            else:
                rec[key] = (rec.get(key) or set()) | streams

        for c in self.aud.mod.of(ast.Call):
            f = c.func if isinstance(c, ast.Call) else None
            if not isinstance(f, ast.Attribute) or f.attr not in ("record", "record_event") or self.aud.mod.in_main(c):
                continue
            ctx = Ctx(self.aud.mod.scope_of(c), None, 0)
            for fv in self.aud.eval(f, ctx):
                if fv[0] == "eventmethod" and fv[2] == "record":
                    a = c.args[0] if c.args else next((k.value for k in c.keywords if k.arg == "stream"), None)
                    if a is None:
                        add(fv[1], self._current_streams(c))
                    else:
                        add(fv[1], {v[1] for v in self.aud.eval(a, ctx) if v[0] == "stream"} or None)
                elif fv[0] == "streammethod" and fv[2] == "record_event":
                    a = c.args[0] if c.args else next((k.value for k in c.keywords if k.arg == "event"), None)
                    for v in (self.aud.eval(a, ctx) if a is not None else ()):
                        if v[0] == "event" and not isinstance(v[1], tuple):
                            add(v[1], {fv[1]} if fv[1] is not None else None)
        self.__dict__["_ev_records"] = rec
        return rec

    def _current_streams(self, node: ast.AST, depth: int = 0) -> set | None:
        """The streams current where `node` runs (None: the reading cannot say): a `with torch.cuda.stream(s)`
        around it in its function; else, in a function that sets no stream, the caller's stream for an
        entry or module-level code and, for a helper, the streams current at each of its call sites."""
        fi = self.aud.mod.scope_of(node)
        ctx = Ctx(fi, None, 0)
        n = node
        while True:
            p = self.aud.mod.parent.get(n)
            if p is None or isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                break
            if isinstance(p, (ast.With, ast.AsyncWith)) and n in p.body:
                for it in p.items:
                    ce = it.context_expr
                    fv = self.aud.eval(ce.func, ctx) if isinstance(ce, ast.Call) else set()
                    if any(v[0] == "ref" and v[1] in _STREAM_CONTEXTS for v in fv):
                        return {v[1] for v in self.aud.eval(ce.args[0], ctx) if v[0] == "stream"} or None if ce.args else None
                    if not isinstance(ce, ast.Call) and not self.aud.eval(ce, ctx):
                        return None          # a context the reading cannot name (a StreamContext kept in a local)
            n = p
        if fi is None:
            return {"current"}
        if any(v[0] == "ref" and v[1] in ("torch.cuda.set_stream",) for c in fi.of(ast.Call) for v in self.aud.eval(c.func, ctx)):
            return None
        if fi.node.name in ENTRY_NAMES:
            return {"current"}
        callers = self._callers().get(fi.qualname)
        if not callers or depth >= 3:
            return None
        out: set = set()
        for c in callers:
            got = self._current_streams(c, depth + 1)
            if got is None:
                return None
            out |= got
        return out

    def _callers(self) -> dict[str, list[ast.Call]]:
        """The solution's functions -> the calls that reach them (by what the call's function denotes)."""
        memo = self.__dict__.get("_callers_memo")
        if memo is None:
            memo = self.__dict__["_callers_memo"] = {}
            for c in self.aud.mod.of(ast.Call):
                if isinstance(c, ast.Call) and not self.aud.mod.in_main(c):
                    for v in self.aud.eval(c.func, Ctx(self.aud.mod.scope_of(c), None, 0)):
                        if v[0] == "func":
                            memo.setdefault(v[1], []).append(c)
        return memo
