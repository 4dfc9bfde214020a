"""The replay sandbox against the attacks of issue 18 (and issue 21's import path), on the CPU.

corpus/replay/sandbox_hostile.py is planted in a run folder under tmp; it tries each attack when
imported (every attempt caught, so the replay goes on), then computes top-k honestly and raises
in forward with whatever it got hold of, which would carry a leak into the findings.  Each test
asserts that the thing was not reached (read on this side: files, listener, processes, the
outcome's text) and that the replay still produced its result.  One replay serves those attacks
(module fixture, `gpu_verify.attack_replay`, which the H200 check runs too); memory
(sandbox_memory.py), the import path and the reports of missing layers have their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forensics.replay.api import replay_solution  # noqa: E402
from devkit.replay.gpu_verify import attack_replay, memory_replay  # noqa: E402
from forensics.replay.outcome import Limits  # noqa: E402
from conftest import make_venv  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
HONEST = (REPO / "corpus" / "replay" / "topk_honest.py").read_text()
FAST = Limits(build_s=300, call_s=240, probe_s=300, time_s=120)
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux namespaces")


def _honest_unless(prelude: str) -> str:
    """`prelude` (which fills GOT with what it reached) + the honest top-k, raising with GOT."""
    return prelude + "\n" + HONEST.replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        if GOT:\n            raise RuntimeError('reached: ' + ' | '.join(GOT))\n")


def _text(out) -> str:
    return json.dumps({"rows": out.rows, "findings": out.findings, "info": out.info}, default=str)


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    # corpus/replay/sandbox_hostile.py in a run folder, replayed by a process holding planted secrets
    return attack_replay(tmp_path_factory.mktemp("attack"), device="cpu", shapes="tiny", forks=200)


def test_hostile_replay_still_produces_its_result(attacked):
    out = attacked["out"]
    assert out["status"] == "pass", [(r["probe"], r["status"], (r["detail"] or "")[:500]) for r in out["rows"]]
    assert attacked["checks"]["replay_result"]


def test_archived_run_folder_is_not_reachable(attacked):
    assert "run_dir:" not in attacked["reached"]
    assert attacked["after"] == attacked["before"]
    run = Path(attacked["run"])
    assert not (run / "pwned.txt").exists()
    assert "PWNED-" + attacked["nonce"] not in (run / "solution.py").read_text()


def test_home_and_checkout_are_not_writable(attacked):
    assert "home:" not in attacked["reached"] and "checkout:" not in attacked["reached"]
    assert attacked["home_files"] == []
    assert attacked["checks"]["checkout_untouched"]


def test_parent_environment_never_reaches_the_outcome(attacked):
    # /proc/<ppid>/environ: planted secrets must appear nowhere (findings, rows, info)
    assert "environ:" not in attacked["reached"]
    assert attacked["secret"] not in attacked["text"]


def test_no_network_to_a_local_listener(attacked):
    assert "tcp:" not in attacked["reached"] and "unix:" not in attacked["reached"]
    assert attacked["listener"] == []


def test_no_vsock_socket_from_inside(attacked):
    # AF_VSOCK reaches the hypervisor host past the network namespace (issue 36): refused by seccomp
    assert "vsock:" not in attacked["reached"]


def test_no_new_namespaces_from_inside(attacked):
    # seccomp: unshare(CLONE_NEWUSER) from a fork is refused (an unprivileged user namespace would
    # hand the solution capabilities over new namespaces and much kernel surface)
    assert "unshare:" not in attacked["reached"]


def test_nothing_outlives_the_replay(attacked):
    assert attacked["survivors"] == 0


def test_the_replay_reports_the_layers_in_force(attacked):
    sb = attacked["out"]["info"]["sandbox"]
    assert sb["net"] and sb["pid"] and sb["fs"] == "bind-ro" and sb["proc"] == "private"
    assert sb["uid"] not in (None, 0) and sb["caps"] == "none" and sb["no_new_privs"] is True
    assert sb["seccomp"] and {"nproc", "nofile", "cpu", "as"} <= set(sb["rlimits"])
    assert sb["missing"] == [] or "replay-sandbox-partial" in {f["rule"] for f in attacked["out"]["findings"]}


# ------------------------------------------------------------------------------ memory
@pytest.mark.parametrize("skip", ["", "cgroup,memwatch", "rlimits"], ids=["cgroup-or-as", "as-only", "cgroup-or-watch"])
def test_memory_is_bounded_by_the_sandbox_ceiling(tmp_path, monkeypatch, skip):
    # corpus/replay/sandbox_memory.py touches 4 GiB under a 1 GiB ceiling
    if skip:   # a machine without a writable cgroup tree: RLIMIT_AS alone
        monkeypatch.setenv("FORENSICS_SANDBOX_SKIP", skip)
    m = memory_replay(device="cpu", ceiling="1G", alloc=4 * 2**30, cache_root=tmp_path / "cache")
    assert "reached: allocated" not in m["text"]
    sb = m["sandbox"]
    if m["status"] == "crash":   # the cgroup's OOM killer took the worker: said so
        assert sb["oom_kill"] >= 1 and "memory ceiling (1.0 GiB)" in m["text"]
    else:                        # RLIMIT_AS refused the allocation; the solution went on honestly
        assert m["status"] == "pass" and sb["rlimits"]["as"] < 3 * 2**30
    assert m["ok"]
    assert sb["cgroup"] is None or sb["cgroup"]["memory_max"] == 2**30
    if skip == "cgroup,memwatch":
        assert m["status"] == "pass" and sb["cgroup"] is None


def test_without_cgroup_or_address_limit_the_memory_watch_is_the_ceiling(tmp_path, monkeypatch):
    # a GPU host that cannot delegate the memory controller has neither (the H200 under gVisor)
    monkeypatch.setenv("FORENSICS_SANDBOX_SKIP", "cgroup,rlimits")
    m = memory_replay(device="cpu", ceiling="1G", alloc=4 * 2**30, cache_root=tmp_path / "cache")
    assert "reached: allocated" not in m["text"]
    assert m["status"] == "crash" and m["how"] == "killed by the memory watch (no cgroup)", m["how"]
    sb = m["sandbox"]
    assert sb["oom_kill"] == 1 and sb["memory_watch"]["ceiling"] == 2**30
    assert 2**30 < sb["memory_watch"]["fired"] < 4 * 2**30
    assert m["ok"]


def test_the_memory_watch_leaves_a_tree_under_its_ceiling_alone():
    # look-alike: a process whose mapped file pages (libraries, a weight file) far exceed the
    # ceiling, with little private memory, is not killed
    from forensics.replay.proctree import MemoryWatch
    big = max((p for p in Path(torch.__file__).parent.joinpath("lib").glob("*.so*")), key=lambda p: p.stat().st_size)
    assert big.stat().st_size > 128 * 2**20
    code = ("import mmap, sys, time\n"
            "f = open(sys.argv[1], 'rb'); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
            "s = sum(m[i] for i in range(0, len(m), 4096))\n"     # every page resident
            "time.sleep(0.5)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(big)], start_new_session=True)
    w = MemoryWatch(p.pid, ceiling=64 * 2**20, interval=0.05)
    assert p.wait(timeout=60) == 0
    w.stop()
    assert w.fired is None and 0 < w.peak < 64 * 2**20


# ------------------------------------------------------------------------------ import path (issue 21)
IMPORTS = r'''
import os
GOT = []
for name in ("kernels", "forensics", "forensics.kernels"):
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
MAPPING = {"forensics": %r, "forensics.kernels": %r}   # pyproject maps kernels/ to forensics.kernels
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
    make_venv(venv, "--without-pip")
    site = next(venv.glob("lib/python*/site-packages"))
    if legacy:
        (site / "__editable__.forensics-0.1.pth").write_text(str(REPO) + "\n")
    else:
        (site / "__editable___forensics_0_1_finder.py").write_text(FINDER % (str(REPO / "forensics"), str(REPO / "kernels")))
        (site / "__editable__.forensics-0.1.pth").write_text(
            "import __editable___forensics_0_1_finder; __editable___forensics_0_1_finder.install()\n")
    py = venv / "bin" / "python"
    probe = subprocess.run([str(py), "-c", "import forensics.kernels as k; print(k.__path__)"], capture_output=True,
                           text=True, env={"PATH": os.environ.get("PATH", "")})
    assert probe.returncode == 0 and str(REPO) in probe.stdout, probe.stderr   # the install works outside
    return str(py)


@pytest.mark.parametrize("legacy,off", [(True, False), (False, False), (True, True), (False, True)],
                         ids=["pth", "finder", "pth-no-sandbox", "finder-no-sandbox"])
def test_child_import_path_holds_only_scratch_and_reference(tmp_path, monkeypatch, legacy, off):
    if off:   # the worker's own confinement, without the filesystem view hiding the checkout
        monkeypatch.setenv("FORENSICS_SANDBOX", "off")
    py = _editable_venv(tmp_path, legacy)
    src = _honest_unless(IMPORTS)
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
        assert prog[-4][0] == 0x06 and prog[-4][3] == 0x7FFF0000   # allow, then EPERM, ENOSYS, EAFNOSUPPORT
    assert seccomp_program("riscv64") is None


def _run_bpf(prog, arch: int, nr: int, args: tuple = ()) -> int:
    """A classic-BPF interpreter for the instructions the filter uses, over a seccomp_data."""
    import struct
    words = list(args) + [0] * (6 - len(args))
    data = struct.pack("<iI Q", nr, arch, 0) + b"".join(struct.pack("<Q", a) for a in words)
    a, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:
            a = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x06:
            return k
        else:
            op = code & 0xF0
            hit = {0x10: a == k, 0x30: a >= k, 0x40: bool(a & k)}[op]
            pc += 1 + (jt if hit else jf)


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_socket_families_outside_the_allow_list_are_refused(arch):
    """AF_VSOCK reached the hypervisor host past the network namespace (issue 36): socket() and
    socketpair() of any family but unix, IP and netlink are EAFNOSUPPORT; the allowed ones, other
    syscalls and the denied ones keep their answers."""
    import errno as E

    from forensics.replay.sandbox import _AUDIT_ARCH, _NR, seccomp_program
    prog, a, nr = seccomp_program(arch), _AUDIT_ARCH[arch], _NR[arch]
    refused = 0x00050000 | E.EAFNOSUPPORT
    for sysc in ("socket", "socketpair"):
        assert _run_bpf(prog, a, nr[sysc], (40, 1, 0)) == refused          # AF_VSOCK
        assert _run_bpf(prog, a, nr[sysc], (17, 3, 0)) == refused          # AF_PACKET
        assert _run_bpf(prog, a, nr[sysc], (38, 5, 0)) == refused          # AF_ALG
        for fam in (1, 2, 10, 16):                                          # unix, inet, inet6, netlink
            assert _run_bpf(prog, a, nr[sysc], (fam, 1, 0)) == 0x7FFF0000
    assert _run_bpf(prog, a, nr["mount"]) == 0x00050000 | E.EPERM
    assert _run_bpf(prog, a, 0, (40,)) == 0x7FFF0000                        # read(40, ...): not a socket call
    assert _run_bpf(prog, a, nr["clone"], (0x10000000,)) == 0x00050000 | E.EPERM   # CLONE_NEWUSER


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(), reason="needs root and setpriv")
def test_without_namespaces_it_degrades_or_refuses_never_pretends(tmp_path):
    # a container without CAP_SYS_ADMIN: no namespace can be made
    p = subprocess.run(["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", "--",
                        sys.executable, "-m", "forensics.replay.sandbox_check", "--json"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=300)
    res = json.loads(p.stdout)
    rep = res["report"]
    assert not rep["net"] and not rep["pid"] and rep["fs"] == "none"
    assert any(m.startswith("net namespace") for m in rep["missing"])
    if rep.get("refused"):   # root without capabilities next to a writable /proc/sys: fail closed
        assert "cannot hold here" in rep["errors"][0] and "error" in res["inside"]
    else:                    # an interpreter other users can reach: the unprivileged uid still holds
        assert res["inside"]["uid"] == rep["uid"] != 0 and not res["inside"]["usr_writable"]


# ------------------------------------------------------------------------------ supplied build inputs
def test_supplied_build_dirs_are_bound_even_inside_the_checkout_but_never_a_tree_holding_it(tmp_path):
    """--cutlass-include DIR reaches the child as CPATH/CUTLASS_*; the view binds those directories
    read-only (a CUTLASS carried inside the checkout too: the H200 run's w4a16 replay failed for the
    headers before this), but never the checkout itself or the archive under audit."""
    from forensics.replay import sandbox
    from forensics.replay.runner import Scratch
    root = Path(sandbox._project_root())
    inside = root / "corpus"                     # a directory inside the checkout
    archive = tmp_path / "archive"
    (archive / "run").mkdir(parents=True)
    sc = Scratch(b"x = 1\n", reference_src=None, cache_root=tmp_path / "cache", hide=[str(archive)])
    try:
        env = {"CPATH": f"{inside}:{root}:{archive / 'run'}", "CUTLASS_INCLUDE": str(tmp_path)}
        fs = sandbox.plan_fs(str(sc.fsroot), sc, sys.executable, "cpu", 2**30, None, [str(archive), str(root)], env)
        ro = {m[1] for m in fs["mounts"] if m[0] == "ro"}
        assert str(inside.resolve()) in ro
        assert str(root.resolve()) not in ro and str((archive / "run").resolve()) not in ro
        assert str(tmp_path.resolve()) not in ro     # it holds the archive
    finally:
        sc.cleanup()


# ------------------------------------------------------------------------------ CPU time
def test_a_child_past_its_cpu_time_limit_is_named(tmp_path, monkeypatch):
    """Mechanism: RLIMIT_CPU is set with a hard limit CPU_GRACE_S above the soft one, so the kernel
    sends SIGXCPU at the limit (at soft == hard it sends SIGKILL, and a real Kimi replay on the H100
    died as `signal SIGKILL during new` with no reason), and the crash names the limit.  Look-alike:
    a forward that hangs within the CPU budget is a timeout (the wall limit), not this."""
    from forensics.replay.sandbox import CPU_GRACE_S, Policy
    assert CPU_GRACE_S > 0 and Policy().cpu_s >= 3600
    sol = (REPO / "corpus" / "replay" / "topk_loop.py").read_bytes()
    one = [dict(batch=4, n=512, k=8)]   # one shape: one child to burn
    monkeypatch.setenv("FORENSICS_REPLAY_CPU_S", "12")
    out = replay_solution("05_topk_bitonic", sol, None, device="cpu", shapes="tiny", probes=["check"],
                          limits=Limits(build_s=120, call_s=90, probe_s=120, time_s=60), seeds=(42,),
                          cache_root=tmp_path / "cache", shape_list=one)
    if "cpu" not in out.info["sandbox"].get("rlimits", {}):
        pytest.skip("RLIMIT_CPU could not be set here: " + "; ".join(out.info["sandbox"].get("missing") or []))
    details = " ".join(str(r.get("detail") or "") for r in out.rows)
    assert out.status() == "crash" and "signal SIGXCPU" in details and "RLIMIT_CPU 12 s" in details, details[-1500:]
    monkeypatch.setenv("FORENSICS_REPLAY_CPU_S", "600")
    out = replay_solution("05_topk_bitonic", sol, None, device="cpu", shapes="tiny", probes=["check"],
                          limits=Limits(build_s=20, call_s=3, probe_s=30, time_s=3), seeds=(42,),
                          cache_root=tmp_path / "cache", shape_list=one)
    assert out.status() == "timeout"
