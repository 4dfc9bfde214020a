"""`forensics scan`: discover -> ingest -> analyse -> (replay) -> adjudicate -> report, in one call.

    from forensics.pipeline import scan
    res = scan("corpus/fixtures/archive", out="report")      # -> ScanResult
    res.exit_code, res.verdicts[0]["verdict"]

Resuming.  Every stage of the scan is declared in forensics.analyze.registry with its code roots
and its inputs, and a scan redoes a stage for a run exactly when the stage's fingerprint for the
run changed: the ingest's (``runs.fingerprint``) is the sha256 of the run's files' contents, the
ingest code's content hash and the limits; an analyzer's, the verdict's and the report's are their
code's content hash (the transitive closure of their imports: a parser fix in transcripts/ or a
reference in kernels/ counts), the fingerprints of the stages they take in and the hash of the store
rows they read.  They are stored when the stage completes on the run (``stage_runs``,
``verdicts.input_fingerprint``); a stage that failed or was interrupted has none, so an interrupted
scan (even SIGKILL) resumed ends with the store and report of an uninterrupted one.  ``--force``
redoes every stage, the ingest included, for every run.

Parallelism.  DuckDB allows one writer.  The ingest parses runs in ``--jobs`` worker processes and
the parent writes their rows (forensics.store.ingest).  Per-run analyzers (provenance, timeline,
static, replay) run in ``--jobs`` worker processes too: the parent checkpoints and releases the
store, each worker attaches it read-only, copies the rows of its chunk of runs into an in-memory
store, runs the analyzer there and hands the rows it wrote back; the parent reopens the store and
writes them.  Cross-run analysis (similarity) runs once in the parent.  Report pages are rendered
in a process pool.  Where the ingest parsing and the per-run analyzers run is an engine
(forensics.engine): the local one is the process pools above; ``--engine ray`` runs the same units
as Ray tasks (replays one per GPU), the parent still the store's one writer.

Isolation.  A per-run analyzer that raises on a chunk is re-run on halves of it until each failure
is pinned to one run (`forensics.analyze.registry.run_isolated`): that run's coverage finding names the analyzer and the
error and its fields fail closed (unknown with the reason); every other run of the chunk is
analysed normally.  A cross-run analyzer is all or nothing (a subset would be silently incomplete).

Exit codes: 0 ok; 1 with ``--strict`` when any run is flagged (verdict reward_hack, contamination,
rubric_leak, suspect or unknown) or disagrees with its archived verdict; 2 usage or input error
(archive missing or unreadable, no run in it, an output that cannot be written, ``--replay``
without torch, ingest failed) and an archive that ends early (the runs before the cut are scanned
and reported, ``unreadable``), as tar exits 2 after extracting what it could.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
import orjson

from forensics import verdict as V
from forensics.analyze import registry as R
from forensics.engine.base import AUTO_MAX_JOBS, AUTO_MIN_RUNS
from forensics.store.chunks import chunk_stores_above
from forensics.store.db import Store

# (name, module, cross_run): analyzers in pipeline order (forensics.analyze.registry declares them,
# with what each requires); replay only with --replay.
ANALYZER_MODULES: tuple[tuple[str, str, bool], ...] = tuple((a.name, a.module, a.cross_run) for a in R.order())

EXIT_OK, EXIT_FLAGGED, EXIT_USAGE = 0, 1, 2


class ScanError(Exception):
    """Usage or input error (exit code 2)."""


class VerdictRows(Sequence):
    """The scan's verdicts, one dict per run (`forensics.verdict.verdict_dict`), held as the store's
    rows (their JSON columns as text) and decoded when read: every run's decoded verdict held at once
    was most of a large scan's memory (about 17 kB a run)."""

    def __init__(self, names: Sequence[str], rows: list[tuple]):
        self._names = tuple(names)
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return V.verdict_dict(dict(zip(self._names, self._rows[i])))

    def __repr__(self) -> str:
        return f"<{len(self)} verdicts>"


@dataclass
class ScanResult:
    archive: str
    out: Path | None
    db: str
    run_ids: list[str]
    analyzed: list[str]
    skipped: list[str]
    verdicts: Sequence[dict[str, Any]]    # (VerdictRows: decoded as read)
    coverage: dict[str, Any]
    ingest: dict[str, Any]
    timings: dict[str, float]
    flagged: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    exit_code: int = 0
    paths: dict[str, str] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)   # forensics.engine report (per-run timings: ["runs"])
    archive_identity: dict[str, Any] = field(default_factory=dict)   # forensics.report.folder
    unreadable: dict[str, Any] = field(default_factory=dict)   # what the ingest could not read (`unreadable`)
    stages: dict[str, int] = field(default_factory=dict)   # stage -> runs it was (re)done for in this scan

    def to_dict(self) -> dict[str, Any]:
        return {"archive": self.archive, "archive_identity": self.archive_identity,
                "out": str(self.out) if self.out else None, "db": self.db,
                "runs": len(self.run_ids), "analyzed": len(self.analyzed), "skipped_unchanged": len(self.skipped),
                "coverage": self.coverage, "ingest": self.ingest, "timings": self.timings,
                "flagged": self.flagged, "disagreements": self.disagreements, "exit_code": self.exit_code,
                "unreadable": self.unreadable,
                "paths": self.paths, "engine": {k: v for k, v in self.engine.items() if k != "runs"},
                "stages": self.stages}


