# sys.exit only in the script entry point, which never runs on import
import sys
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 1.0


def _selftest():
    m = Model()
    x = torch.ones(4)
    return bool((m(x) == x).all())


if __name__ == "__main__":
    sys.exit(0 if _selftest() else 1)
