"""Planted replay case (look-alike of topk_capabilities): what kernel solutions do at import and in
forward that is not a capability.  It reads a tuning file of its own folder, writes a cache under its
home, runs the C++ compiler itself (`c++ --version`), reads the interpreter's own files, warns and
logs (both read the call stack for their own bookkeeping), prints an exception's traceback, defines a
namedtuple and a dataclass (generated code), reads its environment, and loads a shared library it put in
its own folder through ctypes and looks a symbol up in it (a kernel library it built, called through
ctypes instead of a Python extension).  No `replay-capability`."""
import collections
import dataclasses
import logging
import os
import subprocess
import sys
import traceback
import warnings

import torch
import torch.nn as nn

_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "tuning.json"), "w") as f:    # its own folder
    f.write('{"block": 128}')
with open(os.path.join(_HERE, "tuning.json")) as f:
    TUNING = f.read()
_cache = os.path.join(os.path.expanduser("~"), ".cache", "topk")
os.makedirs(_cache, exist_ok=True)
with open(os.path.join(_cache, "plan.txt"), "w") as f:     # its home
    f.write("plan")
try:
    subprocess.run(["c++", "--version"], capture_output=True, check=False, timeout=60)   # a compiler, itself
except OSError:
    pass
with open(os.path.join(os.path.dirname(os.__file__), "os.py")) as f:   # the interpreter's own files
    f.read(10)
warnings.warn("topk: falling back to the default block size", stacklevel=1)
logging.getLogger("topk").warning("plan %s", TUNING)
try:
    raise ValueError("probe")
except ValueError:
    traceback.print_exc(file=sys.stderr)
import _ctypes  # noqa: E402 - any shared object stands for the library a solution builds with nvcc --shared
import ctypes  # noqa: E402
import shutil  # noqa: E402

_own_lib = os.path.join(_HERE, "libtopk_own.so")
shutil.copyfile(_ctypes.__file__, _own_lib)
_lib = ctypes.CDLL(_own_lib)
_entry = _lib.PyInit__ctypes                                  # a symbol of its own library
Plan = collections.namedtuple("Plan", "block warps")


@dataclasses.dataclass
class Config:
    block: int = int(os.environ.get("TOPK_BLOCK", "128"))


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self.cfg = Config()
        self.register_buffer("_dummy", torch.zeros(1, dtype=torch.float32))

    def forward(self, x):
        v, i = x.sort(dim=-1, descending=True, stable=True)
        return v[:, : self.k].contiguous(), i[:, : self.k].contiguous()
