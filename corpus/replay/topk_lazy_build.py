"""Planted replay case (honest, issue 21): the build happens inside the first forward, as solutions
that JIT-compile their extension on first use do (here a 12 s wait stands for the compiler).  Every
later call is quick.  Correct throughout: a replay that gives the first call only the ordinary call
limit times it out and reports a hang that is not there."""
import time

import torch
import torch.nn as nn

_built = []


def _build():
    time.sleep(12.0)
    _built.append(True)


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        if not _built:
            _build()
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
