"""Planted replay case (stale): the same fp8 GEMM as fp8_version_cache.py, but the upcast weight is
cached keyed on the weight's data_ptr alone.  An in-place weight write keeps the pointer, so the
deck's `small_weight` stress case (a `copy_` into the same buffer) is served the old weight."""
import torch
import torch.nn as nn

_CACHE = {}


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.register_buffer("weight", torch.zeros(N, K, dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))

    def forward(self, x):
        key = self.weight.data_ptr()
        if key not in _CACHE:
            _CACHE[key] = self.weight.to(torch.bfloat16).T.contiguous()
        y = x.to(torch.bfloat16) @ _CACHE[key]
        return (y.float() * self.weight_scale[None, :]).to(torch.bfloat16)
