"""Planted replay case: the dequantized weights are cached by id(model).  A new model with other
weights that lands on a dead model's id() keeps decoding with the old weights."""
from kimi_core import Model as _Core, weights  # noqa: F401

_W = {}


class Model(_Core):
    def weights(self):
        key = id(self)
        if key not in _W:
            _W[key] = weights(self)
        return _W[key]
