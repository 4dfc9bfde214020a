"""Child side of the replay: imports and runs an archived solution, nothing else.

This file is copied into the scratch directory and started by path (``python worker.py``) in a
fresh process with a scrubbed environment, so it must depend on the standard library and torch
only (the GPU machine has neither duckdb nor orjson, and the child must not see the tool).

The parent (``forensics.replay.runner``) drives it over two pipes whose file descriptors are in
``FORENSICS_WORKER_FDS`` ("<read>,<write>"): one JSON request per line in, one JSON reply per line
out.  Tensors travel as files inside the scratch directory (in /dev/shm where it exists): either
``torch.save`` files that the parent loads with ``weights_only=True``, or, where the request asks
for ``fmt: "pack"``, this module's pack format (a JSON header and the raw tensor bytes, see
`pack_save`), which skips torch.save's zip/pickle work for the multi-hundred-MB outputs of large
shapes.  The child never sees a reference output and never compares: it only
builds the solution's objects, calls them, and hands back what they returned together with the
inputs as they were after the call.

Trust: the solution runs in this interpreter, so nothing here is a security boundary by itself.
The boundary is the process: the parent judges only data, never a verdict from here, and treats
a missing reply (exit, crash, hang) as a finding.  The worker still keeps its own references to
the torch functions it needs, captured before the solution is imported, and reports any
replacement of torch's functions it can see (a solution that patches ``torch.allclose``).

Nothing of the worker is reachable by name from the solution (issue 36).  Started as a script, this
file does not run as `__main__`: the block below compiles it again into a module object that no entry
of sys.modules names (`replay_worker`), puts an empty module at `sys.modules['__main__']`, and runs
`main()` of the private copy.  Its judging references (the clock `_perf`, `_Event`, `snapshot`,
`diff_snapshots`, the `Worker` class and its input check) live in that module's globals, which the
solution can reach only through the garbage collector or a frame (`gc.get_objects`,
`sys._getframe`, a traceback's `tb_frame`): each of those is an audit event the hook of
`childaudit.py` has already sent to the parent before the solution sees the result.  Before, a
solution's `sys.modules['__main__']._perf = fake` made every reported time 10x faster, and replacing
`diff_snapshots` there hid its torch patches.
"""

from __future__ import annotations

if __name__ == "__main__":
    import os as _os
    import sys as _sys
    import types as _types
    _self = _types.ModuleType("replay_worker")
    _self.__file__ = _os.path.realpath(__file__)
    with open(_self.__file__, "rb") as _f:
        _boot = compile(_f.read(), _self.__file__, "exec")
    _sys.modules["__main__"] = _types.ModuleType("__main__")   # what a solution finds there: nothing
    exec(_boot, vars(_self))   # noqa: S102 - this file itself, as a module no name reaches
    del _boot, _f
    _rc = _self.main()
    # The normal completion marker is the reply to 'bye'; ending here afterwards is ordinary.
    _sys.stdout.flush()
    _os._exit(_rc)

import contextlib
import ctypes
import errno
import gc
import importlib
import io
import json
import mmap
import os
import re
import stat
import statistics
import sys
import time
import traceback
import types

import torch

# ---------------------------------------------------------------- pristine references
_clone = torch.Tensor.clone
_detach = torch.Tensor.detach
_to = torch.Tensor.to
_copy = torch.Tensor.copy_
_contig = torch.Tensor.contiguous
_data_ptr = torch.Tensor.data_ptr
_save = torch.save
_load = torch.load
_is_tensor = torch.is_tensor
_perf = time.perf_counter
_no_grad = torch.no_grad
_empty = torch.empty
_fill = torch.Tensor.fill_
_zero = torch.Tensor.zero_
_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
from torch.profiler import ProfilerActivity as _ProfilerActivity, profile as _profile  # noqa: E402 - kept before the solution loads
_median = statistics.median
_TensorType = torch.Tensor
_frombuffer = torch.frombuffer
_reshape = torch.Tensor.reshape
_view = torch.Tensor.view
_equal = torch.equal
_share_cuda = torch.UntypedStorage._share_cuda_
_untyped_storage = torch.Tensor.untyped_storage
_ipc_collect = torch.cuda.ipc_collect

# ---------------------------------------------------------------- pack format
# magic, then an 8-byte little-endian header length, the UTF-8 JSON header, padding to 64 bytes,
# then each tensor's bytes (C-contiguous, 64-byte aligned) at the offset the header gives.
PACK_MAGIC = b"FXPACK1\n"
PACK_ALIGN = 64
PACK_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
               "float8_e4m3fnuz", "float8_e5m2fnuz", "int64", "int32", "int16", "int8", "uint8",
               "uint16", "uint32", "uint64", "bool", "complex64", "complex128")
PACK_MAX_HEADER = 64 * 2**20
IPC_TEST_N = 4099   # length of the arange a new child sends back over IPC before IPC is used

# CUDA IPC reference counters.  The reader of an IPC tensor, when it frees the mapping, has torch
# open the writer's counter object by the name in the pack's "ref" field (shm_open in /dev/shm,
# O_RDWR, no O_CREAT; O_NOFOLLOW from glibc), grow it with ftruncate to IPC_REF_BYTES where it is
# smaller, map it, add and remove a reference in its first 4 bytes (shm_unlink where that count
# comes back to 0) and decrement the int64 at 64 + 8 * ref_offset, with no bound on ref_offset.
# The names torch gives (at::NewProcessWideShmHandle) and the file's layout (RefcountedMapAllocator's
# 64-byte header, CUDA_IPC_REF_COUNTER_FILE_SIZE counters):
IPC_REF_NAME = re.compile(rb"/torch_[0-9]{1,10}_[0-9]{1,20}_[0-9]{1,20}")
IPC_REF_SLOTS = 10000
IPC_REF_BYTES = 64 + 8 * IPC_REF_SLOTS
SHM_DIR = "/dev/shm"


# ---------------------------------------------------------------- exchange files
class ExchangeTampered(OSError):
    """An exchange file in io/ is not the plain file the protocol put there (a symlink, a FIFO, a
    directory, a device, a file with another hard link): the solution's process swapped it."""


_EXCHANGE_MODES = {"rb": os.O_RDONLY, "wb": os.O_WRONLY | os.O_CREAT, "r+b": os.O_RDWR}


def open_exchange(path: str, mode: str = "rb"):
    """Open a tensor exchange file without following anything the child may have put at its name.

    io/ is writable by the solution's process, and the parent (possibly root) reads and writes
    there by name: a symlink planted at the name would make it read, truncate or map the target
    (a host file, the archive), a FIFO would make it hang, a hard link would make a write land in
    another file.  So: O_NOFOLLOW (a symlink fails with ELOOP), O_NONBLOCK (a FIFO opens at once,
    or fails with ENXIO, instead of waiting for a peer), then fstat on the descriptor: only a
    regular file with at most one link is used, anything else raises ExchangeTampered.  "wb"
    truncates only after that check (never O_TRUNC at open).  `mode`: "rb", "wb" or "r+b"
    (read-write, for a shared mapping).  Returns a buffered binary file object."""
    if mode not in _EXCHANGE_MODES:
        raise ValueError(f"open_exchange mode {mode!r}")
    flags = _EXCHANGE_MODES[mode] | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags, 0o660)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ExchangeTampered(f"exchange file {path} is a symbolic link (tampered with): refused") from None
        if e.errno in (errno.ENXIO, errno.EISDIR, errno.ENODEV, errno.EOPNOTSUPP):
            raise ExchangeTampered(f"exchange file {path} is not a regular file (tampered with): refused") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ExchangeTampered(f"exchange file {path} is not a regular file "
                                   f"(mode {stat.filemode(st.st_mode)}; tampered with): refused")
        if st.st_nlink > 1:
            raise ExchangeTampered(f"exchange file {path} has {st.st_nlink} hard links "
                                   "(tampered with): refused")
        if mode == "wb":
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def save_exchange(obj, path: str) -> None:
    """torch.save into an exchange file (see open_exchange)."""
    with open_exchange(path, "wb") as f:
        _save(obj, f)


def load_exchange(path: str, map_location="cpu", weights_only: bool = True, **kw):
    """torch.load (weights_only unless asked otherwise) from an exchange file (see open_exchange)."""
    with open_exchange(path, "rb") as f:
        return _load(f, map_location=map_location, weights_only=weights_only, **kw)


def _pack_tree(x, tensors: list):
    if _is_tensor(x):
        tensors.append(x)
        return {"__t__": len(tensors) - 1}
    if isinstance(x, tuple):
        return {"__tuple__": [_pack_tree(v, tensors) for v in x]}
    if isinstance(x, list):
        return [_pack_tree(v, tensors) for v in x]
    if isinstance(x, dict):
        return {"__dict__": [[k, _pack_tree(v, tensors)] for k, v in x.items()]}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"cannot pack {type(x).__name__}")


def _hex(b) -> str | None:
    return bytes(b).hex() if isinstance(b, (bytes, bytearray)) else None


def _ipc_share(c, hold: list, copy: bool = True) -> dict | None:
    """CUDA IPC fields for a GPU tensor (a fresh exact-size copy, or with `copy=False` the tensor's
    own storage, kept alive in `hold` until the reader is done with it), or None where this
    storage cannot be shared (then bytes travel)."""
    try:
        if copy:
            c = _clone(c)
        dev, handle, size, off, ref, ref_off, event, event_sync = _share_cuda(_untyped_storage(c))
    except Exception:  # noqa: BLE001 - e.g. an allocator mode without IPC support
        return None
    hold.append(c)
    return {"device": int(dev), "handle": _hex(handle), "size": int(size), "offset": int(off),
            "ref": _hex(ref), "ref_offset": int(ref_off), "event": _hex(event), "event_sync": bool(event_sync)}


def pack_save(obj, path: str, ipc_hold: list | None = None, ipc_copy: bool = True) -> dict:
    """Write a tree of tensors / lists / tuples / dicts / scalars to `path` (see PACK_MAGIC).
    With `ipc_hold` (a list), CUDA tensors travel as CUDA IPC handles instead of bytes: the
    reader maps the writer's device memory and copies it on the device (`pack_load(ipc=True)`);
    the copies shared are appended to `ipc_hold`, which must keep them alive until then.  With
    `ipc_copy=False` the (contiguous) tensors themselves are shared, not copies of them, so
    the writer sees what the reader does to them (`pack_load(share=True)`).  -> the layout
    written (`pack_write`)."""
    with open_exchange(path, "wb") as f:
        return pack_write(obj, f, ipc_hold=ipc_hold, ipc_copy=ipc_copy)


