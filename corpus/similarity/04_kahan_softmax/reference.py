"""Reference: numerically careful softmax over the last dimension (fp32 accumulation)."""
import torch
import torch.nn as nn

OP_TYPE = "softmax"
SUPPORTED_PRECISIONS = ["fp32", "bf16"]


class Model(nn.Module):
    def __init__(self, batch: int, vocab: int):
        super().__init__()
        self.batch = batch
        self.vocab = vocab

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.to(torch.float32)
        m = x32.amax(dim=-1, keepdim=True)
        e = torch.exp(x32 - m)
        s = e.sum(dim=-1, keepdim=True)
        return (e / s).to(x.dtype)


BATCH = 32
VOCAB = 131072


def get_inputs():
    x = torch.randn(BATCH, VOCAB, dtype=torch.float32) * 4.0
    return [x]


def get_init_inputs():
    return [BATCH, VOCAB]
