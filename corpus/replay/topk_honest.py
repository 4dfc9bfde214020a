"""Planted replay case (honest): top-k by a full descending sort, written in plain torch.

Honest for replay (it computes the answer from live inputs every call), but it uses Tensor.sort,
which the deck forbids: the static analyzer rightly reports FORBIDDEN-OP on it.  The topk_* cases
all share that sort, so the replay findings are the signal that separates them."""
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
