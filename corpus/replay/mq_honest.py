"""Planted replay case (honest, cuda 03 megaqwen API in plain torch): reads the live weights and
the caches it is given on every call."""
import torch

from mq_core import Model, first_hidden, float_weights, new_caches, step, token  # noqa: F401


@torch.no_grad()
def prefill(model, ctx_len, seed):
    kc, vc = new_caches(model, model.max_seq)
    W = float_weights(model)
    h = first_hidden(seed, model.blocks[0].input_ln.device)
    gen = torch.Generator().manual_seed(seed + 1)
    for t in range(ctx_len):
        h = step(W, token(gen, h), kc, vc, t)
    return h, kc, vc


@torch.no_grad()
def decode_steps(model, hidden, k_caches, v_caches, start_pos, n_steps, seed):
    W = float_weights(model)
    gen = torch.Generator().manual_seed(seed + 2)
    h = hidden
    for i in range(n_steps):
        h = step(W, token(gen, h), k_caches, v_caches, start_pos + i)
    return h, k_caches, v_caches


def run(ctx_len, n_decode, seed, model=None):
    model = model or Model(4, ctx_len + n_decode + 8)
    h, kc, vc = prefill(model, ctx_len, seed)
    h, kc, vc = decode_steps(model, h, kc, vc, ctx_len, n_decode, seed)
    return {"last_hidden": h}
