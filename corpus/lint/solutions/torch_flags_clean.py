# reads flags and uses local precision contexts only
import torch
import torch.nn as nn

_TF32 = torch.backends.cuda.matmul.allow_tf32
torch.set_float32_matmul_precision("highest")


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.use_tf32 = bool(_TF32)

    def forward(self, x):
        with torch.autocast("cuda", enabled=False):
            return x.clone()
