# cuda deck solution in plain torch: no CUDA evidence
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_enc = nn.Parameter(torch.empty(256, 4))

    def forward(self, obs, state):
        h = obs @ self.w_enc.t()
        return h, state, h.sum(-1)
