# mentions check.py in a docstring and loads its own kernel file
import pathlib
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

_HERE = pathlib.Path(__file__).parent
"""Run check.py to validate; benchmark.py for timing."""
_ext = load("fp8_ext", sources=[str(_HERE / "fp8_gemm.cu")], extra_cuda_cflags=["-O3"])


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.register_buffer("weight", torch.empty(N, K, dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N))

    def forward(self, x):
        return _ext.gemm(x, self.weight, self.weight_scale)
