"""The replay child's sandbox: namespaces, a private filesystem view, resource limits, seccomp.

A replayed solution is adversarial code.  `runner.Child` starts it through this file, copied into
the scratch's ``harness/`` and run as ``python -I -S harness/sandbox.py`` (standard library only,
no site, no PYTHONPATH), with the plan in the environment variable FORENSICS_SANDBOX_CONFIG:

    parent (forensics)                                   the replay process: plans, reads the report
      └─ launcher    host PID space, root                joins the cgroup, unshare(2), relays the exit status
           └─ init   PID 1 of a new PID namespace        builds the filesystem view, pivot_root, reaps
                └─ worker (python -s worker.py)          rlimits, an unprivileged uid, no capabilities,
                                                          no_new_privs, seccomp, then execve

Layers, each applied where the machine allows it and reported either way (`report`):

* net    CLONE_NEWNET: only a loopback of its own, no route anywhere (a local listener of the
         host is unreachable, so is every other machine);
* pid    CLONE_NEWPID: the worker is PID 2 under our init; /proc is a fresh procfs of that space
         (the parent's /proc/<pid>/environ and cmdline do not exist there); when init exits the
         kernel kills every process left in the space, so nothing outlives the replay;
* ipc, uts  CLONE_NEWIPC, CLONE_NEWUTS (SysV IPC and the host name are its own);
* fs     CLONE_NEWNS + pivot_root into a tmpfs holding: /usr /etc /lib* /bin /sbin, the Python
         prefix and its site-packages, CUDA_HOME and LD_LIBRARY_PATH directories, all bound
         read-only; /sys read-only; the scratch's sol/ (its cwd), io/ and the build cache
         read-write; ref/ and harness/ read-only; fresh tmpfs for HOME, /tmp, /dev/shm; /dev
         with null/zero/full/random/urandom/tty and, on a GPU, /dev/nvidia*, /dev/nvidia-caps,
         /dev/dri.  The archive, the parent's $HOME and the project checkout are not in the view
         (and are masked with an empty read-only tmpfs where a bound tree contains them);
* uid    the worker runs as an unprivileged uid of its own (100000 + the replay process's pid, so
         concurrent replays never share one; `FORENSICS_SANDBOX_UID` forces one) with no
         capabilities (bounding set emptied) and no_new_privs (no setuid binary gives them back);
         where the parent is not root, a user namespace instead, with every capability dropped;
* seccomp a deny-list filter: mount/pivot_root/unshare/setns/namespace clone flags, ptrace and
         process_vm_*, bpf, perf_event_open, userfaultfd, keyctl, kexec, module loading,
         open_by_handle_at, io_uring, the new mount API: EPERM (clone3: ENOSYS, so the C
         library falls back to clone, whose flags the filter can read);
* rlimits RLIMIT_AS (CPU only: CUDA reserves terabytes of address space), NPROC, NOFILE, CPU,
         FSIZE, CORE=0;
* cgroup a memory ceiling (memory.max / memory.limit_in_bytes) and pids.max, cgroup v2 or v1,
         where the cgroup tree is writable; the parent reads its OOM-kill count and peak.

`FORENSICS_SANDBOX=off|auto|strict` (default auto: every layer the machine allows, the rest
listed as missing; strict: a child whose sandbox misses a layer refuses to start);
`FORENSICS_SANDBOX_SKIP=net,pid,...` turns single layers off (diagnosis);
`FORENSICS_REPLAY_MEM=8G` overrides the memory ceiling (default half the machine's memory).

    python -m forensics.replay.sandbox [--device cuda] [--json]   # what holds on this machine
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import struct
import sys
import time

CONFIG_ENV = "FORENSICS_SANDBOX_CONFIG"
IO_ROOT_NAME = "forensics-replay-io"   # /dev/shm/<this>/replay-io-*: the scratches' tensor exchange
LAYERS = ("net", "pid", "ipc", "uts", "fs", "uid", "seccomp", "rlimits", "cgroup", "memwatch")
UID_BASE = 100000   # + the replay process's pid: unique among the replays running at one time

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_MOVE, MS_REC = 1024, 2048, 4096, 8192, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 4, 22, 24
PR_SET_SECUREBITS, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 28, 36, 38
SECCOMP_MODE_FILTER = 2

# ---------------------------------------------------------------------------------- seccomp
# syscall numbers (x86_64 from asm/unistd_64.h, aarch64 = asm-generic/unistd.h)
_DENY = ("mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "ptrace", "process_vm_readv",
         "process_vm_writev", "pidfd_getfd", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
         "request_key", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
         "open_by_handle_at", "name_to_handle_at", "io_uring_setup", "acct", "swapon", "swapoff", "reboot",
         "sethostname", "setdomainname", "quotactl", "lookup_dcookie", "fanotify_init", "open_tree",
         "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")
_NR = {
    "x86_64": dict(clone=56, clone3=435, ptrace=101, pivot_root=155, chroot=161, acct=163, mount=165, umount2=166,
                   swapon=167, swapoff=168, reboot=169, sethostname=170, setdomainname=171, init_module=175,
                   delete_module=176, quotactl=179, lookup_dcookie=212, kexec_load=246, add_key=248,
                   request_key=249, keyctl=250, unshare=272, perf_event_open=298, fanotify_init=300,
                   name_to_handle_at=303, open_by_handle_at=304, setns=308, process_vm_readv=310,
                   process_vm_writev=311, finit_module=313, kexec_file_load=320, bpf=321, userfaultfd=323,
                   io_uring_setup=425, open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432,
                   fspick=433, pidfd_getfd=438, mount_setattr=442, socket=41, socketpair=53),
    "aarch64": dict(clone=220, clone3=435, ptrace=117, pivot_root=41, chroot=51, acct=89, mount=40, umount2=39,
                    swapon=224, swapoff=225, reboot=142, sethostname=161, setdomainname=162, init_module=105,
                    delete_module=106, quotactl=60, lookup_dcookie=18, kexec_load=104, add_key=217,
                    request_key=218, keyctl=219, unshare=97, perf_event_open=241, fanotify_init=262,
                    name_to_handle_at=264, open_by_handle_at=265, setns=268, process_vm_readv=270,
                    process_vm_writev=271, finit_module=273, kexec_file_load=294, bpf=280, userfaultfd=282,
                    io_uring_setup=425, open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432,
                    fspick=433, pidfd_getfd=438, mount_setattr=442, socket=198, socketpair=199),
}
#: socket families a worker may create (socket / socketpair's domain): local, IP (its own loopback in
#: the network namespace) and netlink (interface queries).  Every other family is refused with
#: EAFNOSUPPORT, as a kernel without it would: AF_VSOCK reaches the hypervisor host past the network
#: namespace, and the rest (packet, bluetooth, CAN, TIPC, RDS, ALG, XDP ...) is kernel surface a
#: kernel solution has no use for
SOCKET_FAMILIES = (1, 2, 10, 16)   # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NS_FLAGS = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The BPF filter: (code, jt, jf, k) per instruction, or None for an architecture without a table."""
    nr, arch = _NR.get(machine), _AUDIT_ARCH.get(machine)
    if nr is None or arch is None:
        return None
    LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    body: list[tuple] = [(LD_W_ABS, 0, 0, 4), (JEQ, "next", "enosys", arch), (LD_W_ABS, 0, 0, 0)]
    if machine == "x86_64":
        body.append((JGE, "enosys", "next", 0x40000000))   # the x32 ABI: its numbers carry bit 30
    body.append((JEQ, "enosys", "next", nr["clone3"]))     # its flags sit behind a pointer: ENOSYS -> clone
    body.append((JEQ, "next", "skip2", nr["clone"]))
    body.append((LD_W_ABS, 0, 0, 16))                      # clone's flags: args[0], low word
    body.append((JSET, "eperm", "allow", _NS_FLAGS))
    for name in _DENY:
        body.append((JEQ, "eperm", "next", nr[name]))
    body.append((JEQ, "sock", "next", nr["socket"]))
    body.append((JEQ, "next", "allow", nr["socketpair"]))
    sock = len(body)
    body.append((LD_W_ABS, 0, 0, 16))                      # the domain: args[0], low word
    for i, fam in enumerate(SOCKET_FAMILIES):
        body.append((JEQ, "allow", "next" if i < len(SOCKET_FAMILIES) - 1 else "eafnosupport", fam))
    body.append((RET, 0, 0, _RET_ALLOW))
    allow = len(body) - 1
    body.append((RET, 0, 0, _RET_ERRNO | errno.EPERM))
    eperm = len(body) - 1
    body.append((RET, 0, 0, _RET_ERRNO | errno.ENOSYS))
    enosys = len(body) - 1
    body.append((RET, 0, 0, _RET_ERRNO | errno.EAFNOSUPPORT))
    eafnosupport = len(body) - 1
    out = []
    for i, (code, jt, jf, k) in enumerate(body):
        def off(t):
            if not isinstance(t, str):
                return t
            target = {"next": i + 1, "skip2": i + 3, "allow": allow, "eperm": eperm, "enosys": enosys,
                      "sock": sock, "eafnosupport": eafnosupport}[t]
            return target - i - 1
        out.append((code, off(jt), off(jf), k))
    return out


