"""Shell-command reading shared by the contamination and the timeline analyzers.

Nothing is executed.  `parse` reads a command string the way bash would for the cases agents
write and returns a flat list of simple commands with their words, redirections and
here-documents; the helpers below it strip what only launches the real program (env prefixes,
``timeout``, ``uv run``, ``nice`` ..., reserved words), find the script of ``bash -c``, the target
of ``cd`` and the script of a python run.  The contamination analysis
(`forensics.transcripts.access`, with `forensics.text.shell_paths` for which operands are
paths) and the timeline (`forensics.analyze.timeline.shell`, a view with ``cd`` applied and
``bash -c`` inlined) both read commands through this module.

What is modelled (enough for forensic reading, not a full POSIX shell):

* quoting: '...', "..." (backslash escapes), $'...', backslash escapes, line continuations;
* operators: ``&&``, ``||``, ``;``, ``;;``, ``|``, ``|&``, ``&``, newlines, ``( ... )`` subshells,
  ``{ ...; }`` groups (their braces are words), ``$( ... )`` and backquote substitutions (parsed as
  commands of their own, in a subshell, marked ``substitution``);
* redirections ``< > >> >| <> >& <& &> &>> 2> <<< << <<-`` with explicit fd numbers and
  here-document bodies (``<<-`` strips leading tabs; a quoted delimiter is recorded);
* comments (``#`` at the start of a word).

Words keep whether they had an unquoted glob character, because an unquoted ``*`` is expanded
by the shell and a quoted one is not, and whether any part was quoted.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import NamedTuple

GLOB_CHARS = re.compile(r"[*?\[]")
ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

# ----------------------------------------------------------------------------------- lexer


@dataclass(slots=True)
class Word:
    text: str                 # value after quote removal (substitutions kept literally)
    raw: str                  # the word as written
    glob: bool = False        # had an unquoted glob character
    quoted: bool = False      # any part was quoted


class Redirect(NamedTuple):
    op: str                   # > >> >| < <> >& <& &> &>> << <<- <<<
    word: Word                # target: file, fd digits, '-', here-doc delimiter, here-string
    fd: int | None = None     # fd number written before the operator (2> ...)
    body: str | None = None   # here-document body (each line with its newline) / here-string text


HEREDOC_OPS = ("<<", "<<-")


@dataclass(slots=True)
class Simple:
    """One simple command: words, redirections, pipeline links, subshell depth."""

    words: list[Word] = field(default_factory=list)
    redirs: list[Redirect] = field(default_factory=list)
    depth: int = 0                       # subshell depth (0 = the main shell)
    piped_from_prev: bool = False        # stdin comes from the previous command via '|'
    pipe_out: bool = False               # stdout goes to the next command via '|'
    background: bool = False             # ended with '&'
    substitution: bool = False           # parsed from a $(...) / `...` body
    subs: list[str] = field(default_factory=list)  # $(...) / `...` bodies inside the words

    @property
    def argv(self) -> list[str]:
        return [w.text for w in self.words]

    @property
    def heredoc(self) -> str | None:
        """Body of the last here-document (without its final newline), else of the last
        here-string; None when there is neither."""
        docs = [r.body for r in self.redirs if r.op in HEREDOC_OPS and r.body is not None]
        if docs:
            return docs[-1][:-1] if docs[-1].endswith("\n") else docs[-1]
        strings = [r.body for r in self.redirs if r.op == "<<<"]
        return strings[-1] if strings else None


_WORD_RE = re.compile(
    r"""(?:[^\s;&|()<>'"\\`$]+|'[^']*'?|"(?:[^"\\]|\\.)*"?|\$'(?:[^'\\]|\\.)*'?"""
    r"""|\$\((?:[^()'"]|'[^']*'|"(?:[^"\\]|\\.)*"|\((?:[^()]|\([^()]*\))*\))*\)?"""
    r"""|\$\{[^}]*\}?|\$|`[^`]*`?|\\.|\\$)+""",
    re.S,
)
_PIECE_RE = re.compile(
    r"""(?P<sq>'[^']*'?)|(?P<dq>"(?:[^"\\]|\\.)*"?)|(?P<ansi>\$'(?:[^'\\]|\\.)*'?)"""
    r"""|(?P<sub>\$\((?:[^()'"]|'[^']*'|"(?:[^"\\]|\\.)*"|\((?:[^()]|\([^()]*\))*\))*\)?)"""
    r"""|(?P<bq>`[^`]*`?)|(?P<esc>\\.)|(?P<plain>[^'"\\`$]+|\$\{[^}]*\}?|\$|\\$)""",
    re.S,
)
_OP_RE = re.compile(r"&&|\|\||;;|\|&|&>>|&>|[;&|()\n]")
_REDIR_RE = re.compile(r"(\d*)(>>|>&|>\||<<<|<<-|<<|<>|<&|>|<)")
_DQ_ESC = re.compile(r"\\([\\\"$`\n])")
_DQ_SUB = re.compile(r"\$\(((?:[^()]|\([^()]*\))*)\)|`([^`]*)`")
_ANSI_ESC = re.compile(r"\\(.)", re.S)
_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "f": "\f", "v": "\v",
         "\\": "\\", "'": "'", '"': '"'}


