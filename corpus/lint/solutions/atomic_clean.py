# counts kept in unsigned int; 16-bit values only stored, never atomically updated
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void count_seg(const int* __restrict__ sel, int* __restrict__ out, int n) {
  __shared__ unsigned int blk_cnt[64];
  __shared__ unsigned short packed[64];
  int t = threadIdx.x;
  if (t < 64) blk_cnt[t] = 0;
  __syncthreads();
  for (int i = t; i < n; i += blockDim.x) atomicAdd(&blk_cnt[sel[i]], 1u);
  __syncthreads();
  if (t < 64) { packed[t] = (unsigned short)blk_cnt[t]; out[blockIdx.x * 64 + t] = packed[t]; }
}
"""
_ext = load_inline("cnt2", cpp_sources="void count(torch::Tensor s, torch::Tensor o);", cuda_sources=CUDA, functions=["count"])


class Model(nn.Module):
    def __init__(self, B, H, S, D):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.bfloat16))

    def forward(self, q, k, v):
        o = torch.empty_like(q)
        _ext.count(q, o)
        return o
