"""Planted replay case (the deck's one-step check cannot see it): computes the step with the updated
KDA state but hands back the KDA state it was given (S never advances).  One step barely moves S,
so the deck's S cosine still passes; a chain of steps drifts away from the reference."""
import torch

from kimi_core import Model as _Core  # noqa: F401


class Model(_Core):
    @torch.no_grad()
    def step(self, hidden, state):
        x, new = super().step(hidden, state)
        for st_in, st_out in zip(state, new):
            if "S" in st_in:
                st_out["S"] = st_in["S"]
        return x, new
