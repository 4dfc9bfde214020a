"""Parent side of the isolated runner: scratch copies, scrubbed environment, child processes.

The solution under audit never runs in this process.  `Scratch` copies the run's `solution.py`
and its `scratch/` sidecars into a fresh scratch directory (the archive is only read), writes
the deck `reference.py` of the problem beside it, and `Child` starts `worker.py` (copied there
too) inside the sandbox of `sandbox.py` (its own namespaces, a filesystem view holding only the
scratch writable, an unprivileged uid, resource limits, a memory ceiling, seccomp; what the
machine did not allow is listed in `Child.report`), in its own process group, with a scrubbed
environment.  Requests go over a pipe; a request that does not get its reply within its time
limit kills the whole process group (and the PID namespace with it).

Everything the child hands back is data: tensors are loaded with ``torch.load(weights_only=True)`` or
the validating pack reader (worker.pack_load), both through worker.open_exchange (the child can
write io/, so no symlink, FIFO or hard link found there is ever followed; see Scratch.path)
and judged here.  A missing reply is classified, never ignored:

* ``early_exit``: the child ended with status 0 (``os._exit(0)``, ``sys.exit()`` swallowed by
  nothing) before its normal completion marker (the reply to ``bye``), or the worker caught a
  ``SystemExit`` raised by the solution;
* ``crash``: it died with a signal or a non-zero status (stderr tail kept);
* ``timeout``: no reply within the limit (the process group is killed).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import sandbox
from .evidence import EvidenceReader
from .proctree import MemoryWatch

WORKER_SRC = Path(__file__).with_name("worker.py")
SANDBOX_SRC = Path(__file__).with_name("sandbox.py")
AUDIT_SRC = Path(__file__).with_name("childaudit.py")

# Environment variables the child may inherit (everything else is dropped: KBH_*, API keys,
# tokens, proxies, the parent's PYTHONPATH ...).
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
             "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
             "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
             "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX", "TRITON_INTERPRET", "OMP_NUM_THREADS",
             # the build environment the replay supplies (forensics.replay.buildenv: CUTLASS, CUDA headers,
             # a __file__ for a namespace `nvidia` package; "0": no rebuild of another GPU's arch flags)
             *sandbox.BUILD_VARS, "FORENSICS_NVIDIA_FILE", "FORENSICS_ARCH_REBUILD")
_SECRETISH = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")

SKIP_NAMES = {"__pycache__", ".venv", "cache", "tmp", ".git"}
IO_ROOT_NAME = sandbox.IO_ROOT_NAME
MAX_SIDECAR_BYTES = 256 * 2**20


def default_cache_root() -> Path:
    base = os.environ.get("FORENSICS_REPLAY_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "forensics", "replay")
    return Path(base)


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def scrubbed_env(sol_dir: Path, ref_dir: Path, home: Path, cache: Path, device: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for k in ENV_ALLOW:
        v = os.environ.get(k)
        if v is not None and not any(s in k for s in _SECRETISH):
            env[k] = v
    if not device.startswith("cpu"):
        # the interpreter is the CPU path's; a parent that set it (a CPU test, `--device cpu` in the
        # same process) must not turn a GPU replay's Triton kernels into interpreted ones
        env.pop("TRITON_INTERPRET", None)
    else:
        # ... and the only way Triton runs without a GPU: without it a Triton solution raises "0 active
        # drivers" at its first launch, which would read as the solution failing its check
        env.setdefault("TRITON_INTERPRET", "1")
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({
        "PYTHONPATH": os.pathsep.join([str(sol_dir), str(ref_dir)]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",
        # getpass.getuser() (torch, triton cache paths) must not need a passwd entry for the sandbox uid
        "USER": "replay", "LOGNAME": "replay",
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"), "TMP": str(home / "tmp"), "TEMP": str(home / "tmp"),
        "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "CUDA_CACHE_PATH": str(cache / "cuda"),
        "FORENSICS_WORKER_DEVICE": device,
    })
    return env


@dataclass
class Reply:
    ok: bool
    status: str            # ok | error | early_exit | crash | timeout | tampered
    data: dict = field(default_factory=dict)
    error: str = ""
    elapsed_s: float = 0.0
    #: the exchange file the request asked the child to save its result to (Session.fetch reads it)
    out_path: str | None = None

    def __getitem__(self, k: str) -> Any:
        return self.data[k]

    def get(self, k: str, default: Any = None) -> Any:
        return self.data.get(k, default)


class ChildDied(Exception):
    def __init__(self, reply: Reply):
        super().__init__(reply.error)
        self.reply = reply


def close_fds(*fds: int) -> None:
    """Close each descriptor that is open (>= 0), ignoring one already closed."""
    for fd in fds:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


class Child:
    """One worker process.  `request(op, timeout, **fields)` -> Reply (never raises for the
    solution's failures; the reply's status says what happened)."""

    def __init__(self, scratch: "Scratch", device: str, python: str | None = None) -> None:
        self.scratch = scratch
        self.device = device
        self.n = 0
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        ev_r, ev_w = os.pipe()   # the audit hook's evidence (childaudit.py), read by EvidenceReader
        env = scrubbed_env(scratch.sol_dir, scratch.ref_dir, scratch.home, scratch.cache, device)
        env["FORENSICS_WORKER_FDS"] = f"{req_r},{resp_w},{ev_w}"
        self.log_path = scratch.root / f"child-{int(time.time() * 1000)}-{os.getpid()}.log"
        self.log = open(self.log_path, "wb")
        py = python or sys.executable
        argv = [py, "-s", str(scratch.harness / "worker.py")]
        #: what the sandbox holds for this child (sandbox.py's report); read before the first request
        self.report: dict | None = None
        self.cgroup: sandbox.Cgroup | None = None
        self.memwatch: MemoryWatch | None = None
        self._rep_fd = -1
        rep_r, rep_w = os.pipe()
        try:
            cfg, self.cgroup = sandbox.plan(scratch, device, py, (req_r, resp_w, ev_w), rep_w, argv, env,
                                            hide=scratch.hide)
            if cfg is None:     # FORENSICS_SANDBOX=off
                os.close(rep_w)
                os.close(rep_r)
                rep_r = rep_w = -1
                self.report = sandbox.off_report()
                self.proc = subprocess.Popen(
                    argv, cwd=str(scratch.sol_dir), env=env, stdin=subprocess.DEVNULL, stdout=self.log,
                    stderr=subprocess.STDOUT, pass_fds=(req_r, resp_w, ev_w), start_new_session=True, close_fds=True)
            else:
                scratch.prepare_owner(cfg["uid"])
                self.proc = subprocess.Popen(
                    [py, "-I", "-S", str(scratch.harness / "sandbox.py")], cwd=str(scratch.harness),
                    env={sandbox.CONFIG_ENV: json.dumps(cfg)}, stdin=subprocess.DEVNULL, stdout=self.log,
                    stderr=subprocess.STDOUT, pass_fds=(req_r, resp_w, ev_w, rep_w), start_new_session=True,
                    close_fds=True)
                os.close(rep_w)
                rep_w = -1
                self._rep_fd = rep_r
                if cfg.get("memwatch"):
                    # no kernel ceiling here: the watch is the ceiling (proctree.MemoryWatch)
                    self.memwatch = MemoryWatch(self.proc.pid, cfg["mem_ceiling"])
        except BaseException:
            close_fds(req_r, req_w, resp_r, resp_w, rep_r, rep_w, ev_r, ev_w)
            if self.cgroup is not None:
                self.cgroup.remove()
            self.log.close()
            raise
        os.close(req_r)
        os.close(resp_w)
        os.close(ev_w)
        #: what the audit hook sent (capabilities.judge reads it after the child ended)
        self.evidence = EvidenceReader(ev_r)
        #: ids of the requests the worker answered (each must have sent a heartbeat first)
        self.replied: list[int] = []
        #: the worker's pid as it said in its hello (the heartbeats' writer)
        self.worker_pid: int | None = None
        scratch.children.append(self)
        if self.report is not None:
            scratch.sandbox_reports.append(self.report)
        self.wfd = req_w
        self.rfd = resp_r
        self.buf = b""
        self.dead: Reply | None = None
        self.finished = False
        #: monotonic time after which no request may wait any longer (the probe's whole-probe
        #: limit, Limits.probe_s); None: only each request's own timeout applies
        self.deadline: float | None = None
        #: called with the slot names of every "delete" request sent (the parent frees what it
        #: holds for them)
        self.on_delete: Callable[[list[str]], None] | None = None
        #: seconds a request may wait beyond its own limit (and the probe's) while a build tool runs
        #: under the child: a `load_inline` inside a later call (a new shape's path) is building, not
        #: hanging.  Shared by every request of this child; 0: none (see `request`)
        self.build_grace_s = 0.0
        #: called with (op, seconds granted, build tools seen) after a request waited on a build
        self.on_build_wait: Callable[[str, float, list[str]], None] | None = None

    def sandbox_report(self, timeout: float = 60.0) -> dict:
        """The layers in force for this child (waits for the launcher's report, written just
        before the worker's exec)."""
        if self.report is None:
            self.report = sandbox.read_report(self._rep_fd, timeout)
            os.close(self._rep_fd)
            self._rep_fd = -1
            if self.memwatch is not None:
                self.report["memory_watch"] = {"ceiling": self.memwatch.ceiling, "fired": None}
            self.scratch.sandbox_reports.append(self.report)
        return self.report

    def _cgroup_done(self) -> None:
        if self.memwatch is not None:
            self.memwatch.stop()
            if self.report is not None:
                self.report["peak_bytes"] = self.memwatch.peak or None
                self.report["oom_kill"] = 1 if self.memwatch.fired else 0
                self.report["memory_watch"] = {"ceiling": self.memwatch.ceiling, "fired": self.memwatch.fired}
            self.memwatch = None
        if self.cgroup is None:
            return
        self.cgroup.kill_all()   # without a PID namespace: whatever the solution left behind
        st = self.cgroup.stats()
        if self.report is not None:
            self.report["peak_bytes"] = st.get("peak_bytes")
            self.report["oom_kill"] = st.get("oom_kill")
        self.cgroup.remove()
        self.cgroup = None

    # ---- process control
    def kill(self) -> None:
        from .proctree import kill_session   # issue 21: compilers that left the process group
        kill_session(self.proc.pid)
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        if self.report is None and self._rep_fd >= 0:
            self.sandbox_report(timeout=0.5)
        self._cgroup_done()
        close_fds(self.wfd, self.rfd, self._rep_fd)
        self.wfd = self.rfd = self._rep_fd = -1
        try:
            self.log.close()
        except Exception:  # pragma: no cover
            pass

    def log_tail(self, n: int = 4000) -> str:
        try:
            if not self.log.closed:
                self.log.flush()
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-n:].decode("utf-8", "replace")

    def alive(self) -> bool:
        return self.dead is None and self.proc.poll() is None

    def _died(self, what: str) -> Reply:
        if self.dead is not None:
            return self.dead
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.returncode
        tail = self.log_tail()
        rep = self.sandbox_report(timeout=1.0) if self._rep_fd >= 0 or self.report is not None else {}
        if rep.get("refused"):
            r = Reply(False, "error", {"returncode": rc, "log_tail": tail, "sandbox": rep},
                      "the sandbox refused to start the solution: " + "; ".join(rep.get("errors") or ["?"]))
            self.dead = r
            self.kill()
            return r
        oom = self.cgroup.stats() if self.cgroup is not None else {}
        watch = self.memwatch
        if watch is not None and watch.fired is None:
            time.sleep(2 * watch.interval)   # a kill it is making now is the cause
        if watch is not None and watch.fired is not None:
            oom = {"oom_kill": 1, "peak_bytes": watch.fired, "by": "memory watch"}
        if rc == 0:
            r = Reply(False, "early_exit", {"returncode": 0, "log_tail": tail},
                      f"child exited with status 0 during {what}, before its normal completion marker")
        else:
            sig = -rc if rc is not None and rc < 0 else None
            desc = f"signal {signal.Signals(sig).name}" if sig else f"status {rc}"
            msg = f"child died ({desc}) during {what}"
            if oom.get("by") == "memory watch":
                msg += (f"; killed by the replay's memory watch at the sandbox's memory ceiling "
                        f"({watch.ceiling / 2**30:.1f} GiB) holding {watch.fired / 2**30:.1f} GiB "
                        f"(no cgroup on this machine)")
            elif oom.get("oom_kill"):
                msg += (f"; killed by the kernel at the sandbox's memory ceiling "
                        f"({(rep.get('cgroup') or {}).get('memory_max', 0) / 2**30:.1f} GiB)")
            elif sig == signal.SIGXCPU:
                cpu = ((rep.get("rlimits") or {}).get("cpu"))
                msg += (f"; the sandbox's CPU-time limit (RLIMIT_CPU {cpu} s, all the child's threads "
                        f"together; FORENSICS_REPLAY_CPU_S)")
            r = Reply(False, "crash", {"returncode": rc, "log_tail": tail, "oom": oom or None}, msg)
        self.dead = r
        self.kill()
        return r

    def request(self, op: str, timeout: float, **fields: Any) -> Reply:
        if self.dead is not None:
            return self.dead
        if self.report is None:
            self.sandbox_report(timeout)
        self.n += 1
        msg = dict(fields, op=op, id=self.n)
        if op == "delete" and self.on_delete is not None:
            self.on_delete(list(fields.get("slots") or []))
        t0 = time.monotonic()
        limit = f"within {timeout:.0f} s"
        if self.deadline is not None and self.deadline - t0 < timeout:
            timeout = max(0.0, self.deadline - t0)
            limit = "before the probe's time limit ran out"
        try:
            os.write(self.wfd, (json.dumps(msg) + "\n").encode())
        except (BrokenPipeError, OSError):
            return self._died(op)
        deadline = t0 + timeout
        waited: list[str] = []   # build tools seen while the request waited past its limit
        granted = 0.0
        try:
            while b"\n" not in self.buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    step = self._build_step(timeout, waited)
                    if step > 0:
                        deadline += step
                        granted += step
                        continue
                    return self._timed_out(op, limit, waited)
                ready, _, _ = select.select([self.rfd], [], [], min(left, 1.0))
                if not ready:
                    if self.proc.poll() is not None:
                        # drain what is left before deciding
                        try:
                            chunk = os.read(self.rfd, 1 << 20)
                        except OSError:
                            chunk = b""
                        if not chunk:
                            return self._died(op)
                        self.buf += chunk
                    continue
                chunk = os.read(self.rfd, 1 << 20)
                if not chunk:
                    return self._died(op)
                self.buf += chunk
        finally:
            if granted:
                if self.deadline is not None:
                    self.deadline += granted
                if self.on_build_wait is not None:
                    self.on_build_wait(op, round(granted, 3), _tools(waited))
        line, _, self.buf = self.buf.partition(b"\n")
        elapsed = time.monotonic() - t0
        try:
            data = json.loads(line)
        except ValueError:
            return Reply(False, "error", {}, f"unreadable reply to {op}: {line[:200]!r}", elapsed)
        if data.get("id") != self.n:
            return Reply(False, "error", data, f"reply out of order for {op}", elapsed)
        self.replied.append(self.n)
        if op == "hello" and type(data.get("pid")) is int:
            self.worker_pid = data["pid"]
        status = data.get("status", "error")
        if op == "bye" and status == "ok":
            self.finished = True
        return Reply(bool(data.get("ok")), status, data, data.get("error", ""), elapsed)

    #: how long one build-grace extension lasts before the build tools are looked at again
    BUILD_POLL_S = 2.0

    def _build_step(self, timeout: float, waited: list[str]) -> float:
        """Seconds more a request whose limit ran out may wait (0: none).  While a build tool
        (proctree.COMPILERS) runs under the child, the wait goes on in BUILD_POLL_S steps out of
        `build_grace_s`; once the tools seen have all exited, the call itself gets its own limit
        once more (its build is done, what is left is the call).

        Look-alike it must not extend: a forward that hangs with no build tool under it (nothing
        was seen: no step), and one that builds forever (the grace runs out)."""
        from .proctree import compilers_running
        building = compilers_running(self.proc.pid)
        if building and self.build_grace_s > 0:
            waited.extend(building)
            step = min(self.BUILD_POLL_S, self.build_grace_s)
            self.build_grace_s -= step
            return step
        if waited and not building and waited[-1] != "(call)":
            waited.append("(call)")   # the build ended: the call after it gets its own limit
            return max(float(timeout), 1.0)
        return 0.0

    def _timed_out(self, op: str, limit: str, waited: list[str]) -> Reply:
        from .proctree import compilers_running
        building = compilers_running(self.proc.pid)
        self.kill()
        why = f"no reply to {op} {limit}; process group killed"
        if building:   # a build inside the call (load_inline in forward): say so, it may only be slow
            why += f" while a build was still running under it ({', '.join(building)})"
        tools = _tools(waited)
        if tools:
            why += f" (it had waited past its limit while {', '.join(tools)} ran: the build budget is spent)"
        r = Reply(False, "timeout", {"log_tail": self.log_tail(), "building": building or None}, why)
        self.dead = r
        return r

    def close(self, timeout: float = 30) -> Reply | None:
        """Ask for the completion marker, then wait for a clean exit."""
        if self.dead is not None:
            return self.dead
        r = self.request("bye", timeout)
        if r.status == "ok":
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        return r


