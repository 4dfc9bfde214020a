"""Which probes a problem's replay runs, by the API kind its spec declares (`ProblemSpec.api_kind`):
a plain module (`Model(*init)(*inputs)`: the probes of `probes.Replay`, the hack probes, the kernel
trace, timing with CUDA events), or one of the stateful APIs (decode, step, rollout: their own
modules' probes and the decks' wall-clock timing).  The probe modules import `probes` (the
`Replay` they drive); only this module imports them, so there is no cycle among them.

Adding a stateful problem: its spec's `api_kind` and, for a new kind, one module with its
`generic.Driver` (how the kind builds, runs and compares: the probes of `generic.py` are written
once against it) and its own probes, its table registered in `stateful.table` (docs/replay.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .probes import Outcome, Replay


def module_table(rp: Replay) -> dict[str, Callable[[], None]]:
    """The probes of a plain module API."""
    from . import hackprobes, kerneltrace, poison
    from .timing import probe_timing
    return {
        "check": rp.probe_check,
        "property": rp.probe_property,
        "same-buffer": (lambda: rp.probe_same_buffer(False)),
        "unsampled-region": (lambda: rp.probe_same_buffer(True)),
        "fresh-state": rp.probe_fresh_state,
        "fresh-inputs": rp.probe_fresh_inputs,
        "output-alias": rp.probe_output_alias,
        "nan-poison": lambda: poison.nan_poison(rp),
        "determinism": rp.probe_determinism,
        "timed-outputs": lambda: hackprobes.timed_outputs(rp),
        "distribution": lambda: hackprobes.distribution(rp),
        "kernel-trace": lambda: kerneltrace.kernel_trace(rp),
        "timing": lambda: probe_timing(rp),
    }


def probe_table(rp: Replay) -> tuple[dict[str, Callable[[], None]], str | None]:
    """(probe name -> callable, the stateful API kind or None) for rp's problem."""
    from . import stateful
    from .timing import probe_timing
    kind = stateful.kind(rp.spec)
    if kind is None:
        return module_table(rp), None
    table = stateful.table(rp)
    table.setdefault("timing", lambda: probe_timing(rp))
    return table, kind


def run(rp: Replay, probes: Iterable[str]) -> Outcome:
    """Run `probes` on rp (forensics.replay.api.replay_solution's entry)."""
    table, kind = probe_table(rp)
    return rp.run(list(probes), table, kind)


__all__ = ["module_table", "probe_table", "run"]
