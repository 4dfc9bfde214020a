import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

K = r"""
__global__ void merge(const float* in, float* out) {
    const unsigned FULL = 0xffffffffu;
    float keys[4];
    for (int j = 0; j < 4; ++j) keys[j] = in[threadIdx.x * 4 + j];
    int idx = (threadIdx.x >> 3) & 3;
    int srcLane = (threadIdx.x + 8) & 31;
    out[threadIdx.x] = __shfl_sync(FULL, keys[idx], srcLane);
}
"""
mod = load_inline("merge", cpp_sources="void merge(torch::Tensor a, torch::Tensor b);", cuda_sources=K, functions=["merge"])


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1))

    def forward(self, x):
        o = torch.empty(x.shape[0], 32, device=x.device)
        mod.merge(x, o)
        return o, o.long()
