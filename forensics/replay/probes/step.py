"""Replay of the mega 02 Kimi linear decode `step` API: `Model(cfg).step(hidden, state) -> (hidden, state)`.

The state is a list of 4 per-layer dicts in pattern order (KDA: `S` fp32 (H,K,K), `cq`/`ck`/`cv`
bf16 (3, H*K); MLA: `c_kv` (L,512), `k_rope` (L,64) bf16, pos = L), which the solution may mutate
in place or replace; the returned state is what the next step gets (the benchmark threads
`x, state = sol.step(x, state)`).  The deck's check feeds the same state to both models and
judges ONE step by three cosines (out, state[0].S, state[3].c_kv >= 0.98): that is the official
check here too (`correct`).  One step barely moves S, so a solution that never advances the KDA
state passes it; the `state-drift` probe chains steps and compares every step's hidden and every
tensor of the final state of every layer with the deck's cosine rule per tensor.  A failure there
is its own finding (`replay-state-drift`: the chained trajectory leaves the reference, which the
deck's check does not look at), never a failed check.

Rows (probe / case):

check / nominal          the deck's one-step rule (`spec.compare`) from the fed state, per check shape x seed
state-drift / chain-N    N chained steps from the fed state (first seed, per check shape): each hidden and
                         the whole final state.  A hidden, an `S` or a `c_kv` (the kinds the deck judges)
                         leaving the reference: `replay-state-drift` (medium); only the tensors the deck
                         never judges (conv windows, rope keys) differing: the state is kept in a layout
                         of the solution's own (`replay-state-layout`, info)
same-buffer              after a chain of trajectory A, the state (and hidden) it returned are
                         overwritten in place (data_ptr kept) with trajectory B's contents at the
                         same position; the continued chain must follow B
alternate-cache          'alternate state': chain B, then chain A, then continue B from the state B
                         returned, and A from a copy of its state in new storage; a solution that
                         keeps the state inside (or keyed by pointer) follows the wrong trajectory
fresh-state              delete the model and the state, build a new model with other weights
                         (until it lands on a dead model's id(), up to 4 rebuilds) and a new state;
                         then, in one model, a new state on a dead state's id() (`state_on_dead_id`)
determinism              two chains from copies of the same state agree bit for bit

A solution whose own chain drifts (state-drift fails) cannot be held to the reference over a chain
in the other probes: there same-buffer and fresh-state judge the first step after the switch by
the deck's one-step rule, and alternate-cache compares with the solution's own clean run of the
same trajectory in a new model (new storage), so its drift is not read as staleness.

Every comparison row carries max_abs / max_rel / n_bad / worst_index: element statistics against
bf16's A1 bound (atol = rtol = 1e-2) over all compared tensors, reported beside the cosine verdict
(the deck judges by cosine, not elementwise).

The step API's machinery (config, the shared reference model and its chains, the solution's chain,
the comparisons) is in stepcore.py; this file holds the probes.
"""

from __future__ import annotations

import torch

from forensics.vocab import ALTERNATE_CACHE, CHECK, DETERMINISM, FRESH_STATE, SAME_BUFFER, STATE_DRIFT

from ..registry import STEP, probe
from ..session import Session, perturb_state, shape_label, stats, to_dev
from . import generic
from .generic import Driver
from .stepcore import (AFTER_STEPS, CHAIN_STEPS, PROBE_STEPS, cfg_kwargs, chain_compare, clone_args, fed_state,
                       new_model, one_step_compare, ref_chain, reference_model, setup, sol_chain, state_items)

FRESH_ROUNDS = 4


# ------------------------------------------------------------------------------ helpers of the probes
def _drift_fallback(s: Session, shape: dict, res: dict, want_h1, want_st1, sol_first) -> dict:
    """A chain that fails the reference, from a solution whose own clean chain drifts (state-drift):
    judge the first step after the switch by the deck's one-step rule instead (the rule the solution
    is held to from a fed state), so its drift is not read as staleness.  Otherwise `res` as is."""
    if res.get("ok") or sol_first is None or not drifting(s, shape):
        return res
    one = one_step_compare(s, want_h1, want_st1, to_dev(sol_first, s.device))
    one["msg"] = ("the solution's own chain drifts from the reference (state-drift), so the first step after the "
                  "switch is judged by the deck's one-step rule: " + str(one.get("msg", "")))
    one["drift_fallback"] = True
    return one


