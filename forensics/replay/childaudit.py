"""Child side of the replay's runtime evidence: a PEP 578 audit hook and a path tracer.

Standard library only: copied beside worker.py into the scratch's harness/ and loaded by the worker
as a private module (no name in sys.modules reaches it).  The parent's half is
`forensics.replay.capabilities` (it reads what this sends and judges it).

**The audit hook** (`install`).  Installed before the solution is imported.  For every audit event
CPython raises it first tests the event name against a frozenset (`INTERESTING`; everything else
returns at once), then walks the Python stack from the event outwards to the innermost frame of the
solution's own files (`sol/`, and code the solution compiled itself, learnt from its direct
`compile` / `exec` events).  The frames between that frame and the event are the `via` chain (the
modules the solution called that did it: empty when it called the audited builtin itself).  A walk
that meets a frame of the harness first (worker.py, this file, the benchmark frames the worker
compiles) is the replay's own doing and is dropped; a walk that meets neither, in a thread other than
the worker's main thread, is a thread the solution started (`file: "<thread>"`).  Each new
(event, site, target) is written at once, one JSON line per `os.write` (under PIPE_BUF, so writers
never interleave), to a pipe the parent reads: a solution cannot take back what it already did.
Sites are deduplicated in a bounded table; past it an `overflow` record says so.  The hook never
raises (an exception from an audit hook aborts the audited operation) and is re-entrancy safe (it
calls sys._getframe, itself audited, under a per-thread guard).

What fires, measured on CPython 3.11 (docs/replay.md has the table): `open` (also os.open, with
path and mode/flags), `os.*` file operations, `subprocess.Popen`, `os.system`, `os.exec`, `os.fork`,
`os.posix_spawn`, `os.kill`, `socket.*`, `ctypes.dlopen/dlsym/string_at/cdata/PyObj_FromPtr`,
`gc.get_objects/get_referrers/get_referents`, `sys._getframe`, `sys._current_frames`,
`object.__getattr__` of `tb_frame` / `gi_frame` / `cr_frame` / `ag_frame` (not `f_back`, not
`f_globals`), `object.__setattr__` of a function's `__code__` / `__defaults__` / `__kwdefaults__`,
`sys.settrace`, `sys.setprofile`, `sys.addaudithook`, `mmap.__new__`, `import` (also of a module
that is not there), `compile`, `exec`.  Nothing fires for: an attribute set on a module or a class
(`torch.allclose = f`, `setattr(torch.cuda.Event, ...)`: the worker's identity snapshot covers those),
`sys.modules` edits, `threading` (no `_thread.start_new_thread` event before 3.13), `signal.signal`,
`atexit.register`, `os._exit`, `ctypes.memmove` / `cast`, reads of `f_back` / `f_globals` /
`__globals__`, closure cell writes, and anything native code does (a C extension's own calls, GOT
patching, CUPTI callbacks).

**Heartbeat.**  The worker writes `{"k": "hb", "req": id}` on the same pipe for every request it
serves; the parent, which sees every reply, expects one heartbeat per request: a channel closed,
redirected or replaced by the solution stops them (`replay-audit-silenced`).

**The path tracer** (`PathTracer`).  A sys.settrace / sys.setprofile pair the worker turns on while
the solution is imported, builds its model and runs the kernel-trace calls: which authored kernels
launched (a Triton JIT function's `run`, compiled or under TRITON_INTERPRET's interpreter; a call into a
compiled extension the solution built), which device queries the solution consulted
(`torch.cuda.is_available()` and the like called from its frames; `x.is_cuda` or `x.device.type`
read by a function of its that ran, from that function's bytecode), and whether an exception passed
through a frame of the solution (a failed build or call that was caught).  Names and sites only.
"""

from __future__ import annotations

import dis
import json
import os
import sys
import types

import ctypes as _ctypes

#: ctypes' own library classes, taken before the solution runs (it may replace the module's names)
_CTYPES_LIBRARIES = (_ctypes.CDLL, _ctypes.PyDLL)

