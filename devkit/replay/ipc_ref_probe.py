"""What the replay process's torch does with a CUDA IPC entry's reference counter (item 3 of the
shared-memory hardening), before and after `worker._ipc_ref_check`.  Root and a CUDA GPU needed:

    python3 -m devkit.replay.ipc_ref_probe        # -> $OUT/ipc_ref_probe.json (or /tmp), and stdout

A producer process shares a CUDA tensor (worker.pack_save with IPC, as a child does); this
process then maps it with torch's `_new_shared_cuda` the way pack_load did before the check, each
time with another "ref" / "ref_offset" in a fresh subprocess, and records what happened to the
object named: an honest counter (decremented to 0), another uid's 16-byte object with zero first
bytes and a 100 kB one (grown? written? unlinked?), a symlink and a '..' path (followed?), offsets
past the 80 KiB counter file (the replay process's own memory), and a device offset past the
allocation (a sticky CUDA error?).  Then the same entries through pack_load: refused with
ExchangeTampered, the honest one loaded.  Every object it makes is its own (names with a random
tag) and removed at the end.
"""
import json, os, subprocess, sys, stat, struct, uuid, ctypes, platform

OUT = os.environ.get("OUT", "/tmp")
from devkit.paths import REPO as _REPO  # noqa: E402 - the checkout, from the one place that knows it

REPO = str(_REPO)
sys.path.insert(0, REPO)
import torch  # noqa: E402

if os.geteuid() != 0 or not torch.cuda.is_available():
    sys.exit("needs root (it chowns objects to another uid) and a CUDA GPU")

res = {"torch": torch.__version__, "cuda": torch.version.cuda, "glibc": platform.libc_ver(), "euid": os.geteuid()}
for k in ("protected_hardlinks", "protected_symlinks", "protected_regular"):
    try:
        res[k] = open(f"/proc/sys/fs/{k}").read().strip()
    except OSError as e:
        res[k] = str(e)
res["shm_mode"] = oct(os.stat("/dev/shm").st_mode)

PRODUCER = r'''
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch
from forensics.replay.worker import pack_save
t = torch.arange(4099, dtype=torch.float32, device="cuda")
hold = []
pack_save({"t": t}, sys.argv[2], ipc_hold=hold, ipc_copy=True)
dev, handle, size, off, ref, ref_off, event, event_sync = torch.UntypedStorage._share_cuda_(t.untyped_storage())
print(json.dumps({"device": dev, "handle": handle.hex(), "size": size, "offset": off, "ref": ref.hex(),
                  "ref_offset": ref_off, "event": event.hex() if event else None, "event_sync": event_sync,
                  "pid": os.getpid()}), flush=True)
sys.stdin.readline()
'''


