"""File accesses of a run's tool calls, resolved like the shell would and classified by owner.

The ingest calls `extract_accesses(ctx, calls, results)` for every run; the rows go to the
`file_accesses` table (schema in `forensics.store.schema`).  The provenance analyzer reads them
to find references to other runs.

    ctx = RunContext.for_run(run_id=rid, run_name=name, problem=problem, run_ts=ts,
                             calls=calls, known_runs={run_name: problem, ...})
    rows = extract_accesses(ctx, calls, results)

Resolution (`forensics.text.shell` parses, `forensics.text.shell_paths` says which operands
are paths): ``cd`` / ``pushd`` / ``popd`` within a command and, for harnesses with a persistent
shell (Claude Code's ``Bash``), across calls (one shell per agent: a subagent's ``cd`` does not
move the main agent's shell);
subshells ``( )``, ``$( )`` and ``bash -c`` do not leak their ``cd``; relative paths, ``~``,
``$HOME``, ``$PWD`` and variables assigned earlier in the command (``X=/p; cat $X/f``,
``for f in a b; do cat $f; done``); env prefixes and wrappers (``timeout``, ``uv run``, ``env``);
redirections; ``xargs`` fed by the previous pipeline stage; ``find -exec``; ``tar``/``cp``/``mv``;
``python -c``/heredoc ``open()``/``Path()``/``glob``; structured Read/Write/Edit/Glob/Grep
arguments.  Globs are kept (``is_glob``) and a glob whose run-id component has literal text is
matched against the known run names, one row per matching run.

Owner classes:

* ``self``: this run's folder or workspace (host ``.../outputs/runs*/<run>/``, container
  ``/workspace``, the session cwd);
* ``foreign``: inside any other run-id-shaped directory (an ``outputs/runs*`` root or not, in the
  archive or not; ``foreign_run_id`` names it, ``foreign_file`` is the path inside it), or an
  ``outputs/runs*`` root itself / a glob over it (then ``foreign_run_id`` is NULL);
* ``harness``: bench sources and wrappers (``src/``, ``trusted_src/``, ``bin/``, ``cbin/``,
  ``/kbh/bin``, ``.venv``, uv/pip caches, ``~/.claude`` and other agent homes, ``agent_home/``);
* ``system``: ``/usr``, ``/proc``, ``/etc``, ``/tmp``, ``/dev``, ``/opt``, site-packages ...;
* ``unknown``: anything else (including unresolved ``$VAR`` paths).

Run ids appearing inside tool *results* (``ls``/``find`` listings, ``ps``/``nvidia-smi``/
``fuser`` output, lock owners, error paths) are recorded as access ``mention`` via ``result``
(foreign ones only; at most `MAX_RESULT_ROWS_PER_RUN` rows per call and foreign run).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from forensics.text import shell as sh
from forensics.text import shell_paths as sp

# A run-id-shaped token: timestamp, harness, model slug, NN_problem (+ optional collision suffix).
RID_CORE = r"20\d{6}_\d{6}_[A-Za-z0-9][A-Za-z0-9.\-]*_[A-Za-z0-9_.\-]*?_\d\d_[A-Za-z][A-Za-z0-9_.\-]*"
RID_RE = re.compile(r"(?<![A-Za-z0-9])(" + RID_CORE + ")")
RID_FULL = re.compile(r"^" + RID_CORE + r"$")
_RID_PREFILTER = re.compile(r"20\d{6}_\d{6}_")
_RID_TRAIL = re.compile(r"(?:\.(?:tar\.gz|tgz|tar|zip|yaml|yml|json|jsonl|log|out|txt|html|md))+$|[._\-]+$")
_PATH_CHARS = re.compile(r"[^\s'\"`<>|;(),\[\]{}=*]*")
_PATH_CHARS_BACK = re.compile(r"[^\s'\"`<>|;(),\[\]{}=*:]*$")
_RUNS_ROOT = re.compile(r"^(?:runs(?:-[A-Za-z0-9_.\-]+)?|rescue|regrade)$")
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-=]([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_BENCH_ROOT = re.compile(r"^(.*?/(?:KernelBench-[A-Za-z0-9_\-]+|benchmarks/(?:hard|cuda|mini|mega|multi)))(?:/|$)")

MAX_RESULT_ROWS_PER_RUN = 50   # per (call, foreign run) from one tool result
MAX_GLOB_EXPANSION = 64        # a run-id glob matching more known runs is kept as one row

SYSTEM_PREFIXES = ("/usr/", "/proc/", "/sys/", "/dev/", "/etc/", "/tmp/", "/var/", "/opt/", "/lib/", "/lib64/",
                   "/bin/", "/sbin/", "/run/", "/boot/", "/snap/", "/srv/", "/mnt/", "/media/", "/root/")
SYSTEM_EXACT = {"/", "/usr", "/proc", "/sys", "/dev", "/etc", "/tmp", "/var", "/opt", "/lib", "/bin", "/sbin",
                "/run", "/dev/null", "/root", "/home"}
HARNESS_IN_RUN = ("repo/src", "src", "trusted_src", "bin", "cbin", "repo/.venv", ".venv", "agent_home",
                  "agent_guard", "opencode_config", "trusted_entrypoint.py", "repo/uv.lock", "repo/pyproject.toml")
HOME_HARNESS = (".claude", ".claude.json", ".codex", ".grok", ".cache", ".local", ".config", ".triton", ".nv",
                ".cargo", ".rustup", ".npm", ".uv", ".factory", ".gemini", ".kimi", ".cursor", ".bashrc",
                ".profile", ".bash_profile", ".venv", ".python_history", ".gitconfig")
PERSISTENT_SHELL_TOOLS = {"Bash"}   # Claude Code keeps one shell (cwd persists between calls)
EXEC_KINDS = {"exec"}
STRUCT_ACCESS = {"read": "read", "write": "write", "edit": "edit", "list": "list", "search": "search"}


def parse_problem(run_name: str) -> str | None:
    """Problem of a run-id-shaped name (via the ingest's run-id parser when present)."""
    try:
        from forensics.archive.runid import parse_run_id
        r = parse_run_id(run_name)
        if r is not None:
            return r.problem
    except ImportError:  # pragma: no cover - the parser is part of the package
        pass
    m = re.search(r"_(\d\d_[a-z][a-z0-9]*(?:_[a-z0-9]+)*?)(?:_\d+_\d+)?$", run_name)
    return m.group(1) if m else None


def parse_ts(run_name: str) -> datetime | None:
    try:
        return datetime.strptime(run_name[:15], "%Y%m%d_%H%M%S")
    except ValueError:
        return None


def clean_rid(tok: str) -> str:
    prev = None
    while prev != tok:
        prev = tok
        tok = _RID_TRAIL.sub("", tok)
    return tok


@dataclass
class RunContext:
    """What the resolver needs to know about the run whose calls it reads.

    run_id                the store key (``<name>@<root>`` on a collision);
    run_name              the run folder basename (defaults to run_id without ``@root``);
    problem               NN_problem of this run;
    run_ts                run-id timestamp (host local time);
    root                  archive root this run sits under (``runs``, ``runs-b200`` ...), if known;
    workspace_candidates  absolute directories that are this run's workspace (host
                          ``.../outputs/runs/<run>/repo/problems/<p>``, container ``/workspace/problems/<p>``,
                          an E0 source-tree problem dir); paths under them are ``self``;
    session_cwd           cwd of the agent session (Claude init cwd / the calls' cwd);
    home                  $HOME of the agent (``/home/agent`` in container mode);
    known_runs            run_name -> problem of every run in the archive, shared, never copied or
                          changed here (a copy per run made the ingest quadratic in runs) (for glob matching and
                          ``foreign_in_archive``);
    persistent_shell      True / False forces whether ``cd`` persists across exec calls; None decides
                          by tool name (Claude ``Bash`` persists; codex/opencode/gemini pass a workdir).
    """

    run_id: str
    run_name: str | None = None
    problem: str | None = None
    run_ts: datetime | None = None
    root: str | None = None
    workspace_candidates: list[str] = field(default_factory=list)
    session_cwd: str | None = None
    home: str | None = None
    known_runs: dict[str, str | None] = field(default_factory=dict)
    persistent_shell: bool | None = None
    run_dir_abs: str | None = None
    #: set when a glob over run folders was matched against known_runs: the rows then depend on the
    #: other runs' names (the ingest's resume fingerprint of the run takes them in)
    used_known: bool = False

    def __post_init__(self) -> None:
        if not self.run_name:
            self.run_name = self.run_id.split("@", 1)[0]
        if self.problem is None:
            self.problem = parse_problem(self.run_name)
        if self.run_ts is None:
            self.run_ts = parse_ts(self.run_name)
        ws = []
        for w in self.workspace_candidates:
            if w:
                w = posixpath.normpath(w)
                ws.append(w.rstrip("/") or "/")
        if self.run_dir_abs:
            ws.append(posixpath.normpath(self.run_dir_abs))
        if self.session_cwd and self.session_cwd.startswith("/") and not self._is_generic_dir(self.session_cwd):
            ws.append(posixpath.normpath(self.session_cwd))
        self._ws = sorted(set(ws), key=len, reverse=True)
        self._home = (self.home or "").rstrip("/") or None

    @staticmethod
    def _is_generic_dir(p: str) -> bool:
        p = p.rstrip("/") or "/"
        if p in SYSTEM_EXACT or p.count("/") <= 2 and p.startswith("/home/"):
            return True
        last = p.rsplit("/", 1)[-1]
        return bool(_RUNS_ROOT.match(last)) or last == "outputs"

    # ------------------------------------------------------------------ construction helper
    @classmethod
    def for_run(cls, run_id: str, run_name: str | None = None, problem: str | None = None,
                run_ts: datetime | None = None, calls: Sequence[Any] = (), known_runs: dict | None = None,
                root: str | None = None, session_cwd: str | None = None, home: str | None = None,
                workspace_candidates: Iterable[str] = (), container: bool | None = None,
                **_ignored: Any) -> "RunContext":
        """Build a context, inferring session cwd, home and workspace from the calls' paths."""
        name = run_name or run_id.split("@", 1)[0]
        if root is None and "@" in run_id:
            root = run_id.split("@", 1)[1]
        cwds: dict[str, int] = {}
        sample: list[str] = []
        for c in calls[:400]:
            cw = getattr(c, "cwd", None)
            if cw:
                cwds[cw] = cwds.get(cw, 0) + 1
            for p in (getattr(c, "paths", None) or [])[:4]:
                if isinstance(p, str) and p.startswith("/"):
                    sample.append(p)
            cmd = getattr(c, "command", None)
            if cmd and len(sample) < 200:
                sample.extend(re.findall(r"(/[^\s'\";|&()<>]+)", cmd[:2000])[:4])
        if session_cwd is None and cwds:
            session_cwd = max(cwds.items(), key=lambda kv: kv[1])[0]
        cands = list(workspace_candidates)
        is_container = container
        if is_container is None:
            is_container = any(p.startswith(("/workspace", "/home/agent", "/kbh/")) for p in sample) or \
                bool(session_cwd and session_cwd.startswith("/workspace"))
        if is_container:
            cands.append("/workspace")
            if home is None:
                home = "/home/agent"
        # host paths naming this run's folder: everything below it is self
        run_dir = None
        for p in ([session_cwd] if session_cwd else []) + sample:
            if p and f"/{name}" in p:
                i = p.find(f"/{name}")
                j = i + 1 + len(name)
                if j == len(p) or p[j] == "/":
                    run_dir = p[:j]
                    break
        if run_dir:
            cands.append(run_dir)
        if home is None:
            for p in ([session_cwd] if session_cwd else []) + sample:
                m = re.match(r"^(/home/[^/]+|/Users/[^/]+|/root)(?:/|$)", p or "")
                if m and m.group(1) != "/home/agent":
                    home = m.group(1)
                    break
        return cls(run_id=run_id, run_name=name, problem=problem, run_ts=run_ts, root=root,
                   workspace_candidates=cands, session_cwd=session_cwd, home=home,
                   known_runs=known_runs if known_runs is not None else {}, run_dir_abs=None)

    # ------------------------------------------------------------------ resolution
    def expand(self, text: str, cwd: str | None, env: dict[str, Any]) -> list[str]:
        """Expand ~, $HOME, $PWD and known variables.  A variable bound to a list (a for-loop
        variable) expands to several values."""
        if not text:
            return [text]
        if text.startswith("~"):
            if text == "~" or text.startswith("~/"):
                if self._home:
                    text = self._home + text[1:]
            elif text.startswith("~agent"):
                text = "/home/agent" + text[len("~agent"):]
        if "$" not in text:
            return [text]
        multi: list[str] | None = None

        def rep(m: re.Match) -> str:
            nonlocal multi
            name = m.group(1) or m.group(3)
            default = m.group(2)
            if name in env:
                v = env[name]
                if isinstance(v, list):
                    multi = v
                    return "\x00"
                return str(v)
            if name == "HOME" and self._home:
                return self._home
            if name in ("PWD",) and cwd:
                return cwd
            if default is not None:
                return default
            return m.group(0)

        out = _VAR_RE.sub(rep, text)
        out = out.replace("$(pwd)", cwd or "$(pwd)").replace("`pwd`", cwd or "`pwd`")
        if multi is not None:
            return [out.replace("\x00", str(v), 1) for v in multi[:MAX_GLOB_EXPANSION]]
        return [out]

    def resolve(self, path: str, cwd: str | None) -> str:
        if not path:
            return path
        p = path
        if not p.startswith("/"):
            if cwd and cwd.startswith("/"):
                p = cwd.rstrip("/") + "/" + p
            else:
                return posixpath.normpath(p)
        p = posixpath.normpath(p)
        if p.startswith("//"):
            p = "/" + p.lstrip("/")
        return p

    def classify(self, resolved: str) -> tuple[str, str | None, str | None]:
        """(owner, foreign_run_id, foreign_file) of a resolved path."""
        if not resolved:
            return "unknown", None, None
        comps = resolved.split("/")
        name = self.run_name
        for idx, c in enumerate(comps):
            if c and c[0] == "2" and len(c) > 22 and RID_FULL.match(c):
                rest = "/".join(comps[idx + 1:])
                prev = comps[idx - 1] if idx > 0 else ""
                if c == name:
                    if self.root and prev and _RUNS_ROOT.match(prev) and prev != self.root and prev != "regrade":
                        return "foreign", f"{c}@{prev}", rest or None
                    if prev == "regrade":
                        return "harness", None, None
                    return self._self_or_harness(rest), None, None
                rid = c
                return "foreign", rid, rest or None
        if "$" in resolved and not resolved.startswith("/"):
            return "unknown", None, None
        # an outputs/runs* root itself, or a glob standing for its run folders
        for idx, c in enumerate(comps):
            if _RUNS_ROOT.match(c) and (idx > 0 and comps[idx - 1] == "outputs"):
                nxt = comps[idx + 1] if idx + 1 < len(comps) else ""
                if not nxt or sh.GLOB_CHARS.search(nxt):
                    return "foreign", None, "/".join(comps[idx + 2:]) or None
        for w in self._ws:
            if resolved == w or resolved.startswith(w + "/"):
                rest = resolved[len(w) + 1:]
                if w == "/workspace" and (rest.startswith(("src", ".venv", "trusted_src")) or rest == ""):
                    return ("harness" if rest else "self"), None, None
                return "self", None, None
        if not resolved.startswith("/"):
            # relative path with no known cwd: the agent's own working directory
            return ("self" if not resolved.startswith("..") else "unknown"), None, None
        if resolved.startswith("/kbh/") or resolved == "/kbh" or resolved.startswith("/home/agent"):
            return "harness", None, None
        if self._home and (resolved == self._home or resolved.startswith(self._home + "/")):
            rest = resolved[len(self._home) + 1:]
            first = rest.split("/", 1)[0]
            if first in HOME_HARNESS or first.startswith(".") and first not in (".",):
                return "harness", None, None
        if "/site-packages/" in resolved or "/dist-packages/" in resolved:
            return "system", None, None
        if "/.venv/" in resolved or resolved.endswith("/.venv") or "/.cache/" in resolved or "/.claude/" in resolved:
            return "harness", None, None
        if resolved in SYSTEM_EXACT or resolved.startswith(SYSTEM_PREFIXES):
            return "system", None, None
        m = _BENCH_ROOT.match(resolved)
        if m:
            return "harness", None, None
        return "unknown", None, None

    @staticmethod
    def _self_or_harness(rest: str) -> str:
        if not rest:
            return "self"
        for h in HARNESS_IN_RUN:
            if rest == h or rest.startswith(h + "/"):
                return "harness"
        return "self"

    def glob_runs(self, pattern_path: str) -> list[str] | None:
        """Known foreign run names a glob's run-id component matches (None: not such a glob)."""
        comps = pattern_path.split("/")
        for idx, c in enumerate(comps):
            if _RUNS_ROOT.match(c) and idx + 1 < len(comps) and sh.GLOB_CHARS.search(comps[idx + 1]):
                pat = comps[idx + 1]
                if pat.strip("*") == "":
                    return None
                self.used_known = True
                if not self.known_runs:
                    return None
                hits = [n for n in self.known_runs if n != self.run_name and fnmatch.fnmatchcase(n, pat)]
                return hits
        return None


# ------------------------------------------------------------------------------ extraction

def _token_around(text: str, start: int, end: int) -> str:
    """The path-like token of `text` containing [start, end)."""
    b = _PATH_CHARS_BACK.search(text, max(0, start - 400), start)
    s = b.start() if b else start
    f = _PATH_CHARS.match(text, end)
    e = f.end() if f else end
    tok = text[s:e]
    return tok.rstrip(".,:")


class _Emitter:
    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.rows: list[dict[str, Any]] = []
        self._seen: set[tuple] = set()
        self._rid_seen_in_call: set[str] = set()

    def add(self, call_seq: int | None, line: int | None, written: str, resolved: str, access: str, via: str,
            glob: bool, detail: str) -> None:
        ctx = self.ctx
        owner, frid, ffile = ctx.classify(resolved)
        targets: list[tuple[str, str | None, str | None]] = [(owner, frid, ffile)]
        if glob:
            hits = ctx.glob_runs(resolved)
            if hits:
                if len(hits) <= MAX_GLOB_EXPANSION:
                    comps = resolved.split("/")
                    targets = []
                    for h in hits:
                        # foreign_file: the part after the run-id component
                        for idx, c in enumerate(comps):
                            if _RUNS_ROOT.match(c) and idx + 1 < len(comps):
                                targets.append(("foreign", h, "/".join(comps[idx + 2:]) or None))
                                break
        for owner, frid, ffile in targets:
            key = (call_seq, resolved, access, via, frid)
            if key in self._seen:
                continue
            self._seen.add(key)
            if frid:
                self._rid_seen_in_call.add(frid.split("@", 1)[0])
            self.rows.append({
                "run_id": ctx.run_id, "call_seq": call_seq, "line": line, "path_written": written[:2000],
                "resolved_path": resolved[:2000], "access": access, "via": via, "owner": owner,
                "foreign_run_id": frid, "foreign_file": ffile, "is_glob": bool(glob), "detail": detail[:200]})


def _scan_mentions(em: _Emitter, text: str, call_seq: int | None, line: int | None, via: str, detail: str,
                   cwd: str | None, skip_self: bool, cap: int | None = None) -> None:
    """Rows for run-id-shaped tokens in free text (command text, argument text, a result)."""
    if not text or not _RID_PREFILTER.search(text):
        return
    ctx = em.ctx
    per_run: dict[str, int] = {}
    for m in RID_RE.finditer(text):
        rid = clean_rid(m.group(1))
        if rid == ctx.run_name and skip_self:
            continue
        tok = _token_around(text, m.start(1), m.end(1))
        if "/" in tok:
            resolved = ctx.resolve(tok, cwd) if tok.startswith(("/", "~", ".")) else posixpath.normpath(tok)
            if tok.startswith("~"):
                resolved = ctx.resolve(ctx.expand(tok, cwd, {})[0], cwd)
        else:
            resolved = rid
        owner, frid, ffile = ctx.classify(resolved)
        if owner != "foreign" or frid is None:
            if rid == ctx.run_name:
                if skip_self:
                    continue
                owner, frid, ffile = "self", None, None
            else:
                owner, frid, ffile = "foreign", rid, None
        if skip_self and owner == "self":
            continue
        if via != "result" and frid and frid.split("@", 1)[0] in em._rid_seen_in_call:
            continue  # already recorded as a resolved access of this call
        if cap is not None and frid:
            k = per_run.get(frid, 0)
            if k >= cap:
                continue
            per_run[frid] = k + 1
        key = (call_seq, resolved, "mention", via, frid)
        if key in em._seen:
            continue
        em._seen.add(key)
        em.rows.append({
            "run_id": ctx.run_id, "call_seq": call_seq, "line": line, "path_written": tok[:2000] or rid,
            "resolved_path": resolved[:2000], "access": "mention", "via": via, "owner": owner,
            "foreign_run_id": frid, "foreign_file": ffile, "is_glob": False, "detail": detail[:200]})


# Redirections that write their target, with the operator named in `detail` (&> as >).
WRITE_REDIRS = {">": ">", ">>": ">>", ">|": ">|", "<>": "<>", "&>": ">", "&>>": ">"}


class _Shell:
    """State of one shell: cwd, directory stack, variables."""

    def __init__(self, cwd: str | None):
        self.cwd = cwd
        self.oldpwd: str | None = None
        self.stack: list[str | None] = []


def _interpret(em: _Emitter, ctx: RunContext, command: str, shell: _Shell, call_seq: int, line: int | None,
               env: dict[str, Any], depth: int = 0) -> None:
    """Walk a command, emitting accesses; updates `shell.cwd` for the top-level shell."""
    items = sh.parse(command)
    saved: list[tuple[str | None, dict[str, Any]]] = []
    prev_uses: list[sp.PathUse] = []
    for kind, cmd in items:
        if kind == "push":
            saved.append((shell.cwd, dict(env)))
            continue
        if kind == "pop":
            if saved:
                shell.cwd, env_back = saved.pop()
                env.clear()
                env.update(env_back)
            continue
        assert cmd is not None
        # expand words
        argv: list[str] = []
        globs: list[bool] = []
        for w in cmd.words:
            vals = ctx.expand(w.text, shell.cwd, env) if not (w.quoted and w.raw.startswith("'")) else [w.text]
            for v in vals:
                argv.append(v)
                globs.append(w.glob or (len(vals) > 1 and bool(sh.GLOB_CHARS.search(v))))
        local_env: dict[str, Any] = {}
        n_assign = 0
        for a in argv:
            if sh.ASSIGN_RE.match(a):
                n_assign += 1
            else:
                break
        if n_assign and n_assign == len(argv):
            for a in argv:
                k, v = a.split("=", 1)
                env[k] = v
            argv = []
        stripped = sh.unwrap(argv, local_env) if argv else []
        off = len(argv) - len(stripped)
        sglobs = globs[off:]
        uses: list[sp.PathUse] = []
        name = sp.canon(stripped[0]) if stripped else ""
        # redirections
        for r in cmd.redirs:
            if r.op in WRITE_REDIRS:
                t = ctx.expand(r.word.text, shell.cwd, env)[0]
                uses.append(sp.PathUse("write", t, r.word.glob, note=f"redirect {WRITE_REDIRS[r.op]}"))
            elif r.op == "<":
                t = ctx.expand(r.word.text, shell.cwd, env)[0]
                uses.append(sp.PathUse("read", t, r.word.glob, note="redirect <"))
        if not stripped:
            pass
        elif name == "cd" or name == "pushd":
            target = sh.cd_target(stripped)
            if name == "pushd":
                shell.stack.append(shell.cwd)
            if target is None:
                new = ctx._home or shell.cwd
            elif target == "-":
                new = shell.oldpwd
            else:
                new = ctx.resolve(target, shell.cwd)
            shell.oldpwd, shell.cwd = shell.cwd, new
            if target and target != "-":
                res = ctx.resolve(target, shell.oldpwd)
                em.add(call_seq, line, target, res, "list", "shell", bool(sh.GLOB_CHARS.search(target)), name)
        elif name == "popd":
            if shell.stack:
                shell.oldpwd, shell.cwd = shell.cwd, shell.stack.pop()
        elif name == "export" or name == "declare" or name == "local":
            for a in stripped[1:]:
                if "=" in a and not a.startswith("-"):
                    k, v = a.split("=", 1)
                    env[k] = v
        elif name == "for" and len(stripped) >= 3 and stripped[2] == "in":
            vals = stripped[3:]
            env[stripped[1]] = vals
            for v, g in zip(vals, sglobs[3:]):
                if g or "/" in v:
                    uses.append(sp.PathUse("list" if g else "mention", v, g, note="for-in"))
        elif name in sh.SHELLS and sh.shell_c_script(stripped) is not None:
            if depth < 4:
                sub = _Shell(shell.cwd)
                _interpret(em, ctx, sh.shell_c_script(stripped), sub, call_seq, line, dict(env), depth + 1)
        elif name in sh.SHELLS and cmd.heredoc and (len(stripped) == 1 or stripped[1] in ("-", "-s")) and depth < 4:
            sub = _Shell(shell.cwd)
            _interpret(em, ctx, cmd.heredoc, sub, call_seq, line, dict(env), depth + 1)
        elif name == "xargs":
            ops, opts = sp.split_options("xargs", stripped[1:])
            inner = ops
            produced = [u.path for u in prev_uses if u.access in ("list", "search", "read", "mention")]
            repl = next((v for k, v in opts if k == "-I"), None)
            if inner and produced:
                searched = {x.path for x in prev_uses if x.access == "search"}
                for p in produced:
                    # a searched directory stands for the files found under it
                    pv = p.rstrip("/") + "/**" if p in searched else p
                    sub = [x.replace(repl, pv) for x in inner] if repl else inner + [pv]
                    for u in sp.command_uses(sub):
                        if u.access != "python_code" and (pv in u.path):
                            uses.append(sp.PathUse(u.access, u.path, "*" in u.path, note=f"xargs {u.note}"))
        else:
            base_uses = sp.command_uses(stripped)
            for u in base_uses:
                if u.access == "python_code":
                    for pu in sp.python_code_uses(u.path):
                        pu.note = "python -c " + pu.note.replace("python ", "")
                        _emit_python(em, ctx, pu, shell.cwd, env, call_seq, line)
                    continue
                # mark glob for operands that came from unquoted glob words
                if not u.glob:
                    try:
                        j = stripped.index(u.path)
                        u.glob = sglobs[j] if j < len(sglobs) else False
                    except ValueError:
                        pass
                uses.append(u)
            if name == "python" and cmd.heredoc is not None and not any(u.access == "python_code" for u in base_uses):
                ops, _ = sp.split_options("python", stripped[1:])
                if not ops or ops[0] == "-":
                    for pu in sp.python_code_uses(cmd.heredoc):
                        pu.note = "python heredoc " + pu.note.replace("python ", "")
                        _emit_python(em, ctx, pu, shell.cwd, env, call_seq, line)
        for u in uses:
            if not u.path:
                continue
            for p in ctx.expand(u.path, shell.cwd, env):
                res = ctx.resolve(p, shell.cwd)
                em.add(call_seq, line, u.path, res, u.access, "shell", u.glob or bool(
                    sh.GLOB_CHARS.search(p) and u.glob), u.note)
        prev_uses = uses if uses else prev_uses if cmd.piped_from_prev else uses
        if not cmd.piped_from_prev and not uses:
            prev_uses = []


def _emit_python(em: _Emitter, ctx: RunContext, pu: sp.PathUse, cwd: str | None, env: dict[str, Any],
                 call_seq: int, line: int | None) -> None:
    if pu.access == "mention" and not (_RID_PREFILTER.search(pu.path) or "outputs/runs" in pu.path
                                       or pu.path.startswith(("/", "~"))):
        return
    p = ctx.expand(pu.path, cwd, env)[0]
    res = ctx.resolve(p, cwd)
    em.add(call_seq, line, pu.path, res, pu.access, "python", pu.glob, pu.note)


def _arg_strings(v: Any, out: list[str], budget: list[int]) -> None:
    """The strings inside an argument value, depth-first, at most budget[0] of them (iterative: an
    argument nested thousands of levels deep is evidence, not a reason to crash)."""
    stack = [v]
    while stack and budget[0] > 0:
        x = stack.pop()
        if isinstance(x, str):
            budget[0] -= 1
            out.append(x)
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))


