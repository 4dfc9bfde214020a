"""Planted replay case: returns torch.empty outputs it never writes.

On a GPU the deck's check computes the reference, frees its output, then calls the solution: the
caching allocator hands torch.empty that very block, still holding the right answer, and the check
passes with no work done.  The replay poisons the memory torch.empty hands out (nan-poison):
`replay-output-unwritten`."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        b = x.shape[0]
        return (torch.empty(b, self.k, dtype=x.dtype, device=x.device),
                torch.empty(b, self.k, dtype=torch.int64, device=x.device))
