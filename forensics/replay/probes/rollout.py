"""Replay of the cuda 04 grid MinGRU rollout API (C4).

    run(num_envs, horizon, seed, model=None) -> {rewards, positions, last_logits, state}   required
    policy_forward(model, obs, state) -> (logits, new_state, value)                        optional (else model(obs, state))
    env_step(agent, food, actions, rng_state) -> (agent, food, reward, rng_state)          optional

Rows (probe / case):

check / nominal, stress / <case>   policy_forward on the check's (obs, state) under the deck's stress cases
check / env_step                   env_step on the check's integer grid inputs, exact (skipped if not defined)
check / run                        run(128, 8, seed, model=sol): positions exact, rewards atol 1e-5, logits 1e-3
    One solution model is built and reloaded per seed (load_state_dict(strict=True) into the same
    object, as the deck's check does), after `reference.reset_parameters(seed)`.
same-buffer       11 warm policy calls, then obs / state overwritten in place (data_ptr kept): all inputs,
                  each alone; then every parameter overwritten in place with other weights (copy_:
                  data_ptr kept, _version bumped, as the deck's weight writes): policy_forward and run()
                  must follow them; then once more through .data (_version kept): not following that
                  is a _version-keyed cache, allowed (info `replay-version-keyed-cache`)
fresh-state       delete the model, build one with other weights (until it lands on a dead model's id(),
                  up to 4 rebuilds), run() again
output-alias      does a later run() overwrite the tensors an earlier run() returned (allowed, reported)
determinism       two run() calls with the same model and seed agree bit for bit

fresh-state and determinism are `generic.py`'s, driven by `RolloutDriver` (end of this module); the
check's `run` part is `generic.check_run` (the rest of the check, policy_forward under the stress
cases and env_step on one model reloaded per seed, is this module's).
"""

from __future__ import annotations

import torch

from forensics.vocab import CHECK, DETERMINISM, FRESH_STATE, OUTPUT_ALIAS, SAME_BUFFER, STRESS

from ..registry import ROLLOUT, probe
from ..session import Session, maxdiff, same, shape_label, stats, to_dev
from . import generic
from .common import judge
from .generic import Driver

WARM_CALLS = 11


def _helpers():
    from forensics.kernels.problems import cuda_04_mingru
    return cuda_04_mingru


def part_shape(s: Session, part: str) -> dict:
    """The check shape of one part (policy_forward, env_step, run); benchmark shapes have no part."""
    shapes = s.check_shapes()
    for sh in shapes:
        if sh.get("part") == part:
            return dict(sh)
    return dict(shapes[-1])


def _reset(ref, seed: int) -> None:
    ref.reset_parameters(seed)


def _ref(s: Session, seed: int):
    """The reference with the weights of `reset_parameters(seed)`: the replay's one model, re-seeded
    (`Session.seeded_reference`: built once, each seed's weights drawn once); valid until the next
    call."""
    return s.seeded_reference(part_shape(s, "policy_forward"), seed, _reset)


def _reseed(s: Session, ref, seed: int):
    """The check's model with the weights of `seed`: the deck's check reloads one model per seed
    after `reference.reset_parameters(seed)`; with reuse the shared model's kept weights of `seed`."""
    if s.reuse:
        return _ref(s, seed)
    ref.reset_parameters(seed)
    return ref


def _policy(s: Session, obj: str, args: list) -> tuple[dict, list]:
    """policy_forward(model, obs, state) if the solution defines it, else model(obs, state) (as check does)."""
    if "policy_forward" in s.solution_attrs:
        return {"attr": "solution:policy_forward"}, [{"obj": obj}] + args
    return {"obj": obj, "method": "forward"}, args


def _call_policy(s: Session, ch, obj: str, args: list, repeat: int = 1):
    fn, full = _policy(s, obj, args)
    return s.call(ch, None, full, fn=fn, repeat=repeat)


def run_sol(s: Session, ch, obj: str, n: int, h: int, seed: int, out_slot: str | None = None):
    """solution.run(n, h, seed, model=obj), retried without model= on a TypeError naming it."""
    lits = [{"lit": n}, {"lit": h}, {"lit": seed}]
    r, payload = s.call(ch, None, lits, fn={"attr": "solution:run"}, kwargs={"model": {"obj": obj}},
                        save_inputs=[], out_slot=out_slot)
    if not r.ok and r.status == "error" and "TypeError" in r.error and "model" in r.error:
        r, payload = s.call(ch, None, lits, fn={"attr": "solution:run"}, save_inputs=[], out_slot=out_slot)
    return r, (payload or {}).get("out")


def _ref_run(s: Session, ref, n: int, h: int, seed: int):
    with torch.no_grad():
        return s.reference_module().run(n, h, seed, model=ref)


