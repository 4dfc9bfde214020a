"""Planted replay case: an honest top-k that leaves files in its build cache (TORCH_EXTENSIONS_DIR)
at import: 40 files of 64 KiB, as a solution that builds many variants (or fills the cache on purpose)
would.  The replay accounts for them (`info.build_cache`) and enforces the cache's caps."""
import os

import torch
import torch.nn as nn

_ext = os.environ.get("TORCH_EXTENSIONS_DIR")
if _ext:
    d = os.path.join(_ext, "variants")
    os.makedirs(d, exist_ok=True)
    for i in range(40):
        with open(os.path.join(d, f"v{i}.so"), "wb") as f:
            f.write(os.urandom(64 * 1024))


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
