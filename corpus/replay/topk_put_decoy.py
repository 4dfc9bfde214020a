"""Planted replay case (hostile): a forged input report, with the put file swapped for a decoy.

The replay reads the solution's inputs from memory it holds itself (the put file, which the
worker maps shared), so patching the worker's "input unchanged?" test alone is caught
(``topk_forged_report``).  This case also swaps the put file at its name for a copy just before
the worker maps it: the worker then computes on the copy, and a replay that watched the file it
had mapped by name before the call sees its inputs untouched.  It wraps the worker's own
``open_exchange`` for that (in its globals, reached through gc now that ``__main__`` is empty), which a
thread racing the worker's open could do as well.

Right answer, sorted in place.  The replay must end ``tampered`` (``replay-exchange-tampered``):
the worker's reply names the file it mapped, which is not the one the replay wrote.
"""
import gc
import os
import sys

import torch
import torch.nn as nn

def _worker_globals():
    """The replay worker's globals: `__main__` where the worker ran there (before issue 36), else
    found through the garbage collector (the only way left; the audit hook records it)."""
    m = sys.modules.get("__main__")
    if m is not None and hasattr(m, "Worker"):
        return vars(m)
    for o in gc.get_objects():
        if type(o) is dict and "Worker" in o and "open_exchange" in o:
            return o
    return None


_worker = _worker_globals()
_swapped: set = set()


def _decoy(path: str) -> None:
    """Replace the file at `path` by a copy of it (a new inode), atomically."""
    with open(path, "rb") as f:
        data = f.read()
    tmp = path + ".decoy"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


if _worker is not None:
    _orig = _worker["open_exchange"]

    def _open(path, mode="rb", _orig=_orig):
        if str(path).endswith("-put.pt") and path not in _swapped:
            _swapped.add(path)
            try:
                _decoy(str(path))
            except OSError:
                pass
        return _orig(path, mode)

    _worker["open_exchange"] = _open
    _worker["Store"].unchanged = lambda self, k: True   # the worker's "input unchanged?" test


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        v, i = x.sort(dim=-1, descending=True, stable=True)
        x.copy_(v)
        return v[:, : self.k].clone(), i[:, : self.k].clone()
