# warp reductions: shuffles ship plain registers or registers indexed by an unrolled constant loop
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void rowmax(const float* __restrict__ x, float* __restrict__ out, int n) {
  const int lane = threadIdx.x & 31;
  float v[4];
  #pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = x[blockIdx.x * n + lane + 32 * j];
  float m = fmaxf(fmaxf(v[0], v[1]), fmaxf(v[2], v[3]));
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  #pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = __shfl_sync(0xffffffffu, v[j], (lane + 1) & 31);
  if (lane == 0) out[blockIdx.x] = m + v[0];
}
"""
_ext = load_inline("rm", cpp_sources="void rowmax(torch::Tensor x, torch::Tensor o);", cuda_sources=CUDA, functions=["rowmax"])


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1))

    def forward(self, x):
        o = torch.empty(x.shape[0], device=x.device)
        _ext.rowmax(x, o)
        return o[:, None], o[:, None].long()