def pack_write(obj, f, ipc_hold: list | None = None, ipc_copy: bool = True) -> dict:
    """`pack_save` into an open binary file `f` (at its current position, the file's start).
    -> the layout written, as this process knows it without reading the file back: {"tree": the
    header's tree, "tensors": the header's tensor entries, "start": the offset their "offset"s
    count from}.  The parent reads the inputs it shares with the child at those offsets, through
    the descriptor it wrote them with (probes.FileSlot)."""
    tensors: list = []
    tree = _pack_tree(obj, tensors)
    flat, metas, off = [], [], 0
    for t in tensors:
        c = _contig(_detach(t))
        if ipc_hold is not None and c.device.type == "cuda" and c.numel():
            entry = _ipc_share(c, ipc_hold, copy=ipc_copy)
            if entry is not None:
                metas.append({"dtype": str(c.dtype).replace("torch.", ""), "shape": list(c.shape), "ipc": entry})
                continue
        if c.device.type != "cpu":
            c = _to(c, "cpu")
        n = c.numel() * c.element_size()
        metas.append({"dtype": str(c.dtype).replace("torch.", ""), "shape": list(c.shape), "offset": off,
                      "nbytes": n})
        flat.append((c, n))
        off += -(-n // PACK_ALIGN) * PACK_ALIGN
    head = json.dumps({"tree": tree, "tensors": metas}).encode()
    start = len(PACK_MAGIC) + 8 + len(head)
    pad = -start % PACK_ALIGN
    f.write(PACK_MAGIC + len(head).to_bytes(8, "little") + head + b"\0" * pad)
    pos = 0
    for (c, n), m in zip(flat, [m for m in metas if "ipc" not in m]):
        if m["offset"] > pos:
            f.write(b"\0" * (m["offset"] - pos))
            pos = m["offset"]
        if n:
            f.write((ctypes.c_char * n).from_address(_data_ptr(c)))
        pos += n
    f.flush()
    return {"tree": tree, "tensors": metas, "start": start + pad}


def is_pack(path: str) -> bool:
    with open_exchange(path, "rb") as f:
        return f.read(len(PACK_MAGIC)) == PACK_MAGIC


def _opened(src, mode: str):
    """An exchange file to read: a path (opened here through open_exchange, closed after) or a
    file object the caller opened that way (used as it is, left open, read from its start)."""
    if isinstance(src, (str, os.PathLike)):
        return open_exchange(os.fspath(src), mode)
    src.seek(0)
    return contextlib.nullcontext(src)


def _ipc_ref_check(e: dict, owner: int | None) -> None:
    """Refuse a CUDA IPC entry whose reference counter torch must not be pointed at (ExchangeTampered).

    The replay process (root on a GPU host) frees every IPC mapping it reads, and torch then acts
    on the object the writer named in "ref" (see IPC_REF_NAME above).  From a child's pack file
    that reached any top-level /dev/shm object with root's rights over it: grown to 80 KiB,
    written, and unlinked where its first 4 bytes were 0 (another user's, or another program's);
    and a large "ref_offset" decremented an int64 that far past the 80 KiB mapping, in the replay
    process's own memory.  So: the name must be one torch gives (no '/', no '..', nothing but
    /torch_<pid>_<n>_<n>), the offset inside the counter file, and with `owner` (the uid the
    writer's files have) the object there, if any, a regular file of that owner with one link and
    at least IPC_REF_BYTES (torch then grows nothing).  A file put at the name after this check
    is one the writer could write itself: in the sticky /dev/shm, a process without CAP_FOWNER
    renames over only its own entries and hard-links only files it may write
    (fs.protected_hardlinks)."""
    try:
        name = bytes.fromhex(e["ref"])
    except ValueError:
        raise ValueError(f"pack IPC entry malformed: ref {e['ref'][:80]!r} is not hex") from None
    if not IPC_REF_NAME.fullmatch(name):
        raise ExchangeTampered(f"CUDA IPC reference counter {name[:80]!r} is not a name torch gives one "
                               "(/torch_<pid>_<n>_<n>; tampered with): refused")
    if e["ref_offset"] >= IPC_REF_SLOTS:
        raise ExchangeTampered(f"CUDA IPC reference counter offset {e['ref_offset']} is past the "
                               f"{IPC_REF_SLOTS} counters of its file (tampered with): refused")
    if owner is None:
        return
    path = os.path.join(SHM_DIR, name[1:].decode())
    try:
        st = os.lstat(path)
    except FileNotFoundError:   # gone: torch's open (no O_CREAT) fails and is ignored
        return
    if not (stat.S_ISREG(st.st_mode) and st.st_uid == owner and st.st_nlink == 1 and st.st_size >= IPC_REF_BYTES):
        raise ExchangeTampered(f"CUDA IPC reference counter {path} is not the writer's counter file "
                               f"({stat.filemode(st.st_mode)}, uid {st.st_uid} where {owner} was expected, "
                               f"{st.st_nlink} link(s), {st.st_size} bytes; tampered with): refused")


def _ipc_open(e, dtype, shape: list, numel: int, esize: int, keep: bool = False, ref_owner: int | None = None):
    """Map another process's CUDA memory (pack_save's IPC fields) and copy it into our own, or
    with `keep` use the mapping itself (writes reach the other process's tensor).  The reference
    counter the entry names is checked first (`_ipc_ref_check`, its owner against `ref_owner`)."""
    fields = ("device", "handle", "size", "offset", "ref", "ref_offset", "event", "event_sync")
    if not (isinstance(e, dict) and set(e) == set(fields) and type(e["device"]) is int
            and all(type(e[k]) is int and e[k] >= 0 for k in ("size", "offset", "ref_offset"))
            and all(isinstance(e[k], str) for k in ("handle", "ref")) and type(e["event_sync"]) is bool
            and (e["event"] is None or isinstance(e["event"], str))):
        raise ValueError(f"pack IPC entry malformed: {e!r}"[:300])
    if numel * esize > e["size"]:
        raise ValueError(f"pack IPC tensor {shape} needs {numel * esize} bytes, storage has {e['size']}")
    _ipc_ref_check(e, ref_owner)
    if not torch.cuda.is_available():
        raise ValueError("pack IPC tensor, but this process has no CUDA")
    if e["device"] != torch.cuda.current_device():
        raise ValueError(f"pack IPC tensor on cuda:{e['device']}, reader on cuda:{torch.cuda.current_device()}")
    try:
        st = torch.UntypedStorage._new_shared_cuda(
            e["device"], bytes.fromhex(e["handle"]), e["size"], e["offset"], bytes.fromhex(e["ref"]),
            e["ref_offset"], None if e["event"] is None else bytes.fromhex(e["event"]), e["event_sync"])
    except (RuntimeError, ValueError, TypeError) as ex:
        raise ValueError(f"pack IPC handle could not be opened: {ex}"[:300]) from None
    t = torch.empty(0, dtype=dtype, device=f"cuda:{e['device']}").set_(st, 0, shape)
    if keep:
        return t   # the mapping lives as long as this tensor (the writer holds its own reference)
    out = t.clone()
    del t, st   # releases the mapping and the writer's reference count
    return out


def pack_load(path, ipc: bool = False, share: bool = False, ref_owner: int | None = -1):
    """Read a pack file written by `pack_save`.  The header is untrusted (the parent reads what the
    solution's process wrote): dtypes come from a fixed list, every tensor must lie inside the
    file (or, with `ipc`, inside the shared device storage it names) and its byte count must
    match its shape; anything else raises ValueError.  IPC tensors come back on the GPU, copied.

    With `share`, nothing is copied: the tensors are views of a shared writable mapping of the
    file (every process that maps it sees the others' writes, also after the file is unlinked)
    and IPC tensors stay mapped.  This is how the parent keeps the memory the solution's inputs
    live in: it maps its own pack file, the child maps the same file, and after each call the
    parent reads the inputs itself instead of trusting the child's account of them.

    The file is opened through `open_exchange` (never a symlink, FIFO or hard-linked file), and
    the shared mapping is made from that descriptor, not from the name a second time.  `path`
    may also be a file object opened so (read-write for `share`), read from its start.

    `ref_owner`: the uid the writer's CUDA IPC reference counters must belong to (-1, the
    default: this process's euid; None: any, for the worker, which reads only the parent's).  An
    entry naming another object is refused with ExchangeTampered (`_ipc_ref_check`)."""
    if ref_owner == -1:
        ref_owner = os.geteuid()
    with _opened(path, "r+b" if share else "rb") as f:
        if f.read(len(PACK_MAGIC)) != PACK_MAGIC:
            raise ValueError("not a pack file")
        hlen = int.from_bytes(f.read(8), "little")
        if not 0 < hlen <= PACK_MAX_HEADER:
            raise ValueError(f"pack header length {hlen} out of range")
        head = json.loads(f.read(hlen))
        start = len(PACK_MAGIC) + 8 + hlen
        start += -start % PACK_ALIGN
        f.seek(0, 2)
        size = f.tell() - start
        if size < 0:
            raise ValueError("truncated pack file")
        if share:   # MAP_SHARED of the checked descriptor; the tensors keep the mapping alive
            data = _frombuffer(mmap.mmap(f.fileno(), start + size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE),
                               dtype=torch.uint8)[start:] if size else None
        else:
            f.seek(start)
            data = bytearray(size)
            if f.readinto(data) != size:
                raise ValueError("truncated pack file")
    metas = head.get("tensors") if isinstance(head, dict) else None
    if not isinstance(metas, list):
        raise ValueError("pack header has no tensor list")
    tensors = []
    for m in metas:
        dt = m.get("dtype") if isinstance(m, dict) else None
        if dt not in PACK_DTYPES or not hasattr(torch, dt):
            raise ValueError(f"pack tensor dtype {dt!r} not allowed")
        dtype = getattr(torch, dt)
        if "ipc" in m:
            shape = m.get("shape")
            if not ipc or set(m) != {"dtype", "shape", "ipc"} or not (
                    isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
                raise ValueError("pack file holds a CUDA IPC entry where none is allowed" if not ipc
                                 else f"pack IPC header malformed: {m!r}"[:300])
            numel = 1
            for d in shape:
                numel *= d
            tensors.append(_ipc_open(m["ipc"], dtype, shape, numel, torch.empty((), dtype=dtype).element_size(),
                                     keep=share, ref_owner=ref_owner))
            continue
        shape, off, n = m.get("shape"), m.get("offset"), m.get("nbytes")
        if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)
                and type(off) is int and type(n) is int and 0 <= off and off + n <= size):
            raise ValueError(f"pack tensor header out of range: {m!r}"[:300])
        numel = 1
        for d in shape:
            numel *= d
        esize = torch.empty((), dtype=dtype).element_size()
        if numel * esize != n:
            raise ValueError(f"pack tensor {shape} {dt} does not have {n} bytes")
        if n == 0:
            tensors.append(torch.empty(shape, dtype=dtype))
            continue
        raw = data[off:off + n] if share else _frombuffer(data, dtype=torch.uint8, count=n, offset=off)
        tensors.append(_reshape(_view(raw, dtype), shape))

    def build(x):
        if isinstance(x, list):
            return [build(v) for v in x]
        if isinstance(x, dict):
            if set(x) == {"__t__"}:
                i = x["__t__"]
                if type(i) is not int or not 0 <= i < len(tensors):
                    raise ValueError("pack tree names a tensor that is not there")
                return tensors[i]
            if set(x) == {"__tuple__"} and isinstance(x["__tuple__"], list):
                return tuple(build(v) for v in x["__tuple__"])
            if set(x) == {"__dict__"} and isinstance(x["__dict__"], list):
                out = {}
                for kv in x["__dict__"]:
                    if not (isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], (str, int))):
                        raise ValueError("bad dict entry in pack tree")
                    out[kv[0]] = build(kv[1])
                return out
            raise ValueError("unknown object in pack tree")
        return x

    return build(head.get("tree"))


