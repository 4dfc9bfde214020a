"""Planted replay case: a constructor that always raises (a shape the agent never supported).

Every probe builds a model and fails the same way; the replay must say so once, as one finding,
while each probe still gets its own row."""
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        raise ValueError(f"unsupported k={k}: this kernel only handles k=64")

    def forward(self, x):  # pragma: no cover - never reached
        return x
