"""Probes written once for the stateful API kinds, against a `Driver`.

A driver says how one API kind is driven: how the reference is built for a seed and the solution
model built with its weights, how the solution and the reference run, how their results compare,
and what the probe's messages call these steps.  Each kind's module declares one (`stateful.py`:
decode, `step_api.py`: step, `rollout_api.py`: rollout); `stateful.table` pairs the generic probes
here with the driver of the problem's kind.

Written once here:

* `check`: per check shape x seed (`Driver.check_plan`), a solution model with the reference's
  weights of that seed, one judged run (`check_run`) (decode).  `check_run`, the judged run itself
  (run, the reference's run, compare, row, `replay-check-failed`), is also the rollout check's
  `run()` part;
* `determinism`: build, run twice on the same inputs, compare bitwise (every kind);
* `fresh_state`: `Replay.rebuild_rounds`, each round a reference with other weights (the round's
  seed), a new solution model on it (placed on a dead model's id() where it can be), one run,
  compared (decode and rollout).  The step API keeps its own (`step_api.fresh_state`): its rounds
  perturb the weights of one unseeded reference and feed a new state without a copy, tracking
  whether it lands on the dead state's storage, and a drifting solution is judged by one step.

Still per kind, because what they do differs by more than the driver's operations:

* the rollout check (`rollout_api.check`) judges three parts of the API, not one run: it builds one
  model and reloads it per seed (as the deck's check does), judges `policy_forward` under the
  deck's stress cases and `env_step` exactly, and only then the rollout (through `check_run`);
* the step check (`step_api.check`) feeds a state (a `put` that can fail on its own), builds one
  model per config and stops at the first failed build, judges one step by the deck's cosine rule
  (`_nominal`), and compares a malformed step() output instead of reporting the call as failed;
* same-buffer: the decode API has none, the step API overwrites a returned state in place and
  continues a chain, the rollout API overwrites policy inputs and then every parameter (twice,
  `_version` bumped and kept): no two share a step beyond `rp.write`;
* alternate-cache (decode: two prefills, decode from the first's caches) and alternate-state
  (step: two chains, continue the earlier one) feed different objects and judge differently.
"""

from __future__ import annotations

from typing import Any

from .probes import Replay, _maxdiff, _same


class Driver:
    """How the generic probes drive one stateful API kind.  The defaults are those of a
    `run(..., model=)` API (decode, rollout); a kind overrides what differs."""

    kind = ""
    call = "run()"                      # one solution run, as failures name it
    build = "Model construction"        # building the solution model, as failures name it
    check_build = "Model construction / strict load"   # building check's model, as failures name it
    objs = {"check": "q", "fresh-state": "q", "determinism": "q"}   # the child's object name, per probe
    noun = "results of an old one"      # what a stale fresh-state round returns
    repeats = "2-runs"                  # the determinism row's case
    repeat_case: str | None = None      # the case a failed repeat's row carries

    # ---------------------------------------------------------------- the API's operations
    def probe_shape(self, rp: Replay) -> dict:
        """The shape the single-shape probes use."""
        return rp.check_shapes()[0]

    def reference(self, rp: Replay, shape: dict, seed: int) -> Any:
        """The reference model with the weights of `seed`."""
        raise NotImplementedError

    def model(self, rp: Replay, ch, obj: str, shape: dict, ref: Any, replace: bool = True,
              reuse_attempts: int = 0):
        """Build the solution model `obj` in the child with ref's weights; the reply."""
        raise NotImplementedError

    def run(self, rp: Replay, ch, obj: str, shape: dict, seed: int) -> tuple[Any, Any]:
        """One solution run on `obj`: (reply, output on the CPU)."""
        raise NotImplementedError

    def expected(self, rp: Replay, ref: Any, shape: dict, seed: int) -> Any:
        """The reference's output for the same run."""
        raise NotImplementedError

    def compare(self, rp: Replay, want: Any, got: Any) -> dict:
        """Judge the solution's output `got` against `want` (a row's result dict, `ok` the verdict)."""
        raise NotImplementedError

    def check_plan(self, rp: Replay) -> list[tuple[dict, int]]:
        """The (shape, seed) pairs the generic check judges: every check shape x seed, in check.py's
        order (`ProblemSpec.check_order`)."""
        return rp.spec.check_pairs(rp.check_shapes(), rp.seeds)

    def check_compare(self, rp: Replay, ref: Any, shape: dict, seed: int, want: Any, got: Any) -> dict:
        """check's judgement of a run (default: `compare`; decode: `Replay.check_compare`, the deck's
        own call arbitrating a failure against a faster reference)."""
        return self.compare(rp, want, got)

    def check_finding(self, rp: Replay, shape: dict, seed: int, case: str, res: dict) -> tuple[str, dict]:
        """(message, data) of the `replay-check-failed` finding of a run that fails `compare`."""
        raise NotImplementedError

    def round_more(self, res: dict | None) -> dict:
        """Extra "variant" / "msg" / "data" of a fresh-state round (`Replay.rebuild_rounds`)."""
        return {}

    def drop(self, rp: Replay, ch, probe: str) -> None:
        """Delete what `probe` left in the child (default: nothing)."""

    # ---------------------------------------------------------------- determinism's steps
    def prepare(self, rp: Replay, probe: str, shape: dict, seed: int):
        """The child with the solution model `objs[probe]` built for `seed`, or None (reported)."""
        ch = rp.ensure_child()
        if ch is None:
            return None
        r = self.model(rp, ch, self.objs[probe], shape, self.reference(rp, shape, seed), replace=True)
        if not r.ok:
            rp.failed_reply(probe, r, shape, seed, what=self.build)
            return None
        return ch

    def repeat(self, rp: Replay, ch, shape: dict, seed: int, i: int) -> tuple[Any, Any]:
        """The i-th of determinism's repeated runs on the same inputs: (reply, output)."""
        return self.run(rp, ch, self.objs["determinism"], shape, seed)

    def same_detail(self, shape: dict) -> str:
        return "bitwise identical"

    def differ_detail(self, shape: dict, d: float) -> str:
        return f"runs differ by up to {d:.4g}"

    def differ_message(self, shape: dict, d: float) -> str:
        return f"Two {self.call} calls with the same model and seed differ by up to {d:.4g}."


