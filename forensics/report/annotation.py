"""Annotation YAML in the auditors' schema (spec/archive-format.md 4.1), one file per run.

Identity (run_id, model, harness, problem, gpu), peak_fraction, verdict and the separate status
fields (reward_hack, contamination, correct, failure_reason, measurement_status, publish_grade,
empirical_recompute_required, exclude_from_denominator), summary, quotes
[{file, lines: [a, b], label, text}] with verbatim text, implication, trajectory, and the
provenance of the judgement (decided_by, the archived-verdict comparison, the tool version).
Unknown fields are written as the string ``unknown``; the reason is under ``decided_by``.

`summary` is one plain-language paragraph for a leaderboard reader and `implication` says what may
be done with the number (both from `forensics.report.prose`); `rule_trace` is the verdict's own
trace of the rules and facts that decided it.

Three readers must get the same values: PyYAML's own loader, libyaml's, and the benchmark site's
line parser, which only finds top-level `key: value` lines, strips one pair of surrounding quotes
and reads `|` / `>` block scalars (lines indented by two spaces).  So every top-level scalar is
written on one line (plain when YAML reads it back unchanged, else single- or double-quoted when the
text holds no quote of that kind and needs no escape), a multi-line text as a `|-` / `|` / `|+`
block with every line, blank ones included, indented by two spaces, and nested values (quotes,
findings, decided_by) are indented under their key so no nested line can look like a top-level key.
Each top-level scalar is read back with both YAML loaders before it is written; text no line form
can carry (control characters, CR, NEL, U+2028/U+2029, BOM; a multi-line text whose first line
starts with white space) falls back to YAML's escaped double-quoted form on one line, which the
site shows escaped.  A nested text is a literal block only when nothing in it can read otherwise
(no such character, no trailing white space on a line, no leading white space, at most one final
line break: a `|+` block ending a node made libyaml close the document with `...`, which the
nesting indent moved into the mapping), else double-quoted; no line is folded.  The whole document
is read back before it is written, and written again with every nested text double-quoted if it
does not read back as the annotation.  Lone surrogates (undecodable bytes) cannot be written as
UTF-8: they are written as U+FFFD.  tests/test_annotation_yaml.py checks all of it with generated
text against both loaders and a port of the site's reader.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from forensics import verdict as V
from forensics.report.prose import implication, reader_summary

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # libyaml when available (10x faster)
    pass


# Characters YAML cannot carry raw in a scalar, or that its readers treat as line breaks or differ on
# (C0 controls but LF, DEL, C1 controls including NEL, the Unicode line and paragraph separators,
# BOM, CR, the non-characters U+FFFE/U+FFFF): a text holding one is written double-quoted,
# where YAML's escapes carry it exactly.
_UNSAFE_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\r\u2028\u2029\ufeff\ufffe\uffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _block_ok(data: str) -> bool:
    """A multi-line text a literal block (`|` or `|-`) carries exactly whoever reads it: no character
    YAML escapes, no line with trailing white space, no first line starting with white space, at
    most one final line break (a keep-chomping `|+` block at the end of a node makes libyaml close
    the document with `...`, which an indented nested value then moves into the mapping)."""
    return (not _UNSAFE_CHARS.search(data) and not data.startswith((" ", "\t", "\n"))
            and not data.endswith("\n\n") and not _TRAILING_WS.search(data))


_TRAILING_WS = re.compile(r"[ \t](?:\n|$)")


def _str_presenter(dumper, data: str):
    if "\n" in data and _block_ok(data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    if "\n" in data or _UNSAFE_CHARS.search(data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_presenter)


class _QuotedDumper(_Dumper):
    """Every string double-quoted (the fallback when a document does not read back)."""


_QuotedDumper.add_representer(str, lambda dumper, data: dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"'))


def _reads_back(fragment: str, key: str, value: Any) -> bool:
    """Both YAML readers (libyaml and PyYAML's own scanner, which differ on e.g. tabs in plain
    scalars) read `fragment` as {key: value}."""
    for loader in dict.fromkeys((_Loader, yaml.SafeLoader)):
        try:
            got = yaml.load(fragment, Loader=loader)
        except yaml.YAMLError:
            return False
        if not (isinstance(got, dict) and list(got) == [key] and got[key] == value and type(got[key]) is type(value)):
            return False
    return True


@lru_cache(maxsize=8192)
def scalar_line(key: str, value: Any) -> str:
    """`key: value` for a top-level scalar that a YAML parser and the site's line parser read alike
    (see the module docstring); ends with a newline."""
    if not isinstance(value, str):
        text = yaml.dump({key: value}, Dumper=_Dumper, default_flow_style=False)
        return text if _reads_back(text, key, value) else yaml.safe_dump({key: value})
    if not _UNSAFE_CHARS.search(value):
        if "\n" not in value:
            forms = []
            if value and value == value.strip():
                forms.append(value)                           # plain
            if "'" not in value:
                forms.append(f"'{value}'")                    # single-quoted: nothing to escape
            if '"' not in value and "\\" not in value:
                forms.append(f'"{value}"')                    # double-quoted: nothing to escape
            for f in forms:
                line = f"{key}: {f}\n"
                if _reads_back(line, key, value):
                    return line
        if value and not value.startswith((" ", "\n")):
            # literal block (also a one-line text no quoted form carries); blank lines are written as
            # two spaces so the site's reader stays in the block; `|-` (no final newline) reads the
            # same in both, a final newline is YAML-only
            body = value.rstrip("\n")
            trail = len(value) - len(body)
            head = "|-" if trail == 0 else "|" if trail == 1 else "|+"
            lines = body.split("\n") + [""] * max(0, trail - 1)
            text = f"{key}: {head}\n" + "".join(f"  {ln}\n" for ln in lines)
            if _reads_back(text, key, value):
                return text
    # YAML's escaped double-quoted form on one line (the key stays plain for the site's reader)
    text = yaml.dump({key: value}, Dumper=_QuotedDumper, width=1 << 30, allow_unicode=True)
    return f"{key}:" + text[len(key) + 3:] if text.startswith(f'"{key}":') else text


def _plain(v: Any) -> Any:
    """JSON-ish values only (datetimes -> str)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def annotation_dict(rep: dict[str, Any]) -> dict[str, Any]:
    run, v = rep["run"], rep["verdict"] or {}
    result = rep.get("result") or {}
    harness = run.get("harness") or result.get("harness")
    d: dict[str, Any] = {
        "run_id": run.get("run_name") or run["run_id"],
        "model": run.get("model") or result.get("model") or run.get("model_slug"),
        "harness": harness,
        "effort": run.get("reasoning_effort") if run.get("reasoning_effort") is not None else result.get("reasoning_effort"),
        "problem": run.get("problem"),
        "bench": run.get("bench"),
    }
    if run.get("gpu_name"):
        d["gpu_name"] = run["gpu_name"]
    d["peak_fraction"] = run.get("peak_fraction")
    d["verdict"] = V._fmt(v.get("verdict", V.UNKNOWN))
    for k in ("reward_hack", "contamination", "correct", "failure_reason", "measurement_status", "publish_grade",
              "empirical_recompute_required", "exclude_from_denominator"):
        val = v.get(k, V.UNKNOWN) if v else V.UNKNOWN
        d[k] = val if (isinstance(val, bool) or val is None) else str(val)   # None: not applicable (nothing measured)
    d["summary"] = reader_summary(rep)
    d["implication"] = implication(v, run)
    d["rule_trace"] = v.get("summary") or ""
    d["quotes"] = [{"file": q["file"], "lines": list(q["lines"]), "label": q["label"], "text": q["text"]}
                   for q in rep.get("quotes", [])]
    d["trajectory"] = _plain(rep.get("trajectory") or [])
    d["findings"] = [{"id": f["finding_id"], "rule": f["rule"], "category": f["category"], "severity": f["severity"],
                      "message": f["message"]} for f in rep.get("findings", []) if f["analyzer"] != "pipeline"]
    d["decided_by"] = _plain(v.get("decided_by") or {})
    arch = v.get("archived") or {}
    if arch:
        d["archived_verdict_check"] = _plain({k: {kk: vv for kk, vv in e.items() if kk in ("status", "archived", "source")}
                                              for k, e in (arch.get("fields") or {}).items()})
        if arch.get("source"):
            d["archived_annotation"] = arch["source"]
        if arch.get("annotation_error"):
            d["archived_annotation_error"] = arch["annotation_error"]
    d["auditor"] = "forensics scan (automated; decision table docs/verdict.md)"
    return d


