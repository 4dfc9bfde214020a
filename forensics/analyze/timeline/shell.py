"""The timeline's view of a shell command (spec section 9), read by `forensics.text.shell`.

`parse(command, cwd)` gives the simple commands that run, in order, as plain words: reserved
words (``do``, ``then`` ...) and loop headers (``for x in ...``) dropped, ``VAR=val`` / ``env``
prefixes moved into `env`, the working directory a ``cd`` earlier in the same string left (a
subshell's ``cd`` does not leak), and the commands of ``bash -c '...'`` inlined in place.
Substitutions (``$(...)``) stay words.  Anything not understood stays plain words, so the callers
can fall back to "unknown" rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from forensics.text import shell as sh
from forensics.text.shell import is_python, join_path, python_script, unwrap  # noqa: F401 (the timeline's API)

_MAX_INLINE = 4   # nested `bash -c` levels inlined


@dataclass
class Redirect:
    op: str            # '>', '>>', '<', '<<' (here-doc), '<<<', '&>', '>&', '>|', '<>', '<&'
    target: str        # file name, fd ('1', '2'), here-doc body for '<<', text for '<<<'
    fd: int = 1        # 0 stdin, 1 stdout, 2 stderr, -1 both (&>)
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
        """The command's stdin text: a here-document or a here-string (the last one given wins, as
        in the shell)."""
        found = None
        for r in self.redirects:
            if r.op in ("<<", "<<<"):
                found = r
        return found

    def stdout_files(self) -> list[tuple[str, bool]]:
        """Files stdout is redirected into: [(path, append)]."""
        out = []
        for r in self.redirects:
            if r.op in (">", ">>", "&>", ">|") and r.fd in (1, -1) and not r.target.isdigit():
                out.append((r.target, r.op == ">>"))
        return out


def _redirect(r: sh.Redirect) -> Redirect:
    if r.op in sh.HEREDOC_OPS:
        return Redirect("<<", r.body or "", 0, r.word.quoted)
    if r.op == "<<<":  # here-string: the word's value and a newline; `quoted` = no expansion in it
        return Redirect("<<<", r.word.text, 0, not sh.word_expands(r.word.raw))
    fd = r.fd if r.fd is not None else (-1 if r.op.startswith("&") else 0 if r.op.startswith("<") else 1)
    return Redirect(">>" if r.op == "&>>" else r.op, r.word.text, fd)


def cd(cwd: str | None, words: list[str], oldpwd: str | None = None) -> str | None:
    """The working directory after ``cd WORDS`` run in `cwd` (``cd`` alone: ``~``)."""
    target = sh.cd_target(words)
    if target == "-":
        return oldpwd if oldpwd is not None else cwd
    return join_path(cwd, target or "~")


def parse(command: str, cwd: str | None = None, _level: int = 0) -> list[SimpleCommand]:
    """Split a command string into simple commands, in order, with `cd` applied to later ones."""
    out: list[SimpleCommand] = []
    oldpwd: str | None = None
    saved: list[tuple[str | None, str | None]] = []
    for kind, s in sh.parse(command or ""):
        if kind == "push":
            saved.append((cwd, oldpwd))
            continue
        if kind == "pop":
            if saved:
                cwd, oldpwd = saved.pop()
            continue
        assert s is not None
        if s.substitution:
            continue
        words = sh.strip_reserved(s.argv)
        if words and words[0] in sh.LOOP_HEADERS:
            continue
        c = SimpleCommand([], [_redirect(r) for r in s.redirs], pipe_in=s.piped_from_prev,
                          pipe_out=s.pipe_out, background=s.background, cwd=cwd)
        if not words and not c.redirects:
            continue
        if words and all(sh.ASSIGN_RE.match(w) for w in words):
            c.words = ["__assign__", *words]   # assignments only: they affect no child unless exported
        else:
            c.env, c.words = sh.split_assignments(words)
        script = sh.shell_c_script(unwrap(c.words)) if _level < _MAX_INLINE else None
        if script is not None:
            # `bash -c '...'` / `sh -lc`: the inner commands in place of the outer one
            inner = parse(script, c.cwd, _level + 1)
            for ic in inner:
                ic.env = {**c.env, **ic.env}
            if inner:
                inner[-1].pipe_out = inner[-1].pipe_out or c.pipe_out
                inner[0].pipe_in = inner[0].pipe_in or c.pipe_in
                inner[-1].redirects += c.redirects
            out.extend(inner)
            continue
        if c.argv0 == "cd" and not c.pipe_in and not c.pipe_out and not c.background:
            oldpwd, cwd = cwd, cd(cwd, c.words, oldpwd)
        out.append(c)
    return out
