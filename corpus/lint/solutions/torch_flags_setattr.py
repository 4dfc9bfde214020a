# the same flag, spelled through setattr inside __init__
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        setattr(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", True)

    def forward(self, x):
        return x
