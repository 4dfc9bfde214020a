"""Rebuild every version of every file the agent wrote, and find every check/benchmark run.

One pass over a run's tool calls in call order.  Each call is turned into file operations (full
writes, string edits, patches, shell here-docs, sed -i, cp/mv/rm, python writes) and check or
benchmark invocations, applied in the order they happen inside the call, so a check knows which
version of solution.py was on disk when it started.  Content that cannot be established exactly
is a *gap* (content None, with the reason); gaps are later narrowed with the archived final file
(`anchor_with_final`).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from forensics.analyze.timeline import shell
from forensics.analyze.timeline.edits import (PatchOp, Replace, apply_replaces, apply_update, apply_update_as_text, find_patch,
                                               parse_patch, python_writes, reverse_replaces, sed_script)
from forensics.analyze.timeline.outcome import parse_output, split_task_output

WRITE_TOOLS = {"write", "writefile", "write_file", "create", "create_file", "createfile", "writetofile"}
EDIT_TOOLS = {"edit", "strreplacefile", "str_replace", "replace", "search_replace", "edit_file",
              "multiedit", "multi_edit", "searchreplace", "str_replace_editor", "str_replace_based_edit_tool"}
PATCH_TOOLS = {"apply_patch", "applypatch"}
OUTPUT_TOOLS = {"taskoutput", "bashoutput", "agentoutputtool", "bash_output", "getoutput"}
STDIN_TOOLS = {"write_stdin"}
EXEC_TOOLS = {"bash", "shell", "exec_command", "run_shell_command", "run_terminal_cmd", "execute", "exec",
              "local_shell", "container.exec", "terminal", "run_command"}

PATH_KEYS = ("file_path", "filePath", "path", "target_file", "filename", "file", "absolute_path", "targetFile")
CONTENT_KEYS = ("content", "contents", "file_text", "fileText", "text", "code", "new_content", "newContent")
OLD_KEYS = ("old_string", "oldString", "old_str", "old", "old_text", "oldText", "search", "find")
NEW_KEYS = ("new_string", "newString", "new_str", "new", "new_text", "newText", "replace", "replacement")
ALL_KEYS = ("replace_all", "replaceAll", "all")
CHECK_NAMES = {"check.py": "check", "benchmark.py": "benchmark"}
_WRAPPER_RX = re.compile(r"\b(check|benchmark)\.py\b|^\s*(?:import|from)\s+(check|benchmark)\b", re.M)
_ERR_RESULT_RX = re.compile(r"^(error|<tool_use_error>|<system>error|failed|string to replace not found|no changes|"
                            r"apply_patch verification failed|file has not been read)", re.I)
_BG_ID_RX = re.compile(r"running in background with ID:\s*([\w-]+)|Process running with session ID\s*(\w+)")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Version:
    path: str
    version: int
    call_seq: int | None
    line: int | None
    ts: Any
    op: str
    tool: str | None
    content: str | None
    gap_reason: str | None = None
    basis: str = "exact"          # exact | anchor | assumed | deleted
    order: tuple = (0, 0)
    replaces: list[Replace] | None = None   # for backward resolution from the final file
    deleted: bool = False

    @property
    def gap(self) -> bool:
        return self.content is None and not self.deleted

    @property
    def sha256(self) -> str | None:
        return sha256(self.content) if self.content is not None else None


@dataclass
class CheckRun:
    call_seq: int
    line: int | None
    ts: Any
    script: str                 # check | benchmark | wrapper
    command: str
    order: tuple
    env: dict[str, str]
    argv: list[str]
    filtered_by: str | None = None
    wrapper_path: str | None = None
    background: bool = False
    results: list[dict] = field(default_factory=list)
    checker_path: str | None = None
    task_id: str | None = None


@dataclass
class Rebuild:
    versions: dict[str, list[Version]] = field(default_factory=dict)
    checks: list[CheckRun] = field(default_factory=list)
    exports: list[tuple[int, int | None, str, str]] = field(default_factory=list)  # (call_seq, line, var, val)
    notes: list[dict] = field(default_factory=list)
    default_cwd: str | None = None


def _get(args: dict, keys) -> Any:
    for k in keys:
        if k in args and args[k] is not None:
            return args[k]
    return None


class Rebuilder:
    def __init__(self, calls: list[dict], results: dict[int, list[dict]], problem: str | None = None,
                 external=None):
        self.calls = calls
        self.results = results
        self.problem = problem
        self.out = Rebuild()
        self.state: dict[str, Version] = {}
        self.default_cwd = self._guess_cwd()
        self.out.default_cwd = self.default_cwd
        # Claude Code's Bash keeps its working directory between calls ("Shell cwd was reset to X"
        # when it leaves the project); other harnesses start every command in the call's cwd
        self.persist_cwd: str | None = None
        self.observed: dict[str, str] = {}   # key -> full text shown by a `cat FILE` / whole-file Read
        self.external = external or (lambda key: None)

    # ------------------------------------------------------------------ paths
    def _guess_cwd(self) -> str | None:
        for c in self.calls:
            if c.get("cwd") and c["cwd"].startswith("/"):
                return c["cwd"].rstrip("/") or "/"
        for c in self.calls:
            for p in c.get("paths") or []:
                if p and p.startswith("/") and self.problem and f"/problems/{self.problem}/" in p:
                    return p[: p.index(f"/problems/{self.problem}/") + len(f"/problems/{self.problem}")]
        for c in self.calls:
            for p in c.get("paths") or []:
                if p and p.startswith("/") and p.endswith("/solution.py"):
                    return posixpath.dirname(p)
        return None

    def call_cwd(self, call: dict) -> str | None:
        """The call's working directory, a relative one (Gemini `directory: "."`) taken against the
        session's."""
        cwd = call.get("cwd")
        if not cwd:
            return self.default_cwd
        if not cwd.startswith("/") and not cwd.startswith("~") and self.default_cwd:
            return shell.join_path(self.default_cwd, cwd)
        return cwd

    def resolve(self, path: str, cwd: str | None) -> str:
        path = path.strip()
        base = cwd or self.default_cwd
        if base and not base.startswith(("/", "~")) and self.default_cwd:
            base = shell.join_path(self.default_cwd, base)
        return shell.join_path(base, path)

    # ------------------------------------------------------------------ versions
    def _emit(self, key: str, content: str | None, call: dict, op: str, order: tuple,
              gap_reason: str | None = None, basis: str = "exact", replaces=None, deleted=False) -> None:
        prev = self.state.get(key)
        if prev is not None and not deleted and not prev.deleted and content is not None \
                and prev.content == content and basis == prev.basis:
            return  # no change on disk: not a new version
        if prev is not None and deleted and prev.deleted:
            return
        vs = self.out.versions.setdefault(key, [])
        v = Version(key, len(vs) + 1, call.get("call_seq"), call.get("line"), call.get("ts"), op,
                    call.get("tool"), content, gap_reason if content is None and not deleted else None,
                    "deleted" if deleted else (basis if content is not None else "exact"), order, replaces, deleted)
        vs.append(v)
        self.state[key] = v

    def content_of(self, key: str) -> str | None:
        v = self.state.get(key)
        if v is None or v.deleted:
            return None
        return v.content

    def _known(self, key: str) -> bool:
        return key in self.state and not self.state[key].deleted

    # ------------------------------------------------------------------ main loop
    def run(self) -> Rebuild:
        bg: dict[str, CheckRun] = {}
        for call in self.calls:
            seq = call.get("call_seq")
            tool = (call.get("tool") or "")
            t = tool.lower()
            args = call.get("args") or {}
            if not isinstance(args, dict):
                args = {"raw": args}
            res = self.results.get(seq, [])
            failed = bool(res) and all(self._result_failed(r, t) for r in res)
            cwd = self.call_cwd(call)
            if tool == "Bash" and self.persist_cwd:
                cwd = self.persist_cwd
            sub = [0]

            def order():
                sub[0] += 1
                return (seq or 0, sub[0])

            if t in ("read", "readfile", "read_file", "view") and res and not failed:
                self._observe_read(call, args, cwd, res)
                continue
            if t in OUTPUT_TOOLS or t in STDIN_TOOLS:
                key = str(_get(args, ("task_id", "bash_id", "shell_id", "session_id", "id")) or "")
                cr = bg.get(key)
                if cr is not None:
                    cr.results.extend(res)
                    cr.background = True
                if t in STDIN_TOOLS and cr is None:
                    chars = args.get("chars") or ""
                    if chars.strip():
                        self._exec(call, chars, cwd, order, bg)
                continue
            patch_text = None
            if t in PATCH_TOOLS or (t == "patch" and not call.get("command")):
                patch_text = self._patch_text(args)
            if patch_text is not None:
                if not failed:
                    self._apply_patch(call, patch_text, cwd, order())
                continue
            if t in WRITE_TOOLS or (t == "edit" and "streamContent" in args):
                if not failed:
                    self._tool_write(call, args, cwd, order(), t)
                continue
            if t in EDIT_TOOLS:
                if not failed:
                    self._tool_edit(call, args, cwd, order(), t)
                continue
            command = call.get("command")
            if command is None and (t in EXEC_TOOLS or call.get("kind") == "exec"):
                command = _get(args, ("command", "cmd"))
                if isinstance(command, list):
                    command = " ".join(str(x) for x in command)
                elif not isinstance(command, str):  # a number, an object: no shell command to follow
                    command = None
            if command:
                self._exec(call, command, cwd, order, bg)
        return self.out

    def _observe(self, key: str, text: str) -> None:
        if not text.strip() or text.startswith("(Bash completed") or self._known(key):
            return
        self.observed[key] = text if text.endswith("\n") else text + "\n"

    _NUMBERED = re.compile(r"^\s*(\d+)(?:\t|\u2192)(.*)$")

    def _observe_read(self, call: dict, args: dict, cwd, res: list[dict]) -> None:
        """A Read of a whole file (no offset/limit) whose result is numbered `N<TAB>line` text."""
        if any(args.get(k) for k in ("offset", "limit", "line", "start_line", "end_line")):
            return
        p = self._path_arg(call, args)
        if not p:
            return
        lines = (res[-1].get("text") or "").split("\n")
        body = []
        for k, ln in enumerate(lines, 1):
            m = self._NUMBERED.match(ln)
            if not m or int(m.group(1)) != k:
                if ln.strip() == "" and k == len(lines):
                    break
                return
            body.append(m.group(2))
        if body:
            self._observe(self.resolve(p, cwd), "\n".join(body) + "\n")

    def _reported_success(self, call: dict) -> bool:
        res = self.results.get(call.get("call_seq"), [])
        return any(re.search(r"^\s*(Success\.|Done!?|M |Updated the following files)", r.get("text") or "", re.M)
                   and not r.get("is_error") for r in res)

    @staticmethod
    def _result_failed(r: dict, tool: str) -> bool:
        if r.get("is_error"):
            return True
        txt = (r.get("text") or "").lstrip()[:200]
        return bool(_ERR_RESULT_RX.match(txt))

    # ------------------------------------------------------------------ structured tools
    def _patch_text(self, args: dict) -> str | None:
        for k in ("input", "patch", "raw", "content", "diff", "command", "cmd"):
            v = args.get(k)
            if isinstance(v, list):
                v = "\n".join(str(x) for x in v)
            if isinstance(v, str) and "*** Begin Patch" in v:
                return find_patch(v)
        for v in args.values():
            if isinstance(v, str) and "*** Begin Patch" in v:
                return find_patch(v)
        return None

    def _apply_patch(self, call: dict, text: str, cwd: str | None, order: tuple) -> None:
        ops, err = parse_patch(text)
        for op in ops:
            key = self.resolve(op.path, cwd)
            if op.action == "add":
                self._emit(key, op.add_content, call, "patch", order)
            elif op.action == "delete":
                self._emit(key, None, call, "patch", order, deleted=True)
            else:
                base = self.content_of(key)
                new, why = apply_update(base, op)
                basis = "exact"
                if new is None and base is not None and self._reported_success(call):
                    new2, _ = apply_update_as_text(base, op)
                    if new2 is not None:
                        new, why, basis = new2, None, "assumed"
                if err and new is None:
                    why = err
                if op.move_to:
                    self._emit(key, None, call, "patch", order, deleted=True)
                    key = self.resolve(op.move_to, cwd)
                self._emit(key, new, call, "patch", order, gap_reason=why, basis=basis)
        if err and not ops:
            self.out.notes.append({"call_seq": call.get("call_seq"), "note": f"apply_patch not parsed: {err}"})

    def _path_arg(self, call: dict, args: dict) -> str | None:
        p = _get(args, PATH_KEYS)
        if isinstance(p, str) and p:
            return p
        ps = call.get("paths") or []
        return ps[0] if ps else None

    def _tool_write(self, call: dict, args: dict, cwd, order, t: str) -> None:
        p = self._path_arg(call, args)
        if not p:
            return
        key = self.resolve(p, cwd)
        basis = "exact"
        content = _get(args, CONTENT_KEYS)
        if content is None and "streamContent" in args:
            # Cursor edit{path, streamContent}: read as the full new content (not confirmed by the spec)
            content, basis = args.get("streamContent"), "assumed"
        if not isinstance(content, str):
            self._emit(key, None, call, "write", order, gap_reason="write call without readable content")
            return
        if str(args.get("mode", "")).lower() == "append":
            base = self.content_of(key)
            if base is None and self._known(key):
                self._emit(key, None, call, "write", order, gap_reason="append to a file of unknown content")
                return
            content = (base or "") + content
        self._emit(key, content, call, "write", order, basis=basis)

    def _tool_edit(self, call: dict, args: dict, cwd, order, t: str) -> None:
        p = self._path_arg(call, args)
        if not p:
            return
        key = self.resolve(p, cwd)
        sub = args.get("command")
        if sub in ("create",) and isinstance(args.get("file_text"), str):
            self._emit(key, args["file_text"], call, "write", order)
            return
        if sub in ("view", "undo_edit"):
            return
        if sub == "insert":
            self._emit(key, None, call, "edit", order, gap_reason="insert-at-line edit not rebuilt")
            return
        edits: list[Replace] = []
        raw = args.get("edits")
        if raw is None and "edit" in args:
            raw = args["edit"]          # Kimi StrReplaceFile{path, edit: {old,new,replace_all} | [...]}
        if isinstance(raw, dict):
            raw = [raw]
        op = "edit"
        if isinstance(raw, list):
            op = "multiedit" if len(raw) > 1 or "multi" in t else "edit"
            for e in raw:
                if not isinstance(e, dict):
                    continue
                old, new = _get(e, OLD_KEYS), _get(e, NEW_KEYS)
                if not isinstance(old, str) or not isinstance(new, str):
                    self._emit(key, None, call, op, order, gap_reason="edit without old/new text")
                    return
                edits.append(Replace(old, new, bool(_get(e, ALL_KEYS))))
        else:
            old, new = _get(args, OLD_KEYS), _get(args, NEW_KEYS)
            if not isinstance(old, str) or not isinstance(new, str):
                self._emit(key, None, call, op, order, gap_reason="edit without old/new text")
                return
            exp = args.get("expected_replacements")
            edits.append(Replace(old, new, bool(_get(args, ALL_KEYS)),
                                 int(exp) if isinstance(exp, (int, float)) else None))
        base = self.content_of(key)
        new_content, why = apply_replaces(base, edits, creating_ok=not self._known(key))
        self._emit(key, new_content, call, op, order, gap_reason=why, replaces=edits)

    # ------------------------------------------------------------------ shell
    def _exec(self, call: dict, command: str, cwd, order, bg: dict) -> None:
        patch = find_patch(command) if "*** Begin Patch" in command else None
        if patch is not None and re.search(r"(^|[\s;&|(])apply_patch\b", command):
            self._apply_patch(call, patch, cwd, order())
            return
        try:
            cmds = shell.parse(command, cwd)
        except Exception as e:  # defensive: never let one odd command stop the rebuild
            self.out.notes.append({"call_seq": call.get("call_seq"), "note": f"command not parsed: {e}"})
            return
        call_env: dict[str, str] = {}
        res = self.results.get(call.get("call_seq"), [])
        if (call.get("tool") or "") == "Bash":
            end_cwd = cwd
            for c in cmds:
                if c.argv0 == "cd" and not c.pipe_in and not c.pipe_out and not c.background:
                    end_cwd = shell.cd(c.cwd, c.words)
            for r in res:
                m = re.search(r"Shell cwd was reset to (\S+)", r.get("text") or "")
                if m:
                    end_cwd = m.group(1)
            if end_cwd != cwd:
                self.persist_cwd = end_cwd
        real = [c for c in cmds if c.words and c.argv0 != "cd"]
        if len(real) == 1 and real[0].argv0 == "cat" and not real[0].redirects and not real[0].pipe_out \
                and len(real[0].words) == 2 and not real[0].words[1].startswith("-") and len(res) == 1 \
                and not res[0].get("is_error"):
            self._observe(self.resolve(real[0].words[1], real[0].cwd), res[0].get("text") or "")
        for i, c in enumerate(cmds):
            if not c.words and not c.redirects:
                continue
            if c.words and c.words[0] == "export":
                for w in c.words[1:]:
                    if "=" in w:
                        k, _, v = w.partition("=")
                        call_env[k] = v
                        self.out.exports.append((call.get("call_seq"), call.get("line"), k, v))
                continue
            argv = shell.unwrap(c.words, c.env)   # `timeout 60 env X=1 python ...`: X=1 is the run's too
            self._shell_writes(call, c, argv, order)
            script, _rest = shell.python_script(argv)
            kind = None
            wrapper = None
            checker = None
            if script:
                base = script.rsplit("/", 1)[-1]
                if base in CHECK_NAMES:
                    kind = CHECK_NAMES[base]
                    checker = self.resolve(script, c.cwd)
                else:
                    key = self.resolve(script, c.cwd)
                    txt = self.content_of(key)
                    if txt is None and not self._known(key):
                        txt = self.external(key)
                    if txt and _WRAPPER_RX.search(txt):
                        kind, wrapper = "wrapper", key
            elif argv and (argv[0] in ("bash", "sh") and len(argv) > 1 or argv[0].endswith(".sh")):
                sp = argv[1] if argv[0] in ("bash", "sh") else argv[0]
                key = self.resolve(sp, c.cwd)
                txt = self.content_of(key)
                if txt is None and not self._known(key):
                    txt = self.external(key)
                if txt and _WRAPPER_RX.search(txt):
                    kind, wrapper = "wrapper", key
            if kind is None:
                continue
            filt = None
            j = i
            while j < len(cmds) and cmds[j].pipe_out and j + 1 < len(cmds):
                j += 1
                nxt = shell.unwrap(cmds[j].words)
                if nxt:
                    filt = filt or nxt[0].rsplit("/", 1)[-1]
            if filt is None and c.stdout_files():
                filt = "redirect:" + c.stdout_files()[0][0]
            cr = CheckRun(call.get("call_seq"), call.get("line"), call.get("ts"), kind, command, order(),
                          {**call_env, **c.env}, argv, filt, wrapper, False, list(res), checker)
            if wrapper:
                cr.env.update(_env_in_source(self.content_of(wrapper) or self.external(wrapper) or ""))
            self.out.checks.append(cr)
            if c.background or call.get("background"):
                cr.background = True
            for r in res:
                m = _BG_ID_RX.search(r.get("text") or "")
                tid = r.get("running_session") or (m and (m.group(1) or m.group(2)))
                if tid:
                    cr.task_id = str(tid)
                    cr.background = True
                    bg[str(tid)] = cr

    def _shell_writes(self, call: dict, c: shell.SimpleCommand, argv: list[str], order) -> None:
        a0 = argv[0].rsplit("/", 1)[-1] if argv else ""
        outs = [(self.resolve(p, c.cwd), app) for p, app in c.stdout_files() if not p.startswith("/dev/")]
        hd = c.heredoc()

        def body_content():
            if hd is None:
                return None, "no here-document"
            if hd.op == "<<<":
                return (hd.target + "\n", None) if hd.quoted else (None, "here-string with shell expansions")
            if not hd.quoted and re.search(r"\$[({A-Za-z_0-9@*#?]|`", hd.target):
                return None, "unquoted here-document with shell expansions"
            body = hd.target
            if not hd.quoted:
                body = body.replace("\\$", "$").replace("\\`", "`").replace("\\\\", "\\")
            return body, None

        def write(key, content, op, why=None, append=False):
            if append:
                base = self.content_of(key)
                if base is None and self._known(key):
                    content, why = None, why or "append to a file of unknown content"
                elif content is not None:
                    content = (base or "") + content
            self._emit(key, content, call, op, order(), gap_reason=why)

        if a0 == "cat" and outs:
            srcs = [w for w in argv[1:] if not w.startswith("-")]
            if hd is not None and not srcs:
                content, why = body_content()
                for key, app in outs:
                    write(key, content, "heredoc", why, app)
            elif srcs:
                parts = [self.content_of(self.resolve(s, c.cwd)) for s in srcs]
                content = "".join(parts) if all(p is not None for p in parts) else None
                for key, app in outs:
                    write(key, content, "cp", None if content is not None else "cat of a file whose content is unknown", app)
            elif c.pipe_in:
                for key, app in outs:
                    write(key, None, "heredoc", "cat of piped input", app)
            return
        if a0 == "tee":
            files = [w for w in argv[1:] if not w.startswith("-")]
            app = "-a" in argv[1:] or "--append" in argv[1:]
            if hd is not None:
                content, why = body_content()
            else:
                content, why = None, "tee of piped command output"
            for f in files:
                if f.startswith("/dev/"):
                    continue
                write(self.resolve(f, c.cwd), content, "tee", why, app)
            for key, app2 in outs:
                write(key, content, "tee", why, app2)
            return
        if a0 == "sed" and any(w == "-i" or w.startswith("-i") or w == "--in-place" for w in argv[1:]):
            exprs, files, ext = [], [], False
            k = 1
            while k < len(argv):
                w = argv[k]
                if w in ("-e", "--expression") and k + 1 < len(argv):
                    exprs.append(argv[k + 1])
                    k += 2
                    continue
                if w in ("-E", "-r", "--regexp-extended"):
                    ext = True
                elif w.startswith("-i") or w == "--in-place":
                    if w == "-i" and k + 1 < len(argv) and argv[k + 1] == "":
                        k += 1
                elif w.startswith("-") and len(w) > 1:
                    if "E" in w or "r" in w:
                        ext = True
                elif not exprs and not files:
                    exprs.append(w)
                else:
                    files.append(w)
                k += 1
            for f in files:
                key = self.resolve(f, c.cwd)
                new, why = sed_script(exprs, self.content_of(key), ext)
                self._emit(key, new, call, "sed_i", order(), gap_reason=why)
            return
        if a0 in ("cp", "mv", "install") and len(argv) >= 3:
            ops = [w for w in argv[1:] if not w.startswith("-")]
            if "-t" in argv or len(ops) < 2:
                return
            recursive = any(w.startswith("-") and ("r" in w or "R" in w or w == "--recursive") for w in argv[1:])
            *srcs, dst = ops
            dkey = self.resolve(dst, c.cwd)
            is_dir = dst.endswith("/") or dst in (".", "..") or len(srcs) > 1 or self._is_dir(dkey)
            for s in srcs:
                skey = self.resolve(s, c.cwd)
                tkey = shell.join_path(dkey, posixpath.basename(skey)) if is_dir else dkey
                if recursive and not self._known(skey):
                    if self._tracked_under(skey):
                        self._copy_tree(call, skey, tkey, a0, order)
                    continue
                content = self.content_of(skey)
                basis = "exact"
                if content is None and not self._known(skey) and skey in self.observed:
                    # a file the agent never wrote but printed whole earlier (cat / full Read):
                    # its shown text, with the trailing newline the display drops
                    content, basis = self.observed[skey], "assumed"
                if content is None and not self._tracked(tkey) and not tkey.endswith("solution.py"):
                    continue  # copy of an untracked file onto an untracked one: nothing to rebuild
                why = None if content is not None else "source of the copy is not in the transcript"
                self._emit(tkey, content, call, "mv" if a0 == "mv" else "cp", order(), gap_reason=why, basis=basis)
                if a0 == "mv" and self._known(skey):
                    self._emit(skey, None, call, "mv", order(), deleted=True)
            return
        if a0 == "rm":
            for w in argv[1:]:
                if w.startswith("-"):
                    continue
                key = self.resolve(w, c.cwd)
                if self._known(key):
                    self._emit(key, None, call, "rm", order(), deleted=True)
            return
        if a0 == "touch":
            for w in argv[1:]:
                if not w.startswith("-"):
                    key = self.resolve(w, c.cwd)
                    if key not in self.state or self.state[key].deleted:
                        self._emit(key, "", call, "touch", order())
            return
        if shell.is_python(a0) and shell.python_script(argv)[0] is None and (
                ("-c" in argv) or hd is not None or (len(argv) >= 2 and argv[1] == "-")):
            code = None
            if "-c" in argv:
                k = argv.index("-c")
                code = argv[k + 1] if k + 1 < len(argv) else None
            elif hd is not None:
                code, why = body_content()
                if code is None:
                    self._py_unknown(call, c, order, hd.target)
                    return
            if code is not None:
                self._python(call, code, c, order)
            for key, app in outs:
                write(key, None, "python_write", "stdout of a python program", app)
            return
        if a0 in ("echo", "printf") and outs:
            content, why = None, "printf output not rebuilt"
            if a0 == "echo":
                words = argv[1:]
                nl = "\n"
                if words and words[0] == "-n":
                    words, nl = words[1:], ""
                if words and words[0] in ("-e", "-E"):
                    content, why = None, "echo -e output not rebuilt"
                else:
                    content, why = " ".join(words) + nl, None
            for key, app in outs:
                write(key, content, "echo", why, app)
            return
        if a0 == "git" and len(argv) > 1 and argv[1] in ("checkout", "restore", "stash", "reset", "apply"):
            for key in list(self.state):
                if any(key.endswith("/" + w) or key == self.resolve(w, c.cwd) for w in argv[2:] if not w.startswith("-")):
                    self._emit(key, None, call, "unknown", order(), gap_reason=f"git {argv[1]} rewrote the file")
            return
        if a0 == "patch":
            for key in [self.resolve(w, c.cwd) for w in argv[1:] if not w.startswith("-") and "." in w]:
                self._emit(key, None, call, "unknown", order(), gap_reason="patch(1) diff not rebuilt")
            return
        for key, app in outs:
            if self._tracked(key) or key.endswith(".py") or key.endswith(".cu"):
                write(key, None, "unknown", f"output of `{a0}` redirected into the file", app)

    def _py_unknown(self, call, c, order, code):
        for key in list(self.state):
            name = posixpath.basename(key)
            if name and name in code and re.search(r"write|open\(", code):
                self._emit(key, None, call, "python_write", order(), gap_reason="python program with shell expansions writes the file")

    def _python(self, call, code: str, c: shell.SimpleCommand, order) -> None:
        writes, err = python_writes(code)
        if err:
            if re.search(r"solution\.py", code) and re.search(r"write|open\(", code):
                for key in [k for k in self.state if k.endswith("/solution.py") or k == "solution.py"] or \
                        [self.resolve("solution.py", c.cwd)]:
                    self._emit(key, None, call, "python_write", order(), gap_reason=err)
            return
        pending: dict[str, tuple[str | None, str | None, list | None]] = {}
        for w in writes:
            if w.path is None:
                if "solution.py" in code:
                    key = next((k for k in self.state if k.endswith("/solution.py")), self.resolve("solution.py", c.cwd))
                    pending[key] = (None, w.reason or "python write target not a literal", None)
                continue
            key = self.resolve(w.path, c.cwd)
            cur = pending[key][0] if key in pending else self.content_of(key)
            if w.copy_from is not None:
                content = self.content_of(self.resolve(w.copy_from, c.cwd))
                pending[key] = (content, None if content is not None else "copy source unknown", None)
            elif w.content is not None:
                content = (cur or "") + w.content if w.append else w.content
                if w.append and cur is None and self._known(key):
                    pending[key] = (None, "append to a file of unknown content", None)
                else:
                    pending[key] = (content, None, None)
            elif w.source_path is not None:
                skey = self.resolve(w.source_path, c.cwd)
                src = pending[skey][0] if skey in pending else self.content_of(skey)
                if src is None:
                    pending[key] = (None, "python program rewrites the file from content not in the transcript",
                                    w.replaces if skey == key else None)
                else:
                    new = src
                    for r in w.replaces or []:
                        new = new.replace(r.old, r.new)   # str.replace: a missing text changes nothing
                    pending[key] = (new, None, w.replaces if skey == key else None)
            else:
                pending[key] = (None, w.reason or "python write not a literal", None)
        for key, (content, why, reps) in pending.items():
            self._emit(key, content, call, "python_write", order(), gap_reason=why, replaces=reps)

    def _tracked(self, key: str) -> bool:
        return key in self.state

    def _is_dir(self, key: str) -> bool:
        pre = key.rstrip("/") + "/"
        if any(k.startswith(pre) for k in self.state):
            return True
        return any((c.get("cwd") or "").rstrip("/") == key.rstrip("/") for c in self.calls[:50])

    def _tracked_under(self, key: str) -> bool:
        pre = key.rstrip("/") + "/"
        return any(k.startswith(pre) and self._known(k) for k in self.state)

    def _copy_tree(self, call, skey, tkey, a0, order):
        pre = skey.rstrip("/") + "/"
        for k in list(self.state):
            if k.startswith(pre) and self._known(k):
                dst = tkey.rstrip("/") + "/" + k[len(pre):]
                self._emit(dst, self.content_of(k), call, a0, order())