# ---------------------------------------------------------------------------------------------
def annotation_digests(store: Store, run_ids: Sequence[str], annotations: str | os.PathLike | None) -> dict[str, str]:
    """{run_id: sha256 of the `--annotations` file that applies to it} ('' where none does): an
    input of the verdict (its archived-verdict comparison)."""
    out = {rid: "" for rid in run_ids}
    if annotations is None:
        return out
    ann_dir = Path(annotations)
    want = set(run_ids)
    listings: dict[str, list[str]] = {}
    for r in store.query("select run_id, run_name from runs"):
        if r["run_id"] in want:
            p = V.find_annotation(r["run_name"] or r["run_id"], [ann_dir], listings)
            if p is not None:
                out[r["run_id"]] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@dataclass
class Resume:
    """What a scan knows of the stages' state: their code digests (registry.code_digests, taken once
    per scan), the stored (fingerprint, output digest) per (run, stage) and the output digests in
    force ({stage or EXTERNAL input: {run_id: digest}}: what the stages after it take in)."""
    codes: dict[str, str]
    stored: dict[tuple[str, str], tuple[str | None, str | None]] = field(default_factory=dict)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def load(cls, store: Store, codes: dict[str, str] | None = None) -> "Resume":
        st = cls(codes if codes is not None else R.code_digests())
        # (rows as tuples, each run id and stage name one object however many stages name it: a dict
        # per row and a string per mention made this a large scan's second largest holding)
        ids: dict[str, str] = {}
        cur = store.con.execute("select run_id, fingerprint, output from runs")
        # the ingest's output: the hash of its rows (a store written before it had one: its fingerprint)
        ingest = {ids.setdefault(rid, rid): out or fp or "" for rid, fp, out in cur.fetchall()}
        cur = store.con.execute("select run_id, stage, fingerprint, output from stage_runs")
        while True:
            got = cur.fetchmany(10_000)
            if not got:
                break
            for rid, stage, fp, out in got:
                rid, stage = ids.setdefault(rid, rid), ids.setdefault(stage, stage)
                st.stored[(rid, stage)] = (fp, out)
                if out is not None:
                    st.outputs.setdefault(stage, {})[rid] = out
        st.outputs["ingest"] = ingest
        return st

    def todo(self, stage: str, fps: dict[str, str], force: bool) -> list[str]:
        """The runs whose fingerprint for `stage` is not the stored one (all with `force`)."""
        return [r for r, fp in fps.items() if force or self.stored.get((r, stage), (None, None))[0] != fp]

    def record(self, store: Store, stage: R.Stage, fps: dict[str, str | None], with_output: bool = True) -> None:
        """After `stage` ran on the runs of `fps` ({run_id: fingerprint, None where it failed or was
        cut off}): their output digests taken from the store and both stored, in one transaction."""
        if not fps:
            return
        ids = sorted(fps)
        outs = R.output_digests(store, stage, ids) if with_output else {}
        with store.transaction():
            store.con.execute("delete from stage_runs where stage = ? and run_id in (select unnest(?::VARCHAR[]))",
                              [stage.name, ids])
            store.insert_rows("stage_runs", [{"run_id": r, "stage": stage.name, "fingerprint": fps[r],
                                              "output": outs.get(r)} for r in ids])
        for r in ids:
            self.stored[(r, stage.name)] = (fps[r], outs.get(r))
            if with_output:
                self.outputs.setdefault(stage.name, {})[r] = outs[r]


def stage_codes(store: Store) -> dict[str, str]:
    """{stage: code digest} (registry.code_digests), reused from the store while no file of the
    project changed since it was computed (registry.tree_stamp): a rescan reads no code."""
    stamp = R.tree_stamp()
    if stamp is not None:
        got = {r["stage"]: r["digest"] for r in store.query("select stage, digest from stage_code where tree_stamp = ?",
                                                            [stamp])}
        if set(got) >= {s.name for s in R.STAGES}:
            return got
    codes = R.code_digests()
    with store.transaction():
        store.con.execute("delete from stage_code")
        if stamp is not None:
            store.insert_rows("stage_code", [{"stage": k, "digest": v, "tree_stamp": stamp} for k, v in codes.items()])
    return codes