def _judge(s: Session, probe: str, rule: str, shape, seed, variant: str, res: dict, what: str, extra: dict | None = None):
    if res.get("ok"):
        s.row(probe, "pass", shape, seed, variant, res)
        return True
    s.row(probe, "fail", shape, seed, variant, res)
    s.finding(rule, f"{what} ({shape_label(shape)}, seed {seed}, {variant}): {res.get('msg', '')}"[:700],
              stats(res) | {"variant": variant, "worst_part": res.get("worst_part")} | (extra or {}), probe=probe)
    return False


# ------------------------------------------------------------------------------ check
@probe(CHECK, STEP)
def check(s: Session) -> None:
    """The deck's check: per check shape x seed, ONE step() from the fed state, judged by the cosines
    of out, state[0].S and state[3].c_kv (>= 0.98).  One solution model per config, as the deck
    builds its models once, and the trials in check.py's order, seed-major (`check_pairs`): a
    cache keyed by id(state) sees a ctx-8192 state die before a ctx-2048 one is made, as under the
    deck (the labelled bug 194401 was caught there at seed 2, ctx 2048; shape-major, our check never
    went from 8192 back to 2048)."""
    built_key = None
    for shape, seed in s.spec.check_pairs(s.check_shapes(), s.seeds):
        key = tuple(sorted(cfg_kwargs(s, shape).items()))
        ch = s.child()
        if ch is None or s.early_exit or s.hung:
            s.row(CHECK, "skipped", shape, seed, "nominal", detail="no working child")
            continue
        ref, sd_path = reference_model(s, shape)
        if built_key != key:
            r = new_model(s, ch, "k", shape, sd_path)
            if not r.ok:
                s.failed_reply(CHECK, r, shape, seed, "nominal",
                               what="Model(cfg) construction / load_state_dict(strict=True)")
                return
            built_key = key
        h0, st0 = fed_state(s, shape, seed)
        pr = s.put_state(ch, {"ck_h": h0, "ck_s": st0})
        if not pr.ok:
            s.failed_reply(CHECK, pr, shape, seed, "nominal", what="state transfer")
            continue
        r, hs, first, final = sol_chain(s, ch, "k", clone_args("ck_h", "ck_s"), 1, "cko")
        if first is None:   # the step itself failed
            s.failed_reply(CHECK, r, shape, seed, "nominal", what="step()")
            continue
        ref_hs, ref_st1, _ = ref_chain(s, ref, h0, st0, 1, shape, seed)
        res = one_step_compare(s, ref_hs[0], ref_st1, to_dev(first, s.device))
        ok = bool(res.get("ok"))
        s.row(CHECK, "pass" if ok else "fail", shape, seed, "nominal", res,
              detail="the deck's rule (one step; cosines of out, state[0].S, state[3].c_kv >= 0.98): "
                      + str(res.get("msg", "")))
        if not ok:
            s.finding("replay-check-failed", f"step() from the fed state ({shape_label(shape)}, seed {seed}) "
                      f"fails the deck's one-step check: {res.get('msg', '')}"[:600], stats(res), probe=CHECK)
        if s.alive():
            s.delete(ch, slots=["ck_h", "ck_s", "cko"])
    if built_key is not None and s.alive():
        s.delete(s.child(), objs=["k"])


# ------------------------------------------------------------------------------ state drift
def _drift_key(s: Session, shape: dict) -> tuple:
    return tuple(sorted(cfg_kwargs(s, shape).items())) + (("ctx", shape.get("ctx")),)


