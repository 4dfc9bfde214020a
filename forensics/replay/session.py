"""The replay session: what a probe may do with the solution, and the trust boundary it does it through.

A probe (forensics/replay/probes/) gets one `Session` and uses only its public names, listed here.
Everything that judges stays on this side: the inputs are generated here, the reference runs here,
comparisons, clocks that count and tamper checks run here.  What crosses to the solution's process
(the child, `worker.py`) is named by the methods below, one per kind of request:

====================  ==========================================================================
crosses to the child  method
====================  ==========================================================================
start / restart       `child()` (hello, import of the reference and the solution; None: no build)
build a model         `new_model` (the deck's `Model(*init)` with a state file), `build` (any
                      factory, e.g. `Model(Config(...))`), `load_state`, `set_globals`
inputs                `put` (watched inputs: the memory stays this process's, a write into it is
                      seen here), `put_state` (a state the API may change), `write` (in place)
calls                 `call` (the solution on slots, its output exported back, inputs checked),
                      `call_entry` (a module-level entry point: run / prefill / decode_steps)
outputs               `fetch` (what `snapshot` / `bench` saved), `sol_out`
time                  `time` (CUDA events, L2 flush), `wall` (a program, perf_counter), `bench`
                      (the deck benchmark's calling pattern), `trace` (kernel / operator names)
bookkeeping           `meta` (ids and data_ptrs), `recycle`, `delete`
====================  ==========================================================================

Nothing comes back but data: replies (`Reply`: ok, status, data, error) and tensors.  A reply that
is not ok is turned into rows and findings by `failed_reply`; torch patches the child reports by
`note_tamper`; a swapped exchange file by `note_exchange`.

Judging (this process only): `make_inputs`, `ref_model` / `check_reference` / `reference` /
`reference_module`, `compare` / `check_compare`, `stress_cases`, the shapes (`check_shapes`,
`bench_shapes`, `probe_shape`), and the results: `row`, `finding`, `rows`, `info`.  What is computed
once per replay and kept here: the reference models (`ref_model`, shared by the check and every
probe; `other_weights` lends one other weights and puts its own back; `share_reference` for a model
a probe family builds; `seeded_reference` for the APIs that re-seed it per seed, decode and rollout) and the reference outputs named by `ref_key` (`reference(..., key=)`).  Where
the time goes: the replay's account (account.py, `info["account"]`; `charged` for reference-side
work a probe family does itself).

The child handle `ch` that `child()` returns is opaque to a probe: it names the process a request
goes to (a child restarted after a crash is another one) and is passed back to the methods above;
`alive(ch)` says whether it still runs.  The names in `RUNNER_ONLY` are the driver's (drivers.py:
starting early, a probe's deadline, freeing memory, closing), not a probe's.

Value helpers (pure functions over tensors and results) are re-exported from `values.py`.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from .account import AFTER_PROBES, KINDS
from .exchange import Exchange
from .link import Link
from .oracle import Oracle
from .outcome import Limits, Outcome
from .record import Record
from .runner import Reply, child_files
from .values import (changed_elems, maxdiff, perturb_state, region_mutate, reuse, same, shape_key,  # noqa: F401
                     shape_label, stats, tensors, to_cpu, to_dev, unwrap)
from .worker import load_exchange, pack_save, save_exchange

#: the source files of a solution kernel names can be read from (`solution_sources`)
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")


def solution_sources(sol_dir: str | Path, suffixes: Iterable[str] = SOURCE_SUFFIXES) -> list[tuple[str, bytes]]:
    """(relative path, bytes) of the solution's own files in its scratch copy.  sol/ is the child's
    cwd and it may be alive: read through runner.child_files (never through a symlink, never a
    FIFO, regular files only)."""
    return list(child_files(Path(sol_dir), tuple(suffixes)))



#: Session names that belong to the replay's driver (forensics/replay/drivers.py), not to probes:
#: starting, ending and accounting for the whole replay.  tests/test_layers.py keeps probes off them.
RUNNER_ONLY = frozenset({"outcome", "build_failed", "started", "start_early", "begin_probe", "end_probe",
                         "free_memory", "abort", "close", "finish", "emit", "note_planted"})


class Session:
    """One solution against one problem (its `spec`), through one child at a time, on one device.

    The probes' interface (the module docstring says what crosses to the child); its parts are
    private: `Record` (rows, findings, failures), `Link` (the child's start and end), `Exchange`
    (what crosses per request and the watch on the inputs), `Oracle` (inputs, reference, comparison)."""

    def __init__(self, spec: Any, scratch: Any, device: str = "cpu", shapes: str = "canonical",
                 limits: Limits | None = None, archive_date: str | None = None, ref_impl: str = "reference",
                 python: str | None = None, seeds: Iterable[int] | None = None, archived: dict | None = None,
                 on_event: Callable[[dict], None] | None = None, shape_list: list[dict] | None = None,
                 reuse: bool = True) -> None:
        self._scratch = scratch
        self._limits = limits or Limits()
        self._archived = archived or {}
        self._rec = Record(scratch, device, on_event=on_event)
        self._link = Link(scratch, device, self._limits, self._rec, python=python)
        self._ex = Exchange(scratch, device, self._link, self._rec)
        self._link.on_new_child = self._ex.child_started
        self._oracle = Oracle(spec, self._rec, device=device, shapes=shapes, archive_date=archive_date,
                              ref_impl=ref_impl, seeds=seeds, shape_list=shape_list, reuse=reuse)
        #: the path tracer's record of the last model built (`new_model`)
        self._last_build_path: dict = {}

    # ---------------------------------------------------------------- what is being replayed
    @property
    def spec(self) -> Any:
        """The problem's ProblemSpec (the deck version the run was graded with)."""
        return self._oracle.spec

    @property
    def device(self) -> str:
        return self._oracle.device

    @property
    def seeds(self) -> tuple:
        """The check's seeds (the deck's, or the caller's)."""
        return self._oracle.seeds

    @property
    def limits(self) -> Limits:
        """The time limits (`Limits`: build_s, call_s, probe_s, time_s)."""
        return self._limits

    @property
    def shapes_mode(self) -> str:
        """'canonical' (the deck's shapes) or 'tiny' (the CPU path's)."""
        return self._oracle.shapes_mode

    @property
    def archive_date(self) -> str | None:
        return self._oracle.archive_date

    @property
    def archived(self) -> dict:
        """The archive's own numbers (peak_fraction, gpu, per-shape benchmark.log entries)."""
        return self._archived

    @property
    def info(self) -> dict:
        """The outcome's info dict (a probe may add what it measured: ceilings, scores)."""
        return self._rec.out.info

    @property
    def hello(self) -> dict:
        """What the child said when it started (torch, gpu, capability, l2_bytes ...)."""
        return self._rec.hello

    @property
    def solution_attrs(self) -> list[str]:
        """The public names the solution module defines (run, prefill, policy_forward ...)."""
        return list(self._link.sol_attrs or [])

    @property
    def import_path(self) -> dict:
        """The path tracer's record of the solution's import."""
        return self._link.import_path

    @property
    def last_build_path(self) -> dict:
        """The path tracer's record of the last `new_model`."""
        return self._last_build_path

    @property
    def early_exit(self) -> bool:
        """The solution ended a request early (sys.exit, os._exit): later probes are skipped."""
        return self._rec.early_exit

    @property
    def hung(self) -> bool:
        """A request timed out: later probes are skipped."""
        return self._rec.hung

    @property
    def inputs_mutated(self) -> bool:
        """Some call changed its input tensors in place (`replay-input-mutated`): a probe that
        overwrites inputs in place cannot tell staleness from that."""
        return self._ex.inputs_mutated

    def rows(self, *probes: str) -> list[dict]:
        """The result rows written so far for `probes`."""
        return [r for r in self._rec.out.rows if r["probe"] in probes]

    def solution_sources(self, suffixes: Iterable[str] = SOURCE_SUFFIXES) -> list[tuple[str, bytes]]:
        """The solution's own source files, read safely while the child may run (`solution_sources`)."""
        return solution_sources(self._scratch.sol_dir, suffixes)

    def local_modules(self) -> set[str]:
        """Top-level module names the solution ships beside solution.py."""
        return self._rec.local_modules()

    # ---------------------------------------------------------------- the child
    def child(self):
        """A live child with the reference and the solution imported (started or restarted here),
        or None where the solution cannot be built (its failure is already reported)."""
        return self._link.ensure_child()

    def alive(self, ch: Any = None) -> bool:
        """Whether `ch` (default: the current child) still runs."""
        if ch is None:
            return self._link.alive()
        return ch.alive()

    # ---------------------------------------------------------------- models
    def new_model(self, ch, obj: str, shape: dict, state_path: str | None, replace: bool = False,
                  reuse_attempts: int = 0) -> Reply:
        """The deck's `Model(*get_init_inputs())` as object `obj`, the reference's shape globals set
        first, the state file loaded strictly (then released)."""
        g = self.set_globals(ch, shape)
        if not g.ok:
            return g
        try:
            with self._rec.timed("child-construct"):
                r = ch.request("new", self._limits.build_s, obj=obj, factory="solution:Model",
                               args=self.init_args(shape), state_dict=state_path, strict=True,
                               replace=replace, reuse_attempts=reuse_attempts)
        finally:
            self.release_state(state_path)
        self.note_tamper(r, "construction")
        if r.ok:
            self._last_build_path = r.get("path") or {}
        return r

    def build(self, ch, obj: str, factory: str, args: list | None = None, kwargs: dict | None = None,
              state_path: str | None = None, strict: bool = True, replace: bool = False,
              reuse_attempts: int = 0, timeout: float | None = None) -> Reply:
        """Any object `factory(*args, **kwargs)` ('solution:Model', 'reference:Config') as `obj`,
        a state file loaded into it (strict or not); the state file is kept."""
        fields: dict[str, Any] = {"obj": obj, "factory": factory}
        if args is not None:
            fields["args"] = args
        if kwargs is not None:
            fields["kwargs"] = kwargs
        if state_path is not None:
            fields.update(state_dict=state_path, strict=strict)
        if replace:
            fields["replace"] = True
        if reuse_attempts:
            fields["reuse_attempts"] = reuse_attempts
        r = ch.request("new", self._limits.build_s if timeout is None else timeout, **fields)
        self.note_tamper(r, "construction")
        return r

    def init_args(self, shape: dict) -> list:
        """The deck's constructor arguments for `shape`, as the child resolves them."""
        return self._oracle.init_args_spec(shape)

    def set_globals(self, ch, shape: dict) -> Reply:
        """The reference module's shape globals in the child (check.py sets them for every row)."""
        return ch.request("setglobals", self._limits.call_s, module="reference", values=self.spec.shape_globals(shape))

    def load_state(self, ch, obj: str, state_path: str, strict: bool = True) -> Reply:
        """load_state_dict into the existing module `obj` (copy_: data_ptr kept, _version bumped)."""
        return ch.request("load", self._limits.call_s, obj=obj, state_dict=state_path, strict=strict)

    def state_file(self, shape: dict, model: Any, key: str = "") -> str:
        """The reference model's state dict as a file the child loads (`new_model`, `build`)."""
        return self._ex.state_file(model, key=key)

    def save_state(self, state: dict, stem: str = "state-fresh") -> str:
        """A state dict of this process's (other weights) as a file the child loads."""
        p = self._scratch.path(stem)
        pack_save(state, p)
        return p

    def release_state(self, path: str | None) -> None:
        """A state file no longer needed (its device copies and the file go)."""
        self._ex.release_state(path)

    def delete(self, ch, objs: Iterable[str] = (), slots: Iterable[str] = ()) -> Reply:
        """Drop objects and slots in the child."""
        return ch.request("delete", self._limits.call_s, objs=list(objs), slots=list(slots))

    def meta(self, ch, objs: Iterable[str] = (), slots: Iterable[str] = ()) -> Reply:
        """id() of objects, data_ptr / _version / shape of slots (the child's account)."""
        return ch.request("meta", self._limits.call_s, objs=list(objs), slots=list(slots))

    def recycle(self, ch, slot: str, dead: str) -> Reply:
        """Hand the state in `slot` over in the list and dicts of the dead state in `dead` (the worker's Store.op_recycle)."""
        return ch.request("recycle", self._limits.call_s, slot=slot, dead=dead)

    # ---------------------------------------------------------------- inputs
    def make_inputs(self, shape: dict, seed: int) -> list:
        """The deck's seeded inputs for (shape, seed), generated here on the CPU (clones)."""
        return self._oracle.make_inputs(shape, seed)

    def put(self, ch, inputs: list, prefix: str = "x") -> tuple[Reply, list]:
        """Inputs into slots `<prefix><i>`, watched: their memory stays this process's, so a write
        into them is seen here (`call`, `owned_changed`).  -> (reply, the call arguments)."""
        return self._ex.put(ch, inputs, prefix=prefix)

    def put_state(self, ch, values: dict) -> Reply:
        """Values into slots of those names, not watched: a state the API may change in place."""
        p = self._scratch.path("put")
        save_exchange({k: to_cpu(v) for k, v in values.items()}, p)
        r = ch.request("put", self._limits.call_s, file=p)
        Path(p).unlink(missing_ok=True)
        return r

    def write(self, ch, values: dict, version: str | None = None, targets: dict | None = None) -> Reply:
        """Overwrite tensors in the child in place (data_ptr kept): input slots, a module's
        parameters ('obj::name'), or `targets` (name -> {"slot", "index"}: a tensor inside a slot)."""
        if targets is None:
            return self._ex.write(ch, values, version=version)
        p = self._scratch.path("write")
        save_exchange({k: v.detach().cpu() for k, v in values.items()}, p)
        r = ch.request("write", self._limits.call_s, file=p, targets=targets)
        Path(p).unlink(missing_ok=True)
        return r

    def owned_changed(self, slots: Iterable[str]) -> list[str]:
        """Watched input slots whose memory, read here, no longer holds what was sent."""
        return self._ex.owned_changed(slots)

    # ---------------------------------------------------------------- calls and outputs
    def call(self, ch, obj: str | None, args: list, save_inputs: list[str] | None = None, repeat: int = 1,
             out_slot: str | None = None, poison: list[int] | None = None, method: str | None = None,
             fn: dict | None = None, kwargs: dict | None = None,
             export_index: list | None = None) -> tuple[Reply, Any]:
        """Call `obj.method(*args)` (or `fn`) in the child -> (reply, payload: "out", "inputs_after",
        "inputs_mutated"); inputs it wrote are `replay-input-mutated` (judged from memory held here)."""
        return self._ex.call(ch, obj, args, save_inputs=save_inputs, repeat=repeat, out_slot=out_slot, poison=poison,
                             method=method, fn=fn, kwargs=kwargs, export_index=export_index)

    def call_entry(self, ch, fn: dict, args: list, kwargs: dict | None = None, out_slot: str | None = None,
                   fetch: bool = True, what: str = "a call") -> tuple[Reply, Any]:
        """Call a module-level entry point (`{"attr": "solution:run"}`) on literal / object / slot
        arguments, unwatched; torch patches are noted as during `what`.  -> (reply, its output, or
        None where not fetched or failed)."""
        p = self._scratch.path("entry") if fetch else None
        fields: dict[str, Any] = {"fn": fn, "args": args}
        if kwargs:
            fields["kwargs"] = kwargs
        if out_slot:
            fields["out_slot"] = out_slot
        if p is not None:
            fields["save"] = p
        r = ch.request("call", self._limits.call_s, **fields)
        self.note_tamper(r, what)
        if not r.ok or p is None:
            return r, None
        return r, load_exchange(p)["out"]

    def sol_out(self, payload: Any) -> Any:
        """The solution's output of a `call` payload, on the replay's device."""
        return self._ex.sol_out(payload)

    def snapshot(self, ch, slots: list[str]) -> Reply:
        """Export slots as they are now (`fetch` reads them)."""
        p = self._scratch.path("snap")
        r = ch.request("snap", self._limits.call_s, slots=slots, save=p, fmt="pack", ipc=self._link.ipc)
        r.out_path = p
        return r

    def fetch(self, reply: Reply) -> Any:
        """What a `snapshot` or `bench` request saved (the file goes).  Raises what the exchange
        reader raises on a file the solution's process swapped or broke (OSError, ValueError ...)."""
        p = reply.out_path
        try:
            return self._ex.load(p)
        finally:
            Path(p).unlink(missing_ok=True)

    # ---------------------------------------------------------------- time
    def time(self, ch, fn: dict, args: list, warmup: int, iters: int, flush_bytes: int = 0,
             l2_reset: bool = False) -> Reply:
        """The child times `fn(*args)`: warm-up, then per iteration an L2 flush and CUDA events (CPU:
        perf_counter).  -> reply with ms (median), ms_all."""
        return ch.request("time", self._limits.time_s, fn=fn, args=args, warmup=warmup, iters=iters,
                          flush_bytes=flush_bytes, l2_reset=l2_reset)

    def wall(self, ch, warmup: list, program: list, trials: int) -> Reply:
        """The child runs a program (the worker's Timing.run_program) `trials` times, perf_counter between syncs."""
        return ch.request("wall", self._limits.time_s, warmup=warmup, program=program, trials=trials)

    def bench(self, ch, fn: dict, args: list, warmup: int, iters: int, capture: list[int],
              flush_bytes: int) -> Reply:
        """The deck benchmark's calling pattern in the child (worker op `bench`); the outputs of the
        timed calls in `capture` are saved (`fetch`)."""
        p = self._scratch.path("bench")
        t = ch.request("bench", self._limits.time_s, fn=fn, args=args, warmup=warmup, iters=iters, capture=capture,
                       flush_bytes=flush_bytes, save=p, fmt="pack", ipc=self._link.ipc)
        t.out_path = p
        if not t.ok:
            Path(p).unlink(missing_ok=True)
        return t

    def trace(self, ch, fn: dict, args: list, warmup: int, iters: int) -> Reply:
        """The kernels (GPU) or operators (CPU) `iters` calls ran, under the torch profiler."""
        return ch.request("trace", self._limits.time_s, fn=fn, args=args, warmup=warmup, iters=iters)

    # ---------------------------------------------------------------- the reference side (this process)
    def check_shapes(self) -> list[dict]:
        return self._oracle.check_shapes()

    def bench_shapes(self) -> list[dict]:
        return self._oracle.bench_shapes()

    def probe_shape(self, multi_row: bool = False) -> dict:
        """The first check shape; with multi_row, the first whose inputs have more than one row."""
        return self._oracle.probe_shape(multi_row=multi_row)

    def stress_cases(self) -> list:
        """The deck version's numeric-stress cases (nominal first)."""
        return self._oracle.stress_cases()

    def ref_model(self, shape: dict) -> Any:
        """The replay's reference model of `shape`, shared by the check and the probes: never change
        its weights but through `other_weights`."""
        return self._oracle.ref_model(shape)

    def check_reference(self, shape: dict, key: str) -> Any:
        """The reference model of a check row, its weights drawn from a seed of its shape."""
        return self._oracle.check_reference(shape, key)

    def seeded_reference(self, shape: dict, seed: int, reinit: Callable[[Any, int], Any]) -> Any:
        """The reference model of `shape` with the weights `reinit(model, seed)` sets (the deck's
        per-seed `reset_parameters(seed)`): one object per shape for the replay, each seed's weights
        drawn once (kept here, copied back when asked again).  Valid until the next call for the same
        shape; never change its weights but through this call or `other_weights`."""
        return self._oracle.seeded_reference(shape, seed, reinit)

    def other_weights(self, model: Any, state: dict):
        """Context manager: `model` (a shared reference model) with the weights in `state` inside the
        block, its own put back after it; outputs computed inside are not kept for reuse."""
        return self._oracle.other_weights(model, state)

    def share_reference(self, shape: dict, model: Any) -> None:
        """A reference model a probe family builds itself, shared for the replay as `ref_model`'s are:
        `reference` keeps its outputs under `ref_key`s of `shape` (its weights change only through
        `other_weights`, or with no key passed while they differ)."""
        self._oracle.share(shape, model)

    @property
    def reuse(self) -> bool:
        """Whether reference models and outputs are shared between probes (False: each its own, the
        path measured against)."""
        return self._oracle.reuse

    def ref_key(self, shape: dict, seed: int, case: str = "nominal") -> tuple:
        """The name of the reference output on the deck's inputs of (shape, seed) under `case` (`reference`)."""
        return self._oracle.ref_key(shape, seed, case)

    def reference(self, model: Any, inputs: Any, key: tuple | None = None) -> Any:
        """The reference's output (the implementation chosen for this replay).  With `key`
        (`ref_key`: `inputs` are the deck's inputs it names) and the shared model of that shape, it is
        computed once per replay and kept on this side; the tensors returned are the kept ones (read only)."""
        return self._oracle.reference(model, inputs, key=key)

    def reference_module(self) -> Any:
        """The problem's reference module (kept for the session)."""
        memo = self.memo("reference_module")
        if "mod" not in memo:
            memo["mod"] = self.spec.reference_module()
        return memo["mod"]

    def memo(self, name: str, keep: bool = False) -> dict:
        """A dict a probe family keeps for the session (reference models per config, what a probe
        learnt for another); dropped when the replay frees memory unless `keep`."""
        return self._oracle.memo(name, keep=keep)

    def compare(self, ref_out: Any, sol_out: Any, case: Any = "nominal", inputs: Any = None) -> dict:
        """The problem's comparison (tolerances of `case`) -> {"ok", "msg", max_abs, n_bad ...}."""
        return self._oracle.compare(ref_out, sol_out, case=case, inputs=inputs)

    def check_compare(self, ref_model: Any, inputs: Any, ref_out: Any, sol_out: Any, case: str = "nominal",
                      where: str = "") -> dict:
        """`compare`, with the deck's literal call as the arbiter of a faster reference."""
        return self._oracle.check_compare(ref_model, inputs, ref_out, sol_out, case=case, where=where)

    # ---------------------------------------------------------------- results
    def row(self, probe: str, status: str, shape: dict | None = None, seed: int | None = None,
            case: str | None = None, res: dict | None = None, detail: str = "", **kw: Any) -> dict:
        """One replay_results row (a pass becomes `tampered` once torch was patched)."""
        return self._rec.row(probe, status, shape, seed, case, res, detail, **kw)

    def finding(self, rule: str, message: str, data: dict | None = None, probe: str | None = None,
                severity: str | None = None, key: str | None = None) -> None:
        """One finding of a replay rule (rules.py), once per (rule, message) or `key`."""
        self._rec.finding(rule, message, data, probe=probe, severity=severity, key=key)

    def failed_reply(self, probe: str, reply: Reply, shape: dict | None = None, seed: int | None = None,
                     case: str | None = None, what: str = "call") -> dict:
        """A reply that is not ok -> its row and finding (early exit, crash, timeout, not
        replayable here, or the solution raising)."""
        return self._rec.failed_reply(probe, reply, shape, seed, case, what=what)

    def error_reply(self, message: str) -> Reply:
        """A failed reply made here (an unreadable result), for `failed_reply`."""
        return Reply(False, "error", {}, message)

    def note_tamper(self, reply: Reply, where: str) -> None:
        """torch functions the child reports replaced during `where`: `replay-torch-monkeypatch`."""
        self._rec.note_tamper(reply, where)

    def note_exchange(self, e: BaseException) -> bool:
        """`replay-exchange-tampered` where `e` is the exchange reader refusing a swapped file."""
        return self._rec.note_exchange(e)

    def charged(self, kind: str):
        """Context manager: the time inside goes to `kind` of the replay's account (account.KINDS), for
        reference-side work a probe family does itself (building its own reference model, its inputs)."""
        if kind not in KINDS:
            raise ValueError(f"unknown account kind {kind!r}; have {', '.join(KINDS)}")
        if kind == "reference_model":
            self._rec.account.count("reference_model_built")
        return self._rec.account.span(kind)

    def progress(self, what: str) -> None:
        """Stream the step the probe is entering."""
        self._rec.progress(what)

    def free_cuda(self) -> None:
        """Collect and empty the CUDA cache (between large reference models)."""
        if str(self.device).startswith("cuda") and torch.cuda.is_available():
            gc.collect()
            torch.cuda.empty_cache()

    # ---------------------------------------------------------------- the driver's (RUNNER_ONLY)
    @property
    def outcome(self) -> Outcome:
        """The rows, findings and info written so far."""
        return self._rec.out

    @property
    def build_failed(self) -> bool:
        """The solution could not be started or imported (reported; no child is started again)."""
        return self._link.build_failed is not None

    @property
    def started(self) -> bool:
        """A child has been started and is held."""
        return self._link.child is not None

    def start_early(self) -> None:
        """Start the child, and while it imports torch and the solution, generate the check's
        inputs (kept by make_inputs) so the first requests do not wait for either alone."""
        self._link.boot()
        self._oracle.prefetch()

    def begin_probe(self, name: str, deadline: float | None) -> None:
        """`name` runs now (findings cite it); every request of it ends by `deadline`."""
        self._rec.probe_name = name
        self._rec.account.label = name
        self._link.set_deadline(deadline)

    def end_probe(self) -> None:
        self._link.set_deadline(None)
        self._rec.note_planted()

    def note_planted(self) -> None:
        """Exchange names found taken before this process created them: `replay-exchange-tampered`."""
        self._rec.note_planted()

    def emit(self, event: dict) -> None:
        """Hand a partial result to the caller's stream (never failing)."""
        self._rec.emit(event)

    def free_memory(self) -> None:
        """Drop what the replay keeps between probes (kept inputs, reference outputs and models)."""
        self._ex.state_holds.clear()
        self._oracle.free()
        if str(self.device).startswith("cuda") and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def abort(self) -> None:
        """Kill the children now (an interrupt)."""
        self._link.abort()

    def close(self) -> None:
        """End the child (its goodbye: last tamper report, GPU peak)."""
        self._rec.account.label = AFTER_PROBES
        self._link.close()

    def finish(self, total_s: float) -> Outcome:
        """The replay's own accounting into info (total and phase times, the child's hello)."""
        info = self._rec.out.info
        info["total_s"] = round(total_s, 3)
        info["phase_s"] = {k: round(v, 3) for k, v in sorted(self._rec.phase_s.items())}
        info["hello"] = self._rec.hello
        info["account"] = self._rec.account.record(total_s, info.get("probe_s"))
        return self._rec.out


__all__ = ["Session", "RUNNER_ONLY", "SOURCE_SUFFIXES", "solution_sources", "changed_elems", "maxdiff",
           "perturb_state", "region_mutate", "reuse", "same", "shape_key", "shape_label", "stats", "tensors",
           "to_cpu", "to_dev", "unwrap"]
