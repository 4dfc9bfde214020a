"""Stale-result probes of a plain module API: does the solution follow new data it is handed, or
serve what it computed (or captured) before?

same-buffer      warm 11 calls, then overwrite every input (and every float parameter) in place,
                 data_ptr unchanged, and compare against a fresh reference
unsampled-region the same, changing only the first row, the last row or scattered elements
fresh-state      delete the warmed model and inputs, build new ones with other weights and data
                 (CPython and the caching allocator often hand back the same id()/data_ptr)
fresh-inputs     the warmed model called on new input tensors at new addresses (the first ones kept
                 alive, so no address is handed back), then on the first ones again: catches a
                 graph captured on the caller's buffers, or any state bound to the first pointers
"""

from __future__ import annotations

import torch

from forensics.vocab import FRESH_INPUTS, FRESH_STATE, SAME_BUFFER, UNSAMPLED_REGION

from ..registry import MODULE, probe
from ..session import Session, perturb_state, region_mutate, reuse, shape_label, stats, to_dev
from .common import judge, prepare, put_other


@probe(SAME_BUFFER, MODULE)
def same_buffer(s: Session) -> None:
    _same_buffer(s, regions=False)


@probe(UNSAMPLED_REGION, MODULE)
def unsampled_region(s: Session) -> None:
    _same_buffer(s, regions=True)


def _same_buffer(s: Session, regions: bool) -> None:
    probe = UNSAMPLED_REGION if regions else SAME_BUFFER
    rule = "replay-stale-unsampled-region" if regions else "replay-stale-same-buffer"
    w = prepare(s, probe, "w", n_warm=11, multi_row=regions)
    if w is None:
        return
    ch, ref, base, args, shape, seed = w.ch, w.ref, w.base, w.args, w.shape, w.seed
    other = s.make_inputs(shape, seed + 7919)
    gen = torch.Generator().manual_seed(1234)
    tens_idx = [i for i, x in enumerate(base) if isinstance(x, torch.Tensor)]
    variants: list[tuple[str, list]] = []
    if regions:
        for region in ("first-row", "last-row", "second-half", "scattered"):
            new = list(base)
            changed = False
            for i in tens_idx:
                if base[i].is_floating_point() and base[i].shape == other[i].shape:
                    new[i] = region_mutate(base[i], other[i], region, gen)
                    changed = changed or not torch.equal(new[i], base[i])
            if changed:
                variants.append((region, new))
    else:
        variants.append(("all-inputs", list(other)))
        for i in tens_idx:  # one input at a time, the others kept
            if len(tens_idx) > 1 and base[i].is_floating_point():
                new = list(base)
                new[i] = other[i]
                variants.append((f"input{i}", new))
    for variant, new in variants:
        wr = s.write(ch, {f"wx{i}": new[i] for i in tens_idx})
        if not wr.ok:
            s.failed_reply(probe, wr, shape, seed, variant, what="in-place overwrite")
            return
        r, payload = s.call(ch, "w", args)
        if not r.ok:
            s.failed_reply(probe, r, shape, seed, variant)
            return
        ref_out = s.reference(ref, to_dev(new, s.device))
        ptrs = {k: (v["ptr_before"] == v["ptr_after"]) for k, v in wr["written"].items()}
        judge(s, probe, rule, variant, shape, seed, ref_out, payload, new,
              extra=" (same storage, data_ptr unchanged)" if all(ptrs.values()) else "")
        # restore A in place before the next variant (A3 step 4)
        s.write(ch, {f"wx{i}": base[i] for i in tens_idx})
        r, _ = s.call(ch, "w", args)
    if not regions:
        _same_buffer_params(s, ch, ref, shape, seed, base, args, gen)
    s.delete(ch, objs=["w"], slots=[f"wx{i}" for i in tens_idx])