#: audit events the hook looks at (everything else returns after one set lookup)
INTERESTING = frozenset({
    "open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
    "os.symlink", "os.link", "os.truncate", "os.chdir", "os.chflags", "os.setxattr", "os.removexattr",
    "shutil.rmtree", "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.copytree", "shutil.move",
    "shutil.chown",
    "os.system", "subprocess.Popen", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.kill",
    "os.killpg", "pty.spawn", "resource.setrlimit", "resource.prlimit",
    "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyaddr", "socket.sendto", "socket.sendmsg", "urllib.Request", "http.client.connect",
    "ftplib.connect", "smtplib.connect", "telnetlib.Telnet.open",
    "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.string_at", "ctypes.wstring_at",
    "ctypes.cdata", "ctypes.PyObj_FromPtr", "mmap.__new__",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys._getframe", "sys._current_frames", "sys._current_exceptions",
    "object.__getattr__", "object.__setattr__", "object.__delattr__",
    "sys.settrace", "sys.setprofile", "sys.addaudithook",
    "import", "compile", "exec", "function.__new__",
})
#: object.__getattr__ names that hand out a frame
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
#: object.__setattr__ / __delattr__ names that change what a function does or an object is
PATCH_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__class__", "__bases__", "__globals__"})
#: imported module names of the grader (check.py, benchmark.py, their src/ package, the deck's
#: reference helpers): an `import` of one of these by the solution is looked at
GRADER_MODULES = frozenset({"check", "benchmark", "shapes", "sota", "reference", "src", "eval", "kbh", "harness",
                            "worker", "forensics", "__main__"})
MAX_SITES = 4096
MAX_LINE = 3800          # one record per write, under PIPE_BUF (4096): concurrent writers never interleave
MAX_ARG = 300
MAX_CHAIN = 8
MAX_DEPTH = 400


def _safe(x) -> str:
    """A short description of an audit argument that runs none of the solution's code (no repr of
    objects of its classes: their __repr__ would run inside the hook)."""
    t = type(x)
    if t is str:
        return x[:MAX_ARG]
    if t is bytes:
        return x[:MAX_ARG].decode("utf-8", "replace")
    if t in (int, float, bool) or x is None:
        return str(x)
    if t is types.FunctionType or t is types.BuiltinFunctionType:
        return f"{x.__module__}.{x.__qualname__}"[:MAX_ARG]
    if t is types.CodeType:
        return f"<code {x.co_name} {x.co_filename}:{x.co_firstlineno}>"[:MAX_ARG]
    if t is types.ModuleType:
        return f"<module {dict.get(vars(x), '__name__', '?')}>"[:MAX_ARG]
    if issubclass(t, type):
        return type.__repr__(x)[:MAX_ARG]
    if t in (list, tuple):
        return ("[" + ", ".join(_safe(v) for v in x[:8]) + "]")[:MAX_ARG]
    if t is types.FrameType:
        return f"<frame {x.f_code.co_name} {x.f_code.co_filename}:{x.f_lineno}>"[:MAX_ARG]
    lib = _ctypes_library_path(x, t)
    if lib is not None:
        return f"<ctypes.{t.__name__} '{lib}'>"[:MAX_ARG]
    return f"<{t.__module__}.{t.__qualname__}>"[:MAX_ARG]


def _ctypes_library_path(x, t) -> str | None:
    """The path a library object of ctypes itself (CDLL, PyDLL: the classes as this module found them
    before the solution was imported, not a subclass whose __dict__ descriptor the solution could own)
    was loaded from, read from its instance dict without running any of the solution's code; None for
    anything else."""
    if t is not _CTYPES_LIBRARIES[0] and t is not _CTYPES_LIBRARIES[1]:   # identity: no metaclass __eq__
        return None
    try:
        name = dict.get(object.__getattribute__(x, "__dict__"), "_name")
    except Exception:  # noqa: BLE001 - an odd object: described by its type only
        return None
    return name if type(name) is str else None


