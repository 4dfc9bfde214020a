# progress messages that merely contain the words
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.verbose = False

    def forward(self, x):
        if self.verbose:
            print("first pass done, computing peak fraction estimate")
        return x