def coverage_state(run_ids: Sequence[str], cov: dict[str, Any]) -> dict[str, str]:
    """{run_id: what the coverage finding of the run says} (the analyzers that ran, failed, were
    missing or left out on it): the verdict's "coverage" input."""
    out = {}
    for rid in run_ids:
        fails = {a: runs[rid] for a, runs in cov["failed"].items() if rid in runs}
        ran = [a for a in cov["ran"] if a not in fails]
        out[rid] = hashlib.sha256(orjson.dumps([ran, fails, cov["missing"], cov["skipped"]],
                                               option=orjson.OPT_SORT_KEYS)).hexdigest()[:24]
    return out


# ---------------------------------------------------------------------------------------------
def run_analyzers(store: Store, run_ids: list[str], replay: bool, jobs: int, progress: bool,
                  db_path: str | None, engine: Any = None, force: bool = True,
                  resume: Resume | None = None) -> tuple[Store, dict[str, Any]]:
    """Run every analyzer over the runs of `run_ids` whose fingerprint for it changed (all with
    `force`); returns the (possibly reopened) store and the coverage, with ``todo`` {analyzer: runs
    it ran on}.  `resume` (default: read from the store) gets each analyzer's new state.  Per-run
    analyzers' chunks run in `engine`'s workers (forensics.engine; default ``jobs`` local processes)."""
    if engine is None:
        from forensics.engine import LocalEngine
        engine = LocalEngine(jobs)
    if resume is None:
        resume = Resume.load(store)
    todos: dict[str, list[str]] = {}
    ran: list[str] = []
    failed: dict[str, dict[str, str]] = {}   # analyzer -> {run_id: reason}
    missing: dict[str, str] = {}
    skipped: dict[str, str] = {}
    timings: dict[str, float] = {}
    bar = None
    if progress:
        from tqdm import tqdm
    for name, module, cross in ANALYZER_MODULES:
        if name == "replay" and not replay:
            skipped[name] = "not requested (--replay)"
            continue
        t0 = time.perf_counter()
        # fail closed: a run whose required analyzer failed (or did not run) gets no thinner result
        spec = R.BY_NAME.get(name) or R.Analyzer(name, module, cross_run=cross)
        blocked: dict[str, str] = {}
        for req in spec.requires:
            why = missing.get(req) or skipped.get(req)
            for rid in run_ids:
                if rid in blocked:
                    continue
                if why is not None or req not in ran:
                    blocked[rid] = f"needs {req}, which did not run ({why or 'not in this scan'})"
                elif rid in failed.get(req, {}):
                    blocked[rid] = f"needs {req}, which failed on this run: {failed[req][rid]}"
        for rid, why in blocked.items():
            failed.setdefault(name, {})[rid] = why
        # what invalidates it (its declaration: code, inputs, rows of every run it reads),
        # fingerprinted now that the stages before it have run
        code = resume.codes.get(name) if module == spec.module else None
        fps = R.stage_fingerprints(spec, run_ids, resume.outputs, code or R.code_digest(spec, module),
                                   whole=R.reads_all_digest(store, spec))
        changed = resume.todo(name, fps, force)
        if cross:   # all or nothing: a cross-run analysis of a subset would be silently incomplete
            todo = list(run_ids) if changed else []
        else:
            todo = [r for r in changed if r not in blocked]
        # imported only when it has work: one that has none completed on every run with this very
        # code before (its fingerprint holds the digest of its module's file), so it imports
        if todo or not run_ids:
            try:
                fn = R.import_analyzer(module)
            except Exception as e:  # noqa: BLE001 - ImportError or a crash at import
                missing[name] = R.describe_error(e)
                if blocked:
                    resume.record(store, spec, {r: None for r in blocked})
                continue
        ran.append(name)
        todos[name] = todo
        if not todo:
            if blocked:
                resume.record(store, spec, {r: None for r in blocked})
            continue
        engine.fit(len(todo))   # --jobs auto: the runs this analyzer redoes decide
        chunk_size = len(todo) if cross else engine.chunk_size(name, len(todo))
        chunks = [todo[i:i + chunk_size] for i in range(0, len(todo), chunk_size)]
        if progress:
            bar = tqdm(total=len(todo), unit="run", desc=f"analyze {name}", file=sys.stderr, leave=False)
        parallel = not cross and engine.parallel(len(chunks), db_path)
        if parallel:
            store, results = engine.map_chunks(store, db_path, name, module, chunks, bar.update if bar else None)
            for _mod, chunk, tables, errs in results:
                for rid, err in errs.items():
                    failed.setdefault(name, {})[rid] = err
                ok = [r for r in chunk if r not in errs]
                if ok and tables:
                    R.apply_chunk_rows(store, ok, tables)
        elif cross:  # a cross-run analysis of a subset would be silently incomplete: all or none
            for c in chunks:
                try:
                    fn(store, list(c))
                except Exception as e:  # noqa: BLE001 - an analyzer crash fails its fields closed
                    try:
                        store.con.execute("ROLLBACK")
                    except Exception:  # noqa: BLE001
                        pass
                    for rid in c:
                        failed.setdefault(name, {})[rid] = R.describe_error(e)
                if bar:
                    bar.update(len(c))
        elif store.scalar("select count(*) from runs") > chunk_stores_above():
            # here, each chunk of runs in a store of its own rows: the analyzer's per-run queries do
            # not scan the whole archive's rows (forensics.store.chunks)
            from forensics.store.chunks import chunks as cut
            errs = R.analyze_chunk_here(store, module, cut(store, todo), spec.writes or R.output_tables(),
                                        (lambda c, _e: bar.update(len(c))) if bar else None, fn=fn)
            for rid, err in errs.items():
                failed.setdefault(name, {})[rid] = err
        else:   # a store no larger than a chunk: the analyzer runs on it directly
            for c in chunks:
                for rid, err in R.run_isolated(fn, store, list(c)).items():
                    failed.setdefault(name, {})[rid] = err
                if bar:
                    bar.update(len(c))
        if bar:
            bar.close()
            bar = None
        # a run it failed on, or whose worker never finished it, keeps no fingerprint: the next scan
        # redoes it (its output digest is still what the verdict reads of it)
        bad, lost = failed.get(name, {}), engine.unfinished()
        resume.record(store, spec, {**{r: None for r in blocked},
                                    **{r: None if (r in bad or r in lost) else fps[r] for r in todo}})
        timings[name] = round(time.perf_counter() - t0, 3)
    return store, {"ran": ran, "failed": failed, "missing": missing, "skipped": skipped, "timings": timings,
                   "todo": todos}


