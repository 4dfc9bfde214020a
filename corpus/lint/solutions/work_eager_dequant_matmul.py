"""W4A16 GEMM, eager: unpack the int4 weights, apply zero-points and scales, then one matmul."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, M: int, N: int, K: int, group_size: int = 128):
        super().__init__()
        self.M, self.N, self.K, self.group_size = M, N, K, group_size
        self.register_buffer("w_q", torch.empty(K // 2, N, dtype=torch.uint8))
        self.register_buffer("scales", torch.empty(K // group_size, N, dtype=torch.bfloat16))
        self.register_buffer("zeros", torch.empty(K // group_size, N, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self.w_q
        lo = packed & 0xF
        hi = (packed >> 4) & 0xF
        w = torch.stack((lo, hi), dim=1).reshape(self.K, self.N).to(torch.bfloat16)
        g = self.group_size
        w = (w.view(self.K // g, g, self.N) - self.zeros[:, None, :]) * self.scales[:, None, :]
        return x @ w.view(self.K, self.N)
