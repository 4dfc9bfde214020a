"""Where a replay's wall time went, measured on the replay's side (the trust boundary's parent).

One `Account` per replay (`Record.account`).  Every span of the parent's timeline is charged to one
kind, exclusively (a span inside another is taken out of the outer one), and to the probe running
then, so the kinds add up to the replay's total with `other` (the probes' own logic in this process):

=============  ================================================================================
kind           what
=============  ================================================================================
process        starting the solution's process (hello, its imports of torch and the reference,
               the CUDA IPC test) and ending it; what this process waits for, not the boot that
               overlaps input generation
build          the solution's import (extension compiles at import) and the first request of each
               child that runs its code (a lazy build inside the first call); never `solution` too
construct      the solution's model construction and state loading (`Model(*init)`, load_state_dict)
solution       every other request that runs the solution's code (call, time, wall, bench, trace),
               as this process measured it: the round trip of the request
reference      the reference's forward calls (the deck's call too, where it arbitrates)
reference_model  building the reference's models
inputs         generating the deck's inputs
compare        comparisons
exchange       what crosses to the child and back besides calls (inputs, state files, writes,
               snapshots, metadata, deletes, the outputs' transfer)
other          the rest of the total (the probes' own logic, collection, cleanup)
=============  ================================================================================

`record()` -> the replay's `info["account"]`: the seconds per kind, `overhead_s` = total - the
solution's share (build + construct + solution: the solution's own code, which the deck's check runs
too), `solution_in_child_s` (the child's own clock around the solution's code in those requests, at
most their round trips; the child is the solution's process, so this is for comparison only) and
`overhead_child_clock_s` (the overhead if that clock is believed: it adds the worker's per-call
machinery), per probe the same kinds, and `counts` (reference calls computed and
reused, reference models built and reused, input sets generated and reused) and `requests` (per child
request op: how many and their round trips).  docs/replay.md,
"Overhead".  Standard library only."""

from __future__ import annotations

import time
from contextlib import contextmanager

#: the solution's build (an account kind, not the replay's `build` probe row)
BUILD_KIND = "build"
#: the kinds, in the order the account lists them
KINDS = ("process", BUILD_KIND, "construct", "solution", "reference", "reference_model", "inputs", "compare",
         "exchange", "other")
#: the solution's own share of the time (the rest is the replay's overhead)
SOLUTION_SHARE = (BUILD_KIND, "construct", "solution")

#: kind -> what it holds, in a few words (the HTML report's account table)
KIND_TEXT = {"process": "starting and ending the solution's process", BUILD_KIND: "the solution's import and "
             "the first call of each child (a lazy build)", "construct": "the solution's model construction and "
             "state loading", "solution": "the solution's other calls (round trips)", "reference": "the "
             "reference's forward calls", "reference_model": "building the reference's models", "inputs":
             "generating the deck's inputs", "compare": "comparisons", "exchange": "inputs, states, snapshots and "
             "outputs crossing to the child and back", "other": "the probes' own logic, collection, cleanup"}

#: child request op -> kind (anything else crossing is `exchange`)
REQUEST_KIND = {"call": "solution", "time": "solution", "wall": "solution", "bench": "solution",
                "trace": "solution", "new": "construct", "load": "construct", "hello": "process",
                "bye": "process", "ipc_test": "process"}
#: the requests that run the solution's code (the first one of a child is its lazy build)
RUNS_SOLUTION = frozenset(k for k, v in REQUEST_KIND.items() if v == "solution")

#: Record.timed phase -> kind
PHASE_KIND = {"inputs": "inputs", "reference": "reference", "deck-reference": "reference",
              "reference-model": "reference_model", "compare": "compare", "state-transfer": "exchange",
              "input-transfer": "exchange", "output-transfer": "exchange", "child-start": "process",
              "child-construct": "construct", "child-call": "exchange"}

#: the labels of time spent before the first probe (the early start, the child's boot wait) and after
#: the last one (ending the child)
BEFORE_PROBES, AFTER_PROBES = "(start)", "(end)"


def request_kind(op: str, fields: dict) -> str:
    """The kind of one child request: the solution's import is its build, the reference's the process's."""
    if op == "import":
        return BUILD_KIND if fields.get("module") == "solution" else "process"
    return REQUEST_KIND.get(op, "exchange")