def word_expands(raw: str) -> bool:
    """The word as written holds a parameter, command or arithmetic expansion outside single
    quotes (its value is not known without running the shell)."""
    for m in _PIECE_RE.finditer(raw):
        if m.lastgroup in ("sub", "bq") or (m.lastgroup in ("plain", "dq") and "$" in m.group()):
            return True
    return False


def _word_value(raw: str) -> tuple[str, bool, bool, list[str]]:
    """Quote removal.  Returns (text, has_unquoted_glob, quoted, substitution bodies)."""
    out: list[str] = []
    glob = False
    quoted = False
    subs: list[str] = []
    for m in _PIECE_RE.finditer(raw):
        kind = m.lastgroup
        s = m.group()
        if kind == "plain":
            if not glob and GLOB_CHARS.search(s):
                glob = True
            out.append(s)
        elif kind == "sq":
            quoted = True
            out.append(s[1:-1] if s.endswith("'") and len(s) > 1 else s[1:])
        elif kind == "dq":
            quoted = True
            inner = s[1:-1] if s.endswith('"') and len(s) > 1 else s[1:]
            for sm in _DQ_SUB.finditer(inner):
                subs.append(sm.group(1) if sm.group(1) is not None else sm.group(2))
            out.append(_DQ_ESC.sub(lambda e: "" if e.group(1) == "\n" else e.group(1), inner))
        elif kind == "ansi":
            quoted = True
            inner = s[2:-1] if s.endswith("'") and len(s) > 2 else s[2:]
            out.append(_ANSI_ESC.sub(lambda e: _ANSI.get(e.group(1), e.group(0)), inner))
        elif kind == "sub":
            subs.append(s[2:-1] if s.endswith(")") else s[2:])
            out.append(s)
        elif kind == "bq":
            subs.append(s[1:-1] if s.endswith("`") and len(s) > 1 else s[1:])
            out.append(s)
        elif kind == "esc":
            quoted = True
            out.append("" if s[1] == "\n" else s[1:])   # backslash-newline continues the word
    return "".join(out), glob, quoted, subs


