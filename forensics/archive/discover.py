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

from forensics.archive.runid import RunId, parse_run_id
from forensics.archive.source import ArchiveSource, Entry

RUN_MARKERS = frozenset({
    "result.json", "transcript.jsonl", "transcript.jsonl.gz", "solution.py", "meta.log", "agent.log",
    "codex_session.jsonl", "check.log", "stderr.log", "benchmark.log", "gpu_lock.log",
})


@dataclass
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


def discover_runs(src: ArchiveSource, single_name: str | None = None) -> list[DiscoveredRun]:
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
    for d in sorted(dirs):
        name = PurePosixPath(d).name
        parent = PurePosixPath(d).parent.name
        parsed = parse_run_id(name)
        marked = bool(children.get(d, set()) & RUN_MARKERS)
        under_root = parent.startswith("runs") or parent == "rescue"
        if (parsed and (marked or under_root)) or (marked and under_root):
            candidates.append(d)

    # drop runs nested inside another run (e.g. copies inside a workspace)
    chosen: list[str] = []
    for d in sorted(candidates, key=lambda x: (x.count("/"), x)):
        if any(d.startswith(c + "/") for c in chosen):
            continue
        chosen.append(d)

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

    names = defaultdict(list)
    for d in chosen:
        names[PurePosixPath(d).name].append(d)
    runs: list[DiscoveredRun] = []
    for d in sorted(chosen):
        name = PurePosixPath(d).name
        root = _root_of(d)
        run_id = name if len(names[name]) == 1 else f"{name}@{root or d}"
        if len(names[name]) > 1 and sum(1 for x in names[name] if _root_of(x) == root) > 1:
            run_id = f"{name}@{PurePosixPath(d).parent}"
        raw = {p: b for p, b in src.raw_names.items() if p.startswith(d + "/") or d == p or d.startswith(p + "/")}
        runs.append(DiscoveredRun(run_id, name, d, root, parse_run_id(name), by_dir[d], raw))
    return runs