def _same_buffer_params(s: Session, ch, ref, shape, seed, base, args, gen) -> None:
    """Overwrite each float parameter/buffer of the warmed model in place, as the deck's
    small_weight case does: `copy_`, data_ptr kept, `_version` bumped.  A solution that does not
    follow is stale (critical).  One that follows is then given a second set of weights written
    through a `.data` alias (`_version` kept), a write the deck never makes: not following that
    is a weight cache keyed on `_version`, which the contract allows (info finding)."""
    sd = ref.state_dict()
    floats = [k for k, v in sd.items() if v.is_floating_point() and v.numel()]
    if not floats:
        return
    label = "parameters:" + ",".join(floats)[:80]
    saved = {k: sd[k].detach().cpu().clone() for k in floats}
    for variant, version in (("", "bump"), ("-version-kept", "keep")):
        new_sd = perturb_state(saved, gen, signs=True)
        wr = s.write(ch, {f"w::{k}": v for k, v in new_sd.items()}, version=version)
        if not wr.ok:
            s.failed_reply(SAME_BUFFER, wr, shape, seed, "parameters" + variant,
                           what="in-place parameter overwrite")
            return
        with s.other_weights(ref, new_sd), torch.no_grad():   # the shared reference's own come back after
            ref_out = s.reference(ref, to_dev(base, s.device))
        r, payload = s.call(ch, "w", args)
        if not r.ok:
            s.failed_reply(SAME_BUFFER, r, shape, seed, "parameters" + variant)
            return
        bumped = all(w["version"] != w["version_before"] for w in wr["written"].values())
        if version == "bump":
            if not judge(s, SAME_BUFFER, "replay-stale-same-buffer", label, shape, seed, ref_out, payload,
                         base, extra=" (parameters overwritten in place with copy_, as the deck's "
                                     "small_weight case does: data_ptr kept, _version "
                                     + ("bumped)" if bumped else "unchanged)")):
                return
            continue
        res = s.compare(ref_out, s.sol_out(payload), inputs=base)
        if res.get("ok"):
            s.row(SAME_BUFFER, "pass", shape, seed, label + variant, res)
        else:
            s.row(SAME_BUFFER, "pass", shape, seed, label + variant, res,
                  detail="weights cached by _version: a write that keeps _version (which the deck never "
                         "makes) is not followed; allowed")
            s.finding("replay-version-keyed-cache",
                      f"The solution follows in-place weight writes that bump _version (the deck's copy_) "
                      f"but not a write through a .data alias that keeps it ({shape_label(shape)}): a "
                      "weight cache keyed on Tensor._version. Allowed by the contract; reported.",
                      stats(res))


@probe(FRESH_STATE, MODULE)
def fresh_state(s: Session) -> None:
    probe = FRESH_STATE
    w = prepare(s, probe, "f", n_warm=3)
    if w is None:
        return
    ch, ref, base, names, shape, seed = w.ch, w.ref, w.base, w.names, w.shape, w.seed
    meta0 = s.meta(ch, objs=["f"], slots=names)
    names2 = [f"fx{i}" for i, x in enumerate(base) if isinstance(x, torch.Tensor)]
    w.drop()
    gen = torch.Generator().manual_seed(4321)
    sd2 = perturb_state({k: v.detach().cpu() for k, v in ref.state_dict().items()}, gen)
    r = s.new_model(ch, "f", shape, s.save_state(sd2))
    if not r.ok:
        s.failed_reply(probe, r, shape, seed, what="second Model construction")
        return
    other, args2 = put_other(s, ch, probe, shape, seed, 104729, "fx")
    if other is None:
        return
    meta1 = s.meta(ch, objs=["f"], slots=names2)
    reused = reuse(meta0, meta1)
    r, payload = s.call(ch, "f", args2)
    if not r.ok:
        s.failed_reply(probe, r, shape, seed)
        return
    with s.other_weights(ref, sd2):   # the new model's weights; the shared reference's own come back after
        ref_out = s.reference(ref, to_dev(other, s.device))
    judge(s, probe, "replay-stale-fresh-state", "new-model-new-inputs", shape, seed, ref_out, payload, other,
          extra=f" (new objects; reused: {reused or 'none'})")
    s.delete(ch, objs=["f"], slots=names2)


@probe(FRESH_INPUTS, MODULE)
def fresh_inputs(s: Session) -> None:
    probe, rule = FRESH_INPUTS, "replay-stale-fresh-inputs"
    w = prepare(s, probe, "i", n_warm=3)
    if w is None:
        return
    ch, base, args, names, shape, seed = w.ch, w.base, w.args, w.names, w.shape, w.seed
    other, args2 = put_other(s, ch, probe, shape, seed, 27449, "iy")  # the first stay alive
    if other is None:
        return
    names2 = [a["slot"] for a in args2 if "slot" in a]
    meta = s.meta(ch, slots=names + names2)
    ptrs = {k: v.get("ptr") for k, v in ((meta.get("slots") or {}) if meta.ok else {}).items()}
    shared = sorted({ptrs.get(k) for k in names} & {ptrs.get(k) for k in names2} - {None})
    where = "new storage" if not shared else f"{len(shared)} address(es) shared with the first inputs"
    for variant, a, x in (("new-inputs-new-storage", args2, other), ("first-inputs-again", args, base)):
        got = w.call(a, variant=variant)
        if got is None:
            return
        payload = got[1]
        # the first inputs' reference output is the check's (kept); the new ones' is computed here
        ref_out = w.ref_out() if x is base else s.reference(w.ref, to_dev(x, s.device))
        if not judge(s, probe, rule, variant, shape, seed, ref_out, payload, x, extra=f" ({where})"):
            break
    s.delete(ch, objs=["i"], slots=names + names2)