def write_coverage(store: Store, run_ids: Sequence[str], cov: dict[str, Any]) -> None:
    groups: dict[str, list[str]] = {}
    per_run: dict[str, tuple[list[str], dict[str, str]]] = {}
    for rid in run_ids:
        fails = {a: runs[rid] for a, runs in cov["failed"].items() if rid in runs}
        ran = [a for a in cov["ran"] if a not in fails]
        key = orjson.dumps([ran, fails], option=orjson.OPT_SORT_KEYS).decode()
        groups.setdefault(key, []).append(rid)
        per_run[rid] = (ran, fails)
    findings = []
    for key, rids in groups.items():
        ran, fails = per_run[rids[0]]
        findings += V.coverage_findings(rids, ran, failed=fails, missing=cov["missing"], skipped=cov["skipped"])
    if run_ids:   # a file a limit kept from being read whole (forensics.limits): cited, its fields unknown
        rows = store.query("select p.run_id, p.source, p.line, p.detail, f.category from parse_errors p "
                           "left join files f on f.run_id = p.run_id and f.path = p.source "
                           "where p.reason = ? and p.run_id in (select unnest(?::VARCHAR[])) "
                           "order by p.run_id, p.source, p.line", ["over_limit", list(run_ids)])
        findings += V.limit_findings(rows)
    from forensics.analyze.findings import write_findings
    write_findings(store, "pipeline", list(run_ids), findings)


