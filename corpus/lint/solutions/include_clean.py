# includes resolved from the installed toolkit and torch, build dir in /tmp
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline, include_paths

_SRC = r"""
#include <cuda_runtime.h>
#include <cuda_bf16.h>
__global__ void k(float* y) { y[threadIdx.x] = 1.f; }
"""
_ext = load_inline("inc", cpp_sources="void k(torch::Tensor y);", cuda_sources=_SRC, functions=["k"],
                   extra_include_paths=include_paths() + ["/usr/local/cuda/include"],
                   build_directory=os.environ.get("TMPDIR", "/tmp"))


class Model(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _ext.k(y)
        return y
