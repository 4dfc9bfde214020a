"""Probes for the stateful APIs.  This module holds the dispatch and the cuda 03 megaqwen decode API
(prefill / decode_steps / run); the mega 02 Kimi `step` API is in `step_api.py`, the cuda 04
MinGRU rollout API in `rollout_api.py`, their wall-clock timing in `timing.py`.

Decode (cuda 03): the check replays `run(ctx, n_decode, seed, model=sol)` against the reference's
`run` with the same weights (`reset_parameters(seed)`, strict load).  The probes the auditors ask for:

* alternate-cache: prefill twice (seeds A and B), then decode from A's caches: a solution that
  decodes from caches it keeps inside the model (the last prefill's) instead of the ones it is
  handed follows B, not A.  A second variant hands in B's caches copied into new storage (same
  contents, other pointers), which a pointer-keyed graph or cache would not see.
* fresh-state: run on a model, delete it and build a new one with other weights right away
  (CPython usually hands the new model the dead one's id()); an id()-keyed weight cache replays
  the old weights.
* determinism: two runs with the same model and seed agree bit for bit.

check, fresh-state and determinism are `generic.py`'s, driven by `DecodeDriver` below.
"""

from __future__ import annotations

from typing import Any, Callable

from . import generic
from .generic import Driver
from .probes import Replay, _to_dev
from .worker import load_exchange


def kind(spec: Any) -> str | None:
    """'decode' (cuda 03), 'step' (mega 02: Model.step), 'rollout' (cuda 04: run over a grid), or None
    (a plain module): the API kind the problem's spec declares (`ProblemSpec.api_kind`)."""
    k = getattr(spec, "api_kind", "module")
    return None if k == "module" else k


def table(rp: Replay) -> dict[str, Callable[[], None]]:
    """probe name -> callable, for the stateful API of rp.spec (timing is run by the driver)."""
    k = kind(rp.spec)
    if k == "step":
        from . import step_api as sa
        return {"check": lambda: sa.check(rp), "state-drift": lambda: sa.state_drift(rp), "same-buffer": lambda: sa.same_buffer(rp),
                "fresh-state": lambda: sa.fresh_state(rp), "alternate-cache": lambda: sa.alternate_state(rp),
                "determinism": lambda: generic.determinism(rp, sa.DRIVER)}
    if k == "rollout":
        from . import rollout_api as ra
        return {"check": lambda: ra.check(rp), "same-buffer": lambda: ra.same_buffer(rp),
                "fresh-state": lambda: generic.fresh_state(rp, ra.DRIVER), "output-alias": lambda: ra.output_alias(rp),
                "determinism": lambda: generic.determinism(rp, ra.DRIVER)}
    return {"check": lambda: generic.check(rp, DRIVER), "alternate-cache": lambda: alternate_cache(rp),
            "fresh-state": lambda: generic.fresh_state(rp, DRIVER), "determinism": lambda: generic.determinism(rp, DRIVER)}


def _ref_model(rp: Replay, shape: dict, seed: int):
    ref = rp.spec.build_reference(shape, rp.device)
    if hasattr(ref, "reset_parameters"):
        ref.reset_parameters(seed)
    return ref


def _model(rp: Replay, ch, obj: str, shape: dict, ref, replace: bool = False, reuse_attempts: int = 0):
    return rp.new_model(ch, obj, shape, rp.state_file(shape, ref), replace=replace, reuse_attempts=reuse_attempts)


def _run_sol(rp: Replay, ch, obj: str, ctx: int, dec: int, seed: int):
    """solution.run(ctx, dec, seed, model=obj); retried without model= on a TypeError (as check does)."""
    p = rp.scratch.path("run")
    r = ch.request("call", rp.limits.call_s, fn={"attr": "solution:run"},
                   args=[{"lit": ctx}, {"lit": dec}, {"lit": seed}], kwargs={"model": {"obj": obj}}, save=p)
    rp._note_tamper(r, "run()")
    if not r.ok and r.status == "error" and "TypeError" in r.error and "model" in r.error:
        r = ch.request("call", rp.limits.call_s, fn={"attr": "solution:run"},
                       args=[{"lit": ctx}, {"lit": dec}, {"lit": seed}], save=p)
        rp._note_tamper(r, "run()")
    if not r.ok:
        return r, None
    return r, load_exchange(p)["out"]


def _ref_run(rp: Replay, ref, ctx: int, dec: int, seed: int):
    return rp.spec.reference_forward(ref, [ctx, dec, seed])


def _has_split(rp: Replay) -> bool:
    attrs = set(rp.sol_attrs or [])
    return {"prefill", "decode_steps"} <= attrs