# ---------------------------------------------------------------------------------------------
def scan(archive: str | os.PathLike, out: str | os.PathLike | None = None, db: str | os.PathLike | None = None,
         replay: bool = False, annotations: str | os.PathLike | None = None, jobs: int | None = 1, strict: bool = False,
         progress: bool = True, force: bool = False, reports: bool = True, engine: Any = "local",
         address: str | None = None, task_timeout: float | None = None, retries: int | None = None,
         replace: bool = False) -> ScanResult:
    """Run the whole pipeline over ARCHIVE; write the reports under `out` (default ./report).

    A report folder and its store belong to one archive (forensics.report.folder): another
    archive's is refused (ScanError), or with `replace` the files the tool wrote there are removed
    first.

    `engine`: where ingest parsing and the per-run analyzers run: "local" (``jobs`` processes;
    None: each stage sized by its runs, forensics.engine.auto_jobs) or "ray" (Ray tasks; `address`
    of a cluster, else a local Ray of ``jobs`` CPUs), or an Engine (forensics.engine)."""
    t_all = time.perf_counter()
    apath = Path(archive)
    if not apath.exists():
        raise ScanError(f"archive not found: {archive}")
    if annotations is not None and not Path(annotations).is_dir():
        raise ScanError(f"--annotations is not a directory: {annotations}")
    outp = Path(out) if out is not None else Path("report")
    db_path = str(db) if db is not None else str(outp / "audit.duckdb")
    try:
        apath_res = apath.resolve()
        if db_path != ":memory:" and Path(db_path).resolve().is_relative_to(apath_res) and apath.is_dir():
            raise ScanError("the store must not be written inside the archive (the archive is evidence)")
        if reports and outp.resolve().is_relative_to(apath_res) and apath.is_dir():
            raise ScanError("--out must not be inside the archive (the archive is evidence)")
    except ValueError:
        pass
    if replay and (engine == "local" or getattr(engine, "name", None) == "local"):
        # the replay runs here: without torch nothing would be replayed (a Ray cluster's nodes may have it)
        from forensics.extras import MissingExtra, require_extra
        try:
            require_extra("scan --replay", "torch")
        except MissingExtra as e:
            raise ScanError(e.message) from e
    # what the scan writes, checked before any work; what this call created goes again if no run is found
    from forensics.cliutil import InputError, check_writable_dir
    from forensics.report import folder
    from forensics.store.ingest import no_runs_message
    from forensics.store.queries import open_store, remove_store_files
    made_out = reports and not outp.exists()
    new_marker = reports and not (outp / folder.MARKER).exists()
    new_db = db_path != ":memory:" and not Path(db_path).exists()

    def discard_out() -> None:
        """Remove the report folder's marker and the folder itself where this call made them (if empty)."""
        if new_marker:
            (outp / folder.MARKER).unlink(missing_ok=True)
        if made_out:
            try:
                outp.rmdir()   # only if still empty
            except OSError:
                pass

    try:
        if reports:
            check_writable_dir(outp, "--out")
    except InputError as e:
        raise ScanError(e.message) from e
    ident = folder.archive_identity(apath)
    try:
        folder.claim(outp if reports else None, db_path, ident, replace=replace)
    except folder.FolderConflict as e:
        discard_out()
        raise ScanError(str(e)) from e
    try:
        store = open_store(db_path)
    except InputError as e:
        discard_out()
        raise ScanError(e.message) from e

    def discard() -> None:
        """Remove what this call created before a usage error: the store, the report folder's marker,
        an empty report folder."""
        store.close()
        if new_db:
            remove_store_files(db_path)
        discard_out()
    timings: dict[str, float] = {}
    from forensics.engine import EngineError, get_engine
    t0 = time.perf_counter()
    try:
        eng = get_engine(engine, jobs=jobs, address=address, task_timeout=task_timeout, retries=retries)
    except EngineError as e:
        discard()
        raise ScanError(str(e)) from e
    if eng.name != "local":
        timings["engine_start"] = round(time.perf_counter() - t0, 3)
    try:
        codes = stage_codes(store)   # every stage's code, hashed once per scan
        from forensics.store.ingest import ingest_archive
        t0 = time.perf_counter()
        try:
            rep = ingest_archive(store, apath, jobs=jobs or 1, progress=progress, force=force, engine=eng,
                                 code=codes["ingest"])
        except Exception as e:  # noqa: BLE001
            from forensics.archive import ArchiveError
            if isinstance(e, (ArchiveError, OSError)):
                from forensics.cliutil import one_line
                discard()
                raise ScanError(one_line(str(e) if isinstance(e, ArchiveError) else f"cannot read archive {archive}: {e}")) from e
            raise
        timings["ingest"] = round(time.perf_counter() - t0, 3)
        ingest_info = rep.to_dict() if hasattr(rep, "to_dict") else {"run_ids": list(rep.run_ids)}
        run_ids = list(rep.run_ids)
        if not run_ids:   # an empty or wrong folder: a usage error, and nothing left behind
            discard()
            raise ScanError(no_runs_message(archive, ingest_info.get("skipped_folders")))
        # the verdicts and resume state of runs no longer in the store
        store.con.execute("delete from verdicts where run_id not in (select run_id from runs)")
        store.con.execute("delete from stage_runs where run_id not in (select run_id from runs)")
        resume = Resume.load(store, codes)

        analyzers = [n for n, _, _ in ANALYZER_MODULES if n != "replay" or replay]
        t0 = time.perf_counter()
        store, cov = run_analyzers(store, run_ids, replay, jobs or 1, progress, db_path, engine=eng, force=force,
                                   resume=resume)
        eng.close()   # a Ray the engine started is stopped before the report pool forks
        timings["analyze"] = round(time.perf_counter() - t0, 3)
        timings.update({f"analyze.{k}": v for k, v in cov.get("timings", {}).items()})
        t0 = time.perf_counter()
        # the verdict: its inputs are every analyzer's output, the coverage the pipeline says of the
        # run (written with it) and the annotation file
        resume.outputs["coverage"] = coverage_state(run_ids, cov)
        resume.outputs["annotation"] = annotation_digests(store, run_ids, annotations)
        vfps = R.stage_fingerprints(R.VERDICT, run_ids, resume.outputs, codes["verdict"],
                                    options="analyzers=" + ",".join(analyzers))
        done = {r["run_id"]: r["input_fingerprint"] for r in store.query("select run_id, input_fingerprint from verdicts")}
        todo = [r for r in run_ids if force or done.get(r) != vfps[r] or resume.stored.get((r, "verdict"), (None,))[0] != vfps[r]]
        if todo:
            write_coverage(store, todo, cov)
            V.adjudicate(store, todo, annotations=annotations)
            # a run some worker never finished (died, timed out) keeps no fingerprint: the next scan redoes it
            lost = eng.unfinished()
            vdone = {r: None if r in lost else vfps[r] for r in todo}
            now = datetime.now(timezone.utc)
            store.update_runs("verdicts", ["input_fingerprint", "adjudicated_at"], [(r, vdone[r], now) for r in todo])
            resume.record(store, R.VERDICT, vdone)
        timings["adjudicate"] = round(time.perf_counter() - t0, 3)
        touched = set(todo).union(*cov["todo"].values()) if cov["todo"] else set(todo)
        analyzed = [r for r in run_ids if r in touched]
        skipped = [r for r in run_ids if r not in touched]

        cur = store.con.execute("select v.*, r.problem, r.harness, r.run_name from verdicts v join runs r using (run_id) "
                                "where run_id in (select unnest(?::VARCHAR[])) order by run_id", [run_ids])
        vrows = VerdictRows([d[0] for d in cur.description], cur.fetchall())
        flagged = [v["run_id"] for v in vrows if v["verdict"] in V.FLAG_VERDICTS]
        disagree = [v["run_id"] for v in vrows if (v.get("archived") or {}).get("counts", {}).get("disagree")]
        res = ScanResult(archive=str(apath), out=outp if reports else None, db=db_path, run_ids=run_ids,
                         analyzed=analyzed, skipped=skipped, verdicts=vrows,
                         coverage={"ran": cov["ran"], "missing": cov["missing"], "skipped": cov["skipped"],
                                   "failed": {a: len(r) for a, r in cov["failed"].items()}},
                         ingest=ingest_info, timings=timings, flagged=flagged, disagreements=disagree,
                         engine=eng.report(run_ids), archive_identity=ident)
        res.unreadable = unreadable(store, run_ids, ingest_info.get("truncated"))
        res.stages = {"ingest": len(rep.ingested), **{a: len(cov["todo"].get(a, [])) for a in analyzers},
                      "verdict": len(todo)}
        res.exit_code = EXIT_FLAGGED if strict and (flagged or disagree) else EXIT_OK
        if res.unreadable.get("truncated"):
            res.exit_code = EXIT_USAGE   # as tar and unzip: the runs before the cut are reported, the exit says it
        if reports:
            t0 = time.perf_counter()
            from forensics.report import plot_runs, write_reports
            from forensics.report.html import run_page_names
            folder.expect(outp, ident, run_page_names(run_ids))
            plots = plot_runs(store, run_ids)
            resume.outputs["plot"] = {r: str(int(r in plots)) for r in run_ids}
            # (the folder is an input: a store scanned into two folders in turn re-renders each's pages)
            rfps = R.stage_fingerprints(R.REPORT, run_ids, resume.outputs, codes["report"],
                                        whole=R.reads_all_digest(store, R.REPORT), options=f"out={outp.resolve()}")
            redo = set(resume.todo("report", rfps, force))
            eng.fit(len(redo))   # --jobs auto: the pages to render decide
            rendered: list[str] = []
            res.paths = write_reports(store, outp, run_ids, rerender=redo, progress=progress,
                                      jobs=jobs or (eng.jobs if eng.name == "local" else 1),
                                      scan_info=res.to_dict(), png=plots, rendered=rendered)
            got = set(rendered)
            resume.record(store, R.REPORT, {r: rfps[r] if r in got else None for r in redo | got}, with_output=False)
            res.stages["report"] = len(rendered)
            timings["report"] = round(time.perf_counter() - t0, 3)
        timings["total"] = round(time.perf_counter() - t_all, 3)
        if reports:
            from forensics.report.jsonout import write_scan_json
            write_scan_json(store, outp / "scan.json", run_ids, res.to_dict())
            folder.prune(outp, ident, run_page_names(run_ids))
        return res
    finally:
        eng.close()
        store.close()


