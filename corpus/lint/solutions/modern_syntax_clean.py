# valid modern syntax (match, walrus, f-string nesting, type hints) must parse without fallback
from __future__ import annotations

import torch
import torch.nn as nn


def _tile(n: int) -> int:
    match n:
        case 1:
            return 32
        case x if x < 4096:
            return 64
        case _:
            return 128


class Model(nn.Module):
    def __init__(self, M: int, N: int, K: int, group_size: int = 128) -> None:
        super().__init__()
        self.cfg = {f"{'tile'}_{M}": _tile(M)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (m := x.shape[0]) > 0:
            return x * float(m)
        return x
