"""`forensics bench fuzz`: mutate every field of every transcript format, then ingest and scan, and
check that bad input loses nothing.

    forensics bench fuzz                         # the bundled fixture, 4 rounds
    forensics bench fuzz --rounds 20 --seed 7 --json
    forensics bench fuzz --runs 12 --rounds 1    # a small sample (what the test runs)

Each round copies the archive (default: corpus/fixtures/archive, every transcript format the
ingest reads) into a work folder and rewrites every transcript source of every run: each JSON line
is mutated (with probability --rate) at one of its fields, chosen round-robin over all the line's
field paths (keys and list items at any depth) so that successive rounds reach every field, with
one of the classes below, also chosen round-robin; text lines get the byte-level classes.  Each
run's result.json gets one mutated field too.  Classes:

  value:  lone_surrogate (a "\\udXXX" escape in a value or key), huge_int (2^63, 2^64, 10^30,
          -2^63 - 1 ...), negative_int (-1, -2^63), wrong_type (number, list, object, bool, NaN, 1e308
          where something else belongs), null, deep_nesting (300 or 3,000 levels), long_string
          (--long-bytes characters)
  bytes:  invalid_utf8 (bytes 0xff 0xfe inside a string), truncation (the line cut short)
  file:   bom (a UTF-8 BOM before line 1), gzip_truncation (the source gzip-compressed, cut in half),
          two_line_prefix (a first line that is not JSON and a second that is a JSON string before
          the transcript: it once made the whole file one unknown multi-line document)
  names:  non_utf8_name/file (a file named with bytes that are not UTF-8 added to the run folder),
          non_utf8_name/run_folder (the run folder itself renamed with such bytes): one such name
          once aborted the whole scan

Then the round's archive is scanned (`forensics scan` with reports; ingest, every analyzer,
adjudication, report pages, scan.json) into a fresh store, and checked:

* every non-blank line of every source the ingest reads is in `records` or in `parse_errors`
  (lines after a reported gzip/read failure count as reported);
* no run is a stub: every run has its runs row with a transcript format and no `internal`
  parse error (a parse crash or a store refusal);
* every analyzer ran for every run (the pipeline's analysis-coverage finding lists none failed
  or missing), and every run has its report page and annotation file;
* every name that is not UTF-8 has its `parse_errors` row `non_utf8_name` (a renamed run folder is
  found under its escaped name).

Prints lines tried, fields tried, runs lost, lines lost and analyzers failed; exits 1 when any of
the last three is not 0.  This is a robustness benchmark: its figures are counts, not timings.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import orjson

VALUE_CLASSES = ("lone_surrogate", "huge_int", "negative_int", "wrong_type", "null", "deep_nesting", "long_string")
BYTE_CLASSES = ("invalid_utf8", "truncation")
FILE_CLASSES = ("bom", "gzip_truncation", "two_line_prefix")
TWO_LINE_PREFIX = b'{"cut": \n"a json string"\n'
NAME_CLASSES = ("non_utf8_name/file", "non_utf8_name/run_folder")
CLASSES = VALUE_CLASSES + BYTE_CLASSES
MAX_PATHS = 400          # field paths enumerated per line (a huge tool output has thousands)
MAX_DEPTH = 16

HUGE_INTS = (2 ** 63, 2 ** 64, 2 ** 64 - 1, 10 ** 30, -(2 ** 63) - 1, -(10 ** 30), 2 ** 31, -(2 ** 31) - 1)
NEG_INTS = (-1, -(2 ** 63), -(2 ** 31))
WRONG = (5, -7, 2 ** 40, 0.5, 1e308, float("nan"), float("inf"), True, False, "text", "", [1, "a", None],
         [], {"k": [1, {"x": None}]}, {}, ["uv", "run", {"x": 1}])
SURROGATES = ("\ud83d", "\udc00", "\udfff", "\ud800x")


def default_archive() -> Path:
    from devkit.paths import FIXTURE_ARCHIVE
    return FIXTURE_ARCHIVE


# --------------------------------------------------------------------------------------- mutation
def field_paths(o: Any, limit: int = MAX_PATHS) -> list[tuple]:
    """Every key / list-item path of a JSON value (depth-first, at most `limit`)."""
    out: list[tuple] = []

    def walk(x: Any, path: tuple) -> None:
        if len(out) >= limit or len(path) > MAX_DEPTH:
            return
        if isinstance(x, dict):
            for k, v in x.items():
                out.append(path + (k,))
                walk(v, path + (k,))
        elif isinstance(x, list):
            for i, v in enumerate(x[:50]):
                out.append(path + (i,))
                walk(v, path + (i,))
    walk(o, ())
    return out


@dataclass
class Nested:
    """A value wrapped in `depth` alternating lists / objects, written out by _dumps."""
    value: Any
    depth: int
    phase: int

    def text(self) -> bytes:
        opens = [b"[" if (i + self.phase) % 2 else b'{"n":' for i in range(self.depth)]
        closes = [b"]" if o == b"[" else b"}" for o in reversed(opens)]
        return b"".join(opens) + _dumps(self.value) + b"".join(closes)


def mutate_value(cls: str, old: Any, rng: random.Random, long_bytes: int) -> Any:
    if cls == "lone_surrogate":
        s = old if isinstance(old, str) else str(old)
        i = rng.randrange(len(s) + 1)
        return s[:i] + rng.choice(SURROGATES) + s[i:]
    if cls == "huge_int":
        return rng.choice(HUGE_INTS)
    if cls == "negative_int":
        return rng.choice(NEG_INTS)
    if cls == "wrong_type":
        choices = [w for w in WRONG if type(w) is not type(old)] or list(WRONG)
        return rng.choice(choices)
    if cls == "null":
        return None
    if cls == "deep_nesting":  # spliced in as text by _dumps (json.dumps itself stops at ~1000 levels)
        return Nested(old, rng.choice((300, 3000)), rng.randrange(2))
    if cls == "long_string":
        return ("x" * 63 + "\n") * (long_bytes // 64)
    raise ValueError(cls)


def set_path(o: Any, path: tuple, cls: str, rng: random.Random, long_bytes: int) -> Any:
    """`o` with the value at `path` mutated by `cls` (lone_surrogate also renames the key)."""
    if not path:
        return mutate_value(cls, o, rng, long_bytes)
    parent = o
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if cls == "lone_surrogate" and isinstance(parent, dict) and rng.randrange(2):
        v = parent.pop(last)
        parent[mutate_value(cls, last, rng, long_bytes)] = v
    else:
        parent[last] = mutate_value(cls, parent[last], rng, long_bytes)
    return o


_MARK = "\u0000nested\u0000"


def _dumps(o: Any) -> bytes:
    found: list[Nested] = []

    def default(x):
        if isinstance(x, Nested):
            found.append(x)
            return _MARK
        raise TypeError(type(x).__name__)
    out = json.dumps(o, separators=(",", ":"), ensure_ascii=True, allow_nan=True, default=default).encode()
    mark = json.dumps(_MARK).encode()
    for n in found:
        out = out.replace(mark, n.text(), 1)
    return out


def mutate_line(raw: bytes, base: int, rnd: int, rng: random.Random, long_bytes: int, seen: set) -> tuple[bytes, str]:
    """The mutation of a line in round `rnd`: round after round the field moves to the line's next
    field path, and the class to the next class (`base` staggers lines)."""
    try:
        o = orjson.loads(raw)
    except orjson.JSONDecodeError:
        o = None
    if not isinstance(o, (dict, list)):  # a text line: byte-level classes only
        cls = BYTE_CLASSES[(base + rnd) % len(BYTE_CLASSES)]
        seen.add(("<text>", cls))
        return mutate_bytes(cls, raw, rng), cls
    paths = field_paths(o)
    n = max(1, len(paths))
    cls = CLASSES[(base * 3 + rnd + (base + rnd) // n) % len(CLASSES)]
    if cls in BYTE_CLASSES:
        seen.add(("<line>", cls))
        return mutate_bytes(cls, raw, rng), cls
    path = paths[(base + rnd) % n] if paths else ()
    seen.add((_shape(o, path), cls))
    return _dumps(set_path(o, path, cls, rng, long_bytes)), cls


def _shape(o: Any, path: tuple) -> str:
    """The field a path names, list indices folded: ('message', 'content', '[]', 'input', 'command')."""
    t = o.get("type") if isinstance(o, dict) else None
    return f"{t if isinstance(t, str) else ''}:" + ".".join("[]" if isinstance(p, int) else str(p) for p in path)


def mutate_bytes(cls: str, raw: bytes, rng: random.Random) -> bytes:
    if cls == "invalid_utf8":
        i = raw.find(b'":"', rng.randrange(max(1, len(raw))))
        i = raw.find(b'":"') if i < 0 else i
        i = i + 3 if i >= 0 else rng.randrange(len(raw) + 1)
        return raw[:i] + b"\xff\xfe" + raw[i:]
    if cls == "truncation":
        return raw[: rng.randrange(max(1, len(raw)))]
    raise ValueError(cls)


@dataclass
class SourcePlan:
    """What the check expects of one source: its non-blank line numbers (of the whole content, even
    when the file was cut) and whether a read failure is expected."""
    lines: list[int]
    damaged: bool = False


@dataclass
class RoundStats:
    lines_tried: int = 0
    lines_checked: int = 0
    classes: Counter = field(default_factory=Counter)
    fields: set = field(default_factory=set)
    plans: dict[str, dict[str, SourcePlan]] = field(default_factory=dict)  # run_path -> source -> plan
    names: dict[str, int] = field(default_factory=dict)   # run_path (as the scan shows it) -> non-UTF-8 names


def _nonblank(data: bytes) -> list[int]:
    return [i for i, ln in enumerate(data.split(b"\n"), 1) if ln and not ln.isspace()]


def fuzz_archive(src: Path, dest: Path, rnd: int, seed: int, rate: float, long_bytes: int,
                 runs: int | None = None) -> RoundStats:
    """Copy `src` to `dest` with every transcript source (and result.json) of every run mutated."""
    from forensics.archive.discover import discover_runs
    from forensics.archive.source import open_source
    from forensics.store.ingest import transcript_sources
    rng = random.Random(f"{seed}:{rnd}")
    shutil.copytree(src, dest, symlinks=True)
    st = RoundStats()
    found = discover_runs(open_source(dest))
    if runs is not None:
        found = pick_runs(found, runs)
        keep = {r.run_path for r in found}
        for r in discover_runs(open_source(dest)):
            if r.run_path not in keep:
                shutil.rmtree(dest / r.run_path)
    for ri, run in enumerate(found):
        files = run.rel_files()
        plans: dict[str, SourcePlan] = {}
        for si, source in enumerate(transcript_sources(files)):
            p = dest / run.run_path / source
            data = p.read_bytes()
            was_gz = data[:2] == b"\x1f\x8b"
            if was_gz:
                data = gzip.decompress(data)
            lines = data.split(b"\n")
            out = []
            for li, raw in enumerate(lines):
                if raw and not raw.isspace() and rng.random() < rate:
                    new, cls = mutate_line(raw, li * 31 + ri * 7 + si, rnd, rng, long_bytes, st.fields)
                    st.lines_tried += 1
                    st.classes[cls] += 1
                    out.append(new)
                else:
                    out.append(raw)
            data = b"\n".join(out)
            k = (rnd + ri + si) % 8  # a quarter of the sources get a file-level class
            file_cls = FILE_CLASSES[k] if k < len(FILE_CLASSES) else None
            if file_cls == "bom":
                data = b"\xef\xbb\xbf" + data
                st.classes["bom"] += 1
            elif file_cls == "two_line_prefix":
                data = TWO_LINE_PREFIX + data
                st.classes["two_line_prefix"] += 1
            plan = SourcePlan(_nonblank(data))
            if file_cls == "gzip_truncation" or was_gz:
                z = gzip.compress(data)
                if file_cls == "gzip_truncation":
                    z = z[: max(12, len(z) // 2)]
                    plan.damaged = True
                    st.classes["gzip_truncation"] += 1
                data = z
            p.write_bytes(data)
            plans[source] = plan
            st.lines_checked += len(plan.lines)
        if "result.json" in files:
            p = dest / run.run_path / "result.json"
            try:
                res = json.loads(p.read_bytes())
            except ValueError:
                res = None
            if isinstance(res, dict) and res:
                paths = field_paths(res)
                path = paths[(rnd * 13 + ri) % len(paths)]
                cls = VALUE_CLASSES[(rnd + ri) % len(VALUE_CLASSES)]
                p.write_bytes(_dumps(set_path(res, path, cls, rng, long_bytes)))
                st.fields.add(("result.json:" + ".".join(map(str, path)), cls))
                st.classes[f"result.json/{cls}"] += 1
        run_path = mutate_name(dest, run, (rnd + ri) % 4, st)
        st.plans[run_path] = plans
    return st


def mutate_name(dest: Path, run: Any, k: int, st: RoundStats) -> str:
    """Give a quarter of the runs a file whose name is not UTF-8 and rename another quarter's own
    folder with such bytes; returns the run's path as the scan will show it."""
    from forensics.archive.source import shown_name
    if not run.run_path or k not in (1, 3):
        return run.run_path
    folder = os.fsencode(dest / run.run_path)
    if k == 1:
        with open(os.path.join(folder, b"notes-\xff\xfe.txt"), "wb") as f:
            f.write(b"scratch\n")
        st.classes[NAME_CLASSES[0]] += 1
        st.names[run.run_path] = 1
        return run.run_path
    name = os.fsencode(run.name)
    slug = run.parsed.model_slug.encode() if run.parsed and run.parsed.model_slug else b""
    i = name.find(b"_" + slug + b"_") + 1 + len(slug) if slug and b"_" + slug + b"_" in name else len(name)
    new = name[:i] + b"\xe9" + name[i:]           # Latin-1 'é' in the model slug: not UTF-8
    os.rename(folder, os.path.join(os.path.dirname(folder), new))
    parent = run.run_path.rpartition("/")[0]
    shown = (parent + "/" if parent else "") + shown_name(os.fsdecode(new))
    st.classes[NAME_CLASSES[1]] += 1
    st.names[shown] = 1
    return shown


