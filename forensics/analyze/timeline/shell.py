"""A small, forgiving shell-command reader for the timeline.

It does not execute anything.  It splits a command string the way bash would for the cases agents
actually write (spec section 9): ``cd x && ...``, env prefixes, pipes, ``;``/``&&``/``||``,
redirections (``>``, ``>>``, ``2>&1``, ``&>``), quoting, here-documents (``<<EOF``, ``<<'EOF'``,
``<<-EOF``), ``for ... do ...; done`` loops and ``bash -c '...'``.  Anything it does not understand
stays as plain words, so the callers can fall back to "unknown" rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEREDOC_RE = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]+)'|\"([^\"\n]+)\"|\\?([A-Za-z_][A-Za-z0-9_]*))")
_PLACEHOLDER_RE = re.compile(r"^\x00HD(\d+)\x00$")
_OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "\n", "(", ")")
_KEYWORDS = {"do", "then", "else", "elif", "fi", "done", "esac", "{", "}", "!", "time"}
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass
class Redirect:
    op: str            # '>', '>>', '<', '<<' (here-doc), '2>', '&>', '>&'
    target: str        # file name, fd ('1', '2') or here-doc body for '<<'
    fd: int = 1
    quoted: bool = True  # here-doc delimiter was quoted (no $-expansion in the body)


@dataclass
class SimpleCommand:
    words: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)   # VAR=val prefixes (and `env VAR=val`)
    pipe_in: bool = False     # stdin comes from the previous command's stdout
    pipe_out: bool = False    # stdout goes to the next command
    background: bool = False  # ended with '&'
    cwd: str | None = None    # working directory after `cd` earlier in the same command string

    @property
    def argv0(self) -> str:
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""

    def heredoc(self) -> Redirect | None:
        for r in self.redirects:
            if r.op == "<<":
                return r
        return None

    def stdout_files(self) -> list[tuple[str, bool]]:
        """Files stdout is redirected into: [(path, append)]."""
        out = []
        for r in self.redirects:
            if r.op in (">", ">>", "&>", ">|") and r.fd in (1, -1) and not r.target.isdigit():
                out.append((r.target, r.op == ">>"))
        return out


def extract_heredocs(text: str) -> tuple[str, list[tuple[str, bool]]]:
    """Replace each here-doc operator by a placeholder word and cut its body out of the text."""
    lines = text.split("\n")
    out: list[str] = []
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        pending: list[tuple[str, bool, int]] = []

        def repl(m: re.Match) -> str:
            if _inside_quotes(line, m.start()):
                return m.group(0)
            delim = m.group(2) or m.group(3) or m.group(4)
            pending.append((delim, m.group(1) == "-", m.group(4) is None or m.group(0).count("\\") > 0))
            return f" \x00HD{len(bodies) + len(pending) - 1}\x00 "

        new_line = _HEREDOC_RE.sub(repl, line)
        out.append(new_line)
        i += 1
        for delim, strip_tabs, quoted in pending:
            body: list[str] = []
            while i < len(lines):
                cand = lines[i].lstrip("\t") if strip_tabs else lines[i]
                if cand == delim or cand.rstrip() == delim:
                    i += 1
                    break
                body.append(cand)
                i += 1
            bodies.append(("\n".join(body) + ("\n" if body else ""), quoted))
    return "\n".join(out), bodies


def _inside_quotes(line: str, pos: int) -> bool:
    q = None
    i = 0
    while i < pos:
        c = line[i]
        if q is None:
            if c == "\\":
                i += 2
                continue
            if c in "'\"":
                q = c
        elif c == q:
            q = None
        elif q == '"' and c == "\\":
            i += 2
            continue
        i += 1
    return q is not None


def tokenize(text: str) -> list[tuple[str, str]]:
    """-> [(kind, value)] with kind 'w' (word, quotes removed), 'op' or 'redir'."""
    toks: list[tuple[str, str]] = []
    i, n = 0, len(text)
    word: list[str] = []
    in_word = False

    def flush():
        nonlocal word, in_word
        if in_word:
            toks.append(("w", "".join(word)))
        word, in_word = [], False

    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i += 2
                continue
            word.append(text[i + 1])
            in_word = True
            i += 2
            continue
        if c == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            word.append(text[i + 1:j])
            in_word = True
            i = j + 1
            continue
        if c == "$" and i + 1 < n and text[i + 1] == "'":
            j = i + 2
            buf = []
            while j < n and text[j] != "'":
                if text[j] == "\\" and j + 1 < n:
                    buf.append({"n": "\n", "t": "\t", "'": "'", "\\": "\\"}.get(text[j + 1], "\\" + text[j + 1]))
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            word.append("".join(buf))
            in_word = True
            i = j + 1
            continue
        if c == '"':
            j = i + 1
            buf = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`\n':
                    if text[j + 1] != "\n":
                        buf.append(text[j + 1])
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            word.append("".join(buf))
            in_word = True
            i = j + 1
            continue
        if c == "$" and i + 1 < n and text[i + 1] == "(":
            depth, j = 0, i + 1
            while j < n:
                if text[j] == "(":
                    depth += 1
                elif text[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            word.append(text[i:j + 1])
            in_word = True
            i = j + 1
            continue
        if c == "`":
            j = text.find("`", i + 1)
            j = n if j < 0 else j
            word.append(text[i:j + 1])
            in_word = True
            i = j + 1
            continue
        if c in " \t\r":
            flush()
            i += 1
            continue
        if c == "#" and not in_word:
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        # redirections, possibly with a leading fd number
        if c in "<>" or (c == "&" and i + 1 < n and text[i + 1] == ">"):
            fd = ""
            if in_word and "".join(word).isdigit() and (i == 0 or text[i - 1].isdigit()):
                fd = "".join(word)
                word, in_word = [], False
            flush()
            m = re.match(r"&>>|&>|>>|>\||>&|<&|<>|>|<", text[i:])
            op = m.group(0)
            toks.append(("redir", (fd or "") + op))
            i += len(op)
            continue
        matched = False
        for op in _OPERATORS:
            if text.startswith(op, i):
                flush()
                toks.append(("op", op))
                i += len(op)
                matched = True
                break
        if matched:
            continue
        word.append(c)
        in_word = True
        i += 1
    flush()
    return toks


def parse(command: str, cwd: str | None = None) -> list[SimpleCommand]:
    """Split a command string into simple commands, in order, with `cd` applied to later ones."""
    text, bodies = extract_heredocs(command or "")
    toks = tokenize(text)
    cmds: list[SimpleCommand] = []
    cur = SimpleCommand(cwd=cwd)
    pipe_next = False
    i = 0

    def finish(op: str | None):
        nonlocal cur, pipe_next, cwd
        if cur.words or cur.redirects:
            if op in ("|", "|&"):
                cur.pipe_out = True
            if op == "&":
                cur.background = True
            _split_env(cur)
            if cur.argv0 == "cd" and not cur.pipe_out and not cur.pipe_in:
                target = cur.words[1] if len(cur.words) > 1 else "~"
                cwd = join_path(cwd, target)
            cmds.append(cur)
        cur = SimpleCommand(cwd=cwd)
        cur.pipe_in = op in ("|", "|&")

    while i < len(toks):
        kind, val = toks[i]
        if kind == "op":
            finish(val)
        elif kind == "redir":
            target = toks[i + 1][1] if i + 1 < len(toks) and toks[i + 1][0] == "w" else ""
            if target:
                i += 1
            m = re.match(r"^(\d*)(.*)$", val)
            fd_s, op = m.group(1), m.group(2)
            fd = int(fd_s) if fd_s else (-1 if op.startswith("&") else (0 if op.startswith("<") else 1))
            if op in (">&",) and target.isdigit():
                cur.redirects.append(Redirect(">&", target, fd))
            else:
                cur.redirects.append(Redirect(op if op != "&>>" else ">>", target, fd))
        else:
            m = _PLACEHOLDER_RE.match(val)
            if m:
                body, quoted = bodies[int(m.group(1))]
                cur.redirects.append(Redirect("<<", body, 0, quoted))
            elif not cur.words and val in _KEYWORDS:
                pass
            elif not cur.words and val in ("for", "while", "until", "if", "case", "select"):
                # skip the loop header up to the next separator; the body commands follow `do`/`then`
                j = i + 1
                while j < len(toks) and toks[j] not in (("op", ";"), ("op", "\n")) and toks[j] != ("w", "do"):
                    j += 1
                i = j
                if i < len(toks) and toks[i] == ("w", "do"):
                    i += 1
                continue
            else:
                cur.words.append(val)
        i += 1
    finish(None)
    # `bash -c '...'` / `sh -c`: inline the inner commands in place
    out: list[SimpleCommand] = []
    for c in cmds:
        if c.argv0 in ("bash", "sh", "zsh") and len(c.words) >= 3 and c.words[1] in ("-c", "-lc", "-ec", "-xc"):
            inner = parse(c.words[2], c.cwd)
            for ic in inner:
                ic.env = {**c.env, **ic.env}
            if inner:
                inner[-1].pipe_out = inner[-1].pipe_out or c.pipe_out
                inner[0].pipe_in = inner[0].pipe_in or c.pipe_in
                inner[-1].redirects += c.redirects
            out.extend(inner)
        else:
            out.append(c)
    return out


def _split_env(c: SimpleCommand) -> None:
    """Move leading VAR=val words (and `env VAR=val ...`) from words into env.  A command made of
    assignments only becomes words ['__assign__', ...] (it affects no child unless exported)."""
    w = c.words
    k = 0
    while k < len(w) and _ASSIGN_RE.match(w[k]):
        name, _, val = w[k].partition("=")
        c.env[name] = val
        k += 1
    if k and k == len(w):
        c.words = ["__assign__", *w]
        c.env = {}
        return
    w = w[k:]
    if w and w[0] == "env":
        k = 1
        while k < len(w) and (w[k].startswith("-") or _ASSIGN_RE.match(w[k])):
            if _ASSIGN_RE.match(w[k]):
                name, _, val = w[k].partition("=")
                c.env[name] = val
            k += 1
        w = w[k:]
    c.words = w


def unwrap(words: list[str]) -> list[str]:
    """Strip launcher prefixes: timeout N, nice, stdbuf, time, nohup, uv run [--opts], xargs...

    Returns the argv that actually runs (e.g. ['python', 'check.py'])."""
    w = list(words)
    changed = True
    while w and changed:
        changed = False
        a0 = w[0].rsplit("/", 1)[-1]
        if a0 == "timeout":
            w = w[1:]
            while w and w[0].startswith("-"):
                opt = w.pop(0)
                if opt in ("-s", "-k", "--signal", "--kill-after") and w:
                    w.pop(0)
            if w and re.match(r"^\d+(\.\d+)?[smhd]?$", w[0]):
                w = w[1:]
            changed = True
        elif a0 in ("nice", "nohup", "stdbuf", "time", "command", "exec", "builtin", "unbuffer", "srun"):
            w = w[1:]
            while w and w[0].startswith("-"):
                opt = w.pop(0)
                if a0 == "nice" and opt == "-n" and w:
                    w.pop(0)
            changed = True
        elif a0 == "env":
            w = w[1:]
            while w and (w[0].startswith("-") or _ASSIGN_RE.match(w[0])):
                w.pop(0)
            changed = True
        elif a0 == "uv" and len(w) > 1 and w[1] == "run":
            w = w[2:]
            while w and w[0].startswith("-"):
                opt = w.pop(0)
                if opt in ("--with", "--python", "-p", "--project", "--directory", "--env-file", "--group") and w:
                    w.pop(0)
            changed = True
        elif _ASSIGN_RE.match(w[0]):
            w = w[1:]
            changed = True
    return w


_PY_RE = re.compile(r"^python(\d+(\.\d+)?)?$|^pypy3?$")


def is_python(argv0: str) -> bool:
    return bool(_PY_RE.match(argv0.rsplit("/", 1)[-1]))


def python_script(argv: list[str]) -> tuple[str | None, list[str]]:
    """For ['python', '-u', 'check.py', 'x'] -> ('check.py', ['x']); a bare 'check.py' after uv run
    counts too.  -> (None, []) when it is not a script run (python -c, -m, no script)."""
    if not argv:
        return None, []
    a0 = argv[0]
    if is_python(a0):
        k = 1
        while k < len(argv) and argv[k].startswith("-"):
            if argv[k] in ("-c", "-m"):
                return None, []
            if argv[k] in ("-W", "-X"):
                k += 1
            k += 1
        if k < len(argv):
            return argv[k], argv[k + 1:]
        return None, []
    if a0.endswith(".py"):
        return a0, argv[1:]
    return None, []


def join_path(cwd: str | None, path: str) -> str:
    """Resolve `path` against `cwd` (posix), normalizing '.', '..' and '//'.  `~` stays symbolic."""
    import posixpath
    if not path:
        return cwd or ""
    if path.startswith("~") or path.startswith("/") or not cwd:
        p = path
    else:
        p = posixpath.join(cwd, path)
    norm = posixpath.normpath(p)
    if p.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return norm
