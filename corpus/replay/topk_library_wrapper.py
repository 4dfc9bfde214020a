"""Top-k where the library's sort does the selection (planted for the kernel-name trace: the
library's operators take the traced time)."""
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        xs = x.float().contiguous()
        vals, order = xs.sort(dim=-1, descending=True)
        return vals[:, : self.k].contiguous(), order[:, : self.k].to(torch.int64).contiguous()
