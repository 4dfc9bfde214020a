"""Planted replay case: the CUDA headers found from `nvidia.__file__`, as solutions built on a machine
whose `nvidia` wheels ship an `nvidia/__init__.py` do.  Where `nvidia` is a namespace package its
`__file__` is None and the import fails: the replay must call that the build environment
(`not_replayable`), and with `--nvidia-file` the solution imports and passes."""
import os

import nvidia
import torch
import torch.nn as nn

_BASE = os.path.dirname(nvidia.__file__)
INCLUDE = [os.path.join(_BASE, p, "include") for p in ("cublas", "cuda_runtime")
           if os.path.isdir(os.path.join(_BASE, p, "include"))]
if not INCLUDE:
    raise RuntimeError(f"no CUDA headers under {_BASE}")


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        return torch.topk(x, self.k, dim=-1)
