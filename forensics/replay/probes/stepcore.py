"""The mega 02 Kimi `step` API as the replay drives it: the config a shape gives, the reference model
(one per config, shared for the replay) and its chains from the deck's fed state (each step computed
once per replay, `ref_chain`), the solution's chain in the child (`sol_chain`), and the comparisons:
the deck's one-step rule (`one_step_compare`) and the chained rule over every hidden and every state
tensor (`chain_compare`).  The probes that use them are in step.py."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from ..session import Session

CHAIN_STEPS = 8      # steps of the chained check
PROBE_STEPS = 3      # steps of a trajectory before a probe switches state / model
AFTER_STEPS = 3      # steps after the switch


# ------------------------------------------------------------------------------ config and reference
def cfg_kwargs(s: Session, shape: dict) -> dict:
    """Config fields given by the shape: n_experts (the deck's build_config), and for tiny shapes
    the rest of a small config (same code, small sizes)."""
    names = {f.name for f in dataclasses.fields(s.reference_module().Config)}
    return {k: v for k, v in shape.items() if k in names}


def config(s: Session, shape: dict):
    return s.reference_module().Config(**cfg_kwargs(s, shape))


def reference_model(s: Session, shape: dict):
    """(reference model on s.device, path of its state-dict file), cached per config."""
    key = tuple(sorted(cfg_kwargs(s, shape).items()))
    cache = s.memo("kimi_ref")
    if key not in cache:
        dev = torch.device(s.device)
        with s.charged("reference_model"), dev:
            model = s.reference_module().Model(config(s, shape))   # weights drawn on the CPU generator, copied
            model = model.to(dev).eval()
        cache[key] = (model, s.state_file(shape, model, key="-kimi"))
    s.share_reference(shape, cache[key][0])   # its chains from the deck's inputs are kept (`ref_chain`)
    return cache[key]


def fed_state(s: Session, shape: dict, seed: int):
    """(hidden, state) as the deck's init_token / init_state draw them, on s.device."""
    mod, cfg = s.reference_module(), config(s, shape)
    with s.charged("inputs"):
        return mod.init_token(cfg, seed, s.device), mod.init_state(cfg, shape["ctx"], seed, s.device)


def ref_chain(s: Session, ref, hidden, state, n: int, shape: dict | None = None, seed: int | None = None):
    """-> (hiddens of every step, state after step 1, final state).  With `shape` and `seed` (the
    hidden and state are the deck's inputs of that shape and seed, and `ref` has its own weights)
    each step is computed once per replay: the check, state-drift, same-buffer, alternate-cache and
    the state-on-dead-id case all chain from the first seed's state, each as far as it needs."""
    hs, first = [], None
    for i in range(n):
        key = s.ref_key(shape, seed, f"step{i + 1}") if shape is not None and seed is not None else None
        hidden, state = s.reference(ref, [hidden, state], key=key)
        hs.append(hidden)
        if i == 0:
            first = state
    return hs, first, state


def config_arg(s: Session, shape: dict) -> list:
    return [{"call_ref": "Config", "kwargs": cfg_kwargs(s, shape)}]


def new_model(s: Session, ch, obj: str, shape: dict, state_path: str, replace: bool = True, reuse_attempts: int = 0,
              strict: bool = True):
    """solution.Model(reference.Config(...)) in the child, the given weights loaded strictly."""
    return s.build(ch, obj, "solution:Model", args=config_arg(s, shape), state_path=state_path, strict=strict,
                   replace=replace, reuse_attempts=reuse_attempts)


# ------------------------------------------------------------------------------ comparison
def split_out(out: Any) -> tuple[Any, Any]:
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return out[0], out[1]
    return out, None


def state_items(state: Any):
    """(label, layer, key, tensor) of every tensor of a reference-layout state."""
    for li, st in enumerate(state):
        for k, t in st.items():
            yield f"state[{li}].{k}", li, k, t


def chain_compare(s: Session, ref_hs: list, ref_state: Any, sol_hs: list, sol_state: Any) -> dict:
    """Deck rule per tensor (shape equal, finite, cosine >= 0.98) over every hidden and every tensor of
    the final state; element statistics against bf16's A1 bound."""
    from forensics.kernels.common import check_tensor, cosine
    from forensics.kernels.problems.mega_02_kimi import COSINE_MIN
    atol, rtol = s.spec.tolerance_for(torch.bfloat16)
    parts: dict[str, dict] = {}

    def part(label: str, r: torch.Tensor, got: Any) -> None:
        if isinstance(got, dict) and ("__subclass__" in got or "__opaque__" in got):
            parts[label] = {"ok": False, "cos": None, "msg": f"{label}: not a plain tensor ({got.get('type') or got.get('__subclass__')})"}
            return
        st = check_tensor(r, got, atol, rtol, label)
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(r.shape):
            parts[label] = dict(st, ok=False, cos=None)
            return
        finite = bool(torch.isfinite(got.float()).all())
        cos = cosine(r, got) if finite else float("nan")
        ok = finite and cos >= COSINE_MIN
        parts[label] = dict(st, ok=ok, cos=cos, msg=f"{label}: cosine {cos:.4f}" + ("" if ok else f" < {COSINE_MIN}")
                            if finite else f"{label}: not finite")

    if len(sol_hs) != len(ref_hs):
        return {"ok": False, "msg": f"{len(sol_hs)} of {len(ref_hs)} steps returned", "parts": {}}
    for i, (r, h) in enumerate(zip(ref_hs, sol_hs)):
        part(f"step{i + 1}.hidden", r, h)
    if not isinstance(sol_state, (list, tuple)) or len(sol_state) != len(ref_state):
        parts["state"] = {"ok": False, "cos": None,
                          "msg": f"state: expected a list of {len(ref_state)} layer dicts, got {type(sol_state).__name__}"}
    else:
        for label, li, k, r in state_items(ref_state):
            sd = sol_state[li]
            part(label, r, sd.get(k) if isinstance(sd, dict) else None)
    bad = [k for k, p in parts.items() if not p["ok"]]
    cos = {k: p.get("cos") for k, p in parts.items()}
    if bad:   # the failing tensor furthest from the rule (no cosine at all first: shape, NaN)
        worst = min(bad, key=lambda k: (parts[k].get("cos") is not None, parts[k].get("cos") or 0.0))
    else:     # all pass: where the largest element error is
        worst = max(parts, key=lambda k: parts[k].get("max_abs") or 0.0) if parts else None
    w = parts.get(worst, {})
    out = {"ok": not bad, "max_abs": max((p.get("max_abs") or 0.0) for p in parts.values()) if parts else None,
           "max_rel": max((p.get("max_rel") or 0.0) for p in parts.values()) if parts else None,
           "n_bad": sum((p.get("n_bad") or 0) for p in parts.values()),
           "n_total": sum((p.get("n_total") or 0) for p in parts.values()),
           "worst_index": (f"{worst}{w.get('worst_index')}" if w.get("worst_index") is not None else worst),
           "worst_part": worst, "cosines": cos, "cosine_min": COSINE_MIN, "atol": atol, "rtol": rtol,
           "parts": {k: {"ok": p["ok"], "cos": p.get("cos"), "msg": p.get("msg")} for k, p in parts.items()}}
    finite_cos = [c for c in cos.values() if c is not None and not math.isnan(c)]
    lowest = f"lowest cosine {min(finite_cos):.4f}" if finite_cos else "no cosine"
    out["msg"] = (f"{len(ref_hs)} steps, {len(parts)} tensors: " + ("all cosines >= %s" % COSINE_MIN if not bad else
                  "; ".join(parts[k]["msg"] for k in bad[:6]) + (f" (+{len(bad) - 6} more)" if len(bad) > 6 else ""))
                  + f"; {lowest}; {out['n_bad']}/{out['n_total']} elements outside bf16 atol={atol} rtol={rtol}")
    return out


def one_step_compare(s: Session, ref_h, ref_state1, sol_first) -> dict:
    """The deck's one-step rule, plus element statistics of the hidden."""
    from forensics.kernels.common import check_tensor
    res = s.compare((ref_h, ref_state1), sol_first)
    h = split_out(sol_first)[0]
    if isinstance(h, torch.Tensor) and tuple(h.shape) == tuple(ref_h.shape):
        atol, rtol = s.spec.tolerance_for(torch.bfloat16)
        st = check_tensor(ref_h, h, atol, rtol, "out")
        for k in ("max_abs", "max_rel", "n_bad", "n_total", "worst_index"):
            res[k] = st[k]
    return res


# ------------------------------------------------------------------------------ the solution's chain
def sol_chain(s: Session, ch, obj: str, first_args: list, n: int, slot: str):
    """Chain n steps in the child, each fed what the previous returned (out_slot `slot`).
    -> (reply, hiddens, first step's full output, final state).  The first and last steps are
    exported whole, the others only their hidden."""
    hs: list = []
    first = final = None
    args = first_args
    r = None
    for i in range(n):
        whole = i == 0 or i == n - 1
        r, payload = s.call(ch, None, args, fn={"obj": obj, "method": "step"}, save_inputs=[], out_slot=slot,
                            export_index=None if whole else [0])
        if not r.ok:
            return r, hs, first, final
        out = payload["out"]
        h, st = split_out(out) if whole else (out, None)
        if whole and st is None:
            r.ok, r.status = False, "error"
            r.error = (f"step() must return (hidden, state); got {type(out).__name__}"
                       + (f" of length {len(out)}" if isinstance(out, (list, tuple)) else ""))
            return r, hs + [h], out if i == 0 else first, None
        hs.append(h)
        if i == 0:
            first = out
        if i == n - 1:
            final = st
        args = [{"slot": slot, "index": [0]}, {"slot": slot, "index": [1]}]
    return r, hs, first, final


def clone_args(h_slot: str, s_slot: str) -> list:
    return [{"slot": h_slot, "clone": True}, {"slot": s_slot, "clone": True}]



def setup(s: Session, probe: str, shape: dict, seed: int | None, obj: str):
    ch = s.child()
    if ch is None or s.early_exit or s.hung:
        s.row(probe, "skipped", shape, seed, detail="no working child")
        return None
    ref, sd_path = reference_model(s, shape)
    r = new_model(s, ch, obj, shape, sd_path)
    if not r.ok:
        s.failed_reply(probe, r, shape, seed, what="Model(cfg) construction / load_state_dict(strict=True)")
        return None
    return ch, ref
