"""The probe registry: which probe runs for which API kind, declared where the probe is written.

    from forensics.replay.registry import probe
    from forensics.vocab import DETERMINISM

    @probe(DETERMINISM, "module")
    def determinism(s: Session) -> None: ...

A probe is a function of one `Session` (forensics/replay/session.py), registered for the API kinds
it has a form for (`KINDS`: a plain module `Model(*init)(*inputs)`, or one of the stateful APIs:
decode, step, rollout).  Its name is a constant of forensics/vocab.py (the vocabulary the verdict
and the static rules use too); the replay runs the registered probes of the problem's kind in the
vocabulary's order (`drivers.run`).  The probe modules are the files of forensics/replay/probes/;
`load()` imports them all, so registering is all it takes to add one (docs/extending.md)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable

from forensics.vocab import BY_NAME

MODULE, DECODE, STEP, ROLLOUT = "module", "decode", "step", "rollout"
#: the API kinds a problem's spec declares (`ProblemSpec.api_kind`)
KINDS = (MODULE, DECODE, STEP, ROLLOUT)
STATEFUL = (DECODE, STEP, ROLLOUT)
#: the package whose modules are the probes
PACKAGE = "forensics.replay.probes"

Probe = Callable[[Any], None]
_TABLES: dict[str, dict[str, Probe]] = {k: {} for k in KINDS}
_loaded = False


def probe(name: str, *kinds: str) -> Callable[[Probe], Probe]:
    """Register the decorated function as probe `name` (a vocab.py name of a replay probe) of each
    of `kinds`; a name registered twice for one kind is an error."""
    p = BY_NAME.get(name)
    if p is None or not p.replay:
        raise ValueError(f"{name!r} is not a replay probe of forensics/vocab.py")
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ValueError(f"probe {name}: unknown API kind(s) {bad or '(none given)'}; have {', '.join(KINDS)}")

    def register(fn: Probe) -> Probe:
        for k in kinds:   # all checked before any is registered
            have = _TABLES[k].get(name)
            if have is not None and have is not fn:
                raise ValueError(f"probe {name} registered twice for the {k} API "
                                 f"({have.__module__}.{have.__name__}, {fn.__module__}.{fn.__name__})")
        for k in kinds:
            _TABLES[k][name] = fn
        return fn
    return register


def load() -> list[str]:
    """Import every probe module (forensics/replay/probes/*.py); -> their names."""
    global _loaded
    pkg = importlib.import_module(PACKAGE)
    names = [f"{PACKAGE}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)]
    for n in names:
        importlib.import_module(n)
    _loaded = True
    return names


def table(kind: str) -> dict[str, Probe]:
    """probe name -> probe function, for the API kind `kind`."""
    if not _loaded:
        load()
    if kind not in _TABLES:
        raise ValueError(f"unknown API kind {kind!r}; have {', '.join(KINDS)}")
    return dict(_TABLES[kind])


def api_kind(spec: Any) -> str:
    """The API kind the problem's spec declares (`ProblemSpec.api_kind`; a plain module by default)."""
    return getattr(spec, "api_kind", MODULE) or MODULE


__all__ = ["KINDS", "STATEFUL", "MODULE", "DECODE", "STEP", "ROLLOUT", "probe", "load", "table", "api_kind"]