def check(rp: Replay, drv: Driver, case: str = "nominal") -> None:
    """The deck's check of a `run(..., model=)` API: per (shape, seed) of `Driver.check_plan`, a new
    solution model with the reference's weights of the seed and one judged run (`check_run`)."""
    probe = "check"
    for shape, seed in drv.check_plan(rp):
        ch = rp.ensure_child()
        if ch is None or rp.early_exit or rp.hung:
            rp.row(probe, "skipped", shape, seed, case, detail="no working child")
            continue
        ref = drv.reference(rp, shape, seed)
        r = drv.model(rp, ch, drv.objs[probe], shape, ref, replace=True)
        if not r.ok:
            rp.failed_reply(probe, r, shape, seed, case, what=drv.check_build)
            continue
        check_run(rp, drv, ch, ref, shape, seed, case)


def check_run(rp: Replay, drv: Driver, ch, ref: Any, shape: dict, seed: int, case: str) -> bool | None:
    """One judged run of check: the solution's run on `objs["check"]` (a failed call is reported as
    `drv.call`), the reference's, compared; a row, and `replay-check-failed` if they disagree.
    -> the verdict, None if the run failed."""
    probe = "check"
    r, out = drv.run(rp, ch, drv.objs[probe], shape, seed)
    if not r.ok:
        rp.failed_reply(probe, r, shape, seed, case, what=drv.call)
        return None
    res = drv.check_compare(rp, ref, shape, seed, drv.expected(rp, ref, shape, seed), out)
    ok = bool(res.get("ok"))
    rp.row(probe, "pass" if ok else "fail", shape, seed, case, res)
    if not ok:
        msg, data = drv.check_finding(rp, shape, seed, case, res)
        rp.finding("replay-check-failed", msg, data, probe=probe)
    return ok


def determinism(rp: Replay, drv: Driver) -> None:
    """Two runs on the same model and inputs must agree bit for bit (`replay-nondeterministic`)."""
    probe = "determinism"
    shape, seed = drv.probe_shape(rp), rp.seeds[0]
    ch = drv.prepare(rp, probe, shape, seed)
    if ch is None:
        return
    outs = []
    for i in range(2):
        r, out = drv.repeat(rp, ch, shape, seed, i)
        if not r.ok:
            rp.failed_reply(probe, r, shape, seed, drv.repeat_case, what=drv.call)
            return
        outs.append(out)
    if _same(outs[0], outs[1]):
        rp.row(probe, "pass", shape, seed, drv.repeats, detail=drv.same_detail(shape), max_abs=0.0)
    else:
        d = _maxdiff(outs[0], outs[1])
        rp.row(probe, "fail", shape, seed, drv.repeats, max_abs=d, detail=drv.differ_detail(shape, d))
        rp.finding("replay-nondeterministic", drv.differ_message(shape, d), {"max_abs": d})
    drv.drop(rp, ch, probe)


def fresh_state(rp: Replay, drv: Driver, rounds: int = 4) -> None:
    """Run, delete, rebuild with other weights until a new model lands on a dead model's id()
    (`Replay.rebuild_rounds`), comparing every rebuilt model's run with the reference."""
    probe = "fresh-state"
    shape = drv.probe_shape(rp)
    ch = rp.ensure_child()
    if ch is None:
        return
    obj = drv.objs[probe]

    def one_round(rnd: int, s: int):
        ref = drv.reference(rp, shape, s)
        r = drv.model(rp, ch, obj, shape, ref, replace=True, reuse_attempts=8)
        if not r.ok:
            rp.failed_reply(probe, r, shape, s, what=drv.build)
            return None
        obj_id = r.get("obj_id")
        r, out = drv.run(rp, ch, obj, shape, s)
        if not r.ok:
            rp.failed_reply(probe, r, shape, s, what=drv.call)
            return None
        res = drv.compare(rp, drv.expected(rp, ref, shape, s), out) if rnd else None
        return obj_id, res, drv.round_more(res)

    rp.rebuild_rounds(probe, shape, rounds, one_round, drv.noun)
    drv.drop(rp, ch, probe)
