import torch
import torch.nn as nn
import triton
import triton.language as tl

# NOTE: deliberately not torch._scaled_mm (forbidden); our own fp8 tile loop below.


@triton.jit
def _fp8(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        acc += tl.dot(tl.load(a + rm[:, None] * K + rk[None, :]), tl.load(b + rn[None, :] * K + rk[:, None]))
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.register_buffer("weight", torch.empty(N, K, dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N))

    def forward(self, x):
        M, K = x.shape
        N = self.weight.shape[0]
        y = torch.empty(M, N, device=x.device, dtype=torch.bfloat16)
        _fp8[(M // 128, N // 128)](x, self.weight, y, M, N, K, 128, 128, 128)
        return y