def _tools(waited: list[str]) -> list[str]:
    """The build tools a request waited on (Child._build_step's list, without its "(call)" marks)."""
    return sorted({t for t in waited if t != "(call)"})


class ScratchTampered(OSError):
    """A name in a place the solution's process can write (io/, the build cache) is not what this
    process left there and cannot be made so: refused rather than followed (see Scratch.path)."""


#: open(2) flags for a directory the child can write into: never through a symlink, never a FIFO's wait
_DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def walk_dirs(top_fd: int, max_depth: int):
    """Every directory under the one held open as `top_fd` (itself first, depth 0), depth-first,
    each opened O_NOFOLLOW|O_DIRECTORY relative to its parent's descriptor, for a tree the child
    writes: a symlink planted or swapped in anywhere (also while the walk runs) is never followed,
    a file or FIFO named like a directory is never opened.  Yields (path relative to the top, ending
    in "/" below it; the directory's descriptor; its depth; its entry names, sorted) before going
    into its subdirectories, down to `max_depth`.  The descriptor is closed once the caller moves
    on: one is open per level.  `top_fd` stays the caller's to close."""
    def below(dfd: int, rel: str, depth: int):
        try:
            names = sorted(os.listdir(dfd))
        except OSError:
            return
        yield rel, dfd, depth, names
        if depth >= max_depth:
            return
        for n in names:
            try:
                sub = os.open(n, _DIR_NOFOLLOW, dir_fd=dfd)   # a symlink: ELOOP, a file: ENOTDIR
            except OSError:
                continue
            try:
                yield from below(sub, rel + n + "/", depth + 1)
            finally:
                os.close(sub)

    yield from below(top_fd, "", 0)


