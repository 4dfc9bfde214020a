"""What the archive recorded about a run beyond its transcript and runner logs, and the one place
that knows these record formats:

* the auditors' probe logs (``audit_*.log``, ``empirical_recompute_test*.log`` anywhere in the run
  folder; spec 2.5: ``key=value`` lines such as ``probe=unsampled_row_mutation``, ``result=FAIL``);
* the deck's hardware, the ``hardware:`` line of the frozen ``template_files/problem.yaml``;
* annotation YAML (in the run folder, or a directory of them given to ``forensics scan --annotations``).

The first two are parsed at ingest: `archived_rows` is called by forensics/store/ingest.py on the
bytes the ingest reads anyway (they are hashed for the ``files`` table from the same read) and
gives the rows of ``archived_probes`` and ``deck_hardware``, each citing its file and line, plus
the ``parse_errors`` rows of what could not be read (a log naming no probe or no result, a value
that is not a number, undecodable bytes, a file over the size bound: parsed up to the bound).
A bad record costs that record, never the run.  The verdict reads those tables (store queries in
forensics/verdict.py `load_facts`), never a file: a store adjudicates the same with its archive gone.

Annotation YAML stays read at adjudication (`find_annotation`, `annotation_from_run`), on purpose:
an annotation never feeds the decision, only the per-field agree / disagree comparison stored in
``verdicts.archived``; most annotations come from outside the archive (``--annotations DIR``, named
at scan time, read then, and hashed into the verdict's input fingerprint so a changed file re-decides
the run), and the in-run copy is read by the same code so the two sources compare alike; and its
values (YAML dates, nested quotes) are compared as YAML gives them, which a JSON column would change.
"""


from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from forensics.store.db import Store
from forensics.vocab import norm_probe

#: size bounds: a record over its bound is parsed up to the bound, with a `huge_document` parse error
PROBE_LOG_MAX = 4 << 20
PROBLEM_YAML_MAX = 1 << 20
FIELDS_MAX, FIELD_MAX = 100, 500   # archived_probes.fields keeps the first 100 keys, values clipped
DECK_PROBLEM_YAML = "template_files/problem.yaml"
ARCHIVED_PROBE_LOG = re.compile(r"(^|/)(audit_[A-Za-z0-9_]+|empirical_recompute_test[A-Za-z0-9_]*)\.log$")

#: a parse error: (line or None, reason, detail, excerpt)
Problem = tuple[int | None, str, str, str]


def read_run_text(store: Store, run_id: str, path: str, run: dict[str, Any] | None = None) -> str | None:
    """Read a file of the run through `forensics.archive.RunFiles` (read-only, any archive kind)."""
    from forensics.store.files import run_files  # RunFiles built from the store's files rows
    try:
        return run_files(store, run_id).read_text(path)
    except Exception:  # noqa: BLE001 - unreadable file is reported as None
        return None


def decode_record(data: bytes, limit: int, what: str) -> tuple[str, list[Problem]]:
    """Text of a small record file: at most `limit` bytes, undecodable bytes replaced (each case a problem)."""
    problems: list[Problem] = []
    if len(data) > limit:
        problems.append((None, "huge_document", f"{what} of {len(data)}+ bytes exceeds {limit} bytes; "
                         f"only the first {limit} bytes parsed", ""))
        data = data[:limit]
    try:
        return data.decode("utf-8"), problems
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        problems.append((line, "invalid_utf8", f"{what}: {e.reason} at byte {e.start}; bad bytes replaced",
                         data[max(0, e.start - 40):e.start + 40].decode("utf-8", "replace")))
        return data.decode("utf-8", "replace"), problems