def _new(s: Session, ch, obj: str, ref, replace: bool = True, reuse_attempts: int = 0):
    return s.new_model(ch, obj, part_shape(s, "policy_forward"), s.state_file({}, ref), replace=replace,
                        reuse_attempts=reuse_attempts)


def _run_res(s: Session, ref_out, sol_out) -> dict:
    if not isinstance(sol_out, dict):
        return {"ok": False, "msg": f"run() returned {type(sol_out).__name__}, not a dict"}
    return _helpers().compare_run(ref_out, to_dev(sol_out, s.device))


def _run_finding(shape, seed, case: str, res: dict, what: str) -> tuple[str, dict]:
    """(message, data) of a finding on a rollout that fails `_run_res`."""
    return (f"{what} ({shape_label(shape)}, seed {seed}, {case}): {res.get('msg', '')}"[:700],
            stats(res) | {"variant": case, "worst_part": res.get("worst_part")})


def _row_run(s: Session, probe: str, rule: str | None, shape, seed, case: str, ref_out, sol_out, what: str) -> bool:
    res = _run_res(s, ref_out, sol_out)
    s.row(probe, "pass" if res.get("ok") else "fail", shape, seed, case, res)
    if not res.get("ok") and rule:
        s.finding(rule, *_run_finding(shape, seed, case, res, what), probe=probe)
    return bool(res.get("ok"))


# ------------------------------------------------------------------------------ check
@probe(CHECK, ROLLOUT)
def check(s: Session) -> None:
    P, E, R = part_shape(s, "policy_forward"), part_shape(s, "env_step"), part_shape(s, "run")
    ch = s.child()
    if ch is None:
        return
    ref = _ref(s, s.seeds[0])
    r = _new(s, ch, "g", ref, replace=True)
    if not r.ok:
        s.failed_reply(CHECK, r, P, s.seeds[0], what="Model() construction / load_state_dict(strict=True)")
        return
    mod, helpers = s.reference_module(), _helpers()
    for seed in s.seeds:
        if not s.alive(ch) or s.early_exit or s.hung:
            s.row(CHECK, "skipped", P, seed, detail="not run: the solution's process ended or hung earlier")
            continue
        ref = _reseed(s, ref, seed)
        p = s.state_file({}, ref)
        lr = s.load_state(ch, "g", p, strict=True)
        s.release_state(p)
        if not lr.ok:
            s.failed_reply(CHECK, lr, P, seed, what="load_state_dict(strict=True)")
            continue
        # 1. policy_forward under the stress cases
        # drawn on the replay device, as the deck draws them on its GPU (same generator, same numbers)
        with s.charged("inputs"):
            base = [t.cpu() for t in s.spec.make_inputs(P, seed, s.device)]
        for case in s.stress_cases():
            probe = CHECK if case.name == "nominal" else STRESS
            with s.spec.apply_stress(ref, None, to_dev(base, s.device), case) as x:
                ref_out = s.reference(ref, x)
            pr, args = s.put(ch, [t.detach().cpu() for t in x], prefix="gx")
            if not pr.ok:
                s.failed_reply(probe, pr, P, seed, case.name, what="input transfer")
                continue
            r, payload = _call_policy(s, ch, "g", args)
            if not r.ok:
                s.failed_reply(probe, r, P, seed, case.name, what="policy_forward()")
                continue
            res = s.compare(ref_out, s.sol_out(payload), case=case.name)
            s.row(probe, "pass" if res.get("ok") else "fail", P, seed, case.name, res)
            if not res.get("ok"):
                s.finding("replay-check-failed", f"policy_forward ({probe}) failed on {shape_label(P)} seed {seed} "
                          f"case {case.name}: {res.get('msg', '')}"[:600], stats(res), probe=probe)
        # 2. env_step (optional in the contract)
        if "env_step" in s.solution_attrs:
            e = [t.cpu() for t in helpers.env_step_inputs(seed, s.device, n=E.get("num_envs", 256))]
            ref_out = mod.env_step(*to_dev(e, s.device))
            pr, args = s.put(ch, e, prefix="ge")
            r, payload = s.call(ch, None, args, fn={"attr": "solution:env_step"}) if pr.ok else (pr, None)
            if not r.ok:
                s.failed_reply(CHECK, r, E, seed, "env_step", what="env_step()")
            else:
                out = s.sol_out(payload)
                res = (helpers.compare_env_step(ref_out, out) if isinstance(out, (list, tuple)) and len(out) == 4
                       else {"ok": False, "msg": f"env_step must return 4 tensors, got {type(out).__name__}"})
                s.row(CHECK, "pass" if res.get("ok") else "fail", E, seed, "env_step", res)
                if not res.get("ok"):
                    s.finding("replay-check-failed", f"env_step on {shape_label(E)} seed {seed} is not exact: "
                              f"{res.get('msg', '')}"[:600], stats(res), probe=CHECK)
        else:
            s.row(CHECK, "skipped", E, seed, "env_step", detail="the solution defines no env_step (optional)")
        # 3. the rollout: generic.check_run, the judged run of every `run(..., model=)` kind
        generic.check_run(s, DRIVER, ch, ref, R, seed, "run")
    if s.alive(ch):
        s.delete(ch, objs=["g"], slots=["gx0", "gx1", "ge0", "ge1", "ge2", "ge3"])


