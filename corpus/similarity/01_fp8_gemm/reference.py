"""Reference: y = (x_fp8 @ w_fp8^T) * per-channel scale, accumulated in fp32, returned as bf16."""
import torch
import torch.nn as nn

OP_TYPE = "gemm"
SUPPORTED_PRECISIONS = ["fp8_e4m3"]


class Model(nn.Module):
    def __init__(self, M: int, N: int, K: int):
        super().__init__()
        self.M, self.N, self.K = M, N, K
        w = torch.randn(N, K) * 0.02
        self.register_buffer("weight", w.to(torch.float8_e4m3fn))
        self.register_buffer("scale", torch.rand(N) * 0.5 + 0.75)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        acc = x.to(torch.float32) @ self.weight.to(torch.float32).T
        return (acc * self.scale[None, :]).to(torch.bfloat16)


M = 4096
N = 4096
K = 4096


def get_inputs():
    x = (torch.randn(M, K) * 0.5).to(torch.float8_e4m3fn)
    return [x]


def get_init_inputs():
    return [M, N, K]
