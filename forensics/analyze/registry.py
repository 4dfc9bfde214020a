"""The stages of a scan, declared: what each is, what it reads, what it writes, what invalidates it;
and how one analyzer runs over a chunk of runs (in the scan's process or in an engine's worker).

An analyzer is a module with ``analyze(store, run_ids)``. It reads the ingested tables and writes
its own; the only reads of another analyzer's output are the ones declared in ``requires`` (the
pipeline runs that one first and, for a run where it failed or did not run, reports this one as
failed for that run too: fail closed, never a silently thinner result). Analyzers never import each
other (`../shared/DESIGN.md`); the pipeline and the engines import this module, and it imports
analyzers only by name, when they run.

Adding an analyzer: one entry here and its module; its tables in `forensics.store.schema` with
``owner`` naming it (a test checks both ways); docs/extending.md says what to declare.

**What invalidates a stage.**  Every stage of a scan - the ingest, each analyzer, the verdict and
the report - is declared here (`STAGES`) with what it runs and what it reads, and the scan resumes
from these declarations alone: a stage's fingerprint for a run (`stage_fingerprints`) is the hash
of

* its **code** (``code``, default its module): the content hashes of the files it runs.  A module
  root brings the transitive closure of its imports inside the project (forensics/, and kernels/
  as forensics.kernels; lazy imports in functions included: `code_files`), so a parser fix in
  forensics/transcripts/ reaches the ingest and a rule file of forensics/analyze/static/ the static
  audit without anyone listing them, and so does a data file of the project that this code names
  (deck-hashes.json); a package root brings every file under it (forensics.kernels).  The
  orchestration (`ORCHESTRATION`: this module, the pipeline, the engines, the CLI, the worker pool)
  is no stage's code: it moves rows, it decides none;
* its per-run **inputs** (``inputs``): the *output digest* of each earlier stage it reads for the
  same run, and the inputs the pipeline computes (`EXTERNAL`: the annotation file that applies to
  the run, which analyzers ran or failed on it, whether its page gets a timeline plot).  The
  ingest's input is the content of every file of the run (forensics.store.ingest);
* its **cross-run reads** (``reads_all``): rows of every run it reads (provenance classifies a
  reference by the other run's `runs` row, similarity compares every run's code), hashed from the
  store when the stage is about to run;
* the limits in force (forensics.limits) and the scan's options that change it (the analyzer set).

A stage's **output digest** for a run is the hash of the rows it wrote for it (``output``: by
default the tables it ``writes``, its own findings only), taken when it ran and stored with its
fingerprint (``stage_runs``; the ingest's in ``runs``).  Its dependants take that in, not its
fingerprint: a stage redone with the same rows (a comment added to a parser) costs them nothing,
and a rescan of an unchanged archive hashes no row at all.  The pipeline redoes a stage for a run
exactly when its fingerprint changed (or with ``--force``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.store.db import Store


@dataclass(frozen=True)
class Rows:
    """Rows of a store table: what a stage reads of every run, or what it writes of one."""
    table: str
    columns: tuple[str, ...] = ("*",)   # "*": every column but the ones that time things (UNHASHED)
    where: str = ""
    keys: tuple[str, ...] = ("run_id",)   # the columns naming the run a row belongs to


@dataclass(frozen=True)
class Stage:
    name: str
    module: str
    #: code roots: modules (with their import closure) and packages (every file) it runs; default its module
    code: tuple[str, ...] = ()
    #: what it reads of the run: earlier stages (their output digest for the run) and EXTERNAL inputs
    inputs: tuple[str, ...] = ()
    #: rows of every run it reads (hashed from the store when it is about to run)
    reads_all: tuple[Rows, ...] = ()
    #: the rows it writes of a run (hashed when it ran: its output digest); default from ``writes``
    output: tuple[Rows, ...] = ()

    def roots(self) -> tuple[str, ...]:
        return self.code or (self.module,)

    def outputs(self) -> tuple[Rows, ...]:
        if self.output:
            return self.output
        return tuple(Rows(t, where=f"analyzer = '{self.name}'" if t == "findings" else "")
                     for t in getattr(self, "writes", ()))


@dataclass(frozen=True)
class Analyzer(Stage):
    #: one call over every run at once (its result for a run depends on the others), else per run in chunks
    cross_run: bool = False
    #: tables it writes (findings rows are tagged with its name)
    writes: tuple[str, ...] = ()
    #: analyzers whose output it reads; they run first
    requires: tuple[str, ...] = ()
    #: run only when asked (--replay)
    opt_in: bool = False


_RUN_FACTS = ("run_id", "run_name", "problem", "run_ts", "started_at", "peak_fraction", "transcript_format", "harness",
              "tool_source")
_CODE_FILES = ("path = 'solution.py' or path like 'scratch/%' or path like 'template_files/%' "
               "or path like 'repo/problems/%'")
_READS = "classification in ('deliberate_read', 'copy')"
_REF_COLS = ("run_id", "call_seq", "line", "source", "foreign_run_id", "foreign_file", "artifact", "classification",
             "same_problem")

#: inputs the pipeline computes per run (not a stage's output): the annotation file that applies to
#: the run (its sha256), which analyzers ran, failed or were left out on it (the coverage the verdict
#: cites), and whether its page gets a timeline plot (the report's choice over all runs)
EXTERNAL = ("annotation", "coverage", "plot")

#: the ingest: its input is every file of the run (the content, size, mtime and link target of each;
#: forensics.store.ingest fingerprints them) and, for a run whose commands globbed over run folders,
#: the other runs' names; its output, every row it wrote of the run (hashed as it is written)
INGEST = Stage("ingest", "forensics.store.ingest")

ANALYZERS: tuple[Analyzer, ...] = (
    # classifies a foreign reference by the other run's `runs` row: every run's facts are read
    Analyzer("provenance", "forensics.analyze.provenance", inputs=("ingest",),
             reads_all=(Rows("runs", _RUN_FACTS),), writes=("foreign_refs", "findings")),
    # every run's code against every other's; contamination chains join its pairs with provenance's
    # deliberate reads of the other run; the bundled references' signatures (kernels/) tell problems apart
    Analyzer("similarity", "forensics.analyze.similarity",
             code=("forensics.analyze.similarity", "forensics.kernels.problems", "forensics.kernels.ref"),
             reads_all=(Rows("runs", ("run_id", "run_name", "problem", "run_ts")),
                        Rows("files", ("run_id", "path", "size", "sha256", "is_symlink"), _CODE_FILES),
                        Rows("foreign_refs", _REF_COLS, _READS)),
             output=(Rows("similarity_pairs", keys=("a_id", "b_id")), Rows("findings", where="analyzer = 'similarity'")),
             cross_run=True, writes=("similarity_pairs", "findings"), requires=("provenance",)),
    Analyzer("timeline", "forensics.analyze.timeline", inputs=("ingest",), writes=("file_versions", "check_runs", "findings")),
    # (the deck files' canonical hashes, forensics/data/deck-hashes.json, are named in its code: part of
    # it); it writes its grader-integrity findings as "integrity"
    Analyzer("static", "forensics.analyze.static", inputs=("ingest",), writes=("findings",),
             output=(Rows("findings", where="analyzer in ('static', 'integrity')"),)),
    # the static findings name the probes that settle them; the references and their problems: kernels/
    Analyzer("replay", "forensics.replay", code=("forensics.replay", "forensics.kernels"),
             inputs=("ingest", "static"), writes=("replay_results", "findings"), requires=("static",), opt_in=True),
)
BY_NAME = {a.name: a for a in ANALYZERS}
_ANALYZER_NAMES = tuple(a.name for a in ANALYZERS)

#: the verdict (forensics/verdict.py load_facts, adjudicate): the run's ingested rows (runs,
#: session_end, the archive's probe logs and deck hardware, an annotation inside the run folder),
#: every analyzer's findings and tables, the coverage the pipeline says of the run (its findings
#: `pipeline`, written with the verdict) and an `--annotations` file
VERDICT = Stage("verdict", "forensics.verdict", inputs=("ingest", *_ANALYZER_NAMES, "coverage", "annotation"),
                output=(Rows("verdicts"), Rows("findings", where="analyzer = 'pipeline'")))
#: a run's report page, timeline plot and annotation file: everything the page shows (its verdict,
#: every analyzer's rows, the files it quotes, the transcript rows of its trajectory) and the other
#: runs' ids and names (its links, the page names)
REPORT = Stage("report", "forensics.report", inputs=("ingest", *_ANALYZER_NAMES, "verdict", "plot"),
               reads_all=(Rows("runs", ("run_id", "run_name")),))
STAGES: tuple[Stage, ...] = (INGEST, *ANALYZERS, VERDICT, REPORT)
STAGE_BY_NAME = {s.name: s for s in STAGES}


# ------------------------------------------------------------------------------ fingerprints
#: the package whose files a stage's code can be (third-party libraries are not followed); its
#: subpackages that live in another folder are followed there (`code_folders`: forensics.kernels,
#: the repository's kernels/ folder in a checkout)
PROJECT = ("forensics",)


def code_folders() -> list[tuple[str, str]]:
    """[(dotted name, folder)] the project's code lives in: forensics/ and each subpackage whose
    __init__ points its ``__path__`` at another folder (forensics.kernels -> kernels/ in a checkout;
    installed, it is forensics/kernels/ itself).  Relative to the project root in force (a copy of
    the code, `forensics.__file__`, maps to the copy's folders)."""
    root = str(_project_root())
    got = _FOLDERS.get(root)
    if got is not None:
        return got
    out = [(pkg, os.path.join(root, pkg)) for pkg in PROJECT if os.path.isdir(os.path.join(root, pkg))]
    for pkg, top in list(out):
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            init = os.path.join(dirpath, "__init__.py")
            if dirpath == top or "__init__.py" not in filenames:
                continue
            with open(init, encoding="utf-8", errors="replace") as fh:
                if "__path__" not in fh.read():
                    continue
            name = pkg + "." + dirpath[len(top) + 1:].replace(os.sep, ".")
            try:
                mod = importlib.import_module(name)     # (only its __init__ runs: it sets __path__)
            except Exception:  # noqa: BLE001 - a package that cannot import maps to nothing more
                continue
            home = os.path.dirname(os.path.dirname(os.path.abspath(mod.__file__)))   # the package's parent
            real_root = os.path.dirname(home) if pkg == "forensics" else home
            for p in getattr(mod, "__path__", []):
                p = os.path.abspath(p)
                if os.path.realpath(p) == os.path.realpath(dirpath) or not os.path.isdir(p):
                    continue
                rel = os.path.relpath(p, real_root)
                there = os.path.join(root, rel) if not rel.startswith("..") else p
                if os.path.isdir(there):
                    out.append((name, there))
    _FOLDERS[root] = out
    return out


_FOLDERS: dict[str, list[tuple[str, str]]] = {}
#: orchestration: moves rows between stages, decides none (not part of any stage's code)
ORCHESTRATION = ("forensics.analyze.registry", "forensics.pipeline", "forensics.engine", "forensics.cli",
                 "forensics.pool")
#: the columns that time things (forensics.engine.compare leaves them out too) and the resume state
#: itself: never part of a "*" rows hash
UNHASHED = {("verdicts", "adjudicated_at"), ("verdicts", "input_fingerprint"), ("runs", "ingested_at"),
            ("runs", "fingerprint"), ("runs", "stamp"), ("runs", "output"),
            ("replay_results", "ran_at"), ("replay_results", "ms"), ("replay_results", "tflops"),
            ("replay_results", "gbps"), ("replay_results", "data")}

# path -> ((mtime_ns, size, the data file names looked for), sha256, project modules it imports, the
# data file names it mentions): read once per process per version of the file
_FILE_CACHE: dict[str, tuple[tuple[int, int, frozenset[str]], str, frozenset[str], frozenset[str]]] = {}
# an import statement, matched at the start of a line that holds the word "import"
_IMPORT = re.compile(r"[ \t]*(?:import[ \t]+([\w. \t,]+)|from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+"
                     r"(?:\(([^)]*)\)|([\w. \t,]+)))")


def _imports(text: str) -> Iterable[re.Match]:
    """The import statements of `text` (found from the word, then matched at its line's start:
    twice as fast as scanning every line)."""
    seen = set()
    i = text.find("import")
    while i != -1:
        start = text.rfind("\n", 0, i) + 1
        if start not in seen:
            seen.add(start)
            m = _IMPORT.match(text, start)
            if m:
                yield m
        i = text.find("import", i + 6)
_ROOT: dict[str, Any] = {}


def _project_root() -> Path:
    import forensics
    f = forensics.__file__
    if _ROOT.get("file") != f:
        _ROOT.update(file=f, root=Path(f).resolve().parent.parent)
    return _ROOT["root"]


class _Resolver:
    """Dotted names -> files or folders of the project, and each file's (sha256, imports), memoized
    for one computation (a file added or edited between two scans is seen by the next)."""

    def __init__(self) -> None:
        self.root = str(_project_root())
        self.memo: dict[str, str | None] = {}
        self.scanned: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {}
        self.edges: dict[str, tuple[str, ...]] = {}
        self._data: dict[str, list[str]] = {}
        self.data_names: frozenset[str] = frozenset()
        self.dirs: set[str] = set()
        self.names: dict[str, str] = {}        # file -> its dotted module name
        # the project's modules and folders by dotted name, and its data files by file name: one walk
        for pkg, top in code_folders():
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                rel = pkg + (dirpath[len(top):].replace(os.sep, ".") if dirpath != top else "")
                self.memo[rel] = dirpath
                self.dirs.add(rel)
                for fn in filenames:
                    full = os.path.join(dirpath, fn)
                    if fn.endswith(".py"):
                        name = rel if fn == "__init__.py" else f"{rel}.{fn[:-3]}"
                        self.memo.setdefault(f"{rel}.{fn[:-3]}", full)   # (a folder of that name wins)
                        self.names[full] = name
                    elif not fn.endswith((".pyc", ".pyo", ".md")):
                        self._data.setdefault(fn, []).append(full)
        self.data_names = frozenset(self._data)

    def data(self, name: str) -> list[str]:
        """The project's data files (not Python) with this file name."""
        return self._data.get(name, [])

    def path(self, name: str) -> str | None:
        """The file (module) or folder (package, or a data folder) of a dotted name inside the
        project; else the origin of an importable module (a root given from outside, e.g. a test's)."""
        if name in self.memo:
            return self.memo[name]
        got: str | None = None
        if name.split(".")[0] in PROJECT:
            got = None          # not in the walk: no such module (a name imported from a module)
        else:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            if spec is not None and spec.origin and os.path.isfile(spec.origin):
                got = spec.origin
        self.memo[name] = got
        return got

    def module(self, path: str) -> str | None:
        return self.names.get(path)

    def scan(self, path: str) -> tuple[str, frozenset[str], frozenset[str]]:
        got = self.scanned.get(path)
        if got is None:
            got = self.scanned[path] = _scan_file(path, self)
        return got

    def files_of(self, m: str) -> tuple[str, ...]:
        """The files importing module `m` runs itself: its packages' __init__ and its own file,
        stopping at orchestration (memoized)."""
        got = self.edges.get(m)
        if got is not None:
            return got
        out = []
        parts = m.split(".")
        for i in range(1, len(parts) + 1):          # a module's packages run their __init__ first
            name = ".".join(parts[:i])
            if _orchestration(name):
                break
            if name in self.dirs:   # a package of the project: its __init__, if it has one
                p = self.memo.get(f"{name}.__init__")
            else:
                p = self.path(name)
                if p is not None and os.path.isdir(p):
                    p = os.path.join(p, "__init__.py")
                    if not os.path.isfile(p):
                        continue
            if p is not None:
                out.append(p)
        got = self.edges[m] = tuple(out)
        return got


def _scan_file(path: str, res: _Resolver | None = None) -> tuple[str, frozenset[str], frozenset[str]]:
    """(sha256 of its bytes, project modules it imports anywhere in it, names of the project's data
    files it mentions: a data file named in code is part of that code), cached by mtime and size."""
    res = res or _Resolver()
    st = os.stat(path)
    key = (st.st_mtime_ns, st.st_size, res.data_names)
    hit = _FILE_CACHE.get(path)
    if hit is not None and hit[0] == key:
        return hit[1], hit[2], hit[3]
    with open(path, "rb") as fh:
        data = fh.read()
    digest = hashlib.sha256(data).hexdigest()
    found: set[str] = set()
    names: frozenset[str] = frozenset()
    if path.endswith(".py"):
        # import statements anywhere (lazy ones in functions too), read with a pattern rather than
        # ast.parse (ten times faster; a match inside a string only adds a file to the closure)
        me = res.module(path) or ""
        pkg = me if path.endswith("__init__.py") else me.rpartition(".")[0]
        text = data.decode("utf-8", "replace")
        for m in _imports(text):
            if m.group(1) is not None:
                found.update(x.strip().split(" as ")[0].strip() for x in m.group(1).split(","))
                continue
            dots, mod, names = m.group(2), m.group(3) or "", m.group(4) or m.group(5) or ""
            base = mod
            if dots:
                up = pkg.split(".")[: len(pkg.split(".")) - (len(dots) - 1)]
                base = ".".join(up + ([mod] if mod else []))
            found.add(base)
            found.update(f"{base}.{x.strip().split(' as ')[0].strip()}" for x in names.split(",") if x.strip())
        found = {m for m in found if m.split(".")[0] in PROJECT}
        names = frozenset(n for n in res.data_names if n in text)
    _FILE_CACHE[path] = (key, digest, frozenset(found), names)
    return digest, frozenset(found), names


def _orchestration(name: str) -> bool:
    return any(name == o or name.startswith(o + ".") for o in ORCHESTRATION)


def _code_files(roots: Iterable[str], res: _Resolver) -> list[str]:
    out: set[str] = set()
    todo: list[str] = []
    for r in roots:
        p = res.path(r)
        if p is None:
            out.add(f"<missing:{r}>")
        elif os.path.isdir(p):
            for dirpath, dirnames, filenames in os.walk(p):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for fn in filenames:
                    if not fn.endswith((".pyc", ".pyo")):
                        f = os.path.join(dirpath, fn)
                        out.add(f)
                        if fn.endswith(".py"):
                            todo.append(res.module(f) or "")
        else:
            out.add(p)
            todo.append(res.module(p) or r)
            if res.module(p) is None:       # a root from outside the project: its imports still count
                todo.extend(res.scan(p)[1])
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if not m or m in seen:
            continue
        seen.add(m)
        for p in res.files_of(m):
            out.add(p)
            if p.endswith(".py"):
                _sha, imports, names = res.scan(p)
                todo.extend(i for i in imports if i not in seen)
                for n in names:          # the data files its code names (forensics/data/deck-hashes.json)
                    out.update(res.data(n))
    return sorted(out)


def code_files(roots: Iterable[str]) -> list[Path]:
    """Every file a stage with these code roots runs: each module root and the transitive closure
    of its imports inside the project (with the packages' __init__ on the way), each package root's
    files; the orchestration modules are not followed (see ORCHESTRATION)."""
    return [Path(f) for f in _code_files(roots, _Resolver())]


def _digest(roots: Iterable[str], res: _Resolver) -> str:
    h = hashlib.sha256()
    for f in _code_files(roots, res):
        if f.startswith("<missing:"):
            h.update(f"{f}\n".encode())
            continue
        rel = f[len(res.root) + 1:].replace(os.sep, "/") if f.startswith(res.root + os.sep) else os.path.basename(f)
        h.update(f"{rel}:{res.scan(f)[0]}\n".encode())
    return h.hexdigest()[:24]


def code_digest(stage: Stage, module: str | None = None) -> str:
    """The content hash of a stage's code (its roots' files), not of their mtimes: two clones of one
    commit agree.  `module`: the module that actually runs it, when not the declared one."""
    roots = stage.roots() if module in (None, stage.module) else (module, *[r for r in stage.roots() if r != stage.module])
    return _digest(roots, _Resolver())


def code_digests(stages: Sequence[Stage] = STAGES, modules: Mapping[str, str] | None = None) -> dict[str, str]:
    """{stage: code_digest} of every stage at once (one resolver, each file read once); `modules`
    {stage: the module that runs it} where not the declared one."""
    res = _Resolver()
    out = {}
    for s in stages:
        m = (modules or {}).get(s.name, s.module)
        roots = s.roots() if m == s.module else (m, *[r for r in s.roots() if r != s.module])
        out[s.name] = _digest(roots, res)
    return out


def tree_stamp() -> str | None:
    """A stamp of every file of the project's packages (path, inode, ctime, mtime, size: what
    `ArchiveSource.stamp` trusts), under which the stages' code digests can be reused without reading
    a file; None when a file changed too recently for its stat to vouch for it."""
    import time
    from forensics.archive.source import STAMP_SETTLE_NS
    root = str(_project_root())
    now = time.time_ns()
    h = hashlib.sha256(root.encode())
    for pkg, top in code_folders():
        h.update(f"{pkg}={top}\n".encode())
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for fn in sorted(filenames):
                if fn.endswith((".pyc", ".pyo")):
                    continue
                try:
                    st = os.stat(os.path.join(dirpath, fn))
                except OSError:
                    return None
                if st.st_ctime_ns > now - STAMP_SETTLE_NS or st.st_mtime_ns > now - STAMP_SETTLE_NS:
                    return None
                h.update(f"{dirpath}/{fn}:{st.st_ino}:{st.st_ctime_ns}:{st.st_mtime_ns}:{st.st_size}\n".encode())
    return h.hexdigest()[:24]


def _hash_cols(r: Rows) -> list[str]:
    from forensics.store import schema as S
    t = S.TABLE_BY_NAME[r.table]
    return [c for c in t.column_names() if (r.table, c) not in UNHASHED] if r.columns == ("*",) else list(r.columns)


def _rowtxt(r: Rows) -> str:
    return "cast(row(" + ", ".join(f'"{c}"' for c in _hash_cols(r)) + ") as varchar)"


def reads_all_digest(store: Store, stage: Stage) -> str:
    """The hash of the rows of every run the stage reads (``reads_all``), from the store now."""
    if not stage.reads_all:
        return ""
    h = hashlib.sha256()
    for r in stage.reads_all:
        rowtxt = _rowtxt(r)
        where = f" where ({r.where})" if r.where else ""
        v = store.con.execute(f"select count(*), md5(coalesce(string_agg({rowtxt}, chr(30) order by {rowtxt}), '')) "
                              f"from {r.table}{where}").fetchall()[0]   # (fetched to the end: no result left open)
        h.update(f"{r.table}:{v[0]}:{v[1]}\n".encode())
    return h.hexdigest()[:24]


def output_digests(store: Store, stage: Stage, run_ids: Sequence[str]) -> dict[str, str]:
    """{run_id: hash of the rows the stage wrote of the run} (its ``outputs()``), from the store now:
    taken right after it ran, for the runs it ran on."""
    if not run_ids:
        return {}
    per: dict[str, Any] = {rid: hashlib.sha256(stage.name.encode()) for rid in run_ids}
    for r in stage.outputs():
        rowtxt = _rowtxt(r)
        for key in r.keys:
            cond = f"{key} in (select unnest(?::VARCHAR[]))" + (f" and ({r.where})" if r.where else "")
            got = {k: (n, d) for k, n, d in store.con.execute(
                f"select {key}, count(*), md5(string_agg({rowtxt}, chr(30) order by {rowtxt})) from {r.table} "
                f"where {cond} group by {key}", [list(run_ids)]).fetchall()}
            for rid, h in per.items():
                n, d = got.get(rid, (0, ""))
                h.update(f"{r.table}.{key}:{n}:{d}\n".encode())
    return {rid: h.hexdigest()[:24] for rid, h in per.items()}


def arrow_digest(tables: Mapping[str, Sequence[Any]]) -> str:
    """The hash of rows held as Arrow tables ({table: [pyarrow.Table, ...]}, as a worker of the
    ingest hands them back), UNHASHED columns left out: the ingest's output digest of a run."""
    import pyarrow as pa
    h = hashlib.sha256()
    for name in sorted(tables):
        for tbl in tables[name]:
            keep = [c for c in tbl.column_names if (name, c) not in UNHASHED]
            tbl = tbl.select(keep)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, tbl.schema) as w:
                w.write_table(tbl)
            h.update(f"{name}:{tbl.num_rows}:".encode())
            h.update(sink.getvalue())
    return h.hexdigest()[:24]


