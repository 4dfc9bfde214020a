"""Look-alike for fresh-state's state-on-dead-id, honest: every state it is handed is kept, keyed by
id(state) with the state itself beside it.  A state it holds cannot die, so no new state can take
its id(); the probe must say it could not hand one over (skipped), not fail the solution."""
from kimi_core import Model as _Core, weights  # noqa: F401

_SEEN = {}


class Model(_Core):
    def step(self, hidden, state):
        _SEEN[id(state)] = state
        x, new = super().step(hidden, state)
        state[:] = new
        return x, state
