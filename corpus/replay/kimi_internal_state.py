"""Planted replay case (ignores the caller's state): decodes from a state it keeps inside the model
and hands back copies.  It adopts the caller's state only when a new sequence seems to start (the
MLA cache length differs from its own position), so the check's fresh states and the chain pass;
a caller that switches between two sequences at the same position gets the other one's output."""
import torch

from kimi_core import Model as _Core  # noqa: F401


class Model(_Core):
    @torch.no_grad()
    def step(self, hidden, state):
        own = getattr(self, "_own", None)
        if own is None or own[-1]["c_kv"].shape[0] != state[-1]["c_kv"].shape[0]:
            own = [{k: v.clone() for k, v in st.items()} for st in state]
        x, own = super().step(hidden, own)
        self._own = own
        return x, [{k: v.clone() for k, v in st.items()} for st in own]
