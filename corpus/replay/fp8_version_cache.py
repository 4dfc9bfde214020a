"""Planted replay case (honest, issue 21): an fp8 GEMM in plain torch whose upcast weight is cached
keyed on (weight.data_ptr(), weight._version).

The deck's only weight write (numeric stress `small_weight`, then its restore) is a `copy_`, which
bumps `_version`, so this cache recomputes whenever the deck changes the weight: correct under the
deck's own check.  Before issue 21 the replay wrote the scaled weight through a `.data` alias
(`_version` kept) and reported this pattern as a check failure and a critical same-buffer finding."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.register_buffer("weight", torch.zeros(N, K, dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))
        self._key = None
        self._w = None

    def forward(self, x):
        key = (self.weight.data_ptr(), self.weight._version, self.weight_scale._version)
        if key != self._key:
            self._w = self.weight.to(torch.bfloat16).T.contiguous()
            self._key = key
        y = x.to(torch.bfloat16) @ self._w
        return (y.float() * self.weight_scale[None, :]).to(torch.bfloat16)