def unreadable(store: Store, run_ids: Sequence[str], truncated: dict[str, Any] | None = None,
               per_run: int = 3) -> dict[str, Any]:
    """What the ingest could not read, per run of this scan: {"parse_errors": N, "runs": [{"run_id",
    "n", "first": the first `per_run` rows (source, line, reason, detail)}] (most first), "truncated":
    the archive's truncation (IngestReport.truncated) or None}.  `forensics query parse-errors`
    lists every row."""
    rows = store.query(
        "select run_id, source, line, reason, detail, count(*) over (partition by run_id) as n, "
        "row_number() over (partition by run_id order by source, line nulls first, reason) as k "
        "from parse_errors where run_id in (select unnest(?::VARCHAR[])) qualify k <= ? order by n desc, run_id, k",
        [list(run_ids), per_run]) if run_ids else []
    runs: dict[str, dict[str, Any]] = {}
    for r in rows:
        e = runs.setdefault(r["run_id"], {"run_id": r["run_id"], "n": r["n"], "first": []})
        e["first"].append({k: r[k] for k in ("source", "line", "reason", "detail")})
    return {"parse_errors": sum(e["n"] for e in runs.values()), "runs": list(runs.values()), "truncated": truncated}


def unreadable_lines(u: dict[str, Any], db: str, shown: int = 5) -> list[str]:
    """The end of a scan's summary: what was unreadable, per run, and the query that lists it all.
    (A truncated archive is also said on stderr, scan_cmd.)"""
    runs = u.get("runs") or []
    if not runs:
        return []
    out = [f"unreadable: {u['parse_errors']} parse error(s) in {len(runs)} run(s) (the rest of each run's "
           "evidence was read):"]
    for e in runs[:shown]:
        f = e["first"][0]
        where = (f["source"] or "-") + (f":{f['line']}" if f.get("line") is not None else "")
        detail = " ".join(str(f.get("detail") or "").split())
        detail = detail if len(detail) <= 100 else detail[:99] + "…"
        out.append(f"  {e['run_id']}  {e['n']}  {where} {f['reason']}" + (f": {detail}" if detail else "")
                   + (f" (+{e['n'] - 1} more)" if e["n"] > 1 else ""))
    if len(runs) > shown:
        out.append(f"  ... and {len(runs) - shown} more run(s)")
    q = "forensics query parse-errors" + (f" --db {db}" if db != ":memory:" else "")
    out.append(f"  all of them: {q} [--run RUN_ID]")
    return out


