# MoE: one static flag per function-pointer type guards the opt-in shared-memory attribute
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <cuda_runtime.h>
template <int BM>
__global__ void moe_gemm(const float* a, float* c, int n) { extern __shared__ float s[]; c[threadIdx.x] = a[threadIdx.x] + s[0]; }

template <typename Kern>
void set_smem_once(Kern kern, int bytes) {
  static bool configured = false;
  if (!configured) {
    cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    configured = true;
  }
}

void launch(const float* a, float* c, int n, int bm) {
  if (bm == 128) { set_smem_once(moe_gemm<128>, 96 * 1024); moe_gemm<128><<<1, 128, 96 * 1024>>>(a, c, n); }
  else { set_smem_once(moe_gemm<16>, 64 * 1024); moe_gemm<16><<<1, 128, 64 * 1024>>>(a, c, n); }
}
"""
_ext = load_inline("moe_once", cpp_sources="void launch(torch::Tensor a, torch::Tensor c);", cuda_sources=CUDA, functions=["launch"])


class Model(nn.Module):
    def forward(self, x, expert_ids, expert_weights):
        y = torch.empty_like(x)
        _ext.launch(x, y)
        return y
