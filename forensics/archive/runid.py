"""Run-id parsing (spec archive-format.md section 1.2).

    <YYYYMMDD>_<HHMMSS>_<harness>_<model_slug>_<problem>[_<shellpid>_<attempt>]

Harness slugs never contain '_'; model slugs do; problem names (NN_snake_name) do too, so the
problem is found by matching the known deck names (forensics/problems.py), longest first, and only
then by a generic NN_name pattern.  Multi runs (`run_agent.sh`) use the same shape with '/' replaced by '-'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from forensics import problems

_HEAD = re.compile(r"^(?P<date>\d{8})_(?P<time>\d{6})_(?P<harness>[^_]+)_(?P<rest>.+)$")
_SUFFIX = re.compile(r"^(?P<body>.+)_(?P<pid>\d+)_(?P<attempt>\d{1,3})$")
_GENERIC_PROBLEM = re.compile(r"_(\d\d_[a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)*)$")
RUN_ID_SHAPE = re.compile(r"\b(20\d{6}_\d{6}_[A-Za-z0-9.\-]+_[A-Za-z0-9_.\-\[\]]+?_\d\d_[a-z][a-z0-9_]*?)(?=[/\s'\"`:;,)]|$)")


@dataclass(frozen=True)
class RunId:
    raw: str
    timestamp: datetime
    harness: str
    model_slug: str
    problem: str | None
    collision_suffix: str | None
    bench: str | None

    @property
    def problem_known(self) -> bool:
        return problems.find(self.problem) is not None


def _split_problem(rest: str) -> tuple[str, str | None]:
    """Split '<model_slug>_<problem>' into (model_slug, problem)."""
    known = problems.run_id_problem(rest)
    if known is not None:
        return known
    m = _GENERIC_PROBLEM.search(rest)
    if m and m.start() > 0:
        # choose the earliest NN_ token so "model_1_5_01_foo" style slugs keep their digits
        return rest[: m.start()], m.group(1)
    return rest, None


def parse_run_id(name: str) -> RunId | None:
    """Parse a run directory name; None if it is not run-id shaped."""
    m = _HEAD.match(name)
    if not m:
        return None
    try:
        ts = datetime.strptime(m["date"] + m["time"], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    rest = m["rest"]
    model, problem = _split_problem(rest)
    suffix = None
    if problem is None:
        sm = _SUFFIX.match(rest)
        if sm:
            model2, problem2 = _split_problem(sm["body"])
            if problem2 is not None:
                model, problem, suffix = model2, problem2, f"{sm['pid']}_{sm['attempt']}"
    if problem is None:
        return RunId(name, ts, m["harness"], model, None, None, None)
    return RunId(name, ts, m["harness"], model, problem, suffix, problems.bench_of(problem))


def run_id_in_name(stem: str) -> RunId | None:
    """The run id a file or folder name holds, read by the grammar above: the whole name
    (`<run_id>.py`, `<run_id>/`), else the part before a `__` suffix (`<run_id>__x.py`), only where
    that part parses as a run id; the rightmost `__` is tried first, since run ids themselves may
    hold `__` (`..._kinetic-0715_1m__07_w4a16_gemm`).  A known deck problem wins over the generic
    NN_name shape (`<run_id>__01_notes` is not a run of problem 01_notes).  None: no run id."""
    cands = [stem]
    i = len(stem)
    while (i := stem.rfind("__", 0, i)) > 0:
        cands.append(stem[:i])
    parsed = [r for r in map(parse_run_id, cands) if r is not None and r.problem]
    return next((r for r in parsed if r.problem_known), parsed[0] if parsed else None)


def bench_of_problem(problem: str | None) -> str | None:
    return problems.bench_of(problem)


# --------------------------------------------------------------------------- per-run file names
# The benchmark's own archive names every annotation `<run_id>.yaml`: a run id is its own file name
# wherever it is a portable one.  Not portable: path separators, NUL and the other C0/C1 controls,
# DEL, the characters Windows refuses (`< > : " | ? *`), a lone surrogate (a name that was not
# UTF-8), a leading '.', a trailing '.' or space (Windows drops them), the names `.`/`..`/empty,
# Windows' device names (CON, PRN, AUX, NUL, COM1-9, LPT1-9, with any extension), and a name longer
# than 255 bytes (UTF-8) with the longest suffix written (`.timeline.png`).  '~' is kept out of
# unchanged names: it marks a renamed one.
_UNPORTABLE = re.compile('[\x00-\x1f\x7f-\x9f/\\\\<>:"|?*~\ud800-\udfff]')
_RESERVED = re.compile(r"(?i)(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?")
LONGEST_SUFFIX = ".timeline.png"
NAME_MAX_BYTES = 255 - len(LONGEST_SUFFIX.encode())      # the stem, in UTF-8 bytes
_HASH_HEX = 12


def portable_file_name(name: str) -> bool:
    """`name` can be written as a file-name stem as is, on POSIX, macOS and Windows file systems."""
    return (name not in ("", ".", "..") and not _UNPORTABLE.search(name) and not name.startswith(".")
            and not name.endswith((".", " ")) and not _RESERVED.fullmatch(name)
            and len(name.encode("utf-8")) <= NAME_MAX_BYTES)


def _renamed(run_id: str, hex_digits: int = _HASH_HEX) -> str:
    import hashlib
    h = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:hex_digits]
    base = _UNPORTABLE.sub("_", run_id)
    if base.startswith("."):
        base = "_" + base[1:]
    if _RESERVED.fullmatch(base):
        base = "_" + base             # `nul.txt~...` is still the device NUL to Windows
    budget = NAME_MAX_BYTES - 1 - hex_digits
    while len(base.encode("utf-8")) > budget:
        base = base[:-1]
    return f"{base}~{h}"


def run_file_name(run_id: str) -> str:
    """The file-name stem of one run's per-run files (report page, annotation YAML, timeline plot):
    the run id itself when it is a portable file name (`portable_file_name`), else a readable stem
    (each unportable character as '_', cut to fit) plus ``~`` and 12 hex digits of the SHA-256 of
    the exact id.  Injective: '~' never occurs in an unchanged name, and two changed names differ
    by their hashes.  A set of runs is named with `run_file_names`, which also keeps ids that differ
    only in case (or Unicode normalization) apart on file systems that fold them."""
    return run_id if portable_file_name(run_id) else _renamed(run_id)


def fold_key(name: str) -> str:
    """What case-insensitive, normalization-insensitive file systems (macOS, Windows) compare:
    Unicode canonical caseless matching."""
    import unicodedata
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", name).casefold())


def run_file_names(run_ids) -> dict[str, str]:
    """`run_file_name` of every id of a set, injective also on case-folded names: ids whose names
    fold to the same key (`A_x` and `a_x`) are all renamed, so no two files of the set share a name
    on a file system that ignores case or normalization."""
    ids = list(dict.fromkeys(run_ids))
    names = {rid: run_file_name(rid) for rid in ids}
    by_key: dict[str, list[str]] = {}
    for rid, n in names.items():
        by_key.setdefault(fold_key(n), []).append(rid)
    for group in by_key.values():
        if len(group) > 1:
            for rid in group:
                names[rid] = _renamed(rid)
    digits = _HASH_HEX
    while len({fold_key(n) for n in names.values()}) < len(names) and digits < 64:   # a hash-prefix collision
        digits += 4
        seen: dict[str, list[str]] = {}
        for rid, n in names.items():
            seen.setdefault(fold_key(n), []).append(rid)
        for group in seen.values():
            if len(group) > 1:
                for rid in group:
                    names[rid] = _renamed(rid, digits)
    return names