def pick_runs(found: list, n: int) -> list:
    """`n` runs covering as many transcript formats (by harness and source) as possible."""
    from forensics.store.ingest import transcript_sources
    by: dict[tuple, list] = {}
    for r in found:
        key = (r.parsed.harness if r.parsed else None, tuple(s.rsplit("/", 1)[-1] for s in transcript_sources(r.rel_files())))
        by.setdefault(key, []).append(r)
    out: list = []
    while len(out) < n and any(by.values()):
        for k in sorted(by, key=str):
            if by[k] and len(out) < n:
                out.append(by[k].pop(0))
    return sorted(out, key=lambda r: r.run_path)


# --------------------------------------------------------------------------------------- checks
def check_round(archive: Path, out: Path, st: RoundStats, jobs: int) -> dict[str, Any]:
    from forensics.pipeline import scan
    from forensics.report.html import run_page_names
    from forensics.store.db import Store, loads_json
    res = scan(archive, out=out, jobs=jobs, progress=False)
    problems: list[str] = []
    runs_lost = lines_lost = analyzers_failed = internal_errors = names_unreported = 0
    store = Store(res.db, read_only=True)
    try:
        runs = {r["run_path"]: r for r in store.query("select run_id, run_path, transcript_format, n_records from runs")}
        for run_path, plans in st.plans.items():
            r = runs.get(run_path)
            if r is None:
                runs_lost += 1
                problems.append(f"{run_path}: no runs row")
                continue
            rid = r["run_id"]
            internal = store.query("select reason, detail from parse_errors where run_id = ? and reason in "
                                   "('internal', 'internal_error')", [rid])
            if r["transcript_format"] is None or r["n_records"] is None:
                runs_lost += 1
                problems.append(f"{rid}: stub run ({internal[:1]})")
            elif internal:
                internal_errors += len(internal)
                problems.append(f"{rid}: internal error(s) {internal[:2]}")
            if st.names.get(run_path) and not store.scalar(
                    "select count(*) from parse_errors where run_id = ? and reason = 'non_utf8_name'", [rid]):
                names_unreported += 1
                problems.append(f"{rid}: its name that is not UTF-8 has no parse_errors row")
            for source, plan in plans.items():
                have = {x[0] for x in store.con.execute(
                    "select line from records where run_id = ? and source = ? union "
                    "select line from parse_errors where run_id = ? and source = ? and line is not null",
                    [rid, source, rid, source]).fetchall()}
                fail = store.scalar("select min(line) from parse_errors where run_id = ? and source = ? and reason in "
                                    "('compressed', 'unreadable')", [rid, source])
                missing = [n for n in plan.lines if n not in have and not (fail is not None and n >= fail)]
                if plan.damaged and fail is None:
                    problems.append(f"{rid}/{source}: damaged gzip not reported")
                if missing:
                    lines_lost += len(missing)
                    problems.append(f"{rid}/{source}: {len(missing)} line(s) in neither records nor parse_errors "
                                    f"(first {missing[:5]})")
        for row in store.query("select run_id, data from findings where analyzer = 'pipeline' and rule = 'analysis-coverage'"):
            d = loads_json(row["data"]) or {}
            bad = {**(d.get("failed") or {}), **(d.get("missing") or {})}
            if bad:
                analyzers_failed += len(bad)
                problems.append(f"{row['run_id']}: analyzers failed {bad}")
        covered = {r[0] for r in store.con.execute("select run_id from findings where analyzer = 'pipeline' "
                                                   "and rule = 'analysis-coverage'").fetchall()}
        names = run_page_names(r["run_id"] for r in runs.values())
        for r in runs.values():
            if r["run_id"] not in covered:
                analyzers_failed += 1
                problems.append(f"{r['run_id']}: no analysis-coverage finding")
            n = names[r["run_id"]]
            if not (out / "runs" / f"{n}.html").is_file() or not (out / "annotations" / f"{n}.yaml").is_file():
                problems.append(f"{r['run_id']}: report page or annotation missing")
        if not (out / "scan.json").is_file() or not (out / "index.html").is_file():
            problems.append("scan.json or index.html missing")
        n_perr = store.scalar("select count(*) from parse_errors")
        reasons = dict(store.con.execute("select reason, count(*) from parse_errors group by 1 order by 2 desc").fetchall())
    finally:
        store.close()
    return {"runs": len(res.run_ids), "runs_lost": runs_lost, "lines_lost": lines_lost, "internal_errors": internal_errors,
            "names_unreported": names_unreported,
            "analyzers_failed": analyzers_failed, "parse_errors": n_perr, "parse_error_reasons": reasons,
            "problems": problems, "scan_s": res.timings.get("total")}


