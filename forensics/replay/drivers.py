"""The replay's driver: the probes registered for the problem's API kind (forensics/replay/registry.py,
forensics/replay/probes/), run on one `Session` in the vocabulary's order, each under its limits.

The kind is the one its spec declares (`ProblemSpec.api_kind`: a plain module `Model(*init)(*inputs)`,
or one of the stateful APIs decode, step, rollout).  A probe the kind has no form of is a `skipped`
row; `timing` runs last; after an early exit or a hang the rest are skipped.  The replay's own
failures end a probe, never the replay (`run_probe`).  Adding a probe: docs/extending.md."""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterable
from typing import Callable

from forensics.vocab import ALTERNATE_CACHE, CHECK, TIMING

from . import registry
from .outcome import Outcome
from .record import EXCHANGE_TAMPER
from .session import Session
from .values import is_oom


def probe_table(s: Session) -> tuple[dict[str, Callable[[Session], None]], str]:
    """(probe name -> probe function, the API kind) for the session's problem."""
    kind = registry.api_kind(s.spec)
    return registry.table(kind), kind


def run(s: Session, probes: Iterable[str]) -> Outcome:
    """Run `probes` (names; `expand_probes` gives them in the vocabulary's order): start the child
    (early, while the check's inputs are generated, for a module API), each probe under its limits,
    timing last; the child is closed (killed on an interrupt) and the outcome returned."""
    table, kind = probe_table(s)
    stateful = kind != registry.MODULE
    probes = [p for p in probes if stateful or p != ALTERNATE_CACHE]  # only decode APIs take caches
    t0 = time.monotonic()
    try:
        if not stateful and CHECK in probes and not s.started and not s.build_failed:
            s.start_early()
        if s.child() is None:
            for p in probes:
                if p != CHECK:
                    s.row(p, "skipped", detail="the solution could not be built or imported")
            return s.outcome
        for p in probes:
            if p == TIMING:
                continue
            if s.early_exit or s.hung:
                s.row(p, "skipped", detail="the solution exited the replay early" if s.early_exit
                      else "the solution hung earlier (timed out); not retried")
                continue
            if p not in table:
                s.row(p, "skipped", detail=f"not defined for the {kind if stateful else 'stateless'} API of {s.spec.name}")
                continue
            run_probe(s, p, table[p])
        if TIMING in probes and TIMING in table and not (s.early_exit or s.hung):
            run_probe(s, TIMING, table[TIMING])
    except BaseException:
        s.abort()   # an interrupt (a signal, Ctrl-C): the children go now, the result so far stays
        raise
    finally:
        s.end_probe()
        s.close()
        s.note_planted()
        s.finish(time.monotonic() - t0)
    return s.outcome


def run_probe(s: Session, name: str, fn: Callable[[Session], None]) -> None:
    """One probe under Limits.probe_s: a request still waiting when it runs out times out.

    The replay's own failures end the probe, not the replay: out of memory in this process (the
    reference side: a multi-GB reference model, its outputs, a comparison) frees what the
    replay keeps and reports the probe `not_run (oom in replay: ...)`; any other exception of
    the tool `not_run (replay error: ...)`, with finding `replay-tool-error`.  Either way the
    correctness of the solution is unknown for that probe, never failed.  Interrupts
    (KeyboardInterrupt, SystemExit, a signal) still end the replay (`run` closes the child)."""
    tp = time.monotonic()
    s.begin_probe(name, tp + s.limits.probe_s)
    out = s.outcome
    n_rows, n_find = len(out.rows), len(out.findings)
    try:
        fn(s)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except EXCHANGE_TAMPER as e:   # the solution's doing, not the tool's: refused, recorded
        s.note_exchange(e)
        s.row(name, "tampered", detail=f"the solution's process tampered with an exchange file: {e}")
    except BaseException as e:  # noqa: BLE001 - the tool's own failure, reported, never fatal
        oom = is_oom(e)
        s.free_memory()
        what = (f"oom in replay: {e}" if oom else f"replay error: {type(e).__name__}: {e}")[:1500]
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]
        s.row(name, "not_run", detail=what + ("" if oom else "\n" + tb))
        s.finding("replay-tool-error",
                  f"The replay itself failed during probe {name} ({what.splitlines()[0][:300]}); that probe "
                  "did not run to the end and says nothing about the solution.",
                  {"probe": name, "oom": oom, "traceback": tb}, probe=name, key=f"tool-error:{name}")
    finally:
        s.end_probe()
        took = round(time.monotonic() - tp, 3)
        out.info.setdefault("probe_s", {})[name] = took
        s.emit({"event": "probe", "probe": name, "s": took, "rows": out.rows[n_rows:],
                "findings": out.findings[n_find:]})


__all__ = ["probe_table", "run", "run_probe"]
