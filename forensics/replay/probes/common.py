"""Steps the plain-module probes share: the preamble every probe starts with (`prepare`: its shape and
seed, the solution's model built with the shared reference's weights, the deck's inputs in its
slots, warm-up calls) and the judgement of an output after the probe changed something the solution
should follow."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..session import Session, shape_label, stats, to_dev


@dataclass
class Prepared:
    """What `prepare` set up for one probe: `shape` and `seed`, the child `ch`, the replay's shared
    reference model `ref` of the shape, the solution's model `obj`, and (with inputs) the deck's
    inputs `base` of (shape, seed) in the slots the call arguments `args` name."""
    s: Session
    probe: str
    shape: dict
    seed: int
    obj: str
    ch: Any = None
    ref: Any = None
    base: list = field(default_factory=list)
    args: list = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        """The input slots `args` name."""
        return [a["slot"] for a in self.args if "slot" in a]

    def ref_out(self) -> Any:
        """The reference's output on `base` (the deck's inputs of shape and seed): computed once per
        replay, shared with the check and the other probes that ask for the same inputs."""
        return self.s.reference(self.ref, to_dev(self.base, self.s.device), key=self.s.ref_key(self.shape, self.seed))

    def call(self, args: list | None = None, what: str = "call", variant: str | None = None, **kw: Any):
        """Call the solution's model on `args` (default: the base inputs) -> (reply, payload), or None
        after the failed reply's row."""
        r, payload = self.s.call(self.ch, self.obj, self.args if args is None else args, **kw)
        if not r.ok:
            self.s.failed_reply(self.probe, r, self.shape, self.seed, variant, what=what)
            return None
        return r, payload

    def drop(self, slots: list[str] | None = None) -> None:
        """Delete the solution's model and the input slots (and `slots`) in the child."""
        self.s.delete(self.ch, objs=[self.obj], slots=self.names + list(slots or []))


def prepare(s: Session, probe: str, obj: str, *, n_warm: int = 0, inputs: bool = True, multi_row: bool = False,
            shape: dict | None = None, seed: int | None = None) -> Prepared | None:
    """The preamble of a plain-module probe: its shape (default the probe shape, `multi_row` as
    `Session.probe_shape`) and seed (default the check's first), a working child, the shared
    reference model of the shape, the solution's model `obj` built with its weights, and with
    `inputs` the deck's inputs of (shape, seed) put into slots `<obj>x<i>` and called `n_warm`
    times.  None after a row that says which step failed."""
    shape = s.probe_shape(multi_row=multi_row) if shape is None else shape
    seed = s.seeds[0] if seed is None else seed
    p = Prepared(s, probe, shape, seed, obj)
    p.ch = s.child()
    if p.ch is None:
        s.row(probe, "skipped", shape, seed, detail="no working child (build failed)")
        return None
    p.ref = s.ref_model(shape)
    r = s.new_model(p.ch, obj, shape, s.state_file(shape, p.ref))
    if not r.ok:
        s.failed_reply(probe, r, shape, seed, what="Model construction")
        return None
    if not inputs:
        return p
    p.base = s.make_inputs(shape, seed)
    pr, p.args = s.put(p.ch, p.base, prefix=obj + "x")
    if not pr.ok:
        s.failed_reply(probe, pr, shape, seed, what="input transfer")
        return None
    if n_warm and p.call(repeat=n_warm, what=f"{n_warm} warm-up calls") is None:
        return None
    return p


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
