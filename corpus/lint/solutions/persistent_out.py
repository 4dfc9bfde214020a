# output storage allocated once and returned on every call (every call rewrites it)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self._out = None

    def forward(self, x):
        if self._out is None or self._out.shape != x.shape:
            self._out = torch.empty_like(x)
        _scale[(triton.cdiv(x.numel(), 1024),)](x, self._out, x.numel(), 1024)
        return self._out
