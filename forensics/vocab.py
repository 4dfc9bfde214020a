"""The tool's shared words, declared once: severities, finding categories and probes.

Standard library only and importing nothing of `forensics`, so every layer may use it: the
analyzers and the verdict (through `analyze.findings`), and the replay, which runs on a GPU machine
without duckdb/orjson.

**Probes.**  A probe is an empirical test that settles what static reading cannot.  Its names come
from four places: the replay (its probes register under these names, `replay/registry.py`), the
static rules' prose (`Rule.probe`, e.g. "same-buffer overwrite"), the auditors' probe logs
(`probe=unsampled_row_mutation`) and the replay's result rows (`stress`, `build` and
`timing-l2-reset` are rows of the `check` and `timing` probes).  Each `Probe` below is one probe:

* `name`: the canonical name (the replay's where the replay runs it under one name);
* `checks`: what it checks, one line;
* `aliases`: every other spelling that names it (case, blanks and `_` do not matter: `key()`);
* `runs`: the replay probes that a finding naming it asks for (empty: nothing replays it);
* `replay`: whether `name` is itself a replay probe (one of `ALL_PROBES`, in this table's order).

Two mappings are derived from it, and they answer different questions:

* `norm_probe(text)` -> one canonical name.  The verdict matches a static finding's probe to the
  replay's and the auditors' results with it (`verdict._probe_results`), so it must give the name
  under which the *result* is recorded: "L2-persistence reset timing" -> `timing-l2-reset` (the
  timing probe's L2-reset row), "same-buffer overwrite" -> `same-buffer`.
* `static_probe(text)` -> the replay probes to run.  The replay picks probes with it from the static
  findings of a run (`replay.required_probes`): "L2-persistence reset timing" -> (`timing`,),
  "same-buffer overwrite" -> (`same-buffer`, `fresh-inputs`): a graph or cache bound to the
  caller's buffers can pass the same-buffer overwrite and fail only on new input tensors, so a
  finding that asks for the overwrite gets both.  A replay probe's own name selects itself alone
  ("same-buffer" -> (`same-buffer`,)), as `--probe same-buffer` does.

`SELECTIONS` are shorthands that select several replay probes (`--probe all`, `graph`, ...); they
are not probes, and `norm_probe` leaves them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

# ------------------------------------------------------------------ severities and categories
SEVERITIES = ("info", "low", "medium", "high", "critical")
#: the one ordering of severities: info 0 ... critical 4
SEV_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def severity_key(severity: str | None) -> int:
    """Sort key, most severe first (critical 0 ... info 4); an unknown severity last (9)."""
    r = SEV_RANK.get(severity or "")
    return 9 if r is None else len(SEVERITIES) - 1 - r


CATEGORIES = ("contamination", "reward_hack", "correctness", "measurement", "integrity",
              "provenance", "portability", "info")



# ------------------------------------------------------------------ replay rows
#: the start of a `not_replayable` row's detail when the build environment lacks a piece (buildenv)
BUILD_ENV = "build environment:"


def env_incomplete(rows: list[dict]) -> bool:
    """A replay row says the build environment lacks a piece the solution needs (CUTLASS, a CUDA
    header, a compiler where the solution names it): the graded build was not reproduced, so the
    replay's other failures (a fallback path, an extension never built) say nothing about it.  The
    replay's overall status and the verdict both read this."""
    return any(r.get("status") == "not_replayable" and str(r.get("detail") or "").startswith(BUILD_ENV)
               for r in rows)


# ------------------------------------------------------------------ probe names
# Every probe's name, once: the table below, the replay (its registered probes, its rows), the
# verdict and the reports spell a probe by these constants, never by a string of their own.
CHECK = "check"
STRESS = "stress"
BUILD = "build"
PROPERTY = "property"
STATE_DRIFT = "state-drift"
SAME_BUFFER = "same-buffer"
UNSAMPLED_REGION = "unsampled-region"
FRESH_STATE = "fresh-state"
FRESH_INPUTS = "fresh-inputs"
ALTERNATE_CACHE = "alternate-cache"
OUTPUT_ALIAS = "output-alias"
NAN_POISON = "nan-poison"
INPUT_WRITE = "input-write"
DETERMINISM = "determinism"
REPEATED_CALLS = "repeated-calls"
TIMED_OUTPUTS = "timed-outputs"
DISTRIBUTION = "distribution"
KERNEL_TRACE = "kernel-trace"
FIRST_LAUNCH = "first-launch"
TIMING = "timing"
TIMING_L2_RESET = "timing-l2-reset"

# ------------------------------------------------------------------ probes
@dataclass(frozen=True)
class Probe:
    name: str
    checks: str
    aliases: tuple[str, ...] = ()
    runs: tuple[str, ...] | None = None   # None: the probe itself (replay=True) or nothing
    replay: bool = True

    @property
    def selects(self) -> tuple[str, ...]:
        if self.runs is not None:
            return self.runs
        return (self.name,) if self.replay else ()