def drifting(s: Session, shape: dict) -> bool:
    """Whether the solution's own chain of CHAIN_STEPS steps leaves the reference on `shape` (run
    once, quietly, if the state-drift probe has not run yet)."""
    memo = s.memo("kimi_drift", keep=True)
    key = _drift_key(s, shape)
    if key not in memo:
        _drift_run(s, shape, s.seeds[0], emit=False)
    return bool(memo.get(key))


def _drift_run(s: Session, shape: dict, seed: int, emit: bool) -> None:
    probe = STATE_DRIFT
    memo = s.memo("kimi_drift", keep=True)
    got = setup(s, probe, shape, seed, "kc") if emit else _setup_quiet(s, shape, "kc")
    if got is None:
        return
    ch, ref = got
    h0, st0 = fed_state(s, shape, seed)
    pr = s.put_state(ch, {"cd_h": h0, "cd_s": st0})
    if not pr.ok:
        if emit:
            s.failed_reply(probe, pr, shape, seed, what="state transfer")
        return
    n = CHAIN_STEPS
    r, hs, first, final = sol_chain(s, ch, "kc", clone_args("cd_h", "cd_s"), n, "cdo")
    if not r.ok:
        if emit:
            s.failed_reply(probe, r, shape, seed, f"chain-{n}", what=f"step() {len(hs) + 1} of {n}")
        return
    ref_hs, _, ref_final = ref_chain(s, ref, h0, st0, n, shape, seed)
    res = chain_compare(s, ref_hs, ref_final, to_dev(hs, s.device), to_dev(final, s.device))
    memo[_drift_key(s, shape)] = not res.get("ok")
    if emit:
        _report_drift(s, shape, seed, n, res)
    s.delete(ch, objs=["kc"], slots=["cd_h", "cd_s", "cdo"])


def _setup_quiet(s: Session, shape: dict, obj: str):
    ch = s.child()
    if ch is None or s.early_exit or s.hung:
        return None
    ref, sd_path = reference_model(s, shape)
    r = new_model(s, ch, obj, shape, sd_path)
    return (ch, ref) if r.ok else None


def _report_drift(s: Session, shape: dict, seed: int, n: int, res: dict) -> None:
    probe, variant = STATE_DRIFT, f"chain-{n}"
    if res.get("ok"):
        s.row(probe, "pass", shape, seed, variant, res,
              detail=f"{n} chained steps follow the reference (every hidden and every state tensor)")
        return
    parts = res.get("parts") or {}
    bad = [k for k, p in parts.items() if not p.get("ok")]
    # the kinds of tensor the deck's check judges (the hidden, the KDA state S, the MLA latent cache
    # c_kv): drifting in one of those is drift; only the others (conv windows, rope keys) differing
    # while all of those follow is a layout of the solution's own
    judged = [k for k in bad if k.endswith((".hidden", ".S", ".c_kv")) or k == "state"]
    hidden_bad = [k for k in bad if k.endswith(".hidden")]
    cos = {k: parts[k].get("cos") for k in bad}
    first_bad = min((int(k[4:].split(".")[0]) for k in hidden_bad), default=None)
    how = (f"The deck's check judges one step from a fed state (cosines of out, state[0].S and state[3].c_kv >= "
           f"0.98) and passes or fails on that alone; this probe chains {n} steps, feeding each step the state the "
           f"previous one returned (as the deck's benchmark does), and applies the same cosine rule to every "
           f"step's hidden and to every tensor of every layer's final state.")
    worst = ", ".join(f"{k} {c:.4f}" if isinstance(c, float) else f"{k} (no cosine)" for k, c in list(cos.items())[:6])
    if judged:
        where = (f"the chained hidden leaves the reference from step {first_bad} of {n}" if hidden_bad else
                 f"after {n} steps the state the deck judges after one ({', '.join(judged[:3])}) has left the "
                 f"reference while every hidden still passes")
        s.row(probe, "fail", shape, seed, variant, res,
              detail=f"{where}; not a failure of the deck's check: " + str(res.get("msg")))
        s.finding("replay-state-drift",
                  f"State drift beyond the deck's check ({shape_label(shape)}, seed {seed}): {where} ({worst}). "
                  f"{how} The archived check's verdict is not contradicted by this.",
                  stats(res) | {"worst_part": res.get("worst_part"), "first_bad_step": first_bad, "judged": judged,
                                  "cosines": {k: v for k, v in cos.items()}, "steps": n})
    else:
        s.row(probe, "pass", shape, seed, variant, res,
              detail="every chained hidden follows the reference; state tensors the deck does not check are kept "
                      "in a layout of the solution's own: " + worst)
        s.finding("replay-state-layout",
                  f"Over {n} chained steps ({shape_label(shape)}, seed {seed}) every hidden follows the reference, "
                  f"but state tensors differ from the reference's ({worst}): the solution keeps them in its own "
                  f"layout (or order) and reads them back consistently. {how}",
                  stats(res) | {"worst_part": res.get("worst_part"), "cosines": {k: v for k, v in cos.items()}})


