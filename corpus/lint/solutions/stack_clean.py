# error messages mention the stack in prose only; traceback is used for formatting an exception
import traceback
import torch
import torch.nn as nn


class Model(nn.Module):
    """Does not inspect the stack; a failed build prints its traceback."""

    def __init__(self, batch, n, k):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1))
        self.k = k

    def forward(self, x):
        try:
            v = x.new_empty(x.shape[0], self.k)
        except RuntimeError:
            traceback.print_exc()
            raise
        return v, torch.zeros(x.shape[0], self.k, dtype=torch.long, device=x.device)