# ---------------------------------------------------------------------------------------------
def key_findings(store: Store, run_id: str, limit: int = 3) -> str:
    return key_findings_of(store, [run_id], limit).get(run_id, "")


def key_findings_of(store: Store, run_ids: Sequence[str], limit: int = 3) -> dict[str, str]:
    """{run_id: its `limit` most severe finding rules (critical, high, medium; by severity, then
    rule), comma-separated}, in one query for all the runs (one per run scanned the findings once a run)."""
    rows = store.query(
        "select run_id, rule, row_number() over (partition by run_id order by s, rule) as k from ("
        " select run_id, rule, min(case severity when 'critical' then 0 when 'high' then 1 else 2 end) as s "
        " from findings where analyzer <> 'pipeline' and severity in ('critical', 'high', 'medium') "
        " and run_id in (select unnest(?::VARCHAR[])) group by run_id, rule) qualify k <= ? order by run_id, k",
        [list(run_ids), limit])
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["run_id"], []).append(r["rule"])
    return {rid: ", ".join(rules) for rid, rules in out.items()}


VERDICT_STYLE = {"clean": {"fg": "green"}, "unknown": {"fg": "yellow"}}


def summary_table(res: ScanResult, colour: bool = False) -> str:
    """The scan's table: one row per run, its id whole (it is what `--run` and the report's file
    names take; a terminal narrower than the row wraps or cuts it, --json has it too), key findings
    cut at 60 characters; then the counts, what was unreadable and where the report is.  `colour`:
    verdicts styled (flagged red, clean green, unknown yellow), for a terminal (cliutil.colour)."""
    from forensics.cliutil import style
    rows = [("run", "problem", "harness", "verdict", "publish", "key findings")]
    store = Store(res.db, read_only=True) if res.db != ":memory:" else None
    try:
        kfs = key_findings_of(store, [v["run_id"] for v in res.verdicts]) if store else {}
        for v in res.verdicts:
            kf = kfs.get(v["run_id"], "")
            rows.append((v.get("run_name") or v["run_id"], v.get("problem") or "", v.get("harness") or "",
                         v["verdict"], V._fmt(v["publish_grade"]), kf))
    finally:
        if store:
            store.close()
    caps = (None, None, None, None, None, 60)   # only the key findings are cut
    widths = [min(max(len(str(r[i])) for r in rows), cap or 10**6) for i, cap in enumerate(caps)]

    def cut(s, w):
        s = str(s)
        return s if len(s) <= w else s[: w - 1] + "…"

    def how(i, k, cell):
        if k == 0 or i != 3:
            return None
        return {"fg": "red"} if cell in V.FLAG_VERDICTS else VERDICT_STYLE.get(cell)
    lines = ["  ".join(style(cut(c, w).ljust(w), how(i, k, c), colour) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for k, r in enumerate(rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    counts: dict[str, int] = {}
    for v in res.verdicts:
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    lines.append("")
    lines.append(f"{len(res.run_ids)} runs ({len(res.analyzed)} analysed, {len(res.skipped)} unchanged): "
                 + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    if res.coverage.get("missing") or res.coverage.get("failed"):
        lines.append("analyzers missing: " + ", ".join(res.coverage.get("missing", {})) +
                     ("; failed: " + ", ".join(f"{a} ({n} runs)" for a, n in res.coverage["failed"].items())
                      if res.coverage.get("failed") else "") + " - their fields are 'unknown' (fail closed)")
    if res.disagreements:
        lines.append(f"{len(res.disagreements)} run(s) disagree with their archived verdict")
    lines += unreadable_lines(res.unreadable, res.db)
    from forensics.store.ingest import skipped_lines
    lines += skipped_lines(res.ingest.get("skipped_folders"), res.db)
    if res.out:
        lines.append(f"report: {res.out / 'index.html'}  store: {res.db}")
    return "\n".join(lines)


@click.command("scan")
@click.argument("archive", type=click.Path(exists=False))
@click.option("--out", "out", default="report", show_default=True, type=click.Path(file_okay=False),
              help="Report directory.")
@click.option("--db", default=None, type=click.Path(dir_okay=False), help="DuckDB store (default: OUT/audit.duckdb).")
@click.option("--replay", is_flag=True,
              help="Replay every run's solution on the GPU (forensics.replay; needs the 'replay' extra).")
@click.option("--annotations", type=click.Path(exists=False, file_okay=False), default=None,
              help="Directory of auditors' annotation YAML (<run_id>.yaml) to confirm or refute.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, show_default="auto",
              help="Worker processes (ingest, per-run analyzers, reports). Default: one process for fewer than "
                   f"{AUTO_MIN_RUNS} runs to analyse, else one per CPU (at most {AUTO_MAX_JOBS}); with --engine ray "
                   "and no --address, the CPUs of the local Ray (default 1).")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where ingest parsing, per-run analyzers and replays run: local processes, or Ray tasks "
                   "(pip install 'kernel-forensics[ray]').")
@click.option("--address", default=None, metavar="auto|HOST:PORT",
              help="Ray cluster to use with --engine ray: 'auto' or HOST:PORT (default: start a local Ray).")
@click.option("--task-timeout", type=float, default=None, metavar="SECONDS",
              help="Seconds one Ray task (a chunk of runs, one replay) may run before it is killed [1800].")
@click.option("--retries", type=int, default=None, help="Re-runs of a Ray task whose worker died [1].")
@click.option("--json", "as_json", is_flag=True, help="Print the scan result as JSON instead of the table.")
@click.option("--strict", is_flag=True, help="Exit 1 if any run is flagged or disagrees with its archived verdict.")
@click.option("--force", is_flag=True, help="Redo every stage (ingest, analyzers, verdict, report) for every run, "
              "even where its fingerprint is unchanged.")
@click.option("--replace", is_flag=True,
              help="OUT (or --db) holds another archive's report: remove the files this tool wrote there first "
                   "(nothing else), then scan.")
@click.option("--progress/--no-progress", default=True, help="Progress bars on stderr (only when it is a terminal).")
def scan_cmd(archive, out, db, replay, annotations, jobs, engine, address, task_timeout, retries, as_json, strict,
             force, replace, progress):
    """Scan ARCHIVE: ingest, analyse, (replay), adjudicate and report every run.

    Writes OUT/index.html, OUT/runs/<run_id>.html, OUT/annotations/<run_id>.yaml, OUT/scan.json and
    OUT/audit.duckdb, and prints a table of the runs, then what could not be read (parse errors
    per run; the query that lists them).  OUT belongs to one archive: scanning another into it
    exits 2 unless --replace.  Exit codes: 0 ok; 1 with --strict when any run is flagged or
    disagrees with its archived verdict; 2 usage or input error: no archive or no run in it, an
    --out or --db that cannot be written, --replay without torch, or an archive that ends early (a
    truncated .tar.gz: the runs before the cut are scanned and reported, as tar exits 2 after
    extracting what it could).  --json adds per-run timings with the node and GPU that ran each
    stage (engine.runs).
    """
    import contextlib
    from forensics.cliutil import InputError, colour, progress_on
    try:
        # stdout is the result's alone: whatever prints during the scan (Ray's notices of a
        # worker that died, printed on sys.stdout by its driver thread) goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            res = scan(archive, out=out, db=db, replay=replay, annotations=annotations, jobs=jobs, strict=strict,
                       progress=progress_on(progress and not as_json), force=force, engine=engine, address=address,
                       task_timeout=task_timeout, retries=retries, replace=replace)
    except ScanError as e:
        raise InputError(str(e)) from e
    if as_json:
        d = res.to_dict()
        d["verdicts"] = [{k: v.get(k) for k in ("run_id", "problem", "harness", *V.FIELDS)} for v in res.verdicts]
        d["engine"] = res.engine
        click.echo(orjson.dumps(d, default=str, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(summary_table(res, colour=colour()))
    if res.unreadable.get("truncated"):   # exit 2 (as tar), said last on stderr, as click says its errors
        from forensics.store.ingest import truncation_message
        click.echo("Error: " + truncation_message(res.unreadable["truncated"]), err=True)
    sys.exit(res.exit_code)