def stage_fingerprints(stage: Stage, run_ids: Sequence[str], inputs: Mapping[str, Mapping[str, str]], code: str,
                       whole: str = "", options: str = "") -> dict[str, str]:
    """{run_id: the stage's fingerprint for that run}: its `code` digest, the limits in force,
    `options`, `whole` (its `reads_all_digest`) and, per run, what it takes in of each of its
    ``inputs`` (`inputs[name][run_id]`: an earlier stage's output digest, an EXTERNAL input)."""
    from forensics import limits
    base = f"{stage.name}|{code}|{limits.signature()}|{options}|{whole}"
    out = {}
    for rid in run_ids:
        ups = "|".join(f"{u}={inputs.get(u, {}).get(rid, '')}" for u in stage.inputs)
        out[rid] = hashlib.sha256(f"{base}|{ups}".encode()).hexdigest()[:24]
    return out


def order(analyzers: Sequence[Analyzer] = ANALYZERS) -> list[Analyzer]:
    """`analyzers` in declared order, checked: every requirement is declared and comes earlier."""
    seen: set[str] = set()
    names = {a.name for a in analyzers}
    for a in analyzers:
        for r in a.requires:
            if r not in names:
                raise ValueError(f"analyzer {a.name} requires {r}, which is not declared")
            if r not in seen:
                raise ValueError(f"analyzer {a.name} requires {r}, declared after it")
        seen.add(a.name)
    return list(analyzers)


