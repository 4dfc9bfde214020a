"""Tool-call normalization across harnesses.

``normalize(tool, args) -> (kind, command, paths, cwd, background)``

* ``kind`` is one of ``events.KINDS``: read / write / edit / exec / list / search / task / other.
  Subagent and background-task management tools (Agent, Task*, TaskOutput, BashOutput,
  opencode ``task``) are ``task``; planning/todo tools, web tools and anything unknown are
  ``other``.  Deleting files (cursor ``delete``) counts as ``write``.
* ``command`` is the shell text of exec calls (the old Codex ``shell`` argv list is joined; a
  ``bash -lc SCRIPT`` argv gives ``SCRIPT``).
* ``paths`` are the path-like arguments as written (file paths, directories, glob patterns of
  listing tools), not resolved.
* ``cwd`` is the working-directory argument (``workdir``, ``cwd``, ``directory`` ...), if any.
* ``background`` is true for Claude ``run_in_background`` and ``Monitor``, grok ``is_background``.

A Codex exec whose command is an ``apply_patch`` heredoc is an ``edit`` with the patch's paths.
"""

from __future__ import annotations

import shlex
from typing import Any

_KIND: dict[str, str] = {}


def _reg(kind: str, *names: str) -> None:
    for n in names:
        _KIND[n.lower()] = kind


_reg("read", "Read", "read", "read_file", "ReadFile", "read_many_files", "view", "view_file",
     "NotebookRead", "open_file", "cat", "read_files", "get_file")
_reg("write", "Write", "write", "write_file", "WriteFile", "Create", "create_file", "delete",
     "delete_file", "remove_file", "new_file", "write_to_file")
_reg("edit", "Edit", "MultiEdit", "NotebookEdit", "edit", "replace", "StrReplaceFile",
     "search_replace", "apply_patch", "ApplyPatch", "str_replace", "edit_file", "multi_edit",
     "patch", "str_replace_based_edit_tool", "str_replace_editor", "insert", "MultiEditFile",
     "file_change")
_reg("exec", "Bash", "bash", "shell", "Shell", "exec_command", "run_shell_command",
     "run_terminal_cmd", "run_command", "Execute", "Monitor", "write_stdin", "local_shell",
     "terminal", "run_terminal_command", "exec", "command", "PowerShell", "command_execution")
_reg("list", "Glob", "glob", "LS", "ls", "list", "list_directory", "list_dir", "listdir",
     "find_files", "file_search", "list_files", "FindFiles", "find")
_reg("search", "Grep", "grep", "search_file_content", "grep_search", "codebase_search",
     "search", "rg", "ripgrep", "search_files", "SearchFiles", "GrepTool")
_reg("task", "Agent", "Task", "TaskCreate", "TaskUpdate", "TaskOutput", "TaskStop", "TaskList",
     "TaskGet", "BashOutput", "KillShell", "KillBash", "task", "subagent", "spawn_agent")
# Explicitly 'other' (documented so they are not mistaken for unknowns): planning, todo, web,
# tool search, skills, lints, invalid-call placeholders.
_reg("other", "TodoWrite", "todowrite", "todoread", "updateTodos", "SetTodoList", "update_plan",
     "skill", "Skill", "webfetch", "WebFetch", "WebSearch", "web_search", "web_fetch",
     "google_web_search", "ToolSearch", "invalid", "readLints", "ExitPlanMode", "save_memory",
     "think", "SlashCommand", "tool_search", "image_generation", "todo_list")

_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path", "absolute_path", "target_file",
              "targetFile", "target_directory", "targetDirectory", "directory_path", "dir_path",
              "folder", "file", "filename", "source_path", "destination", "new_path", "old_path")
_LIST_KEYS = ("paths", "file_paths", "filePaths", "files", "targets", "changes")
_CWD_KEYS = ("workdir", "cwd", "working_directory", "workingDirectory", "directory", "dir")
_PATTERN_KEYS = ("pattern", "globPattern", "glob_pattern", "patterns")

