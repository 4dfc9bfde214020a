"""Planted replay case (hostile): the solution's process truncates the put file after the call.

The put file holds the solution's inputs; the replay reads them back after every call to see
whether the solution wrote into them.  A replay that reads them through a mapping of its own
faults (SIGBUS) once the file is shorter than the mapping: the replay process itself dies.  This
case keeps a descriptor of each put file (wrapping the worker's ``open_exchange``,
found through gc), computes its answer, then truncates the file to zero; it also makes the worker's
"input unchanged?" test say yes, so the worker itself never touches the lost pages.

Otherwise top-k, honestly.  The replay must survive and end ``tampered``
(``replay-exchange-tampered``: the put file is shorter than the replay wrote it).
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
_fds: list = []

if _worker is not None:
    _orig = _worker["open_exchange"]

    def _open(path, mode="rb", _orig=_orig):
        f = _orig(path, mode)
        if str(path).endswith("-put.pt") and mode != "rb":
            _fds.append(os.dup(f.fileno()))
        return f

    _worker["open_exchange"] = _open
    _worker["Store"].unchanged = lambda self, k: True   # the worker's "input unchanged?" test


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        v, i = x.sort(dim=-1, descending=True, stable=True)
        out = v[:, : self.k].clone(), i[:, : self.k].clone()
        while _fds:
            fd = _fds.pop()
            os.ftruncate(fd, 0)
            os.close(fd)
        return out
