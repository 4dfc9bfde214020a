# invalid utf-8 in a comment: ÿþ
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.clone()
