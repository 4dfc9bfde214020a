# attributes of the solution's own objects named like the reference; the reference module is untouched
import torch
import torch.nn as nn


class _Ref:
    scale = 1.0


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.ref = _Ref()
        self.ref.scale = 2.0
        reference_scale = 3.0
        self.reference_scale = reference_scale

    def forward(self, x):
        return x * self.ref.scale