# ---------------------------------------------------------------------------------- libc
_libc = None


def _lib():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return _libc


def _check(rc: int, what: str) -> int:
    if rc == -1:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return rc


def _b(p) -> bytes | None:
    return None if p is None else os.fsencode(p)


def _mount(src, dst, fstype, flags: int, data=None) -> None:
    _check(_lib().mount(_b(src), _b(dst), _b(fstype), flags, _b(data)), f"mount {src} on {dst}")


def _prctl(op: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> int:
    return _check(_lib().prctl(op, a, b, c, d), f"prctl {op}")


def _unshare(flags: int) -> None:
    _check(_lib().unshare(flags), f"unshare {flags:#x}")


# ---------------------------------------------------------------------------------- parent side
def default_uid() -> int:
    return UID_BASE + os.getpid()


def parse_size(text: str) -> int:
    t = str(text).strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    if t and t[-1] in mult:
        return int(float(t[:-1]) * mult[t[-1]])
    return int(float(t))


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _mountinfo(path: str = "/proc/self/mountinfo") -> list[dict]:
    out = []
    for line in (_read(path) or "").splitlines():
        left, _, right = line.partition(" - ")
        f = left.split()
        r = right.split()
        if len(f) < 5 or len(r) < 2:
            continue
        unesc = lambda s: s.encode().decode("unicode_escape") if "\\" in s else s  # noqa: E731 - \040 etc.
        out.append({"root": unesc(f[3]), "point": unesc(f[4]), "opts": f[5], "fstype": r[0],
                    "super": r[2] if len(r) > 2 else ""})
    return out


class Cgroup:
    """One child's cgroup: a memory ceiling and a process count, v2 or v1, or None where the
    cgroup tree is not writable (`why` says so)."""

    def __init__(self, name: str, mem: int, pids: int) -> None:
        self.dirs: list[str] = []
        self.version = None
        self.why = ""
        self.mem, self.pids = mem, pids
        try:
            self._create(name)
        except OSError as e:
            self.why = f"{e}"
            self.remove()
            self.dirs = []
            self.version = None

    @staticmethod
    def _own_path(controller: str | None) -> str:
        for line in (_read("/proc/self/cgroup") or "").splitlines():
            hid, ctrls, path = line.split(":", 2)
            if controller is None and hid == "0" and ctrls == "":
                return path
            if controller is not None and controller in ctrls.split(","):
                return path
        raise OSError(errno.ENOENT, f"no {controller or 'cgroup2'} line in /proc/self/cgroup")

    @staticmethod
    def _base(m: dict, own: str) -> str:
        rel = own[len(m["root"]):] if own.startswith(m["root"]) else own
        return m["point"] + ("/" + rel.strip("/") if rel.strip("/") else "")

    def _create(self, name: str) -> None:
        mi = _mountinfo()
        v2 = [m for m in mi if m["fstype"] == "cgroup2"]
        v1 = {c: m for m in mi if m["fstype"] == "cgroup" for c in ("memory", "pids") if c in m["super"].split(",")}
        if v2:
            base = self._base(v2[0], self._own_path(None))
            ctrls = (_read(os.path.join(base, "cgroup.controllers")) or "").split()
            if "memory" in ctrls:
                sub = (_read(os.path.join(base, "cgroup.subtree_control")) or "").split()
                if "memory" not in sub:
                    try:
                        with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                            f.write("+memory" + (" +pids" if "pids" in ctrls else ""))
                    except OSError as e:
                        if "memory" in v1:
                            raise OSError(e.errno, "") from None  # try v1 below
                        raise OSError(e.errno, f"cgroup v2 at {base}: cannot delegate memory ({e.strerror})") from None
                self._sweep(base)
                d = os.path.join(base, name)
                os.mkdir(d)
                self.dirs = [d]
                self.version = 2
                with open(os.path.join(d, "memory.max"), "w") as f:
                    f.write(str(self.mem))
                if os.path.exists(os.path.join(d, "memory.swap.max")):
                    with open(os.path.join(d, "memory.swap.max"), "w") as f:
                        f.write("0")
                if os.path.exists(os.path.join(d, "pids.max")):
                    with open(os.path.join(d, "pids.max"), "w") as f:
                        f.write(str(self.pids))
                return
        if "memory" not in v1:
            raise OSError(errno.ENOENT, "no cgroup v2 memory controller and no v1 memory hierarchy")
        self.version = 1
        for c in ("memory", "pids"):
            if c not in v1:
                continue
            base = self._base(v1[c], self._own_path(c))
            self._sweep(base)
            d = os.path.join(base, name)
            os.mkdir(d)
            self.dirs.append(d)
            if c == "memory":
                with open(os.path.join(d, "memory.limit_in_bytes"), "w") as f:
                    f.write(str(self.mem))
                sw = os.path.join(d, "memory.memsw.limit_in_bytes")
                if os.path.exists(sw):
                    try:
                        with open(sw, "w") as f:
                            f.write(str(self.mem))
                    except OSError:
                        pass
            else:
                with open(os.path.join(d, "pids.max"), "w") as f:
                    f.write(str(self.pids))

    @property
    def ok(self) -> bool:
        return self.version is not None

    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def _mem_dir(self) -> str | None:
        for d in self.dirs:
            if os.path.exists(os.path.join(d, "memory.max")) or os.path.exists(os.path.join(d, "memory.limit_in_bytes")):
                return d
        return None

    def stats(self) -> dict:
        """oom_kill count and peak memory of the cgroup (None where the kernel does not say)."""
        d = self._mem_dir()
        out: dict = {"oom_kill": None, "peak_bytes": None}
        if d is None:
            return out
        for fn in ("memory.events", "memory.oom_control"):
            for line in (_read(os.path.join(d, fn)) or "").splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill" and v.strip().isdigit():
                    out["oom_kill"] = int(v)
        for fn in ("memory.peak", "memory.max_usage_in_bytes"):
            v = (_read(os.path.join(d, fn)) or "").strip()
            if v.isdigit():
                out["peak_bytes"] = int(v)
                break
        return out

    def pids_in(self) -> list[int]:
        out: set[int] = set()
        for p in self.procs_files():
            for line in (_read(p) or "").split():
                if line.isdigit():
                    out.add(int(line))
        return sorted(out)

    def kill_all(self) -> None:
        for d in self.dirs:
            k = os.path.join(d, "cgroup.kill")
            if os.path.exists(k):
                try:
                    with open(k, "w") as f:
                        f.write("1")
                except OSError:
                    pass
        for _ in range(3):
            pids = self.pids_in()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        """rmdir, waiting up to 5 s for the kernel to let go of the dead tasks (a left-over empty
        group is swept by the next replay: `_sweep`)."""
        for d in reversed(self.dirs):
            for i in range(250):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if i in (10, 100):
                        self.kill_all()
                    time.sleep(0.02)
        self.dirs = []

    @staticmethod
    def _sweep(base: str) -> None:
        """Empty groups of replay processes that no longer exist (killed before their cleanup)."""
        try:
            names = [n for n in os.listdir(base) if n.startswith("forensics-replay-")]
        except OSError:
            return
        for n in names:
            pid = n.split("-")[2] if n.count("-") >= 3 else ""
            if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
                try:
                    os.rmdir(os.path.join(base, n))
                except OSError:
                    pass


def machine_memory() -> int:
    """Bytes of memory this process may use: MemTotal, or its own cgroup's limit where lower."""
    total = 0
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            total = int(line.split()[1]) * 1024
    if not total:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    mi = _mountinfo()
    cands = []
    try:
        v2 = [m for m in mi if m["fstype"] == "cgroup2"]
        if v2:
            cands.append(os.path.join(Cgroup._base(v2[0], Cgroup._own_path(None)), "memory.max"))
    except OSError:
        pass
    try:
        v1 = [m for m in mi if m["fstype"] == "cgroup" and "memory" in m["super"].split(",")]
        if v1:
            cands.append(os.path.join(Cgroup._base(v1[0], Cgroup._own_path("memory")), "memory.limit_in_bytes"))
    except OSError:
        pass
    for c in cands:
        v = (_read(c) or "").strip()
        if v.isdigit() and 0 < int(v) < total:
            total = int(v)
    return total


class Policy:
    """What a child's sandbox asks for; every number from the machine or the environment."""

    def __init__(self, device: str = "cpu") -> None:
        env = os.environ
        self.mode = (env.get("FORENSICS_SANDBOX") or "auto").strip().lower()
        if self.mode not in ("off", "auto", "strict"):
            raise ValueError(f"FORENSICS_SANDBOX={self.mode!r}: use off, auto or strict")
        self.skip = {s.strip() for s in (env.get("FORENSICS_SANDBOX_SKIP") or "").split(",") if s.strip()}
        bad = self.skip - set(LAYERS)
        if bad:
            raise ValueError(f"FORENSICS_SANDBOX_SKIP: unknown layer(s) {sorted(bad)} (have {', '.join(LAYERS)})")
        self.device = device
        ncpu = os.cpu_count() or 1
        self.machine_mem = machine_memory()
        self.mem = parse_size(env["FORENSICS_REPLAY_MEM"]) if env.get("FORENSICS_REPLAY_MEM") else \
            max(2 * 2**30, self.machine_mem // 2)
        # address space: CUDA reserves far more than it uses, so only the CPU path gets a limit;
        # the slack is the interpreter's own reservations (thread stacks, malloc arenas, libraries)
        self.as_bytes = None if device.startswith("cuda") else self.mem + 2**30 + ncpu * 128 * 2**20
        self.nproc = int(env.get("FORENSICS_REPLAY_NPROC") or max(1024, 64 * ncpu))
        self.nofile = 4096
        # CPU time of the worker, all its threads together: 10 minutes of the whole machine, at least
        # an hour.  A flat 3600 s killed a real Kimi replay on a 16-core H100 host (its full-size
        # models are initialised on the CPU by every thread, once per probe that rebuilds them)
        self.cpu_s = int(env.get("FORENSICS_REPLAY_CPU_S") or max(3600, 600 * ncpu))
        self.fsize = max(4 * 2**30, self.mem)
        # the worker's uid.  On a GPU the worker stays uid 0, without capabilities: torch's CUDA IPC
        # keeps its reference counters in /dev/shm files created 0600 by their process, which the
        # other side must open (the replay shares tensors over IPC both ways); a different uid
        # cannot.  FORENSICS_SANDBOX_UID forces one (to measure what breaks on a GPU).
        forced = env.get("FORENSICS_SANDBOX_UID")
        self.uid = int(forced) if forced else (None if device.startswith("cuda") else default_uid())
        self.hide = [p for p in (env.get("FORENSICS_SANDBOX_HIDE") or "").split(os.pathsep) if p]

    def rlimits(self) -> dict:
        r = {"nproc": self.nproc, "nofile": self.nofile, "cpu": self.cpu_s, "fsize": self.fsize, "core": 0}
        if self.as_bytes is not None:
            r["as"] = self.as_bytes
        return r


_PY_CACHE: dict[str, dict] = {}
_PY_PROBE = """
import sys, site, sysconfig, json, importlib.util as u
d = {'dirs': sorted({sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}) + site.getsitepackages()
     + [sysconfig.get_paths().get(k) for k in ('stdlib', 'platstdlib', 'purelib', 'platlib', 'include', 'platinclude')],
     'mods': []}
for m in ('torch', 'triton', 'numpy', 'nvidia', 'setuptools', 'ninja'):
    try:
        s = u.find_spec(m)
    except Exception:
        s = None
    if s is not None:   # the sys.path entry the package was found through
        d['mods'] += [__import__('os').path.dirname(x) for x in (list(s.submodule_search_locations or []) or [s.origin]) if x]
if __name__ == '__main__':
    print(json.dumps(d))
"""


def python_paths(python: str) -> list[str]:
    """Directories the interpreter needs read-only: its prefixes, site-packages, and where torch,
    triton, numpy ... were found (never a directory a .pth file adds, such as an editable
    install's checkout: that is on no list here)."""
    key = os.path.abspath(python)   # not resolved: a venv's python is a symlink to its base interpreter
    if key not in _PY_CACHE:
        if key == os.path.abspath(sys.executable):
            ns: dict = {"__name__": "forensics_probe"}
            exec(_PY_PROBE, ns)  # noqa: S102 - our own constant, run here to spare a subprocess
            d = ns["d"]
        else:
            import subprocess
            d = json.loads(subprocess.run([python, "-I", "-c", _PY_PROBE], capture_output=True, check=True,
                                          timeout=120).stdout)
        core = list(d["dirs"]) + [os.path.dirname(key), os.path.dirname(os.path.realpath(key))]
        _PY_CACHE[key] = {"core": [p for p in dict.fromkeys(core) if p and os.path.exists(p)],
                          "mods": [p for p in dict.fromkeys(d["mods"]) if p and os.path.exists(p)]}
    return list(_PY_CACHE[key]["core"])


def python_module_dirs(python: str) -> list[str]:
    """Where torch, triton, numpy ... were found (after `python_paths`)."""
    python_paths(python)
    return list(_PY_CACHE[os.path.abspath(python)]["mods"])


def _under(p: str, root: str) -> bool:
    p, root = p.rstrip("/") or "/", root.rstrip("/") or "/"
    return p == root or p.startswith(root if root == "/" else root + "/")


SYSTEM_RO = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEV_BASIC = ("null", "zero", "full", "random", "urandom", "tty")


def _tool_prefix(p: str) -> str:
    """A PATH directory's installation prefix: `/opt/gcc/bin` -> `/opt/gcc`, since a compiler needs
    its own libexec/ and lib/ (cc1, collect2, crt files) and `nvcc` its include/ and nvvm/; a
    directory not named bin, or one directly under /, stays as it is."""
    rp = os.path.normpath(p)
    parent = os.path.dirname(rp)
    return parent if os.path.basename(rp) in ("bin", "sbin") and parent not in ("/", "/usr") else rp


#: variables of the child's environment naming build inputs the replay supplies (buildenv:
#: --cutlass-include, --cuda-include): their directories are bound read-only
BUILD_VARS = ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "CUTLASS_ROOT", "CUTLASS_PATH", "CUTLASS_DIR",
              "CUTLASS_HOME", "CUTLASS_INCLUDE", "CUTLASS_INCLUDE_DIR")


def plan_fs(root: str, scratch, python: str, device: str, mem: int, uid: int | None, hide: list[str],
            env: dict | None = None) -> dict:
    """The mounts of the child's filesystem view, as [kind, path, options] in mount order."""
    m: list[list] = []
    ro: list[str] = []

    def add_ro(p: str | None, anywhere: bool = False, supplied: bool = False) -> None:
        """Bind `p` read-only; unless `anywhere` (the interpreter's own directories: a venv may
        live in the checkout) or `supplied` (a build input the user named, e.g. CUTLASS headers
        carried inside the checkout), never a directory inside the project checkout."""
        if not p or not os.path.isabs(p) or not os.path.exists(p):
            return
        rp = os.path.realpath(p)
        inside_ok = anywhere or supplied
        if any(_under(rp, q) for q in ro) or (not inside_ok and any(_under(rp, h) for h in project)):
            return
        if not anywhere and any(_under(h, rp) for h in project + hidden):
            return   # a tree that holds the checkout or a hidden path (the archive) is never bound
        if supplied and any(_under(rp, h) for h in hidden if h not in project and h != home):
            return   # nor a directory of the archive under audit (the checkout and $HOME may hold one)
        ro.append(rp)
        if rp != os.path.normpath(p):
            links.append([os.path.normpath(p), rp])

    links: list[list[str]] = []
    project = [os.path.realpath(_project_root())]
    hidden = [os.path.realpath(h) for h in hide if h]
    home = os.path.realpath(os.path.expanduser("~"))
    for p in SYSTEM_RO:
        if os.path.islink(p):
            m.append(["symlink", p, {"target": os.readlink(p)}])
        elif os.path.exists(p):
            ro.append(p)
    for p in python_paths(python):
        add_ro(p, anywhere=True)
    for p in python_module_dirs(python):
        add_ro(p)
    for k in ("CUDA_HOME", "CUDA_PATH"):
        add_ro(os.environ.get(k))
    for p in (os.environ.get("LD_LIBRARY_PATH") or "").split(":"):
        add_ro(p)
    for k in BUILD_VARS:
        for p in ((env or {}).get(k) or "").split(":"):
            add_ro(p, supplied=True)
    for p in (os.environ.get("PATH") or "").split(":"):   # tools a build calls (nvcc, ninja, cc), not ~/bin
        if p and not _under(os.path.realpath(p), home):
            pre = _tool_prefix(p)
            if any(_under(h, os.path.realpath(pre)) for h in project + hidden):
                pre = p   # the prefix holds the checkout or the archive: the bin directory alone
            add_ro(pre)
    for p in ro:
        m.append(["ro", p, {}])
    for p, rp in links:
        if not any(_under(p, q) for q in ro) and not any(_under(p, q) for q in SYSTEM_RO if os.path.islink(q)):
            m.append(["symlink", p, {"target": rp}])
    m.append(["ro1", "/sys", {}])   # non-recursive: no cgroup tree, no debugfs
    small = max(64 * 2**20, min(mem // 2, 64 * 2**30))
    owner = {} if uid is None else {"uid": uid, "gid": uid}
    m.append(["tmpfs", "/tmp", {"mode": "1777", "size": small}])
    m.append(["tmpfs", "/var/tmp", {"mode": "1777", "size": 16 * 2**20}])
    m.append(["tmpfs", "/run", {"mode": "0755", "size": 1 * 2**20}])
    m.append(["tmpfs", "/dev", {"mode": "0755", "size": 1 * 2**20, "dev": True}])
    for n in DEV_BASIC:
        if os.path.exists("/dev/" + n):
            m.append(["dev", "/dev/" + n, {}])
    for n, t in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                 ("stderr", "/proc/self/fd/2")):
        m.append(["symlink", "/dev/" + n, {"target": t}])
    io_real = os.path.realpath(scratch.io)
    if device.startswith("cuda"):
        # CUDA IPC: torch's reference-counter files live in /dev/shm under names the other side
        # opens, so the worker sees the host's /dev/shm, less the other replays' exchange files
        m.append(["rw", "/dev/shm", {}])
        io_root = os.path.join("/dev/shm", IO_ROOT_NAME)
        if os.path.dirname(io_real) == io_root:
            m.append(["mask", io_root, {}])
    else:
        m.append(["tmpfs", "/dev/shm", {"mode": "1777", "size": small}])
    gpu = []
    if device.startswith("cuda"):
        for n in sorted(os.listdir("/dev")):
            if n.startswith("nvidia") or n == "dri":
                gpu.append("/dev/" + n)
        for p in gpu:
            m.append(["dev", p, {}])
    m.append(["proc", "/proc", {}])
    # the scratch
    m.append(["tmpfs", str(scratch.home), {"mode": "0700", "size": small, **owner, "mkdir": ["tmp"]}])
    m.append(["rw", str(scratch.sol_dir), {}])
    m.append(["ro", str(scratch.ref_dir), {}])
    m.append(["ro", str(scratch.harness), {}])
    m.append(["rw", io_real, {}])
    if io_real != str(scratch.io):
        m.append(["symlink", str(scratch.io), {"target": io_real}])
    m.append(["rw", str(scratch.cache), {}])
    # what must stay invisible even where a bound tree holds it
    bound = [x[1] for x in m if x[0] in ("ro", "rw", "ro1")]
    for h in hidden:
        if os.path.exists(h) and any(_under(h, b) and h != b for b in bound) and not any(
                _under(b, h) for b in (str(scratch.sol_dir), str(scratch.cache), io_real)):
            m.append(["mask", h, {}])
    order = {"symlink": 0, "ro": 1, "ro1": 1, "rw": 1, "tmpfs": 1, "dev": 1, "proc": 1, "mask": 2}
    m.sort(key=lambda x: (x[1].rstrip("/").count("/"), order[x[0]]))
    return {"root": str(scratch.fsroot), "mounts": m, "gpu_devices": gpu}


def plan(scratch, device: str, python: str, req_fds: tuple[int, ...], report_fd: int,
         argv: list[str], env: dict, hide: list[str] | None = None) -> tuple[dict | None, "Cgroup | None"]:
    """The launcher's config (None: FORENSICS_SANDBOX=off) and the child's cgroup."""
    pol = Policy(device)
    if pol.mode == "off":
        return None, None
    root = os.geteuid() == 0
    uid = pol.uid if root and "uid" not in pol.skip else None
    missing: list[str] = []
    if root and uid is None and "uid" not in pol.skip:
        missing.append("unprivileged uid (GPU: the worker is uid 0 without capabilities, so torch's CUDA IPC "
                       "reference counters, 0600 files in /dev/shm, stay usable; it can write root-owned "
                       "objects in /dev/shm; FORENSICS_SANDBOX_UID forces a uid)")
    cg = None
    if "cgroup" not in pol.skip:
        cg = Cgroup(f"forensics-replay-{os.getpid()}-{scratch.sha256[:8]}-{time.monotonic_ns()}", pol.mem, pol.nproc)
        if not cg.ok:
            missing.append(f"cgroup ({cg.why or 'not available'})"
                           + ("; the parent's memory watch polls the ceiling instead" if "memwatch" not in pol.skip else ""))
            cg = None
    hide_all = list(dict.fromkeys([*(hide or []), *pol.hide, os.path.expanduser("~"), _project_root()]))
    fs = None if "fs" in pol.skip else plan_fs(str(scratch.fsroot), scratch, python, device, pol.mem, uid, hide_all, env)
    cfg = {
        "v": 1, "mode": pol.mode, "ppid": os.getpid(), "report_fd": report_fd, "keep_fds": list(req_fds),
        "python": python, "argv": argv, "cwd": str(scratch.sol_dir), "env": env, "uid": uid,
        "ns": {k: k not in pol.skip for k in ("net", "pid", "ipc", "uts")}, "fs": fs,
        "rlimits": {} if "rlimits" in pol.skip else pol.rlimits(),
        "seccomp": "seccomp" not in pol.skip, "cgroup_procs": cg.procs_files() if cg else [],
        "cgroup": {"version": cg.version, "memory_max": pol.mem, "pids_max": pol.nproc} if cg else None,
        "missing": missing + [f"{s} (FORENSICS_SANDBOX_SKIP)" for s in sorted(pol.skip)],
        "mem_ceiling": pol.mem, "machine_mem": pol.machine_mem,
        # no kernel ceiling: the runner's proctree.MemoryWatch polls the child's memory instead
        "memwatch": cg is None and "memwatch" not in pol.skip,
    }
    return cfg, cg


def _project_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def summary(report: dict | None) -> str:
    """One line: the layers in force and the ones missing."""
    if not report:
        return "no sandbox report"
    if report.get("off"):
        return "sandbox off (FORENSICS_SANDBOX=off): " + "; ".join(report.get("missing", []))
    on = [k for k in ("net", "pid", "ipc", "uts") if report.get(k)]
    if report.get("fs") not in (None, "none"):
        on.append(f"fs={report['fs']}")
    if report.get("uid") is not None:
        on.append(f"uid={report['uid']}")
    if report.get("seccomp"):
        on.append("seccomp")
    if report.get("cgroup"):
        on.append(f"cgroup v{report['cgroup'].get('version')} mem={report['cgroup'].get('memory_max', 0) / 2**30:.1f}GiB")
    if report.get("memory_watch"):
        on.append(f"memory-watch mem={report['memory_watch'].get('ceiling', 0) / 2**30:.1f}GiB")
    rl = report.get("rlimits") or {}
    if rl:
        on.append("rlimits " + ",".join(sorted(rl)))
    s = "sandbox: " + " ".join(on)
    if report.get("missing"):
        s += "; missing: " + "; ".join(report["missing"])
    return s


def off_report() -> dict:
    return {"off": True, "net": False, "pid": False, "ipc": False, "uts": False, "fs": "none", "proc": "host",
            "uid": None, "seccomp": False, "cgroup": None, "rlimits": {}, "no_new_privs": False,
            "missing": ["every layer (FORENSICS_SANDBOX=off): the child is a plain process of this user"]}


# ---------------------------------------------------------------------------------- child side
class _Report:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.d: dict = {"net": False, "pid": False, "ipc": False, "uts": False, "fs": "none", "proc": "host",
                        "uid": None, "caps": "kept", "no_new_privs": False, "seccomp": False,
                        "cgroup": None, "rlimits": {}, "missing": list(cfg.get("missing", [])), "errors": []}

    def miss(self, what: str, e: BaseException | str | None = None) -> None:
        self.d["missing"].append(what + (f" ({e})" if e else ""))

    def write(self) -> None:
        fd = self.cfg["report_fd"]
        try:
            os.write(fd, (json.dumps(self.d) + "\n").encode())
        except OSError:
            pass


def _die(rep: _Report, msg: str, code: int = 70) -> None:
    rep.d["errors"].append(msg)
    rep.d["refused"] = True
    rep.write()
    sys.stderr.write(f"forensics sandbox: {msg}\n")
    sys.stderr.flush()
    os._exit(code)


def _mkdirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def _mk_target(src: str, dst: str) -> None:
    if os.path.isdir(src):
        _mkdirs(dst)
    else:
        _mkdirs(os.path.dirname(dst))
        if not os.path.exists(dst):
            with open(dst, "wb"):
                pass


_ST2MS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
          (getattr(os, "ST_NOATIME", 1024), MS_NOATIME), (getattr(os, "ST_NODIRATIME", 2048), MS_NODIRATIME),
          (getattr(os, "ST_RELATIME", 4096), MS_RELATIME))


def _remount_ro(dst: str, recursive: bool) -> None:
    """Read-only: the bind itself and, for a recursive bind, every mount under it (a driver
    library the container runtime bound into /usr/lib as its own mount, /etc/hosts ...)."""
    points = [dst]
    if recursive:
        points += [m["point"] for m in _mountinfo() if m["point"] != dst and _under(m["point"], dst)]
    for p in points:
        try:
            fl = os.statvfs(p).f_flag
        except OSError:
            continue
        keep = 0
        for st, ms in _ST2MS:
            if fl & st:
                keep |= ms
        try:
            _mount(None, p, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | keep)
        except OSError:
            if p == dst:
                raise


def _build_fs(fs: dict, rep: _Report) -> None:
    """In a new mount namespace, as root: a tmpfs root holding only the planned mounts, then pivot_root."""
    R = fs["root"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", R, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    proc_ok = False
    for kind, path, opt in fs["mounts"]:
        dst = R + path
        try:
            if kind == "symlink":
                _mkdirs(os.path.dirname(dst))
                if not os.path.lexists(dst):
                    os.symlink(opt["target"], dst)
            elif kind in ("ro", "ro1", "rw", "dev"):
                if not os.path.exists(path):
                    continue
                _mk_target(path, dst)
                rec = MS_REC if kind != "ro1" else 0
                _mount(path, dst, None, MS_BIND | rec)
                if kind in ("ro", "ro1"):
                    _remount_ro(dst, kind == "ro")
                elif kind == "rw":
                    _mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)
            elif kind == "tmpfs":
                _mkdirs(dst)
                data = f"mode={opt.get('mode', '0755')},size={int(opt.get('size', 2**20))}"
                if "uid" in opt:
                    data += f",uid={opt['uid']},gid={opt['gid']}"
                flags = MS_NOSUID | (0 if opt.get("dev") else MS_NODEV)
                _mount("tmpfs", dst, "tmpfs", flags, data)
                for sub in opt.get("mkdir", []):
                    os.mkdir(os.path.join(dst, sub), 0o700)
                    if "uid" in opt:
                        os.chown(os.path.join(dst, sub), opt["uid"], opt["gid"])
            elif kind == "proc":
                _mkdirs(dst)
                try:
                    _mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
                    proc_ok = True
                except OSError as e:
                    rep.miss("private /proc", e)
                if proc_ok:
                    _harden_proc(dst, rep)
            elif kind == "mask":
                if os.path.exists(dst):   # root-owned, 0555: nothing for the worker to see or write
                    _mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=64k")
        except OSError as e:
            if kind in ("ro", "rw", "tmpfs", "symlink") and not path.startswith(("/dev/", "/var/", "/run")):
                raise
            rep.d["errors"].append(f"{kind} {path}: {e}")
    old = os.path.join(R, ".old")
    os.mkdir(old)
    os.chdir(R)
    try:
        _check(_lib().syscall(_NR.get(os.uname().machine, _NR["x86_64"])["pivot_root"], b".", b".old"), "pivot_root")
        _check(_lib().umount2(b"/.old", MNT_DETACH), "umount old root")
        os.rmdir("/.old")
    except OSError:
        # a root that cannot be pivoted (initramfs): move the new root over / and chroot
        os.rmdir(old)
        _mount(R, "/", None, MS_MOVE)
        os.chroot(".")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    rep.d["fs"] = "bind-ro"
    rep.d["proc"] = "private" if proc_ok else "none"
    rep.d["gpu_devices"] = fs.get("gpu_devices", [])


# As container runtimes do: host-wide knobs read-only, kernel internals hidden (a worker that is
# uid 0 without capabilities still passes the owner's permission bits on these files).
PROC_RO = ("sys", "sysrq-trigger", "irq", "bus", "fs")
PROC_MASK = ("kcore", "keys", "timer_list", "sched_debug", "latency_stats", "acpi", "scsi", "asound", "kmsg")


def _harden_proc(proc: str, rep: _Report) -> None:
    for n in PROC_RO:
        p = os.path.join(proc, n)
        if os.path.exists(p):
            try:
                _mount(p, p, None, MS_BIND | MS_REC)
                _remount_ro(p, True)
            except OSError as e:
                rep.d["errors"].append(f"/proc/{n} read-only: {e}")
    for n in PROC_MASK:
        p = os.path.join(proc, n)
        if not os.path.exists(p):
            continue
        try:
            if os.path.isdir(p):
                _mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0555")
            else:
                _mount("/dev/null", p, None, MS_BIND)
        except OSError as e:
            rep.d["errors"].append(f"/proc/{n} masked: {e}")


def _lo_up() -> None:
    import fcntl
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, ifr))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))
    finally:
        s.close()


