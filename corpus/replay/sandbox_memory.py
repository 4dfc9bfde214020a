"""Planted replay case (hostile): allocates host memory until refused (issue 18: until the kernel's
OOM killer acted), 128 MiB at a time, every page touched, up to CFG["bytes"] (4 GiB here), then
an honest top-k that raises in forward if it got it all.  Under the sandbox the allocation is
refused (RLIMIT_AS: the solution goes on) or the worker is killed at the cgroup's ceiling (the
replay reports it); either way the replay gives its result and nothing else is touched."""
import sys

import torch
import torch.nn as nn

CFG = {"bytes": 4 * 2**30}
GOT = []
chunks, total = [], 0
try:
    while total < CFG["bytes"]:
        t = torch.empty(128 * 2**20, dtype=torch.uint8)
        t.fill_(1)                      # touched: resident, not just reserved
        chunks.append(t)
        total += t.numel()
    GOT.append(f"allocated {total >> 20} MiB")
except (MemoryError, RuntimeError) as e:
    print(f"allocation refused after {total >> 20} MiB: {e}", file=sys.stderr)
del chunks


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        if GOT:
            raise RuntimeError("reached: " + " | ".join(GOT))
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