class Channel:
    """The write end of the evidence pipe: numbered JSON lines, one os.write each."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seq = 0
        self.failed = 0
        self.pid = os.getpid()
        self._write = os.write
        self._dumps = json.dumps

    def send(self, rec: dict) -> None:
        pid = os.getpid()
        if pid != self.pid:      # a fork of the worker numbers its own records
            self.pid, self.seq = pid, 0
        self.seq += 1
        rec["seq"] = self.seq
        rec["pid"] = pid
        line = self._dumps(rec, default=str)
        if len(line) > MAX_LINE:
            rec["args"] = [a[:80] for a in rec.get("args", [])]
            rec["clipped"] = True
            line = self._dumps(rec, default=str)[:MAX_LINE - 1]
            if not line.endswith("}"):
                line = self._dumps({"k": "ev", "seq": self.seq, "pid": pid, "ev": rec.get("ev"), "clipped": True,
                                    "file": rec.get("file"), "line": rec.get("line")})
        try:
            self._write(self.fd, (line + "\n").encode("utf-8", "replace"))
        except OSError:
            self.failed += 1     # closed or replaced by the solution: the parent misses the heartbeats


def _target(event: str, args: tuple) -> str:
    """What the event acts on (the dedupe key besides event and site)."""
    if not args:
        return ""
    if event in ("object.__getattr__", "object.__setattr__", "object.__delattr__"):
        return f"{_safe(args[0])}.{args[1] if len(args) > 1 else ''}"
    return _safe(args[0])[:160]


def install(fd: int, sol_roots: list[str], worker_files: set[str]) -> tuple[Channel, dict]:
    """Install the audit hook writing to `fd`.  -> (the channel, the hook's state: `own_codes`,
    `worker_files`, which the worker extends with the benchmark frames it compiles)."""
    ch = Channel(fd)
    roots = tuple(r.rstrip("/") + "/" for r in dict.fromkeys(os.path.realpath(r) for r in sol_roots if r)) + \
        tuple(r.rstrip("/") + "/" for r in sol_roots if r)
    state = {"own_codes": {}, "own_files": set(), "worker_files": set(worker_files), "sites": {},
             "overflow": False, "main": None}
    own_codes: dict = state["own_codes"]
    own_files: set = state["own_files"]
    wfiles: set = state["worker_files"]
    sites: dict = state["sites"]
    busy: set = set()
    verdict: dict = {}         # code object id -> "sol" | "worker" | "" (kept alive in keep_codes)
    keep_codes: list = []
    import _thread
    get_ident = _thread.get_ident
    state["main"] = get_ident()
    getframe = sys._getframe
    interesting = INTERESTING
    frame_attrs, patch_attrs, grader = FRAME_ATTRS, PATCH_ATTRS, GRADER_MODULES
    abspath = os.path.abspath

    def kind_of(code) -> str:
        k = verdict.get(id(code))
        if k is not None:
            return k
        fn = code.co_filename
        if fn in wfiles:
            k = "worker"
        elif id(code) in own_codes or fn in own_files or fn.startswith(roots):
            k = "sol"
        elif fn.startswith("<") and not fn.startswith("<frozen "):
            k = "synthetic"     # generated code (dataclasses, namedtuple, fx): whose, its callers say
        else:
            k = ""
        if len(verdict) < 65536:
            verdict[id(code)] = k
            keep_codes.append(code)     # the id stays this code's while it is in the table
        return k

    def learn(code) -> None:
        """Code the solution compiled itself (and every code object nested in it) is the solution's."""
        todo = [code]
        while todo and len(own_codes) < 65536:
            c = todo.pop()
            if type(c) is not types.CodeType or id(c) in own_codes:
                continue
            own_codes[id(c)] = c
            verdict[id(c)] = "sol"
            todo.extend(x for x in c.co_consts if type(x) is types.CodeType)

    def hook(event, args):
        if event not in interesting:
            return
        tid = get_ident()
        if tid in busy:
            return
        busy.add(tid)
        try:
            if event == "object.__getattr__":
                if len(args) < 2 or args[1] not in frame_attrs:
                    return
            elif event in ("object.__setattr__", "object.__delattr__"):
                if len(args) < 2 or args[1] not in patch_attrs:
                    return
            elif event == "import":
                if not args or type(args[0]) is not str or args[0].partition(".")[0] not in grader:
                    return
            f = getframe(1)
            if event in ("compile", "exec", "function.__new__"):
                # only what the solution compiles or runs itself (the importer execs every module)
                if f is None or kind_of(f.f_code) != "sol":
                    return
                if event in ("exec", "function.__new__") and args:
                    learn(args[0])
                    return
                elif event == "compile" and len(args) > 1 and type(args[1]) is str:
                    if args[1] and not args[1].startswith("<"):
                        own_files.add(args[1])
                    return
            chain: list[str] = []
            site = None
            depth = 0
            while f is not None and depth < MAX_DEPTH:
                k = kind_of(f.f_code)
                if k == "worker":
                    return
                if k == "sol":
                    site = f
                    break
                if k != "synthetic" and len(chain) < MAX_CHAIN * 4:
                    g = f.f_globals
                    mod = dict.get(g, "__name__", "?") if type(g) is dict else "?"
                    if not chain or chain[-1] != mod:     # one entry per module passed through
                        chain.append(mod)
                f = f.f_back
                depth += 1
            if site is None:
                if tid == state["main"]:
                    return      # the worker's own thread, under no frame of the solution
                file, line = "<thread>", 0
            else:
                file, line = site.f_code.co_filename, site.f_lineno
                for r in roots:
                    if file.startswith(r):
                        file = file[len(r):]
                        break
            via = chain[-MAX_CHAIN:][::-1]     # outermost (called by the solution) first
            tgt = _target(event, args)
            key = (event, file, line, via[0] if via else "", tgt)
            n = sites.get(key)
            if n is not None:
                sites[key] = n + 1
                return
            if len(sites) >= MAX_SITES:
                if not state["overflow"]:
                    state["overflow"] = True
                    ch.send({"k": "overflow", "sites": len(sites)})
                return
            sites[key] = 1
            out = [_safe(a) for a in args[:4]]
            if event == "open" and out and type(args[0]) is str:
                out[0] = abspath(args[0])[:MAX_ARG]
            elif event in ("os.rename", "os.symlink", "os.link", "shutil.copyfile", "shutil.move", "shutil.copytree") \
                    and len(args) > 1:
                out = [abspath(a)[:MAX_ARG] if type(a) is str else _safe(a) for a in args[:2]]
            elif event in ("os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.listdir",
                           "os.scandir", "os.chdir", "shutil.rmtree") and args and type(args[0]) is str:
                out[0] = abspath(args[0])[:MAX_ARG]
            rec = {"k": "ev", "ev": event, "args": out, "file": file, "line": line, "via": via,
                   "thread": "main" if tid == state["main"] else "other"}
            if event == "object.__setattr__" and len(args) > 2 and type(args[2]) is types.CodeType:
                rec["code_file"] = args[2].co_filename[:MAX_ARG]
            ch.send(rec)
        except BaseException:   # noqa: BLE001 - an audit hook that raises aborts the operation
            pass
        finally:
            busy.discard(tid)

    sys.addaudithook(hook)
    return ch, state