#: CPU seconds between RLIMIT_CPU's SIGXCPU and the kernel's SIGKILL
CPU_GRACE_S = 30


def _apply_rlimits(rl: dict, rep: _Report) -> None:
    names = {"as": resource.RLIMIT_AS, "nproc": resource.RLIMIT_NPROC, "nofile": resource.RLIMIT_NOFILE,
             "cpu": resource.RLIMIT_CPU, "fsize": resource.RLIMIT_FSIZE, "core": resource.RLIMIT_CORE}
    for k, v in rl.items():
        try:
            soft, hard = resource.getrlimit(names[k])
            v = int(v) if hard == resource.RLIM_INFINITY else min(int(v), hard)
            # CPU time: SIGXCPU at the limit, which the parent can name (at soft == hard the kernel
            # sends SIGKILL, which says nothing), and SIGKILL CPU_GRACE_S later if that is caught
            top = v if k != "cpu" else (v + CPU_GRACE_S if hard == resource.RLIM_INFINITY else max(v, hard))
            resource.setrlimit(names[k], (v, top))
            rep.d["rlimits"][k] = v
        except (OSError, ValueError) as e:
            rep.miss(f"RLIMIT_{k.upper()}", e)


def _drop_privileges(uid: int | None, userns: bool, rep: _Report) -> None:
    libc = _lib()
    last = int((_read("/proc/sys/kernel/cap_last_cap") or "40").strip() or 40)
    for cap in range(last + 1):
        try:
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            pass
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        rep.d["uid"] = uid
    else:
        # the parent is not root: a user namespace's root (or the user itself) without capabilities
        try:
            _prctl(PR_SET_SECUREBITS, 0x2F)   # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off, all locked
        except OSError:
            pass
        hdr = struct.pack("Ii", 0x20080522, 0)
        data = b"\0" * 24
        _check(libc.capset(ctypes.c_char_p(hdr), ctypes.c_char_p(data)), "capset")
        rep.d["uid"] = os.getuid()
        rep.d["userns"] = userns
    caps = (_read("/proc/self/status") or "")
    eff = [ln.split()[1] for ln in caps.splitlines() if ln.startswith(("CapEff:", "CapPrm:"))]
    rep.d["caps"] = "none" if eff and all(int(x, 16) == 0 for x in eff) else "kept"
    if rep.d["caps"] != "none":
        rep.miss("capabilities not dropped")