@probe(STATE_DRIFT, STEP)
def state_drift(s: Session) -> None:
    seen = set()
    for shape in s.check_shapes():
        key = _drift_key(s, shape)
        if key in seen:
            continue
        seen.add(key)
        if s.early_exit or s.hung:
            s.row(STATE_DRIFT, "skipped", shape, detail="no working child")
            continue
        _drift_run(s, shape, s.seeds[0], emit=True)


# ------------------------------------------------------------------------------ same-buffer
@probe(SAME_BUFFER, STEP)
def same_buffer(s: Session) -> None:
    probe = SAME_BUFFER
    shape, seed = s.check_shapes()[0], s.seeds[0]
    drifting(s, shape)   # before this probe's models exist (it builds and frees one of its own)
    got = setup(s, probe, shape, seed, "kb")
    if got is None:
        return
    ch, ref = got
    sa, sb = seed, seed + 7919
    hA, stA = fed_state(s, shape, sa)
    hB, stB = fed_state(s, shape, sb)
    pr = s.put_state(ch, {"sb_h": hA, "sb_s": stA})
    if not pr.ok:
        s.failed_reply(probe, pr, shape, seed, what="state transfer")
        return
    refA_hs, _, refA = ref_chain(s, ref, hA, stA, PROBE_STEPS, shape, sa)
    refB_hs, _, refB = ref_chain(s, ref, hB, stB, PROBE_STEPS, shape, sb)
    for variant, new_h in (("state+hidden", refB_hs[-1]), ("state", None)):
        r, hs, _, final = sol_chain(s, ch, "kb", clone_args("sb_h", "sb_s"), PROBE_STEPS, "sbo")
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, variant, what=f"step() chain of {PROBE_STEPS}")
            return
        values, targets, missing = {}, {}, []
        for label, li, k, t in state_items(refB):
            sd = final[li] if isinstance(final, (list, tuple)) and li < len(final) else None
            st = sd.get(k) if isinstance(sd, dict) else None
            if not isinstance(st, torch.Tensor) or tuple(st.shape) != tuple(t.shape):
                missing.append(label)
                continue
            values[label] = t.to(st.dtype)
            targets[label] = {"slot": "sbo", "index": [1, li, k]}
        if new_h is not None:
            if isinstance(hs[-1], torch.Tensor) and tuple(hs[-1].shape) == tuple(new_h.shape):
                values["hidden"] = new_h.to(hs[-1].dtype)
                targets["hidden"] = {"slot": "sbo", "index": [0]}
            else:
                missing.append("hidden")
        if missing:
            s.row(probe, "error", shape, seed, variant,
                  detail="the state step() returned lacks the contract layout, cannot overwrite it in place: "
                          + ", ".join(missing[:8]))
            return
        wr = s.write(ch, values, targets=targets)
        if not wr.ok:
            s.failed_reply(probe, wr, shape, seed, variant, what="in-place state overwrite")
            return
        kept = all(w["ptr_before"] == w["ptr_after"] for w in wr["written"].values())
        r, hs2, first2, final2 = sol_chain(s, ch, "kb", [{"slot": "sbo", "index": [0]}, {"slot": "sbo", "index": [1]}],
                                           AFTER_STEPS, "sbo")
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, variant, what="step() after the overwrite")
            return
        # the hidden the solution continues from: B's (written) or its own from trajectory A
        start_h = refB_hs[-1] if new_h is not None else to_dev(hs[-1], s.device)
        want_hs, want1, want = ref_chain(s, ref, start_h, refB, AFTER_STEPS)
        res = chain_compare(s, want_hs, want, to_dev(hs2, s.device), to_dev(final2, s.device))
        res = _drift_fallback(s, shape, res, want_hs[0], want1, first2)
        _judge(s, probe, "replay-stale-same-buffer", shape, seed, variant, res,
               f"After {PROBE_STEPS} steps of trajectory A (seed {sa}), the returned {variant} was overwritten in place "
               f"with trajectory B's (seed {sb}){' (same storage, data_ptr unchanged)' if kept else ''}; the next "
               f"{AFTER_STEPS} steps do not follow it", {"data_ptr_kept": kept})
    s.delete(ch, objs=["kb"], slots=["sb_h", "sb_s", "sbo"])


