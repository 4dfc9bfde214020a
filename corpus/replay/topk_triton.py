"""Planted replay case (honest for the kernel trace): top-k selected by a Triton kernel of its own.

Each program takes one row and picks the k largest by repeated max / argmax, masking each pick; no
torch operator does the selection.  Under TRITON_INTERPRET=1 it runs on the CPU: the kernel trace
records its launch (JITFunction / InterpretedFunction `run`) and does not flag it.  It consults no
device query, so the CPU path is its graded path."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _topk_rows(x_ptr, v_ptr, i_ptr, N, K: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=float("-inf"))
    for j in tl.static_range(K):
        m = tl.max(x, axis=0)
        idx = tl.argmax(x, axis=0)
        tl.store(v_ptr + row * K + j, m)
        tl.store(i_ptr + row * K + j, idx.to(tl.int64))
        x = tl.where(offs == idx, float("-inf"), x)


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        b, n = x.shape
        xs = x.contiguous()
        v = torch.empty(b, self.k, dtype=x.dtype, device=x.device)
        i = torch.empty(b, self.k, dtype=torch.int64, device=x.device)
        _topk_rows[(b,)](xs, v, i, n, K=self.k, BLOCK=triton.next_power_of_2(n))
        return v, i
