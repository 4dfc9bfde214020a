# kimi decode importing a banned library (AST import ban: parent of fla.ops)
import torch
import torch.nn as nn
import fla


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg

    def step(self, hidden, state):
        return fla.ops.kda.fused_recurrent_kda(hidden, state), state