# ------------------------------------------------------------------------------ alternate state
@probe(ALTERNATE_CACHE, STEP)
def alternate_state(s: Session) -> None:
    probe = ALTERNATE_CACHE
    shape, seed = s.check_shapes()[0], s.seeds[0]
    drifting(s, shape)   # before this probe's models exist (it builds and frees one of its own)
    got = setup(s, probe, shape, seed, "ka")
    if got is None:
        return
    ch, ref = got
    sa, sb = seed, seed + 1000
    (hA, stA), (hB, stB) = fed_state(s, shape, sa), fed_state(s, shape, sb)
    pr = s.put_state(ch, {"al_hA": hA, "al_sA": stA, "al_hB": hB, "al_sB": stB})
    if not pr.ok:
        s.failed_reply(probe, pr, shape, seed, what="state transfer")
        return
    for name, hs_, ss_ in (("B", "al_hB", "al_sB"), ("A", "al_hA", "al_sA")):   # B first: A is the last one run
        r, _, _, _ = sol_chain(s, ch, "ka", clone_args(hs_, ss_), PROBE_STEPS, f"al{name}")
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, f"trajectory-{name}", what=f"step() chain of {PROBE_STEPS}")
            return
    n = PROBE_STEPS + AFTER_STEPS
    wantB_hs, _, wantB = ref_chain(s, ref, hB, stB, n, shape, sb)
    wantA_hs, _, wantA = ref_chain(s, ref, hA, stA, n, shape, sa)
    variants = [("continue-earlier-trajectory", "alB", False, sb, wantB_hs, wantB,
                 f"continuing trajectory B (seed {sb}) from the state it returned, after trajectory A (seed {sa}) ran"),
                ("copied-state", "alA", True, sa, wantA_hs, wantA,
                 f"continuing trajectory A (seed {sa}) from a copy of its state in new storage (same contents, other "
                 "pointers), after B ran")]
    for variant, slot, clone, s_, want_hs, want, what in variants:
        args = [{"slot": slot, "index": [0], "clone": clone}, {"slot": slot, "index": [1], "clone": clone}]
        r, hs, _, final = sol_chain(s, ch, "ka", args, AFTER_STEPS, f"{slot}c")
        if not r.ok:
            s.failed_reply(probe, r, shape, s_, variant, what="step() from the caller's state")
            return
        res = chain_compare(s, want_hs[PROBE_STEPS:], want, to_dev(hs, s.device), to_dev(final, s.device))
        if not res.get("ok") and drifting(s, shape):
            res = _own_control(s, ch, shape, s_, n, hs, final) or res
        if res.get("ok"):
            s.row(probe, "pass", shape, s_, variant, res)
        else:
            s.row(probe, "fail", shape, s_, variant, res)
            s.finding("replay-ignores-caller-cache",
                      f"step() does not follow the state it is handed ({what}): {res.get('msg', '')}"[:700],
                      stats(res) | {"variant": variant, "worst_part": res.get("worst_part")})
    s.delete(ch, objs=["ka"],
               slots=["al_hA", "al_sA", "al_hB", "al_sB", "alA", "alB", "alAc", "alBc"])