def _seccomp(rep: _Report) -> None:
    prog = seccomp_program(os.uname().machine)
    if prog is None:
        rep.miss(f"seccomp (no syscall table for {os.uname().machine})")
        return
    buf = b"".join(struct.pack("HBBI", c, jt, jf, k) for c, jt, jf, k in prog)
    arr = ctypes.create_string_buffer(buf, len(buf))
    fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(arr))
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fbuf))
    rep.d["seccomp"] = (f"deny-list ({len(_DENY) + 2} syscalls; socket families other than "
                        f"{', '.join(map(str, SOCKET_FAMILIES))} refused)")


def _worker(cfg: dict, rep: _Report, userns: bool) -> None:
    """Last process before the solution's interpreter: limits, identity, filter, exec."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _apply_rlimits(cfg.get("rlimits") or {}, rep)
        if cfg.get("uid") is not None or userns or os.geteuid() == 0:
            try:
                _drop_privileges(cfg.get("uid"), userns, rep)
            except OSError as e:
                rep.miss("unprivileged identity", e)
        try:
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
            rep.d["no_new_privs"] = True
        except OSError as e:
            rep.miss("no_new_privs", e)
        if cfg.get("seccomp"):
            try:
                _seccomp(rep)
            except OSError as e:
                rep.miss("seccomp", e)
        os.chdir(cfg["cwd"])
    except BaseException as e:  # noqa: BLE001 - reported, then the child refuses to run
        _die(rep, f"sandbox setup failed: {type(e).__name__}: {e}")
    if cfg.get("mode") == "strict" and rep.d["missing"]:
        _die(rep, "strict sandbox: layers missing: " + "; ".join(rep.d["missing"]), 71)
    rep.write()
    os.close(cfg["report_fd"])
    env = dict(cfg["env"])
    try:
        os.execve(cfg["python"], cfg["argv"], env)
    except OSError as e:
        sys.stderr.write(f"forensics sandbox: exec {cfg['python']}: {e}\n")
        os._exit(127)


def _init(cfg: dict, rep: _Report, userns: bool, status_w: int) -> None:
    """PID 1 of the new PID space (or a subreaper without one): filesystem view, then the worker."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _prctl(PR_SET_DUMPABLE, 0)
    except OSError:
        pass
    if os.getpid() != 1:
        try:
            _prctl(PR_SET_CHILD_SUBREAPER, 1)
        except OSError:
            pass
    if cfg.get("fs") and rep.d.get("mnt"):
        try:
            _build_fs(cfg["fs"], rep)
        except OSError as e:
            if cfg.get("mode") == "strict":
                _die(rep, f"filesystem view: {e}", 71)
            rep.miss("fs", e)
            rep.d["fs"] = "none"
    if rep.d["fs"] == "none" and cfg.get("uid") is not None:
        _without_fs_view(cfg, rep)
    if rep.d.get("net_ns"):
        try:
            _lo_up()
        except OSError as e:
            rep.d["errors"].append(f"loopback up: {e}")
    if rep.d.get("uts"):
        try:
            _lib().sethostname(b"replay", 6)
        except OSError:
            pass
    pid = os.fork()
    if pid == 0:
        os.close(status_w)
        _worker(cfg, rep, userns)
        os._exit(127)  # not reached
    os.close(cfg["report_fd"])
    for fd in cfg.get("keep_fds", []):
        try:
            os.close(fd)
        except OSError:
            pass
    status = None
    while True:
        try:
            p, st = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if p == pid:
            status = st
            if os.getpid() == 1:
                break   # returning ends the PID space: the kernel kills what is left in it
            _kill_children()
    if status is None:
        msg = "e:70"
    elif os.WIFSIGNALED(status):
        msg = f"s:{os.WTERMSIG(status)}"
    else:
        msg = f"e:{os.WEXITSTATUS(status)}"
    try:
        os.write(status_w, msg.encode())
    except OSError:
        pass
    os._exit(0)