_ENV_SRC_RX = re.compile(r"""environ(?:\[\s*|\.setdefault\(\s*|\.update\(\s*\{?\s*)['"](KBH_\w+)['"]\s*[\],:]\s*=?\s*['"]([^'"]*)['"]""")


def _env_in_source(text: str) -> dict[str, str]:
    """KBH_* settings made by a wrapper script (os.environ['KBH_NUMERIC_STRESS'] = '0', export X=0)."""
    out = {m.group(1): m.group(2) for m in _ENV_SRC_RX.finditer(text)}
    for m in re.finditer(r"(?:^|\s)(?:export\s+)?(KBH_\w+)=(\S*)", text):
        out.setdefault(m.group(1), m.group(2).strip("'\""))
    return out


# ---------------------------------------------------------------------- anchoring

def anchor_with_final(versions: list[Version], final: str | None) -> int:
    """Resolve gaps by walking backwards from the archived final content.

    If the last version of the file is a gap, or a chain of reversible edits follows the last gap,
    assume the last in-session version is the archived file and undo each edit in turn while it
    reproduces the later content exactly.  Returns how many versions were resolved."""
    if final is None or not versions:
        return 0
    live = [v for v in versions if not v.deleted]
    if not live or not any(v.gap for v in live):
        return 0
    last = versions[-1]
    if last.deleted:
        return 0
    if last.content is not None and last.content != final:
        return 0
    resolved = 0
    after = final
    if last.gap:
        # only an edit whose new text sits in the final file, and whose undoing reproduces it, ties
        # the last (unknown) version to the archived file; anything else stays a gap
        if not last.replaces or last.op not in ("edit", "multiedit", "python_write"):
            return 0
        if reverse_replaces(final, last.replaces)[0] is None:
            return 0
        last.content, last.gap_reason, last.basis = final, None, "anchor"
        resolved += 1
    idx = versions.index(last)
    k = idx
    while k > 0:
        cur = versions[k]
        prev = versions[k - 1]
        if prev.deleted:
            break
        if cur.replaces and cur.op in ("edit", "multiedit", "python_write"):
            before, why = reverse_replaces(after, cur.replaces)
        else:
            break
        if before is None:
            break
        if prev.content is None:
            prev.content, prev.gap_reason, prev.basis = before, None, "anchor"
            resolved += 1
        elif prev.content != before:
            break
        after = before
        k -= 1
    return resolved