def _own_control(s: Session, ch, shape: dict, seed: int, n: int, sol_hs: list, sol_final) -> dict | None:
    """For a solution whose own chain drifts: the same trajectory (seed `seed`, n steps) run cleanly in
    a NEW solution model from a new copy of the fed state; the probed steps (the last len(sol_hs))
    are compared with that run's, by the deck's cosine rule.  None if the control cannot run."""
    _, sd_path = reference_model(s, shape)
    r = new_model(s, ch, "kx", shape, sd_path)
    if not r.ok:
        return None
    h0, st0 = fed_state(s, shape, seed)
    pr = s.put_state(ch, {"cx_h": h0, "cx_s": st0})
    if not pr.ok:
        return None
    r, hs, _, final = sol_chain(s, ch, "kx", clone_args("cx_h", "cx_s"), n, "cxo")
    s.delete(ch, objs=["kx"], slots=["cx_h", "cx_s", "cxo"])
    if not r.ok or final is None:
        return None
    k = len(sol_hs)
    res = chain_compare(s, [to_dev(h, s.device) for h in hs[-k:]], to_dev(final, s.device),
                        to_dev(sol_hs, s.device), to_dev(sol_final, s.device))
    res["msg"] = ("the solution's own chain drifts from the reference (state-drift), so it is compared with its own "
                  "clean run of the same trajectory in a new model: " + str(res.get("msg", "")))
    res["drift_fallback"] = True
    return res


# ------------------------------------------------------------------------------ fresh state
@probe(FRESH_STATE, STEP)
def fresh_state(s: Session, rounds: int = FRESH_ROUNDS) -> None:
    """Delete model and state, build a new model with other weights and a new state (fed without a
    copy, so it may sit on the dead state's storage); generic.rebuild_rounds decides how often."""
    probe = FRESH_STATE
    shape = s.check_shapes()[0]
    drifting(s, shape)   # before the rebuild rounds, whose dead ids a model of its own would take
    ch = s.child()
    if ch is None or s.early_exit or s.hung:
        s.row(probe, "skipped", shape, detail="no working child")
        return
    ref, base_path = reference_model(s, shape)
    base = {k: v.detach().cpu().clone() for k, v in ref.state_dict().items()}
    seen_ptrs: set = set()
    n = PROBE_STEPS + AFTER_STEPS

    def one_round(rnd: int, seed: int):
        s.delete(ch, slots=["fr_h", "fr_s", "fro"])   # dead state first
        sd = None
        if rnd == 0:
            path = base_path
        else:
            sd = perturb_state(base, torch.Generator().manual_seed(9000 + rnd))
            path = s.save_state(sd)
        r = new_model(s, ch, "kf", shape, path, replace=True, reuse_attempts=8)
        if path != base_path:
            s.release_state(path)
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, what="Model(cfg) construction")
            return None
        obj_id = r.get("obj_id")
        h0, st0 = fed_state(s, shape, seed)
        pr = s.put_state(ch, {"fr_h": h0, "fr_s": st0})
        if not pr.ok:
            s.failed_reply(probe, pr, shape, seed, what="state transfer")
            return None
        ptrs = set((pr.get("slots") or {}).get("fr_s", {}).get("ptrs") or [])
        ptr_reused = bool(ptrs & seen_ptrs)
        seen_ptrs.update(ptrs)
        # fed without a copy: the new state objects themselves, possibly on the dead ones' storage
        r, hs, first, final = sol_chain(s, ch, "kf", [{"slot": "fr_h"}, {"slot": "fr_s"}], n, "fro")
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, f"rebuild-{rnd}", what="step() chain")
            return None
        res = None
        if rnd:
            with s.other_weights(ref, sd):   # the round's weights; the shared reference's own come back after
                want_hs, want1, want = ref_chain(s, ref, h0, st0, n)
            res = chain_compare(s, want_hs, want, to_dev(hs, s.device), to_dev(final, s.device))
            res = _drift_fallback(s, shape, res, want_hs[0], want1, first)
        return obj_id, res, {"variant": "-reused-ptr" if ptr_reused else "",
                             "msg": " and a new state" + (" (on a dead state's storage)" if ptr_reused else ""),
                             "data": {"ptr_reused": ptr_reused, "worst_part": (res or {}).get("worst_part")}}

    try:
        generic.rebuild_rounds(s, probe, shape, rounds, one_round, f"results of an old one over {n} steps")
    finally:
        if s.alive(ch):
            s.delete(ch, objs=["kf"], slots=["fr_h", "fr_s", "fro"])
    state_on_dead_id(s)


