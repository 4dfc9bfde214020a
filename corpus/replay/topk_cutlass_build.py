"""Planted replay case (honest, issue 21): a solution that builds an extension against CUTLASS at
import, as the CUTLASS solutions of the hard deck do, with the headers looked for in a checkout
beside the file (which a published archive does not carry).  The build is a real compiler call
(`c++ -fsyntax-only` on a translation unit that includes cutlass/cutlass.h), so the compiler's own
search path (CPATH, which the replay's --cutlass-include sets) decides whether it finds them.  A
failure is raised the way torch.utils.cpp_extension reports one: the compiler's output in the
message.  The top-k itself is a plain sort (see topk_honest.py)."""
import os
import subprocess

import torch
import torch.nn as nn

_HERE = os.path.dirname(os.path.abspath(__file__))
_VENDORED = os.path.join(_HERE, "third_party", "cutlass", "include")


def _build():
    src = '#include "cutlass/cutlass.h"\nint topk_cutlass_probe() { return 0; }\n'
    cmd = [os.environ.get("CXX", "c++"), "-fsyntax-only", "-x", "c++", "-I" + _VENDORED, "-"]
    p = subprocess.run(cmd, input=src, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"Error building extension 'topk_cutlass': {p.stdout}{p.stderr}")


_build()


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
