"""The agent session of one synthetic run, built call by call, with its ground truth.

A `Session` is harness-aware: every method turns an intent (run a shell command, write a file,
edit it, read another run's file) into the *native* tool call of that harness (Claude `Bash`,
Codex `exec_command`/`apply_patch`, OpenCode `bash`/`edit`, Kimi `Shell`, ...), so the tool-call
numbers (`call_seq`) and tool names recorded in the labels are exactly what the renderer
writes.  Rendering into lines is done by `devkit.generator.harness`.

The session also keeps the ground truth the labels need: a virtual file system of what the agent
wrote (so each version of solution.py has its exact content and sha256), every in-session
check.py / benchmark.py run with the version it ran on, every reference to another run, the
GPU-lock events, and how the session ended.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

# harness -> transcript format of transcript.jsonl (spec 5.1)
CLAUDE_FAMILY = ("claude", "zai-claude", "minimax-claude", "kimi-claude", "kinetic-claude", "deepseek-claude",
                 "qwen-claude", "longcat-claude", "or-fable", "openrouter-fable", "or-opus", "openrouter-opus",
                 "ccr-claude", "lfm-claude")
OPENCODE_FAMILY = ("opencode", "opencode-nemotron", "nvcf-nemotron", "hy3", "hy3-claude", "tinker", "inkling",
                   "opencode-inkling", "lfm-opencode")


def transcript_format(harness: str) -> str:
    if harness in CLAUDE_FAMILY:
        return "claude"
    if harness == "codex":
        return "codex_text"
    if harness in OPENCODE_FAMILY:
        return "opencode"
    if harness in ("grok", "lfm-grok"):
        return "grok_stream"
    if harness in ("cursor", "gemini", "kimi", "droid"):
        return harness
    raise ValueError(f"no transcript format for harness {harness!r}")


def sha256(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()


@dataclass
class ForeignRef:
    """A reference to another run's archive made by one tool call (ground truth)."""

    foreign_run_id: str
    foreign_file: str  # path relative to the foreign run dir ('' for the run dir itself)
    classification: str  # benign_exposure | deliberate_read | copy

    def label(self, call_seq: int) -> dict:
        return {"call_seq": call_seq, "foreign_run_id": self.foreign_run_id, "foreign_file": self.foreign_file,
                "classification": self.classification}


@dataclass
class Call:
    seq: int
    tool: str
    input: dict
    id: str
    output: str = ""
    is_error: bool = False
    exit_code: int | None = None
    t: float = 0.0
    dur: float = 0.5
    background: bool = False
    bg_id: str | None = None
    custom: bool = False  # codex custom_tool_call (apply_patch)
    raw_arguments: str | None = None  # kimi partial-JSON arguments, rendered verbatim
    meta: dict = field(default_factory=dict)


_CHECK_RE = re.compile(r"(?:^|[\s;&|(/])(check|benchmark)\.py\b")
_RUNNER_RE = re.compile(r"(?:^|[\s;&|(])(?:timeout\s+(?:-\S+\s+)*\d+\S*\s+)?(?:uv\s+run(?:\s+python3?)?|python3?)\s+\S*(check|benchmark)\.py")