def state_on_dead_id(s: Session) -> None:
    """One model, two states: a step from state A (the longest check context), A dies, and state B
    (the shortest context, another seed) is handed over on A's id(): in A's own list and per-layer
    dicts, emptied and refilled (the worker's Store.op_recycle: the same as CPython giving B A's memory, where
    nothing else holds A); B's step is judged by the deck's one-step rule.

    Mechanism: a cache keyed by id(state) (or id of a layer's dict) that outlives the state.  In
    check.py's loop CPython gives a new state list a dead one's memory by chance; the labelled
    Kimi bug (194401, a capacity buffer per id(state)) was caught there at seed 2, ctx 2048, right
    after a ctx-8192 state died, and passed our check, whose lists land elsewhere.  Longest before
    shortest: a capacity guard (`cap <= L`) does not save a cache from that direction.
    Look-alikes that pass: caches keyed by id but checked against the state's tensors, or none."""
    probe, case = FRESH_STATE, "state-on-dead-id"
    shapes = s.check_shapes()
    big = max(shapes, key=lambda sh: sh.get("ctx", 0))
    small = min(shapes, key=lambda sh: sh.get("ctx", 0))
    if cfg_kwargs(s, small) != cfg_kwargs(s, big):
        small = big
    seeds = list(s.seeds) or [0]
    s1, s2 = seeds[0], (seeds[1] if len(seeds) > 1 else seeds[0] + 1)
    ch = s.child()
    if ch is None or s.early_exit or s.hung:
        s.row(probe, "skipped", small, s2, case, detail="no working child")
        return
    ref, sd_path = reference_model(s, big)
    slots = ["dd_h", "dd_s", "ddo", "de_h", "de_s", "deo"]
    try:
        r = new_model(s, ch, "kd", big, sd_path)
        if not r.ok:
            s.failed_reply(probe, r, big, s1, case, what="Model(cfg) construction")
            return
        h1, st1 = fed_state(s, big, s1)
        pr = s.put_state(ch, {"dd_h": h1, "dd_s": st1})
        dead = (pr.get("slots") or {}).get("dd_s") or {} if pr.ok else {}
        if not pr.ok or dead.get("type") != "list":
            s.row(probe, "skipped", big, s1, case,
                  detail="the state did not arrive as a list" if pr.ok else f"state transfer: {pr.error}")
            return
        r, _, first, _ = sol_chain(s, ch, "kd", [{"slot": "dd_h"}, {"slot": "dd_s"}], 1, "ddo")
        if not r.ok or first is None:
            s.failed_reply(probe, r, big, s1, case, what="step() from state A")
            return
        ref_hs, ref_s, _ = ref_chain(s, ref, h1, st1, 1, big, s1)
        if not one_step_compare(s, ref_hs[0], ref_s, to_dev(first, s.device)).get("ok"):
            s.row(probe, "skipped", big, s1, case, detail="state A's own step already fails the deck's rule "
                  "(the check reports it): no stale state to tell apart")
            return
        s.delete(ch, slots=["dd_h", "ddo"])   # A is held by its slot alone now
        h2, st2 = fed_state(s, small, s2)
        pr = s.put_state(ch, {"de_h": h2, "de_s": st2})
        pl = s.recycle(ch, slot="de_s", dead="dd_s") if pr.ok else pr
        if not pl.ok or not pl.get("recycled") or (pl.get("meta") or {}).get("id") != dead.get("id"):
            s.row(probe, "skipped", small, s2, case,
                  detail=f"state B was not handed over on state A's id(): {pl.get('why') or pl.error or 'id differs'}")
            return
        r, _, first, _ = sol_chain(s, ch, "kd", [{"slot": "de_h"}, {"slot": "de_s"}], 1, "deo")
        if not r.ok or first is None:
            s.failed_reply(probe, r, small, s2, case, what="step() from state B on A's id()")
            return
        ref_hs, ref_s, _ = ref_chain(s, reference_model(s, small)[0], h2, st2, 1, small, s2)
        res = one_step_compare(s, ref_hs[0], ref_s, to_dev(first, s.device))
        where = (f"ctx {big.get('ctx')} seed {s1}, then ctx {small.get('ctx')} seed {s2} on its id() "
                 f"({pl.get('items_reused')} of {len(st2)} layer dicts on theirs too)")
        ok = bool(res.get("ok"))
        s.row(probe, "pass" if ok else "fail", small, s2, case, res,
              detail=f"a new state on a dead state's id(), same model: {where}; the deck's one-step rule: "
                      + str(res.get("msg", "")))
        if not ok:
            s.finding("replay-stale-fresh-state",
                      f"step() serves a dead state's contents to a new state on its id() ({where}): something "
                      f"is keyed by id(state) and outlives it; {res.get('msg', '')}"[:600],
                      dict(stats(res), state_id_reused=True, items_reused=pl.get("items_reused")), probe=probe)
    finally:
        if s.alive(ch):
            s.delete(ch, objs=["kd"], slots=slots)