def read_probe_log(text: str, path: str) -> tuple[dict[str, Any] | None, list[Problem]]:
    """An auditor's probe log as a replay_results-like row (probe as written, status pass|fail,
    n_bad, max_abs, source, the lines of `probe=` and of the result, every key's first value), and
    the problems found; the row is None if the log names no probe or no pass/fail result."""
    kv: dict[str, str] = {}
    at: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), 1):
        for tok in line.split():
            if "=" in tok:
                k, _, v = tok.partition("=")
                k = k.strip().lower()
                if k not in kv:
                    kv[k], at[k] = v.strip(), i
    probe = kv.get("probe")
    rkey = "result" if kv.get("result") else "status"
    res = (kv.get("result") or kv.get("status") or "").lower()
    if not probe or res not in ("fail", "failed", "pass", "passed", "ok"):
        why = "no probe= key" if not probe else f"no result=PASS/FAIL (result={res or 'absent'})"
        return None, [(at.get("probe") or at.get(rkey), "bad_probe_log", f"{path}: {why}; not a probe result",
                       text[:200])]
    problems: list[Problem] = []
    bad = kv.get("bad", "")
    head = bad.split("/")[0]
    n_bad = int(head) if head.isascii() and head.isdigit() and len(head) <= 18 else None
    if bad and n_bad is None:
        problems.append((at["bad"], "bad_field", f"{path}: bad={bad} is not a count; n_bad left NULL", bad[:200]))
    mkey = "max_abs_diff" if kv.get("max_abs_diff") else "max_abs"
    try:
        max_abs = float(kv.get("max_abs_diff") or kv.get("max_abs") or "nan")
    except ValueError:
        max_abs = None
        problems.append((at[mkey], "bad_field", f"{path}: {mkey}={kv[mkey]} is not a number; max_abs left NULL",
                         kv[mkey][:200]))
    return {"probe": probe, "status": "fail" if res.startswith("fail") else "pass", "n_bad": n_bad,
            "max_abs": None if max_abs != max_abs else max_abs, "source": path,
            "line": at["probe"], "result_line": at[rkey],
            "fields": {k: v[:FIELD_MAX] for k, v in list(kv.items())[:FIELDS_MAX]}}, problems


def parse_probe_log(text: str, path: str) -> dict[str, Any] | None:
    """`read_probe_log`'s row alone (None if the log names no probe or no result)."""
    return read_probe_log(text, path)[0]


def gpu_key(name: str | None) -> str | None:
    """Leaderboard GPU key of an nvidia-smi name (spec 3.5): SXM or HBM3 means H100_SXM."""
    if not name:
        return None
    n = str(name).upper()
    if "RTX PRO 6000" in n or "RTX_PRO_6000" in n:
        return "RTX_PRO_6000"
    if "H100" in n:
        return "H100_SXM" if ("SXM" in n or "HBM3" in n) else "H100"
    if "B200" in n:
        return "B200"
    if "H200" in n:
        return "H200"
    return n.replace(" ", "_")


_HW = re.compile(r"^hardware\s*:\s*['\"]?([A-Za-z0-9_ ]+?)['\"]?\s*(#.*)?$", re.M)


def parse_deck_hardware(text: str) -> tuple[str | None, int | None]:
    """(`hardware:` value as written, its line) of a problem.yaml; (None, None) if it has none."""
    m = _HW.search(text)
    if not m:
        return None, None
    return m.group(1).strip(), text.count("\n", 0, m.start()) + 1


def archived_rows(run_id: str, files: Mapping[str, Any], read: Callable[[str, int | None], bytes | None]
                  ) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """The ingest's part: rows of ``archived_probes`` and ``deck_hardware`` for one run, and its
    ``parse_errors`` rows (without run_id counts: the caller adds them).  `files` maps the run's
    relative paths to entries (``is_symlink``, ``size``); `read(rel, limit)` returns the bytes (None
    if unreadable: the caller has reported it).  Links are never followed (the `files` row records them)."""
    errors: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    hardware: list[dict[str, Any]] = []

    def load(rel: str, limit: int, what: str) -> str | None:
        e = files[rel]
        data = read(rel, limit + 1) if (e.size or 0) > limit else read(rel, None)
        if data is None:
            return None
        text, problems = decode_record(data, limit, what)
        for line, reason, detail, excerpt in problems:
            errors.append({"source": rel, "line": line, "reason": reason, "detail": detail, "excerpt": excerpt})
        return text

    seen: dict[tuple, str] = {}
    for rel in sorted(files):
        if getattr(files[rel], "is_symlink", False):
            continue
        if ARCHIVED_PROBE_LOG.search(rel):
            text = load(rel, PROBE_LOG_MAX, "probe log")
            if text is None:
                continue
            row, problems = read_probe_log(text, rel)
            for line, reason, detail, excerpt in problems:
                errors.append({"source": rel, "line": line, "reason": reason, "detail": detail, "excerpt": excerpt})
            if row is None:
                continue
            canon = norm_probe(row["probe"])
            key = (canon, row["status"], row["n_bad"], row["max_abs"])
            probes.append({"run_id": run_id, "path": rel, "line": row["line"], "result_line": row["result_line"],
                           "probe": canon, "probe_written": row["probe"], "status": row["status"],
                           "n_bad": row["n_bad"], "max_abs": row["max_abs"],
                           # the regrade copies scratch/ back into the workspace: the same log twice
                           "duplicate_of": seen.get(key), "fields": row["fields"]})
            seen.setdefault(key, rel)
        elif rel == DECK_PROBLEM_YAML:
            text = load(rel, PROBLEM_YAML_MAX, "problem.yaml")
            if text is None:
                continue
            hw, line = parse_deck_hardware(text)
            hardware.append({"run_id": run_id, "path": rel, "line": line, "hardware": hw, "gpu_key": gpu_key(hw)})
    return {"archived_probes": probes, "deck_hardware": hardware}, errors


