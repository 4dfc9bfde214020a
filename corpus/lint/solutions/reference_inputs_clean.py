# hard deck: importing reference for get_inputs in a self-test is allowed
import torch
import torch.nn as nn
import triton
import triton.language as tl
import reference


@triton.jit
def _k(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1))
        self.k = k

    def forward(self, x):
        out = torch.empty_like(x)
        _k[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), 1024)
        return out[:, : self.k], torch.zeros(x.shape[0], self.k, dtype=torch.long, device=x.device)


if __name__ == "__main__":
    m = Model(*reference.get_init_inputs())
    print(m(*reference.get_inputs()))
