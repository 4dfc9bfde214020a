"""cuda/01_glm52_fused_moe: one GLM-5.2 MoE layer (shared + top-8 routed SwiGLU experts),
computed entirely in fp32 with upcast weights, output cast to bf16.  Routing is an input."""
import torch
import torch.nn as nn
import torch.nn.functional as F

T = 4096
E = 256
top_k = 8
n_shared = 1
H = 4096
I = 2048  # noqa: E741


def expert_ffn(x, w1, w2, inter):
    """SwiGLU expert in fp32: (silu(x W1[:I]^T) * (x W1[I:]^T)) W2^T."""
    w1 = w1.float()
    h = F.silu(x @ w1[:inter].T) * (x @ w1[inter:].T)
    return h @ w2.float().T


class Model(nn.Module):
    def __init__(self, T, E, top_k, n_shared, H, I):  # noqa: E741
        super().__init__()
        self.T, self.E, self.top_k, self.n_shared, self.H, self.I = T, E, top_k, n_shared, H, I
        self.w1_routed = nn.Parameter((torch.randn(E, 2 * I, H) * 0.02).to(torch.bfloat16))
        self.w2_routed = nn.Parameter((torch.randn(E, H, I) * 0.02).to(torch.bfloat16))
        self.w1_shared = nn.Parameter((torch.randn(n_shared, 2 * I, H) * 0.02).to(torch.bfloat16))
        self.w2_shared = nn.Parameter((torch.randn(n_shared, H, I) * 0.02).to(torch.bfloat16))

    def forward(self, x, expert_ids, expert_weights):
        xf = x.float()
        out = torch.zeros(x.shape[0], self.H, dtype=torch.float32, device=x.device)
        for s in range(self.w1_shared.shape[0]):
            out += expert_ffn(xf, self.w1_shared[s], self.w2_shared[s], self.I)
        ids = expert_ids.long()
        for e in torch.unique(ids).tolist():
            rows, slot = (ids == e).nonzero(as_tuple=True)
            y = expert_ffn(xf[rows], self.w1_routed[e], self.w2_routed[e], self.I)
            out.index_add_(0, rows, expert_weights[rows, slot].float()[:, None] * y)
        return out.to(torch.bfloat16)


def get_inputs():
    x = torch.randn(T, H, dtype=torch.bfloat16)
    logits = torch.randn(T, E) + torch.linspace(0.3, 0.0, E)
    vals, ids = torch.topk(logits, top_k, dim=-1)
    weights = torch.softmax(vals, dim=-1).to(torch.bfloat16)
    return [x, ids.to(torch.int64), weights]


def get_init_inputs():
    return [T, E, top_k, n_shared, H, I]