_KV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*?)\s*$")


def parse_annotation_text(text: str) -> tuple[dict[str, Any], str | None]:
    """Parse an annotation YAML; on invalid YAML fall back to top-level `key: value` lines.

    Returns (fields, error) where error says the YAML was invalid and the fallback was used."""
    import yaml
    try:
        data = yaml.safe_load(text)
        if isinstance(data, dict):
            return data, None
        err = f"not a mapping ({type(data).__name__})"
    except yaml.YAMLError as e:
        err = f"invalid YAML: {str(e).splitlines()[0]}"
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith((" ", "\t", "-", "#")):
            continue
        m = _KV.match(line)
        if not m:
            continue
        k, v = m.group(1), m.group(2)
        v = re.sub(r"\s+#.*$", "", v).strip().strip("'\"")
        if v == "" or k in out:
            continue
        low = v.lower()
        out[k] = True if low == "true" else False if low == "false" else None if low in ("null", "~") else v
    return out, err


def find_annotation(run_name: str, dirs: Sequence[Path], listings: dict[str, list[str]] | None = None) -> Path | None:
    """`<run_name>.yaml` or `<run_name>_<suffix>.yaml` (also .yml) in any of `dirs`.  `listings`: a
    dict the caller keeps across the runs it looks up, which then holds each folder's sorted names,
    listed once (a glob per run listed the folder once a run: quadratic in runs)."""
    import bisect
    import fnmatch
    for d in dirs:
        if not d or not d.is_dir():
            continue
        for ext in (".yaml", ".yml"):
            p = d / f"{run_name}{ext}"
            if p.is_file():
                return p
        pat = f"{glob_escape(run_name)}_*.y*ml"
        if listings is None:
            cands = sorted(p for p in d.glob(pat) if p.is_file())
        else:
            names = listings.get(str(d))
            if names is None:
                names = listings[str(d)] = sorted(os.listdir(d))
            pre = f"{run_name}_"
            i = bisect.bisect_left(names, pre)
            cands = []
            while i < len(names) and names[i].startswith(pre):
                if fnmatch.fnmatchcase(names[i], pat) and (d / names[i]).is_file():
                    cands.append(d / names[i])
                i += 1
        if cands:
            return cands[0]
    return None


def glob_escape(s: str) -> str:
    return re.sub(r"([\[\]*?])", r"[\1]", s)


_ANNOTATION_FILES = ("(category = 'annotation' or ((path like '%.yaml' or path like '%.yml') and path not like '%/%')) "
                     "and path not like '%problem.yaml'")


def annotation_paths(store: Store, run_ids: Sequence[str]) -> dict[str, list[str]]:
    """{run_id: the paths of the annotation YAML files inside the run folder, sorted} for many runs
    in one query (`annotation_from_run`'s candidates; runs with none are absent)."""
    out: dict[str, list[str]] = {}
    for r in store.query(f"select run_id, path from files where run_id in (select unnest(?::VARCHAR[])) and "
                         f"{_ANNOTATION_FILES} order by run_id, path", [list(run_ids)]):
        out.setdefault(r["run_id"], []).append(r["path"])
    return out


def annotation_from_run(store: Store, run: dict[str, Any], paths: Sequence[str] | None = None
                        ) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """An annotation YAML inside the run folder (files table category 'annotation' or a .yaml at the
    root).  `paths`: its candidates when the caller has them (annotation_paths), else asked here."""
    if paths is None:
        paths = annotation_paths(store, [run["run_id"]]).get(run["run_id"], [])
    paths = sorted(paths)
    if not paths:
        return None, None, None
    text = read_run_text(store, run["run_id"], paths[0], run)
    if text is None:
        return None, paths[0], "unreadable"
    data, err = parse_annotation_text(text)
    return data, paths[0], err


__all__ = ["ARCHIVED_PROBE_LOG", "DECK_PROBLEM_YAML", "annotation_from_run", "annotation_paths", "archived_rows", "decode_record",
           "find_annotation", "glob_escape", "gpu_key", "parse_annotation_text", "parse_deck_hardware",
           "parse_probe_log", "read_probe_log", "read_run_text"]
