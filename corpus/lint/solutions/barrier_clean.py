# barriers outside divergent branches; thread-dependent work guarded separately
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void scan_kernel(float* data, int n) {
  __shared__ float buf[256];
  int tid = threadIdx.x;
  buf[tid] = data[blockIdx.x * 256 + tid];
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (tid < s) buf[tid] += buf[tid + s];
    __syncthreads();
  }
  if (tid == 0) data[blockIdx.x] = buf[0];
}
"""
_ext = load_inline("sc2", cpp_sources="void scan(torch::Tensor d, int64_t n);", cuda_sources=CUDA, functions=["scan"])


class Model(nn.Module):
    def forward(self, x):
        _ext.scan(x, x.shape[-1])
        return x