def _glob_arg(call: Any) -> str | None:
    args = call.args if isinstance(call.args, dict) else {}
    pat = args.get("pattern") if "glob" in (call.tool or "").lower() else None
    pat = pat or args.get("globPattern") or args.get("glob_pattern")
    if isinstance(pat, str) and pat:
        return pat
    return None


def extract_accesses(ctx: RunContext, calls: Sequence[Any], results: Sequence[Any]) -> list[dict[str, Any]]:
    """Rows of `file_accesses` for one run (see the module docstring for the rules)."""
    em = _Emitter(ctx)
    # a persistent shell's cwd, per agent: a Claude subagent (ToolCall.agent_id) has its own shell
    persistent_cwds: dict[str | None, str | None] = {}
    by_seq: dict[int, Any] = {}
    for call in calls:
        seq = call.call_seq
        by_seq[seq] = call
        em._rid_seen_in_call = set()
        line = call.line
        base_cwd = call.cwd or ctx.session_cwd
        kind = call.kind
        if kind in EXEC_KINDS and call.command:
            persist = ctx.persistent_shell if ctx.persistent_shell is not None else call.tool in PERSISTENT_SHELL_TOOLS
            agent = getattr(call, "agent_id", None)
            start = (persistent_cwds.get(agent) or base_cwd) if persist else base_cwd
            shell = _Shell(start)
            try:
                _interpret(em, ctx, call.command, shell, seq, line, {})
            except RecursionError:  # pathological nesting: keep what was found
                pass
            if persist:
                persistent_cwds[agent] = shell.cwd
            _scan_mentions(em, call.command, seq, line, "shell", "command text", shell.cwd, skip_self=True)
            continue
        acc = STRUCT_ACCESS.get(kind)
        paths = list(call.paths or [])
        if acc:
            g = _glob_arg(call)
            if g and acc in ("search", "list"):
                paths = [p for p in paths if p != g]
                if paths:
                    paths = [p.rstrip("/") + "/" + g if not g.startswith("/") else g for p in paths]
                else:
                    paths = [g]
            for p in paths:
                if not isinstance(p, str) or not p:
                    continue
                for e in ctx.expand(p, base_cwd, {}):
                    res = ctx.resolve(e, base_cwd)
                    em.add(seq, line, p, res, acc, "arg", bool(sh.GLOB_CHARS.search(p)) and acc in ("search", "list", "read"),
                           call.tool or kind)
        else:
            for p in paths:
                if isinstance(p, str) and p:
                    res = ctx.resolve(ctx.expand(p, base_cwd, {})[0], base_cwd)
                    em.add(seq, line, p, res, "mention", "arg", False, call.tool or kind)
        strs: list[str] = []
        _arg_strings(call.args, strs, [200])
        for s in strs:
            if s and _RID_PREFILTER.search(s):
                _scan_mentions(em, s, seq, line, "arg", f"{call.tool} argument", base_cwd, skip_self=True)
    for r in results:
        text = r.text
        if not text or not _RID_PREFILTER.search(text):
            continue
        call = by_seq.get(r.call_seq) if r.call_seq is not None else None
        detail = "result"
        if call is not None:
            if call.command:
                items = [c for k, c in sh.parse(call.command[:4000]) if k == "cmd" and c is not None and c.words]
                first = None
                for c in items:
                    st = sh.unwrap(c.argv, {})
                    if st:
                        first = sp.canon(st[0])
                        break
                detail = f"result of {first or call.tool}"
            else:
                detail = f"result of {call.tool}"
        cwd = (call.cwd if call is not None else None) or ctx.session_cwd
        _scan_mentions(em, text, r.call_seq, r.line, "result", detail, cwd, skip_self=True,
                       cap=MAX_RESULT_ROWS_PER_RUN)
    return em.rows