def _ro_mount(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _reachable(path: str) -> bool:
    """Can any user reach `path` (every directory on the way searchable by others)?"""
    p = os.path.abspath(path)
    while True:
        try:
            if not os.stat(p).st_mode & 0o001 and os.path.isdir(p):
                return False
        except OSError:
            return False
        if p == "/":
            return True
        p = os.path.dirname(p)


def _without_fs_view(cfg: dict, rep: _Report) -> None:
    """No mount namespace: the worker sees the host's files.  An unprivileged uid still keeps it
    from writing what it does not own, but it must reach the interpreter; the build caches move
    into its cwd when their directory is not reachable."""
    if not _reachable(os.path.realpath(cfg["python"])) or not _reachable(cfg["cwd"]):
        why = (f"without a mount namespace uid {cfg['uid']} cannot reach {os.path.realpath(cfg['python'])}")
        # root without capabilities still passes owner checks on root's files: acceptable only
        # where the host's /proc knobs are read-only (as container runtimes leave them), never
        # where it could write /proc/sys or /proc/sysrq-trigger
        if not all(_ro_mount(p) for p in ("/proc/sys", "/proc/sysrq-trigger") if os.path.exists(p)):
            _die(rep, f"the sandbox cannot hold here: {why}, and as root without capabilities it could "
                      f"write /proc/sys and /proc/sysrq-trigger; allow mount namespaces, or install the "
                      f"interpreter where other users can read it", 71)
        rep.miss(f"unprivileged uid ({why}): the worker is root without capabilities and can write "
                 f"root-owned files")
        cfg["uid"] = None
        return
    env = cfg["env"]
    for k, sub in (("TORCH_EXTENSIONS_DIR", "torch_extensions"), ("TRITON_CACHE_DIR", "triton"),
                   ("CUDA_CACHE_PATH", "cuda")):
        if env.get(k) and not _reachable(env[k]):
            d = os.path.join(cfg["cwd"], ".replay-cache", sub)
            os.makedirs(d, exist_ok=True)
            for q in (os.path.dirname(d), d):
                os.chown(q, cfg["uid"], cfg["uid"])
            env[k] = d
            rep.d.setdefault("notes", []).append(f"{k} moved into the scratch (not reachable without a mount namespace)")


def _kill_children() -> None:
    """Without a PID space: orphans of the worker were reparented to us (subreaper); kill them all."""
    me = os.getpid()
    for _ in range(50):
        kids = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                st = _read(f"/proc/{d}/stat") or ""
                rest = st.rpartition(")")[2].split()
                if len(rest) > 1 and rest[1] == str(me):
                    kids.append(int(d))
        if not kids:
            return
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        for _k in kids:
            try:
                os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
        time.sleep(0.01)


def launcher_main() -> None:
    cfg = json.loads(os.environ.pop(CONFIG_ENV))
    rep = _Report(cfg)
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _prctl(PR_SET_DUMPABLE, 0)
    except OSError:
        pass
    if os.getppid() != cfg["ppid"]:
        os._exit(70)   # the replay process is gone already
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for f in cfg.get("cgroup_procs", []):
        try:
            with open(f, "w") as fh:
                fh.write(str(os.getpid()))
        except OSError as e:
            rep.miss(f"cgroup join {f}", e)
            cfg["cgroup"] = None
    rep.d["cgroup"] = cfg.get("cgroup")
    # namespaces: all at once, else one by one (a container may allow some and not others)
    userns = os.geteuid() != 0
    want = [(k, f) for k, f in (("mnt", CLONE_NEWNS), ("pid", CLONE_NEWPID), ("net", CLONE_NEWNET),
                                 ("ipc", CLONE_NEWIPC), ("uts", CLONE_NEWUTS))
            if k == "mnt" and cfg.get("fs") or cfg["ns"].get(k)]
    got: dict[str, bool] = {}
    if userns and want:
        uid, gid = os.geteuid(), os.getegid()
        try:
            _unshare(CLONE_NEWUSER)
            with open("/proc/self/setgroups", "w") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w") as f:
                f.write(f"0 {uid} 1")
            with open("/proc/self/gid_map", "w") as f:
                f.write(f"0 {gid} 1")
            rep.d["userns"] = True
        except OSError as e:
            rep.miss("user namespace (the parent is not root)", e)
    try:
        flags = 0
        for _, f in want:
            flags |= f
        _unshare(flags)
        got = {k: True for k, _ in want}
    except OSError:
        for k, f in want:
            try:
                _unshare(f)
                got[k] = True
            except OSError as e:
                got[k] = False
                rep.miss({"mnt": "fs", "pid": "pid", "net": "net", "ipc": "ipc", "uts": "uts"}[k] + " namespace", e)
    for k in ("net", "pid", "ipc", "uts"):
        rep.d[k] = bool(got.get(k))
        if not cfg["ns"].get(k):
            rep.d[k] = False
    rep.d["mnt"] = bool(got.get("mnt"))
    rep.d["net_ns"] = rep.d["net"]
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(status_r)
        _init(cfg, rep, userns, status_w)
        os._exit(70)
    os.close(status_w)
    os.close(cfg["report_fd"])
    for fd in cfg.get("keep_fds", []):
        try:
            os.close(fd)
        except OSError:
            pass
    while True:
        try:
            os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    msg = b""
    while True:
        chunk = os.read(status_r, 64)
        if not chunk:
            break
        msg += chunk
    kind, _, val = msg.decode().partition(":")
    if kind == "s" and val.isdigit():
        sig = int(val)
        try:
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), sig)
        time.sleep(1)
        os._exit(128 + sig)
    os._exit(int(val) if kind == "e" and val.isdigit() else 70)


def read_report(fd: int, timeout: float) -> dict:
    """The launcher's report: the last JSON line written before the worker's exec (EOF then)."""
    import select
    buf = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
    lines = [ln for ln in buf.decode("utf-8", "replace").splitlines() if ln.strip()]
    if not lines:
        return {"error": "no sandbox report (the launcher died before the worker started)", "missing": ["unknown"]}
    try:
        d = json.loads(lines[-1])
    except ValueError:
        return {"error": f"unreadable sandbox report {lines[-1][:200]!r}", "missing": ["unknown"]}
    for k in ("mnt", "net_ns"):
        d.pop(k, None)
    return d


if __name__ == "__main__":
    if CONFIG_ENV in os.environ:
        launcher_main()
    else:   # the self-check lives beside the runner (forensics.replay.sandbox_check), which imports this file
        sys.exit("run `python -m forensics.replay.sandbox_check [--device cuda] [--json]` for the self-check")
