"""What a shell command does to the files of a run: here-documents, cat/tee, sed -i, cp/mv/install,
rm, touch, echo, python -c / python here-documents, git checkout-like rewrites, patch(1), and any
other redirect into a tracked file (a gap, with the reason)."""

from __future__ import annotations

import posixpath
import re
from typing import Callable

from forensics.analyze.timeline import shell
from forensics.analyze.timeline.disk import Disk
from forensics.analyze.timeline.edits import python_writes, sed_script


class ShellWrites:
    def __init__(self, disk: Disk, resolve: Callable[[str, str | None], str]):
        self.disk = disk
        self.resolve = resolve

    def apply(self, call: dict, c: shell.SimpleCommand, argv: list[str], order) -> None:
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
                base = self.disk.content_of(key)
                if base is None and self.disk.known(key):
                    content, why = None, why or "append to a file of unknown content"
                elif content is not None:
                    content = (base or "") + content
            self.disk.emit(key, content, call, op, order(), gap_reason=why)

        if a0 == "cat" and outs:
            srcs = [w for w in argv[1:] if not w.startswith("-")]
            if hd is not None and not srcs:
                content, why = body_content()
                for key, app in outs:
                    write(key, content, "heredoc", why, app)
            elif srcs:
                parts = [self.disk.content_of(self.resolve(s, c.cwd)) for s in srcs]
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
                new, why = sed_script(exprs, self.disk.content_of(key), ext)
                self.disk.emit(key, new, call, "sed_i", order(), gap_reason=why)
            return
        if a0 in ("cp", "mv", "install") and len(argv) >= 3:
            ops = [w for w in argv[1:] if not w.startswith("-")]
            if "-t" in argv or len(ops) < 2:
                return
            recursive = any(w.startswith("-") and ("r" in w or "R" in w or w == "--recursive") for w in argv[1:])
            *srcs, dst = ops
            dkey = self.resolve(dst, c.cwd)
            is_dir = dst.endswith("/") or dst in (".", "..") or len(srcs) > 1 or self.disk.is_dir(dkey)
            for s in srcs:
                skey = self.resolve(s, c.cwd)
                tkey = shell.join_path(dkey, posixpath.basename(skey)) if is_dir else dkey
                if recursive and not self.disk.known(skey):
                    if self.disk.tracked_under(skey):
                        self.disk.copy_tree(call, skey, tkey, a0, order)
                    continue
                content = self.disk.content_of(skey)
                basis = "exact"
                if content is None and not self.disk.known(skey) and skey in self.disk.observed:
                    # a file the agent never wrote but printed whole earlier (cat / full Read):
                    # its shown text, with the trailing newline the display drops
                    content, basis = self.disk.observed[skey], "assumed"
                if content is None and not self.disk.tracked(tkey) and not tkey.endswith("solution.py"):
                    continue  # copy of an untracked file onto an untracked one: nothing to rebuild
                why = None if content is not None else "source of the copy is not in the transcript"
                self.disk.emit(tkey, content, call, "mv" if a0 == "mv" else "cp", order(), gap_reason=why, basis=basis)
                if a0 == "mv" and self.disk.known(skey):
                    self.disk.emit(skey, None, call, "mv", order(), deleted=True)
            return
        if a0 == "rm":
            for w in argv[1:]:
                if w.startswith("-"):
                    continue
                key = self.resolve(w, c.cwd)
                if self.disk.known(key):
                    self.disk.emit(key, None, call, "rm", order(), deleted=True)
            return
        if a0 == "touch":
            for w in argv[1:]:
                if not w.startswith("-"):
                    key = self.resolve(w, c.cwd)
                    if key not in self.disk.state or self.disk.state[key].deleted:
                        self.disk.emit(key, "", call, "touch", order())
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
            for key in list(self.disk.state):
                if any(key.endswith("/" + w) or key == self.resolve(w, c.cwd) for w in argv[2:] if not w.startswith("-")):
                    self.disk.emit(key, None, call, "unknown", order(), gap_reason=f"git {argv[1]} rewrote the file")
            return
        if a0 == "patch":
            for key in [self.resolve(w, c.cwd) for w in argv[1:] if not w.startswith("-") and "." in w]:
                self.disk.emit(key, None, call, "unknown", order(), gap_reason="patch(1) diff not rebuilt")
            return
        for key, app in outs:
            if self.disk.tracked(key) or key.endswith(".py") or key.endswith(".cu"):
                write(key, None, "unknown", f"output of `{a0}` redirected into the file", app)

    def _py_unknown(self, call, c, order, code):
        for key in list(self.disk.state):
            name = posixpath.basename(key)
            if name and name in code and re.search(r"write|open\(", code):
                self.disk.emit(key, None, call, "python_write", order(), gap_reason="python program with shell expansions writes the file")

    def _python(self, call, code: str, c: shell.SimpleCommand, order) -> None:
        writes, err = python_writes(code)
        if err:
            if re.search(r"solution\.py", code) and re.search(r"write|open\(", code):
                for key in [k for k in self.disk.state if k.endswith("/solution.py") or k == "solution.py"] or \
                        [self.resolve("solution.py", c.cwd)]:
                    self.disk.emit(key, None, call, "python_write", order(), gap_reason=err)
            return
        pending: dict[str, tuple[str | None, str | None, list | None]] = {}
        for w in writes:
            if w.path is None:
                if "solution.py" in code:
                    key = next((k for k in self.disk.state if k.endswith("/solution.py")), self.resolve("solution.py", c.cwd))
                    pending[key] = (None, w.reason or "python write target not a literal", None)
                continue
            key = self.resolve(w.path, c.cwd)
            cur = pending[key][0] if key in pending else self.disk.content_of(key)
            if w.copy_from is not None:
                content = self.disk.content_of(self.resolve(w.copy_from, c.cwd))
                pending[key] = (content, None if content is not None else "copy source unknown", None)
            elif w.content is not None:
                content = (cur or "") + w.content if w.append else w.content
                if w.append and cur is None and self.disk.known(key):
                    pending[key] = (None, "append to a file of unknown content", None)
                else:
                    pending[key] = (content, None, None)
            elif w.source_path is not None:
                skey = self.resolve(w.source_path, c.cwd)
                src = pending[skey][0] if skey in pending else self.disk.content_of(skey)
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
            self.disk.emit(key, content, call, "python_write", order(), gap_reason=why, replaces=reps)