def run_fuzz(archive: Path, work: Path, rounds: int, seed: int, rate: float = 0.5, long_bytes: int = 100_000,
             runs: int | None = None, jobs: int = 1, keep: bool = False, log=None) -> dict[str, Any]:
    total: dict[str, Any] = {"archive": str(archive), "rounds": rounds, "seed": seed, "rate": rate, "runs_per_round": None,
                             "lines_tried": 0, "lines_checked": 0, "fields_tried": 0, "runs_lost": 0, "lines_lost": 0,
                             "internal_errors": 0, "names_unreported": 0,
                             "analyzers_failed": 0, "parse_errors": 0, "classes": Counter(), "problems": []}
    fields: set = set()
    t0 = time.perf_counter()
    for rnd in range(rounds):
        d = work / f"round{rnd}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        st = fuzz_archive(archive, d / "archive", rnd, seed, rate, long_bytes, runs)
        r = check_round(d / "archive", d / "out", st, jobs)
        fields |= st.fields
        total["runs_per_round"] = r["runs"]
        total["lines_tried"] += st.lines_tried
        total["lines_checked"] += st.lines_checked
        total["classes"].update(st.classes)
        for k in ("runs_lost", "lines_lost", "internal_errors", "names_unreported", "analyzers_failed", "parse_errors"):
            total[k] += r[k]
        total["problems"] += [f"round {rnd}: {p}" for p in r["problems"]]
        if log:
            log(f"round {rnd}: {st.lines_tried} lines tried, {r['runs']} runs, runs lost {r['runs_lost']}, "
                f"lines lost {r['lines_lost']}, analyzers failed {r['analyzers_failed']} ({r['scan_s']} s scan)")
        if not keep:
            shutil.rmtree(d, ignore_errors=True)
    total["fields_tried"] = len(fields)
    total["classes"] = dict(sorted(total["classes"].items()))
    total["seconds"] = round(time.perf_counter() - t0, 1)
    return total


