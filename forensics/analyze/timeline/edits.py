"""Pure functions that rebuild file content from edit operations, or say why they cannot.

Every function returns ``(content, None)`` on success or ``(None, reason)`` when the result cannot
be established exactly: the timeline records a gap rather than a guess.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

Result = tuple["str | None", "str | None"]


@dataclass
class Replace:
    old: str
    new: str
    replace_all: bool = False
    expected: int | None = None   # gemini expected_replacements


def apply_replaces(base: str | None, edits: list[Replace], creating_ok: bool = True) -> Result:
    """Apply string replacements the way Edit/StrReplace tools do: each old text must occur exactly
    once unless replace_all (or an expected count) is given."""
    content = base
    for k, e in enumerate(edits, 1):
        where = f" (edit {k} of {len(edits)})" if len(edits) > 1 else ""
        if content is None:
            if e.old == "" and creating_ok:
                content = e.new
                continue
            return None, "unknown base: edit of a file whose earlier content is not in the transcript" + where
        if e.old == "":
            if content == "":
                content = e.new
                continue
            return None, "empty old text on a non-empty file" + where
        n = content.count(e.old)
        if n == 0:
            return None, "old text not found in the rebuilt content" + where
        if e.replace_all or (e.expected is not None and e.expected == n):
            content = content.replace(e.old, e.new)
        elif e.expected is not None and e.expected != n:
            return None, f"old text occurs {n} times, expected {e.expected}" + where
        elif n > 1:
            return None, f"old text occurs {n} times in the rebuilt content" + where
        else:
            content = content.replace(e.old, e.new, 1)
    return content, None


def reverse_replaces(after: str, edits: list[Replace]) -> Result:
    """Undo single-occurrence replacements: the content before, if it is uniquely determined and
    re-applying the edits reproduces `after` exactly."""
    content = after
    for e in reversed(edits):
        if e.replace_all or e.expected not in (None, 1) or e.new == "" or e.old == "":
            return None, "edit not reversible (replace-all, empty text or counted replacement)"
        if content.count(e.new) != 1:
            return None, "new text does not occur exactly once in the later content"
        content = content.replace(e.new, e.old, 1)
    check, err = apply_replaces(content, edits, creating_ok=False)
    if err or check != after:
        return None, "reversed edit does not reproduce the later content"
    return content, None


# ---------------------------------------------------------------- Codex apply_patch

@dataclass
class PatchOp:
    action: str                 # add | update | delete
    path: str
    move_to: str | None = None
    add_content: str | None = None
    hunks: list[tuple[str | None, list[str], list[str], bool]] | None = None  # (header, old, new, eof)


_BEGIN = "*** Begin Patch"


def find_patch(text: str) -> str | None:
    i = text.find(_BEGIN)
    if i < 0:
        return None
    j = text.find("*** End Patch", i)
    return text[i:] if j < 0 else text[i:j + len("*** End Patch")]


def parse_patch(text: str) -> tuple[list[PatchOp], str | None]:
    lines = text.split("\n")
    ops: list[PatchOp] = []
    i = 0
    while i < len(lines) and lines[i].strip() != _BEGIN:
        i += 1
    if i == len(lines):
        return [], "no '*** Begin Patch' line"
    i += 1
    cur: PatchOp | None = None
    hunk: list | None = None
    while i < len(lines):
        raw = lines[i]
        line = raw.rstrip("\r")
        s = line.strip()
        if s == "*** End Patch":
            break
        if s.startswith("*** Add File:"):
            cur = PatchOp("add", s.split(":", 1)[1].strip(), add_content="")
            ops.append(cur)
            hunk = None
        elif s.startswith("*** Delete File:"):
            cur = PatchOp("delete", s.split(":", 1)[1].strip())
            ops.append(cur)
            hunk = None
        elif s.startswith("*** Update File:"):
            cur = PatchOp("update", s.split(":", 1)[1].strip(), hunks=[])
            ops.append(cur)
            hunk = None
        elif s.startswith("*** Move to:") and cur is not None and cur.action == "update":
            cur.move_to = s.split(":", 1)[1].strip()
        elif s == "*** End of File":
            if hunk is not None:
                hunk[3] = True
        elif cur is None:
            pass
        elif cur.action == "add":
            if line.startswith("+"):
                cur.add_content += line[1:] + "\n"
            else:
                return ops, f"unexpected line in Add File {cur.path!r}: {line[:60]!r}"
        elif cur.action == "update":
            if line.startswith("@@"):
                hunk = [line[2:].strip() or None, [], [], False]
                cur.hunks.append(hunk)
            else:
                if hunk is None:
                    hunk = [None, [], [], False]
                    cur.hunks.append(hunk)
                if line.startswith("+"):
                    hunk[2].append(line[1:])
                elif line.startswith("-"):
                    hunk[1].append(line[1:])
                elif line.startswith(" ") or line == "":
                    ctx = line[1:] if line else ""
                    hunk[1].append(ctx)
                    hunk[2].append(ctx)
                else:
                    return ops, f"unexpected line in Update File {cur.path!r}: {line[:60]!r}"
        i += 1
    return ops, None


def _seek(lines: list[str], pattern: list[str], start: int, eof: bool) -> int:
    if not pattern:
        return len(lines)
    n = len(pattern)
    cands = range(len(lines) - n, start - 1, -1) if eof else range(start, len(lines) - n + 1)
    if eof:
        cands = [len(lines) - n] + [c for c in cands if c != len(lines) - n]
    for norm in (lambda x: x, str.rstrip, str.strip):
        pat = [norm(p) for p in pattern]
        for c in cands:
            if c < start or c < 0:
                continue
            if all(norm(lines[c + k]) == pat[k] for k in range(n)):
                return c
    return -1


def apply_update(base: str | None, op: PatchOp) -> Result:
    if base is None:
        return None, "unknown base: patch updates a file whose earlier content is not in the transcript"
    lines = base.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[str] = []
    pos = 0
    for header, old, new, eof in op.hunks or []:
        if header:
            h = _seek(lines, [header], pos, False)
            if h < 0:
                return None, f"patch context header {header[:50]!r} not found"
            out.extend(lines[pos:h + 1] if h >= pos else [])
            pos = h + 1
        # trailing empty context lines that the patch writer added are tolerated
        o, nw = list(old), list(new)
        at = _seek(lines, o, pos, eof)
        while at < 0 and o and o[-1] == "" and nw and nw[-1] == "":
            o.pop()
            nw.pop()
            at = _seek(lines, o, pos, eof)
        if at < 0:
            return None, "patch hunk does not match the rebuilt content"
        out.extend(lines[pos:at])
        out.extend(nw)
        pos = at + len(o)
    out.extend(lines[pos:])
    return "\n".join(out) + "\n", None


def apply_update_as_text(base: str | None, op: PatchOp) -> Result:
    """Fallback for a patch the harness reported as applied but whose hunks do not match whole
    lines (some patch writers put line fragments after '-'/'+'): each hunk's old text, joined,
    must occur exactly once in the content and is replaced by the new text."""
    if base is None:
        return None, "unknown base: patch updates a file whose earlier content is not in the transcript"
    content = base
    for header, old, new, eof in op.hunks or []:
        o, n = "\n".join(old), "\n".join(new)
        if not o:
            return None, "patch hunk without old lines does not match"
        k = content.count(o)
        if k != 1:
            return None, f"patch hunk text occurs {k} times in the rebuilt content"
        content = content.replace(o, n, 1)
    return content, None


# ---------------------------------------------------------------- sed -i

def sed_script(exprs: list[str], content: str | None, extended: bool) -> Result:
    if content is None:
        return None, "unknown base: sed -i on a file whose content is not in the transcript"
    for ex in exprs:
        for part in _split_sed(ex):
            m = _parse_s(part)
            if m is None:
                return None, f"sed expression not supported: {part[:40]!r}"
            pat, repl, flags = m
            try:
                rx = re.compile(pat if extended else _bre_to_py(pat), re.I if "I" in flags or "i" in flags else 0)
            except re.error as e:
                return None, f"sed pattern not understood: {e}"
            count = 0 if "g" in flags else 1
            num = [int(x) for x in re.findall(r"\d+", flags)]
            if num:
                return None, "sed numeric occurrence flag not supported"
            py_repl = _sed_repl(repl)
            out_lines = []
            for ln in content.split("\n"):
                out_lines.append(rx.sub(py_repl, ln, count=count))
            content = "\n".join(out_lines)
    return content, None


def _split_sed(ex: str) -> list[str]:
    parts, cur, i = [], "", 0
    # split on ';' or newlines that separate s commands (outside the s/// body)
    while i < len(ex):
        m = _match_s(ex, i)
        if m is None:
            rest = ex[i:].strip()
            if rest:
                parts.append(rest)
            break
        parts.append(ex[i:m])
        i = m
        while i < len(ex) and ex[i] in "; \n\t":
            i += 1
    return [p for p in (x.strip() for x in parts) if p] or ([ex] if ex.strip() else [])


def _match_s(ex: str, i: int) -> int | None:
    while i < len(ex) and ex[i] in " \t":
        i += 1
    if i + 1 >= len(ex) or ex[i] != "s":
        return None
    d = ex[i + 1]
    if d.isalnum() or d in " \\\n":
        return None
    j, seps = i + 2, 0
    while j < len(ex) and seps < 2:
        if ex[j] == "\\":
            j += 2
            continue
        if ex[j] == d:
            seps += 1
        j += 1
    if seps < 2:
        return None
    while j < len(ex) and (ex[j].isalnum()):
        j += 1
    return j


def _parse_s(part: str):
    if len(part) < 4 or part[0] != "s":
        return None
    d = part[1]
    fields, cur, i = [], [], 2
    while i < len(part):
        c = part[i]
        if c == "\\" and i + 1 < len(part):
            if part[i + 1] == d:
                cur.append(d if d not in ".*[]^$\\+?(){}|/" or d == "/" else "\\" + d)
            else:
                cur.append(part[i:i + 2])
            i += 2
            continue
        if c == d:
            fields.append("".join(cur))
            cur = []
            i += 1
            if len(fields) == 2:
                break
            continue
        cur.append(c)
        i += 1
    if len(fields) != 2:
        return None
    flags = part[i:].strip()
    if not re.fullmatch(r"[gIi0-9]*", flags):
        return None
    return fields[0], fields[1], flags


def _bre_to_py(p: str) -> str:
    out, i = [], 0
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            n = p[i + 1]
            out.append(n if n in "(){}+?|" else "\\" + n)
            i += 2
            continue
        out.append("\\" + c if c in "(){}+?|" else c)
        i += 1
    return "".join(out)


def _sed_repl(r: str) -> str:
    out, i = [], 0
    while i < len(r):
        c = r[i]
        if c == "\\" and i + 1 < len(r):
            n = r[i + 1]
            if n.isdigit():
                out.append("\\g<" + n + ">")
            elif n == "n":
                out.append("\n")
            elif n == "&":
                out.append("&")
            else:
                out.append(n.replace("\\", "\\\\"))
            i += 2
            continue
        if c == "&":
            out.append("\\g<0>")
        elif c == "\\":
            out.append("\\\\")
        else:
            out.append(c)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- python writes

@dataclass
class PyWrite:
    path: str | None          # None when the target could not be evaluated
    content: str | None       # literal content written (None: not a literal)
    append: bool = False
    source_path: str | None = None              # content = source file's content ...
    replaces: list[Replace] | None = None       # ... with these replacements applied
    copy_from: str | None = None                # shutil.copy(src, dst)
    reason: str | None = None


_WRITE_MODES = ("w", "wb", "w+", "a", "ab", "a+", "x", "wt", "at")


def python_writes(code: str) -> tuple[list[PyWrite], str | None]:
    """Find file writes in a python program: open(p,'w').write(lit), with open(..) as f: f.write(..),
    Path(p).write_text(..), p.write_text(p.read_text().replace(a, b)), shutil.copy(a, b).

    Returns writes in program order and, if the program could not be parsed, the reason."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return [], f"python source not parseable: {e.msg}"
    env: dict[str, tuple] = {}
    handles: dict[str, tuple[str | None, bool]] = {}
    writes: list[PyWrite] = []

    def const(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            v = node.value
            return ("lit", v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
        if isinstance(node, ast.Name) and node.id in env:
            return env[node.id]
        if isinstance(node, ast.JoinedStr):
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = const(node.left), const(node.right)
            if a and b and a[0] == "lit" and b[0] == "lit":
                return ("lit", a[1] + b[1])
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            a, b = path_of(node.left), path_of(node.right)
            if a is not None and b is not None:
                return ("path", a.rstrip("/") + "/" + b)
            return None
        if isinstance(node, ast.Call):
            f = node.func
            # Path(x) / pathlib.Path(x)
            if (isinstance(f, ast.Name) and f.id == "Path") or (isinstance(f, ast.Attribute) and f.attr == "Path"):
                if node.args:
                    p = path_of(node.args[0])
                    return ("path", p) if p is not None else None
                return None
            if isinstance(f, ast.Attribute):
                if f.attr in ("read_text", "read_bytes"):
                    p = path_of(f.value)
                    return ("read", p, []) if p is not None else None
                if f.attr == "read" and isinstance(f.value, ast.Call) and _is_open(f.value):
                    p = path_of(f.value.args[0]) if f.value.args else None
                    return ("read", p, []) if p is not None else None
                if f.attr == "read" and isinstance(f.value, ast.Name) and f.value.id in handles:
                    p, is_w = handles[f.value.id]
                    return ("read", p, []) if p is not None and not is_w else None
                if f.attr == "replace" and len(node.args) == 2:
                    base = const(f.value)
                    a, b = const(node.args[0]), const(node.args[1])
                    if base and a and b and a[0] == "lit" and b[0] == "lit":
                        if base[0] == "lit":
                            return ("lit", base[1].replace(a[1], b[1]))
                        if base[0] == "read":
                            return ("read", base[1], base[2] + [Replace(a[1], b[1], replace_all=True)])
                    return None
        return None

    def path_of(node):
        v = const(node)
        if v and v[0] in ("lit", "path"):
            return v[1]
        return None

    def emit(path, val, append=False):
        if val is None:
            writes.append(PyWrite(path, None, append, reason="written value is not a literal"))
        elif val[0] == "lit":
            writes.append(PyWrite(path, val[1], append))
        elif val[0] == "read":
            writes.append(PyWrite(path, None, append, source_path=val[1], replaces=val[2]))
        else:
            writes.append(PyWrite(path, None, append, reason="written value is not text"))

    def visit(stmts):
        for st in stmts:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                v = const(st.value)
                if v is not None:
                    env[st.targets[0].id] = v
                else:
                    env.pop(st.targets[0].id, None)
                if isinstance(st.value, ast.Call) and _is_open(st.value):
                    p = path_of(st.value.args[0]) if st.value.args else None
                    handles[st.targets[0].id] = (p, _open_mode(st.value) in _WRITE_MODES)
                _scan_expr(st.value)
            elif isinstance(st, ast.With):
                for item in st.items:
                    ce = item.context_expr
                    if isinstance(ce, ast.Call) and _is_open(ce) and isinstance(item.optional_vars, ast.Name):
                        p = path_of(ce.args[0]) if ce.args else None
                        handles[item.optional_vars.id] = (p, _open_mode(ce) in _WRITE_MODES)
                        if _open_mode(ce) in _WRITE_MODES and p is not None and not _open_mode(ce).startswith("a"):
                            emit(p, ("lit", ""))  # truncation; writes below append
                visit(st.body)
            elif isinstance(st, ast.Expr):
                _scan_expr(st.value)
            elif isinstance(st, (ast.If, ast.For, ast.While, ast.Try, ast.FunctionDef)):
                for fld in ("body", "orelse", "finalbody"):
                    visit(getattr(st, fld, []) or [])
                for h in getattr(st, "handlers", []) or []:
                    visit(h.body)

    def _scan_expr(e):
        for node in ast.walk(e):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            f = node.func
            if f.attr in ("write_text", "write_bytes") and node.args:
                p = path_of(f.value)
                if p is None:
                    writes.append(PyWrite(None, None, reason="write_text target not a literal path"))
                else:
                    emit(p, const(node.args[0]))
            elif f.attr == "write" and node.args:
                if isinstance(f.value, ast.Call) and _is_open(f.value):
                    p = path_of(f.value.args[0]) if f.value.args else None
                    mode = _open_mode(f.value)
                    if mode in _WRITE_MODES:
                        if p is None:
                            writes.append(PyWrite(None, None, reason="open() target not a literal path"))
                        else:
                            emit(p, const(node.args[0]), append=mode.startswith("a"))
                elif isinstance(f.value, ast.Name) and f.value.id in handles:
                    p, is_w = handles[f.value.id]
                    if is_w:
                        emit(p, const(node.args[0]), append=True)
            elif f.attr in ("copy", "copyfile", "copy2", "move") and isinstance(f.value, ast.Name) \
                    and f.value.id == "shutil" and len(node.args) >= 2:
                a, b = path_of(node.args[0]), path_of(node.args[1])
                writes.append(PyWrite(b, None, copy_from=a,
                                      reason=None if a and b else "copy paths not literal"))

    visit(tree.body)
    return writes, None


def _is_open(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Name) and f.id == "open") or (isinstance(f, ast.Attribute) and f.attr == "open"
                                                            and isinstance(f.value, ast.Name) and f.value.id in ("io", "codecs"))


def _open_mode(call: ast.Call) -> str:
    mode = "r"
    if len(call.args) >= 2 and isinstance(call.args[1], ast.Constant):
        mode = str(call.args[1].value)
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            mode = str(kw.value.value)
    return mode
