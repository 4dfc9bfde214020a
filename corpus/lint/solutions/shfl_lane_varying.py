# top-k window sort: the cross-lane gather ships the source lane's own slot
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <cuda_runtime.h>
template <int K>
__global__ void window_sort(const float* __restrict__ x, float* __restrict__ out, int n) {
  const int lane = threadIdx.x & 31;
  float regs[4];
  #pragma unroll
  for (int j = 0; j < 4; ++j) regs[j] = x[blockIdx.x * 128 + lane * 4 + j];
  const int want = (lane * 4 + 3) >> 5;
  const int src = (lane + 1) & 31;
  float got = __shfl_sync(0xffffffffu, regs[want], src);
  out[blockIdx.x * 32 + lane] = got;
}
"""
_ext = load_inline("ws", cpp_sources="void ws(torch::Tensor x, torch::Tensor o);", cuda_sources=CUDA, functions=["ws"])


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1))

    def forward(self, x):
        o = torch.empty(x.shape[0], 32, device=x.device)
        _ext.ws(x, o)
        return o, o.long()