def output_tables(analyzers: Sequence[Analyzer] = ANALYZERS) -> tuple[str, ...]:
    """Tables the per-run analyzers write (what a worker hands back for its chunk)."""
    out: list[str] = []
    for a in analyzers:
        if not a.cross_run:
            out += [t for t in a.writes if t not in out]
    return tuple(out)


def import_analyzer(module: str) -> Callable[[Store, list[str]], Any]:
    mod = importlib.import_module(module)
    fn = getattr(mod, "analyze", None)
    if fn is None:
        raise ImportError(f"{module} has no analyze(store, run_ids)")
    return fn


def describe_error(e: BaseException) -> str:
    """An exception in one line, with the file and line it came from."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return f"{type(e).__name__}: {str(e)[:300]}{where}"


def run_isolated(fn, store: Store, run_ids: Sequence[str]) -> dict[str, str]:
    """Run a per-run analyzer over `run_ids`; if it raises, bisect the runs until each failure is
    pinned to one run, so one bad run fails only its own fields and the others are analysed
    normally.  Returns {run_id: error} of the runs it failed on (empty when all ran)."""
    try:
        fn(store, list(run_ids))
        return {}
    except Exception as e:  # noqa: BLE001 - an analyzer crash fails its run's fields closed
        try:
            store.con.execute("ROLLBACK")
        except Exception:  # noqa: BLE001 - no transaction was open
            pass
        if len(run_ids) == 1:
            return {run_ids[0]: describe_error(e)}
        mid = len(run_ids) // 2
        return {**run_isolated(fn, store, run_ids[:mid]), **run_isolated(fn, store, run_ids[mid:])}


def analyze_chunk(args) -> tuple[str, list[str], dict[str, Any], dict[str, str]]:
    """In a worker: copy the chunk's rows from the (read-only) store into memory, run one analyzer,
    return the rows it wrote as Arrow IPC bytes per table and {run_id: error} of the runs it failed
    on (never an exception)."""
    try:
        return _analyze_chunk(args)
    except Exception as e:  # noqa: BLE001 - the chunk's fields fail closed in the parent
        return args[1], list(args[2]), {}, {rid: describe_error(e) for rid in args[2]}


def _chunk_others(module: str) -> tuple[Rows, ...]:
    """What the analyzer run by `module` reads of every run besides its chunk's (its ``reads_all``);
    every run's whole `runs` row for a module not declared here."""
    spec = next((a for a in ANALYZERS if a.module == module), None)
    return spec.reads_all if spec is not None else (Rows("runs"),)


