"""Planted replay case: a build inside the call.  Every forward starts a "compiler" named nvcc (a
copy of the system's `sleep` under that name, in the working directory, the way a `load_inline`
inside forward runs nvcc) and waits for it, so the call outlives its limit while the build is still
running.  The replay's timeout must say that a build was running (it may only be slow), and end it."""
import os
import shutil
import subprocess

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        exe = os.path.abspath("nvcc")
        if not os.path.exists(exe):
            shutil.copy(shutil.which("sleep") or "/bin/sleep", exe)
            os.chmod(exe, 0o755)
        subprocess.run([exe, "600"], stdin=subprocess.DEVNULL)
        return torch.topk(x, self.k, dim=-1)