def parse(command: str, depth: int = 0, _limit: int = 4) -> list[tuple[str, Simple | None]]:
    """Parse shell text into a flat list of ("cmd", Simple) / ("push", None) / ("pop", None).

    "push"/"pop" bracket a subshell: ``( ... )`` and the commands of each substitution, which come
    before the command that contains them (bash runs them first)."""
    items: list[tuple[str, Simple | None]] = []
    if not command:
        return items
    s = command
    n = len(s)
    i = 0
    cur = Simple(depth=depth)
    pending: list[tuple[Simple, int, str, bool]] = []  # (cmd, index in redirs, delimiter, strip_tabs)
    pipe_next = False
    d = depth

    def flush() -> None:
        nonlocal cur, pipe_next
        if cur.words or cur.redirs:
            cur.piped_from_prev = pipe_next
            items.append(("cmd", cur))
        pipe_next = False
        cur = Simple(depth=d)

    def target() -> Word | None:
        nonlocal i
        while i < n and s[i] in " \t":
            i += 1
        wm = _WORD_RE.match(s, i)
        if wm is None:
            return None
        i = wm.end()
        text, glob, quoted, subs = _word_value(wm.group())
        cur.subs.extend(subs)
        return Word(text, wm.group(), glob, quoted)

    while i < n:
        c = s[i]
        if c == " " or c == "\t" or c == "\r":
            i += 1
            continue
        if c == "\\" and i + 1 < n and s[i + 1] == "\n":
            i += 2
            continue
        if c == "#":
            j = s.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "\n":
            flush()
            i += 1
            # here-document bodies start after the newline, in the order of their operators
            while pending:
                hcmd, k, delim, strip = pending.pop(0)
                body: list[str] = []
                while i < n:
                    j = s.find("\n", i)
                    line = s[i:] if j < 0 else s[i:j]
                    i = n if j < 0 else j + 1
                    if strip:
                        line = line.lstrip("\t")
                    if line.rstrip() == delim:
                        break
                    body.append(line + "\n")
                hcmd.redirs[k] = hcmd.redirs[k]._replace(body="".join(body))
            continue
        if c in "<>" or c.isdigit():
            m = _REDIR_RE.match(s, i)
            if m:  # digits only count as an fd when directly followed by a redirection operator
                op = m.group(2)
                fd = int(m.group(1)) if m.group(1) else None
                i = m.end()
                w = target()
                if w is None:
                    continue
                if op == "<<<":
                    cur.redirs.append(Redirect(op, w, fd, w.text))
                else:
                    if op in HEREDOC_OPS:
                        pending.append((cur, len(cur.redirs), w.text, op == "<<-"))
                    cur.redirs.append(Redirect(op, w, fd))
                continue
        om = _OP_RE.match(s, i)
        if om:
            op = om.group()
            i = om.end()
            if op in ("&>", "&>>"):
                w = target()
                if w is not None:
                    cur.redirs.append(Redirect(op, w))
                continue
            if op == "(":
                flush()
                items.append(("push", None))
                d += 1
                cur.depth = d
                continue
            if op == ")":
                flush()
                if d > depth:
                    items.append(("pop", None))
                    d -= 1
                    cur.depth = d
                continue
            piped = op in ("|", "|&")
            if cur.words or cur.redirs:
                cur.pipe_out = piped
                cur.background = op == "&"
            flush()
            pipe_next = piped
            continue
        wm = _WORD_RE.match(s, i)
        if wm is None:  # a lone metacharacter we do not model
            i += 1
            continue
        i = wm.end()
        raw = wm.group()
        text, glob, quoted, subs = _word_value(raw)
        cur.words.append(Word(text, raw, glob, quoted))
        cur.subs.extend(subs)
    flush()
    # substitutions run in subshells of their own
    if _limit > 0:
        extra: list[tuple[str, Simple | None]] = []
        for kind, cmd in items:
            if kind == "cmd" and cmd is not None and cmd.subs:
                for body in cmd.subs:
                    extra.append(("push", None))
                    for item in parse(body, cmd.depth + 1, _limit - 1):
                        if item[1] is not None:
                            item[1].substitution = True
                        extra.append(item)
                    extra.append(("pop", None))
        if extra:
            # substitutions are evaluated before their command; order within a call is kept
            items = extra + items
    return items


# ------------------------------------------------------------------- what actually runs

