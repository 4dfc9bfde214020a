"""Strip harness envelopes from tool-result text and parse the exit status (spec §9.2).

Each function returns ``Env(text, exit_code, running_session, status, is_error)``; fields the
envelope does not state are ``None``.  They only look at the start of the text (and, for
TaskOutput, its tags), so the cost is independent of the output size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson


@dataclass(slots=True)
class Env:
    text: str
    exit_code: int | None = None
    running_session: str | None = None
    status: str | None = None
    is_error: bool | None = None


_CODEX_HDR = ("Chunk ID:", "Wall time:", "Process exited with code", "Process running with session ID",
              "Original token count:", "Output:", "Exit code:", "Total output lines:")
_INT = re.compile(r"-?\d+")


def codex(text: str) -> Env:
    """Codex exec_command / write_stdin / shell output.

    New form: ``Chunk ID / Wall time / Process exited with code N | Process running with session
    ID N / Original token count / Output:`` then the output.  Older form: ``Exit code: N / Wall
    time / Total output lines / Output:``.  The oldest ``shell`` tool returned a JSON string
    ``{"output": ..., "metadata": {"exit_code": N}}``.
    """
    if not text:
        return Env(text or "")
    if text[0] == "{" and '"metadata"' in text[:200000]:
        try:
            o = orjson.loads(text)
        except Exception:  # noqa: BLE001
            o = None
        if isinstance(o, dict) and "output" in o:
            md = o.get("metadata")
            ec = md.get("exit_code") if isinstance(md, dict) else None
            out = o.get("output")
            return Env(out if isinstance(out, str) else str(out),
                       ec if isinstance(ec, int) and not isinstance(ec, bool) else None)
    if not text.startswith(_CODEX_HDR):
        return Env(text)
    exit_code = None
    running = None
    pos = 0
    n = len(text)
    body_start = None
    for _ in range(12):  # header is a handful of lines
        if pos >= n:
            break
        nl = text.find("\n", pos)
        line = text[pos:] if nl < 0 else text[pos:nl]
        nxt = n if nl < 0 else nl + 1
        s = line.strip()
        if s.startswith("Process exited with code"):
            m = _INT.search(s, 24)
            if m:
                exit_code = int(m.group())
        elif s.startswith("Exit code:"):
            m = _INT.search(s, 10)
            if m:
                exit_code = int(m.group())
        elif s.startswith("Process running with session ID"):
            running = s[len("Process running with session ID"):].strip() or None
        elif s.startswith("Output:"):
            rest = s[7:].strip()
            body_start = nxt if not rest else pos + line.find(rest)
            break
        elif not s.startswith(_CODEX_HDR):
            body_start = pos
            break
        pos = nxt
    if body_start is None:
        body_start = pos
    return Env(text[body_start:], exit_code, running, "running" if running else None)


_EXIT_CODE = re.compile(r"\AExit code:? (-?\d+)[ \t]*(?:\r?\n|\Z)")
_BG = re.compile(r"Command running in background with ID: ?(\S+)")


def claude(text: str, is_error: bool | None) -> Env:
    """Claude Bash result: a leading ``Exit code N`` line (with is_error); background start."""
    if not text:
        return Env(text or "", None, None, None, is_error)
    if text.startswith("Exit code"):
        m = _EXIT_CODE.match(text)
        if m:
            return Env(text[m.end():], int(m.group(1)), None, None, is_error)
    if text.startswith("<retrieval_status>") or (text.startswith("<") and "<exit_code>" in text[:4000]):
        return task_output(text, is_error)
    if text.startswith("Command running in background"):
        m = _BG.match(text)
        if m:
            return Env(text, None, m.group(1).rstrip(".,)"), "running", is_error)
    return Env(text, None, None, None, is_error)


def _tag(text: str, tag: str, limit: int | None = None) -> str | None:
    open_ = f"<{tag}>"
    i = text.find(open_, 0, limit) if limit else text.find(open_)
    if i < 0:
        return None
    i += len(open_)
    j = text.find(f"</{tag}>", i)
    if j < 0:
        return text[i:]  # unterminated (truncated output): keep what is there
    return text[i:j]


def task_output(text: str, is_error: bool | None) -> Env:
    """Claude TaskOutput: ``<retrieval_status>…<task_id>…<status>…<exit_code>N</exit_code><output>…</output>``."""
    head_limit = 4000
    status = _tag(text, "status", head_limit)
    ec_s = _tag(text, "exit_code", head_limit)
    task_id = _tag(text, "task_id", head_limit)
    out = _tag(text, "output")
    exit_code = None
    if ec_s is not None:
        m = _INT.search(ec_s)
        if m:
            exit_code = int(m.group())
    body = out.strip("\n") if out is not None else text
    err = is_error
    if status == "failed" and err is None:
        err = True
    return Env(body, exit_code, task_id.strip() if task_id and status == "running" else None,
               status.strip() if status else None, err)


_KIMI_EXIT = re.compile(r"exit code:? ?(-?\d+)", re.I)


def kimi(text: str) -> Env:
    """Kimi ``<system>…</system>`` preamble: ``ERROR: Command failed with exit code: N.``."""
    if not text or not text.lstrip().startswith("<system>"):
        return Env(text or "")
    t = text.lstrip()
    j = t.find("</system>")
    if j < 0:
        pre, body = t[8:], ""
    else:
        pre, body = t[8:j], t[j + 9:]
    body = body[1:] if body.startswith("\n") else body
    exit_code = None
    is_error = None
    m = _KIMI_EXIT.search(pre)
    if m:
        exit_code = int(m.group(1))
    up = pre.lstrip().upper()
    if up.startswith("ERROR"):
        is_error = True
    elif "command executed successfully" in pre.lower():
        exit_code = 0 if exit_code is None else exit_code
        is_error = False
    return Env(body, exit_code, None, pre.strip() or None, is_error)
