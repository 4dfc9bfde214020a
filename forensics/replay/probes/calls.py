"""Repeated calls of a plain module API on the same inputs.

output-alias     does a later call overwrite an earlier returned tensor (allowed, reported)
determinism      three calls on the same inputs must agree bit for bit
"""

from __future__ import annotations

import torch

from forensics.vocab import DETERMINISM, OUTPUT_ALIAS

from ..registry import MODULE, probe
from ..session import Session, maxdiff, same, shape_label
from .common import prepare


@probe(OUTPUT_ALIAS, MODULE)
def output_alias(s: Session) -> None:
    probe = OUTPUT_ALIAS
    w = prepare(s, probe, "a", n_warm=1)
    if w is None:
        return
    ch, base, args, shape, seed = w.ch, w.base, w.args, w.shape, w.seed
    r, first = s.call(ch, "a", args, out_slot="o1")
    if not r.ok:
        s.failed_reply(probe, r, shape, seed)
        return
    other = s.make_inputs(shape, seed + 15485863)
    tens_idx = [i for i, x in enumerate(base) if isinstance(x, torch.Tensor)]
    wr = s.write(ch, {f"ax{i}": other[i] for i in tens_idx})
    r2, second = s.call(ch, "a", args, out_slot="o2")
    if not (wr.ok and r2.ok):
        s.failed_reply(probe, r2 if not r2.ok else wr, shape, seed)
        return
    snap = s.snapshot(ch, ["o1"])
    if not snap.ok:
        s.failed_reply(probe, snap, shape, seed)
        return
    try:
        later = s.fetch(snap)["o1"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        s.note_exchange(e)
        s.failed_reply(probe, s.error_reply(f"unreadable snapshot from the solution's process: {e}"), shape, seed)
        return
    if same(first["out"], later):
        s.row(probe, "pass", shape, seed, "earlier-output-intact", detail="an earlier output is not overwritten by a later call")
    else:
        d = maxdiff(first["out"], later)
        s.row(probe, "pass", shape, seed, "earlier-output-overwritten", max_abs=d,
              detail=f"a later call overwrote the tensor returned by an earlier call (max change {d:.4g}); "
                     "allowed by the contract, reported")
        s.finding("replay-output-alias",
                  f"A later call overwrote the tensor the solution returned from an earlier call "
                  f"(persistent output buffer; max change {d:.4g}) on {shape_label(shape)}. Allowed, reported.",
                  {"max_change": d})
    s.delete(ch, objs=["a"], slots=["o1", "o2"] + [f"ax{i}" for i in tens_idx])


@probe(DETERMINISM, MODULE)
def determinism(s: Session) -> None:
    probe = DETERMINISM
    w = prepare(s, probe, "d", n_warm=1)
    if w is None:
        return
    shape, seed = w.shape, w.seed
    outs = []
    for _ in range(3):
        got = w.call()
        if got is None:
            return
        outs.append(got[1]["out"])
    d = max(maxdiff(outs[0], o) for o in outs[1:])
    agree = all(same(outs[0], o) for o in outs[1:])
    if agree:
        s.row(probe, "pass", shape, seed, "3-calls", detail="bitwise identical", max_abs=0.0)
    else:
        s.row(probe, "fail", shape, seed, "3-calls", max_abs=d, detail=f"repeated calls differ by up to {d:.4g}")
        s.finding("replay-nondeterministic",
                  f"Three calls on the same inputs returned different outputs (max difference {d:.4g}) on "
                  f"{shape_label(shape)}.", {"max_abs": d})
    w.drop()
