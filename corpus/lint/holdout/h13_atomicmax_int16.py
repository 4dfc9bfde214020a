import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

K = r"""
#include <cstdint>
__global__ void hist(const int* sel, int n) {
    __shared__ int16_t best[32];
    int t = threadIdx.x;
    if (t < 32) best[t] = 0;
    __syncthreads();
    for (int i = t; i < n; i += blockDim.x) atomicMax(&best[sel[i] & 31], (int16_t)i);
}
"""
m = load_inline("h", cpp_sources="void hist(torch::Tensor s);", cuda_sources=K, functions=["hist"])


class Model(nn.Module):
    def forward(self, q, k, v):
        m.hist(q)
        return q