def _stale_locks(cache: Path) -> list[str]:
    """Remove torch_extensions/*/*/lock and torch_extensions/*/lock (regular files only) under
    `cache`, which the solution's process writes: every directory is opened O_NOFOLLOW relative to
    its parent's descriptor, so a symlink planted anywhere on the way (`torch_extensions/evil ->
    /etc`) is refused, never followed, and the unlink names `lock` inside a directory already
    held open.  -> the locks removed, relative to `cache`, deepest first."""
    deep: list[str] = []
    shallow: list[str] = []

    def unlink_lock(dfd: int, rel: str, into: list[str]) -> None:
        try:
            if stat.S_ISREG(os.lstat("lock", dir_fd=dfd).st_mode):
                os.unlink("lock", dir_fd=dfd)   # unlink never follows the name it removes
                into.append(rel)
        except OSError:
            pass

    try:
        ext = os.open(cache / "torch_extensions", _DIR_NOFOLLOW)
    except OSError:
        return []
    try:
        for rel, dfd, depth, _ in walk_dirs(ext, max_depth=2):
            if depth:
                unlink_lock(dfd, f"torch_extensions/{rel}lock", deep if depth == 2 else shallow)
    finally:
        os.close(ext)
    return deep + shallow


def claim_build_cache(cache: Path) -> tuple[int, list[str]]:
    """Hold `cache` (one solution's build cache, shared by every replay of that solution) for this
    replay, and clear the build locks a killed replay left in it.  -> (fd holding the claim, or -1;
    the stale locks removed, relative to `cache`).

    Mechanism: torch's `load_inline` builds under a `lock` file in its extension's folder
    (torch_extensions/<python+cuda tag>/<name>/lock) and every later build of that extension waits
    for the file to go.  A replay killed mid-build (a run limit, a time budget) leaves it behind, and
    every later replay of the same solution then waits out its whole build budget: on the H100 two
    Kimi runs cut mid-build in one call timed out at import in the next two.  With an exclusive
    flock on the claim file no other replay of this solution is alive, so a `lock` there is
    stale and goes.  Look-alike it must not touch: the lock of a build in progress in a concurrent
    replay of the same solution (the claim is held by it: nothing is removed).

    The cache is written by the solution's process, so nothing in it is followed: the claim is
    `<cache>.claim` beside it (in the cache root, which only this side writes; opened O_NOFOLLOW),
    and the locks are found and removed through directory descriptors opened O_NOFOLLOW
    (`_stale_locks`): a planted `torch_extensions/evil -> /some/dir` does not make this process
    unlink `/some/dir/x/lock`."""
    import fcntl
    try:
        fd = os.open(cache.with_name(cache.name + ".claim"),
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError:
        return -1, []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return -1, []   # another replay of this solution holds it: its locks may be live
    return fd, _stale_locks(cache)


def _give_fd(fd: int, uid: int) -> None:
    """Owner `uid`, group 0, group read-write (and search for a directory) on an open file."""
    try:
        st = os.fstat(fd)
    except OSError:
        return
    try:
        if st.st_uid != uid or st.st_gid != 0:
            os.fchown(fd, uid, 0)
    except OSError:
        pass
    want = st.st_mode | (0o070 if stat.S_ISDIR(st.st_mode) else 0o060)
    try:
        if want != st.st_mode:
            os.fchmod(fd, want & 0o7777)
    except OSError:
        pass


def _give_entry(dfd: int, name: str, uid: int) -> int | None:
    """`_give_fd` for `name` in the directory held open as `dfd`, never through a symlink: a
    regular file or directory is opened O_NOFOLLOW|O_NONBLOCK (a FIFO swapped in opens without
    waiting) and changed only if it is still the one lstat saw (a swap in between is left alone);
    a FIFO or socket only changes owner (fchownat with AT_SYMLINK_NOFOLLOW); a symlink is skipped.
    -> the directory's descriptor, still open, for the walk to go on (the caller closes it)."""
    try:
        st = os.lstat(name, dir_fd=dfd)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        try:
            if st.st_uid != uid or st.st_gid != 0:
                os.chown(name, uid, 0, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            pass
        return None
    flags = _DIR_NOFOLLOW if stat.S_ISDIR(st.st_mode) else (
        os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        fd = os.open(name, flags, dir_fd=dfd)
    except OSError:
        return None
    try:
        now = os.fstat(fd)
    except OSError:
        now = None
    if now is None or (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
        os.close(fd)
        return None
    _give_fd(fd, uid)
    if stat.S_ISDIR(now.st_mode):
        return fd
    os.close(fd)
    return None


#: how deep `_give_tree` goes (a build cache is a few levels deep; a solution's own tree may be anything)
GIVE_MAX_DEPTH = 64


def _give_tree(top: str | Path, uid: int) -> None:
    """`_give_fd` on `top` and everything under it, walked by directory descriptors: each directory
    is opened O_NOFOLLOW|O_DIRECTORY relative to its parent's descriptor, so a symlink planted or
    swapped in anywhere (also while the walk runs: the cache is shared with a concurrent replay of
    the same solution) is never followed.  One descriptor per level (depth-first)."""
    try:
        top_fd = os.open(top, _DIR_NOFOLLOW)
    except OSError:
        return

    try:
        for _, dfd, _, names in walk_dirs(top_fd, GIVE_MAX_DEPTH):
            _give_fd(dfd, uid)
            for n in names:
                sub = _give_entry(dfd, n, uid)   # a directory is given here too, and walked into next
                if sub is not None:
                    os.close(sub)
    finally:
        os.close(top_fd)


def child_files(top: str | Path, suffixes: tuple[str, ...], max_bytes: int = MAX_SIDECAR_BYTES,
                max_depth: int = GIVE_MAX_DEPTH) -> list[tuple[str, bytes]]:
    """(path relative to `top`, content) of the regular files under `top` whose names end in one
    of `suffixes`, for a place the child writes (its sol/): directories opened O_NOFOLLOW relative
    to their parent's descriptor, files opened O_NOFOLLOW|O_NONBLOCK and read only where fstat says
    regular file, at most `max_bytes` each (larger ones are skipped).  A symlink to a host file, a
    FIFO or a device swapped in while this runs is never read and never waited on."""
    out: list[tuple[str, bytes]] = []
    try:
        top_fd = os.open(top, _DIR_NOFOLLOW)
    except OSError:
        return out

    def read(dfd: int, name: str) -> bytes | None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, dir_fd=dfd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
                return None
            chunks, total = [], 0
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    return b"".join(chunks)
                total += len(b)
                if total > max_bytes:   # grew while read
                    return None
                chunks.append(b)
        except OSError:
            return None
        finally:
            os.close(fd)

    try:
        for rel, dfd, _, names in walk_dirs(top_fd, max_depth):
            for n in names:
                if not n.endswith(suffixes):
                    continue
                try:
                    if not stat.S_ISREG(os.lstat(n, dir_fd=dfd).st_mode):
                        continue
                except OSError:
                    continue
                data = read(dfd, n)
                if data is not None:
                    out.append((rel + n, data))
    finally:
        os.close(top_fd)
    return out


def shared_io_root(shm: str | Path = "/dev/shm", name: str | None = None) -> tuple[Path | None, str | None]:
    """`<shm>/<name>` (name: IO_ROOT_NAME), the directory every scratch's io/ is made in, where it
    is safe to use: -> (it, None), or (None, why not) and the scratch keeps io/ on disk (also,
    with nothing refused, where there is no writable /dev/shm).

    The name is fixed and /dev/shm is writable by every local user, who can plant it first: a
    symlink to a directory of theirs, or a directory they own or can write.  io/ inside would then
    be theirs to rename and swap for a symlink while this process (root on a GPU host) creates and
    writes exchange files through it.  So after mkdir (0711, an existing one kept) the name is
    opened O_DIRECTORY|O_NOFOLLOW (a symlink or a file fails) and used only if fstat says a
    directory owned by this process's euid with no group or other write bit, in a /dev/shm that is
    sticky or writable by its owner alone (so nobody else can rename the checked entry away before
    the scratch directory is made in it: this process's own entry in a sticky directory)."""
    shm = Path(shm)
    top = shm / (name or IO_ROOT_NAME)
    try:
        sst = os.stat(shm)
    except OSError:
        return None, None
    if not stat.S_ISDIR(sst.st_mode) or not os.access(shm, os.W_OK):
        return None, None   # no /dev/shm to use: nothing refused
    if sst.st_mode & 0o022 and not sst.st_mode & stat.S_ISVTX:
        return None, f"{shm} is writable by others without the sticky bit (mode {stat.filemode(sst.st_mode)}): io/ stays on disk"
    try:
        os.mkdir(top, 0o711)
    except FileExistsError:
        pass
    except OSError as e:
        return None, f"cannot make {top}: {e.strerror}; io/ stays on disk"
    try:
        fd = os.open(top, _DIR_NOFOLLOW)
    except OSError as e:   # ELOOP: a symlink; ENOTDIR: a file or a FIFO
        return None, f"{top} is a symlink or not a directory ({e.strerror}): not used, io/ stays on disk"
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    euid = os.geteuid()
    if st.st_uid != euid:
        return None, (f"{top} belongs to uid {st.st_uid}, not to this process's uid {euid} (another user's "
                      f"replays on this host made it, or someone planted it): not used, io/ stays on disk")
    if st.st_mode & 0o022:
        return None, f"{top} is writable by others (mode {stat.filemode(st.st_mode)}): not used, io/ stays on disk"
    return top, None


#: the file in a scratch root its replay holds an exclusive flock on for as long as it lives (the
#: kernel drops the lock when the process dies, however it dies); its io/ directory in the shared
#: io root has one of its own beside it, `<name>.live` (the io directory itself is the child's)
LIVE_LOCK = ".live"
_SCRATCH_NAME = re.compile(r"replay-[0-9a-f]{12}-[A-Za-z0-9_]+")
_IO_LOCK_NAME = re.compile(r"(replay-io-[0-9a-f]{12}-[A-Za-z0-9_]+)\.live")


def _hold_live_lock(where: Path, name: str = LIVE_LOCK) -> int:
    """Create where/name and hold an exclusive flock on it (-> its fd; -1 where none is to be
    had here: that scratch is then never swept).  It is made under another name, locked, then
    renamed in: a sweeper never finds it unlocked."""
    import fcntl
    try:
        fd = os.open(where / (name + ".new"), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                     0o600)
    except OSError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(where / (name + ".new"), where / name)
    except OSError:
        os.close(fd)
        return -1
    return fd


def _dead(dfd: int, lock: str) -> int:
    """The descriptor of `lock` in the directory held open as `dfd`, locked by this call, where it
    is a regular file of this euid that no live process holds; else -1."""
    import fcntl
    fd = -1
    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # OSError where a live replay holds it
            return fd
    except OSError:
        pass
    close_fds(fd)
    return -1


def sweep_dead_scratches(parent: str | Path, io_top: Path | None) -> list[str]:
    """Remove the scratches under `parent` and the io directories under `io_top` whose replay died
    before its cleanup.  -> the names removed.

    Mechanism: a replay process killed from outside (SIGKILL at a bench's run limit, an OOM kill)
    never runs Scratch.cleanup, and its scratch in the temp dir and its tensor-exchange directory
    in /dev/shm (memory, up to the size of the problem's tensors) stayed for good: one pair per
    killed replay.  A live replay holds an flock on each (LIVE_LOCK in the scratch root,
    `<io name>.live` beside its io directory in the io root, which only this side writes); one
    whose lock can be taken has no process left, and goes.  Look-alikes left alone: a live
    replay's (in any process: flocks of two opens conflict within one process too), a kept
    scratch (`keep`: its lock is removed at cleanup), one from before this lock (no lock file),
    another user's, and anything not named like a scratch or reached through a symlink (every
    entry opened O_NOFOLLOW relative to its parent's descriptor; shutil.rmtree by descriptor)."""
    removed: list[str] = []
    euid = os.geteuid()
    for top, io in ((parent, False), (io_top, True)):
        if top is None:
            continue
        try:
            pfd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            for name in sorted(os.listdir(pfd)):
                if io:
                    m = _IO_LOCK_NAME.fullmatch(name)
                    if m is None:
                        continue
                    lfd = _dead(pfd, name)
                    if lfd < 0:
                        continue
                    try:
                        shutil.rmtree(m.group(1), dir_fd=pfd, ignore_errors=True)
                        os.unlink(name, dir_fd=pfd)
                        removed.append(m.group(1))
                    except OSError:
                        pass
                    finally:
                        os.close(lfd)
                    continue
                if not _SCRATCH_NAME.fullmatch(name):
                    continue
                try:
                    dfd = os.open(name, _DIR_NOFOLLOW, dir_fd=pfd)
                except OSError:
                    continue
                try:
                    lfd = _dead(dfd, LIVE_LOCK) if os.fstat(dfd).st_uid == euid else -1
                finally:
                    os.close(dfd)
                if lfd >= 0:
                    try:
                        shutil.rmtree(name, dir_fd=pfd, ignore_errors=True)
                        removed.append(name)
                    finally:
                        os.close(lfd)
        except OSError:
            pass
        finally:
            os.close(pfd)
    return removed


class Scratch:
    """A private copy of a run's solution files, plus the generated `reference` module dir.

    Layout: root/sol (solution.py + scratch sidecars, the child's cwd), root/ref (reference.py),
    root/harness (worker.py), root/home, root/io (tensor exchange); the extension cache lives
    under cache_root/<sha256 of solution.py>.
    """

    def __init__(self, solution: bytes, sidecars: dict[str, bytes] | None = None,
                 reference_src: Path | str | None = None, cache_root: Path | None = None,
                 work_root: Path | None = None, keep: bool = False, hide: list[str] | None = None) -> None:
        self.sha256 = sha256_bytes(solution)
        io_top, self.io_root_refused = shared_io_root()
        #: scratches of replays killed before their cleanup, removed now (sweep_dead_scratches)
        self.swept = sweep_dead_scratches(work_root or tempfile.gettempdir(), io_top)
        self.root = Path(tempfile.mkdtemp(prefix=f"replay-{self.sha256[:12]}-", dir=work_root))
        self._live_fd = _hold_live_lock(self.root)
        self.keep = keep
        self.sol_dir = self.root / "sol"
        self.ref_dir = self.root / "ref"
        self.harness = self.root / "harness"
        self.home = self.root / "home"
        self.io = self.root / "io"
        self.fsroot = self.root / "fsroot"   # the child's filesystem view is mounted here (its namespace only)
        #: paths the child must not see even where a bound tree holds them (the run folder, the archive)
        self.hide = [str(h) for h in (hide or [])]
        #: one sandbox report per child started (Child.report)
        self.sandbox_reports: list[dict] = []
        self._owner: int | None = None
        for d in (self.sol_dir, self.ref_dir, self.harness, self.home / "tmp", self.fsroot):
            d.mkdir(parents=True, exist_ok=True)
        # tensors cross the process boundary as files: keep them in memory where /dev/shm exists,
        # under one parent directory, which a GPU child's view of /dev/shm masks (other replays'
        # exchange files are not its business); its own directory is bound back.  Where that
        # directory is not safely ours (`shared_io_root`), io/ is a plain directory of the scratch
        self._io_tmp = None
        self._io_live_fd = -1
        if io_top is not None:
            self._io_tmp = Path(tempfile.mkdtemp(prefix=f"replay-io-{self.sha256[:12]}-", dir=io_top))
            self._io_live_fd = _hold_live_lock(io_top, self._io_tmp.name + ".live")
            self.io.symlink_to(self._io_tmp, target_is_directory=True)
        else:
            self.io.mkdir()
        self.skipped: list[str] = []
        for rel, data in sorted((sidecars or {}).items()):
            parts = Path(rel).parts
            if not parts or any(p in ("..", "") or p in SKIP_NAMES for p in parts) or rel.endswith(".pyc"):
                self.skipped.append(rel)
                continue
            if rel in ("solution.py", "reference.py"):  # the archived final solution.py wins
                self.skipped.append(rel)
                continue
            dst = self.sol_dir / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
        (self.sol_dir / "solution.py").write_bytes(solution)
        if reference_src is not None:
            shutil.copyfile(reference_src, self.ref_dir / "reference.py")
        shutil.copyfile(WORKER_SRC, self.harness / "worker.py")
        shutil.copyfile(SANDBOX_SRC, self.harness / "sandbox.py")
        shutil.copyfile(AUDIT_SRC, self.harness / "childaudit.py")
        #: every Child started on this scratch (their evidence is judged after the replay)
        self.children: list = []
        self.cache = (cache_root or default_cache_root()) / self.sha256[:32]
        self.cache.mkdir(parents=True, exist_ok=True)
        for sub in ("torch_extensions", "triton", "cuda"):
            # the cache is the solution's to write (an earlier replay of it may have left a
            # symlink or a file at these names): replaced, never followed
            d = self.cache / sub
            try:
                if not stat.S_ISDIR(os.lstat(d).st_mode):
                    os.unlink(d)
            except FileNotFoundError:
                pass
            try:
                os.mkdir(d)
            except FileExistsError:
                pass
        self._cache_fd, self.stale_build_locks = claim_build_cache(self.cache)
        #: the build cache after the replay (buildcache.account, before cleanup: files, bytes, caps, evictions)
        self.cache_report: dict | None = None
        self._n = 0
        #: what Scratch.path found at a name before creating it (only the child writes io/)
        self.planted: list[str] = []

    def path(self, stem: str, tries: int = 8) -> str:
        """A new file name in io/, created here as an empty regular file (owned by the sandbox uid
        where there is one, so the child can map a file this process writes: `pack_load(share=True)`
        opens it read-write).

        io/ is the child's to write, and it can guess the next name: whatever it put there first
        (a symlink to a host file, a FIFO, a hard link) is removed, and the file is created with
        O_EXCL|O_NOFOLLOW, so this never opens, truncates or chowns anything but a new file.  A
        directory at the name, or a name that keeps reappearing, raises ScratchTampered.  Later
        opens of the name go through worker.open_exchange (the child may still swap it)."""
        p, fd = self.create(stem, tries)
        os.close(fd)
        return p

    def create(self, stem: str, tries: int = 8) -> tuple[str, int]:
        """`path`, keeping the new file open: -> (name, a read-write descriptor of it).  What this
        process writes and reads through the descriptor is that file whatever the child later does
        to the name (the put file: exchange.Exchange.put never opens it by name again)."""
        self._n += 1
        p = self.io / f"{self._n:05d}-{stem}.pt"
        for _ in range(tries):
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                st = None
            if st is not None:   # this process has not used the name yet: the child put it there
                self.planted.append(f"exchange name {p} was taken before it was created "
                                    f"({stat.filemode(st.st_mode)}, {st.st_nlink} link(s)): removed, not followed")
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
            except IsADirectoryError:
                raise ScratchTampered(f"exchange name {p} is a directory the solution's process made "
                                      "(tampered with): refused") from None
            try:
                fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o660)
                break
            except FileExistsError:
                continue   # recreated between the unlink and the open: again
        else:
            raise ScratchTampered(f"exchange name {p} kept reappearing after {tries} removals (tampered with): refused")
        try:
            if self._owner is not None:
                os.fchown(fd, self._owner, 0)
            os.fchmod(fd, 0o660)
        except BaseException:
            os.close(fd)
            raise
        return str(p), fd

    def prepare_owner(self, uid: int | None) -> None:
        """Give the sandbox uid what the child writes: sol/ (its cwd), home/, io/, the build cache,
        owner uid and group 0 with group read-write (so a sandbox that had to fall back to root
        without capabilities, which is group 0 but owns nothing, can still use them).  The
        scratch root stays root's, searchable (the child only passes through it)."""
        if uid is None or self._owner == uid:
            return
        os.chmod(self.root, 0o711)
        for top in (self.sol_dir, self.home, Path(os.path.realpath(self.io)), self.cache):
            # the cache is shared by every replay of this solution and may be written by one
            # running now: walked by descriptors, never through a symlink (`_give_tree`)
            _give_tree(top, uid)
        self._owner = uid

    @property
    def claim_fd(self) -> int:
        """The descriptor holding this replay's claim on the build cache (-1: another replay of the
        same solution holds it)."""
        return self._cache_fd

    def cleanup(self) -> None:
        close_fds(self._cache_fd)
        self._cache_fd = -1
        if self._io_tmp is not None:
            shutil.rmtree(self._io_tmp, ignore_errors=True)
            if self._io_live_fd >= 0:
                try:
                    os.unlink(self._io_tmp.with_name(self._io_tmp.name + ".live"))
                except OSError:
                    pass
            close_fds(self._io_live_fd)
            self._io_live_fd = -1
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        else:   # kept for the user: never a dead scratch to sweep
            try:
                os.unlink(self.root / LIVE_LOCK)
            except OSError:
                pass
        close_fds(self._live_fd)
        self._live_fd = -1

    @classmethod
    def from_run_dir(cls, run_dir: Path, **kw: Any) -> "Scratch":
        """Read solution.py and scratch/** from a run folder (read-only) into a new scratch."""
        run_dir = Path(run_dir)
        sol = (run_dir / "solution.py").read_bytes()
        side: dict[str, bytes] = {}
        sdir = run_dir / "scratch"
        if sdir.is_dir():
            for p in sorted(sdir.rglob("*")):
                if p.is_symlink() or not p.is_file():
                    continue
                if p.stat().st_size > MAX_SIDECAR_BYTES:
                    continue
                side[str(p.relative_to(sdir))] = p.read_bytes()
        return cls(sol, side, **kw)

    @classmethod
    def from_run_files(cls, rf: Any, **kw: Any) -> "Scratch":
        """Same, through forensics.archive.RunFiles (directory or tar/zip archives)."""
        sol = rf.read_bytes("solution.py")
        if sol is None:
            raise FileNotFoundError("solution.py")
        side: dict[str, bytes] = {}
        for rel in rf.list("scratch/"):
            data = rf.read_bytes(rel)
            if data is not None and len(data) <= MAX_SIDECAR_BYTES:
                side[rel[len("scratch/"):]] = data
        return cls(sol, side, **kw)
