"""The replay sandbox against the attacks of issue 18 (and issue 21's import path), on the CPU.

A hostile solution is planted in a run folder under tmp; it tries each attack when imported
(every attempt caught, so the replay goes on), then computes top-k honestly and raises in
forward with whatever it got hold of, which would carry a leak into the findings.  Each test
asserts that the thing was not reached (read on this side: files, listener, processes, the
outcome's text) and that the replay still produced its result.  One replay serves the attacks
that need nothing special (module fixture); memory, the import path and the reports of missing
layers have their own.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forensics.replay.api import replay_solution  # noqa: E402
from forensics.replay.probes import Limits  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
HONEST = (REPO / "corpus" / "replay" / "topk_honest.py").read_text()
FAST = Limits(build_s=300, call_s=240, probe_s=300, time_s=120)
RUN_NAME = "20260810_101010_claude_opus_05_topk_bitonic"
N_FORKS = 200

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux namespaces")

HOSTILE = r'''
import ctypes, json, os, socket, sys, time
GOT = []          # what the attacks reached: raised from forward, so a leak reaches the findings
CFG = json.loads(__CFG__)

def attempt(name, fn):
    try:
        r = fn()
        if r:
            GOT.append(f"{name}: {r}")
    except BaseException as e:   # noqa: BLE001 - refused: carry on
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

def write_home():
    p = os.path.join(CFG["home"], "pwned-" + CFG["nonce"])
    open(p, "w").write("x")
    return p

def write_checkout():
    p = os.path.join(CFG["repo"], "pwned-" + CFG["nonce"])
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

def new_namespace():
    libc = ctypes.CDLL(None, use_errno=True)
    got = []
    if libc.unshare(0x40000000) == 0:                   # CLONE_NEWNET
        got.append("a network namespace")
    pid = os.fork()                                     # single-threaded: may ask for a user namespace
    if pid == 0:
        os._exit(0 if libc.unshare(0x10000000) == 0 else 1)   # CLONE_NEWUSER
    if os.waitpid(pid, 0)[1] == 0:
        got.append("a user namespace")
    return " and ".join(got)

attempt("environ", parent_environ)
attempt("run_dir", write_run_dir)
attempt("home", write_home)
attempt("checkout", write_checkout)
attempt("tcp", tcp)
attempt("unix", unix)
attempt("unshare", new_namespace)

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

attempt("fork", fork_many)
'''


def _hostile(cfg: dict) -> str:
    return HOSTILE.replace("__CFG__", repr(json.dumps(cfg))) + "\n" + HONEST.replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        if GOT:\n            raise RuntimeError('reached: ' + ' | '.join(GOT))\n")


def _tree(run: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(run.rglob("*")):
        h.update(str(p.relative_to(run)).encode())
        if p.is_file():
            h.update(p.read_bytes())
            h.update(str(p.stat().st_mtime_ns).encode())
    return h.hexdigest()


def _procs_with(marker: str) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                if marker.encode() in Path(f"/proc/{d}/cmdline").read_bytes():
                    out.append(int(d))
            except OSError:
                pass
    return out


class _Listener:
    """A TCP listener on 127.0.0.1 and a unix socket, recording every connection."""

    def __init__(self, unix_path: Path) -> None:
        self.got: list[str] = []
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.port = self.tcp.getsockname()[1]
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(str(unix_path))
        os.chmod(unix_path, 0o777)
        self.unix.listen(8)
        self.stop = False
        self.threads = [threading.Thread(target=self._serve, args=(s, n), daemon=True)
                        for s, n in ((self.tcp, "tcp"), (self.unix, "unix"))]
        for t in self.threads:
            t.start()

    def _serve(self, s: socket.socket, name: str) -> None:
        s.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = s.accept()
            except OSError:
                continue
            self.got.append(name)
            c.close()

    def close(self) -> None:
        self.stop = True
        for t in self.threads:
            t.join(2)
        self.tcp.close()
        self.unix.close()


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attack")
    home = tmp / "home"
    home.mkdir()
    run = tmp / "runs" / RUN_NAME
    (run / "scratch").mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"problem": "05_topk_bitonic"}))
    (run / "scratch" / "notes.txt").write_text("agent notes")
    listener = _Listener(tmp / "listener.sock")
    nonce, secret = uuid.uuid4().hex, uuid.uuid4().hex
    secrets = {"FORENSICS_PLANTED_TOKEN": "tok-" + secret, "AWS_SECRET_ACCESS_KEY": "aws-" + secret,
               "KBH_API_KEY": "kbh-" + secret, "DATABASE_PASSWORD": "db-" + secret, "PLAIN_VALUE": "plain-" + secret}
    # the attacker knows the run folder (the found it in the parent's /proc/<ppid>/cmdline)
    cfg = {"run_dir": str(run), "home": str(home), "repo": str(REPO), "port": listener.port,
           "unix": str(tmp / "listener.sock"), "nonce": nonce, "nonces": [secret], "forks": N_FORKS}
    src = _hostile(cfg)
    (run / "solution.py").write_text(src)
    sha = hashlib.sha256(src.encode()).hexdigest()
    before = _tree(run)
    # the replay process is started with the secrets in its environment (/proc/<pid>/environ
    # shows a process's environment as it was exec'd), as the CLI is from a user's shell
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(REPO), **secrets)
    prog = ("import json, sys\nfrom pathlib import Path\nfrom forensics.replay.api import replay_run_dir\n"
            "from forensics.replay.probes import Limits\n"
            f"out = replay_run_dir({str(run)!r}, device='cpu', shapes='tiny', probes=['check'], seeds=(42,), "
            f"limits=Limits(build_s=300, call_s=240, probe_s=300, time_s=120), cache_root=Path({str(tmp / 'cache')!r}))\n"
            f"json.dump({{'rows': out.rows, 'findings': out.findings, 'info': out.info, 'status': out.status()}}, "
            f"open({str(tmp / 'out.json')!r}, 'w'), default=str)\n")
    try:
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=600)
        wall = time.monotonic() - t0
        assert p.returncode == 0, p.stderr[-3000:]
        out = json.loads((tmp / "out.json").read_text())
        time.sleep(0.5)
        survivors = _procs_with(f"replay-{sha[:12]}")
    finally:
        listener.close()
    text = json.dumps(out, default=str)
    reached = text[text.index("reached: "):][:4000] if "reached: " in text else ""
    yield dict(out=out, run=run, before=before, after=_tree(run), home=home, nonce=nonce, secret=secret,
               listener=listener.got, survivors=survivors, wall=wall, text=text, reached=reached)
    for pid in survivors:   # the code before the sandbox leaves them running
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for p in (REPO / f"pwned-{nonce}",):
        p.unlink(missing_ok=True)


def _text(out) -> str:
    return json.dumps({"rows": out.rows, "findings": out.findings, "info": out.info}, default=str)


def test_hostile_replay_still_produces_its_result(attacked):
    out = attacked["out"]
    assert out["status"] == "pass", [(r["probe"], r["status"], (r["detail"] or "")[:500]) for r in out["rows"]]
    assert [r["status"] for r in out["rows"] if r["probe"] == "check"] == ["pass"]


def test_archived_run_folder_is_not_reachable(attacked):
    assert "run_dir:" not in attacked["reached"]
    assert attacked["after"] == attacked["before"]
    assert not (attacked["run"] / "pwned.txt").exists()
    assert "PWNED-" + attacked["nonce"] not in (attacked["run"] / "solution.py").read_text()


def test_home_and_checkout_are_not_writable(attacked):
    assert "home:" not in attacked["reached"] and "checkout:" not in attacked["reached"]
    assert not list(attacked["home"].iterdir())
    assert not (REPO / f"pwned-{attacked['nonce']}").exists()


def test_parent_environment_never_reaches_the_outcome(attacked):
    # /proc/<ppid>/environ: planted secrets must appear nowhere (findings, rows, info)
    assert "environ:" not in attacked["reached"]
    assert attacked["secret"] not in attacked["text"]


def test_no_network_to_a_local_listener(attacked):
    assert "tcp:" not in attacked["reached"] and "unix:" not in attacked["reached"]
    assert attacked["listener"] == []


def test_no_new_namespaces_from_inside(attacked):
    # seccomp: unshare(CLONE_NEWUSER | CLONE_NEWNET) is refused (an unprivileged user namespace
    # would hand the solution capabilities over new namespaces and much kernel surface)
    assert "unshare:" not in attacked["reached"]


def test_nothing_outlives_the_replay(attacked):
    assert attacked["survivors"] == []


def test_the_replay_reports_the_layers_in_force(attacked):
    sb = attacked["out"]["info"]["sandbox"]
    assert sb["net"] and sb["pid"] and sb["fs"] == "bind-ro" and sb["proc"] == "private"
    assert sb["uid"] not in (None, 0) and sb["caps"] == "none" and sb["no_new_privs"] is True
    assert sb["seccomp"] and {"nproc", "nofile", "cpu", "as"} <= set(sb["rlimits"])
    assert sb["missing"] == [] or "replay-sandbox-partial" in {f["rule"] for f in attacked["out"]["findings"]}


# ------------------------------------------------------------------------------ memory
MEMORY_HOG = r'''
import sys, torch
GOT = []
chunks, total = [], 0
try:
    while total < 4 * 2**30:
        t = torch.empty(128 * 2**20, dtype=torch.uint8)
        t.fill_(1)                      # touched: resident, not just reserved
        chunks.append(t)
        total += t.numel()
    GOT.append(f"allocated {total >> 20} MiB")
except (MemoryError, RuntimeError) as e:
    print(f"allocation refused after {total >> 20} MiB: {e}", file=sys.stderr)
del chunks
'''


@pytest.mark.parametrize("skip", ["", "cgroup"], ids=["cgroup-or-as", "as-only"])
def test_memory_is_bounded_by_the_sandbox_ceiling(tmp_path, monkeypatch, skip):
    monkeypatch.setenv("FORENSICS_REPLAY_MEM", "1G")
    if skip:   # a machine without a writable cgroup tree: RLIMIT_AS alone
        monkeypatch.setenv("FORENSICS_SANDBOX_SKIP", skip)
    src = MEMORY_HOG + "\n" + HONEST.replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        if GOT:\n            raise RuntimeError('reached: ' + ' | '.join(GOT))\n")
    out = replay_solution("05_topk_bitonic", src.encode(), device="cpu", shapes="tiny", probes=["check"],
                          seeds=(42,), limits=FAST, cache_root=tmp_path / "cache")
    text = _text(out)
    assert "reached: allocated" not in text
    sb = out.info["sandbox"]
    if out.status() == "crash":   # the cgroup's OOM killer took the worker: said so
        assert sb["oom_kill"] >= 1
        assert any("memory ceiling (1.0 GiB)" in f["message"] for f in out.findings), out.findings
    else:                         # RLIMIT_AS refused the allocation; the solution went on honestly
        assert out.status() == "pass", out.rows
        assert sb["rlimits"]["as"] < 3 * 2**30
    assert sb["cgroup"] is None or sb["cgroup"]["memory_max"] == 2**30
    if skip:
        assert out.status() == "pass" and sb["cgroup"] is None


# ------------------------------------------------------------------------------ import path (issue 21)
IMPORTS = r'''
import os
GOT = []
for name in ("kernels", "forensics"):
    try:
        m = __import__(name)
        GOT.append(f"{name} from {getattr(m, '__file__', None) or list(getattr(m, '__path__', []))}")
    except ImportError:
        pass
from mykernels import build      # the solution's own sidecar package still imports
assert build.MARK == "sidecar"
'''

FINDER = r'''
import importlib.util, sys
MAPPING = {"forensics": %r, "kernels": %r}
class _EditableFinder:   # the shape of setuptools' editable finder
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname in MAPPING:
            return importlib.util.spec_from_file_location(fullname, MAPPING[fullname] + "/__init__.py",
                                                          submodule_search_locations=[MAPPING[fullname]])
        return None
def install():
    sys.meta_path.append(_EditableFinder)
'''


def _editable_venv(tmp_path: Path, legacy: bool) -> str:
    """A venv that sees this interpreter's packages and has the tool installed editable: a .pth
    naming the checkout (legacy) or setuptools' finder form."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    if legacy:
        (site / "__editable__.forensics-0.1.pth").write_text(str(REPO) + "\n")
    else:
        (site / "__editable___forensics_0_1_finder.py").write_text(FINDER % (str(REPO / "forensics"), str(REPO / "kernels")))
        (site / "__editable__.forensics-0.1.pth").write_text(
            "import __editable___forensics_0_1_finder; __editable___forensics_0_1_finder.install()\n")
    py = venv / "bin" / "python"
    probe = subprocess.run([str(py), "-c", "import kernels, forensics; print(kernels.__file__)"], capture_output=True,
                           text=True, env={"PATH": os.environ.get("PATH", "")})
    assert probe.returncode == 0 and str(REPO) in probe.stdout, probe.stderr   # the install works outside
    return str(py)


