"""Planted replay case (honest look-alike of topk_magnitude_sniff.py): the same threshold filter on
the same magnitude window, but a row with fewer than k candidates falls back to the exact sort, so
the result is exact for any input.  Branching on input statistics is not itself wrong."""
import torch
import torch.nn as nn

TAU = 1.5


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        amax = float(x.abs().amax())
        if 1.0 < amax < 100.0 and bool(((x > TAU).sum(dim=-1) >= self.k).all()):
            cand = torch.where(x > TAU, x, torch.full_like(x, float("-inf")))
            v, i = cand.sort(dim=-1, descending=True, stable=True)
        else:
            v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
