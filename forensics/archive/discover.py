"""Find the run folders inside an archive (spec archive-format.md sections 1-2).

A run folder is a directory whose name is run-id shaped (section 1.2) and which holds at least
one file a runner writes (result.json, transcript.jsonl, solution.py, meta.log, ...), or any
directory directly under an ``outputs/runs*`` or ``rescue`` root.  Folders inside a run folder
are never runs themselves.  A path that is itself a run folder is a single-run archive.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from forensics.archive.runid import _HEAD, RunId, parse_run_id
from forensics.archive.source import ArchiveSource, Entry

RUN_MARKERS = frozenset({
    "result.json", "transcript.jsonl", "transcript.jsonl.gz", "solution.py", "meta.log", "agent.log",
    "codex_session.jsonl", "check.log", "stderr.log", "benchmark.log", "gpu_lock.log",
})


@dataclass(slots=True)
class DiscoveredRun:
    run_id: str                    # unique key in the store
    name: str                      # directory basename
    run_path: str                  # path inside the archive ('' when the archive is the run)
    root: str                      # runs, runs-h100, rescue, ...
    parsed: RunId | None
    entries: list[Entry] = field(default_factory=list)   # paths relative to the run folder
    # names that are not UTF-8 in this run (its folder, a folder above it, a file in it): the path
    # as shown (archive-relative, `\xNN` escapes) -> the raw bytes of its last segment (archive.source)
    raw_names: dict[str, bytes] = field(default_factory=dict)

    def rel_files(self) -> dict[str, Entry]:
        return {e.path: e for e in self.entries if not e.is_dir}


def _root_of(run_path: str) -> str:
    parts = PurePosixPath(run_path).parts
    return parts[-2] if len(parts) >= 2 else ""


def _canonical(path: str) -> bool:
    """A relative path with no empty, '.' segment (PurePosixPath would leave it unchanged)."""
    return (path != "" and path[0] != "/" and path[-1] != "/" and "//" not in path and path != "."
            and not path.startswith("./") and "/./" not in path and not path.endswith("/."))


# Why a folder that looks like (part of) a run was not taken as one: reason -> what it means.
SKIP_REASONS = {
    "invalid_run_id": "named like a run id, but its date or time is not a valid one",
    "not_run_id": "holds a file a runner writes, but its name is not a run id and it is not directly under an "
                  "outputs/runs* or rescue root",
    "no_runner_files": "named like a run id, but holds no file a runner writes and is not directly under an "
                       "outputs/runs* or rescue root",
    "unrecognised": "directly under an outputs/runs* or rescue root, but neither named like a run id nor holding "
                    "a file a runner writes",
}
RUN_ID_FORMAT = "<YYYYMMDD>_<HHMMSS>_<harness>_<model>_<problem>"


@dataclass(frozen=True)
class SkippedFolder:
    """A folder discovery did not take as a run, and why (SKIP_REASONS)."""

    path: str        # inside the archive
    reason: str
    detail: str


def _skip_reason(name: str, parsed: RunId | None, marked: set[str], under_root: bool) -> tuple[str, str] | None:
    """(reason, detail) for a folder that is not a run, when it looks like one; None when it does not
    (an ordinary folder: outputs/, sweeps/, docs/ ...)."""
    head = _HEAD.match(name)
    if head and parsed is None:
        return "invalid_run_id", f"{head['date']}_{head['time']} is not a valid date and time (YYYYMMDD_HHMMSS)"
    files = ", ".join(sorted(marked)[:4]) + (", ..." if len(marked) > 4 else "")
    if marked:
        return "not_run_id", f"{name!r} is not {RUN_ID_FORMAT}; holds {files}"
    if parsed is not None:
        return "no_runner_files", f"{name!r} holds none of {', '.join(sorted(RUN_MARKERS)[:4])}, ..."
    if under_root:
        return "unrecognised", f"{name!r} is not {RUN_ID_FORMAT} and holds no runner file"
    return None


def discover_runs(src: ArchiveSource, single_name: str | None = None,
                  skipped: list[SkippedFolder] | None = None) -> list[DiscoveredRun]:
    """The archive's run folders, in path order.  `skipped`, when given, gets every folder that looks
    like a run (a run-id-like name, a runner's file, a place directly under a runs root) but is not
    taken as one, with the reason (SKIP_REASONS); folders inside a run or inside a skipped folder
    are not listed again.  Linear in the archive's entries."""
    entries = src.entries()
    children: dict[str, set[str]] = defaultdict(set)
    dirs: set[str] = set()
    for e in entries:
        path = e.path
        if _canonical(path):  # plain string splitting, the same as PurePosixPath's for such paths
            parent, _, name = path.rpartition("/")
            cut = len(parent)
            while cut > 0:  # implied directories (tar/zip listings may omit them)
                anc = path[:cut]
                if anc in dirs:
                    break  # its ancestors were added with it
                dirs.add(anc)
                cut = path.rfind("/", 0, cut)
        else:
            p = PurePosixPath(path)
            parent = str(p.parent) if str(p.parent) != "." else ""
            name = p.name
            for anc in list(p.parents)[:-1]:
                dirs.add(str(anc))
        children[parent].add(name)
        if e.is_dir:
            dirs.add(path)

    # single-run archive: the root itself holds runner files
    if children.get("", set()) & RUN_MARKERS:
        name = single_name or "run"
        run = DiscoveredRun(name, name, "", "", parse_run_id(name), raw_names=dict(src.raw_names))
        run.entries = [e for e in entries]
        return [run]

    candidates: list[str] = []
    looks: dict[str, tuple[str, str]] = {}    # folder -> (reason, detail) of a run-like folder that is not a run
    for d in sorted(dirs):
        pp = PurePosixPath(d)
        name = pp.name
        parent = pp.parent.name
        parsed = parse_run_id(name)
        marked = children.get(d, set()) & RUN_MARKERS
        under_root = parent.startswith("runs") or parent == "rescue"
        if (parsed and (marked or under_root)) or (marked and under_root):
            candidates.append(d)
        elif skipped is not None:
            why = _skip_reason(name, parsed, marked, under_root)
            if why is not None:
                looks[d] = why

    def inside(d: str, among: set[str] | dict) -> bool:
        """Some proper ancestor folder of `d` is in `among` (walked up by string cuts: O(depth))."""
        cut = d.rfind("/")
        while cut > 0:
            if d[:cut] in among:
                return True
            cut = d.rfind("/", 0, cut)
        return False

    # drop runs nested inside another run (e.g. copies inside a workspace): shallower first, so a
    # folder's enclosing run is already chosen when it comes
    chosen_set: set[str] = set()
    for d in sorted(candidates, key=lambda x: (x.count("/"), x)):
        if not inside(d, chosen_set):
            chosen_set.add(d)
    chosen = sorted(chosen_set)

    if skipped is not None and looks:
        # ancestors of a run contain runs; they are not skipped runs themselves
        holds_run: set[str] = set()
        for d in chosen:
            cut = d.rfind("/")
            while cut > 0 and d[:cut] not in holds_run:
                holds_run.add(d[:cut])
                cut = d.rfind("/", 0, cut)
        said: set[str] = set()
        for d in sorted(looks, key=lambda x: (x.count("/"), x)):
            if d in holds_run or inside(d, chosen_set) or inside(d, said):
                continue
            said.add(d)
            reason, detail = looks[d]
            skipped.append(SkippedFolder(d, reason, detail))
        skipped.sort(key=lambda f: f.path)

    by_dir: dict[str, list[Entry]] = {d: [] for d in chosen}
    for e in entries:
        # the owning run is the ancestor that was chosen (at most one: nested runs were dropped)
        p = e.path
        while True:
            cut = p.rfind("/")
            if cut < 0:
                break
            p = p[:cut]
            if p in by_dir:
                rel = e.path[len(p) + 1:]
                by_dir[p].append(Entry(rel, e.size, e.mtime, e.is_dir, e.is_symlink, e.link_target))
                break

    # names not UTF-8: each shown path goes to the runs it concerns (a name in the run, the run's own
    # folder, or a folder above it), found by walking up from the name and up from each run
    raw_of: dict[str, dict[str, bytes]] = defaultdict(dict)
    if src.raw_names:
        for p, b in src.raw_names.items():
            q = p
            while True:   # the run holding it, or the run it is
                if q in by_dir:
                    raw_of[q][p] = b
                    break
                cut = q.rfind("/")
                if cut < 0:
                    break
                q = q[:cut]
        for d in chosen:   # folders above the run
            cut = d.rfind("/")
            while cut > 0:
                a = d[:cut]
                if a in src.raw_names:
                    raw_of[d][a] = src.raw_names[a]
                cut = d.rfind("/", 0, cut)

    names = defaultdict(list)
    for d in chosen:
        names[PurePosixPath(d).name].append(d)
    runs: list[DiscoveredRun] = []
    for d in chosen:
        name = PurePosixPath(d).name
        root = _root_of(d)
        run_id = name if len(names[name]) == 1 else f"{name}@{root or d}"
        if len(names[name]) > 1 and sum(1 for x in names[name] if _root_of(x) == root) > 1:
            run_id = f"{name}@{PurePosixPath(d).parent}"
        runs.append(DiscoveredRun(run_id, name, d, root, parse_run_id(name), by_dir[d], dict(raw_of.get(d, {}))))
    return runs
