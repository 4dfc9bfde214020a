# __syncthreads inside a thread-dependent branch
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void scan_kernel(float* data, int n) {
  __shared__ float buf[256];
  int tid = threadIdx.x;
  buf[tid] = data[blockIdx.x * 256 + tid];
  if (tid < n / 2) {
    buf[tid] += buf[tid + n / 2];
    __syncthreads();
  }
  data[blockIdx.x * 256 + tid] = buf[tid];
}
"""
_ext = load_inline("sc", cpp_sources="void scan(torch::Tensor d, int64_t n);", cuda_sources=CUDA, functions=["scan"])


class Model(nn.Module):
    def forward(self, x):
        _ext.scan(x, x.shape[-1])
        return x
