"""Steps the plain-module probes share: a model built on the check's inputs and warmed up, and the
judgement of an output after the probe changed something the solution should follow."""

from __future__ import annotations

from typing import Any

from ..session import Session, shape_label, stats


def model_on_inputs(s: Session, probe: str, shape: dict, seed: int, obj: str):
    """A working child, the solution's model `obj` built with the reference's state, and the
    inputs of (shape, seed) in its slots. -> (ch, ref, inputs, args), or None after a row that
    says which step failed."""
    ch = s.child()
    if ch is None:
        s.row(probe, "skipped", shape, seed, detail="no working child (build failed)")
        return None
    ref = s.ref_model(shape)
    r = s.new_model(ch, obj, shape, s.state_file(shape, ref))
    if not r.ok:
        s.failed_reply(probe, r, shape, seed, what="Model construction")
        return None
    inputs = s.make_inputs(shape, seed)
    pr, args = s.put(ch, inputs, prefix=obj + "x")
    if not pr.ok:
        s.failed_reply(probe, pr, shape, seed, what="input transfer")
        return None
    return ch, ref, inputs, args


def warm(s: Session, probe: str, shape: dict, seed: int, n_warm: int = 11, obj: str = "w"):
    """New model `obj` + inputs A in slots, called n_warm times. -> (ch, ref, base, args, names) or None."""
    got = model_on_inputs(s, probe, shape, seed, obj)
    if got is None:
        return None
    ch, ref, base, args = got
    names = [a["slot"] for a in args if "slot" in a]
    r, _ = s.call(ch, obj, args, repeat=n_warm)
    if not r.ok:
        s.failed_reply(probe, r, shape, seed, what=f"{n_warm} warm-up calls")
        return None
    return ch, ref, base, args, names


def judge(s: Session, probe: str, rule: str, variant: str, shape, seed, ref_out: Any, sol_payload: Any, inputs: Any,
          extra: str = "") -> bool:
    """The solution's output after the probe changed its data, against the reference on the new data:
    a row, and `rule` where it does not follow.  A solution that alters its inputs in place cannot be
    judged this way (an error row)."""
    if s.inputs_mutated:
        s.row(probe, "error", shape, seed, variant,
              detail="the solution alters its inputs in place, so a same-storage probe cannot be judged")
        return False
    res = s.compare(ref_out, s.sol_out(sol_payload), inputs=inputs)
    if res.get("ok"):
        s.row(probe, "pass", shape, seed, variant, res)
        return True
    s.row(probe, "fail", shape, seed, variant, res)
    s.finding(rule, f"{probe} ({variant}) on {shape_label(shape)} seed {seed}: output does not follow "
              f"the new data{extra}: {res.get('msg', '')}"[:700], stats(res) | {"variant": variant})
    return False


def put_other(s: Session, ch, probe: str, shape, seed: int, offset: int, prefix: str):
    """Inputs of seed + offset into new slots `<prefix><i>` -> (inputs, args), or (None, None)."""
    other = s.make_inputs(shape, seed + offset)
    pr, args = s.put(ch, other, prefix=prefix)
    if not pr.ok:
        s.failed_reply(probe, pr, shape, seed, what="input transfer")
        return None, None
    return other, args
