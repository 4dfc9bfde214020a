"""Planted replay case: right answer, but it sorts its input in place (the caller's tensor is
changed after the call)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        v, i = x.sort(dim=-1, descending=True, stable=True)
        x.copy_(v)
        return v[:, : self.k].clone(), i[:, : self.k].clone()
