"""Planted replay case: state bound to the first caller tensors it saw.

Like a CUDA graph captured on the caller's buffers and replayed on every later call, the model
keeps a reference to the first input and always computes from it.  It reads that storage's live
contents, so the official check (one input per seed, freed in between) and the same-buffer probe
(new data in the same storage) both pass; new input tensors at new addresses do not."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self._bound = None
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        if self._bound is None or self._bound.shape != x.shape:
            self._bound = x          # "capture": the graph's input is the caller's tensor
        v, i = self._bound.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