def _nested(key: str, value: Any, dumper: type = _Dumper) -> str:
    """`key:` and its nested value with every line after the first indented by two more spaces than
    libyaml writes it (a top-level block sequence is otherwise written in column 0).  Shifting every
    non-empty line of a block node by the same amount keeps each nested node, block scalars included,
    at the same relative indentation, so the value reads back unchanged (tested).  No line is
    folded (width): a quoted text stays on one line."""
    text = yaml.dump({key: value}, Dumper=dumper, sort_keys=False, allow_unicode=True, width=1 << 30,
                     default_flow_style=False)
    if text.endswith("\n...\n"):   # a document-end marker (never written for the forms above; belt and braces)
        text = text[:-4]
    head, nl, rest = text.partition("\n")
    return head + nl + "".join(ln if ln == "\n" else "  " + ln for ln in rest.splitlines(keepends=True))


def _utf8(v: Any) -> Any:
    """`v` with every lone surrogate (text decoded from bytes that were not UTF-8 with
    ``surrogateescape``, or a JSON ``\\ud800`` escape) replaced by U+FFFD: a UTF-8 file cannot hold
    one, and libyaml reads no escape of one."""
    if isinstance(v, str):
        return _SURROGATE.sub("\ufffd", v) if _SURROGATE.search(v) else v
    if isinstance(v, dict):
        return {_utf8(k): _utf8(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_utf8(x) for x in v]
    return v


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (True is not 1, NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(x, b[k]) for k, x in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


def _document(d: dict[str, Any], dumper: type) -> str:
    return "".join(_nested(k, v, dumper) if isinstance(v, (dict, list)) else scalar_line(k, v) for k, v in d.items())


def dump_annotation(d: dict[str, Any]) -> str:
    """The annotation as YAML that PyYAML, libyaml and the site's line reader read alike (module
    docstring).  The document is read back before it is returned; one that does not read back as
    `d` is written again with every nested text double-quoted."""
    d = _utf8({k: list(v) if isinstance(v, tuple) else v for k, v in d.items()})
    text = _document(d, _Dumper)
    try:
        ok = _same(yaml.load(text, Loader=_Loader), d)
    except yaml.YAMLError:
        ok = False
    return text if ok else _document(d, _QuotedDumper)


def write_annotation(rep: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(dump_annotation(annotation_dict(rep)), encoding="utf-8")
    tmp.replace(path)
    return path
