"""Probes written once for the stateful API kinds, against a `Driver`.

A driver says how one API kind is driven: how the reference is built for a seed and the solution
model built with its weights, how the solution and the reference run, how their results compare,
and what the probe's messages call these steps.  Each kind's module declares one (`decode.py`,
`step.py`, `rollout.py` beside this file) and registers the generic probes here with its driver.

Written once here:

* `check`: per check shape x seed (`Driver.check_plan`), a solution model with the reference's
  weights of that seed, one judged run (`check_run`) (decode).  `check_run`, the judged run itself
  (run, the reference's run, compare, row, `replay-check-failed`), is also the rollout check's
  `run()` part;
* `determinism`: build, run twice on the same inputs, compare bitwise (every kind);
* `fresh_state`: `rebuild_rounds`, each round a reference with other weights (the round's
  seed), a new solution model on it (placed on a dead model's id() where it can be), one run,
  compared (decode and rollout).  The step API keeps its own (`step_api.fresh_state`): its rounds
  perturb the weights of one unseeded reference and feed a new state without a copy, tracking
  whether it lands on the dead state's storage, and a drifting solution is judged by one step.
* `rebuild_rounds`: the fresh-state loop itself (the step API's own fresh-state uses it too).

Still per kind, because what they do differs by more than the driver's operations:

* the rollout check (`rollout.check`) judges three parts of the API, not one run: it builds one
  model and reloads it per seed (as the deck's check does), judges `policy_forward` under the
  deck's stress cases and `env_step` exactly, and only then the rollout (through `check_run`);
* the step check (`step.check`) feeds a state (a `put` that can fail on its own), builds one
  model per config and stops at the first failed build, judges one step by the deck's cosine rule
  (`_nominal`), and compares a malformed step() output instead of reporting the call as failed;
* same-buffer: the decode API has none, the step API overwrites a returned state in place and
  continues a chain, the rollout API overwrites policy inputs and then every parameter (twice,
  `_version` bumped and kept): no two share a step beyond `Session.write`;
* alternate-cache (decode: two prefills, decode from the first's caches) and alternate-state
  (step: two chains, continue the earlier one) feed different objects and judge differently.
"""

from __future__ import annotations

from typing import Any

from forensics.vocab import CHECK, DETERMINISM, FRESH_STATE

from ..session import Session, maxdiff, same, stats