# ------------------------------------------------------------------------------ the driver
class StepDriver(Driver):
    """mega 02: `Model(cfg).step(hidden, state)` chained from a fed state (determinism: `generic`;
    fresh-state is its own, above: its rounds perturb one reference's weights and feed new state)."""

    kind = STEP
    call = "step() chain"
    objs = {DETERMINISM: "kd"}
    repeats = repeat_case = "2-chains"
    steps = PROBE_STEPS + AFTER_STEPS

    def prepare(self, s: Session, probe: str, shape: dict, seed: int):
        got = setup(s, probe, shape, seed, self.objs[probe])
        if got is None:
            return None
        ch, _ = got
        h0, st0 = fed_state(s, shape, seed)
        pr = s.put_state(ch, {"de_h": h0, "de_s": st0})
        if not pr.ok:
            s.failed_reply(probe, pr, shape, seed, what="state transfer")
            return None
        return ch

    def repeat(self, s: Session, ch, shape: dict, seed: int, i: int):
        """A chain from copies of the fed hidden and state."""
        r, hs, _, final = sol_chain(s, ch, self.objs[DETERMINISM], clone_args("de_h", "de_s"), self.steps, f"deo{i}")
        return r, (hs, final)

    def same_detail(self, shape: dict) -> str:
        return f"two chains of {self.steps} steps bitwise identical"

    def differ_detail(self, shape: dict, d: float) -> str:
        return f"two chains of {self.steps} steps differ by up to {d:.4g}"

    def differ_message(self, shape: dict, d: float) -> str:
        return (f"Two chains of {self.steps} step() calls from copies of the same state differ by "
                f"up to {d:.4g} ({shape_label(shape)}).")

    def drop(self, s: Session, ch, probe: str) -> None:
        s.delete(ch, objs=["kd"], slots=["de_h", "de_s", "deo0", "deo1"])


DRIVER = StepDriver()


@probe(DETERMINISM, STEP)
def determinism(s: Session) -> None:
    generic.determinism(s, DRIVER)
