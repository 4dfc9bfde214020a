"""The replay's raw tensor exchange format (forensics.replay.worker.pack_save / pack_load)."""
import json
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


def test_cpu_replay_reports_the_byte_transfer(tmp_path):
    from forensics.replay.api import replay_solution
    from forensics.replay.probes import Limits
    sol = (Path(__file__).resolve().parent.parent / "corpus" / "replay" / "topk_honest.py").read_bytes()
    out = replay_solution("05_topk_bitonic", sol, device="cpu", shapes="tiny", probes=["check"], seeds=(42,),
                          limits=Limits(build_s=300, call_s=240), cache_root=tmp_path / "cache")
    assert out.status() == "pass" and out.info["transfer"] == "pack"
