"""Which words of a simple command are paths, and how the command uses them (contamination).

`forensics.text.shell` reads the command (words, redirections, wrappers); this module knows,
for the common file tools, which of their operands are read, written, listed, searched, copied,
executed or only mentioned, and which paths a snippet of Python (``python -c``, a python
here-document) opens.  `forensics.transcripts.access` drives both and classifies the paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from forensics.text.shell import GLOB_CHARS, SHELLS, is_python

# Options that consume the next argument, per command (short and long forms).
_OPT_ARGS: dict[str, set[str]] = {
    "head": {"-n", "-c", "--lines", "--bytes"},
    "tail": {"-n", "-c", "--lines", "--bytes", "-s", "--sleep-interval", "--pid"},
    "grep": {"-e", "-f", "-m", "-A", "-B", "-C", "--regexp", "--file", "--max-count", "--context",
             "--after-context", "--before-context", "--include", "--exclude", "--exclude-dir", "--color", "--label"},
    "rg": {"-e", "-f", "-g", "-m", "-A", "-B", "-C", "-t", "-T", "--glob", "--iglob", "--type", "--type-not",
           "--max-count", "--context", "--after-context", "--before-context", "--regexp", "--file", "-M",
           "--max-columns", "-j", "--threads", "--max-depth", "-d", "--sort", "--color", "-E", "--encoding"},
    "ag": {"-G", "--file-search-regex", "-A", "-B", "-C", "-m"},
    "sed": {"-e", "-f", "--expression", "--file", "-l"},
    "awk": {"-f", "-v", "-F"},
    "sort": {"-k", "-t", "-o", "-S", "--key", "--field-separator", "--output"},
    "cut": {"-d", "-f", "-c", "-b"},
    "jq": {"--arg", "--argjson", "--slurpfile", "--rawfile", "-L", "--indent"},
    "xxd": {"-l", "-s", "-c", "-g"},
    "od": {"-t", "-N", "-j", "-A"},
    "diff": {"-U", "-C", "--label", "-x", "--exclude", "-I"},
    "tar": {"-C", "--directory", "-T", "--files-from", "-X", "--exclude-from", "--exclude"},
    "cp": {"-t", "--target-directory", "-S", "--suffix"},
    "mv": {"-t", "--target-directory", "-S", "--suffix"},
    "rsync": {"-e", "--exclude", "--include", "--rsh", "--exclude-from", "--include-from", "--filter"},
    "ls": {"-I", "--ignore", "-w", "--width", "--sort", "--time-style", "-T"},
    "tree": {"-L", "-I", "-P", "-o"},
    "du": {"-d", "--max-depth", "-B", "--exclude", "-t"},
    "wc": set(),
    "nvcc": {"-o", "-I", "-L", "-l", "-arch", "-gencode", "-x", "-ccbin", "-Xcompiler", "-Xptxas", "-D", "-std",
             "--output-file", "-include", "-code", "--gpu-architecture", "-maxrregcount"},
    "python": {"-m", "-W", "-X", "-Q"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "less": {"-p", "-x", "-y", "-b", "-h", "-j", "-z", "-o", "-O", "-T"},
    "find": set(),
    "strings": {"-n", "-t", "-e"},
    "md5sum": set(),
    "unzip": {"-d", "-x"},
    "zip": {"-x", "-i"},
    "ln": {"-t", "--target-directory", "-S", "--suffix"},
    "tee": set(),
    "xargs": {"-I", "-n", "-P", "-d", "-a", "-L", "-s", "-E", "--max-args", "--max-procs", "--delimiter", "--arg-file"},
    "stat": {"-c", "--format", "--printf"},
    "file": {"-m", "-f", "-F"},
    "zcat": set(),
    "git": {"-C", "-c"},
}
_ALIASES = {"egrep": "grep", "fgrep": "grep", "zgrep": "grep", "tac": "cat", "more": "less", "most": "less",
            "bat": "cat", "batcat": "cat", "gzcat": "zcat", "colordiff": "diff", "sha256sum": "md5sum",
            "sha1sum": "md5sum", "sha512sum": "md5sum", "b2sum": "md5sum", "cksum": "md5sum", "g++": "nvcc",
            "gcc": "nvcc", "clang": "nvcc", "clang++": "nvcc", "c++": "nvcc", "cc": "nvcc", "hexdump": "xxd",
            "ripgrep": "rg", "scp": "rsync", "exa": "ls", "eza": "ls", "dir": "ls", "vdir": "ls", "gawk": "awk",
            "mawk": "awk", "nawk": "awk"}

READ_PLAIN = {"cat", "head", "tail", "less", "nl", "wc", "md5sum", "xxd", "od", "strings", "file", "stat",
              "sort", "uniq", "cut", "zcat", "diff", "cmp", "comm", "paste", "column", "fold", "fmt", "iconv",
              "base64", "readelf", "objdump", "nm", "cuobjdump", "nvdisasm", "tr", "expand", "pr", "view",
              "vimdiff", "sdiff", "jq", "yq", "bzcat", "xzcat", "unxz", "gunzip"}
LIST_CMDS = {"ls", "tree", "du", "realpath", "readlink", "dirname", "basename", "namei", "lsof", "fuser"}
EDIT_CMDS = {"vim", "vi", "nano", "emacs", "code", "ed", "patch", "truncate"}
WRITE_CMDS = {"touch", "mkdir", "mkfifo", "tee", "install"}
DELETE_CMDS = {"rm", "rmdir", "unlink", "shred"}


def canon(cmd: str) -> str:
    """Command name without its directory, aliases folded (python3.12 -> python, egrep -> grep)."""
    base = cmd.rsplit("/", 1)[-1]
    return "python" if is_python(base) else _ALIASES.get(base, base)


def split_options(name: str, args: list[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """Separate option words (with their consumed arguments) from operands."""
    takes = _OPT_ARGS.get(name, set())
    operands: list[str] = []
    opts: list[tuple[str, str | None]] = []
    i = 0
    end_opts = False
    while i < len(args):
        a = args[i]
        if end_opts or not a.startswith("-") or a == "-":
            operands.append(a)
            i += 1
            continue
        if a == "--":
            end_opts = True
            i += 1
            continue
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            opts.append((k, v))
            i += 1
            continue
        if a in takes:
            opts.append((a, args[i + 1] if i + 1 < len(args) else None))
            i += 2
            continue
        # bundled short option with attached value: -n20, -e'pattern'
        if len(a) > 2 and not a.startswith("--") and a[:2] in takes:
            opts.append((a[:2], a[2:]))
            i += 1
            continue
        opts.append((a, None))
        i += 1
    return operands, opts


def _has_flag(opts: list[tuple[str, str | None]], *flags: str) -> bool:
    for k, _ in opts:
        if k in flags:
            return True
        if len(k) > 1 and k[0] == "-" and k[1] != "-":
            letters = k[1:]
            for f in flags:
                if len(f) == 2 and f[0] == "-" and f[1] in letters:
                    return True
    return False


@dataclass(slots=True)
class PathUse:
    """One path a command uses: how, and the word as written."""

    access: str          # read | write | edit | list | search | exec | delete | copy_src | copy_dst | mention
    path: str
    glob: bool = False
    note: str = ""       # tool that made it (cat, sed -n, find -exec cat, python open ...)



def command_uses(argv: list[str]) -> list[PathUse]:
    """Which operands of a (wrapper-stripped) simple command are paths, and how they are used.

    Python code (``-c``) is returned as a single PathUse with access 'python_code' in `path`'s
    place being the code; callers hand it to `python_code_uses`.
    """
    if not argv:
        return []
    name = canon(argv[0])
    args = argv[1:]
    out: list[PathUse] = []
    if name in READ_PLAIN:
        ops, opts = split_options(name, args)
        if name in ("jq", "yq") and ops and not any(k in ("-f", "--from-file") for k, _ in opts):
            ops = ops[1:]
        if name == "sort":
            for k, v in opts:
                if k in ("-o", "--output") and v:
                    out.append(PathUse("write", v, note="sort -o"))
        for o in ops:
            if o != "-":
                out.append(PathUse("read", o, note=name))
        return out
    if name == "less":
        ops, _ = split_options(name, args)
        return [PathUse("read", o, note=name) for o in ops if not o.startswith("+")]
    if name == "sed":
        ops, opts = split_options(name, args)
        has_script = any(k in ("-e", "--expression", "-f", "--file") for k, _ in opts)
        if not has_script and ops:
            ops = ops[1:]
        inplace = any(k.startswith("-i") or k.startswith("--in-place") for k, _ in opts) or \
            _has_flag(opts, "-i")
        acc = "edit" if inplace else "read"
        note = "sed -i" if inplace else ("sed -n" if _has_flag(opts, "-n") else "sed")
        return [PathUse(acc, o, note=note) for o in ops if o != "-"]
    if name == "awk":
        ops, opts = split_options(name, args)
        if not any(k == "-f" for k, _ in opts) and ops:
            ops = ops[1:]
        return [PathUse("read", o, note="awk") for o in ops if "=" not in o or "/" in o.split("=")[0]]
    if name in ("grep", "rg", "ag", "ack"):
        ops, opts = split_options(name, args)
        files_mode = name == "rg" and _has_flag(opts, "--files")
        has_pat = any(k in ("-e", "--regexp", "-f", "--file") for k, _ in opts)
        if not files_mode and not has_pat and ops:
            ops = ops[1:]
        rec = name in ("rg", "ag", "ack") or _has_flag(opts, "-r", "-R", "--recursive", "--dereference-recursive")
        if files_mode:
            return [PathUse("list", o, note="rg --files") for o in ops] or [PathUse("list", ".", note="rg --files")]
        names_only = _has_flag(opts, "-l", "--files-with-matches", "-L", "--files-without-match", "-c", "--count")
        acc = "search" if rec or names_only else "read"
        note = f"{name} -r" if rec and name == "grep" else name
        if rec and not ops:
            ops = ["."]
        return [PathUse(acc, o, note=note) for o in ops if o != "-"]
    if name in LIST_CMDS:
        ops, _ = split_options(name, args)
        if name in ("lsof", "fuser"):
            return [PathUse("list", o, note=name) for o in ops if o.startswith("/")]
        if not ops and name in ("ls", "tree", "du"):
            ops = ["."]
        return [PathUse("list", o, note=name) for o in ops]
    if name == "find":
        roots: list[str] = []
        i = 0
        while i < len(args) and not args[i].startswith("-") and args[i] not in ("(", "!", "\\("):
            roots.append(args[i])
            i += 1
        if not roots:
            roots = ["."]
        names: list[str] = []
        execs: list[list[str]] = []
        while i < len(args):
            a = args[i]
            if a in ("-name", "-iname", "-path", "-ipath", "-wholename") and i + 1 < len(args):
                names.append(args[i + 1])
                i += 2
                continue
            if a in ("-exec", "-execdir", "-ok", "-okdir"):
                j = i + 1
                cmd: list[str] = []
                while j < len(args) and args[j] not in (";", "+", "\\;"):
                    cmd.append(args[j])
                    j += 1
                execs.append(cmd)
                i = j + 1
                continue
            i += 1
        out.extend(PathUse("search", r, note="find") for r in roots)
        if execs:
            targets = []
            for r in roots:
                pats = [n for n in names if "/" not in n] or ["*"]
                for p in pats:
                    targets.append(r.rstrip("/") + "/**/" + p)
                for n in names:
                    if "/" in n:
                        targets.append(n)
            for cmd in execs:
                if not cmd:
                    continue
                for t in targets:
                    sub = [t if x == "{}" else x for x in cmd]
                    if "{}" not in cmd:
                        sub = cmd + [t]
                    for u in command_uses(sub):
                        if u.path == t:
                            out.append(PathUse(u.access, t, glob=True, note=f"find -exec {u.note}"))
        return out
    if name == "tar":
        ops, opts = split_options(name, args)
        mode = ""
        archive: str | None = None
        dest: str | None = None
        if args and not args[0].startswith("-") and re.fullmatch(r"[A-Za-z]+", args[0]):
            # old-style bundle: tar czf out.tgz src ; f takes the next operand
            bundle = args[0]
            rest = args[1:]
            ops2, opts = split_options("tar", rest)
            mode = bundle
            if "f" in bundle and ops2:
                archive = ops2[0]
                ops2 = ops2[1:]
            ops = ops2
        else:
            fl = "".join(k[1:] for k, _ in opts if k.startswith("-") and not k.startswith("--"))
            mode = fl + "".join(k[2:3] for k, _ in opts if k in ("--create", "--extract", "--list"))
            for k, v in opts:
                if k.startswith("-") and not k.startswith("--") and k.endswith("f"):
                    # -f takes the next word, which split_options treated as an operand
                    if ops:
                        archive = ops[0]
                        ops = ops[1:]
                    break
                if k == "--file" and v:
                    archive = v
            for k, v in opts:
                if k in ("-C", "--directory") and v:
                    dest = v
        if "c" in mode or "r" in mode or "u" in mode:
            if archive and archive != "-":
                out.append(PathUse("write", archive, note="tar -c"))
            out.extend(PathUse("read", o, note="tar -c") for o in ops)
        else:
            if archive and archive != "-":
                out.append(PathUse("read", archive, note="tar -x" if "x" in mode else "tar -t"))
            if dest and "x" in mode:
                out.append(PathUse("write", dest, note="tar -x"))
        return out
    if name in ("cp", "mv", "rsync", "ln", "install"):
        ops, opts = split_options(name, args)
        target = None
        for k, v in opts:
            if k in ("-t", "--target-directory") and v:
                target = v
        if target is None and len(ops) >= 2:
            target = ops[-1]
            ops = ops[:-1]
        elif target is None and name == "ln" and len(ops) == 1:
            target = "."
        out.extend(PathUse("copy_src", o, note=name) for o in ops)
        if target:
            out.append(PathUse("copy_dst", target, note=name))
        return out
    if name in ("unzip",):
        ops, opts = split_options(name, args)
        if ops:
            out.append(PathUse("read", ops[0], note="unzip"))
        for k, v in opts:
            if k == "-d" and v:
                out.append(PathUse("write", v, note="unzip"))
        return out
    if name == "zip":
        ops, _ = split_options(name, args)
        if ops:
            out.append(PathUse("write", ops[0], note="zip"))
            out.extend(PathUse("read", o, note="zip") for o in ops[1:])
        return out
    if name in EDIT_CMDS:
        ops, _ = split_options(name, args)
        return [PathUse("edit", o, note=name) for o in ops if not o.startswith("+")]
    if name in WRITE_CMDS:
        ops, _ = split_options(name, args)
        return [PathUse("write", o, note=name) for o in ops]
    if name in DELETE_CMDS:
        ops, _ = split_options(name, args)
        return [PathUse("delete", o, note=name) for o in ops]
    if name in ("source", "."):
        return [PathUse("read", a, note="source") for a in args[:1]]
    if name == "nvcc":
        ops, opts = split_options(name, args)
        for k, v in opts:
            if k in ("-o", "--output-file") and v:
                out.append(PathUse("write", v, note=name))
            elif k == "-I" and v:
                out.append(PathUse("search", v, note=f"{name} -I"))
        out.extend(PathUse("read", o, note=name) for o in ops if "." in o.rsplit("/", 1)[-1])
        return out
    if name == "python":
        ops, opts = split_options(name, args)
        for k, v in opts:
            if k == "-c" or (k.startswith("-") and not k.startswith("--") and k.endswith("c") and len(k) <= 4):
                # python -c CODE: CODE was taken as an operand
                if ops:
                    out.append(PathUse("python_code", ops[0], note="python -c"))
                    return out
        if any(k == "-m" for k, _ in opts):
            return [PathUse("mention", o, note="python -m arg") for o in ops if _looks_pathy(o)]
        if ops and ops[0] != "-":
            out.append(PathUse("exec", ops[0], note="python"))
            out.extend(PathUse("mention", o, note="python arg") for o in ops[1:] if _looks_pathy(o))
        return out
    if name == "git":
        ops, opts = split_options(name, args)
        for k, v in opts:
            if k == "-C" and v:
                out.append(PathUse("list", v, note="git -C"))
        if ops and ops[0] in ("show", "diff", "log", "blame", "cat-file"):
            out.extend(PathUse("read", o, note=f"git {ops[0]}") for o in ops[1:] if _looks_pathy(o) and ":" not in o)
        return out
    if name in SHELLS:
        ops, opts = split_options(name, args)
        if ops and ops[0] != "-" and not any(k == "-c" or (k.startswith("-") and "c" in k[1:]) for k, _ in opts):
            out.append(PathUse("exec", ops[0], note=name))
        return out
    if name in ("cd", "pushd", "popd", "export", "echo", "printf", "true", "false", "set", "unset", "local",
                "read", "shift", "return", "exit", "wait", "sleep", "kill", "trap", "alias", "type", "which",
                "hash", "ulimit", "umask", "declare", "typeset", "test", "[", "[[", "]]", "fi", "done", "esac",
                "case", "for", "in", "function", "select", "jobs", "fg", "bg", "disown", "history", "let"):
        return []
    # unknown command: the program itself if path-like, and path-looking operands as mentions
    if "/" in argv[0]:
        out.append(PathUse("exec", argv[0], note="exec"))
    for a in args:
        if not a.startswith("-") and _looks_pathy(a):
            out.append(PathUse("mention", a, note=name))
        elif a.startswith("--") and "=" in a:
            v = a.split("=", 1)[1]
            if _looks_pathy(v):
                out.append(PathUse("mention", v, note=name))
    return out


_EXT_RE = re.compile(r"\.(?:py|cu|cuh|cpp|cc|c|h|hpp|json|jsonl|log|txt|yaml|yml|toml|md|so|o|ptx|cubin|sh|csv|tsv|gz|tgz|tar|zip|lock|out)$")


def _looks_pathy(a: str) -> bool:
    if not a or len(a) > 4096 or "\n" in a:
        return False
    if "/" in a and not a.startswith(("http://", "https://")) and " " not in a:
        return True
    return bool(_EXT_RE.search(a))


# ---------------------------------------------------------------------------- python code

_PY_STR = r"""(?P<pfx>[rRbBfFuU]{0,2})(?P<q>'''|\"\"\"|'|")(?P<s>.*?)(?P=q)"""
_PY_OPEN = re.compile(r"""\b(?:open|io\.open|codecs\.open|gzip\.open|tarfile\.open|zipfile\.ZipFile)\(\s*"""
                      + _PY_STR + r"""(?:\s*,\s*(?:mode\s*=\s*)?(?P<mq>['"])(?P<mode>[rwabxt+]+)(?P=mq))?""", re.S)
_PY_PATH = re.compile(r"""\b(?:pathlib\.)?(?:Path|PurePath|PosixPath)\(\s*""" + _PY_STR + r"""\s*\)"""
                      r"""(?P<tail>(?:\s*/\s*(?:['"][^'"]*['"]))*)\s*(?:\.(?P<meth>\w+))?""", re.S)
_PY_LIST = re.compile(r"""\b(?:glob\.glob|glob\.iglob|glob|os\.listdir|os\.scandir|os\.walk|listdir|scandir)\(\s*"""
                      + _PY_STR, re.S)
_PY_COPY = re.compile(r"""\bshutil\.(?:copy|copy2|copyfile|copytree|move)\(\s*""" + _PY_STR + r"""\s*,\s*"""
                      r"""(?P<pfx2>[rRbBfFuU]{0,2})(?P<q2>'|")(?P<s2>.*?)(?P=q2)""", re.S)
_PY_READERS = re.compile(r"""\b(?:torch\.load|np\.load|numpy\.load|json\.load|pd\.read_\w+|yaml\.safe_load|"""
                         r"""load_inline|cpp_extension\.load|subprocess\.\w+|os\.system|exec\(open)\(\s*""" + _PY_STR, re.S)
_PY_ANY_STR = re.compile(_PY_STR, re.S)
_FSTR_FIELD = re.compile(r"\{[^{}]*\}")


def _py_lit(pfx: str, s: str) -> tuple[str, bool]:
    if "f" in pfx.lower():
        t = _FSTR_FIELD.sub("*", s)
        return t, t != s
    return s, bool(GLOB_CHARS.search(s))


def python_code_uses(code: str) -> list[PathUse]:
    """Paths a snippet of Python opens, lists, copies or names (regex over the source)."""
    out: list[PathUse] = []
    seen: set[tuple[int, int]] = set()
    for m in _PY_OPEN.finditer(code):
        p, g = _py_lit(m.group("pfx"), m.group("s"))
        mode = m.group("mode") or "r"
        acc = "write" if any(c in mode for c in "wax") else ("edit" if "+" in mode else "read")
        out.append(PathUse(acc, p, glob=g, note="python open"))
        seen.add(m.span("s"))
    for m in _PY_PATH.finditer(code):
        p, g = _py_lit(m.group("pfx"), m.group("s"))
        tail = m.group("tail") or ""
        for part in re.findall(r"['\"]([^'\"]*)['\"]", tail):
            p = p.rstrip("/") + "/" + part
        meth = m.group("meth") or ""
        if meth in ("read_text", "read_bytes", "open"):
            acc = "read"
        elif meth in ("write_text", "write_bytes", "touch", "mkdir"):
            acc = "write"
        elif meth in ("iterdir", "glob", "rglob", "exists", "is_file", "is_dir", "stat"):
            acc = "list"
        elif meth in ("unlink", "rmdir"):
            acc = "delete"
        else:
            acc = "mention"
        out.append(PathUse(acc, p, glob=g, note=f"python Path.{meth}" if meth else "python Path"))
        seen.add(m.span("s"))
    for m in _PY_LIST.finditer(code):
        p, g = _py_lit(m.group("pfx"), m.group("s"))
        out.append(PathUse("list", p, glob=g or "glob" in m.group(0)[:10], note="python listdir/glob"))
        seen.add(m.span("s"))
    for m in _PY_COPY.finditer(code):
        a, ga = _py_lit(m.group("pfx"), m.group("s"))
        b, gb = _py_lit(m.group("pfx2"), m.group("s2"))
        out.append(PathUse("copy_src", a, glob=ga, note="python shutil"))
        out.append(PathUse("copy_dst", b, glob=gb, note="python shutil"))
        seen.add(m.span("s"))
        seen.add(m.span("s2"))
    for m in _PY_READERS.finditer(code):
        if m.span("s") in seen:
            continue
        p, g = _py_lit(m.group("pfx"), m.group("s"))
        if _looks_pathy(p):
            out.append(PathUse("read", p, glob=g, note="python load"))
            seen.add(m.span("s"))
    for m in _PY_ANY_STR.finditer(code):
        if m.span("s") in seen:
            continue
        s = m.group("s")
        if len(s) < 3 or "\n" in s:
            continue
        p, g = _py_lit(m.group("pfx"), s)
        if "/" in p and " " not in p and not p.startswith(("http", "//")) and len(p) < 1024:
            out.append(PathUse("mention", p, glob=g, note="python literal"))
    return out