@click.command("fuzz")
@click.option("--archive", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Archive to mutate (default: the bundled fixture, corpus/fixtures/archive).")
@click.option("--rounds", default=4, show_default=True, help="Mutated copies scanned (the size knob; each round "
              "moves every line to its next field and class).")
@click.option("--runs", default=None, type=int, help="Use only this many runs, covering as many formats as possible.")
@click.option("--rate", default=0.5, show_default=True, help="Fraction of lines mutated in each source.")
@click.option("--long-bytes", default=100_000, show_default=True, help="Length of the long_string class.")
@click.option("--seed", default=0, show_default=True, help="Seed of the mutations.")
@click.option("--jobs", "-j", default=1, show_default=True, help="Worker processes for each round's scan.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the mutated archives go (default: a temporary folder, removed).")
@click.option("--keep", is_flag=True, help="Keep each round's archive, store and report.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_fuzz(archive, rounds, runs, rate, long_bytes, seed, jobs, workdir, keep, as_json) -> None:
    """Mutate every field of every transcript format; check no line, run or analyzer is lost."""
    archive = archive or default_archive()
    tmp = None
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix="forensics-fuzz-")
        workdir = Path(tmp)
    try:
        res = run_fuzz(archive, workdir, rounds, seed, rate, long_bytes, runs, jobs, keep,
                       log=None if as_json else (lambda m: click.echo(m, err=True)))
    finally:
        if tmp and not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if as_json:
        click.echo(orjson.dumps(res, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(f"fuzz {res['archive']}: {res['rounds']} rounds x {res['runs_per_round']} runs, seed {res['seed']}, "
                   f"rate {res['rate']}, {res['seconds']} s")
        click.echo(f"lines tried: {res['lines_tried']}  (lines checked {res['lines_checked']}, "
                   f"distinct field/class pairs {res['fields_tried']})")
        click.echo("classes: " + ", ".join(f"{k}={v}" for k, v in res["classes"].items()))
        click.echo(f"runs lost: {res['runs_lost']}")
        click.echo(f"lines lost: {res['lines_lost']}")
        click.echo(f"analyzers failed: {res['analyzers_failed']}")
        click.echo(f"internal errors: {res['internal_errors']}")
        click.echo(f"names not UTF-8 unreported: {res['names_unreported']}")
        click.echo(f"parse_errors rows: {res['parse_errors']}")
        for p in res["problems"][:40]:
            click.echo(f"  {p}")
    if res["problems"]:
        raise SystemExit(1)
