# cuda deck: raw CUDA kernel via load_inline; passes the gate
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <cuda_runtime.h>
__global__ void policy_kernel(const float* __restrict__ obs, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = obs[i] * 0.5f;
}
void policy(torch::Tensor obs, torch::Tensor out) {
  policy_kernel<<<(obs.numel() + 255) / 256, 256>>>(obs.data_ptr<float>(), out.data_ptr<float>(), obs.numel());
}
"""
_ext = load_inline("pol", cpp_sources="void policy(torch::Tensor obs, torch::Tensor out);", cuda_sources=_SRC, functions=["policy"])


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_enc = nn.Parameter(torch.empty(256, 4))

    def forward(self, obs, state):
        out = torch.empty_like(obs)
        _ext.policy(obs, out)
        return out, state, out.sum(-1)
