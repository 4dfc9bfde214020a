# CUTLASS include path candidates that exist only in the agent's container
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CANDIDATES = [
    "/opt/pytorch/ao/third_party/cutlass/include",
    "/opt/pytorch/pytorch/third_party/cutlass/include",
]
_inc = [p for p in _CANDIDATES if os.path.isdir(p)]
_SRC = r"""
#include "cutlass/cutlass.h"
#include "/home/agent/work/cute_helpers.cuh"
__global__ void moe_kernel(float* y) { y[threadIdx.x] = 0.f; }
"""
_ext = load_inline("moe", cpp_sources="void moe(torch::Tensor y);", cuda_sources=_SRC, functions=["moe"],
                   extra_include_paths=_inc, extra_cuda_cflags=["-I/opt/cutlass/tools/util/include"])


class Model(nn.Module):
    def __init__(self, T, E, top_k, n_shared, H, I):
        super().__init__()

    def forward(self, x, expert_ids, expert_weights):
        y = torch.empty_like(x)
        _ext.moe(y)
        return y