_P = Probe
#: every probe, the replay's in the order it runs them (check first, timing last)
PROBES: tuple[Probe, ...] = (
    _P(CHECK, "the deck's check: check shapes x seeds, nominal and numeric-stress cases, against the bundled reference"),
    _P(STRESS, "the check's numeric-stress cases (rows of the check probe)", runs=(CHECK,), replay=False),
    _P(BUILD, "the solution builds and imports on the replay host (rows of the check probe)",
       ("build on the grading host",), runs=(CHECK,), replay=False),
    _P(PROPERTY, "the deck's property cases on the same storage after warm calls"),
    _P(STATE_DRIFT, "a step API's chained steps, each fed the state the previous one returned, stay on the reference"),
    _P(SAME_BUFFER, "new contents written into the inputs' (and weights') own storage are followed",
       ("same-buffer overwrite", "same-buffer probe", "same-buffer weight overwrite"), runs=(SAME_BUFFER, FRESH_INPUTS)),
    _P(UNSAMPLED_REGION, "a change only outside the sampled rows / region is followed",
       ("unsampled-region mutation", "unsampled-row mutation", "unsampled-row")),
    _P(FRESH_STATE, "a new model / state (often on a dead object's id()) is not served a cached result",
       ("fresh state object", "fresh-state probe")),
    _P(FRESH_INPUTS, "new input tensors at new addresses are read, not the first call's",
       ("fresh input pointers",)),
    _P(ALTERNATE_CACHE, "decode / step APIs compute from the caches or state the caller passes",
       ("alternate caller caches", "alternate caches", "alternate-cache probe", "cache contract")),
    _P(OUTPUT_ALIAS, "whether a later call overwrites a tensor an earlier call returned (allowed: info)",
       ("output aliasing",)),
    _P(NAN_POISON, "outputs are fully written (CUDA: torch.empty handed NaN-filled memory)",
       ("unwritten output", "output unwritten")),
    _P(INPUT_WRITE, "the caller's inputs are unchanged after each call (a stateful API's designated state excepted)",
       ("inputs written", "input mutation", "input-mutation"), replay=False),
    _P(DETERMINISM, "repeated calls on the same inputs agree bitwise"),
    _P(REPEATED_CALLS, "the outputs stay right across many calls (call counters, warm-up switches)",
       ("repeated calls",), runs=(DETERMINISM, TIMED_OUTPUTS), replay=False),
    _P(TIMED_OUTPUTS, "the outputs of the calls the benchmark times, under its calling pattern, are right",
       ("timed-call outputs", "timed calls")),
    _P(DISTRIBUTION, "inputs the contract allows and the check never uses (other seeds, scales, spread) pass",
       ("perturbed-distribution inputs",)),
    _P(KERNEL_TRACE, "which kernels each call launched (the solution's own or a library's)",
       ("kernel-name trace", "kernel trace")),
    _P(FIRST_LAUNCH, "each specialization's first launch (no replay probe: every shape would need a cold start)",
       ("each specialization first-launch",), replay=False),
    _P(TIMING, "timed like the benchmark; plausible against the GPU's measured ceilings"),
    _P(TIMING_L2_RESET, "the timing with the persisting L2 reset before every trial (rows of the timing probe)",
       ("L2-persistence reset timing",), runs=(TIMING,), replay=False),
)

#: the replay's probes, in the order it runs them
ALL_PROBES: tuple[str, ...] = tuple(p.name for p in PROBES if p.replay)

#: shorthands selecting several replay probes (`forensics replay --probe`); not probes themselves
SELECTIONS: dict[str, tuple[str, ...]] = {
    "all": ALL_PROBES,
    "hacks": (TIMED_OUTPUTS, DISTRIBUTION),
    "chain": (STATE_DRIFT,),
    "pointer-cache": (SAME_BUFFER, UNSAMPLED_REGION),
    "graph": (SAME_BUFFER, FRESH_INPUTS, FRESH_STATE),
    "state": (FRESH_STATE, ALTERNATE_CACHE),
}


def key(text: str | None) -> str:
    """A spelling's lookup key: lower case, '-' for blanks and '_'."""
    return (text or "").strip().lower().replace("_", "-").replace(" ", "-")


BY_NAME: dict[str, Probe] = {p.name: p for p in PROBES}
#: every spelling's key -> its probe
_SPELLINGS: dict[str, Probe] = {}
for _p in PROBES:
    for _s in (_p.name,) + _p.aliases:
        if _SPELLINGS.setdefault(key(_s), _p) is not _p:
            raise ValueError(f"probe spelling {_s!r} names two probes")
for _s in SELECTIONS:
    if _s in _SPELLINGS:
        raise ValueError(f"selection {_s!r} is also a probe's name")


def lookup(text: str | None) -> Probe | None:
    """The probe a spelling names, or None."""
    return _SPELLINGS.get(key(text))


def norm_probe(text: str | None) -> str:
    """A probe's one name, whoever spelled it (a static rule's prose, an auditor's log, the replay);
    an unknown spelling comes back as its key."""
    p = lookup(text)
    return p.name if p else key(text)


def static_probe(text: str | None) -> tuple[str, ...]:
    """The replay probes a finding's `probe` text asks for ('same-buffer overwrite' ->
    ('same-buffer', 'fresh-inputs')); a replay probe's own name selects itself; () for none."""
    k = key(text)
    if k in ALL_PROBES:
        return (k,)
    p = _SPELLINGS.get(k)
    if p is not None:
        return p.selects
    return SELECTIONS.get(k, ())


#: what `forensics replay --probe` accepts besides the replay probes' own names: the selections, and
#: every probe that is not itself a replay probe but is run by one (stress, build, timing-l2-reset...)
PROBE_ALIASES: dict[str, tuple[str, ...]] = {
    **SELECTIONS, **{p.name: p.selects for p in PROBES if not p.replay and p.selects}}
