"""Planted GPU replay case: a load_inline extension built only for sm_120a (RTX PRO 6000); on an
sm_90 GPU its kernel cannot launch ('no kernel image is available').  Not replayable here; never
'incorrect'."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
__global__ void fill_kernel(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 1.f; }
torch::Tensor fill(torch::Tensor y) {
  int n = y.numel();
  fill_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""
_ext = load_inline("fp8_sm120_fill", cpp_sources="torch::Tensor fill(torch::Tensor y);", cuda_sources=_SRC,
                   functions=["fill"], extra_cuda_cflags=["-gencode=arch=compute_120a,code=sm_120a"], verbose=False)
_ext.fill(torch.empty(16, device="cuda"))   # the deck's solutions warm their kernels at import
torch.cuda.synchronize()


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.register_buffer("weight", torch.zeros(N, K, dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))

    def forward(self, x):
        y = torch.empty(x.shape[0], self.weight.shape[0], device=x.device)
        return _ext.fill(y).to(torch.bfloat16)
