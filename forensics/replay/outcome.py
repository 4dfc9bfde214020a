"""What a replay produces and how it is summed up: result rows and findings (`Outcome`), the
overall status (the worst row), the deck's own check as replayed (`Outcome.official`), the time
limits a replay runs under (`Limits`), and how a signal stops it (`ReplayInterrupted`).

Standard library, torch-free: the CLI, the bench and the store analyzer read results with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forensics.vocab import BUILD, CHECK, PROPERTY, STRESS, env_incomplete

from .rules import TAMPER_RULES


@dataclass
class Limits:
    build_s: float = 900.0     # import + first construction (compilation happens here)
    call_s: float = 300.0      # one request during check/probes
    probe_s: float = 900.0     # whole probe
    time_s: float = 600.0      # one timing request


class ReplayInterrupted(KeyboardInterrupt):
    """A signal asked the replay to stop (SIGTERM, SIGHUP, SIGINT): the children are killed and the
    partial result is kept (`replay_solution` returns it with info["interrupted"])."""


def install_signal_handlers() -> dict:
    """SIGTERM / SIGHUP / SIGINT raise ReplayInterrupted in the main thread (so the replay kills its
    children and the CLI still writes its JSON); -> the previous handlers."""
    import signal

    def handler(signum, frame):  # noqa: ARG001
        raise ReplayInterrupted(f"stopped by {signal.Signals(signum).name}")

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            old[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):   # not the main thread
            pass
    return old


def restore_signal_handlers(old: dict) -> None:
    """Put back what install_signal_handlers replaced."""
    import signal
    for sig, h in old.items():
        try:
            signal.signal(sig, h)
        except (ValueError, OSError, TypeError):
            pass


@dataclass
class Outcome:
    rows: list[dict] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def status(self) -> str:
        """Overall: the worst row status (every probe)."""
        return _worst(self.rows, self.findings)

    def official(self) -> dict:
        """The deck's own check as replayed here: the worst status of the rows of OFFICIAL_PROBES
        (the build, check, stress and, where the archive's deck has them, property rows), and
        `correct` (True: passed; False: failed, raised, crashed, exited early or tampered; None:
        not replayable, timed out, not run or never reached).  Findings of the other probes
        (state drift, stale caches, timing) are beside it, never in it.  `deviations` (where there are
        any): what the replay did differently from the graded run, by name (`arch-rebuilt`: the
        extension rebuilt for this GPU's architecture, Record.note_arch_rebuild)."""
        rows = [r for r in self.rows if r["probe"] in OFFICIAL_PROBES]
        st = _worst(rows, self.findings)
        correct = {"pass": True, "fail": False, "error": False, "crash": False, "early_exit": False,
                   "tampered": False}.get(st)
        reasons = [r for r in rows if r["status"] == st and r["status"] != "pass"]
        why = (reasons[0].get("detail") or "").splitlines()[0][:300] if reasons and reasons[0].get("detail") else ""
        out = {"status": st, "correct": correct, "reason": why}
        if self.info.get("deviations"):   # named: what this replay did differently from the graded run
            out["deviations"] = list(self.info["deviations"])
        return out

    def compare_archived(self, archived_correct: Any, source: str = "result.json") -> dict:
        """confirm | refute | cannot tell, for the archived `correct` against the check replayed here."""
        off = self.official()
        here = off["correct"]
        out = {"archived_correct": archived_correct, "source": source, "correct_here": here,
               "status_here": off["status"]}
        if archived_correct is None:
            out.update(status="cannot tell", why=f"no archived `correct` ({source})")
        elif here is None:
            out.update(status="cannot tell", why=f"the check here ended {off['status']}"
                       + (f": {off['reason']}" if off["reason"] else ""))
        else:
            out.update(status="confirm" if bool(archived_correct) == here else "refute",
                       why=f"the deck's check replayed here: {off['status']}"
                           + (f" ({off['reason']})" if off["reason"] else ""))
        return out


#: the probes whose rows make the deck's own check (Outcome.official); the rest are ours
OFFICIAL_PROBES = (BUILD, CHECK, STRESS, PROPERTY)
STATUS_ORDER = ("tampered", "early_exit", "crash", "fail", "error", "timeout", "not_replayable", "not_run", "pass",
                "skipped")


def _worst(rows: list[dict], findings: list[dict]) -> str:
    if any(f["rule"] in TAMPER_RULES for f in findings):
        return "tampered"
    if env_incomplete(rows):
        # failures after a missing build piece (a solution falling back to another path when its
        # extension cannot be built) say nothing about the graded build: not replayable here
        return "not_replayable"
    seen = {r["status"] for r in rows}
    for s in STATUS_ORDER:
        if s in seen:
            return s
    return "skipped"