# ------------------------------------------------------------------------------ the path tracer
#: torch functions whose call tells the solution whether a GPU is there
DEVICE_QUERIES = frozenset({"is_available", "device_count", "get_device_capability", "get_device_properties",
                            "current_device", "is_initialized", "get_device_name", "_is_compiled", "is_built",
                            "get_arch_list", "mem_get_info"})
#: attributes of a tensor or device a function of the solution reads to tell the GPU from the CPU
DEVICE_ATTRS = frozenset({"is_cuda", "is_cpu"})


def _device_reads(code) -> list[str]:
    """What `code` reads to tell the GPU from the CPU, from its bytecode: `.is_cuda`, `.is_cpu`, or
    `.device.type` (a `device` attribute load followed by a `type` attribute load)."""
    out: list[str] = []
    prev = None
    try:
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                if ins.argval in DEVICE_ATTRS and ins.argval not in out:
                    out.append(ins.argval)
                if ins.argval == "type" and prev == "device" and "device.type" not in out:
                    out.append("device.type")
                prev = ins.argval
            elif ins.opname not in ("CACHE", "EXTENDED_ARG", "PRECALL"):
                prev = None
    except Exception:  # noqa: BLE001 - an odd code object: nothing read
        pass
    return out


class PathTracer:
    """sys.settrace / sys.setprofile while the solution builds and runs: authored launches, device
    queries, exceptions through its frames (see the module docstring).  `start()` / `stop()` ->
    the record of that window."""

    MAX = 200

    def __init__(self, sol_roots: list[str], own_lib_roots: list[str], worker_files: set[str]) -> None:
        self.roots = tuple(r.rstrip("/") + "/" for r in dict.fromkeys(
            [os.path.realpath(r) for r in sol_roots if r] + [r for r in sol_roots if r]))
        self.lib_roots = tuple(r.rstrip("/") + "/" for r in dict.fromkeys(
            [os.path.realpath(r) for r in own_lib_roots if r] + [r for r in own_lib_roots if r]))
        self.worker_files = worker_files
        self._kind: dict = {}
        self._keep: list = []
        self.rec: dict | None = None
        self._old: tuple = (None, None)

    def _sol(self, code) -> bool:
        k = self._kind.get(id(code))
        if k is None:
            k = code.co_filename.startswith(self.roots) and code.co_filename not in self.worker_files
            if len(self._kind) < 65536:
                self._kind[id(code)] = k
                self._keep.append(code)
        return k

    def _site(self, f) -> str:
        fn = f.f_code.co_filename
        for r in self.roots:
            if fn.startswith(r):
                fn = fn[len(r):]
                break
        return f"{fn}:{f.f_lineno}"

    def _add(self, key: str, item: dict) -> None:
        lst = self.rec[key]
        if len(lst) < self.MAX and item not in lst:
            lst.append(item)

    def _trace(self, frame, event, arg):
        try:
            code = frame.f_code
            if event != "call":
                return None
            caller = frame.f_back
            if self._sol(code):
                if id(code) not in self.rec["_scanned"]:
                    self.rec["_scanned"].add(id(code))
                    for r in _device_reads(code):
                        self._add("consulted", {"what": r, "site": f"{self._site(frame)} ({code.co_name})"})
                frame.f_trace_lines = False
                return self._local
            mod = dict.get(frame.f_globals, "__name__", "") if type(frame.f_globals) is dict else ""
            if caller is not None and self._sol(caller.f_code):
                if code.co_name in DEVICE_QUERIES and str(mod).startswith("torch"):
                    self._add("consulted", {"what": f"{mod}.{code.co_name}()", "site": self._site(caller)})
            if code.co_name == "run" and str(mod).startswith("triton.runtime"):
                fn = frame.f_locals.get("self")
                inner = getattr(fn, "fn", None)
                c = getattr(inner, "__code__", None)
                if type(c) is types.CodeType and self._sol(c):
                    self._add("launches", {"kind": "triton", "name": c.co_name, "how": "jit"})
        except Exception:  # noqa: BLE001 - the tracer never changes what the solution does
            pass
        return None

    def _local(self, frame, event, arg):
        if event == "exception":
            try:
                et = arg[0] if isinstance(arg, tuple) and arg else None
                if et is not None and et not in (StopIteration, GeneratorExit, StopAsyncIteration):
                    self._add("exceptions", {"type": getattr(et, "__name__", "?"), "site": self._site(frame)})
            except Exception:  # noqa: BLE001
                pass
        return self._local

    def _profile(self, frame, event, arg):
        if event != "c_call":
            return
        try:
            if not self._sol(frame.f_code):
                return
            owner = getattr(arg, "__self__", None)
            if type(owner) is types.ModuleType:
                f = dict.get(vars(owner), "__file__", None)
                if isinstance(f, str) and f.endswith((".so", ".pyd")) and (
                        f.startswith(self.lib_roots) or f.startswith(self.roots)):
                    self._add("launches", {"kind": "extension", "name": f"{dict.get(vars(owner), '__name__', '?')}."
                                                                       f"{getattr(arg, '__name__', '?')}",
                                           "how": "call"})
        except Exception:  # noqa: BLE001
            pass

    def start(self, profile: bool = False) -> None:
        self.rec = {"launches": [], "consulted": [], "exceptions": [], "_scanned": set()}
        self._old = (sys.gettrace(), sys.getprofile())
        sys.settrace(self._trace)
        if profile:
            sys.setprofile(self._profile)

    def stop(self) -> dict:
        tr, pr = self._old
        ours = sys.gettrace() == self._trace
        sys.settrace(tr)
        if sys.getprofile() == self._profile:
            sys.setprofile(pr)
        rec, self.rec = self.rec or {}, None
        rec.pop("_scanned", None)
        if not ours:
            rec["replaced"] = True    # the solution set a tracer of its own meanwhile (audited)
        return rec
