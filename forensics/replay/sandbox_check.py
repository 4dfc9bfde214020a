"""What the replay sandbox holds on this machine, seen from inside: `python -m
forensics.replay.sandbox_check [--device cuda] [--json]` starts a sandboxed interpreter the way a
replay does (forensics.replay.runner's Scratch, forensics.replay.sandbox's plan) and reports what it
could see and touch."""

from __future__ import annotations

import json
import os
import sys
import time

from .runner import Scratch, close_fds
from .sandbox import CONFIG_ENV, IO_ROOT_NAME, _project_root, off_report, plan, read_report, summary

CHECK_SRC = r'''
import json, os, socket, sys
out = {"pid": os.getpid(), "uid": os.getuid(), "ppid": os.getppid()}
out["interfaces"] = [n for _, n in socket.if_nameindex()]
out["procs_visible"] = sorted(int(d) for d in os.listdir("/proc") if d.isdigit()) if os.path.isdir("/proc") else None
out["root_entries"] = sorted(os.listdir("/"))
hidden = json.loads(sys.argv[1])
out["hidden_visible"] = [h for h in hidden if os.path.exists(h)]
try:
    open("/usr/forensics-sandbox-probe", "w").close(); out["usr_writable"] = True
except OSError:
    out["usr_writable"] = False
try:
    open("/proc/sys/vm/drop_caches", "w").close(); out["proc_sys_writable"] = True   # opened, nothing written
except OSError:
    out["proc_sys_writable"] = False
io_root = sys.argv[2]   # the directory every replay's io/ is made in (runner.shared_io_root)
try:
    out["shm_io_visible"] = sorted(os.listdir(io_root))
except OSError:
    out["shm_io_visible"] = []
try:
    s = socket.create_connection(("1.1.1.1", 53), timeout=2); s.close(); out["internet"] = True
except OSError:
    out["internet"] = False
out["cuda"] = None
if os.environ.get("FORENSICS_WORKER_DEVICE", "cpu").startswith("cuda"):
    try:
        import torch
        x = torch.arange(1024, device="cuda", dtype=torch.float32)
        out["cuda"] = {"ok": float(x.sum()) == 523776.0, "gpu": torch.cuda.get_device_name(0)}
    except Exception as e:
        out["cuda"] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
print(json.dumps(out))
'''


def self_check(device: str = "cpu") -> dict:
    """Start a sandboxed interpreter the way a replay does and look at the world from inside."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    sc = Scratch(b"# sandbox self-check\n", cache_root=Path(tempfile.mkdtemp(prefix="sandbox-check-cache-")))
    try:
        (sc.sol_dir / "check.py").write_text(CHECK_SRC)
        hidden = []   # a file that exists in each place the child must not see
        for d in (os.path.expanduser("~"), _project_root()):
            try:
                f = next((os.path.join(d, n) for n in sorted(os.listdir(d)) if os.path.isfile(os.path.join(d, n))), None)
            except OSError:
                f = None
            if f:
                hidden.append(f)
        rep_r, rep_w = os.pipe()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FORENSICS_WORKER_DEVICE": device,
               "HOME": str(sc.home), "TMPDIR": str(sc.home / "tmp")}
        for k in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_VISIBLE_DEVICES"):
            if os.environ.get(k):
                env[k] = os.environ[k]
        argv = [sys.executable, "-s", str(sc.sol_dir / "check.py"), json.dumps(hidden), str(Path("/dev/shm") / IO_ROOT_NAME)]
        cfg, cg = plan(sc, device, sys.executable, (), rep_w, argv, env)
        if cfg is not None:
            sc.prepare_owner(cfg["uid"])
        t0 = time.monotonic()
        if cfg is None:
            p = subprocess.run(argv, env=env, capture_output=True, timeout=300, cwd=sc.sol_dir)
            report = off_report()
        else:
            p = subprocess.run([sys.executable, "-I", "-S", str(sc.harness / "sandbox.py")],
                               env={CONFIG_ENV: json.dumps(cfg), "PATH": env["PATH"]}, capture_output=True,
                               timeout=300, pass_fds=(rep_w,), start_new_session=True)
            os.close(rep_w)
            rep_w = -1
            report = read_report(rep_r, 5)
            if cg is not None:
                report["cgroup_stats"] = cg.stats()
                cg.remove()
        wall = time.monotonic() - t0
        try:
            inside = json.loads(p.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            inside = {"error": p.stdout.decode()[-2000:] + p.stderr.decode()[-2000:], "rc": p.returncode}
        return {"device": device, "report": report, "summary": summary(report), "inside": inside,
                "wall_s": round(wall, 3), "rc": p.returncode}
    finally:
        close_fds(rep_r, rep_w)
        shutil.rmtree(sc.cache.parent, ignore_errors=True)
        sc.cleanup()


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="What the replay sandbox holds on this machine.")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    a = ap.parse_args(argv)
    res = self_check(a.device)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print(res["summary"])
        print("inside:", json.dumps(res["inside"]))
    ins = res["inside"]
    ok = not ins.get("error") and not ins.get("hidden_visible") and not ins.get("usr_writable") and \
        not ins.get("proc_sys_writable")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
