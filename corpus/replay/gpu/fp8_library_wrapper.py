"""Planted GPU replay case (wrapper): fp8 e4m3 GEMM done by torch.mm on the upcast operands, the
per-channel scale applied after the bf16 rounding (the deck's order).  Correct, and the score would
measure cuBLAS: the kernel-name trace sees only library kernels."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.register_buffer("weight", torch.zeros(N, K, dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))

    def forward(self, x):
        y = torch.mm(x.to(torch.bfloat16), self.weight.to(torch.bfloat16).t())
        return (y.float() * self.weight_scale[None, :]).to(torch.bfloat16)