def alternate_cache(rp: Replay) -> None:
    probe = "alternate-cache"
    shape = rp.check_shapes()[0]
    seed = rp.seeds[0]
    if not _has_split(rp):
        rp.row(probe, "skipped", shape, seed, detail="the solution defines no prefill/decode_steps split "
               "(the benchmark then times run() whole)")
        return
    ch = rp.ensure_child()
    if ch is None:
        return
    ref = _ref_model(rp, shape, seed)
    r = _model(rp, ch, "q", shape, ref, replace=True)
    if not r.ok:
        rp.failed_reply(probe, r, shape, seed, what="Model construction")
        return
    ctx, dec = shape["ctx_len"], shape["n_decode"]
    sa, sb = seed, seed + 1000
    for slot, s in (("pa", sa), ("pb", sb)):
        r = ch.request("call", rp.limits.call_s, fn={"attr": "solution:prefill"},
                       args=[{"obj": "q"}, {"lit": ctx}, {"lit": s}], out_slot=slot)
        rp._note_tamper(r, "prefill()")
        if not r.ok:
            rp.failed_reply(probe, r, shape, s, what="prefill()")
            return
    refmod = rp.spec.reference_module(shape)
    max_seq = ctx + dec + 8
    want = {}
    for s in (sa, sb):
        h, kc, vc = refmod.prefill(ref, ctx, s, max_seq)
        h, kc, vc = refmod.decode_steps(ref, h, kc, vc, ctx, dec, s)
        want[s] = {"last_hidden": h.float()}
    variants = [("decode-from-first-prefill", "pa", sa, False), ("copied-caches", "pb", sb, True)]
    for variant, slot, s, clone in variants:
        p = rp.scratch.path("dec")
        args = [{"obj": "q"}, {"slot": slot, "index": [0]}, {"slot": slot, "index": [1], "clone": clone},
                {"slot": slot, "index": [2], "clone": clone}, {"lit": ctx}, {"lit": dec}, {"lit": s}]
        r = ch.request("call", rp.limits.call_s, fn={"attr": "solution:decode_steps"}, args=args, save=p)
        rp._note_tamper(r, "decode_steps()")
        if not r.ok:
            rp.failed_reply(probe, r, shape, s, variant, what="decode_steps()")
            return
        out = load_exchange(p)["out"]
        hidden = out[0] if isinstance(out, (list, tuple)) else out
        res = rp.compare(want[s], _to_dev(hidden, rp.device))
        if res.get("ok"):
            rp.row(probe, "pass", shape, s, variant, res)
        else:
            rp.row(probe, "fail", shape, s, variant, res)
            rp.finding("replay-ignores-caller-cache",
                       f"decode_steps from the caller's caches ({variant}: prefill seeds {sa} then {sb}, decoding "
                       f"seed {s}) does not follow them: {res.get('msg', '')}"[:600],
                       {"variant": variant, "max_abs": res.get("max_abs"), "n_bad": res.get("n_bad")})
    ch.request("delete", rp.limits.call_s, objs=["q"], slots=["pa", "pb"])


class DecodeDriver(Driver):
    """cuda 03: `run(ctx_len, n_decode, seed, model=)` on a model with the reference's weights of `seed`."""

    kind = "decode"

    def check_plan(self, rp: Replay) -> list[tuple[dict, int]]:
        """Every check shape x seed, and the spec's long-context check outside tiny shapes."""
        plan = super().check_plan(rp)
        long = (rp.spec.stateful or {}).get("long_context_check")
        if long and rp.shapes_mode != "tiny":
            plan.append((dict(ctx_len=long["ctx_len"], n_decode=long["n_decode"]), long["seed"]))
        return plan

    def check_finding(self, rp: Replay, shape: dict, seed: int, case: str, res: dict) -> tuple[str, dict]:
        return (f"run({shape['ctx_len']}, {shape['n_decode']}, {seed}) disagrees with the reference: "
                f"{res.get('msg', '')}"[:600], {"max_abs": res.get("max_abs"), "n_bad": res.get("n_bad")})

    def check_compare(self, rp: Replay, ref, shape: dict, seed: int, want, got) -> dict:
        """`Replay.check_compare`: the deck's own call arbitrates a failure against the fast reference."""
        ctx, dec = shape["ctx_len"], shape["n_decode"]
        return rp.check_compare(ref, [ctx, dec, seed], want, _to_dev(got, rp.device), where=f"run({ctx}, {dec}, {seed})")

    def reference(self, rp: Replay, shape: dict, seed: int):
        return _ref_model(rp, shape, seed)

    def model(self, rp: Replay, ch, obj: str, shape: dict, ref, replace: bool = True, reuse_attempts: int = 0):
        return _model(rp, ch, obj, shape, ref, replace=replace, reuse_attempts=reuse_attempts)

    def run(self, rp: Replay, ch, obj: str, shape: dict, seed: int):
        return _run_sol(rp, ch, obj, shape["ctx_len"], shape["n_decode"], seed)

    def expected(self, rp: Replay, ref, shape: dict, seed: int):
        return _ref_run(rp, ref, shape["ctx_len"], shape["n_decode"], seed)

    def compare(self, rp: Replay, want, got) -> dict:
        return rp.compare(want, _to_dev(got, rp.device))


DRIVER = DecodeDriver()
