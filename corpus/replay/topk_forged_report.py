"""Planted replay case: right answer, but it sorts its input in place and then falsifies the
replay worker's account of its inputs.  The worker's code is not at `sys.modules['__main__']` (an
empty module stands there; issue 36): the solution finds its `Worker` class through the garbage
collector, which the audit hook records (`replay-capability`, introspection), and makes the "input
unchanged?" test (its `Store.unchanged`) always say yes, so the child reports clean inputs.  No torch
function is replaced, so the monkeypatch snapshot sees nothing: only memory the parent itself holds
shows the write."""
import gc
import sys

import torch
import torch.nn as nn

_worker = sys.modules.get("__main__")
if _worker is not None and hasattr(_worker, "Store"):       # the worker as it was: in __main__
    _worker.Store.unchanged = lambda self, k: True
for _o in gc.get_objects():                                   # the worker as it is: only gc reaches it
    if isinstance(_o, type) and _o.__name__ == "Store" and "unchanged" in vars(_o):
        _o.unchanged = lambda self, k: True


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        v, i = x.sort(dim=-1, descending=True, stable=True)
        x.copy_(v)
        return v[:, : self.k].clone(), i[:, : self.k].clone()
