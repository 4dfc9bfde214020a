"""The replay's raw tensor exchange format (forensics.replay.worker.pack_save / pack_load)."""
import json
import os
from pathlib import Path

import pytest
import torch

from forensics.replay.worker import PACK_MAGIC, load_any, pack_load, pack_save


def test_round_trip_keeps_structure_dtypes_and_values(tmp_path):
    g = torch.Generator().manual_seed(0)
    obj = {"out": (torch.randn(3, 5, generator=g).to(torch.bfloat16), [torch.arange(7, dtype=torch.int32)]),
           "inputs_after": {"x0": torch.randn(4, 4, generator=g).to(torch.float8_e4m3fn).t()},  # non-contiguous
           "n": 3, "s": "x", "none": None, "empty": torch.empty(0, 2), "scalar": torch.tensor(2.5),
           1: torch.tensor([True, False])}
    p = tmp_path / "a.pack"
    pack_save(obj, str(p))
    back = pack_load(str(p))
    assert isinstance(back["out"], tuple) and isinstance(back["out"][1], list)
    assert back["out"][0].dtype == torch.bfloat16 and torch.equal(back["out"][0], obj["out"][0])
    assert torch.equal(back["out"][1][0], obj["out"][1][0])
    x = obj["inputs_after"]["x0"]
    assert back["inputs_after"]["x0"].dtype == x.dtype
    assert torch.equal(back["inputs_after"]["x0"].view(torch.uint8), x.contiguous().view(torch.uint8))
    assert back["n"] == 3 and back["s"] == "x" and back["none"] is None
    assert back["empty"].shape == (0, 2) and back["scalar"].item() == 2.5
    assert back[1].tolist() == [True, False]
    assert torch.equal(load_any(str(p))["out"][1][0], obj["out"][1][0])


def test_torch_save_files_still_load(tmp_path):
    p = tmp_path / "t.pt"
    torch.save({"a": torch.ones(2)}, p)
    assert torch.equal(load_any(str(p))["a"], torch.ones(2))


def _write(path, header: dict, data: bytes = b"") -> None:
    head = json.dumps(header).encode()
    start = len(PACK_MAGIC) + 8 + len(head)
    path.write_bytes(PACK_MAGIC + len(head).to_bytes(8, "little") + head + b"\0" * (-start % 64) + data)


