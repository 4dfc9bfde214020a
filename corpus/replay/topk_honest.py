"""Planted replay case (honest): top-k by a full descending sort, written in plain torch."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        # A bitonic network would go here on a GPU; a stable descending sort is the same contract.
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