_SHELLS = {"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh", "dash"}
_PATCH_HEADERS = ("*** Update File:", "*** Add File:", "*** Delete File:", "*** Move to:")


def patch_paths(patch: str) -> list[str]:
    """Paths named by a Codex apply_patch body (Update/Add/Delete File and Move to headers)."""
    out: list[str] = []
    if "***" not in patch:
        return out
    for line in patch.splitlines():
        s = line.strip()
        if s.startswith("***"):
            for h in _PATCH_HEADERS:
                if s.startswith(h):
                    p = s[len(h):].strip()
                    if p and p not in out:
                        out.append(p)
                    break
    return out


def argv_command(argv: list) -> str:
    """Shell text for an argv list: the script of ``bash -lc SCRIPT``, else the quoted join."""
    parts = [str(a) for a in argv]
    if len(parts) >= 3 and parts[0] in _SHELLS and parts[1] in ("-lc", "-c", "-l", "-ic", "-cl"):
        if parts[1] == "-l" and len(parts) >= 4 and parts[2] == "-c":
            return parts[3]
        return parts[2]
    try:
        return shlex.join(parts)
    except Exception:  # noqa: BLE001
        return " ".join(parts)


def _str(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    return None


def _add(paths: list[str], v: Any) -> None:
    if isinstance(v, str):
        if v and v not in paths:
            paths.append(v)
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, str) and x and x not in paths:
                paths.append(x)
            elif isinstance(x, dict):
                _add(paths, x.get("path") or x.get("file_path") or x.get("filePath"))


def normalize(tool: str | None, args: Any) -> tuple[str, str | None, list[str], str | None, bool]:
    """Normalize one tool call; never raises."""
    name = tool if isinstance(tool, str) else ""
    a = args if isinstance(args, dict) else {}
    low = name.lower()
    kind = _KIND.get(low)
    if kind is None:
        # MCP-style prefixes (mcp__server__Read) and namespaced names (functions.exec_command)
        tail = low.rsplit("__", 1)[-1].rsplit(".", 1)[-1]
        kind = _KIND.get(tail, "other")
        low = tail
    command: str | None = None
    paths: list[str] = []
    cwd: str | None = None
    background = False

    for k in _CWD_KEYS:
        v = a.get(k)
        if isinstance(v, str) and v:
            cwd = v
            break

    if kind == "exec":
        c = a.get("command")
        if c is None:
            c = a.get("cmd")
        if isinstance(c, list):
            command = argv_command(c)
        elif isinstance(c, str):
            command = c
        if a.get("run_in_background") is True or a.get("is_background") is True or low == "monitor":
            background = True
        if command and "*** Begin Patch" in command and command.lstrip().startswith("apply_patch"):
            kind = "edit"
            paths = patch_paths(command)
        return kind, command, paths, cwd, background

    if low == "str_replace_editor" or low == "str_replace_based_edit_tool":
        sub = a.get("command")
        if sub == "view":
            kind = "read"
        elif sub == "create":
            kind = "write"

    if low in ("apply_patch", "applypatch", "patch"):
        body = a.get("input") or a.get("patch") or a.get("patchText") or a.get("content")
        if isinstance(body, str):
            paths = patch_paths(body)

    # path-like arguments; for exec-less tools 'directory' is a path, not a cwd
    for k in _PATH_KEYS:
        _add(paths, a.get(k))
    for k in _LIST_KEYS:
        _add(paths, a.get(k))
    if kind == "list":
        for k in _PATTERN_KEYS:
            _add(paths, a.get(k))
    if kind != "exec":
        d = a.get("directory")
        if isinstance(d, str) and d:
            _add(paths, d)
            if cwd == d:
                cwd = None
    if low == "multiedit" or low == "multi_edit":
        edits = a.get("edits")
        if isinstance(edits, list):
            for e in edits:
                if isinstance(e, dict):
                    _add(paths, e.get("file_path") or e.get("path"))
    if kind == "task" and a.get("run_in_background") is True:
        background = True
    return kind, command, paths, cwd, background