# Reserved words in command position: the words after them are the command that runs (`time`,
# which takes options, is a wrapper below).
RESERVED_PREFIX = {"if", "then", "else", "elif", "do", "while", "until", "!", "{"}
# Reserved words that close a compound command (they may carry its redirections).
RESERVED_END = {"fi", "done", "esac", "}"}
# `for NAME in WORDS`, `select ...`, `case WORD in`: a header, not a command.
LOOP_HEADERS = {"for", "select", "case"}
SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
# Prefix words that run the rest of the argv as a command.
WRAPPERS = {"sudo", "nohup", "nice", "ionice", "time", "stdbuf", "exec", "command", "builtin", "env",
            "timeout", "gpu-lock-exec", "uv", "poetry", "pipenv", "conda", "micromamba", "srun", "taskset",
            "numactl", "chrt", "setsid", "flock", "unbuffer", "watch", "strace", "ltrace", "catchsegv",
            "compute-sanitizer", "cuda-memcheck", "ncu", "nsys", "xvfb-run", "eval"}
_PKG_RUNNERS = {"uv", "poetry", "pipenv", "conda", "micromamba"}        # only `X run CMD` runs CMD
_RUN_OPT_ARGS = {"--with", "-n", "--name", "-p", "--prefix", "--project", "--directory", "--python",
                 "--env-file", "--group"}
# Wrappers whose leading options are skipped, with the options that take the next word.
_OPT_WRAPPERS: dict[str, set[str]] = {
    "nice": {"-n", "--adjustment"}, "ionice": {"-c", "-n", "-p", "--class", "--classdata"},
    "taskset": set(), "numactl": {"-C", "-N", "-m", "-p"}, "chrt": set(), "stdbuf": set(),
    "flock": {"-w", "-E", "--timeout", "--conflict-exit-code"}, "watch": {"-n", "-d", "--interval"},
    "nohup": set(), "time": {"-f", "-o", "--format", "--output"}, "command": set(), "exec": {"-a"},
    "builtin": set(), "unbuffer": set(), "srun": {"-n", "-N", "-p", "-c", "-t", "-G", "-J"},
    "env": {"-u", "--unset", "-C", "--chdir", "-S"},
}
_ONE_POSITIONAL = {"taskset", "chrt", "flock"}      # taskset MASK CMD, chrt PRIO CMD, flock FILE CMD
_PROFILERS = {"ncu", "nsys", "compute-sanitizer", "cuda-memcheck", "strace", "ltrace", "sudo"}
_PROFILER_OPT_ARGS = {"-o", "--output", "--export", "-u", "-k", "--set", "--section", "--metrics", "-t",
                      "--trace", "-s"}
_DURATION = re.compile(r"^\d+(?:\.\d+)?[smhd]?$")


def _wrapper_end(argv: list[str], i: int, base: str, env: dict[str, str] | None) -> int:
    """Index of the first word after wrapper `base`'s own options and arguments (its name is at
    i - 1); -1 when the wrapper runs no program (``uv pip install``)."""
    n = len(argv)
    if base == "timeout":
        while i < n and argv[i].startswith("-"):
            i += 2 if argv[i] in ("-s", "-k", "--signal", "--kill-after") else 1
        if i < n and _DURATION.match(argv[i]):
            i += 1
    elif base in _PKG_RUNNERS:
        if i >= n or argv[i] != "run":
            return -1
        i += 1
        while i < n and argv[i].startswith("-"):
            i += 2 if argv[i] in _RUN_OPT_ARGS else 1
    elif base in _OPT_WRAPPERS:
        takes = _OPT_WRAPPERS[base]
        while i < n and (argv[i].startswith("-") or base == "env" and ASSIGN_RE.match(argv[i])):
            if ASSIGN_RE.match(argv[i]) and env is not None:
                k, v = argv[i].split("=", 1)
                env[k] = v
            i += 2 if argv[i] in takes else 1
        if base in _ONE_POSITIONAL and i < n:
            i += 1
    elif base in _PROFILERS:
        if base == "nsys" and i < n and argv[i] in ("profile", "launch"):
            i += 1
        while i < n and argv[i].startswith("-"):
            i += 2 if "=" not in argv[i] and argv[i] in _PROFILER_OPT_ARGS else 1
    return min(i, n)


