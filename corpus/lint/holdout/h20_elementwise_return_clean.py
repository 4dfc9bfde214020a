import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

K = r"""
__global__ void decay_scan(const float* x, const float* d, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = x[i] * d[i];
}
__global__ void block_sum(const float* x, float* y, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = (blockIdx.x * 256 + t < n) ? x[blockIdx.x * 256 + t] : 0.f;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
    if (t == 0) y[blockIdx.x] = s[0];
}
"""
m = load_inline("ds", cpp_sources="void run(torch::Tensor x, torch::Tensor d, torch::Tensor y);", cuda_sources=K, functions=["run"])


class Model(nn.Module):
    def forward(self, x, decay, resets):
        y = torch.empty_like(x)
        m.run(x, decay * resets, y)
        return y
