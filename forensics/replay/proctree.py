"""Ending every process a replayed solution started, not only its process group.

The child runs in a session and process group of its own (`start_new_session`), and the runner
kills that group.  A solution's build does not stay in it: ninja starts each compiler command in a
process group of its own (so that Ctrl-C reaches ninja alone), so `killpg` left nvcc and cicc
running after a timeout, past the end of the CLI (issue 21).  They stay in the child's *session*
(only `setsid` leaves it), so `kill_session(pid)` kills every process whose session id is the
child's pid, and, while the child is still alive, every descendant of it (a process that did leave
the session); then the same again until none is left.  Linux /proc only; elsewhere it does nothing
(the process-group kill still runs).  The sandbox's PID namespace, where there is one, ends them all
anyway; this works without it.
"""

from __future__ import annotations

import os
import signal
import time


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, session id) of a process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        rest = data[data.rindex(b")") + 2:].split()
        return int(rest[1]), int(rest[3])     # fields 4 (ppid) and 6 (session)
    except (ValueError, IndexError):
        return None


def _all() -> dict[int, tuple[int, int]]:
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if n.isdigit():
            st = _stat(int(n))
            if st is not None:
                out[int(n)] = st
    return out


def members(pid: int, descendants: bool = True) -> set[int]:
    """Processes in the session led by `pid` (its session id), and its descendants."""
    procs = _all()
    me = os.getpid()
    found = {p for p, (_, sid) in procs.items() if sid == pid}
    if descendants and pid in procs:
        kids: dict[int, list[int]] = {}
        for p, (pp, _) in procs.items():
            kids.setdefault(pp, []).append(p)
        todo = [pid]
        while todo:
            q = todo.pop()
            for c in kids.get(q, []):
                if c not in found:
                    found.add(c)
                    todo.append(c)
    found.discard(me)
    return found


#: executables of a native build: what ninja / setuptools / nvcc start for a CUDA or C++ extension
COMPILERS = frozenset({"nvcc", "cicc", "ptxas", "cudafe++", "fatbinary", "nvlink", "ninja", "cc1plus", "cc1",
                       "c++", "g++", "gcc", "cc", "clang", "clang++", "ld", "ld.gold", "ld.lld", "collect2"})


def compilers_running(pid: int) -> list[str]:
    """Names of the build tools (COMPILERS) alive in `pid`'s session and among its descendants,
    sorted, without repeats.  A call that times out with one of them running is building (a
    `load_inline` inside the first forward), not necessarily hanging; the runner says so.

    Mechanism: /proc/PID/comm (the executable's name as the kernel keeps it, 15 characters) and the
    base name of argv[0].  Look-alike it must not flag: the solution's own Python process (its
    command line may name `nvcc` as an argument: only argv[0] counts), a zombie compiler that has
    already finished (its state is Z)."""
    found: set[str] = set()
    for p in members(pid):
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{p}/comm", "rb") as f:
                comm = f.read().strip().decode(errors="replace")
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0].decode(errors="replace")
        except (OSError, IndexError):
            continue
        for name in (comm, os.path.basename(argv0)):
            if name in COMPILERS:
                found.add(name)
    return sorted(found)


def kill_session(pid: int, rounds: int = 5) -> list[int]:
    """SIGKILL every member of `pid`'s session (and its descendants while it lives), repeatedly
    until none is left (a process may fork while it is being killed).  -> the pids signalled."""
    if not pid or pid <= 1 or not os.path.isdir("/proc"):
        return []
    if pid == os.getsid(0):   # never our own session
        return []
    killed: list[int] = []
    for _ in range(rounds):
        victims = sorted(members(pid))
        if not victims:
            break
        for v in victims:
            try:
                os.kill(v, signal.SIGKILL)
                killed.append(v)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    return killed


def private_rss(pid: int) -> int:
    """Bytes of a process's anonymous and shared-memory resident pages (RssAnon + RssShmem of
    /proc/PID/status): what a solution that allocates grows.  File pages (the libraries it maps)
    are left out: the kernel can drop them, and counting torch's 0.5 GB of them in every process
    would spend the ceiling on code.  0 for a process that is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            data = f.read()
    except OSError:
        return 0
    total = 0
    for line in data.splitlines():
        if line.startswith((b"RssAnon:", b"RssShmem:")):
            parts = line.split()
            try:
                total += int(parts[1]) * 1024     # kB
            except (IndexError, ValueError):
                pass
    return total


class MemoryWatch:
    """A memory ceiling where the kernel gives the replay none.

    Mechanism: the sandbox's ceiling is a cgroup (memory.max); on a CPU RLIMIT_AS backs it.  On a
    GPU there is no RLIMIT_AS (CUDA reserves terabytes of address space), and a host may refuse to
    delegate the memory controller (the H200 host under gVisor: EBUSY), so a solution that
    allocates host memory had no ceiling at all (gpu_verify's memory check, 2026-12-04).  This
    thread sums `private_rss` over the child's session and descendants every `interval` seconds
    and, over the ceiling, kills them all (`kill_session`) and records what it saw.

    Look-alike it must not stop: a solution whose file-backed pages (libraries, a memory-mapped
    weight file) are large, or one that stays under the ceiling at every poll.  Its slack is what a
    process can touch between two polls (about 1 GB at 10 GB/s with the default 0.1 s); the
    cgroup, where there is one, has none, so this runs only without one."""

    def __init__(self, pid: int, ceiling: int, interval: float = 0.1) -> None:
        import threading
        self.pid = pid
        self.ceiling = int(ceiling)
        self.interval = interval
        self.peak = 0
        #: bytes the tree held when the watch killed it; None while it has not
        self.fired: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"memwatch-{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            procs = members(self.pid) | {self.pid}
            used = sum(private_rss(p) for p in procs)
            self.peak = max(self.peak, used)
            if used > self.ceiling:
                self.fired = used
                kill_session(self.pid)
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                return
            if not os.path.exists(f"/proc/{self.pid}"):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
