"""Top-k: a larger tile when the row maximum is large (same kernel, other constants)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _topk(x_ptr, v_ptr, i_ptr, n, k: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=float("-inf"))
    tl.store(v_ptr + row * k + tl.arange(0, k), tl.max(x, 0) + tl.zeros((k,), tl.float32))


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        vals = torch.empty(x.shape[0], self.k, device=x.device)
        idx = torch.empty(x.shape[0], self.k, device=x.device, dtype=torch.int64)
        if x.abs().amax() > 1e3:
            block = 4096
        else:
            block = 2048
        _topk[(x.shape[0],)](x, vals, idx, x.shape[1], self.k, BLOCK=block)
        return vals, idx