class Driver:
    """How the generic probes drive one stateful API kind.  The defaults are those of a
    `run(..., model=)` API (decode, rollout); a kind overrides what differs."""

    kind = ""
    call = "run()"                      # one solution run, as failures name it
    build = "Model construction"        # building the solution model, as failures name it
    check_build = "Model construction / strict load"   # building check's model, as failures name it
    objs = {CHECK: "q", FRESH_STATE: "q", DETERMINISM: "q"}   # the child's object name, per probe
    noun = "results of an old one"      # what a stale fresh-state round returns
    repeats = "2-runs"                  # the determinism row's case
    repeat_case: str | None = None      # the case a failed repeat's row carries

    # ---------------------------------------------------------------- the API's operations
    def probe_shape(self, s: Session) -> dict:
        """The shape the single-shape probes use."""
        return s.check_shapes()[0]

    def reference(self, s: Session, shape: dict, seed: int) -> Any:
        """The reference model with the weights of `seed`."""
        raise NotImplementedError

    def model(self, s: Session, ch, obj: str, shape: dict, ref: Any, replace: bool = True,
              reuse_attempts: int = 0):
        """Build the solution model `obj` in the child with ref's weights; the reply."""
        raise NotImplementedError

    def run(self, s: Session, ch, obj: str, shape: dict, seed: int) -> tuple[Any, Any]:
        """One solution run on `obj`: (reply, output on the CPU)."""
        raise NotImplementedError

    def expected(self, s: Session, ref: Any, shape: dict, seed: int) -> Any:
        """The reference's output for the same run."""
        raise NotImplementedError

    def compare(self, s: Session, want: Any, got: Any) -> dict:
        """Judge the solution's output `got` against `want` (a row's result dict, `ok` the verdict)."""
        raise NotImplementedError

    def check_plan(self, s: Session) -> list[tuple[dict, int]]:
        """The (shape, seed) pairs the generic check judges: every check shape x seed, in check.py's
        order (`ProblemSpec.check_order`)."""
        return s.spec.check_pairs(s.check_shapes(), s.seeds)

    def check_compare(self, s: Session, ref: Any, shape: dict, seed: int, want: Any, got: Any) -> dict:
        """check's judgement of a run (default: `compare`; decode: `Session.check_compare`, the deck's
        own call arbitrating a failure against a faster reference)."""
        return self.compare(s, want, got)

    def check_finding(self, s: Session, shape: dict, seed: int, case: str, res: dict) -> tuple[str, dict]:
        """(message, data) of the `replay-check-failed` finding of a run that fails `compare`."""
        raise NotImplementedError

    def round_more(self, res: dict | None) -> dict:
        """Extra "variant" / "msg" / "data" of a fresh-state round (`rebuild_rounds`)."""
        return {}

    def drop(self, s: Session, ch, probe: str) -> None:
        """Delete what `probe` left in the child (default: nothing)."""

    # ---------------------------------------------------------------- determinism's steps
    def prepare(self, s: Session, probe: str, shape: dict, seed: int):
        """The child with the solution model `objs[probe]` built for `seed`, or None (reported)."""
        ch = s.child()
        if ch is None:
            return None
        r = self.model(s, ch, self.objs[probe], shape, self.reference(s, shape, seed), replace=True)
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, what=self.build)
            return None
        return ch

    def repeat(self, s: Session, ch, shape: dict, seed: int, i: int) -> tuple[Any, Any]:
        """The i-th of determinism's repeated runs on the same inputs: (reply, output)."""
        return self.run(s, ch, self.objs[DETERMINISM], shape, seed)

    def same_detail(self, shape: dict) -> str:
        return "bitwise identical"

    def differ_detail(self, shape: dict, d: float) -> str:
        return f"runs differ by up to {d:.4g}"

    def differ_message(self, shape: dict, d: float) -> str:
        return f"Two {self.call} calls with the same model and seed differ by up to {d:.4g}."


def check(s: Session, drv: Driver, case: str = "nominal") -> None:
    """The deck's check of a `run(..., model=)` API: per (shape, seed) of `Driver.check_plan`, a new
    solution model with the reference's weights of the seed and one judged run (`check_run`)."""
    probe = CHECK
    for shape, seed in drv.check_plan(s):
        ch = s.child()
        if ch is None or s.early_exit or s.hung:
            s.row(probe, "skipped", shape, seed, case, detail="no working child")
            continue
        ref = drv.reference(s, shape, seed)
        r = drv.model(s, ch, drv.objs[probe], shape, ref, replace=True)
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, case, what=drv.check_build)
            continue
        check_run(s, drv, ch, ref, shape, seed, case)


def check_run(s: Session, drv: Driver, ch, ref: Any, shape: dict, seed: int, case: str) -> bool | None:
    """One judged run of check: the solution's run on `objs[CHECK]` (a failed call is reported as
    `drv.call`), the reference's, compared; a row, and `replay-check-failed` if they disagree.
    -> the verdict, None if the run failed."""
    probe = CHECK
    r, out = drv.run(s, ch, drv.objs[probe], shape, seed)
    if not r.ok:
        s.failed_reply(probe, r, shape, seed, case, what=drv.call)
        return None
    res = drv.check_compare(s, ref, shape, seed, drv.expected(s, ref, shape, seed), out)
    ok = bool(res.get("ok"))
    s.row(probe, "pass" if ok else "fail", shape, seed, case, res)
    if not ok:
        msg, data = drv.check_finding(s, shape, seed, case, res)
        s.finding("replay-check-failed", msg, data, probe=probe)
    return ok


