# NSA bucket counts in unsigned short shared memory, incremented with atomicAdd
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <cuda_runtime.h>
__global__ void count_seg(const int* __restrict__ sel, int* __restrict__ out, int n) {
  __shared__ unsigned short blk_cnt[64];
  __shared__ unsigned short blk_cur[64];
  int t = threadIdx.x;
  if (t < 64) { blk_cnt[t] = 0; blk_cur[t] = 0; }
  __syncthreads();
  for (int i = t; i < n; i += blockDim.x) atomicAdd(&blk_cnt[sel[i]], 1);
  __syncthreads();
  if (t < 64) out[blockIdx.x * 64 + t] = blk_cnt[t] + atomicAdd(&blk_cur[t], 0);
}
"""
_ext = load_inline("nsa_cnt", cpp_sources="void count(torch::Tensor s, torch::Tensor o);", cuda_sources=CUDA, functions=["count"],
                   extra_cuda_cflags=["-gencode=arch=compute_120a,code=sm_120a"])


class Model(nn.Module):
    def __init__(self, B, H, S, D):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.bfloat16))

    def forward(self, q, k, v):
        o = torch.empty_like(q)
        _ext.count(q, o)
        return o
