# Grouped GEMM: prepacked weights keyed by data_ptr and _version; every call launches the kernel
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _swiglu_kernel(x_ptr, w_ptr, off_ptr, o_ptr, H, I, BM: tl.constexpr):
    e = tl.program_id(0)
    start = tl.load(off_ptr + e)
    end = tl.load(off_ptr + e + 1)
    rows = start + tl.arange(0, BM)
    x = tl.load(x_ptr + rows[:, None] * H + tl.arange(0, 64)[None, :], mask=rows[:, None] < end)
    w = tl.load(w_ptr + e * H * 2 * I + tl.arange(0, 64)[:, None] * 2 * I + tl.arange(0, 128)[None, :])
    acc = tl.dot(x, w)
    tl.store(o_ptr + rows[:, None] * I + tl.arange(0, 128)[None, :], acc.to(tl.bfloat16), mask=rows[:, None] < end)


class Model(nn.Module):
    def __init__(self, T_total, H, I, E, K):
        super().__init__()
        self.W_gate = nn.Parameter(torch.empty(E, H, I, dtype=torch.bfloat16))
        self.W_up = nn.Parameter(torch.empty(E, H, I, dtype=torch.bfloat16))
        self._packed = None
        self._packed_key = None

    def _pack(self):
        key = (self.W_gate.data_ptr(), self.W_gate._version, self.W_up.data_ptr(), self.W_up._version)
        if self._packed_key != key:
            self._packed = torch.stack((self.W_gate, self.W_up), dim=-1).flatten(-2).contiguous()
            self._packed_key = key
        return self._packed

    def forward(self, hidden_states, expert_offsets):
        w = self._pack()
        T, H = hidden_states.shape
        I = self.W_gate.shape[2]
        out = torch.empty(T, I, device=hidden_states.device, dtype=torch.bfloat16)
        _swiglu_kernel[(self.W_gate.shape[0],)](hidden_states, w, expert_offsets, out, H, I, 64)
        return out
