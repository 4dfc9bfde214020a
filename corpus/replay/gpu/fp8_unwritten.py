"""Planted GPU replay case: the Triton grid skips its last row tile, so those output rows are
whatever torch.empty's memory held (often the previous call's correct answer, reused by the
caching allocator).  Only NaN-poisoned memory exposes it reliably."""
import torch
import torch.nn as nn

from fp8_honest import fp8_gemm


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.register_buffer("weight", torch.zeros(N, K, dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))

    def forward(self, x):
        return fp8_gemm(x, self.weight, self.weight_scale, skip_last=True)