def producer(pack):
    p = subprocess.Popen([sys.executable, "-c", PRODUCER, REPO, pack], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return p, json.loads(p.stdout.readline())


def state(path, at=None):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    d = {"mode": stat.filemode(st.st_mode), "uid": st.st_uid, "size": st.st_size, "nlink": st.st_nlink}
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            b = f.read()
        d["head"] = b[:8].hex()
        if at is not None and len(b) >= at + 8:
            d["at"] = struct.unpack("<q", b[at:at + 8])[0]
    return d


CONSUME = r'''
import json, sys
import torch
e = json.loads(sys.argv[1])
torch.empty(1, device=f"cuda:{e['device']}")   # a CUDA context first (without one the call segfaults)
st = torch.UntypedStorage._new_shared_cuda(e["device"], bytes.fromhex(e["handle"]), e["size"], e["offset"],
        bytes.fromhex(e["ref"]), e["ref_offset"], None if e["event"] is None else bytes.fromhex(e["event"]), e["event_sync"])
t = torch.empty(0, dtype=torch.float32, device="cuda").set_(st, 0, [4])
print("mapped", flush=True)
sys.stdin.readline()
c = t.clone(); torch.cuda.synchronize()
del t, st
print("freed", c[:4].tolist(), flush=True)
try:
    x = torch.ones(4, device="cuda") + 1; torch.cuda.synchronize(); print("cuda ok after", x.tolist(), flush=True)
except Exception as ex:
    print("cuda broken after:", str(ex)[:200], flush=True)
'''


def consume(e, victim, at):
    """Raw torch (the old pack_load path): state after mapping, after freeing; rc."""
    p = subprocess.Popen([sys.executable, "-c", CONSUME, json.dumps(e)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline().strip()
    mid = state(victim, at)
    try:
        out, err = p.communicate("\n", timeout=120)
    except subprocess.TimeoutExpired:
        p.kill(); out, err = p.communicate()
    return {"first": first, "after_map": mid, "after_free": state(victim, at), "rc": p.returncode,
            "out": out.strip()[-400:], "err": err.strip()[-400:]}


tag = uuid.uuid4().hex[:8]
pack = f"/dev/shm/ipcprobe-{tag}.pack"
prod, honest = producer(pack)
res["honest_entry"] = {k: honest[k] for k in ("ref", "ref_offset", "size", "offset")}
res["ref_name"] = bytes.fromhex(honest["ref"]).decode(errors="replace")
rpath = "/dev/shm/" + res["ref_name"].lstrip("/")
res["ref_file"] = state(rpath, 64 + 8 * honest["ref_offset"])
exps = {}

# honest: the producer's own counter
exps["honest"] = consume(honest, rpath, 64 + 8 * honest["ref_offset"])
exps["honest"]["before"] = res["ref_file"]


def victim(name, data, uid=54321, mode=0o600):
    path = "/dev/shm/" + name
    with open(path, "wb") as f:
        f.write(data)
    os.chown(path, uid, uid)
    os.chmod(path, mode)
    return path


# another user's object, first 4 bytes 0, 16 bytes long
v = victim(f"victim_zero_{tag}", b"\0" * 16)
e = dict(honest, ref=("/" + os.path.basename(v)).encode().hex(), ref_offset=3)
exps["foreign_zero_16B"] = dict(consume(e, v, 64 + 24), before=state(v))
# another user's object, refcount-like first int 5, 100000 bytes: decrement at offset 3
data = bytearray(100000); data[0:4] = struct.pack("<i", 5); data[64 + 24:64 + 32] = struct.pack("<q", 1000)
v2 = victim(f"victim_nz_{tag}", bytes(data))
e = dict(honest, ref=("/" + os.path.basename(v2)).encode().hex(), ref_offset=3)
b = state(v2, 64 + 24)
exps["foreign_nonzero_100kB"] = dict(consume(e, v2, 64 + 24), before=b)
# a symlink in /dev/shm to a file elsewhere
tgt = f"/tmp/victim_target_{tag}"
open(tgt, "wb").write(b"\0" * 1024)
os.symlink(tgt, f"/dev/shm/victim_link_{tag}")
e = dict(honest, ref=(f"/victim_link_{tag}").encode().hex(), ref_offset=0)
exps["symlink"] = dict(consume(e, tgt, 64), before=state(tgt))
# a path with ..
dd = f"/tmp/victim_dotdot_{tag}"
open(dd, "wb").write(b"\0" * 1024)
e = dict(honest, ref=(f"/../../tmp/victim_dotdot_{tag}").encode().hex(), ref_offset=0)
exps["dotdot"] = dict(consume(e, dd, 64), before=state(dd))
# ref_offset far past the mapping (an own 80 KiB file, root's)
v3 = victim(f"victim_oob_{tag}", b"\0" * (64 + 80000), uid=0)
open(v3, "r+b").write(struct.pack("<i", 1))
for off in (10000, 20000, 1 << 32):
    e = dict(honest, ref=("/" + os.path.basename(v3)).encode().hex(), ref_offset=off)
    exps[f"ref_offset_{off}"] = consume(e, v3, None)
# the device offset past the allocation (not the ref: the DoS question)
e = dict(honest, offset=1 << 30)
exps["device_offset_1GiB"] = consume(e, rpath, None)
res["experiments"] = exps

# the new code: pack_load through _ipc_ref_check
from forensics.replay import worker  # noqa: E402
new = {}
hdr_len = int.from_bytes(open(pack, "rb").read()[8:16], "little")
raw = open(pack, "rb").read()
head = json.loads(raw[16:16 + hdr_len])


def with_entry(**kw):
    h = json.loads(json.dumps(head))
    h["tensors"][0]["ipc"].update(kw)
    hb = json.dumps(h).encode()
    start = 16 + len(hb)
    p = f"/dev/shm/ipcprobe-{tag}-{uuid.uuid4().hex[:6]}.pack"
    open(p, "wb").write(worker.PACK_MAGIC + len(hb).to_bytes(8, "little") + hb + b"\0" * (-start % 64))
    return p


cases = {"foreign_zero": dict(ref=("/" + os.path.basename(v)).encode().hex()),
         "symlink": dict(ref=(f"/victim_link_{tag}").encode().hex()),
         "dotdot": dict(ref=(f"/../../tmp/victim_dotdot_{tag}").encode().hex()),
         "offset_10000": dict(ref_offset=10000),
         "torch_name_foreign_owner": None}
# a torch-looking name owned by another uid
fo = victim(f"torch_1_{tag.encode().hex()[:8].translate(str.maketrans('abcdef', '123456'))}_0", b"\0" * (64 + 80000))
cases["torch_name_foreign_owner"] = dict(ref=("/" + os.path.basename(fo)).encode().hex())
for name, kw in cases.items():
    p = with_entry(**kw)
    try:
        worker.pack_load(p, ipc=True)
        new[name] = "loaded (NOT refused)"
    except worker.ExchangeTampered as ex:
        new[name] = "ExchangeTampered: " + str(ex)[:200]
    except Exception as ex:  # noqa: BLE001
        new[name] = f"{type(ex).__name__}: {str(ex)[:200]}"
    os.unlink(p)
new["foreign_zero_state_after"] = state(v)
# honest through the new code: the counter goes back to 0 (honest_entry's slot was already used above; the pack's own)
pent = head["tensors"][0]["ipc"]
pref = "/dev/shm/" + bytes.fromhex(pent["ref"]).decode().lstrip("/")
new["pack_ref_before"] = state(pref, 64 + 8 * pent["ref_offset"])
t = worker.pack_load(pack, ipc=True)["t"]
torch.cuda.synchronize()
new["pack_honest_ok"] = bool(torch.equal(t.cpu(), torch.arange(4099, dtype=torch.float32)))
new["pack_ref_after"] = state(pref, 64 + 8 * pent["ref_offset"])
res["new_code"] = new
prod.communicate("\n", timeout=60)
for pth in (pack, v, v2, v3, fo, f"/dev/shm/victim_link_{tag}", tgt, dd):
    try:
        os.unlink(pth)
    except OSError:
        pass
json.dump(res, open(os.path.join(OUT, "ipc_ref_probe.json"), "w"), indent=1, default=str)
print(json.dumps(res, indent=1, default=str))
