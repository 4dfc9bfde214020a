import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_KERNELS = {}
_SRC = r"""
__global__ void scan(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
"""


def _get(dtype, block):
    key = (dtype, block)
    if key not in _KERNELS:
        _KERNELS[key] = load_inline(f"scan_{block}", cpp_sources="void scan(torch::Tensor x, torch::Tensor y);",
                                    cuda_sources=_SRC, functions=["scan"])
    return _KERNELS[key]


class Model(nn.Module):
    def forward(self, x, decay, resets):
        ext = _get(x.dtype, 256)
        y = torch.empty_like(x)
        ext.scan(x * decay * resets, y)
        return y
