"""Rebuild every version of every file the agent wrote, and find every check/benchmark run.

One pass over a run's tool calls in call order.  Each call is turned into file operations (full
writes, string edits, patches, shell here-docs, sed -i, cp/mv/rm, python writes) and check or
benchmark invocations, applied in the order they happen inside the call, so a check knows which
version of solution.py was on disk when it started.  Content that cannot be established exactly
is a *gap* (content None, with the reason); gaps are later narrowed with the archived final file
(`anchor_with_final`).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from forensics.analyze.timeline import shell
from forensics.analyze.timeline.disk import Disk, Version
from forensics.analyze.timeline.edits import (Replace, apply_replaces, apply_update, apply_update_as_text, find_patch,
                                               parse_patch, reverse_replaces)
from forensics.analyze.timeline.shellwrites import ShellWrites

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
        self.default_cwd = self._guess_cwd()
        self.out.default_cwd = self.default_cwd
        # Claude Code's Bash keeps its working directory between calls ("Shell cwd was reset to X"
        # when it leaves the project); other harnesses start every command in the call's cwd
        self.persist_cwd: str | None = None
        self.external = external or (lambda key: None)
        self.disk = Disk(self.out.versions, {(c.get("cwd") or "").rstrip("/") for c in calls[:50]})
        self.shell_writes = ShellWrites(self.disk, self.resolve)

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
            self.disk.observe(self.resolve(p, cwd), "\n".join(body) + "\n")

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
                self.disk.emit(key, op.add_content, call, "patch", order)
            elif op.action == "delete":
                self.disk.emit(key, None, call, "patch", order, deleted=True)
            else:
                base = self.disk.content_of(key)
                new, why = apply_update(base, op)
                basis = "exact"
                if new is None and base is not None and self._reported_success(call):
                    new2, _ = apply_update_as_text(base, op)
                    if new2 is not None:
                        new, why, basis = new2, None, "assumed"
                if err and new is None:
                    why = err
                if op.move_to:
                    self.disk.emit(key, None, call, "patch", order, deleted=True)
                    key = self.resolve(op.move_to, cwd)
                self.disk.emit(key, new, call, "patch", order, gap_reason=why, basis=basis)
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
            self.disk.emit(key, None, call, "write", order, gap_reason="write call without readable content")
            return
        if str(args.get("mode", "")).lower() == "append":
            base = self.disk.content_of(key)
            if base is None and self.disk.known(key):
                self.disk.emit(key, None, call, "write", order, gap_reason="append to a file of unknown content")
                return
            content = (base or "") + content
        self.disk.emit(key, content, call, "write", order, basis=basis)

    def _tool_edit(self, call: dict, args: dict, cwd, order, t: str) -> None:
        p = self._path_arg(call, args)
        if not p:
            return
        key = self.resolve(p, cwd)
        sub = args.get("command")
        if sub in ("create",) and isinstance(args.get("file_text"), str):
            self.disk.emit(key, args["file_text"], call, "write", order)
            return
        if sub in ("view", "undo_edit"):
            return
        if sub == "insert":
            self.disk.emit(key, None, call, "edit", order, gap_reason="insert-at-line edit not rebuilt")
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
                    self.disk.emit(key, None, call, op, order, gap_reason="edit without old/new text")
                    return
                edits.append(Replace(old, new, bool(_get(e, ALL_KEYS))))
        else:
            old, new = _get(args, OLD_KEYS), _get(args, NEW_KEYS)
            if not isinstance(old, str) or not isinstance(new, str):
                self.disk.emit(key, None, call, op, order, gap_reason="edit without old/new text")
                return
            exp = args.get("expected_replacements")
            edits.append(Replace(old, new, bool(_get(args, ALL_KEYS)),
                                 int(exp) if isinstance(exp, (int, float)) else None))
        base = self.disk.content_of(key)
        new_content, why = apply_replaces(base, edits, creating_ok=not self.disk.known(key))
        self.disk.emit(key, new_content, call, op, order, gap_reason=why, replaces=edits)

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
            self.disk.observe(self.resolve(real[0].words[1], real[0].cwd), res[0].get("text") or "")
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
            self.shell_writes.apply(call, c, argv, order)
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
                    txt = self.disk.content_of(key)
                    if txt is None and not self.disk.known(key):
                        txt = self.external(key)
                    if txt and _WRAPPER_RX.search(txt):
                        kind, wrapper = "wrapper", key
            elif argv and (argv[0] in ("bash", "sh") and len(argv) > 1 or argv[0].endswith(".sh")):
                sp = argv[1] if argv[0] in ("bash", "sh") else argv[0]
                key = self.resolve(sp, c.cwd)
                txt = self.disk.content_of(key)
                if txt is None and not self.disk.known(key):
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
                cr.env.update(_env_in_source(self.disk.content_of(wrapper) or self.external(wrapper) or ""))
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