def determinism(s: Session, drv: Driver) -> None:
    """Two runs on the same model and inputs must agree bit for bit (`replay-nondeterministic`)."""
    probe = DETERMINISM
    shape, seed = drv.probe_shape(s), s.seeds[0]
    ch = drv.prepare(s, probe, shape, seed)
    if ch is None:
        return
    outs = []
    for i in range(2):
        r, out = drv.repeat(s, ch, shape, seed, i)
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, drv.repeat_case, what=drv.call)
            return
        outs.append(out)
    if same(outs[0], outs[1]):
        s.row(probe, "pass", shape, seed, drv.repeats, detail=drv.same_detail(shape), max_abs=0.0)
    else:
        d = maxdiff(outs[0], outs[1])
        s.row(probe, "fail", shape, seed, drv.repeats, max_abs=d, detail=drv.differ_detail(shape, d))
        s.finding("replay-nondeterministic", drv.differ_message(shape, d), {"max_abs": d})
    drv.drop(s, ch, probe)


def fresh_state(s: Session, drv: Driver, rounds: int = 4) -> None:
    """Run, delete, rebuild with other weights until a new model lands on a dead model's id()
    (`rebuild_rounds`), comparing every rebuilt model's run with the reference."""
    probe = FRESH_STATE
    shape = drv.probe_shape(s)
    ch = s.child()
    if ch is None:
        return
    obj = drv.objs[probe]

    def one_round(rnd: int, seed: int):
        ref = drv.reference(s, shape, seed)
        r = drv.model(s, ch, obj, shape, ref, replace=True, reuse_attempts=8)
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, what=drv.build)
            return None
        obj_id = r.get("obj_id")
        r, out = drv.run(s, ch, obj, shape, seed)
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, what=drv.call)
            return None
        res = drv.compare(s, drv.expected(s, ref, shape, seed), out) if rnd else None
        return obj_id, res, drv.round_more(res)

    rebuild_rounds(s, probe, shape, rounds, one_round, drv.noun)
    drv.drop(s, ch, probe)


def rebuild_rounds(s: Session, probe: str, shape: dict, rounds: int, one_round, noun: str) -> None:
    """The fresh-state loop of the stateful APIs.  Round 0 only warms whatever the solution
    caches; each later round builds a new model with other weights (seed seeds[0] + 777*rnd,
    replacing the last) and is judged, until one fails or lands on a dead model's id() (the
    case an id()-keyed cache gets wrong), `rounds` rebuilds at most.  `one_round(rnd, seed)`
    returns None when it has reported a failed request, else (obj_id, res, more): `res` the
    comparison (unused in round 0), `more` optional "variant" / "msg" suffixes and "data"."""
    seen: set = set()
    for rnd in range(rounds + 1):
        seed = s.seeds[0] + 777 * rnd
        got = one_round(rnd, seed)
        if got is None:
            return
        obj_id, res, more = got
        reused = obj_id in seen
        seen.add(obj_id)
        if rnd == 0:
            continue
        variant = f"rebuild-{rnd}" + ("-dead-id" if reused else "-new-id") + more.get("variant", "")
        if not res.get("ok"):
            s.row(probe, "fail", shape, seed, variant, res)
            s.finding("replay-stale-fresh-state",
                      "A new model with other weights" + (" (built on a dead model's id())" if reused else "")
                      + more.get("msg", "") + f" returns {noun}: {res.get('msg', '')}"[:600],
                      stats(res) | {"id_reused": reused, "round": rnd} | more.get("data", {}))
            return
        if reused or rnd == rounds:
            s.row(probe, "pass", shape, seed, variant, res,
                  detail="" if reused else f"no id() reuse in {rounds} rebuilds: id()-keyed caches not exercised")
            return
