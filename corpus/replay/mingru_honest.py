"""Planted replay case (honest, cuda 04 grid MinGRU rollout API in plain torch): reads the live
weights on every call."""
from mingru_core import Model, env_step, gates, policy_forward, rollout  # noqa: F401


def run(num_envs, horizon, seed, model=None):
    model = model or Model()
    return rollout(model, gates(model), num_envs, horizon, seed)
