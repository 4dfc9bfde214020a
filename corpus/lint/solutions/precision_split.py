"""MinGRU rollout: TF32 GEMMs for the rollout, full fp32 for the policy."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, obs_dim=16, hidden=64, n_actions=4):
        super().__init__()
        self.w = nn.Parameter(torch.randn(obs_dim, hidden))

    def forward(self, obs, state):
        return policy_forward(self, obs, state)


def policy_forward(model, obs, state):
    h = torch.tanh(obs @ model.w)
    return h, state + h, h.sum(-1)


def run(num_envs, horizon, seed, model=None):
    prev = torch.backends.cuda.matmul.allow_tf32
    prev_p = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    try:
        obs = torch.zeros(num_envs, model.w.shape[0], device=model.w.device)
        state = torch.zeros(num_envs, model.w.shape[1], device=model.w.device)
        for _ in range(horizon):
            h = torch.tanh(obs @ model.w)
            state = state + h
        return {"state": state}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
        torch.set_float32_matmul_precision(prev_p)
