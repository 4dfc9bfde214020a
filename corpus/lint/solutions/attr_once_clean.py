# a single non-template kernel caches its attribute in a static int (one kernel, one attribute)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <cuda_runtime.h>
__global__ void nsa_kernel(const float* a, float* c) { extern __shared__ float s[]; c[threadIdx.x] = a[threadIdx.x] + s[0]; }

void launch_nsa(const float* a, float* c, int bytes) {
  static int configured_smem = 0;
  if (configured_smem < bytes) {
    cudaFuncSetAttribute(nsa_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    configured_smem = bytes;
  }
  nsa_kernel<<<1, 128, bytes>>>(a, c);
}
"""
_ext = load_inline("nsa_once", cpp_sources="void launch_nsa(torch::Tensor a, torch::Tensor c);", cuda_sources=CUDA, functions=["launch_nsa"])


class Model(nn.Module):
    def forward(self, q, k, v):
        o = torch.empty_like(q)
        _ext.launch_nsa(q, o)
        return o
