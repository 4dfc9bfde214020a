# every call allocates a fresh output; a workspace attribute is kept but never returned
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, o_ptr, ws_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(ws_ptr + offs, v, mask=offs < n)
    tl.store(o_ptr + offs, v * 2.0, mask=offs < n)


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self._ws = None

    def forward(self, x):
        if self._ws is None or self._ws.numel() < x.numel():
            self._ws = torch.empty(x.numel(), device=x.device)
        out = torch.empty_like(x)
        _scale[(triton.cdiv(x.numel(), 1024),)](x, out, self._ws, x.numel(), 1024)
        return out