class Session:
    """Harness-aware builder of one agent session.  Every tool method returns the call_seq."""

    def __init__(self, harness: str, *, workspace: str, run_id: str, start_epoch: float, rng, container: bool,
                 host_gpu_lock: bool = True, gpu_lock_pid_base: int = 400000, lock_log: bool = True):
        self.harness = harness
        self.fmt = transcript_format(harness)
        self.ws = workspace.rstrip("/")
        self.run_id = run_id
        self.t = float(start_epoch)
        self.rng = rng
        self.container = container
        self.events: list[Any] = []  # Call objects and ('text'|'thinking'|..., payload) tuples
        self.calls: list[Call] = []
        self.vfs: dict[str, str] = {}
        self.versions: list[dict] = []
        self.check_runs: list[dict] = []
        self.foreign: list[dict] = []
        self.lock_lines: list[str] = []
        self.lock_log = lock_log
        self._lock_pid = gpu_lock_pid_base
        self._bg: dict[str, dict] = {}
        self._ids = 0
        self.ended: dict | None = None
        self.cut = False
        self.api_errors: list[dict] = []
        self.rate_limited = False
        self.notes: list[str] = []

    # ------------------------------------------------------------------ helpers
    def _next_id(self, prefix: str) -> str:
        self._ids += 1
        h = hashlib.sha256(f"{self.run_id}:{self._ids}".encode()).hexdigest()
        if self.fmt == "claude":
            return f"toolu_01{h[:22]}"
        if self.fmt in ("codex_text",):
            return f"call_{h[:24]}"
        if self.fmt == "opencode":
            return f"call_{h[:20]}"
        if self.fmt == "gemini":
            return f"{prefix}-{int(self.t * 1000)}-{h[:12]}"
        if self.fmt == "kimi":
            return f"{prefix}:{self._ids - 1}"
        if self.fmt == "grok_stream":
            return f"call-{h[:8]}-{h[8:12]}-{self._ids % 10}"
        return f"{prefix}_{h[:16]}"

    def path(self, rel: str) -> str:
        """Absolute path of a workspace-relative file (as the agent would write it)."""
        if rel.startswith("/"):
            return rel
        return f"{self.ws}/{rel}"

    def _tick(self, lo: float = 2.0, hi: float = 40.0) -> float:
        self.t += self.rng.uniform(lo, hi)
        return self.t

    def _add(self, tool: str, inp: dict, output: str, *, is_error=False, exit_code=None, dur=None, prefix="call",
             foreign=None, custom=False, background=False, raw_arguments=None, meta=None) -> Call:
        self._tick()
        c = Call(seq=len(self.calls) + 1, tool=tool, input=inp, id=self._next_id(prefix), output=output,
                 is_error=is_error, exit_code=exit_code, t=self.t, dur=dur if dur is not None else self.rng.uniform(0.05, 3),
                 custom=custom, background=background, raw_arguments=raw_arguments, meta=meta or {})
        self.calls.append(c)
        self.events.append(c)
        self.t += c.dur
        for fr in foreign or ():
            self.foreign.append(fr.label(c.seq))
        return c

    def _is_solution(self, p: str) -> bool:
        return p == self.path("solution.py")

    def _set_file(self, p: str, content: str, seq: int, op: str) -> None:
        self.vfs[p] = content
        if self._is_solution(p):
            h = sha256(content)
            self.versions.append({"version": len(self.versions) + 1, "call_seq": seq, "sha256": h, "op": op})

    def current_version(self) -> int | None:
        return self.versions[-1]["version"] if self.versions else None

    def content(self, rel: str) -> str | None:
        return self.vfs.get(self.path(rel))

    # ------------------------------------------------------------------ prose
    def text(self, s: str) -> None:
        self._tick(1, 8)
        self.events.append(("text", s, self.t))

    def thinking(self, s: str) -> None:
        self._tick(1, 8)
        self.events.append(("thinking", s, self.t))

    # ------------------------------------------------------------------ shell
    def _shell_tool(self, command: str, *, description: str | None = None, timeout: int | None = None,
                    background: bool = False) -> tuple[str, dict, str]:
        f = self.fmt
        if f == "claude":
            inp = {"command": command}
            if description:
                inp["description"] = description
            if timeout:
                inp["timeout"] = timeout * 1000
            if background:
                inp["run_in_background"] = True
            return "Bash", inp, "call"
        if f == "codex_text":
            return "exec_command", {"cmd": command, "workdir": self.ws, "yield_time_ms": 10000,
                                    "max_output_tokens": 12000}, "call"
        if f == "opencode":
            inp = {"command": command, "description": description or command[:40]}
            if timeout:
                inp["timeout"] = timeout * 1000
            return "bash", inp, "call"
        if f == "cursor":
            return "shell", {"command": command, "workingDirectory": self.ws}, "call"
        if f == "gemini":
            return "run_shell_command", {"command": command, "description": description or "", "directory": "."}, "run_shell_command"
        if f == "kimi":
            return "Shell", {"command": command, "timeout": timeout or 600}, "Shell"
        if f == "droid":
            return "Execute", {"command": command, "riskLevel": "low"}, "call"
        return "bash", {"command": command}, "call"  # grok chat_history

    def bash(self, command: str, output: str = "", exit_code: int = 0, background: bool = False, *,
             description: str | None = None, timeout: int | None = None, dur: float | None = None,
             foreign: list[ForeignRef] | None = None, gpu: bool | None = None, check: dict | None = None,
             timed_out: bool = False) -> int:
        """Run a shell command.  `check` = label info for check/benchmark runs (set by `run_check`)."""
        bg = background and self.fmt in ("claude", "codex_text")
        tool, inp, prefix = self._shell_tool(command, description=description, timeout=timeout, background=bg)
        if dur is None:
            dur = self.rng.uniform(0.1, 4.0)
        if bg:
            bid = ("b" if self.fmt == "claude" else "") + str(self.rng.randrange(10000, 99999))
            if self.fmt == "claude":
                out = f"Command running in background with ID: {bid}"
            else:
                out = self._codex_env(f"Process running with session ID {bid}", None, 0.25)
            c = self._add(tool, inp, out, exit_code=None, dur=0.1, prefix=prefix, foreign=foreign, background=True)
            c.bg_id = bid
            self._bg[bid] = {"call": c, "output": output, "exit": exit_code, "dur": dur, "check": check}
            if check:
                self._record_check(c, check, pending=True)
            if gpu or (gpu is None and check):
                self._gpu_lock(command, c.t, dur, exit_code)
            return c.seq
        out, is_err = self._shell_output(output, exit_code, dur, timed_out=timed_out, timeout=timeout)
        c = self._add(tool, inp, out, is_error=is_err, exit_code=exit_code, dur=dur, prefix=prefix, foreign=foreign)
        if check:
            self._record_check(c, check)
        if gpu or (gpu is None and check):
            self._gpu_lock(command, c.t, dur, exit_code)
        return c.seq

    def _codex_env(self, body: str, exit_code: int | None, wall: float) -> str:
        chunk = hashlib.sha256(f"{self.run_id}{len(self.calls)}{body[:50]}".encode()).hexdigest()[:6]
        status = f"Process exited with code {exit_code}" if exit_code is not None else body
        out = f"Chunk ID: {chunk}\nWall time: {wall:.4f} seconds\n{status}\n"
        if exit_code is None:
            return out + "Original token count: 0\nOutput:\n"
        return out + f"Original token count: {max(1, len(body) // 4)}\nOutput:\n{body}"

    def _shell_output(self, output: str, exit_code: int, dur: float, *, timed_out=False, timeout=None) -> tuple[str, bool]:
        f = self.fmt
        if f == "claude":
            if timed_out:
                mins = (timeout or 600) // 60
                return f"Exit code 143\nCommand timed out after {mins}m 0s\n{output}".rstrip("\n"), True
            if exit_code != 0:
                return f"Exit code {exit_code}\n{output}".rstrip("\n"), True
            return (output if output.strip() else "(Bash completed with no output)"), False
        if f == "codex_text":
            return self._codex_env(output, exit_code, dur), False
        if f == "kimi":
            if exit_code != 0:
                return f"<system>ERROR: Command failed with exit code: {exit_code}.</system>\n{output}", True
            return f"<system>Command executed successfully.</system>\n{output}", False
        return output, exit_code != 0

    def task_output(self, bid_or_seq, *, block: bool = True) -> int | None:
        """Retrieve a background command's output (Claude TaskOutput, Codex write_stdin)."""
        if isinstance(bid_or_seq, int):
            bid = self.calls[bid_or_seq - 1].bg_id
        else:
            bid = bid_or_seq
        if bid is None or bid not in self._bg:
            return None
        info = self._bg.pop(bid)
        start: Call = info["call"]
        # advance the clock to when the background command has finished
        self.t = max(self.t, start.t + info["dur"])
        ec = info["exit"]
        if self.fmt == "claude":
            st = "completed" if ec == 0 else "failed"
            self.events.append(("task_notification", {"task_id": bid, "tool_use_id": start.id, "status": st}, self.t))
            out = (f"<retrieval_status>success</retrieval_status>\n\n<task_id>{bid}</task_id>\n\n"
                   f"<task_type>local_bash</task_type>\n\n<status>{st}</status>\n\n<exit_code>{ec}</exit_code>\n\n"
                   f"<output>\n{info['output']}\n</output>")
            c = self._add("TaskOutput", {"task_id": bid, "block": block, "timeout": 600000}, out, exit_code=ec)
        else:
            out = self._codex_env(info["output"], ec, info["dur"])
            c = self._add("write_stdin", {"session_id": int(bid), "chars": "", "yield_time_ms": 30000,
                                          "max_output_tokens": 12000}, out, exit_code=ec)
        for cr in self.check_runs:
            if cr["call_seq"] == start.seq and cr.get("_pending"):
                cr["result_call_seq"] = c.seq
                cr.pop("_pending")
        return c.seq

    def _record_check(self, c: Call, check: dict, pending: bool = False) -> None:
        row = {"call_seq": c.seq, "script": check["script"], "outcome": check["outcome"],
               "peak_fraction": check.get("peak_fraction"), "solution_version": self.current_version(),
               "superseded": False, "result_call_seq": c.seq, "command": self.calls[c.seq - 1].input.get(
                   "command", self.calls[c.seq - 1].input.get("cmd")), "numeric_stress_disabled": bool(check.get("stress_off"))}
        if pending:
            row["_pending"] = True
            row["result_call_seq"] = None
        self.check_runs.append(row)

    def _gpu_lock(self, command: str, t: float, dur: float, status: int) -> None:
        if not self.lock_log:
            return
        self._lock_pid += self.rng.randrange(3, 900)
        pid = self._lock_pid
        command = command.split("\n", 1)[0].split("<<", 1)[0]
        toks = shlex.split(command) if "'" not in command and '"' not in command else command.split()
        # strip env prefixes / cd; the wrapper name is the program actually found in bin/
        while toks and ("=" in toks[0] or toks[0] in ("cd",)):
            if toks[0] == "cd":
                toks = toks[3:] if len(toks) > 2 and toks[2] == "&&" else toks[2:]
            else:
                toks = toks[1:]
        if toks and toks[0] == "timeout":
            toks = toks[2:]
        prog = toks[0].rsplit("/", 1)[-1] if toks else "python"
        if prog not in ("uv", "python", "python3", "nvidia-smi", "ncu", "nsys", "nvcc"):
            prog = "python"
        args = []
        for tk in toks[1:]:
            if tk in ("|", "2>&1", "&&", ";", ">"):
                break
            args.append(tk)
        q = "\\ ".join(a.replace(" ", "\\ ") for a in args) or "''"
        wait = self.rng.choice((0, 0, 0, 1, 2, 5, 14, 37))
        lines = self.lock_lines
        lines.append((t, f"wait pid={pid} cmd={prog} args={q}"))
        lines.append((t + wait, f"start pid={pid} cmd={prog}"))
        lines.append((t + wait + dur, f"end pid={pid} cmd={prog} status={status} elapsed_s={int(dur)}"))

    # ------------------------------------------------------------------ files
    def read(self, path: str, content: str, *, offset: int | None = None, limit: int | None = None,
             foreign: list[ForeignRef] | None = None) -> int:
        p = self.path(path)
        f = self.fmt
        lines = content.split("\n")
        start = (offset or 1)
        end = start + (limit or len(lines)) - 1
        sel = lines[start - 1:end]
        if f == "claude":
            inp = {"file_path": p}
            if offset:
                inp["offset"] = offset
            if limit:
                inp["limit"] = limit
            out = "\n".join(f"{i:>6}\t{ln}" for i, ln in enumerate(sel, start))
            return self._add("Read", inp, out, foreign=foreign).seq
        if f == "codex_text":
            cmd = f"sed -n '{start},{end}p' {p}" if (offset or limit) else f"cat {p}"
            return self._add("exec_command", {"cmd": cmd, "workdir": self.ws, "yield_time_ms": 10000,
                                              "max_output_tokens": 12000},
                             self._codex_env("\n".join(sel), 0, 0.05), exit_code=0, foreign=foreign).seq
        if f == "opencode":
            inp = {"filePath": p}
            if offset:
                inp["offset"] = offset - 1
            if limit:
                inp["limit"] = limit
            out = "<file>\n" + "\n".join(f"{i:05d}| {ln}" for i, ln in enumerate(sel, start)) + "\n</file>"
            return self._add("read", inp, out, foreign=foreign).seq
        if f == "cursor":
            return self._add("read", {"path": p}, "\n".join(sel), foreign=foreign).seq
        if f == "gemini":
            inp = {"absolute_path": p}
            if offset:
                inp["offset"] = offset - 1
                inp["limit"] = limit or len(sel)
            return self._add("read_file", inp, "\n".join(sel), prefix="read_file", foreign=foreign).seq
        if f == "kimi":
            inp = {"path": p}
            if offset:
                inp["line_offset"] = offset
                inp["n_lines"] = limit or len(sel)
            out = (f"<system>{len(sel)} lines read from file starting from line {start}."
                   + (" End of file reached." if end >= len(lines) else "") + "</system>\n"
                   + "\n".join(f"{i:>6}\t{ln}" for i, ln in enumerate(sel, start)))
            return self._add("ReadFile", inp, out, prefix="ReadFile", foreign=foreign).seq
        if f == "droid":
            return self._add("Read", {"file_path": p}, "\n".join(sel), foreign=foreign).seq
        return self._add("read_file", {"path": p}, "\n".join(sel), foreign=foreign).seq

    def write(self, path: str, content: str, *, foreign: list[ForeignRef] | None = None) -> int:
        p = self.path(path)
        f = self.fmt
        existed = p in self.vfs
        if f == "claude":
            out = (f"The file {p} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:"
                   if existed else f"File created successfully at: {p}")
            c = self._add("Write", {"file_path": p, "content": content}, out, foreign=foreign)
        elif f == "codex_text":
            if existed:
                return self.heredoc(path, content, foreign=foreign)
            body = content[:-1] if content.endswith("\n") else content  # each '+' line ends with a newline
            patch = f"*** Begin Patch\n*** Add File: {p}\n" + "".join("+" + ln + "\n" for ln in body.split("\n")) + "*** End Patch"
            c = self._add("apply_patch", {"input": patch}, f"Success. Updated the following files:\nA {p}\n",
                          custom=True, foreign=foreign)
        elif f == "opencode":
            c = self._add("write", {"filePath": p, "content": content}, "Wrote file successfully.", foreign=foreign)
        elif f == "cursor":
            c = self._add("write", {"path": p, "fileText": content}, f"Wrote {len(content.splitlines())} lines to {p}",
                          foreign=foreign)
        elif f == "gemini":
            c = self._add("write_file", {"file_path": p, "content": content},
                          f"Successfully {'overwrote' if existed else 'created and wrote to new'} file: {p}.",
                          prefix="write_file", foreign=foreign)
        elif f == "kimi":
            c = self._add("WriteFile", {"path": p, "content": content},
                          f"<system>File successfully overwritten. Current size: {len(content.encode())} bytes.</system>",
                          prefix="WriteFile", foreign=foreign)
        elif f == "droid":
            c = self._add("Create", {"file_path": p, "content": content}, f"File created: {p}", foreign=foreign)
        else:
            c = self._add("write", {"path": p, "content": content}, f"Wrote {p}", foreign=foreign)
        self._set_file(p, content, c.seq, "write")
        return c.seq

    def _apply(self, p: str, old: str, new: str, replace_all: bool = False) -> str:
        cur = self.vfs.get(p)
        if cur is None:
            raise ValueError(f"edit of {p} before any write: the generator must know the content")
        if old not in cur:
            raise ValueError(f"edit old text not found in {p}: {old[:60]!r}")
        return cur.replace(old, new) if replace_all else cur.replace(old, new, 1)

    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False,
             foreign: list[ForeignRef] | None = None) -> int:
        p = self.path(path)
        f = self.fmt
        content = self._apply(p, old, new, replace_all)
        if f == "claude":
            inp = {"file_path": p, "old_string": old, "new_string": new}
            if replace_all:
                inp["replace_all"] = True
            c = self._add("Edit", inp, f"The file {p} has been updated successfully.", foreign=foreign)
        elif f == "codex_text":
            return self.apply_patch(path, [(old, new)], foreign=foreign)
        elif f == "opencode":
            c = self._add("edit", {"filePath": p, "oldString": old, "newString": new}, "Edit applied successfully.",
                          foreign=foreign)
        elif f == "cursor":
            c = self._add("edit", {"path": p, "streamContent": content}, f"Applied edit to {p}", foreign=foreign)
        elif f == "gemini":
            c = self._add("replace", {"file_path": p, "old_string": old, "new_string": new},
                          f"Successfully modified file: {p} (1 replacements).", prefix="replace", foreign=foreign)
        elif f == "kimi":
            c = self._add("StrReplaceFile", {"path": p, "edit": {"old": old, "new": new}},
                          "<system>File successfully edited. Applied 1 edit(s) with 1 total replacement(s).</system>",
                          prefix="StrReplaceFile", foreign=foreign)
        elif f == "droid":
            c = self._add("Edit", {"file_path": p, "old_str": old, "new_str": new}, f"Edited {p}", foreign=foreign)
        else:
            c = self._add("search_replace", {"path": p, "old_string": old, "new_string": new}, f"Edited {p}",
                          foreign=foreign)
        self._set_file(p, content, c.seq, "edit")
        return c.seq

    def multiedit(self, path: str, edits: list[tuple[str, str]], *, foreign=None) -> int:
        """Claude MultiEdit; Codex one apply_patch with several hunks; elsewhere consecutive edits."""
        p = self.path(path)
        if self.fmt == "claude":
            content = self.vfs.get(p)
            for old, new in edits:
                self.vfs[p] = content
                content = self._apply(p, old, new)
            c = self._add("MultiEdit", {"file_path": p, "edits": [{"old_string": o, "new_string": n} for o, n in edits]},
                          f"Applied {len(edits)} edits to {p}:\n" + "\n".join(
                              f'{i}. Replaced "{o[:40]}..." with "{n[:40]}..."' for i, (o, n) in enumerate(edits, 1)),
                          foreign=foreign)
            self._set_file(p, content, c.seq, "multiedit")
            return c.seq
        if self.fmt == "codex_text":
            return self.apply_patch(path, edits, foreign=foreign)
        seq = 0
        for old, new in edits:
            seq = self.edit(path, old, new, foreign=foreign)
        return seq

    def apply_patch(self, path: str, hunks: list[tuple[str, str]], *, foreign=None) -> int:
        """A Codex-style `*** Update File` patch (Codex: custom apply_patch; others: Bash `apply_patch <<'EOF'`)."""
        p = self.path(path)
        content = self.vfs.get(p)
        body = [f"*** Begin Patch", f"*** Update File: {p}"]
        for old, new in hunks:
            self.vfs[p] = content
            content = self._apply(p, old, new)
            body.append("@@")
            body += ["-" + ln for ln in old.rstrip("\n").split("\n")]
            body += ["+" + ln for ln in new.rstrip("\n").split("\n")]
        body.append("*** End Patch")
        patch = "\n".join(body)
        out = f"Success. Updated the following files:\nM {p}\n"
        if self.fmt == "codex_text":
            c = self._add("apply_patch", {"input": patch}, out, custom=True, foreign=foreign)
        else:
            tool, inp, prefix = self._shell_tool(f"apply_patch <<'PATCH'\n{patch}\nPATCH")
            so, err = self._shell_output(out, 0, 0.1)
            c = self._add(tool, inp, so, exit_code=0, prefix=prefix, foreign=foreign)
        self._set_file(p, content, c.seq, "apply_patch")
        return c.seq

    def heredoc(self, path: str, content: str, *, foreign=None) -> int:
        """`cat > path <<'EOF' ... EOF` through the shell tool."""
        p = path if not path.startswith(self.ws + "/") else path[len(self.ws) + 1:]
        cmd = f"cat > {p} <<'EOF'\n{content.rstrip(chr(10))}\nEOF"
        tool, inp, prefix = self._shell_tool(cmd, description="Write solution.py")
        out, _ = self._shell_output("", 0, 0.02)
        c = self._add(tool, inp, out, exit_code=0, dur=0.02, prefix=prefix, foreign=foreign)
        self._set_file(self.path(path), content.rstrip("\n") + "\n", c.seq, "heredoc")
        return c.seq

    def sed_i(self, path: str, old: str, new: str, *, foreign=None) -> int:
        """`sed -i 's/old/new/' path`; old/new must be single-line literals."""
        if "\n" in old or "\n" in new:
            raise ValueError("sed_i takes single-line literals")
        esc_old = re.sub(r"([\\/.*\[\]^$&])", r"\\\1", old)
        esc_new = re.sub(r"([\\/&])", r"\\\1", new)
        cmd = f"sed -i 's/{esc_old}/{esc_new}/' {path}"
        p = self.path(path)
        content = self._apply(p, old, new)
        tool, inp, prefix = self._shell_tool(cmd)
        out, _ = self._shell_output("", 0, 0.02)
        c = self._add(tool, inp, out, exit_code=0, dur=0.02, prefix=prefix, foreign=foreign)
        self._set_file(p, content, c.seq, "sed_i")
        return c.seq

    def cp(self, src: str, dst: str, *, content: str | None = None, foreign=None) -> int:
        """`cp src dst`; the content is the known content of src (or `content`, for a foreign source)."""
        ps = self.path(src)
        body = content if content is not None else self.vfs.get(ps)
        if body is None:
            raise ValueError(f"cp from unknown file {src}")
        tool, inp, prefix = self._shell_tool(f"cp {src} {dst}")
        out, _ = self._shell_output("", 0, 0.02)
        c = self._add(tool, inp, out, exit_code=0, dur=0.02, prefix=prefix, foreign=foreign)
        self._set_file(self.path(dst), body, c.seq, "cp")
        return c.seq

    def tool(self, name: str, inp: dict, output: str = "", *, is_error: bool = False, foreign=None) -> int:
        """Any other native tool call (TaskCreate, TaskUpdate, TodoWrite, Glob, Grep, update_plan, SetTodoList...)."""
        return self._add(name, inp, output, is_error=is_error, foreign=foreign).seq

    def env_dump(self, key_value: str) -> int:
        """`env | grep -i api_key` showing a (fake) key: a secret inside the transcript (spec 2.7)."""
        self.secrets_in_transcript = True
        return self.bash("env | grep -i api_key", key_value + "\n")

    secrets_in_transcript = False

    def kimi_partial_call(self, name: str, raw_arguments: str, output: str) -> int:
        """A Kimi call whose `arguments` string is partial JSON (spec 5.8)."""
        return self._add(name, {}, output, raw_arguments=raw_arguments, prefix=name).seq

    # ------------------------------------------------------------------ session-level events
    def progress(self, n: int, task_id: str | None = None) -> None:
        """n `system`/`task_progress` heartbeat lines (Claude family only; a no-op elsewhere)."""
        if self.fmt == "claude" and n > 0:
            self.events.append(("progress", {"n": n, "task_id": task_id}, self.t))

    def tool_progress(self, n: int) -> None:
        if self.fmt == "claude" and n > 0:
            self.events.append(("tool_progress", n, self.t))

    def compact(self, summary: str) -> None:
        if self.fmt == "claude":
            self.events.append(("compact", summary, self.t))

    def rate_limit(self) -> None:
        self.rate_limited = True
        self.events.append(("rate_limit", None, self.t))

    def api_error(self, status: int, text: str) -> None:
        self._tick(1, 3)
        self.api_errors.append({"status": status, "text": text})
        self.events.append(("api_error", {"status": status, "text": text}, self.t))

    def end(self, result: str = "Done.", *, is_error: bool = False, subtype: str = "success",
            terminal_reason: str | None = None, api_error_status: int | None = None,
            stop_reason: str = "end_turn") -> None:
        """Terminal marker of the harness (Claude/Cursor/Gemini result, Codex task_complete, Grok end)."""
        self._tick(1, 5)
        self.ended = {"result": result, "is_error": is_error, "subtype": subtype, "terminal_reason": terminal_reason,
                      "api_error_status": api_error_status, "stop_reason": stop_reason, "t": self.t}
        self.events.append(("end", self.ended, self.t))

    def cut_off(self) -> None:
        """The agent was killed: no terminal marker and the last line is truncated mid-JSON."""
        self.cut = True

    # ------------------------------------------------------------------ labels
    def finalize_checks(self, final_version: int | None) -> None:
        for cr in self.check_runs:
            cr.pop("_pending", None)
            cr["superseded"] = cr["solution_version"] != final_version or final_version is None

    def tool_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.calls:
            out[c.tool] = out.get(c.tool, 0) + 1
        return dict(sorted(out.items()))


def is_check_command(cmd: str) -> str | None:
    """'check' | 'benchmark' | None: whether a shell command runs check.py/benchmark.py (spec 9)."""
    m = _RUNNER_RE.search(cmd)
    return m.group(1) if m else None