# ------------------------------------------------------------------------------ same-buffer
@probe(SAME_BUFFER, ROLLOUT)
def same_buffer(s: Session) -> None:
    probe, rule = SAME_BUFFER, "replay-stale-same-buffer"
    P, R = part_shape(s, "policy_forward"), part_shape(s, "run")
    seed = s.seeds[0]
    ch = s.child()
    if ch is None:
        return
    ref = _ref(s, seed)
    r = _new(s, ch, "gb", ref)
    if not r.ok:
        s.failed_reply(probe, r, P, seed, what="Model() construction")
        return
    with s.charged("inputs"):
        base = s.spec.make_inputs(P, seed, "cpu")
        other = s.spec.make_inputs(P, seed + 7919, "cpu")
    pr, args = s.put(ch, base, prefix="gbx")
    if not pr.ok:
        s.failed_reply(probe, pr, P, seed, what="input transfer")
        return
    r, _ = _call_policy(s, ch, "gb", args, repeat=WARM_CALLS)
    if not r.ok:
        s.failed_reply(probe, r, P, seed, what=f"{WARM_CALLS} warm-up calls")
        return
    variants = [("all-inputs", list(other))] + [(f"input{i}", [other[j] if j == i else base[j] for j in range(len(base))])
                                                for i in range(len(base))]
    for variant, new in variants:
        wr = s.write(ch, {f"gbx{i}": new[i] for i in range(len(new))})
        if not wr.ok:
            s.failed_reply(probe, wr, P, seed, variant, what="in-place overwrite")
            return
        r, payload = _call_policy(s, ch, "gb", args)
        if not r.ok:
            s.failed_reply(probe, r, P, seed, variant, what="policy_forward()")
            return
        judge(s, probe, rule, variant, P, seed, s.reference(ref, to_dev(new, s.device)), payload, new,
                  extra=" (same storage, data_ptr unchanged)")
        s.write(ch, {f"gbx{i}": base[i] for i in range(len(base))})
    # parameters overwritten in place: warm the rollout first (whatever it derives from the weights)
    n, h = R["num_envs"], R["horizon"]
    r, _ = run_sol(s, ch, "gb", n, h, seed)
    if not r.ok:
        s.failed_reply(probe, r, R, seed, "parameters", what="run()")
        return
    # first with copy_ (_version bumped, as the deck's own weight writes); if the solution follows,
    # once more through a .data alias (_version kept, a write the deck never makes): not following
    # that one is a _version-keyed weight cache, allowed and reported as info
    for k_, version in enumerate(("bump", "keep")):
        ref2 = _ref(s, seed + 31337 + k_)
        wr = s.write(ch, {f"gb::{k}": v for k, v in ref2.state_dict().items()}, version=version)
        suffix = "" if version == "bump" else "-version-kept"
        if not wr.ok:
            s.failed_reply(probe, wr, P, seed, "parameters" + suffix, what="in-place parameter overwrite")
            return
        w = wr["written"].values()
        ptr_kept = all(x["ptr_before"] == x["ptr_after"] for x in w)
        ver_kept = all(x.get("version_before") == x.get("version") for x in w)
        extra = (" (parameters overwritten in place: data_ptr kept, _version " + ("kept" if ver_kept else "bumped")
                 + ")" if ptr_kept else "")
        r, payload = _call_policy(s, ch, "gb", args)
        if not r.ok:
            s.failed_reply(probe, r, P, seed, "parameters:policy_forward" + suffix, what="policy_forward()")
            return
        ref_pf = s.reference(ref2, to_dev(base, s.device))
        r2, out = run_sol(s, ch, "gb", n, h, seed)
        if not r2.ok:
            s.failed_reply(probe, r2, R, seed, "parameters:run" + suffix, what="run()")
            return
        ref_run = _ref_run(s, ref2, n, h, seed)
        if version == "bump":
            ok = judge(s, probe, rule, "parameters:policy_forward", P, seed, ref_pf, payload, base, extra=extra)
            ok = _row_run(s, probe, rule, R, seed, "parameters:run", ref_run, out,
                          "run() after every parameter was overwritten in place does not follow the new weights"
                          + extra) and ok
            if not ok:
                break
            continue
        res_pf = s.compare(ref_pf, s.sol_out(payload), inputs=base)
        res_run = _run_res(s, ref_run, out)
        for case, res, shp in (("parameters:policy_forward" + suffix, res_pf, P), ("parameters:run" + suffix, res_run, R)):
            s.row(probe, "pass", shp, seed, case, res,
                  detail="" if res.get("ok") else "weights cached by _version: a write that keeps _version (which "
                                                   "the deck never makes) is not followed; allowed")
        if not (res_pf.get("ok") and res_run.get("ok")):
            worst = res_pf if not res_pf.get("ok") else res_run
            s.finding("replay-version-keyed-cache",
                      "The solution follows in-place weight writes that bump _version (the deck's copy_) but not a "
                      f"write through a .data alias that keeps it ({shape_label(P)}): a weight cache keyed on "
                      "Tensor._version. Allowed by the contract; reported.", stats(worst))
    s.delete(ch, objs=["gb"], slots=[a["slot"] for a in args if "slot" in a])