@pytest.mark.parametrize("legacy,skip", [(True, ""), (False, ""), (True, "fs")], ids=["pth", "finder", "pth-no-fs"])
def test_child_import_path_holds_only_scratch_and_reference(tmp_path, monkeypatch, legacy, skip):
    if skip:   # the worker's own confinement, without the filesystem view hiding the checkout
        monkeypatch.setenv("FORENSICS_SANDBOX_SKIP", skip)
    py = _editable_venv(tmp_path, legacy)
    src = IMPORTS + "\n" + HONEST.replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        if GOT:\n            raise RuntimeError('reached: ' + ' | '.join(GOT))\n")
    side = {"mykernels/__init__.py": b"", "mykernels/build.py": b"MARK = 'sidecar'\n"}
    out = replay_solution("05_topk_bitonic", src.encode(), side, device="cpu", shapes="tiny", probes=["check"],
                          seeds=(42,), limits=FAST, cache_root=tmp_path / "cache", python=py)
    assert "reached:" not in _text(out), [f["message"][:300] for f in out.findings]
    assert out.status() == "pass", [(r["status"], (r["detail"] or "")[:300]) for r in out.rows]


# ------------------------------------------------------------------------------ missing layers
def test_missing_layers_are_reported_never_pretended(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_SANDBOX_SKIP", "net,pid")
    out = replay_solution("05_topk_bitonic", HONEST.encode(), device="cpu", shapes="tiny", probes=["check"],
                          seeds=(42,), limits=FAST, cache_root=tmp_path / "cache")
    assert out.status() == "pass"
    sb = out.info["sandbox"]
    assert sb["net"] is False and sb["pid"] is False and sb["fs"] == "bind-ro"
    assert {"net (FORENSICS_SANDBOX_SKIP)", "pid (FORENSICS_SANDBOX_SKIP)"} <= set(sb["missing"])
    f = [f for f in out.findings if f["rule"] == "replay-sandbox-partial"]
    assert f and "net (FORENSICS_SANDBOX_SKIP)" in f[0]["message"] and f[0]["severity"] == "info"


def test_sandbox_off_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_SANDBOX", "off")
    out = replay_solution("05_topk_bitonic", HONEST.encode(), device="cpu", shapes="tiny", probes=["check"],
                          seeds=(42,), limits=FAST, cache_root=tmp_path / "cache")
    assert out.status() == "pass"
    assert out.info["sandbox"]["off"] is True and out.info["sandbox"]["missing"]
    assert "replay-sandbox-partial" in {f["rule"] for f in out.findings}


def test_strict_mode_refuses_a_partial_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_SANDBOX", "strict")
    monkeypatch.setenv("FORENSICS_SANDBOX_SKIP", "seccomp")
    out = replay_solution("05_topk_bitonic", HONEST.encode(), device="cpu", shapes="tiny", probes=["check"],
                          seeds=(42,), limits=FAST, cache_root=tmp_path / "cache")
    assert out.status() != "pass"
    assert any("sandbox refused" in (r["detail"] or "") or "sandbox refused" in json.dumps(r.get("data"))
               for r in out.rows) or any("sandbox refused" in f["message"] for f in out.findings), out.findings


def test_seccomp_program_jumps_stay_inside():
    from forensics.replay.sandbox import seccomp_program
    for arch in ("x86_64", "aarch64"):
        prog = seccomp_program(arch)
        assert prog and len(prog) < 256
        for i, (code, jt, jf, k) in enumerate(prog):
            if code & 0x07 == 0x05:   # BPF_JMP
                assert i + 1 + jt < len(prog) and i + 1 + jf < len(prog)
        assert prog[-3][0] == 0x06 and prog[-3][3] == 0x7FFF0000   # allow, then EPERM, ENOSYS
    assert seccomp_program("riscv64") is None
