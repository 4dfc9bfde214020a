"""Planted replay case: output cache keyed only by the input's pointer and shape."""
import torch
import torch.nn as nn

_CACHE = {}


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape), x._version)
        if key in _CACHE:
            return _CACHE[key]
        v, i = x.sort(dim=-1, descending=True, stable=True)
        out = (v[:, : self.k].contiguous(), i[:, : self.k].contiguous())
        _CACHE[key] = out
        return out
