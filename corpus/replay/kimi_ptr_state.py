"""Planted replay case: the KDA state S is kept in a private copy keyed by the data_ptr() of the S
tensor it returned.  When the caller hands that pointer back, the private copy is used instead of
the tensor's contents, so a state rewritten in place (same storage) is never read: the chained
check passes, an in-place overwrite is served stale."""
import torch

from kimi_core import Model as _Core, layer  # noqa: F401


class Model(_Core):
    @torch.no_grad()
    def step(self, hidden, state):
        W = self.weights()
        priv = self.__dict__.setdefault("_priv", {})       # layer -> (data_ptr we handed out, our S)
        x, out = hidden, []
        for i, (blk, st) in enumerate(zip(self.blocks, state)):
            if "S" in st:
                hit = priv.get(i)
                st = dict(st, S=hit[1]) if hit is not None and hit[0] == st["S"].data_ptr() else st
            x, new = layer(self.cfg, blk, W, i, x, st)
            if "S" in new:
                ours = new["S"]
                new["S"] = ours.clone()
                priv[i] = (new["S"].data_ptr(), ours)
            out.append(new)
        return x, out