def _unwrap_walk(argv: list[str], env: dict[str, str] | None) -> tuple[int, list[str]]:
    """(index of the word that runs, base names of the launchers stepped over); the index is -1
    when a launcher runs no program.  Assignments go into `env` when given."""
    i, seen = 0, []
    while i < len(argv):
        a = argv[i]
        if ASSIGN_RE.match(a):
            if env is not None:
                k, v = a.split("=", 1)
                env[k] = v
            i += 1
            continue
        if a in RESERVED_PREFIX or a == "}":
            i += 1
            continue
        base = a.rsplit("/", 1)[-1]
        if base not in WRAPPERS:
            break
        seen.append(base)
        i = _wrapper_end(argv, i + 1, base, env)
        if i < 0:
            return -1, seen
    return i, seen


def unwrap(argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The argv that actually runs, after assignments, reserved words and launcher prefixes
    (``sudo``, ``timeout -k 5 600``, ``env X=1``, ``uv run --with x``, ``nice -n 5``, ``ncu --set
    full`` ...): ``['python', 'check.py']``.  Assignments (``X=1``, ``env X=1``) go into `env` when
    given.  A package manager that does not ``run`` a program (``uv pip install``) gives []."""
    i, _ = _unwrap_walk(argv, env)
    return [] if i < 0 else argv[i:]


def wrappers(argv: list[str]) -> list[str]:
    """The launcher prefixes `unwrap` steps over, by base name, in order
    (``sudo /usr/bin/timeout -k 5 60 env X=1 python t.py`` -> ['sudo', 'timeout', 'env'])."""
    return _unwrap_walk(argv, None)[1]


def split_assignments(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading ``VAR=val`` words and an ``env [-i] VAR=val`` prefix -> (their values, the rest)."""
    env: dict[str, str] = {}
    k = 0
    while k < len(words) and ASSIGN_RE.match(words[k]):
        name, _, val = words[k].partition("=")
        env[name] = val
        k += 1
    if k < len(words) and words[k] == "env":
        k = _wrapper_end(words, k + 1, "env", env)
    return env, words[k:]


def strip_reserved(words: list[str]) -> list[str]:
    """Drop leading reserved words (``then``, ``do``, ``fi``, ``}`` ...): the command after them."""
    k = 0
    while k < len(words) and (words[k] in RESERVED_PREFIX or words[k] in RESERVED_END):
        k += 1
    return words[k:]


def shell_c_script(argv: list[str]) -> str | None:
    """The command string of ``bash -c STRING`` (``sh -lc``, ``bash -e -c``, ``zsh -xc`` ...), or None."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in SHELLS:
        return None
    i, has_c = 1, False
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a.startswith("--"):
            i += 2 if a in ("--rcfile", "--init-file") else 1
            continue
        if len(a) > 1 and a[0] in "-+":
            has_c = has_c or (a[0] == "-" and "c" in a[1:])
            i += 2 if a in ("-o", "+o", "-O", "+O") else 1
            continue
        break
    return argv[i] if has_c and i < len(argv) else None


def cd_target(argv: list[str]) -> str | None:
    """Where ``cd``/``pushd`` ARGV goes: a directory word, '-' (the previous one) or None (home)."""
    args = argv[1:]
    while args and len(args[0]) > 1 and args[0][0] == "-" and set(args[0][1:]) <= set("PLe@"):
        args = args[1:]
    if args and args[0] == "--":
        args = args[1:]
    return args[0] if args else None


_PY_RE = re.compile(r"^(?:python(?:\d+(?:\.\d+)?)?|pypy3?|ipython3?)$")


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
