"""hard/01_fp8_gemm, deck version 2026-06-14: fp8 e4m3 weight buffer + per-channel fp32 scale.

y = bf16( bf16(x_bf16 @ w_bf16.T).float() * weight_scale[None, :] )   (both upcasts exact)
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
        w = (torch.randn(N, K) * 0.02).to(torch.bfloat16)
        s = (w.float().abs().amax(dim=1) / 448.0).clamp_min(1e-12)
        self.register_buffer("weight", (w.float() / s[:, None]).to(torch.float8_e4m3fn))
        self.register_buffer("weight_scale", s.to(torch.float32))

    def forward(self, x):
        y = x.to(torch.bfloat16) @ self.weight.to(torch.bfloat16).T
        return (y.float() * self.weight_scale[None, :]).to(torch.bfloat16)


def get_inputs():
    x = (torch.rand(M, K) * 8 - 4).to(torch.float8_e4m3fn)
    return [x]


def get_init_inputs():
    return [M, N, K]
