"""Planted replay case: honest but slow (each call sleeps 0.5 s), for the whole-probe time limit.

Every call is far inside a per-call limit; a probe's eleven warm-up calls are not inside a short
whole-probe limit, which must stop it as a timeout, not let it run on."""
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        time.sleep(0.5)
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
