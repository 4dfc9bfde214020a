"""Probes of the cuda 03 megaqwen decode API (prefill / decode_steps / run); the mega 02 Kimi `step`
API is in `step.py`, the cuda 04 MinGRU rollout API in `rollout.py`, their wall-clock timing in
`timing.py`.

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

from forensics.vocab import ALTERNATE_CACHE, CHECK, DETERMINISM, FRESH_STATE

from ..registry import DECODE, probe
from ..session import Session, to_dev
from . import generic
from .generic import Driver


def _reset(ref, seed: int) -> None:
    if hasattr(ref, "reset_parameters"):
        ref.reset_parameters(seed)


def _ref_model(s: Session, shape: dict, seed: int):
    """The reference with the check's weights of `seed` (check.py's `reset_parameters(seed)`): the
    replay's one model of `shape`, re-seeded (`Session.seeded_reference`: built once, each seed's
    weights drawn once); valid until the next call for this shape."""
    return s.seeded_reference(shape, seed, _reset)


def _model(s: Session, ch, obj: str, shape: dict, ref, replace: bool = False, reuse_attempts: int = 0):
    return s.new_model(ch, obj, shape, s.state_file(shape, ref), replace=replace, reuse_attempts=reuse_attempts)


def _run_sol(s: Session, ch, obj: str, ctx: int, dec: int, seed: int):
    """solution.run(ctx, dec, seed, model=obj); retried without model= on a TypeError (as check does)."""
    args = [{"lit": ctx}, {"lit": dec}, {"lit": seed}]
    r, out = s.call_entry(ch, {"attr": "solution:run"}, args, kwargs={"model": {"obj": obj}}, what="run()")
    if not r.ok and r.status == "error" and "TypeError" in r.error and "model" in r.error:
        r, out = s.call_entry(ch, {"attr": "solution:run"}, args, what="run()")
    return r, out


def _ref_run(s: Session, ref, ctx: int, dec: int, seed: int):
    with s.charged("reference"):   # the deck's run() itself, whatever reference this replay times
        return s.spec.reference_forward(ref, [ctx, dec, seed])


def _has_split(s: Session) -> bool:
    return {"prefill", "decode_steps"} <= set(s.solution_attrs)


@probe(ALTERNATE_CACHE, DECODE)
def alternate_cache(s: Session) -> None:
    probe = ALTERNATE_CACHE
    shape = s.check_shapes()[0]
    seed = s.seeds[0]
    if not _has_split(s):
        s.row(probe, "skipped", shape, seed, detail="the solution defines no prefill/decode_steps split "
              "(the benchmark then times run() whole)")
        return
    ch = s.child()
    if ch is None:
        return
    ref = _ref_model(s, shape, seed)
    r = _model(s, ch, "q", shape, ref, replace=True)
    if not r.ok:
        s.failed_reply(probe, r, shape, seed, what="Model construction")
        return
    ctx, dec = shape["ctx_len"], shape["n_decode"]
    sa, sb = seed, seed + 1000
    for slot, sd in (("pa", sa), ("pb", sb)):
        r, _ = s.call_entry(ch, {"attr": "solution:prefill"}, [{"obj": "q"}, {"lit": ctx}, {"lit": sd}],
                            out_slot=slot, fetch=False, what="prefill()")
        if not r.ok:
            s.failed_reply(probe, r, shape, sd, what="prefill()")
            return
    refmod = s.spec.reference_module(shape)
    max_seq = ctx + dec + 8
    want = {}
    for sd in (sa, sb):
        h, kc, vc = refmod.prefill(ref, ctx, sd, max_seq)
        h, kc, vc = refmod.decode_steps(ref, h, kc, vc, ctx, dec, sd)
        want[sd] = {"last_hidden": h.float()}
    variants = [("decode-from-first-prefill", "pa", sa, False), ("copied-caches", "pb", sb, True)]
    for variant, slot, sd, clone in variants:
        args = [{"obj": "q"}, {"slot": slot, "index": [0]}, {"slot": slot, "index": [1], "clone": clone},
                {"slot": slot, "index": [2], "clone": clone}, {"lit": ctx}, {"lit": dec}, {"lit": sd}]
        r, out = s.call_entry(ch, {"attr": "solution:decode_steps"}, args, what="decode_steps()")
        if not r.ok:
            s.failed_reply(probe, r, shape, sd, variant, what="decode_steps()")
            return
        hidden = out[0] if isinstance(out, (list, tuple)) else out
        res = s.compare(want[sd], to_dev(hidden, s.device))
        if res.get("ok"):
            s.row(probe, "pass", shape, sd, variant, res)
        else:
            s.row(probe, "fail", shape, sd, variant, res)
            s.finding("replay-ignores-caller-cache",
                      f"decode_steps from the caller's caches ({variant}: prefill seeds {sa} then {sb}, decoding "
                      f"seed {sd}) does not follow them: {res.get('msg', '')}"[:600],
                      {"variant": variant, "max_abs": res.get("max_abs"), "n_bad": res.get("n_bad")})
    s.delete(ch, objs=["q"], slots=["pa", "pb"])


class DecodeDriver(Driver):
    """cuda 03: `run(ctx_len, n_decode, seed, model=)` on a model with the reference's weights of `seed`."""

    kind = DECODE

    def check_plan(self, s: Session) -> list[tuple[dict, int]]:
        """Every check shape x seed, and the spec's long-context check outside tiny shapes."""
        plan = super().check_plan(s)
        long = (s.spec.stateful or {}).get("long_context_check")
        if long and s.shapes_mode != "tiny":
            plan.append((dict(ctx_len=long["ctx_len"], n_decode=long["n_decode"]), long["seed"]))
        return plan

    def check_finding(self, s: Session, shape: dict, seed: int, case: str, res: dict) -> tuple[str, dict]:
        return (f"run({shape['ctx_len']}, {shape['n_decode']}, {seed}) disagrees with the reference: "
                f"{res.get('msg', '')}"[:600], {"max_abs": res.get("max_abs"), "n_bad": res.get("n_bad")})

    def check_compare(self, s: Session, ref, shape: dict, seed: int, want, got) -> dict:
        """`Session.check_compare`: the deck's own call arbitrates a failure against the fast reference."""
        ctx, dec = shape["ctx_len"], shape["n_decode"]
        return s.check_compare(ref, [ctx, dec, seed], want, to_dev(got, s.device), where=f"run({ctx}, {dec}, {seed})")

    def reference(self, s: Session, shape: dict, seed: int):
        return _ref_model(s, shape, seed)

    def model(self, s: Session, ch, obj: str, shape: dict, ref, replace: bool = True, reuse_attempts: int = 0):
        return _model(s, ch, obj, shape, ref, replace=replace, reuse_attempts=reuse_attempts)

    def run(self, s: Session, ch, obj: str, shape: dict, seed: int):
        return _run_sol(s, ch, obj, shape["ctx_len"], shape["n_decode"], seed)

    def expected(self, s: Session, ref, shape: dict, seed: int):
        return _ref_run(s, ref, shape["ctx_len"], shape["n_decode"], seed)

    def compare(self, s: Session, want, got) -> dict:
        return s.compare(want, to_dev(got, s.device))


DRIVER = DecodeDriver()


@probe(CHECK, DECODE)
def check(s: Session) -> None:
    generic.check(s, DRIVER)


@probe(FRESH_STATE, DECODE)
def fresh_state(s: Session) -> None:
    generic.fresh_state(s, DRIVER)


@probe(DETERMINISM, DECODE)
def determinism(s: Session) -> None:
    generic.determinism(s, DRIVER)
