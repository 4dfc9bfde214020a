"""Planted replay case (honest, mega 02 Kimi `step` API in plain torch): dequantizes the live
weights on every call and reads the state it is handed.  It updates the state in place (the
contract allows it): S and the conv windows are copied into the caller's tensors, the MLA cache
is replaced in the caller's dict, and the same list is returned."""
import torch

from kimi_core import Model as _Core, layer  # noqa: F401


class Model(_Core):
    @torch.no_grad()
    def step(self, hidden, state):
        W = self.weights()
        x = hidden
        for i, (blk, st) in enumerate(zip(self.blocks, state)):
            x, new = layer(self.cfg, blk, W, i, x, st)
            for k, v in new.items():
                if k in st and st[k].shape == v.shape:
                    st[k].copy_(v)
                else:
                    st[k] = v
        return x, state