class Account:
    """The replay's timeline, charged exclusively to kinds and to the probe running (`label`: set by
    the session as each probe begins; `AFTER_PROBES` while the child is ended)."""

    def __init__(self) -> None:
        #: the probe the time goes to now (None: before the first one)
        self.label: str | None = None
        self.s: dict[str, float] = {}
        self.by_probe: dict[str, dict[str, float]] = {}
        self._stack: list[float] = []      # per open span: the time of the spans inside it
        #: reference calls / models / inputs computed and reused (Oracle)
        self.counts: dict[str, int] = {}
        #: what the child says its calls took (its own clock; not trusted, for comparison)
        self.claimed_solution_s = 0.0
        #: child request op -> [count, seconds of its round trips]
        self.requests: dict[str, list] = {}

    @contextmanager
    def span(self, kind: str):
        t0 = time.perf_counter()
        self._stack.append(0.0)
        try:
            yield
        finally:
            took = time.perf_counter() - t0
            inner = self._stack.pop()
            self.add(kind, max(0.0, took - inner))
            if self._stack:
                self._stack[-1] += took

    def add(self, kind: str, seconds: float) -> None:
        self.s[kind] = self.s.get(kind, 0.0) + seconds
        p = self.label or BEFORE_PROBES
        d = self.by_probe.setdefault(p, {})
        d[kind] = d.get(kind, 0.0) + seconds

    def request(self, op: str, seconds: float) -> None:
        """One child request's round trip (besides its kind's span): the account's per-op table."""
        c = self.requests.setdefault(op, [0, 0.0])
        c[0] += 1
        c[1] += seconds

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def record(self, total_s: float, probe_s: dict[str, float] | None = None) -> dict:
        """The account of a replay that took `total_s` (its probes' wall times in `probe_s`)."""
        def r(v: float) -> float:
            return round(v, 3)
        kinds = {k: self.s.get(k, 0.0) for k in KINDS if k != "other"}
        kinds["other"] = max(0.0, total_s - sum(kinds.values()))
        share = sum(kinds[k] for k in SOLUTION_SHARE)
        out: dict = {"total_s": r(total_s)}
        out.update({f"{k}_s": r(v) for k, v in kinds.items()})
        out["overhead_s"] = r(max(0.0, total_s - share))
        # the child's own clock around the solution's code, bounded by what this process measured: the
        # rest of those round trips is the worker's per-call machinery (tamper snapshot, export, audit)
        inside = min(self.claimed_solution_s, kinds["solution"])
        out["solution_in_child_s"] = r(inside)
        out["overhead_child_clock_s"] = r(max(0.0, total_s - share + kinds["solution"] - inside))
        probes: dict[str, dict] = {}
        for p, d in self.by_probe.items():
            row = {f"{k}_s": r(v) for k, v in sorted(d.items(), key=lambda kv: KINDS.index(kv[0])) if v >= 0.0005}
            wall = (probe_s or {}).get(p)
            if wall is not None:
                row["s"] = r(wall)
                row["other_s"] = r(max(0.0, wall - sum(d.values())))
                row["overhead_s"] = r(max(0.0, wall - sum(d.get(k, 0.0) for k in SOLUTION_SHARE)))
            probes[p] = row
        out["probes"] = probes
        out["counts"] = dict(sorted(self.counts.items()))
        out["requests"] = {op: {"n": n, "s": r(t)} for op, (n, t) in sorted(self.requests.items(), key=lambda kv: -kv[1][1])}
        return out


def line(acct: dict) -> str:
    """One line of the account for the CLI: total, the solution's share, the overhead and its largest parts."""
    if not acct:
        return "account: none (the replay did not run)"
    parts = sorted(((k, acct.get(f"{k}_s") or 0.0) for k in KINDS if k not in SOLUTION_SHARE),
                   key=lambda kv: -kv[1])
    c = acct.get("counts") or {}
    refs = (f"; reference calls {c.get('reference_computed', 0)} computed, {c.get('reference_reused', 0)} reused, "
            f"models {c.get('reference_model_built', 0)} built, {c.get('reference_model_reused', 0)} reused")
    slow = max(((p, d.get("overhead_s") or 0.0) for p, d in (acct.get("probes") or {}).items() if "s" in d),
               key=lambda kv: kv[1], default=None)
    return (f"account: total {acct.get('total_s')} s = solution {acct.get('solution_s')} + build "
            f"{acct.get('build_s')} + construct {acct.get('construct_s')} + overhead {acct.get('overhead_s')} ("
            + ", ".join(f"{k} {v:.3g}" for k, v in parts if v >= 0.0005) + ")" + refs
            + (f"; most overhead: {slow[0]} {slow[1]:.3g} s" if slow else ""))
