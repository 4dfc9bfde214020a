"""hard/05_topk_bitonic: torch.topk(largest=True, sorted=True) contract over the last dim."""
import torch
import torch.nn as nn

batch = 1
n = 131072
k = 64


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.batch, self.n, self.k = batch, n, k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        values, indices = torch.topk(x, self.k, dim=-1, largest=True, sorted=True)
        return values, indices


def get_inputs():
    return [torch.randn(batch, n)]


def get_init_inputs():
    return [batch, n, k]
