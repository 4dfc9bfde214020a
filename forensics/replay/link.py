"""The link to the solution's process: starting it (hello, the reference's and the solution's imports,
the CUDA IPC test), its time limits (the whole-probe deadline, a lazy build's budget on its first
call), and ending it (close, or kill on an interrupt).

`Link` holds one child at a time (`runner.Child`, in its sandbox) and says nothing about what
crosses it: inputs, calls and outputs are `exchange.Exchange`'s.  A child that cannot start or
import the solution is reported through the `Record` and never started again (`build_failed`)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import torch

from forensics.vocab import BUILD

from .account import BUILD_KIND, request_kind
from .outcome import Limits
from .record import Record, classify_error
from .runner import Child, Reply
from .worker import IPC_TEST_N, pack_load


class Link:
    """The solution's process of one replay: one live child at a time."""

    #: requests that run the solution's code (where a lazy build happens on the first one)
    RUN_OPS = ("call", "time", "wall")

    def __init__(self, scratch: Any, device: str, limits: Limits, rec: Record, python: str | None = None) -> None:
        self.scratch = scratch
        self.device = device
        self.limits = limits
        self.rec = rec
        self.python = python
        self.child: Child | None = None
        self._booting: Child | None = None   # a child started before the first request (`boot`)
        #: the reply of the start or import that failed: no child is started again
        self.build_failed: Reply | None = None
        self.ipc = False   # results over CUDA IPC (decided per child by a known-tensor test)
        self.probe_deadline: float | None = None  # Limits.probe_s of the probe running now
        #: the solution module's public names (`import` reply)
        self.sol_attrs: list[str] = []
        #: the path tracer's record of the solution's import (`import` reply: worker._traced)
        self.import_path: dict = {}
        #: called with every new child before its first request (the exchange forgets the last one's
        #: slots and watches this one's deletes)
        self.on_new_child: Callable[[Child], None] | None = None

    @property
    def ref_owner(self) -> int:
        """The uid the child's files have on this host (its CUDA IPC reference counters, which
        pack_load checks before torch acts on them): the sandbox uid, or ours where it has none."""
        owner = getattr(self.scratch, "_owner", None)
        return os.geteuid() if owner is None else owner

    def set_deadline(self, deadline: float | None) -> None:
        """Bound every child request of the current probe (a new child too) by the whole-probe limit."""
        self.probe_deadline = deadline
        if self.child is not None:
            self.child.deadline = deadline

    def boot(self) -> None:
        """Start a child now; `ensure_child` waits for it (the replay generates inputs meanwhile)."""
        self._booting = Child(self.scratch, self.device, self.python)

    def alive(self) -> bool:
        return self.child is not None and self.child.alive()

    # ---------------------------------------------------------------- start
    def ensure_child(self) -> Child | None:
        """A live child with `reference` and `solution` imported, or None (build failed)."""
        rec = self.rec
        if self.build_failed is not None:
            return None
        if self.child is not None and self.child.alive():
            return self.child
        with rec.account.span("process"):   # the start's requests are charged by their own kinds
            return self._start()

    def _start(self) -> Child | None:
        rec = self.rec
        if self.child is not None:
            self.child.kill()
        t0 = time.monotonic()
        ch, self._booting = self._booting, None
        if ch is None or ch.proc.poll() is not None:   # (a booted child: only the wait left counts)
            ch = Child(self.scratch, self.device, self.python)
        self._account_requests(ch)
        if self.on_new_child is not None:
            self.on_new_child(ch)
        ch.deadline = self.probe_deadline
        ch.build_grace_s = float(self.limits.build_s)
        ch.on_build_wait = self._waited_on_build
        rec.progress("starting the solution's process")
        h = ch.request("hello", self.limits.build_s)
        if not h.ok:
            self.build_failed = h
            rec.failed_reply(BUILD, h, what="worker start")
            return None
        rec.hello = {k: v for k, v in h.data.items() if k not in ("id", "ok", "status")}
        steps = rec.out.info.setdefault("start_steps_s", [])   # per child: where its start went
        steps.append({"hello": round(h.elapsed_s, 3)})
        rec.progress("importing the reference in the solution's process")
        r = ch.request("import", self.limits.build_s, module="reference")
        steps[-1]["import_reference"] = round(r.elapsed_s, 3)
        if not r.ok:
            self.build_failed = r
            rec.failed_reply(BUILD, r, what="import reference")
            return None
        rec.progress("importing (building) the solution")
        r = ch.request("import", self.limits.build_s, module="solution")
        steps[-1]["import_solution"] = round(r.elapsed_s, 3)
        rec.note_tamper(r, "import")
        if not r.ok:
            self.build_failed = r
            text = r.error + "\n" + str(r.get("tb", ""))
            full = text + "\n" + str(r.get("log_tail", "") or "")
            if r.status not in ("early_exit", "crash", "timeout") and \
                    classify_error(full, rec.local_modules()) != "not_replayable" and not rec.arch_rebuild_failure(full):
                rec.finding("replay-build-failed", f"solution.py failed to import: {r.error[:300]}.",
                            {"traceback": str(r.get("tb", ""))[-3000:]})
                rec.row(BUILD, "error", detail=text[-3000:])
            else:
                rec.failed_reply(BUILD, r, what="import solution")
            return None
        self.sol_attrs = r.get("attrs") or []
        self.import_path = r.get("path") or {}
        t_ipc = time.monotonic()
        self._ipc_test(ch)
        steps[-1]["ipc_test"] = round(time.monotonic() - t_ipc, 3)
        rec.out.info.setdefault("import_s", []).append(round(time.monotonic() - t0, 3))
        rec.add_phase("child-start", time.monotonic() - t0)
        self._arm_first_run(ch)
        self.child = ch
        return ch

    def _account_requests(self, ch: Child) -> None:
        """Charge every request of `ch` to its kind in the replay's account (account.py), as this
        process measures it (the round trip): the solution's import and the first request of the child
        that runs its code are its build (a lazy build happens there), never its calls too."""
        orig = ch.request
        first = [True]

        def request(op: str, timeout: float, **fields: Any) -> Reply:
            kind = request_kind(op, fields)
            if kind == "solution" and first[0]:
                first[0] = False
                kind = BUILD_KIND
            t0 = time.perf_counter()
            try:
                with self.rec.account.span(kind):
                    r = orig(op, timeout, **fields)
            finally:
                self.rec.account.request(op, time.perf_counter() - t0)
            if r.get("arch_rebuilt"):     # a build the child rewrote for this GPU (worker.rewrite_arch_flags)
                self.rec.note_arch_rebuild(r.get("arch_rebuilt"))
            return r

        ch.request = request  # type: ignore[method-assign]

    def _arm_first_run(self, ch: Child) -> None:
        """Lazy builds: many solutions compile inside their first forward (a JIT extension, Triton
        autotuning) instead of at import.  The first request of a new child that runs solution code
        gets the build budget (Limits.build_s, when larger than its own) and is exempt from the
        probe's whole-probe deadline, which is pushed back by the time it took."""
        orig = ch.request
        armed = [True]

        def request(op: str, timeout: float, **fields: Any) -> Reply:
            if not (armed[0] and op in self.RUN_OPS):
                return orig(op, timeout, **fields)
            armed[0] = False
            budget = max(float(timeout), float(self.limits.build_s))
            saved, grace = ch.deadline, ch.build_grace_s
            ch.deadline, ch.build_grace_s = None, 0.0   # this call has the build budget already
            t0 = time.monotonic()
            try:
                return orig(op, budget, **fields)
            finally:
                took = time.monotonic() - t0
                extra = max(0.0, took - float(timeout))
                ch.build_grace_s = max(0.0, grace - extra)   # one build budget per child in all
                if saved is not None:
                    ch.deadline = saved + extra
                if self.probe_deadline is not None:
                    self.probe_deadline += extra
                self.rec.out.info.setdefault("first_run_s", []).append(
                    {"op": op, "s": round(took, 3), "budget_s": budget})

        ch.request = request  # type: ignore[method-assign]

    def _waited_on_build(self, op: str, granted_s: float, tools: list[str]) -> None:
        """A request waited past its limit while build tools ran under the child (runner's
        build grace): the probe's whole-probe limit moves back by as much, and the wait is recorded
        (out.info['build_waits'])."""
        if self.probe_deadline is not None:
            self.probe_deadline += granted_s
        self.rec.out.info.setdefault("build_waits", []).append(
            {"op": op, "extra_s": granted_s, "tools": tools})

    def _ipc_test(self, ch: Child) -> None:
        """Results travel as CUDA IPC handles (mapped and copied on the device) when a known tensor
        comes through intact; otherwise, and on the CPU, as bytes in the pack file."""
        self.ipc = False
        info = self.rec.out.info
        if not str(self.device).startswith("cuda"):
            info["transfer"] = "pack"
            return
        p = self.scratch.path("ipc-test")
        r = ch.request("ipc_test", self.limits.call_s, save=p)
        why = r.error
        if r.ok:
            try:
                t = pack_load(p, ipc=True, ref_owner=self.ref_owner)["t"]
                self.ipc = t.is_cuda and torch.equal(t.cpu(), torch.arange(IPC_TEST_N, dtype=torch.float32))
                why = "" if self.ipc else "the test tensor came back wrong"
            except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
                self.rec.note_exchange(e)
                why = str(e)
        Path(p).unlink(missing_ok=True)
        info["transfer"] = "pack+cuda-ipc" if self.ipc else f"pack (CUDA IPC unavailable: {why[:200]})"

    # ---------------------------------------------------------------- end
    def abort(self) -> None:
        """Kill the children now (an interrupt): no completion marker, nothing waited for."""
        for ch in (self._booting, self.child):
            if ch is not None:
                try:
                    ch.kill()
                except Exception:  # noqa: BLE001 - best effort while the replay is being stopped
                    pass
        self._booting = self.child = None

    def close(self) -> None:
        """End the children: the live one says goodbye (its last tamper report, its GPU peak)."""
        rec = self.rec
        if self.device.startswith("cuda") and torch.cuda.is_initialized():
            rec.gpu_peak("replay", round(torch.cuda.max_memory_reserved() / 2**30, 3))
        if self._booting is not None:
            self._booting.kill()
            self._booting = None
        if self.child is not None:
            r = self.child.close()
            if r is not None and r.ok and r.get("gpu_peak_gb") is not None:
                rec.gpu_peak("solution", r.get("gpu_peak_gb"))
            if r is not None and r.status in ("early_exit", "crash"):
                rec.failed_reply(BUILD, r, what="shutdown")
            elif r is not None:
                rec.note_tamper(r, "the replay")
            self.child = None
