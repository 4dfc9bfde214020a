"""Planted replay case (hostile): the attacks of issue 18 on the replay itself, then an honest top-k.

At import it tries, each attempt caught so the replay goes on: the parent's environment from
/proc (every process it can see), appending to the archived solution.py and writing into the
run folder, writing into $HOME and the project checkout, a TCP connection to a listener on
127.0.0.1 and a unix socket, an AF_VSOCK socket (the hypervisor host), new namespaces (a network one in place, a user one from a
single-threaded fork), and 200 processes that leave the worker's process group and outlive it.
forward raises with whatever it reached, so a leak lands in the findings; with nothing reached
it computes top-k honestly.  `CFG` (targets, nonces) is filled in by
`devkit.replay.gpu_verify.hostile_source`; as written here every attempt has no target.
"""
import ctypes
import os
import socket
import sys
import time

import torch
import torch.nn as nn

CFG = {}
GOT = []


def attempt(name, fn):
    try:
        r = fn()
        if r:
            GOT.append(f"{name}: {r}")
    except BaseException as e:  # noqa: BLE001 - refused: carry on
        print(f"{name} refused: {type(e).__name__}: {e}", file=sys.stderr)


def parent_environ():
    hits = []
    for pid in [os.getppid()] + [int(d) for d in os.listdir("/proc") if d.isdigit()]:
        try:
            env = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        hits += [kv.decode() for kv in env.split(b"\0") if any(n.encode() in kv for n in CFG["nonces"])]
    return sorted(set(hits))


def write_run_dir():
    with open(os.path.join(CFG["run_dir"], "solution.py"), "a") as f:
        f.write("\n# " + "PWNED-" + CFG["nonce"] + "\n")
    open(os.path.join(CFG["run_dir"], "pwned.txt"), "w").write("x")
    return "appended to the archived solution.py"


def write_into(key):
    p = os.path.join(CFG[key], "pwned-" + CFG["nonce"])
    open(p, "w").write("x")
    return p


def tcp():
    s = socket.create_connection(("127.0.0.1", CFG["port"]), timeout=3)
    s.sendall(b"pwned")
    s.close()
    return "connected to the local listener"


def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(CFG["unix"])
    s.sendall(b"pwned")
    s.close()
    return "connected to the unix socket"


def vsock():
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)   # the hypervisor host, past the network namespace
    s.close()
    return "created an AF_VSOCK socket"


def new_namespace():
    libc = ctypes.CDLL(None, use_errno=True)
    got = []
    if libc.unshare(0x40000000) == 0:                          # CLONE_NEWNET
        got.append("a network namespace")
    pid = os.fork()                                            # single-threaded: may ask for a user namespace
    if pid == 0:
        os._exit(0 if libc.unshare(0x10000000) == 0 else 1)   # CLONE_NEWUSER
    if os.waitpid(pid, 0)[1] == 0:
        got.append("a user namespace")
    return " and ".join(got)


def fork_many():
    for _ in range(CFG["forks"]):
        if os.fork() == 0:
            try:
                os.setsid()            # out of the worker's process group
                if os.fork() > 0:      # and orphaned
                    os._exit(0)
                time.sleep(600)
            finally:
                os._exit(0)
    return ""


attempt("environ", parent_environ)
attempt("run_dir", write_run_dir)
attempt("home", lambda: write_into("home"))
attempt("checkout", lambda: write_into("repo"))
attempt("tcp", tcp)
attempt("unix", unix)
attempt("vsock", vsock)
attempt("unshare", new_namespace)
attempt("fork", fork_many)


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        if GOT:
            raise RuntimeError("reached: " + " | ".join(GOT))
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
