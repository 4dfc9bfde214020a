"""FP8 GEMM: a Triton cast kernel feeds a CUDA-graphed bf16 matmul."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m).to(tl.bfloat16), mask=m)


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(N, K, dtype=torch.bfloat16))
        self._graph = None
        self._key = None

    def _capture(self, x):
        self._xb = torch.empty(x.shape, device=x.device, dtype=torch.bfloat16)
        self._out = torch.empty(x.shape[0], self.weight.shape[0], device=x.device, dtype=torch.bfloat16)
        n = x.numel()
        _cast_kernel[(triton.cdiv(n, 1024),)](x, self._xb, n, BLOCK=1024)
        torch.mm(self._xb, self.weight.t(), out=self._out)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            _cast_kernel[(triton.cdiv(n, 1024),)](x, self._xb, n, BLOCK=1024)
            torch.mm(self._xb, self.weight.t(), out=self._out)
        self._key = x.data_ptr()

    def forward(self, x):
        if self._graph is None or self._key != x.data_ptr():
            self._capture(x)
        self._graph.replay()
        return self._out
