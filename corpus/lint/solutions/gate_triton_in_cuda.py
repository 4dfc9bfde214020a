# cuda deck solution written in Triton: the language gate rejects it
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class Model(nn.Module):
    def __init__(self, B, H, S, D):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.bfloat16))

    def forward(self, q, k, v):
        o = torch.empty_like(q)
        _k[(triton.cdiv(q.numel(), 1024),)](v, o, q.numel(), 1024)
        return o
