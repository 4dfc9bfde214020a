"""What the archive recorded about a run beyond its transcript, read through the store's files
(read-only, any archive kind): the auditors' probe logs, the deck's hardware in the frozen
problem.yaml, annotation YAML (in the run folder or a directory of them).  The verdict's facts come
from here; the verdict itself reads no file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forensics.analyze.findings import norm_probe
from forensics.store.db import Store


def read_run_text(store: Store, run_id: str, path: str, run: dict[str, Any] | None = None) -> str | None:
    """Read a file of the run through `forensics.archive.RunFiles` (read-only, any archive kind)."""
    from forensics.store.files import run_files  # RunFiles built from the store's files rows
    try:
        return run_files(store, run_id).read_text(path)
    except Exception:  # noqa: BLE001 - unreadable file is reported as None
        return None


ARCHIVED_PROBE_LOG = re.compile(r"(^|/)(audit_[A-Za-z0-9_]+|empirical_recompute_test[A-Za-z0-9_]*)\.log$")


def parse_probe_log(text: str, path: str) -> dict[str, Any] | None:
    """An auditor's probe log (spec 2.5: key=value lines such as `probe=unsampled_row_mutation`,
    `result=FAIL`) as a replay_results-like row; None if it names no probe or no result."""
    kv: dict[str, str] = {}
    for line in text.splitlines():
        for tok in line.split():
            if "=" in tok:
                k, _, v = tok.partition("=")
                kv.setdefault(k.strip().lower(), v.strip())
    probe = kv.get("probe")
    res = (kv.get("result") or kv.get("status") or "").lower()
    if not probe or res not in ("fail", "failed", "pass", "passed", "ok"):
        return None
    bad = kv.get("bad", "")
    n_bad = int(bad.split("/")[0]) if bad.split("/")[0].isdigit() else None
    try:
        max_abs = float(kv.get("max_abs_diff") or kv.get("max_abs") or "nan")
    except ValueError:
        max_abs = None
    return {"probe": probe, "status": "fail" if res.startswith("fail") else "pass", "n_bad": n_bad,
            "max_abs": None if max_abs != max_abs else max_abs, "source": path}


def archived_probes(store: Store, run: dict[str, Any], files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The auditors' probe logs among the run's `files` (rows with `path`), parsed, duplicates dropped."""
    out, seen = [], set()
    for f in files:
        if not ARCHIVED_PROBE_LOG.search(f["path"]):
            continue
        text = read_run_text(store, run["run_id"], f["path"], run)
        row = parse_probe_log(text or "", f["path"])
        if row is None:
            continue
        key = (norm_probe(row["probe"]), row["status"], row["n_bad"], row["max_abs"])
        if key in seen:  # the regrade copies scratch/ back into the workspace: same log twice
            continue
        seen.add(key)
        out.append(row)
    return out


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


def deck_hardware(store: Store, run: dict[str, Any]) -> str | None:
    """`hardware:` of the frozen template_files/problem.yaml (the deck's GPU), None if absent."""
    if not run.get("regrade_json"):
        return None  # only needed to judge a regrade's SKU
    text = read_run_text(store, run["run_id"], "template_files/problem.yaml", run)
    if not text:
        return None
    m = _HW.search(text)
    return gpu_key(m.group(1).strip()) if m else None


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


def find_annotation(run_name: str, dirs: Sequence[Path]) -> Path | None:
    """`<run_name>.yaml` or `<run_name>_<suffix>.yaml` (also .yml) in any of `dirs`."""
    for d in dirs:
        if not d or not d.is_dir():
            continue
        for ext in (".yaml", ".yml"):
            p = d / f"{run_name}{ext}"
            if p.is_file():
                return p
        cands = sorted(p for p in d.glob(f"{glob_escape(run_name)}_*.y*ml") if p.is_file())
        if cands:
            return cands[0]
    return None


def glob_escape(s: str) -> str:
    return re.sub(r"([\[\]*?])", r"[\1]", s)


def annotation_from_run(store: Store, run: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """An annotation YAML inside the run folder (files table category 'annotation' or a .yaml at the root)."""
    rows = store.query("select path from files where run_id = ? and (category = 'annotation' or "
                       "((path like '%.yaml' or path like '%.yml') and path not like '%/%'))", [run["run_id"]])
    paths = sorted(r["path"] for r in rows if not r["path"].endswith("problem.yaml"))
    if not paths:
        return None, None, None
    text = read_run_text(store, run["run_id"], paths[0], run)
    if text is None:
        return None, paths[0], "unreadable"
    data, err = parse_annotation_text(text)
    return data, paths[0], err


__all__ = ["ARCHIVED_PROBE_LOG", "annotation_from_run", "archived_probes", "deck_hardware", "find_annotation", "glob_escape", "gpu_key",
           "parse_annotation_text", "parse_probe_log", "read_run_text"]
