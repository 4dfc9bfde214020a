"""Planted GPU replay case: the weight is repacked (transposed to K-major bf16) once and cached by
the buffer's data_ptr, so an in-place change of `weight` (the deck's small_weight stress case,
or the same-buffer parameter probe) is never seen."""
import torch
import torch.nn as nn

_PACKED = {}


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.register_buffer("weight", torch.zeros(N, K, dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))

    def forward(self, x):
        key = self.weight.data_ptr()
        if key not in _PACKED:
            _PACKED[key] = self.weight.to(torch.bfloat16).t().contiguous()
        y = x.to(torch.bfloat16) @ _PACKED[key]
        return (y.float() * self.weight_scale[None, :]).to(torch.bfloat16)
