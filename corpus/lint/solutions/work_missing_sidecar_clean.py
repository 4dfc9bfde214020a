"""FP8 GEMM from a CUDA source kept beside the solution (not in this file)."""
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

_HERE = os.path.dirname(os.path.abspath(__file__))
_ext = load(name="fp8_gemm_ext", sources=[os.path.join(_HERE, "fp8_gemm.cu")], extra_cuda_cflags=["-O3"])


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.register_buffer("weight", torch.empty(N, K, dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))

    def forward(self, x):
        return _ext.gemm(x, self.weight, self.weight_scale)