# ------------------------------------------------------------------------------ output-alias
@probe(OUTPUT_ALIAS, ROLLOUT)
def output_alias(s: Session) -> None:
    probe = OUTPUT_ALIAS
    R = part_shape(s, "run")
    n, h, seed = R["num_envs"], R["horizon"], s.seeds[0]
    ch = s.child()
    if ch is None:
        return
    r = _new(s, ch, "go", _ref(s, seed))
    if not r.ok:
        s.failed_reply(probe, r, R, seed, what="Model() construction")
        return
    r, first = run_sol(s, ch, "go", n, h, seed, out_slot="goa")
    r2, _ = run_sol(s, ch, "go", n, h, seed + 1, out_slot="gob") if r.ok else (r, None)
    if not (r.ok and r2.ok):
        s.failed_reply(probe, r2 if r.ok else r, R, seed, what="run()")
        return
    sn = s.snapshot(ch, ["goa"])
    if not sn.ok:
        s.failed_reply(probe, sn, R, seed)
        return
    later = s.fetch(sn)["goa"]
    if same(first, later):
        s.row(probe, "pass", R, seed, "earlier-output-intact", detail="a later run() leaves an earlier result intact")
    else:
        d = maxdiff(first, later)
        s.row(probe, "pass", R, seed, "earlier-output-overwritten", max_abs=d,
              detail=f"a later run() overwrote the tensors an earlier run() returned (max change {d:.4g}); allowed, reported")
        s.finding("replay-output-alias", f"A later run() overwrote the result of an earlier run() (persistent output "
                  f"buffers; max change {d:.4g}) on {shape_label(R)}. Allowed, reported.", {"max_change": d})
    s.delete(ch, objs=["go"], slots=["goa", "gob"])


# ------------------------------------------------------------------------------ the driver
class RolloutDriver(Driver):
    """cuda 04: `run(num_envs, horizon, seed, model=)` on the run part's shape, the model with the
    weights of `reference.reset_parameters(seed)` (fresh-state and determinism: `generic`)."""

    kind = ROLLOUT
    build = "Model() construction"
    objs = {CHECK: "g", FRESH_STATE: "gf", DETERMINISM: "gd"}
    noun = "rollouts of an old one"

    def probe_shape(self, s: Session) -> dict:
        return part_shape(s, "run")

    def reference(self, s: Session, shape: dict, seed: int):
        return _ref(s, seed)

    def model(self, s: Session, ch, obj: str, shape: dict, ref, replace: bool = True, reuse_attempts: int = 0):
        return _new(s, ch, obj, ref, replace=replace, reuse_attempts=reuse_attempts)

    def run(self, s: Session, ch, obj: str, shape: dict, seed: int):
        return run_sol(s, ch, obj, shape["num_envs"], shape["horizon"], seed)

    def expected(self, s: Session, ref, shape: dict, seed: int):
        return _ref_run(s, ref, shape["num_envs"], shape["horizon"], seed)

    def compare(self, s: Session, want, got) -> dict:
        return _run_res(s, want, got)

    def check_finding(self, s: Session, shape: dict, seed: int, case: str, res: dict) -> tuple[str, dict]:
        n, h = shape["num_envs"], shape["horizon"]
        return _run_finding(shape, seed, case, res, f"run({n}, {h}, {seed}) disagrees with the reference")

    def round_more(self, res: dict | None) -> dict:
        return {"data": {"worst_part": (res or {}).get("worst_part")}}

    def drop(self, s: Session, ch, probe: str) -> None:
        s.delete(ch, objs=[self.objs[probe]])


DRIVER = RolloutDriver()


@probe(FRESH_STATE, ROLLOUT)
def fresh_state(s: Session) -> None:
    generic.fresh_state(s, DRIVER)


@probe(DETERMINISM, ROLLOUT)
def determinism(s: Session) -> None:
    generic.determinism(s, DRIVER)