@pytest.mark.parametrize("meta,why", [
    ({"dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}, "dtype"),
    ({"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 64}, "range"),        # past the end
    ({"dtype": "float32", "shape": [3], "offset": 0, "nbytes": 16}, "bytes"),        # count mismatch
    ({"dtype": "float32", "shape": [-4], "offset": 0, "nbytes": 16}, "range"),
    ({"dtype": "float32", "shape": [4], "offset": -8, "nbytes": 16}, "range"),
])
def test_hostile_headers_are_refused(tmp_path, meta, why):
    p = tmp_path / "h.pack"
    _write(p, {"tree": {"__t__": 0}, "tensors": [meta]}, b"\0" * 32)
    with pytest.raises(ValueError):
        pack_load(str(p))


def test_tree_naming_a_missing_tensor_or_unknown_object_is_refused(tmp_path):
    p = tmp_path / "t.pack"
    _write(p, {"tree": {"__t__": 3}, "tensors": []})
    with pytest.raises(ValueError):
        pack_load(str(p))
    _write(p, {"tree": {"__reduce__": "os.system"}, "tensors": []})
    with pytest.raises(ValueError):
        pack_load(str(p))
    p.write_bytes(PACK_MAGIC + (10**12).to_bytes(8, "little"))
    with pytest.raises(ValueError):
        pack_load(str(p))


_IPC = {"device": 0, "handle": "00" * 64, "size": 16, "offset": 0, "ref": "00", "ref_offset": 0, "event": None,
        "event_sync": False}


@pytest.mark.parametrize("meta,ipc,why", [
    ({"dtype": "float32", "shape": [4], "ipc": _IPC}, False, "none is allowed"),          # IPC only where asked
    ({"dtype": "float32", "shape": [4], "ipc": dict(_IPC, size="16")}, True, "malformed"),
    ({"dtype": "float32", "shape": [4], "ipc": dict(_IPC, extra=1)}, True, "malformed"),
    ({"dtype": "float32", "shape": [4], "ipc": dict(_IPC, size=8)}, True, "bytes"),       # larger than the storage
    ({"dtype": "float32", "shape": [4], "ipc": _IPC, "offset": 0}, True, "malformed"),
])
def test_hostile_ipc_entries_are_refused(tmp_path, meta, ipc, why):
    p = tmp_path / "i.pack"
    _write(p, {"tree": {"__t__": 0}, "tensors": [meta]})
    with pytest.raises(ValueError, match=why):
        pack_load(str(p), ipc=ipc)


# ------------------------------------------------------------------------------ CUDA IPC reference counters
def _ipc_pack(path, **ipc) -> None:
    _write(path, {"tree": {"__t__": 0}, "tensors": [{"dtype": "float32", "shape": [4], "ipc": dict(_IPC, **ipc)}]})


@pytest.mark.parametrize("ref,off,why", [
    (b"/dev/shm/victim", 0, "not a name torch gives"),          # a path
    (b"victim", 0, "not a name torch gives"),                   # another program's object
    (b"/torch_1_2_3/../../victim", 0, "not a name torch gives"),
    (b"/../torch_1_2_3", 0, "not a name torch gives"),
    (b"/torch_1_2_3\0/victim", 0, "not a name torch gives"),     # C string ends at the NUL
    (b"/torch_1_2", 0, "not a name torch gives"),
    (b"sem.torch_1_2_3", 0, "not a name torch gives"),
    (b"/torch_1_2_3", 10000, "past the"),                       # the decrement lands past the 80 KiB mapping
    (b"/torch_1_2_3", 2**40, "past the"),
])
def test_an_ipc_entry_naming_another_reference_counter_is_tampering(tmp_path, ref, off, why):
    """A child's pack names the reference counter the reader's torch opens in /dev/shm (as root on
    a GPU host) and decrements at ref_offset when it frees the mapping: only torch's own names, and
    offsets inside the counter file, pass (before any CUDA is touched, so this runs on the CPU)."""
    from forensics.replay.worker import ExchangeTampered
    p = tmp_path / "r.pack"
    _ipc_pack(p, ref=ref.hex(), ref_offset=off)
    with pytest.raises(ExchangeTampered, match=why):
        pack_load(str(p), ipc=True)


def test_an_ipc_reference_counter_file_must_be_the_writers(tmp_path, monkeypatch):
    """With an owner (the replay process: the child's uid), the object at the name must be a
    regular single-link file of that owner, at least as large as torch's counter file (so torch
    grows nothing).  Look-alike: torch's own counter file of the child, or none at all (torch's
    open without O_CREAT then fails and is ignored), passes on to the CUDA step."""
    import forensics.replay.worker as worker
    from forensics.replay.worker import IPC_REF_BYTES, ExchangeTampered
    monkeypatch.setattr(worker, "SHM_DIR", str(tmp_path))
    name = "torch_4242_123456789_0"
    ctr = tmp_path / name
    p = tmp_path / "r.pack"
    _ipc_pack(p, ref=("/" + name).encode().hex(), ref_offset=7)
    uid = os.geteuid()

    def load(owner=uid):
        return pack_load(str(p), ipc=True, ref_owner=owner)

    with pytest.raises(ValueError, match="no CUDA") as e:   # no file: nothing to reach
        load()
    assert not isinstance(e.value, ExchangeTampered)
    ctr.write_bytes(b"\0" * IPC_REF_BYTES)
    os.chmod(ctr, 0o600)
    with pytest.raises(ValueError, match="no CUDA") as e:   # the writer's own counter file
        load()
    assert not isinstance(e.value, ExchangeTampered)
    with pytest.raises(ExchangeTampered, match="where 54321 was expected"):   # another uid's
        load(owner=54321)
    os.link(ctr, tmp_path / "second-link")
    with pytest.raises(ExchangeTampered, match="2 link"):
        load()
    os.unlink(tmp_path / "second-link")
    os.truncate(ctr, 16)                                   # torch would grow it to 80 KiB
    with pytest.raises(ExchangeTampered, match="16 bytes"):
        load()
    ctr.unlink()
    victim = tmp_path / "victim"
    victim.write_bytes(b"\0" * IPC_REF_BYTES)
    ctr.symlink_to(victim)                                  # glibc's shm_open would refuse it too (O_NOFOLLOW)
    with pytest.raises(ExchangeTampered, match="not the writer's counter file"):
        load()
    ctr.unlink()
    ctr.mkdir()
    with pytest.raises(ExchangeTampered, match="not the writer's counter file"):
        load()
    with pytest.raises(ValueError, match="no CUDA"):        # the worker reading the parent's: no owner check
        load(owner=None)


def test_cpu_replay_reports_the_byte_transfer(tmp_path):
    from forensics.replay.api import replay_solution
    from forensics.replay.outcome import Limits
    sol = (Path(__file__).resolve().parent.parent / "corpus" / "replay" / "topk_honest.py").read_bytes()
    out = replay_solution("05_topk_bitonic", sol, device="cpu", shapes="tiny", probes=["check"], seeds=(42,),
                          limits=Limits(build_s=300, call_s=240), cache_root=tmp_path / "cache")
    assert out.status() == "pass" and out.info["transfer"] == "pack"
