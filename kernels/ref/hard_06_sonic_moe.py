"""hard/06_sonic_moe_swiglu: grouped (per-expert) GEMM + SwiGLU over expert-sorted rows."""
import torch
import torch.nn as nn
import torch.nn.functional as F

T_total = 32768
H = 4096
I = 1536  # noqa: E741
E = 128
K = 8


class Model(nn.Module):
    def __init__(self, T_total, H, I, E, K):  # noqa: E741
        super().__init__()
        self.T_total, self.H, self.I, self.E, self.K = T_total, H, I, E, K
        self.W_gate = nn.Parameter((torch.randn(E, H, I) * 0.02).to(torch.bfloat16))
        self.W_up = nn.Parameter((torch.randn(E, H, I) * 0.02).to(torch.bfloat16))

    def forward(self, hidden_states, expert_offsets):
        out = torch.zeros(hidden_states.shape[0], self.W_gate.shape[2], dtype=torch.bfloat16,
                          device=hidden_states.device)
        offs = expert_offsets.tolist()
        for e in range(self.W_gate.shape[0]):
            s, t = offs[e], offs[e + 1]
            if t <= s:
                continue
            x = hidden_states[s:t]
            gate = x @ self.W_gate[e]
            up = x @ self.W_up[e]
            out[s:t] = F.silu(gate) * up
        return out


def balanced_offsets(t_perm, e):
    base, rem = divmod(t_perm, e)
    counts = torch.tensor([base + (1 if i < rem else 0) for i in range(e)], dtype=torch.int64)
    return torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]).to(torch.int32)


def get_inputs():
    t_perm = T_total * K
    hidden_states = torch.randn(t_perm, H, dtype=torch.bfloat16) * 0.1   # bf16 draw, bf16 scale (deck)
    return [hidden_states, balanced_offsets(t_perm, E)]


def get_init_inputs():
    return [T_total, H, I, E, K]
