"""Planted replay case (issue 21): a solution whose build outlives it.  At import it starts a long
"compiler" process the way ninja starts each compiler command: in a process group of its own (so a
kill of the solution's process group does not reach it), writing its pid and the nonce on its command line to
compiler.pid in the working directory.  Then every forward hangs, so the replay times out and must end the compiler
too."""
import os
import subprocess
import sys

import torch
import torch.nn as nn

# the nonce on its command line finds it from outside a PID namespace, where its pid means nothing
_nonce = os.urandom(8).hex()
_p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "planted-compiler-" + _nonce],
                      preexec_fn=os.setpgrp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
with open("compiler.pid", "w") as f:
    f.write(f"{_p.pid} planted-compiler-{_nonce}")


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        while True:
            pass
