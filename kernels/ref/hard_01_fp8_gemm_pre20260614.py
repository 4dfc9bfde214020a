"""hard/01_fp8_gemm, deck version before 2026-06-14: bf16 weight nn.Parameter, no scale.

y = x_bf16 @ w_bf16.T  (bf16 output)
"""
import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.M, self.N, self.K = M, N, K
        self.weight = nn.Parameter((torch.randn(N, K) * 0.02).to(torch.bfloat16))

    def forward(self, x):
        return x.to(torch.bfloat16) @ self.weight.T


def get_inputs():
    x = (torch.rand(M, K) * 8 - 4).to(torch.float8_e4m3fn)
    return [x]


def get_init_inputs():
    return [M, N, K]
