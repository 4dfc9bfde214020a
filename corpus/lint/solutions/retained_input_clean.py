# Look-alikes that keep nothing stale: a workspace shaped like the first input (contents never
# kept), a graph's static input refreshed from x on every call, the last input kept for logging
# only (stored on every call, never read back in the entry).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1))
        self._ws = None
        self._static_x = None
        self._graph = None

    def forward(self, x):
        if self._ws is None or self._ws.shape != x.shape:
            self._ws = torch.empty_like(x)
        if self._static_x is None:
            self._static_x = x.clone()
            self._graph = torch.cuda.CUDAGraph()
        self._static_x.copy_(x)
        self.last_input = x
        torch.sort(self._static_x, dim=-1, descending=True, out=(self._ws, torch.empty_like(x, dtype=torch.long)))
        return self._ws[:, : self.k].clone()
