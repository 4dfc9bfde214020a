"""Planted replay case (the fixture's split_cache pattern): the w_gru gate blocks are split once and
cached by (id(model), w_gru._version).  load_state_dict bumps _version, so the check's reload per
seed recomputes, and so does an in-place copy_ of new weights (the deck's own kind of write);
weights written through .data (data_ptr and _version kept: a write the deck never makes) are not
followed (reported as info, allowed), and a new model that lands on a dead model's id() is served
the old blocks (stale, the finding that matters)."""
import torch

from mingru_core import Model, env_step, gates, policy  # noqa: F401

_split = {}


def _gates(model):
    key = (id(model), model.w_gru._version)
    if key not in _split:
        _split[key] = [tuple(t.clone() for t in g) for g in gates(model)]
    return _split[key]


@torch.no_grad()
def policy_forward(model, obs, state):
    return policy(model, _gates(model), obs, state)


def run(num_envs, horizon, seed, model=None):
    from mingru_core import rollout
    model = model or Model()
    return rollout(model, _gates(model), num_envs, horizon, seed)
