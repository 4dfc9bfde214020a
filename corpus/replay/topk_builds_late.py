"""Planted replay case: a build inside a later call.  The first forward is plain; the second one
"compiles" a path the first did not need (a copy of the system's `sleep` named nvcc, run for
BUILD_S seconds, the way a `load_inline` for a new shape's kernel runs nvcc inside forward), then
answers correctly.  The build outlasts the call limit but not the build budget: the replay must
wait on it (the call is building, not hanging) and pass."""
import os
import shutil
import subprocess

import torch
import torch.nn as nn

BUILD_S = 5


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.calls = 0
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        self.calls += 1
        if self.calls == 2 and not os.path.exists("built.ok"):
            exe = os.path.abspath("nvcc")
            if not os.path.exists(exe):
                shutil.copy(shutil.which("sleep") or "/bin/sleep", exe)
                os.chmod(exe, 0o755)
            subprocess.run([exe, str(BUILD_S)], stdin=subprocess.DEVNULL)
            open("built.ok", "w").close()
        return torch.topk(x, self.k, dim=-1)
