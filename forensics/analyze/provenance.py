"""Provenance: every reference a run makes to another run, classified, and the findings it implies.

    from forensics.analyze import provenance
    provenance.analyze(store, run_ids=None)   # -> number of findings written

Reads ``runs``, ``tool_calls``, ``tool_results``, ``file_accesses`` (recomputed in memory with
`forensics.transcripts.access` when the ingest left none for a run that has tool calls) and
``records`` (token streams); writes ``foreign_refs`` (one row per reference) and ``findings``
(analyzer ``provenance``, category ``contamination``).

Classification of a reference (``foreign_refs.classification``):

* **copy** - text of a foreign file the agent read (the read's tool result) reappears in a file
  it wrote later (Write content, Edit/MultiEdit new text, a heredoc or ``python`` write in a
  command, an ``apply_patch``), compared on normalized token lines so renamed identifiers still
  match; or a ``cp``/``mv``/``rsync`` of a foreign file into this run's own tree.
* **deliberate_read** - opening a foreign run's artifact: ``solution.py`` and scratch sources,
  ``result.json``, ``check.log``, ``benchmark.log``, ``transcript.jsonl``/``codex_session.jsonl``,
  a session store, its compiled-extension cache; by ``cat``/``sed``/``head``/``Read``/``open()``/
  ``find -exec``/``xargs``/``tar``/a glob over run folders; a ``grep`` whose output carried the
  foreign file's content; a foreign artifact path handed to a script.
* **benign_exposure** - a run id that is merely shown: ``ls``/``tree`` listings, ``find``/
  ``rg --files`` sweeps, ``ps``/``nvidia-smi``/``fuser``/``lsof`` output, GPU-lock listings, a
  broken (foreign) venv interpreter path, a run id typed in an ``echo`` or a note.

Token-stream transcripts (Grok deltas, no tool calls): the ``thought``/``text`` records are
reassembled in line order and searched for foreign run ids, archive paths and verbatim 4-decimal
``peak_fraction`` values of earlier same-problem runs (``runs.peak_fraction``).  A stream mention
of a specific foreign artifact preceded by a read verb ("cat", "open", "look at" ...) counts as a
deliberate read; anything else in a stream is exposure.

Severity: high for a deliberate read or copy of a same-problem run (or of every run through a
glob), medium for other-problem deliberate reads, info for benign exposure.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from forensics.analyze.findings import Evidence, Finding, write_findings
from forensics.store.db import loads_json
from forensics.transcripts.access import RID_RE, RunContext, clean_rid, extract_accesses, parse_problem, parse_ts

ANALYZER = "provenance"
CODE_ARTIFACTS = {"solution", "scratch"}
DELIBERATE_ARTIFACTS = {"solution", "result", "check_log", "benchmark_log", "transcript", "session_store",
                        "build_cache", "scratch"}
BENIGN_RESULT_CMDS = {"ls": "ls listing", "tree": "tree listing", "du": "du listing", "find": "find sweep",
                      "rg": "rg sweep", "ps": "ps output", "nvidia-smi": "nvidia-smi output", "fuser": "fuser output",
                      "lsof": "lsof output", "pgrep": "pgrep output", "top": "top output", "htop": "htop output",
                      "pstree": "pstree output", "gpu-lock-exec": "GPU-lock listing", "flock": "GPU-lock listing"}
READ_VERBS = re.compile(r"\b(?:cat|read(?:ing)?|open(?:ing|ed)?|look(?:ing)? at|check(?:ing)?|view|inspect(?:ing)?|"
                        r"sed|head|tail|less|grep|copy|copying|cp|borrow|reuse|study|studying)\b", re.I)
_ARCHIVE_PATH = re.compile(r"outputs/runs[\w.\-]*/(?:[\w.\-]+)?")
_PEAK4 = re.compile(r"(?<![\d.])(\d\.\d{4})(?!\d)")
_READ_NUM_PREFIX = re.compile(r"^\s*\d+\t", re.M)  # Claude Read: "   12\tcode"
_READ_ARROW_PREFIX = re.compile(r"^\s*\d+→", re.M)


def artifact_of(foreign_file: str | None) -> str:
    """Artifact class of a path inside a run folder."""
    if not foreign_file:
        return "dir"
    f = foreign_file.strip("/")
    base = f.rsplit("/", 1)[-1]
    if "/.venv" in "/" + f or f.startswith(("repo/.venv", ".venv")):
        return "other"
    if f.startswith("cache/") or "torch_extensions" in f or "/.triton" in f or f.startswith("cache"):
        return "build_cache"
    if f.startswith("agent_home/") and ("/sessions" in f or "/projects" in f or "chat_history" in f) or \
            ".codex/sessions" in f or ".grok/sessions" in f:
        return "session_store"
    if base in ("transcript.jsonl", "codex_session.jsonl", "agent.log", "stderr.log") or base.endswith(".jsonl"):
        return "transcript"
    if base.startswith("result") and base.endswith(".json") or base == "rebench.json":
        return "result"
    if base.startswith("check") and base.endswith(".log"):
        return "check_log"
    if base.startswith(("benchmark", "bench")) and base.endswith(".log") or base.startswith("rebench_"):
        return "benchmark_log"
    if base == "solution.py":
        return "solution"
    if f.startswith("scratch/") or f == "scratch":
        return "scratch" if "." in base or f == "scratch" else "scratch"
    if f.startswith("repo/problems/") and base.endswith((".py", ".cu", ".cuh", ".cpp")):
        tmpl = {"reference.py", "sota.py", "shapes.py", "check.py", "benchmark.py", "baseline.py"}
        return "other" if base in tmpl else "scratch"
    if base in ("framework.txt", "cuda_language.json"):
        return "result"
    return "other"


def _ts_of(row: dict[str, Any] | None, name: str | None) -> datetime | None:
    if row and row.get("run_ts"):
        return row["run_ts"]
    return parse_ts(name or "") if name else None


_FACTS = ("run_id, run_name, problem, run_ts, started_at, peak_fraction, transcript_format, harness, tool_source")


class _RunInfo:
    """The facts of the runs analysed and of the runs they reference, read as they are needed: the
    runs of the chunk at once, another run when a reference names it, the earlier same-problem runs
    of a quoted score by that score.  (Every run's facts read for every chunk, and every run
    visited for every run whose stream was searched for scores, made provenance quadratic in runs.)"""

    def __init__(self, store, run_ids: Sequence[str] | None = None):
        self.store = store
        where, args = ("where run_id in (select unnest(?::VARCHAR[]))", [list(run_ids)]) if run_ids is not None \
            else ("", [])
        self.rows = {r["run_id"]: r for r in store.query(f"select {_FACTS} from runs {where}", args)}
        self._foreign: dict[str, dict[str, Any] | None] = {}
        self._known: dict[str, str | None] | None = None
        self._scored: dict[tuple[str | None, str], list[dict[str, Any]]] = {}

    def foreign(self, frid: str) -> dict[str, Any] | None:
        """The run of that id, else the first (in the store's order) of that name."""
        if frid in self.rows:
            return self.rows[frid]
        if frid not in self._foreign:
            got = self.store.query(f"select {_FACTS} from runs where run_id = ?", [frid])
            if not got:
                got = self.store.query(f"select {_FACTS} from runs where coalesce(nullif(run_name, ''), "
                                       "split_part(run_id, '@', 1)) = ? order by rowid limit 1", [frid.split("@", 1)[0]])
            self._foreign[frid] = got[0] if got else None
        return self._foreign[frid]

    def known(self) -> dict[str, str | None]:
        """run name -> problem of every run (what the access resolver matches globs against)."""
        if self._known is None:
            self._known = {(r[0] or r[1]): r[2] for r in self.store.con.execute(
                "select nullif(run_name, ''), run_id, problem from runs order by rowid").fetchall()}
        return self._known

    def scored(self, problem: str | None, score: str) -> list[dict[str, Any]]:
        """The runs of `problem` whose peak_fraction reads `score` (4 decimals), in the store's order."""
        key = (problem, score)
        if key not in self._scored:
            v = float(score)      # (every value that reads `score` lies within half a unit of it)
            self._scored[key] = [r for r in self.store.query(
                f"select {_FACTS} from runs where problem is not distinct from ? and peak_fraction <> 0 and "
                "peak_fraction between ? and ? order by rowid", [problem, v - 0.0001, v + 0.0001])
                if f"{r['peak_fraction']:.4f}" == score]
        return self._scored[key]


def _started_before(me: dict[str, Any], other: dict[str, Any] | None, other_name: str) -> bool | None:
    if other is not None and me.get("started_at") and other.get("started_at"):
        return other["started_at"] < me["started_at"]
    a = _ts_of(me, me.get("run_name"))
    b = _ts_of(other, other_name)
    if a is None or b is None:
        return None
    return b < a


# ------------------------------------------------------------------------------ copy detection

def _read_text_of(result_text: str) -> str:
    t = _READ_NUM_PREFIX.sub("", result_text)
    return _READ_ARROW_PREFIX.sub("", t)


def _written_texts(call: dict[str, Any]) -> list[tuple[str, str]]:
    """(target, text) of what a call wrote: Write content, Edit new text, heredoc bodies."""
    out: list[tuple[str, str]] = []
    args = call.get("args") or {}
    if isinstance(args, str):
        args = loads_json(args) or {}
    if not isinstance(args, dict):
        args = {}
    target = (call.get("paths") or [None])[0] or args.get("file_path") or args.get("filePath") or args.get("path") or "?"
    for k in ("content", "new_string", "newString", "streamContent", "file_text", "new_str", "contents", "text"):
        v = args.get(k)
        if isinstance(v, str) and len(v) > 40:
            out.append((str(target), v))
    edits = args.get("edits")
    for e in edits if isinstance(edits, list) else []:
        if isinstance(e, dict):
            v = e.get("new_string") or e.get("newString")
            if isinstance(v, str) and len(v) > 40:
                out.append((str(target), v))
    patch = args.get("input") or args.get("patch")
    if isinstance(patch, str) and "*** Begin Patch" in patch:
        added = "\n".join(ln[1:] for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
        out.append(("apply_patch", added))
    cmd = call.get("command")
    if cmd and "<<" in cmd:
        from forensics.text import shell as sh
        try:
            for kind, c in sh.parse(cmd):
                if kind == "cmd" and c is not None and c.heredoc and len(c.heredoc) > 40:
                    tgt = next((r.word.text for r in c.redirs if r.op in (">", ">>", "&>", "&>>")), None)
                    if tgt is None and c.argv and c.argv[0] == "tee" and len(c.argv) > 1:
                        tgt = c.argv[-1]
                    out.append((tgt or "heredoc", c.heredoc))
        except RecursionError:
            pass
    return out


def copy_spans(read_text: str, written: str, min_tokens: int = 40) -> list[dict[str, Any]]:
    """Aligned spans of normalized token lines shared by a read and a later write."""
    from forensics.text.code import aligned_spans, build_doc
    a = build_doc("w", {"written.py": written})
    b = build_doc("r", {"read.py": read_text})
    return [s for s in aligned_spans(a, b, min_lines=3, min_tokens=20)][:20] if \
        sum(len(t) for t in a.tokens.values()) >= min_tokens else []


# ------------------------------------------------------------------------------ per run

def _calls(store, rid):
    return store.query("select call_seq, source, line, tool, kind, command, paths, cwd, args from tool_calls "
                       "where run_id = ? order by call_seq", [rid])


def _results(store, rid):
    return store.query("select call_seq, source, line, text from tool_results where run_id = ? order by line", [rid])


def _accesses(store, rid, me, info, calls, results) -> list[dict[str, Any]]:
    rows = store.query("select * from file_accesses where run_id = ? order by call_seq, line", [rid])
    if rows or not calls:
        return rows
    # the ingest recorded none: recompute in memory (never written here; file_accesses is the ingest's)
    from forensics.transcripts.events import ToolCall, ToolResult
    tc = [ToolCall(c["source"], c["line"], None, c["tool"], c["kind"], loads_json(c["args"]) or {}, c["command"],
                   list(c["paths"] or []), c["cwd"], call_seq=c["call_seq"]) for c in calls]
    tr = [ToolResult(r["source"], r["line"], None, r["text"] or "", call_seq=r["call_seq"]) for r in results]
    known = info.known()
    ctx = RunContext.for_run(run_id=rid, run_name=me.get("run_name"), problem=me.get("problem"),
                             run_ts=me.get("run_ts"), calls=tc, known_runs=known)
    return extract_accesses(ctx, tc, tr)


def _excerpt(text: str | None, needle: str | None, width: int = 160) -> str:
    if not text:
        return ""
    i = text.find(needle) if needle else -1
    if i < 0:
        return text[:width]
    s = max(0, i - width // 3)
    return text[s:s + width].replace("\n", " ")


def analyze_run(store, rid: str, info: _RunInfo) -> tuple[list[dict[str, Any]], list[Finding]]:
    me = info.rows[rid]
    my_name = me.get("run_name") or rid.split("@")[0]
    my_problem = me.get("problem")
    calls = _calls(store, rid)
    results = _results(store, rid)
    by_seq = {c["call_seq"]: c for c in calls}
    res_by_seq: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        if r["call_seq"] is not None:
            res_by_seq[r["call_seq"]].append(r)
    acc = _accesses(store, rid, me, info, calls, results)
    refs: list[dict[str, Any]] = []

    def base_ref(frid: str | None, ffile: str | None) -> dict[str, Any]:
        name = (frid or "").split("@", 1)[0]
        other = info.foreign(frid) if frid else None
        fprob = (other or {}).get("problem") or (parse_problem(name) if name else None)
        return {"run_id": rid, "foreign_run_id": frid, "foreign_problem": fprob,
                "same_problem": (fprob == my_problem) if (fprob and my_problem) else None,
                "foreign_started_before": _started_before(me, other, name) if name else None,
                "foreign_in_archive": other is not None, "foreign_file": ffile, "artifact": artifact_of(ffile)}

    # ---- group accesses per (call, foreign run)
    deliberate_keys: set[tuple[int | None, str | None]] = set()
    per_call_rows: dict[tuple[int | None, str | None], list[dict[str, Any]]] = defaultdict(list)
    for a in acc:
        if a.get("owner") != "foreign":
            continue
        per_call_rows[(a["call_seq"], a.get("foreign_run_id"))].append(a)
    # calls whose glob read (foreign_run_id unknown or a pattern) was deliberate: the foreign runs
    # their output names were read through that glob
    glob_read_calls: set[int | None] = set()
    for (seq, frid), rows in per_call_rows.items():
        if frid is None and any(r["via"] != "result" and r["access"] in ("read", "copy_src") and
                                artifact_of(r.get("foreign_file")) in DELIBERATE_ARTIFACTS for r in rows):
            glob_read_calls.add(seq)
    for (seq, frid), rows in per_call_rows.items():
        call = by_seq.get(seq) or {}
        call_src = call.get("source") or (me.get("tool_source"))
        non_result = [r for r in rows if r["via"] != "result"]
        result_rows = [r for r in rows if r["via"] == "result"]
        emitted = False
        for a in non_result:
            ref = base_ref(frid or _glob_label(a), a.get("foreign_file"))
            ref.update({"call_seq": seq, "source": call_src, "line": a.get("line") or call.get("line"),
                        "where": "argument" if a["via"] == "arg" else "command",
                        "excerpt": _excerpt(call.get("command") or str(a.get("path_written")), a.get("path_written"))})
            cls, reason = _classify_access(a, ref["artifact"], call, res_by_seq.get(seq, []))
            ref["classification"], ref["reason"] = cls, reason
            if frid is None and ref["same_problem"] is None and cls == "deliberate_read":
                ref["same_problem"] = None
            refs.append(ref)
            emitted = True
            if cls != "benign_exposure":
                deliberate_keys.add((seq, frid))
        if emitted and (seq, frid) in deliberate_keys:
            continue  # result mentions of a deliberate read are part of that read
        for a in result_rows:
            r0 = next((r for r in res_by_seq.get(seq, []) if r["line"] == a.get("line")), None)
            ref = base_ref(frid, a.get("foreign_file"))
            cls, reason = _classify_result_mention(a, ref["artifact"], call, r0)
            if seq in glob_read_calls and frid is not None:
                cls, reason = "deliberate_read", "named in the output of a glob read of run folders"
            ref.update({"call_seq": seq, "source": (r0 or {}).get("source") or call_src, "line": a.get("line"),
                        "where": "result", "classification": cls, "reason": reason,
                        "excerpt": _excerpt((r0 or {}).get("text"), (frid or "").split("@")[0])})
            refs.append(ref)
    # ---- copy detection: a deliberately read code artifact whose text reappears in a later write
    writes = [(c["call_seq"], c, t) for c in calls for t in _written_texts(c)] if refs else []
    copies: list[dict[str, Any]] = []
    for ref in refs:
        if ref["classification"] != "deliberate_read" or ref["call_seq"] is None:
            continue
        if ref["artifact"] not in CODE_ARTIFACTS and ref["artifact"] != "other":
            continue
        texts = [r["text"] for r in res_by_seq.get(ref["call_seq"], []) if r.get("text")]
        if not texts:
            continue
        read_text = _read_text_of("\n".join(texts))[:400_000]
        best = None
        for wseq, wcall, (target, wtext) in writes:
            if wseq <= ref["call_seq"]:
                continue
            spans = copy_spans(read_text, wtext)
            tok = sum(s["tokens"] for s in spans)
            if spans and tok >= 60 and (best is None or tok > best[0]):
                best = (tok, wseq, wcall, target, spans)
        if best:
            tok, wseq, wcall, target, spans = best
            s0 = spans[0]
            copy = dict(ref)
            copy.update({
                "call_seq": wseq, "source": wcall["source"], "line": wcall["line"], "classification": "copy",
                "where": "command" if wcall.get("command") else "argument",
                "reason": (f"text of {ref['foreign_file']} read at call {ref['call_seq']} (transcript line "
                           f"{ref['line']}) reappears in the write of {target} at call {wseq}: {tok} normalized "
                           f"tokens, written lines {s0['a_start']}-{s0['a_end']} = read lines {s0['b_start']}-{s0['b_end']}"),
                "excerpt": _excerpt(target, None)})
            copy["_copy"] = {"write_call_seq": wseq, "write_line": wcall["line"], "target": target, "tokens": tok,
                             "spans": spans[:10], "write_source": wcall["source"], "read_call_seq": ref["call_seq"],
                             "read_line": ref["line"]}
            copies.append(copy)
    seen_copy: set[tuple[Any, Any]] = set()
    for c in copies:
        k = (c["foreign_run_id"], c["call_seq"])
        if k not in seen_copy:
            seen_copy.add(k)
            refs.append(c)
    # ---- token streams
    stream_refs, stream_findings = _stream(store, rid, me, info, calls)
    refs.extend(stream_refs)
    findings = _findings(rid, me, refs) + stream_findings
    if not calls and not stream_refs and not _has_stream(store, rid):
        findings.append(Finding(rid, ANALYZER, "contamination-unverifiable", "info",
                                "the run has neither tool calls nor a token stream, so foreign-run access cannot be "
                                "established either way.", "contamination",
                                [Evidence(file=me.get("tool_source") or "transcript.jsonl",
                                          note="no tool calls or stream records ingested")]))
    return refs, findings


def _glob_label(a: dict[str, Any]) -> str:
    p = a.get("resolved_path") or ""
    comps = p.split("/")
    for i, c in enumerate(comps):
        if c.startswith(("runs", "rescue")) and i + 1 < len(comps):
            return comps[i + 1] or "*"
    return "*"


def _classify_access(a: dict[str, Any], artifact: str, call: dict[str, Any], results: list[dict[str, Any]]) -> tuple[str, str]:
    access = a["access"]
    detail = a.get("detail") or ""
    ff = a.get("foreign_file") or ""
    if artifact == "other" and (".venv" in ff or "site-packages" in ff):
        return "benign_exposure", f"foreign venv path ({detail or access})"
    if access in ("copy_src",):
        if artifact in DELIBERATE_ARTIFACTS or artifact in ("other", "dir"):
            return "copy", f"{detail or 'cp'} of {ff or 'the run folder'} into this run"
    if access in ("read", "edit", "exec", "copy_dst", "write", "delete"):
        if artifact == "dir" and access == "read" and "tar" not in detail:
            return "benign_exposure", f"{detail or access} of a run folder"
        if access in ("write", "copy_dst", "delete"):
            return "deliberate_read", f"{detail or access} into another run's folder ({ff or 'dir'})"
        return "deliberate_read", f"{detail or access} of {ff or 'the run folder'}" + (" (glob)" if a.get("is_glob") else "")
    if access == "search":
        # a content search whose output shows the foreign file's lines
        if detail.startswith(("grep", "rg", "ag")) and detail != "rg --files":
            for r in results:
                t = r.get("text") or ""
                if re.search(re.escape((a.get("foreign_run_id") or "~~")) + r"[^\s:]*:\d*:?\S", t) or \
                        (a.get("foreign_run_id") and ":" in t and a["foreign_run_id"] in t and "-l" not in (call.get("command") or "")):
                    return "deliberate_read", f"{detail} returned the content of files in the run"
            return "benign_exposure", f"{detail} sweep"
        return "benign_exposure", f"{detail or 'find'} sweep"
    if access == "list":
        return "benign_exposure", f"{detail or 'ls'} listing"
    if access == "mention":
        if artifact in DELIBERATE_ARTIFACTS and a["via"] in ("shell", "python") and detail not in ("command text", "echo", "printf"):
            return "deliberate_read", f"path of {ff} passed to {detail}"
        return "benign_exposure", f"run id named in {detail or 'the command'}"
    return "benign_exposure", access


def _classify_result_mention(a: dict[str, Any], artifact: str, call: dict[str, Any], result: dict[str, Any] | None) -> tuple[str, str]:
    detail = (a.get("detail") or "result").replace("result of ", "")
    ff = a.get("foreign_file") or ""
    if ".venv" in ff:
        return "benign_exposure", f"foreign venv path shown in {detail} output"
    if detail in BENIGN_RESULT_CMDS:
        return "benign_exposure", BENIGN_RESULT_CMDS[detail]
    cmd = call.get("command") or ""
    if "gpu.lock" in cmd or "gpu_lock" in cmd:
        return "benign_exposure", "GPU-lock listing"
    return "benign_exposure", f"run id shown in {detail} output"


# ------------------------------------------------------------------------------ token streams

def _has_stream(store, rid) -> bool:
    return bool(store.scalar("select count(*) from records where run_id = ? and rtype in ('thought', 'text') "
                             "and text is not null", [rid]))


def _stream(store, rid, me, info, calls) -> tuple[list[dict[str, Any]], list[Finding]]:
    fmt = (me.get("transcript_format") or "")
    if calls and fmt not in ("grok_stream",):
        return [], []
    recs = store.query("select source, line, text from records where run_id = ? and rtype in ('thought', 'text') "
                       "and text is not null order by source, line", [rid])
    if not recs:
        return [], []
    my_name = me.get("run_name") or rid.split("@")[0]
    my_problem = me.get("problem")
    refs: list[dict[str, Any]] = []
    findings: list[Finding] = []
    by_src: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        by_src[r["source"]].append(r)

    def scores_of(v: str) -> list[dict[str, Any]]:
        """The earlier same-problem runs whose archived score reads `v`."""
        return [o for o in info.scored(my_problem, v)
                if o["run_id"] != rid and _started_before(me, o, o.get("run_name") or o["run_id"])]
    for src, rs in by_src.items():
        parts, starts = [], []
        pos = 0
        for r in rs:
            starts.append(pos)
            parts.append(r["text"])
            pos += len(r["text"])
        text = "".join(parts)
        import bisect

        def line_at(i: int) -> int:
            return rs[max(0, bisect.bisect_right(starts, i) - 1)]["line"]
        seen: set[tuple[str, str | None]] = set()
        for m in RID_RE.finditer(text):
            name = clean_rid(m.group(1))
            if name == my_name:
                continue
            tail = text[m.end(1):m.end(1) + 120]
            fm = re.match(r"/([\w./\-]+)", tail)
            ffile = fm.group(1).rstrip(".") if fm else None
            key = (name, ffile)
            if key in seen:
                continue
            seen.add(key)
            other = info.foreign(name)
            fprob = (other or {}).get("problem") or parse_problem(name)
            before = text[max(0, m.start() - 100):m.start()]
            art = artifact_of(ffile)
            deliberate = art in DELIBERATE_ARTIFACTS and bool(READ_VERBS.search(before))
            ln = line_at(m.start())
            refs.append({"run_id": rid, "call_seq": None, "source": src, "line": ln, "foreign_run_id": name,
                         "foreign_problem": fprob, "same_problem": (fprob == my_problem) if fprob and my_problem else None,
                         "foreign_started_before": _started_before(me, other, name), "foreign_in_archive": other is not None,
                         "foreign_file": ffile, "artifact": art,
                         "classification": "deliberate_read" if deliberate else "benign_exposure",
                         "reason": ("stream names reading " + (ffile or "")) if deliberate else "run id in the token stream",
                         "where": "stream", "excerpt": text[max(0, m.start() - 60):m.end() + 80].replace("\n", " ")})
        for m in _ARCHIVE_PATH.finditer(text):
            seg = text[m.start():m.end() + 60]
            if RID_RE.search(seg) or my_name in seg:
                continue
            ln = line_at(m.start())
            key = ("<archive>", str(ln))
            if key in seen:
                continue
            seen.add(key)
            refs.append({"run_id": rid, "call_seq": None, "source": src, "line": ln, "foreign_run_id": None,
                         "foreign_problem": None, "same_problem": None, "foreign_started_before": None,
                         "foreign_in_archive": None, "foreign_file": None, "artifact": "dir",
                         "classification": "benign_exposure", "reason": "archive path in the token stream",
                         "where": "stream", "excerpt": text[max(0, m.start() - 60):m.end() + 80].replace("\n", " ")})
        for m in _PEAK4.finditer(text):
            v = m.group(1)
            if float(v) == 0:
                continue
            for o in scores_of(v):
                ln = line_at(m.start())
                oname = o.get("run_name") or o["run_id"]
                findings.append(Finding(
                    rid, ANALYZER, "stream-foreign-score", "medium",
                    f"the token stream quotes peak_fraction {v} at line {ln:,}, the archived score of the earlier "
                    f"same-problem run {oname}.", "contamination",
                    [Evidence(file=src, transcript_line=ln, quote=text[max(0, m.start() - 80):m.end() + 40].replace("\n", " "))],
                    data={"value": v, "foreign_run_id": oname}))
    # stream mention findings
    fl = [r for r in refs]
    if fl:
        same = [r for r in fl if r["same_problem"]]
        deliberate = [r for r in fl if r["classification"] == "deliberate_read"]
        sev = "high" if any(r["same_problem"] for r in deliberate) else ("medium" if deliberate or same else "info")
        names = sorted({r["foreign_run_id"] or "<archive path>" for r in fl})
        findings.append(Finding(
            rid, ANALYZER, "stream-foreign-mention", sev,
            f"the reassembled token stream names {len(names)} other run(s)/archive path(s) in {len(fl)} place(s)"
            f" ({len(deliberate)} as a read of an artifact, {len(same)} same-problem): {', '.join(names[:5])}.",
            "contamination",
            [Evidence(file=r["source"], transcript_line=r["line"], quote=r["excerpt"][:200]) for r in fl[:8]],
            data={"runs": names[:50], "deliberate": len(deliberate), "same_problem": len(same)}))
    return refs, findings


# ------------------------------------------------------------------------------ findings

def _findings(rid: str, me: dict[str, Any], refs: list[dict[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    tool_refs = [r for r in refs if r["where"] != "stream"]
    by_run: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for r in tool_refs:
        by_run[r["foreign_run_id"]].append(r)
    for frid, rs in by_run.items():
        copies = [r for r in rs if r["classification"] == "copy"]
        reads = [r for r in rs if r["classification"] == "deliberate_read"]
        same = any(r["same_problem"] for r in rs)
        glob_all = frid in ("*", None) or (frid and any(ch in frid for ch in "*?["))
        label = frid if frid and not glob_all else f"run folders matching {frid or '*'}"
        arts = sorted({r["artifact"] for r in copies + reads})
        before = next((r["foreign_started_before"] for r in rs if r["foreign_started_before"] is not None), None)
        tprob = f"same problem ({rs[0]['foreign_problem']})" if same else \
            (f"problem {rs[0]['foreign_problem']}" if rs[0]["foreign_problem"] else "unknown problem")
        if copies:
            c = copies[0]
            cp = c.get("_copy") or {}
            ev = [Evidence(file=r["source"], transcript_line=r["line"], call_seq=r["call_seq"], quote=(r["excerpt"] or "")[:200],
                           note=r["reason"]) for r in copies[:5]]
            if cp:
                ev.append(Evidence(file=cp.get("write_source"), transcript_line=cp.get("write_line"),
                                   call_seq=cp.get("write_call_seq"), note=f"write of {cp.get('target')}"))
            sev = "high" if (same or glob_all) else "medium"
            out.append(Finding(rid, ANALYZER, "foreign-copy", sev,
                               f"text from {label}/{c['foreign_file'] or ''} ({tprob}) reappears in this run's own "
                               f"files: {c['reason']}.", "contamination", ev,
                               data={"foreign_run_id": frid, "same_problem": same, "started_before": before,
                                     "copies": [{k: r.get(k) for k in ("call_seq", "line", "foreign_file", "reason")} for r in copies],
                                     "spans": cp.get("spans")}))
        if reads:
            sev = "high" if (same or (glob_all and any(r["artifact"] in ("solution", "result") for r in reads))) else "medium"
            if all(r["artifact"] == "other" for r in reads) and not same:
                sev = "low"
            first = reads[0]
            out.append(Finding(rid, ANALYZER, "foreign-read", sev,
                               f"deliberately read {len(reads)} artifact(s) of {label} ({tprob}"
                               f"{', started earlier' if before else ''}): {', '.join(arts)}; first at tool call "
                               f"{first['call_seq']} (transcript line {first['line']}).", "contamination",
                               [Evidence(file=r["source"], transcript_line=r["line"], call_seq=r["call_seq"],
                                         quote=(r["excerpt"] or "")[:200], note=r["reason"]) for r in reads[:8]],
                               data={"foreign_run_id": frid, "same_problem": same, "started_before": before,
                                     "artifacts": arts, "n": len(reads)}))
    benign = [r for r in tool_refs if r["classification"] == "benign_exposure"]
    if benign:
        names = sorted({r["foreign_run_id"] or "*" for r in benign})
        reasons = sorted({r["reason"] for r in benign})
        out.append(Finding(rid, ANALYZER, "foreign-exposure", "info",
                           f"{len(benign)} benign exposure(s) to {len(names)} other run id(s) ({'; '.join(reasons[:4])}); "
                           f"exposure alone does not contaminate a run.", "contamination",
                           [Evidence(file=r["source"], transcript_line=r["line"], call_seq=r["call_seq"],
                                     quote=(r["excerpt"] or "")[:160], note=r["reason"]) for r in benign[:6]],
                           data={"runs": names[:50], "n": len(benign), "reasons": reasons}))
    return out


def analyze(store, run_ids: Sequence[str] | None = None) -> int:
    """Write foreign_refs and provenance findings for run_ids (all runs if None)."""
    targets = list(run_ids) if run_ids is not None else store.run_ids()
    info = _RunInfo(store, targets)
    all_findings: list[Finding] = []
    for rid in targets:
        if rid not in info.rows:
            continue
        refs, findings = analyze_run(store, rid, info)
        for r in refs:
            r.pop("_copy", None)
        store.replace_run("foreign_refs", rid, refs)
        all_findings.extend(findings)
    return write_findings(store, ANALYZER, targets, all_findings)
