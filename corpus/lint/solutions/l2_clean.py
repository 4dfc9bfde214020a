# plain loads and a comment about why evict_last is NOT used
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
// no evict_last / createpolicy: the 128 MiB flush defeats L2 persistence anyway
__global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __ldg(x + i);
}
"""
_ext = load_inline("cp", cpp_sources="void copy(torch::Tensor x, torch::Tensor y);", cuda_sources=_SRC, functions=["copy"],
                   extra_cuda_cflags=["-gencode=arch=compute_90a,code=sm_90a"])


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1))

    def forward(self, x):
        y = torch.empty_like(x)
        _ext.copy(x, y)
        return y