def _analyze_chunk(args) -> tuple[str, list[str], dict[str, Any], dict[str, str]]:
    db_path, module, chunk = args
    import pyarrow as pa

    from forensics.store.chunks import ChunkStore
    with ChunkStore.reading(db_path) as cs:
        mem = cs.load(chunk, _chunk_others(module))
        cs.con.execute("DETACH src")
        errs = run_isolated(import_analyzer(module), mem, list(chunk))
        ok = [r for r in chunk if r not in errs]  # a failed run's partial rows are not handed back
        out: dict[str, bytes] = {}
        for t in output_tables():
            res = mem.con.execute(f"select * from {t} where run_id in (select unnest(?::VARCHAR[]))", [ok])
            tbl = (getattr(res, "to_arrow_table", None) or res.fetch_arrow_table)()   # duckdb 2 / 1.x
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, tbl.schema) as w:
                w.write_table(tbl)
            out[t] = sink.getvalue().to_pybytes()
        return module, list(chunk), out, errs


def analyze_chunk_here(store: Store, module: str, chunks: Sequence[Sequence[str]], writes: Sequence[str],
                       on_chunk: Callable[[Sequence[str], dict[str, str]], None] | None = None,
                       fn: Callable[[Store, list[str]], Any] | None = None) -> dict[str, str]:
    """Run a per-run analyzer in this process over each chunk of runs, each in a store of the
    chunk's own rows (forensics.store.chunks: its queries cost the same whatever the archive's
    size), its rows of `writes` then replacing the chunk's in `store`; a failed run's rows are
    left as they were.  Returns {run_id: error} of the runs it failed on."""
    from forensics.store.chunks import ChunkStore
    fn = fn or import_analyzer(module)
    failed: dict[str, str] = {}
    with ChunkStore.beside(store) as cs:
        for c in chunks:
            mem = cs.load(c, _chunk_others(module))
            errs = run_isolated(fn, mem, list(c))
            cs.apply(store, [r for r in c if r not in errs], writes)
            failed.update(errs)
            if on_chunk is not None:
                on_chunk(c, errs)
    return failed


def apply_chunk_rows(store: Store, chunk: Sequence[str], tables: dict[str, bytes]) -> None:
    """In the driver: replace the chunk's rows of each table with what its worker wrote."""
    import pyarrow as pa
    ph = ",".join("?" * len(chunk))
    with store.transaction():
        for t, blob in tables.items():
            tbl = pa.ipc.open_stream(blob).read_all()
            store.con.execute(f"DELETE FROM {t} WHERE run_id IN ({ph})", list(chunk))
            store.insert_arrow(t, tbl)


__all__ = ["ANALYZERS", "Analyzer", "BY_NAME", "EXTERNAL", "INGEST", "REPORT", "Rows", "STAGES", "STAGE_BY_NAME", "Stage",
           "VERDICT", "analyze_chunk", "analyze_chunk_here", "apply_chunk_rows", "arrow_digest", "code_digest", "code_digests", "code_files",
           "describe_error", "import_analyzer", "order", "output_digests", "output_tables", "reads_all_digest",
           "run_isolated", "stage_fingerprints", "tree_stamp"]