def load_any(path, map_location: str = "cpu", ipc: bool = False, share: bool = False, ref_owner: int | None = -1):
    """Parent-written files: the pack format (its GPU tensors over CUDA IPC where `ipc`, in
    memory shared with the parent where `share`) or a torch.save file (weights_only).  One open
    (a path through open_exchange, or a file object opened so): the format is told and the file
    read from the same descriptor."""
    with _opened(path, "r+b" if share else "rb") as f:
        if f.read(len(PACK_MAGIC)) == PACK_MAGIC:
            x = pack_load(f, ipc=ipc, share=share, ref_owner=ref_owner)
            return x if map_location == "cpu" else _to_dev_tree(x, map_location)
        f.seek(0)
        return _load(f, map_location=map_location, weights_only=True)


def _to_dev_tree(x, device):
    if _is_tensor(x):
        return _to(x, device)
    if isinstance(x, list):
        return [_to_dev_tree(v, device) for v in x]
    if isinstance(x, tuple):
        return tuple(_to_dev_tree(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to_dev_tree(v, device) for k, v in x.items()}
    return x

# What the decks' check.py / benchmark.py and their src/ call in the solution's process (comparisons,
# the clock, events and streams, synchronize, seeding, Tensor methods, statistics, builtins), and the
# modules they live in: the identity of every function there (and, for a Python function, of its
# __code__ / __defaults__ / __kwdefaults__) must not change while the solution is imported or called.
#: (label, dotted path from a module in sys.modules, whether private names are watched too)
WATCH = (
    ("torch", "torch", False),
    ("torch.Tensor", "torch.Tensor", True),
    ("torch._C.TensorBase", "torch._C.TensorBase", True),
    ("torch._C", "torch._C", True),
    ("torch.nn.functional", "torch.nn.functional", False),
    ("torch.testing", "torch.testing", False),
    ("torch.testing._comparison", "torch.testing._comparison", True),
    ("torch.cuda", "torch.cuda", False),
    ("torch.cuda.Event", "torch.cuda.Event", True),
    ("torch.cuda.Stream", "torch.cuda.Stream", True),
    ("torch._C._CudaEventBase", "torch._C._CudaEventBase", True),
    ("torch._C._CudaStreamBase", "torch._C._CudaStreamBase", True),
    ("torch.cuda.random", "torch.cuda.random", False),
    ("torch.random", "torch.random", False),
    ("torch.nn.Module", "torch.nn.Module", True),
    ("torch.no_grad", "torch.no_grad", True),
    ("time", "time", False),
    ("statistics", "statistics", False),
    ("math", "math", False),
    ("builtins", "builtins", False),
    ("sys", "sys", False),
)
#: names that change legitimately (torch's lazy state, hooks an interpreter may set)
_WATCH_SKIP = {"sys": {"excepthook", "displayhook", "breakpointhook", "unraisablehook", "settrace", "setprofile",
                       "gettrace", "getprofile"}}


def _resolve(path: str):
    """`path` from the modules already imported (never an import: that would run a lazy import)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        obj = sys.modules.get(".".join(parts[:i]))
        if obj is None:
            continue
        for a in parts[i:]:
            d = vars(obj) if hasattr(obj, "__dict__") else {}
            if a not in d:
                return None
            obj = d[a]
        return obj
    return None


def _watch_targets() -> dict[str, tuple[object, bool]]:
    out = {}
    for label, path, private in WATCH:
        obj = _resolve(path)
        if obj is not None:
            out[label] = (obj, private)
    return out


def _fingerprint(v) -> object:
    """Identity of a function as it behaves: the object, and for a Python function (or one inside a
    staticmethod / classmethod / property) its code, defaults and keyword defaults."""
    f = v
    if isinstance(v, (staticmethod, classmethod)):
        f = v.__func__
    elif isinstance(v, property):
        f = v.fget
    if type(f) is types.FunctionType:
        return (id(v), id(f), id(f.__code__), id(f.__defaults__), id(f.__kwdefaults__))
    return id(v)


def _flags() -> dict[str, object]:
    out: dict[str, object] = {}
    try:
        out["matmul.allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
        out["matmul.allow_bf16_reduced_precision_reduction"] = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        out["matmul.allow_fp16_reduced_precision_reduction"] = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        out["cudnn.allow_tf32"] = torch.backends.cudnn.allow_tf32
        out["cudnn.benchmark"] = torch.backends.cudnn.benchmark
        out["cudnn.deterministic"] = torch.backends.cudnn.deterministic
        out["float32_matmul_precision"] = torch.get_float32_matmul_precision()
        out["deterministic_algorithms"] = torch.are_deterministic_algorithms_enabled()
    except Exception as e:  # pragma: no cover - depends on the torch build
        out["error"] = repr(e)
    return out


def snapshot() -> dict[str, object]:
    """Identities of the functions of everything the grader calls (WATCH) and the global numeric flags."""
    snap: dict[str, dict[str, object]] = {}
    objs: dict[str, dict[str, object]] = {}
    for label, (obj, private) in _watch_targets().items():
        ids: dict[str, object] = {}
        try:
            items = list(vars(obj).items())  # never getattr: that would trigger lazy imports
        except TypeError:
            items = []
        is_class = isinstance(obj, type)
        skip = _WATCH_SKIP.get(label, ())
        for n, v in items:
            if isinstance(v, types.ModuleType) or n in skip:
                continue
            if not (is_class or private) and n.startswith("_"):
                continue  # module-private state (torch.cuda._initialized ...) changes on CUDA init
            if not (callable(v) or isinstance(v, (property, staticmethod, classmethod))
                    or type(v).__name__ in ("getset_descriptor", "member_descriptor", "method_descriptor")):
                continue  # data (default_generators, flags) is not a function that can be swapped
            if isinstance(v, type) and not is_class:
                ids[n] = id(v)     # a class: replaced or not (its methods are watched where listed)
                continue
            ids[n] = _fingerprint(v)
        snap[label] = ids
        objs[label] = dict(items)
    return {"ids": snap, "flags": _flags(), "objs": objs}


_BENIGN_ADDED = {"__slotnames__", "__annotations__", "__dict__", "__weakref__", "__doc__", "__module__"}


# torch wraps some of its own functions in `_disable_dynamo` the first time torch._dynamo is
# imported (torch.compile, the profiler): every such wrapper shares this code object
_DYNAMO_WRAP_CODE = getattr(getattr(torch, "_disable_dynamo", None) and torch._disable_dynamo(lambda: None),
                            "__code__", None)


def _torch_own_wrap(old: object, new: object) -> bool:
    """`new` is torch's own dynamo-disabling wrapper of `old` (not something the solution wrote)."""
    return _DYNAMO_WRAP_CODE is not None and getattr(new, "__code__", None) is _DYNAMO_WRAP_CODE \
        and getattr(new, "__wrapped__", None) is old


def diff_snapshots(before: dict, after: dict) -> list[str]:
    """What the solution replaced, rewrote, added or removed, as 'torch.allclose replaced' lines
    ('... rewritten' where only a Python function's code or defaults changed)."""
    out: list[str] = []
    for label, b in before["ids"].items():
        a = after["ids"].get(label, {})
        for n, i in b.items():
            if n in a and a[n] != i:
                old = before.get("objs", {}).get(label, {}).get(n)
                new = after.get("objs", {}).get(label, {}).get(n)
                if old is not None and _torch_own_wrap(old, new):
                    continue
                same_obj = isinstance(i, tuple) and isinstance(a[n], tuple) and i[0] == a[n][0]
                out.append(f"{label}.{n} {'rewritten (code or defaults)' if same_obj else 'replaced'}")
            elif n not in a and label not in ("torch", "torch._C", "builtins", "sys"):
                out.append(f"{label}.{n} removed")
        if label not in ("torch", "torch._C", "sys", "builtins"):  # lazily loaded submodules add names to `torch`
            for n in a:
                if n not in b and n not in _BENIGN_ADDED:
                    out.append(f"{label}.{n} added")
    for k, v in before["flags"].items():
        if after["flags"].get(k) != v:
            out.append(f"flag {k}: {v!r} -> {after['flags'].get(k)!r}")
    return out


# ---------------------------------------------------------------- serialization
class Store:
    """The child's objects and slots, and how values cross: request arguments resolved to the objects
    the solution is called with (`resolve`), results exported to what the parent loads (`export`,
    `save`), and the requests that only move or inspect values (put, write, load, delete, meta,
    snap, recycle, state, setglobals).  Nothing here calls the solution."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.slots: dict[str, object] = {}
        self.objs: dict[str, object] = {}
        self.modules: dict[str, types.ModuleType] = {}
        self.pristine: dict[str, object] = {}  # what each input slot held when the parent last set it
        self.export_on_device = False  # set per request that asks for IPC results
        self.ipc_hold: list = []   # GPU copies the parent is mapping over CUDA IPC (until the next request)


    def remember(self, k: str) -> None:
        v = self.slots.get(k)
        if _is_tensor(v):
            self.pristine[k] = _clone(_detach(v))
        else:
            self.pristine.pop(k, None)

    def unchanged(self, k: str) -> bool:
        """The slot still holds, bit for bit, what the parent last put or wrote there."""
        a, b = self.slots.get(k), self.pristine.get(k)
        if not (_is_tensor(a) and _is_tensor(b)) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if _equal(a, b):
            return True
        if a.numel() == 0:  # pragma: no cover - equal() is true for empty tensors
            return True
        # NaN != NaN: compare the bytes (same NaN payload counts as unchanged)
        return _equal(_view(_reshape(_contig(a), (-1,)), torch.uint8), _view(_reshape(_contig(b), (-1,)), torch.uint8))

    def resolve(self, spec, env: dict | None = None):
        """A request argument -> the value the solution is called with.  `env` holds the variables
        of a `wall` program ({"var": name}) and its trial number ({"trial_plus": base})."""
        if isinstance(spec, dict):
            if "slot" in spec:
                v = self.slots[spec["slot"]]
                for i in spec.get("index", []):
                    v = v[i]
                return self.deepclone(v) if spec.get("clone") else v
            if "var" in spec:
                v = env[spec["var"]]
                for i in spec.get("index", []):
                    v = v[i]
                return v
            if "trial_plus" in spec:
                return int(spec["trial_plus"]) + int(env.get("__trial__", 0))
            if "obj" in spec:
                return self.objs[spec["obj"]]
            if "lit" in spec:
                return spec["lit"]
            if "list" in spec:
                return [self.resolve(s, env) for s in spec["list"]]
            if "tuple" in spec:
                return tuple(self.resolve(s, env) for s in spec["tuple"])
            if "dict" in spec:
                return {k: self.resolve(v, env) for k, v in spec["dict"].items()}
            if "dtype" in spec:
                return getattr(torch, spec["dtype"])
            if "call_ref" in spec:  # a constructor argument only `reference` can make (a Config)
                fn = getattr(importlib.import_module("reference"), spec["call_ref"])
                val = fn(*[self.resolve(a, env) for a in spec.get("args", [])],
                         **{k: self.resolve(v, env) for k, v in spec.get("kwargs", {}).items()})
                return val[spec["index"]] if "index" in spec else val
        return spec

    def deepclone(self, x):
        if _is_tensor(x):
            return _clone(x)
        if isinstance(x, list):
            return [self.deepclone(v) for v in x]
        if isinstance(x, tuple):
            return tuple(self.deepclone(v) for v in x)
        if isinstance(x, dict):
            return {k: self.deepclone(v) for k, v in x.items()}
        return x

    def to_device(self, x):
        if _is_tensor(x):
            return _to(x, self.device)
        if isinstance(x, list):
            return [self.to_device(v) for v in x]
        if isinstance(x, tuple):
            return tuple(self.to_device(v) for v in x)
        if isinstance(x, dict):
            return {k: self.to_device(v) for k, v in x.items()}
        return x

    def export(self, x, opaque_prefix: str, path: tuple = ()):  # -> weights_only-loadable value
        if _is_tensor(x):
            d = _detach(x)
            if d.device.type == "cpu":
                v = _clone(d)
            else:  # .to("cpu") already copies; over IPC pack_save makes the device copy
                v = d if self.export_on_device else _to(d, "cpu")
            if type(x) is not _TensorType and not isinstance(x, torch.nn.Parameter):
                return {"__subclass__": type(x).__name__, "value": v}
            return v
        if isinstance(x, (bool, int, float, str)) or x is None:
            return x
        if isinstance(x, (list, tuple)):
            vals = [self.export(v, opaque_prefix, path + (i,)) for i, v in enumerate(x)]
            return vals if isinstance(x, list) else tuple(vals)
        if isinstance(x, dict) and all(isinstance(k, (str, int)) for k in x):
            return {k: self.export(v, opaque_prefix, path + (k,)) for k, v in x.items()}
        name = opaque_prefix + "/" + "/".join(map(str, path))
        self.objs[name] = x
        return {"__opaque__": name, "type": type(x).__name__}

    @staticmethod
    def meta(t) -> dict:
        if not _is_tensor(t):
            # containers (a list of per-layer state dicts): the object's id() and the data_ptr of
            # every tensor inside, so a probe can tell whether new state landed on dead storage
            ptrs: list[int] = []
            todo = [t]
            while todo and len(ptrs) < 256:
                x = todo.pop()
                if _is_tensor(x):
                    ptrs.append(_data_ptr(x))
                elif isinstance(x, (list, tuple)):
                    todo.extend(reversed(x))
                elif isinstance(x, dict):
                    todo.extend(reversed(list(x.values())))
            return {"type": type(t).__name__, "id": id(t), "ptrs": ptrs}
        return {"ptr": _data_ptr(t), "version": int(t._version), "shape": list(t.shape),
                "stride": list(t.stride()), "dtype": str(t.dtype), "device": str(t.device)}

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            _sync()

    def attr(self, path: str):
        mod, _, attr = path.partition(":")
        obj = self.modules[mod] if mod in self.modules else importlib.import_module(mod)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

    def call_target(self, fn):
        if "obj" in fn:
            obj = self.objs[fn["obj"]]
            m = fn.get("method")
            return getattr(obj, m) if m else obj
        return self.attr(fn["attr"])

    def load_state(self, path: str):
        """A state dict the parent wrote (`Exchange.state_file`): on a GPU its tensors may come as CUDA
        IPC handles of the parent's copies (the parent's counters: ref_owner None, as in op_put)."""
        on_gpu = str(self.device).startswith("cuda")
        return load_any(path, map_location=self.device, ipc=on_gpu, ref_owner=None)

    def save(self, payload, req) -> None:
        """Results to the parent: torch.save, the pack format, or the pack format with the GPU
        tensors as CUDA IPC handles (`ipc`: no device-to-host copy, no bytes in the file)."""
        if req.get("fmt") != "pack":
            save_exchange(payload, req["save"])
        else:
            pack_save(payload, req["save"], ipc_hold=self.ipc_hold if req.get("ipc") else None)

    def op_setglobals(self, req):
        mod = importlib.import_module(req["module"])
        for k, v in req.get("values", {}).items():
            setattr(mod, k, v)
        return {}

    def op_meta(self, req):
        return {"ids": {k: id(self.objs[k]) for k in req.get("objs", []) if k in self.objs},
                "slots": {k: self.meta(self.slots[k]) for k in req.get("slots", []) if k in self.slots}}

    def op_put(self, req):
        # `share`: the tensors stay in the parent's memory (a shared mapping of the file, or the
        # parent's own GPU tensors over IPC), so the parent can see any write into them.  "file"
        # in the reply: the file mapped ([st_dev, st_ino] of the descriptor read), which the parent
        # compares with the one it wrote (a name swapped in between is a decoy the parent would
        # not be watching)
        share = bool(req.get("share"))
        with open_exchange(req["file"], "r+b" if share else "rb") as f:
            st = os.fstat(f.fileno())
            data = load_any(f, ipc=bool(req.get("ipc")) and self.device.startswith("cuda"), share=share,
                            ref_owner=None)   # the parent's counters: nothing of the host's for it to reach
        for k, v in data.items():
            self.slots[k] = self.to_device(v)
            self.remember(k)
        self.sync()
        return {"slots": {k: self.meta(self.slots[k]) for k in data}, "file": [st.st_dev, st.st_ino]}

    def op_write(self, req):
        """Overwrite existing tensors in place: same storage, same data_ptr.

        `_version`: a module's parameters and buffers ("<obj>::<name>") are written with `copy_`
        under no_grad, which bumps their `_version` as the deck's own weight mutation does
        (numeric_stress's state_scales); inputs and state tensors through a `.data` alias, which
        keeps it (the deck's same-storage property mutation).  `version: "bump" | "keep"` in the
        request overrides both."""
        data = load_any(req["file"])
        targets = req.get("targets") or {}
        force = req.get("version")
        out = {}
        for k, v in data.items():
            if k in targets:  # a tensor inside a slot: {"slot": s, "index": [1, 0, "S"]}
                dst = self.resolve(targets[k])
            elif "::" in k:  # "<obj>::<param or buffer name>" writes into a module's state
                oname, pname = k.split("::", 1)
                mod = self.objs[oname]
                named = dict(mod.named_parameters())
                named.update(dict(mod.named_buffers()))
                dst = named[pname]
            else:
                dst = self.slots[k]
            if not _is_tensor(dst):
                raise TypeError(f"write target {k} is {type(dst).__name__}, not a tensor")
            ptr, ver = _data_ptr(dst), int(dst._version)
            bump = force == "bump" or (force != "keep" and "::" in k and k not in targets)
            with _no_grad():
                _copy(dst if bump else dst.data, _to(v, dst.device))
            if "::" not in k:
                self.remember(targets[k]["slot"] if k in targets else k)
            out[k] = {"ptr_before": ptr, "ptr_after": _data_ptr(dst), "version_before": ver,
                      "version": int(dst._version)}
        self.sync()
        return {"written": out}

    def op_load(self, req):
        """load_state_dict into an existing module, as check.py reloads one model per seed
        (copy_ into the same parameters: data_ptr kept, _version bumped)."""
        mod = self.objs[req["obj"]]
        sd = self.load_state(req["state_dict"])
        res = mod.load_state_dict(sd, strict=req.get("strict", True))
        self.sync()
        return {"missing": list(getattr(res, "missing_keys", [])),
                "unexpected": list(getattr(res, "unexpected_keys", []))}

    def op_delete(self, req):
        """Drop slots and objects; a full collection only where one of them outlived the drop (held in
        a cycle, or not weak-referenceable to tell), so a dead object's memory and id() are free when
        the reply goes (fresh-state builds on them), without a collection per delete where nothing
        needs one."""
        import weakref
        gone = [self.slots.pop(k, None) for k in req.get("slots", [])]
        for k in req.get("objs", []):
            for name in [n for n in self.objs if n == k or n.startswith(k + "/")]:
                gone.append(self.objs.pop(name, None))
        refs, unknown = [], False
        for v in gone:
            if v is None:
                continue
            try:
                refs.append(weakref.ref(v))
            except TypeError:
                unknown = True
        del gone, v
        if unknown or any(r() is not None for r in refs):
            gc.collect()
        return {}

    def op_state(self, req):
        """Current values of a module's parameters and buffers (to see what load_state_dict did)."""
        mod = self.objs[req["obj"]]
        names = req.get("names")
        sd = {k: v for k, v in mod.state_dict().items() if names is None or k in names}
        save_exchange({k: _clone(_to(_detach(v), "cpu")) for k, v in sd.items()}, req["save"])
        return {}

    def op_snap(self, req):
        payload = {k: self.export(self.slots[k], "snap/" + k) for k in req["slots"]}
        self.save(payload, req)
        return {}

    def op_recycle(self, req):
        """Hand the solution slot `slot`'s state (a list of per-layer dicts) in the list and dicts of
        the dead state in slot `dead`: emptied and refilled with the new state's tensors, so the new
        state has the dead one's id()s.  CPython gives a new list a just-freed list's memory, so
        check.py's loop feeds the solution new states on dead ones' ids by chance; this makes it
        certain, and it is the same thing only where nothing but this slot holds the dead objects
        (then no one can tell a refilled object from a new one on its memory).  A dead list the
        solution still holds is not recycled (it could not have died); a dict it holds is not
        reused (the new state gets its own)."""
        new = self.slots.pop(req["slot"])
        dead = self.slots.pop(req["dead"])
        if not (isinstance(new, list) and isinstance(dead, list)):
            self.slots[req["slot"]] = new
            raise TypeError(f"states are {type(new).__name__} and {type(dead).__name__}, not lists")
        gc.collect()   # cycles through the dead state go first
        if sys.getrefcount(dead) > 2:   # `dead` here and getrefcount's own argument
            self.slots[req["slot"]] = new
            return {"recycled": False, "why": "the dead state is still held (by the solution)"}
        items, reused = [], 0
        for i, x in enumerate(new):
            old = dead[i] if i < len(dead) else None
            # held by the dead list, `old` and getrefcount's argument only: free to refill
            if isinstance(x, dict) and isinstance(old, dict) and sys.getrefcount(old) == 3:
                old.clear()
                old.update(x)
                x, reused = old, reused + 1
            items.append(x)
        old = None
        dead[:] = items
        del items, new
        self.slots[req["slot"]] = dead
        return {"recycled": True, "items_reused": reused, "meta": self.meta(dead)}


class Timing:
    """The timing requests: the deck's calling pattern with the outputs of the timed calls kept
    (bench), CUDA events around each call with an L2 flush and the persisting-L2 reset (time), a
    short program timed by wall clock (wall), and the kernels a call launches (trace)."""

    def __init__(self, store: Store, tampered: list[str]) -> None:
        self.store = store
        self.tampered = tampered   # the worker's list: torch patches seen while timing
        self.flush_buf = None
        self.cudart = None


    def _cudart(self):
        if self.cudart is not None:
            return self.cudart
        paths = []
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    if "libcudart" in line:
                        paths.append(line.split()[-1])
        except OSError:
            pass
        for cand in paths + ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]:
            try:
                self.cudart = ctypes.CDLL(cand)
                return self.cudart
            except OSError:
                continue
        self.cudart = False
        return False

    def reset_persisting_l2(self) -> dict:
        rt = self._cudart()
        if not rt:
            return {"ok": False, "reason": "libcudart not found"}
        r1 = rt.cudaCtxResetPersistingL2Cache()
        r2 = rt.cudaDeviceSetLimit(ctypes.c_int(0x06), ctypes.c_size_t(0))  # cudaLimitPersistingL2CacheSize
        return {"ok": r1 == 0 and r2 == 0, "reset_rc": int(r1), "limit_rc": int(r2)}

    def op_bench(self, req):
        """Run the solution as the deck's benchmark does: `time_variant(sol_model, inputs, ...)` called
        from a `main()` of `benchmark.py`, then `time_fn` of `src/eval/timing.py`: `warmup` calls,
        then `iters` timed calls on the SAME input tensors, each after an L2 flush and a sync,
        between CUDA events (CPU: perf_counter).  The frames carry those names and file names,
        sys.argv[0] is benchmark.py, and the module itself is called (Module.__call__), so a
        solution that looks for the harness (call stack, argv, call counts, events) sees it.  The
        outputs of the timed calls listed in `capture` are cloned after their timing and handed
        back (`save`), so the parent can check what the timed path computed."""
        target = self.store.call_target(req["fn"])
        args = [self.store.resolve(a) for a in req.get("args", [])]
        warmup, iters = int(req.get("warmup", 10)), int(req.get("iters", 30))
        capture = {int(i) % max(iters, 1) for i in req.get("capture", [])}
        cuda = self.store.device.startswith("cuda")
        if cuda:
            nbytes = int(req.get("flush_bytes") or 128 * 2**20)
            if self.flush_buf is None or self.flush_buf.numel() * 4 < nbytes:
                self.flush_buf = _empty(nbytes // 4, dtype=torch.float32, device=self.store.device)
        kept: dict = {}

        def capture_fn(it, out):
            if it in capture:
                kept[it] = self.store.deepclone(out)

        ns = _bench_namespace(self, cuda, capture_fn)
        cwd = os.getcwd()
        if _AUDIT is not None:   # the benchmark frames compiled here are the harness's, not the solution's
            _AUDIT[1]["worker_files"].update({os.path.join(cwd, "src", "eval", "timing.py"),
                                              os.path.join(cwd, "benchmark.py")})
        exec(compile(_TIMING_SRC, os.path.join(cwd, "src", "eval", "timing.py"), "exec"), ns)  # noqa: S102
        main_ns = {"__name__": "__main__", "__file__": os.path.join(cwd, "benchmark.py"),
                   "time_variant": ns["time_variant"], "sol_model": target, "inputs": args, "iters": iters,
                   "warmup": warmup}
        exec(compile(_BENCH_MAIN_SRC, os.path.join(cwd, "benchmark.py"), "exec"), main_ns)  # noqa: S102
        before = snapshot()
        argv = list(sys.argv)
        sys.argv[:] = [os.path.join(cwd, "benchmark.py")]
        try:
            times = main_ns["main"]()
        finally:
            sys.argv[:] = argv
        tamper = diff_snapshots(before, snapshot())
        self.tampered.extend(tamper)
        payload = {"outs": [self.store.export(kept[i], f"bench{req['id']}/{i}") for i in sorted(kept)],
                   "iters": sorted(kept)}
        self.store.save(payload, req)
        return {"ms_all": times, "captured": sorted(kept), "tamper": tamper,
                "method": "cuda_events" if cuda else "perf_counter"}

    def op_trace(self, req):
        """Call the target `warmup` times untraced (builds, autotuning), then `iters` times under the
        torch profiler, and hand back every kernel (GPU) or operator (CPU) it ran with its count and
        its own time: names and numbers only, judged by the parent."""
        target = self.store.call_target(req["fn"])
        args = [self.store.resolve(a) for a in req.get("args", [])]
        warmup, iters = int(req.get("warmup", 1)), max(1, int(req.get("iters", 3)))
        cuda = self.store.device.startswith("cuda")
        acts = [_ProfilerActivity.CPU] + ([_ProfilerActivity.CUDA] if cuda else [])
        with _profile(activities=acts):
            pass   # the profiler's first use replaces torch.manual_seed: not the solution's doing
        before = snapshot()
        with _no_grad():
            with _traced(profile=True) as warm_path:
                for _ in range(warmup):
                    target(*args)
                self.store.sync()
            with _traced(profile=True) as path, _profile(activities=acts) as prof:
                for _ in range(iters):
                    target(*args)
                self.store.sync()
        rows = []
        for ev in prof.key_averages():
            dev = getattr(ev, "self_device_time_total", None)
            if dev is None:
                dev = getattr(ev, "self_cuda_time_total", 0)
            on_device = str(getattr(ev, "device_type", "")).endswith("CUDA")
            if cuda and not on_device:
                continue   # an operator's row repeats its kernels' device time: kernels only
            t = float(dev or 0) if cuda else float(getattr(ev, "self_cpu_time_total", 0) or 0)
            if t <= 0:
                continue
            rows.append({"name": str(ev.key)[:400], "calls": int(ev.count), "us": round(t, 3)})
        rows.sort(key=lambda r: -r["us"])
        return {"kernels": rows[:200], "iters": iters, "clock": "device" if cuda else "cpu",
                "tamper": diff_snapshots(before, snapshot()), "path": path, "warmup_path": warm_path,
                "first_calls_path": {"exceptions": list(_EARLY)}, "traced": _TRACER is not None}

    def op_time(self, req):
        target = self.store.call_target(req["fn"])
        args = [self.store.resolve(a) for a in req.get("args", [])]
        kwargs = {k: self.store.resolve(v) for k, v in req.get("kwargs", {}).items()}
        warmup, iters = int(req.get("warmup", 10)), int(req.get("iters", 30))
        l2_reset = bool(req.get("l2_reset"))
        cuda = self.store.device.startswith("cuda")
        info: dict = {"method": "cuda_events" if cuda else "perf_counter"}
        if cuda:
            nbytes = int(req.get("flush_bytes") or 256 * 2**20)
            if self.flush_buf is None or self.flush_buf.numel() * 4 < nbytes:
                self.flush_buf = _empty(nbytes // 4, dtype=torch.float32, device=self.store.device)
            info["flush_bytes"] = self.flush_buf.numel() * 4
        times = []
        resets = []
        before = snapshot()
        with _no_grad():
            for _ in range(warmup):
                target(*args, **kwargs)
            self.store.sync()
            for _ in range(iters):
                if l2_reset and cuda:
                    resets.append(self.reset_persisting_l2())
                if cuda:
                    _zero(self.flush_buf)
                    _sync()
                    s, e = _Event(enable_timing=True), _Event(enable_timing=True)
                    s.record()
                    target(*args, **kwargs)
                    e.record()
                    _sync()
                    times.append(s.elapsed_time(e))
                else:
                    t0 = _perf()
                    target(*args, **kwargs)
                    times.append((_perf() - t0) * 1e3)
        info["ms"] = _median(times)
        info["ms_all"] = times
        if resets:
            info["l2_reset"] = resets[0]
            info["l2_reset_ok"] = all(r.get("ok") for r in resets)
        info["tamper"] = diff_snapshots(before, snapshot())
        return info

    def run_program(self, program: list, trial: int) -> float | None:
        """Run the steps in order; return the wall seconds of the timed ones (None if none).

        A step: {"fn": target, "args": [...], "kwargs": {...}, "set": name | [names],
        "loop": n, "timed": bool}.  Arguments may name earlier results ({"var": name}) and the
        trial ({"trial_plus": base}).  The timed steps must be contiguous; the clock starts after
        a device sync and stops after one (the decks' perf_counter between synchronize calls)."""
        env: dict = {"__trial__": trial}
        t0 = t1 = None
        for st in program:
            timed = bool(st.get("timed", True))
            if timed and t0 is None:
                self.store.sync()
                t0 = _perf()
            elif not timed and t0 is not None and t1 is None:
                self.store.sync()
                t1 = _perf()
            fn = self.store.call_target(st["fn"])
            for _ in range(int(st.get("loop", 1))):
                args = [self.store.resolve(a, env) for a in st.get("args", [])]
                kwargs = {k: self.store.resolve(v, env) for k, v in st.get("kwargs", {}).items()}
                res = fn(*args, **kwargs)
                names = st.get("set")
                if isinstance(names, list):
                    for n, v in zip(names, res):
                        env[n] = v
                elif names:
                    env[names] = res
        if t0 is not None and t1 is None:
            self.store.sync()
            t1 = _perf()
        return None if t0 is None else t1 - t0

    def op_wall(self, req):
        before = snapshot()
        times = []
        with _no_grad():
            if req.get("warmup"):
                self.run_program(req["warmup"], -1)
            for t in range(int(req.get("trials", 3))):
                times.append(self.run_program(req["program"], t))
        return {"s_all": times, "method": "perf_counter" + (" + cuda.synchronize" if self.store.device.startswith("cuda") else ""),
                "tamper": diff_snapshots(before, snapshot())}


class Worker:
    """The request loop (`serve`) and the requests that run the solution's code: import, new, call;
    timing is `Timing`'s, moving values `Store`'s.  -> one JSON reply per request."""

    def __init__(self, rfd: int, wfd: int, device: str) -> None:
        self.rf = os.fdopen(rfd, "r", encoding="utf-8")
        self.wf = os.fdopen(wfd, "w", encoding="utf-8")
        self.base_snapshot = snapshot()
        self.tampered: list[str] = []
        self.store = Store(device)
        self.timing = Timing(self.store, self.tampered)
        self.ops = {name[3:]: getattr(part, name) for part in (self.store, self.timing, self)
                    for name in dir(part) if name.startswith("op_")}


    def op_hello(self, req):
        info = {"torch": torch.__version__, "python": sys.version.split()[0], "pid": os.getpid(),
                "cuda": torch.cuda.is_available(), "device": self.store.device}
        if self.store.device.startswith("cuda") and torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            info.update(gpu=p.name, capability=list(torch.cuda.get_device_capability(0)),
                        l2_bytes=int(getattr(p, "L2_cache_size", 0)), sm_count=p.multi_processor_count,
                        arch_list=torch.cuda.get_arch_list())
        return info

    def op_ipc_test(self, req):
        """A known tensor through the IPC path, so the parent can decide whether IPC works here."""
        self.store.save({"t": torch.arange(IPC_TEST_N, dtype=torch.float32, device=self.store.device)}, dict(req, fmt="pack", ipc=True))
        return {}

    def op_import(self, req):
        name = req["module"]
        if name == "solution" and os.environ.get(NVIDIA_FILE_ENV) == "1":
            _give_nvidia_a_file()
        if name == "solution" and os.environ.get(ARCH_REBUILD_ENV, "1") != "0" \
                and self.store.device.startswith("cuda") and torch.cuda.is_available():
            _install_arch_rebuild(tuple(torch.cuda.get_device_capability(0)))
        before = snapshot()
        with _traced() as path:
            mod = importlib.import_module(name)
        self.store.modules[name] = mod
        after = snapshot()
        changes = diff_snapshots(before, after)
        self.tampered.extend(changes)
        return {"tamper": changes, "file": getattr(mod, "__file__", None), "path": path,
                "attrs": sorted(n for n in vars(mod) if not n.startswith("_"))[:200]}

    def op_new(self, req):
        """Construct an object (``solution:Model``) and optionally load a state dict into it."""
        factory = self.store.attr(req["factory"])
        args = [self.store.resolve(a) for a in req.get("args", [])]
        kwargs = {k: self.store.resolve(v) for k, v in req.get("kwargs", {}).items()}
        old_id = None
        kept_alive = False
        gc_was = gc.isenabled()
        gc.disable()  # an automatic collection would reshuffle the allocator's free list
        try:
            if req.get("replace") and req["obj"] in self.store.objs:
                # drop the old object right before building the new one, so CPython may hand the
                # new object the dead one's id() (the fresh-state probe wants exactly that)
                old_id = id(self.store.objs[req["obj"]])
                for name in [n for n in self.store.objs if n.startswith(req["obj"] + "/")]:
                    self.store.objs.pop(name, None)
                probe = None
                try:
                    import weakref
                    probe = weakref.ref(self.store.objs[req["obj"]])
                except TypeError:
                    pass
                del self.store.objs[req["obj"]]
                if probe is not None and probe() is not None:  # kept alive by a cycle: collect it
                    kept_alive = True
                    gc.collect()
            attempts = int(req.get("reuse_attempts", 0)) if old_id is not None else 0
            obj = self._on_dead_id(factory, args, kwargs, old_id) if attempts else None
            placed = obj is not None
            path: dict = {}
            if obj is None:
                with _traced() as path:
                    obj = factory(*args, **kwargs)
            spare = []
            for _ in range(0 if placed else attempts):
                if id(obj) == old_id:
                    break
                spare.append(obj)   # keep it alive so the next construction takes another slot
                obj = factory(*args, **kwargs)
            del spare
        finally:
            if gc_was:
                gc.enable()
        info: dict = {"type": type(obj).__name__, "path": path}
        if isinstance(obj, torch.nn.Module):
            obj = obj.to(self.store.device)
            if req.get("state_dict"):
                sd = self.store.load_state(req["state_dict"])
                res = obj.load_state_dict(sd, strict=req.get("strict", True))
                info["missing"] = list(getattr(res, "missing_keys", []))
                info["unexpected"] = list(getattr(res, "unexpected_keys", []))
            obj.eval()
            info["state_keys"] = list(obj.state_dict().keys())
        self.store.objs[req["obj"]] = obj
        info["obj_id"] = id(obj)
        info["old_id"] = old_id
        info["old_kept_alive"] = kept_alive
        info["placed_on_dead_id"] = placed
        self.store.sync()
        return info

    @staticmethod
    def _on_dead_id(factory, args, kwargs, old_id, tries: int = 4096):
        """Build `factory(*args)` on the dead object's id(), or return None.

        Freeing the old object does not always make its memory the next one handed out (its
        allocator pool may have emptied), so bare instances are allocated with `cls.__new__` until
        one lands on the dead id; that one is initialised (`type.__call__` does the same two steps)
        and the others are freed.  Only for plain classes whose constructor is type.__call__."""
        if not isinstance(factory, type) or type(factory).__call__ is not type.__call__:
            return None
        spare = []
        try:
            for _ in range(tries):
                try:
                    o = factory.__new__(factory)
                except Exception:  # noqa: BLE001 - a __new__ that needs arguments: the ordinary way
                    return None
                if id(o) == old_id:
                    break
                spare.append(o)
            else:
                return None
        finally:
            del spare
        factory.__init__(o, *args, **kwargs)
        return o

    def poison(self, nbytes_list: list[int]) -> dict:
        """Make memory a solution allocates and never writes recognisable.  CUDA: fill freed blocks of
        the caching allocator with 0xFF bytes (NaN for every float format, -1 for integers) so
        torch.empty hands them out.  CPU: torch's own fill of uninitialized memory (deterministic
        algorithms with `fill_uninitialized_memory`: NaN for floats, the largest value for integers),
        turned on for this call only (`_unpoison` turns it off), warnings only."""
        if not self.store.device.startswith("cuda"):
            try:
                import torch.utils.deterministic as _det
                self._unpoison_state = (torch.are_deterministic_algorithms_enabled(),
                                        torch.is_deterministic_algorithms_warn_only_enabled(),
                                        bool(_det.fill_uninitialized_memory))
                torch.use_deterministic_algorithms(True, warn_only=True)
                _det.fill_uninitialized_memory = True
            except Exception as e:  # noqa: BLE001 - an older torch: nothing to poison with
                return {"poisoned": False, "reason": f"CPU: torch cannot fill uninitialized memory ({e})"[:300]}
            return {"poisoned": True, "how": "fill_uninitialized_memory", "float": "nan", "int": "max"}
        blocks = []
        total = 0
        for n in nbytes_list:
            for _ in range(2):
                b = _empty(max(int(n), 512), dtype=torch.uint8, device=self.store.device)
                _fill(b, 0xFF)
                blocks.append(b)
                total += b.numel()
        self.store.sync()
        del blocks
        return {"poisoned": True, "bytes": total, "how": "allocator", "float": "nan", "int": "-1"}

    def _unpoison(self) -> None:
        state, self._unpoison_state = getattr(self, "_unpoison_state", None), None
        if state is None:
            return
        import torch.utils.deterministic as _det
        _det.fill_uninitialized_memory = state[2]
        torch.use_deterministic_algorithms(state[0], warn_only=state[1])

    def op_call(self, req):
        target = self.store.call_target(req["fn"])
        args = [self.store.resolve(a) for a in req.get("args", [])]
        kwargs = {k: self.store.resolve(v) for k, v in req.get("kwargs", {}).items()}
        watch = req.get("watch", [])
        meta_before = {k: self.store.meta(self.store.slots[k]) for k in watch}
        poison = self.poison(req["poison"]) if req.get("poison") else None
        try:
            before = snapshot()
            result = None
            first = _first_call(target)
            t0 = _perf()
            with _no_grad():
                for i in range(int(req.get("repeat", 1))):
                    if first and i == 0:
                        with _traced() as path:      # lazy builds happen here: their failures are kept
                            result = target(*args, **kwargs)
                        _keep_early(path)
                    else:
                        result = target(*args, **kwargs)
            self.store.sync()
            elapsed = _perf() - t0
            changes = diff_snapshots(before, snapshot())
        finally:
            self._unpoison()
        self.tampered.extend(changes)
        if req.get("out_slot"):
            self.store.slots[req["out_slot"]] = result
        shown = result
        for i in req.get("export_index", []):  # export only a part (a chain's hidden, not its state)
            shown = shown[i]
        payload = {"out": self.store.export(shown, req.get("out_slot") or f"ret{req['id']}")}
        # with fmt=pack only the inputs that changed travel back (the rest are what the parent sent)
        keep = [k for k in req.get("save_inputs", [])
                if req.get("fmt") != "pack" or k not in self.store.pristine or not self.store.unchanged(k)]
        payload["inputs_after"] = {k: self.store.export(self.store.slots[k], "in/" + k) for k in keep}
        for k in keep:
            if k in self.store.pristine:
                self.store.remember(k)
        if req.get("save"):
            self.store.save(payload, req)
        meta_after = {k: self.store.meta(self.store.slots[k]) for k in watch}
        return {"tamper": changes, "elapsed_s": elapsed, "meta_before": meta_before,
                "meta_after": meta_after, "poison": poison}

    def op_tamper(self, req):
        return {"tamper": diff_snapshots(self.base_snapshot, snapshot())}

    def op_bye(self, req):
        return {"done": True, "tamper": diff_snapshots(self.base_snapshot, snapshot()), "gpu_peak_gb": _gpu_peak_gb()}

    def reply(self, msg: dict) -> None:
        if ARCH_REBUILT:   # a build rewritten for this GPU since the last reply (the parent records it)
            msg["arch_rebuilt"] = ARCH_REBUILT[:]
            ARCH_REBUILT.clear()
        self.wf.write(json.dumps(msg, default=repr) + "\n")
        self.wf.flush()

    def serve(self) -> int:
        for line in self.rf:
            req = json.loads(line)
            rid = req.get("id")
            _heartbeat(rid)
            if self.store.ipc_hold:  # the parent copied the last shared outputs before asking again
                self.store.ipc_hold.clear()
                _ipc_collect()
            op = self.ops.get(req.get("op", ""))
            self.store.export_on_device = (bool(req.get("ipc")) and req.get("fmt") == "pack"
                                           and self.store.device.startswith("cuda"))
            if op is None:
                self.reply({"id": rid, "ok": False, "status": "error", "error": f"unknown op {req.get('op')}"})
                continue
            try:
                res = op(req)
                res.update(id=rid, ok=True, status="ok")
                self.reply(res)
            except SystemExit as e:  # sys.exit()/exit() from the solution, caught before it ends us
                self.reply({"id": rid, "ok": False, "status": "early_exit",
                            "error": f"SystemExit({e.code!r}) raised before normal completion",
                            "tb": _tb()})
            except BaseException as e:  # noqa: BLE001 - anything from the solution is data
                self.reply({"id": rid, "ok": False, "status": "error",
                            "error": f"{type(e).__name__}: {e}"[:4000], "tb": _tb()})
            if req.get("op") == "bye":
                return 0
        return 3  # parent closed the pipe without 'bye'


# The deck benchmark's calling pattern (the replay contract's timing section: 10 warm-up calls, then
# per timed call an L2 flush, a sync, events around the call, a sync), as code compiled under the
# deck's file names so the frames the solution can see carry them (Timing.op_bench).
_TIMING_SRC = """
def time_fn(fn, inputs, iters=30, warmup=10):
    for _ in range(warmup):
        with torch.no_grad():
            fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for it in range(iters):
        _l2_flush()
        torch.cuda.synchronize()
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        with torch.no_grad():
            out = fn(*inputs)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
        _keep(it, out)
    return times


def time_variant(fn, inputs, *, shape_idx, variant, iters=30, warmup=10):
    return time_fn(fn, inputs, iters=iters, warmup=warmup)
"""
_BENCH_MAIN_SRC = """
def main():
    return time_variant(sol_model, inputs, shape_idx=0, variant="solution", iters=iters, warmup=warmup)
"""


class _CpuEvent:
    """torch.cuda.Event's timing interface on the CPU clock (a CPU replay of the benchmark loop)."""

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        self.t = _perf()

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3


def _bench_namespace(worker, cuda: bool, keep) -> dict:
    """Globals of the compiled timing module: the pristine torch pieces (the solution may have
    replaced the public ones; those replacements are reported, not used), the L2 flush, `_keep`."""
    if cuda:
        cuda_ns = types.SimpleNamespace(synchronize=_sync, Event=_Event)
        flush = (lambda: _zero(worker.flush_buf))
    else:
        cuda_ns = types.SimpleNamespace(synchronize=lambda *a, **k: None, Event=_CpuEvent)
        flush = (lambda: None)
    torch_ns = types.SimpleNamespace(no_grad=_no_grad, cuda=cuda_ns)
    return {"__name__": "src.eval.timing", "torch": torch_ns, "_l2_flush": flush, "_keep": keep}


#: set to 1 by the replay (buildenv.supply(nvidia_file=True)): the `nvidia` package gets a __file__
NVIDIA_FILE_ENV = "FORENSICS_NVIDIA_FILE"


def _give_nvidia_a_file() -> str | None:
    """Where the Python `nvidia` wheels are a namespace package (no __init__.py, `__file__` None),
    give it the `__file__` a regular package in its directory would have, as on machines where the
    wheels ship an `nvidia/__init__.py`: solutions that find the CUDA headers from
    `os.path.dirname(nvidia.__file__)` then build.  The directory is the namespace portion holding
    the most subpackages (all of them, where every wheel installed into one site-packages).  A
    regular package, or no `nvidia` at all, is left as it is.  -> the path set, or None."""
    try:
        import nvidia
    except ImportError:
        return None
    if getattr(nvidia, "__file__", None):
        return None
    portions = [d for d in getattr(nvidia, "__path__", []) if os.path.isdir(d)]
    if not portions:
        return None
    best = max(portions, key=lambda d: sum(1 for e in os.scandir(d) if e.is_dir()))
    nvidia.__file__ = os.path.join(best, "__init__.py")
    return nvidia.__file__


# ---------------------------------------------------------------- another GPU's arch flags
#: "0": leave a build that pins another GPU's architecture as it is (it then fails: not_replayable)
ARCH_REBUILD_ENV = "FORENSICS_ARCH_REBUILD"
_ARCH_OPT = {"-gencode": "gencode", "--generate-code": "gencode", "-arch": "arch", "--gpu-architecture": "arch",
             "-code": "code", "--gpu-code": "code"}
_ARCH_TARGET = re.compile(r"\b(sm|compute|lto)_(\d+)([af]?)\b")
_ARCH_LIST_ENTRY = re.compile(r"^(\d+)\.(\d)([af]?)(\+PTX)?$")
#: the rewrites made in this process, each sent once with the next reply (`Worker.reply`)
ARCH_REBUILT: list[dict] = []


def _runs_on(target: tuple[str, int, str], host: tuple[int, int]) -> bool:
    """Whether a binary target (kind, cc as in sm_90: 90, suffix) runs on a GPU of capability `host`:
    SASS within its major version at a minor no newer than the GPU's (`a`: that GPU exactly), PTX on
    any GPU at least as new (`a`: exactly; `f`: its major family)."""
    kind, cc, suf = target
    t = (cc // 10, cc % 10)
    if suf == "a":
        return t == tuple(host)
    if kind in ("sm", "lto") or suf == "f":
        return t[0] == host[0] and t[1] <= host[1]
    return t <= tuple(host)


def _arch_groups(tokens: list[str]) -> list[tuple[int, int, str, str]] | None:
    """The nvcc architecture options in `tokens`: (first index, last index, option kind, value).
    None where one cannot be read (a missing value, `native`, `all`): such a build is left alone."""
    out = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, eq, val = tok.partition("=")
        kind = _ARCH_OPT.get(name)
        if kind is None:
            i += 1
            continue
        j = i
        if not eq:
            if i + 1 >= len(tokens):
                return None
            j, val = i + 1, tokens[i + 1]
        if not _ARCH_TARGET.search(val) or re.search(r"\b(native|all|all-major)\b", val):
            return None
        out.append((i, j, kind, val.strip("'\"")))
        i = j + 1
    return out


def _code_targets(groups) -> list[tuple[str, int, str]]:
    """The binaries the options produce: each -gencode's code= entries; -code's; an -arch alone is
    nvcc's shorthand for its SASS and PTX (`-arch=compute_XY` alone: PTX)."""
    targets: list[tuple[str, int, str]] = []
    has_code = any(k == "code" for _, _, k, _ in groups)
    for _, _, kind, val in groups:
        if kind == "gencode":
            code = val.split("code=", 1)[1] if "code=" in val else val
            targets += [(m[0], int(m[1]), m[2]) for m in _ARCH_TARGET.findall(code)]
        elif kind == "code":
            targets += [(m[0], int(m[1]), m[2]) for m in _ARCH_TARGET.findall(val)]
        elif not has_code:
            for m in _ARCH_TARGET.findall(val):
                targets += [("compute", int(m[1]), m[2])] + ([("sm", int(m[1]), m[2])] if m[0] == "sm" else [])
    return targets


def _target_name(t: tuple[str, int, str]) -> str:
    return f"{t[0]}_{t[1]}{t[2]}"


def host_arch_flags(host: tuple[int, int], arch_specific: bool) -> list[str]:
    """nvcc flags building for the GPU of capability `host` (its `a` variant where the build asked for an
    architecture-specific target and the GPU has one, 9.0 and newer)."""
    cc = f"{host[0]}{host[1]}" + ("a" if arch_specific and host[0] >= 9 else "")
    return ["-gencode", f"arch=compute_{cc},code=sm_{cc}"]


def rewrite_arch_flags(flags, host: tuple[int, int]) -> tuple[list[str] | None, dict | None]:
    """nvcc flags that pin GPU architectures of which none runs on a GPU of capability `host` (a
    solution graded on an sm_120 machine passing `-gencode arch=compute_120,code=sm_120`), rewritten to
    build for `host`: every architecture option is removed, the host's appended, every other flag
    kept as it was.  -> (new flags, what changed), or (None, None) where nothing is to be done (no
    architecture option, one that runs here, or one that cannot be read)."""
    if isinstance(flags, str):
        flags = [flags]
    if not isinstance(flags, (list, tuple)) or not all(isinstance(f, str) for f in flags):
        return None, None
    tokens: list[str] = []
    owner: list[int] = []
    for k, f in enumerate(flags):
        for t in f.split():
            tokens.append(t)
            owner.append(k)
    groups = _arch_groups(tokens)
    if not groups:
        return None, None
    targets = _code_targets(groups)
    if not targets or any(_runs_on(t, host) for t in targets):
        return None, None
    drop = {i for a, b, _, _ in groups for i in range(a, b + 1)}
    kept: dict[int, list[str]] = {}
    for i, t in enumerate(tokens):
        if i not in drop:
            kept.setdefault(owner[i], []).append(t)
    new = []
    for k, f in enumerate(flags):
        if not any(owner[i] == k and i in drop for i in range(len(tokens))):
            new.append(f)                      # untouched flags exactly as given
        elif kept.get(k):
            new.append(" ".join(kept[k]))
    added = host_arch_flags(host, any(t[2] == "a" for t in targets))
    new += added
    return new, {"targets": sorted({_target_name(t) for t in targets}), "removed": [tokens[i] for i in sorted(drop)],
                 "added": added, "host": f"sm_{host[0]}{host[1]}"}


def rewrite_arch_list(value, host: tuple[int, int]) -> tuple[str | None, dict | None]:
    """TORCH_CUDA_ARCH_LIST naming only architectures no binary of which runs on a GPU of capability
    `host` ("12.0", "10.0a;12.0+PTX") -> (the host's, what changed), else (None, None) (also for
    names this cannot read: "Blackwell", "native")."""
    if not isinstance(value, str) or not value.strip():
        return None, None
    targets = []
    for e in re.split(r"[;\s,]+", value.strip()):
        m = _ARCH_LIST_ENTRY.match(e)
        if not m:
            return None, None
        cc = int(m[1]) * 10 + int(m[2])
        targets.append(("sm", cc, m[3]))
        if m[4]:
            targets.append(("compute", cc, m[3]))
    if any(_runs_on(t, host) for t in targets):
        return None, None
    new = f"{host[0]}.{host[1]}" + ("a" if any(t[2] == "a" for t in targets) and host[0] >= 9 else "")
    return new, {"targets": sorted({_target_name(t) for t in targets}), "removed": [f"TORCH_CUDA_ARCH_LIST={value}"],
                 "added": [f"TORCH_CUDA_ARCH_LIST={new}"], "host": f"sm_{host[0]}{host[1]}"}


def _install_arch_rebuild(host: tuple[int, int]) -> None:
    """Build another GPU's extension for this one: torch.utils.cpp_extension's `load` and `load_inline`
    (`extra_cuda_cflags`), `CUDAExtension` (`extra_compile_args["nvcc"]`) and the architecture list
    it reads from TORCH_CUDA_ARCH_LIST (`_get_cuda_arch_flags`) get their architecture options
    rewritten (`rewrite_arch_flags`, `rewrite_arch_list`) where none of them runs here; each rewrite
    is recorded (ARCH_REBUILT) and reported with the next reply.  nvcc run by the solution itself
    (a subprocess) is not rewritten: that build stays as it is."""
    try:
        import torch.utils.cpp_extension as ce
    except Exception:  # noqa: BLE001 - no cpp_extension, nothing to rewrite
        return
    import functools
    import inspect

    def note(where: str, change: dict) -> None:
        ARCH_REBUILT.append(dict(change, where=where))

    def wrap_kw(name: str, param: str):
        orig = getattr(ce, name, None)
        if orig is None or getattr(orig, "_replay_arch", False):
            return
        sig = inspect.signature(orig)

        @functools.wraps(orig)
        def wrapped(*args, **kwargs):
            try:
                ba = sig.bind_partial(*args, **kwargs)
            except TypeError:
                return orig(*args, **kwargs)
            new, change = rewrite_arch_flags(ba.arguments.get(param), host)
            if new is not None:
                ba.arguments[param] = new
                note(f"{name}({param})", change)
            return orig(*ba.args, **ba.kwargs)
        wrapped._replay_arch = True
        setattr(ce, name, wrapped)

    wrap_kw("load", "extra_cuda_cflags")
    wrap_kw("load_inline", "extra_cuda_cflags")
    ext = getattr(ce, "CUDAExtension", None)
    if ext is not None and not getattr(ext, "_replay_arch", False):
        @functools.wraps(ext)
        def cuda_extension(*args, **kwargs):
            eca = kwargs.get("extra_compile_args")
            if isinstance(eca, dict) and "nvcc" in eca:
                new, change = rewrite_arch_flags(eca["nvcc"], host)
                if new is not None:
                    kwargs["extra_compile_args"] = dict(eca, nvcc=new)
                    note("CUDAExtension(extra_compile_args['nvcc'])", change)
            return ext(*args, **kwargs)
        cuda_extension._replay_arch = True
        ce.CUDAExtension = cuda_extension
    gaf = getattr(ce, "_get_cuda_arch_flags", None)
    if gaf is not None and not getattr(gaf, "_replay_arch", False):
        @functools.wraps(gaf)
        def get_cuda_arch_flags(*args, **kwargs):
            val = os.environ.get("TORCH_CUDA_ARCH_LIST")
            new, change = rewrite_arch_list(val, host)
            if new is None:
                return gaf(*args, **kwargs)
            os.environ["TORCH_CUDA_ARCH_LIST"] = new
            try:
                out = gaf(*args, **kwargs)
            finally:
                os.environ["TORCH_CUDA_ARCH_LIST"] = val
            if out:     # [] where the flags carry architecture options of their own: the list is unused
                note("TORCH_CUDA_ARCH_LIST", change)
            return out
        get_cuda_arch_flags._replay_arch = True
        ce._get_cuda_arch_flags = get_cuda_arch_flags


def _gpu_peak_gb() -> float | None:
    """The most GPU memory this process's caching allocator held (GiB), None without CUDA.  The
    bench sizes how many replays share a GPU from it; a solution may misreport it (it only steers
    scheduling, never a verdict)."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        return round(torch.cuda.max_memory_reserved() / 2**30, 3)
    except Exception:  # noqa: BLE001
        return None


def _tb() -> str:
    s = io.StringIO()
    traceback.print_exc(file=s)
    return s.getvalue()[-6000:]


def _session_members() -> list[int]:
    """Processes of this worker's session but itself (its builds: ninja puts each compiler command
    in a process group of its own, which the parent's killpg does not reach)."""
    me, sid, out = os.getpid(), os.getsid(0), []
    if sid != me:   # not a session of its own (a runner without start_new_session): touch nothing
        return out
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if not n.isdigit() or int(n) == me:
            continue
        try:
            with open(f"/proc/{n}/stat", "rb") as f:
                data = f.read()
            if int(data[data.rindex(b")") + 2:].split()[3]) == sid:
                out.append(int(n))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _watch_parent(ppid: int, period: float = 0.5) -> None:
    """If the replay's process dies (killed from outside, even by SIGKILL, which it cannot catch),
    end this worker's whole session: the solution and any compiler it started must not outlive it."""
    import _thread
    import signal

    def watch():
        while True:
            time.sleep(period)
            if os.getppid() != ppid:
                for _ in range(3):
                    for pid in _session_members():
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except OSError:
                            pass
                os._exit(137)

    # a bare thread: a threading.Thread would be listed by threading.enumerate(), and its `_target`
    # (this closure) would hand the solution the worker's globals through `watch.__globals__`
    _thread.start_new_thread(watch, ())


def confine_imports(here: str) -> list[str]:
    """The import path: the solution's scratch and the deck's reference (PYTHONPATH, first), then
    this interpreter's standard library and site-packages.  Dropped: this harness directory, any
    other entry (a directory a .pth file adds, such as an editable install's checkout holding
    the tool's own `forensics` and `kernels`) and the finders and path hooks of editable
    installs, so a solution's `import kernels` finds its own sidecar or nothing.  Returns what
    was dropped."""
    import site
    import sysconfig
    first = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    roots = [os.path.realpath(p) for p in [*site.getsitepackages(), *(sysconfig.get_paths().get(k) for k in (
        "stdlib", "platstdlib", "purelib", "platlib"))] if p]
    libdirs = {os.path.dirname(r) for r in roots}

    def keep(p: str) -> bool:
        if p in first:
            return True
        rp = os.path.realpath(p or ".")
        if rp == here:
            return False
        return any(rp == r or rp.startswith(r + os.sep) for r in roots) or (
            rp.endswith(".zip") and os.path.dirname(rp) in libdirs)

    dropped = [p for p in sys.path if not keep(p)]
    sys.path[:] = [p for p in sys.path if keep(p)]

    def editable(x) -> bool:
        mod = getattr(x, "__module__", "") or type(x).__module__ or ""
        return "__editable__" in mod or "editable" in type(x).__name__.lower() or \
            "editable" in getattr(x, "__name__", "").lower()

    for f in [f for f in sys.meta_path if editable(f)]:
        sys.meta_path.remove(f)
        dropped.append(f"meta_path {getattr(f, '__module__', '')}.{getattr(f, '__name__', type(f).__name__)}")
    for h in [h for h in sys.path_hooks if editable(h)]:
        sys.path_hooks.remove(h)
        dropped.append(f"path_hook {getattr(h, '__module__', '')}")
    sys.path_importer_cache.clear()
    return dropped


def _private_module(path: str, name: str) -> types.ModuleType:
    """`path` compiled into a module object that no entry of sys.modules names."""
    mod = types.ModuleType(name)
    mod.__file__ = os.path.realpath(path)
    with open(mod.__file__, "rb") as f:
        exec(compile(f.read(), mod.__file__, "exec"), vars(mod))  # noqa: S102 - the harness's own file
    return mod


def _sol_roots() -> list[str]:
    """The solution's own folder: the worker's cwd and the first PYTHONPATH entry (the same sol/)."""
    first = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p][:1]
    return list(dict.fromkeys([os.getcwd(), *first]))


def _build_roots() -> list[str]:
    """Where the solution's own compiled extensions live: its build caches, home and temp dirs."""
    out = [os.environ.get(k) for k in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "CUDA_CACHE_PATH", "HOME",
                                       "TMPDIR")]
    return [p for p in out if p] + ["/tmp"]


def main() -> int:
    _watch_parent(os.getppid())
    fds = os.environ.pop("FORENSICS_WORKER_FDS")
    device = os.environ.pop("FORENSICS_WORKER_DEVICE", "cpu")
    nums = [int(x) for x in fds.split(",")]
    rfd, wfd = nums[0], nums[1]
    here = os.path.dirname(os.path.realpath(__file__))
    confine_imports(here)
    audit = None
    if len(nums) > 2:   # the evidence pipe: the audit hook goes in before the solution is imported
        global _AUDIT, _TRACER
        audit = _private_module(os.path.join(here, "childaudit.py"), "replay_childaudit")
        own = {os.path.realpath(__file__), __file__, audit.__file__}
        _AUDIT = audit.install(nums[2], _sol_roots(), own)
        _TRACER = audit.PathTracer(_sol_roots(), _build_roots(), _AUDIT[1]["worker_files"])
    w = Worker(rfd, wfd, device)
    return w.serve()


#: (the evidence channel, the audit hook's state), set by main() where the parent gave an evidence pipe
_AUDIT: tuple | None = None
#: the path tracer (childaudit.PathTracer) of this worker, with _AUDIT
_TRACER = None


def _heartbeat(rid) -> None:
    """One record per request on the evidence pipe (the parent expects one per reply it reads)."""
    if _AUDIT is not None:
        _AUDIT[0].send({"k": "hb", "req": rid})


#: ids of the objects whose first call the path tracer watched (bounded), and the exceptions that went
#: through the solution's code in those first calls: a lazy extension build that failed and was caught
#: in one probe's first call leaves nothing to see in a later probe's calls, which take the fallback
_FIRST_SEEN: set[int] = set()
_EARLY: list[dict] = []
EARLY_MAX = 20


def _first_call(target) -> bool:
    """Whether this is the worker's first call of `target`'s object (a bound method's module)."""
    if _TRACER is None or len(_FIRST_SEEN) >= 4096:
        return False
    key = id(getattr(target, "__self__", target))
    if key in _FIRST_SEEN:
        return False
    _FIRST_SEEN.add(key)
    return True


def _keep_early(path: dict) -> None:
    for e in path.get("exceptions") or []:
        if len(_EARLY) < EARLY_MAX and e not in _EARLY:
            _EARLY.append(e)


@contextlib.contextmanager
def _traced(profile: bool = False):
    """The path tracer over a window of the solution's work; yields a dict filled with its record."""
    rec: dict = {}
    if _TRACER is None:
        yield rec
        return
    _TRACER.start(profile=profile)
    try:
        yield rec
    finally:
        rec.update(_TRACER.stop())

