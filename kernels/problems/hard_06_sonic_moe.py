"""hard/06_sonic_moe_swiglu (B5)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from forensics import problems

from ..registry import PropertyCase, ProblemSpec
from ._util import cases, lazy_triton, stress

_KEYS = ("T_total", "H", "I", "E", "K")


def oracle(model, inputs):
    """Per expert in fp32 with no intermediate bf16 rounding."""
    hidden, offsets = inputs
    out = torch.zeros(hidden.shape[0], model.W_gate.shape[2], dtype=torch.float32, device=hidden.device)
    offs = offsets.tolist()
    for e in range(model.W_gate.shape[0]):
        s, t = offs[e], offs[e + 1]
        if t > s:
            x = hidden[s:t].float()
            out[s:t] = F.silu(x @ model.W_gate[e].float()) * (x @ model.W_up[e].float())
    return out


def ragged_offsets(offsets, receiver=0, donor=1, row_delta=129):
    counts = (offsets[1:] - offsets[:-1]).long().tolist()
    E = len(counts)
    receiver %= E
    donor %= E
    if donor == receiver:
        donor = (donor + 1) % E
    need, d = row_delta, donor
    for _ in range(E):
        if need <= 0:
            break
        if d != receiver:
            take = min(need, max(0, counts[d] - 1))
            counts[d] -= take
            counts[receiver] += take
            need -= take
        d = (d + 1) % E
    return torch.tensor([0] + counts, dtype=torch.int64).cumsum(0).to(torch.int32)


def ragged_mutate(spec, shape, inputs, receiver=0, donor=1, row_delta=129, prefix_rows=64, suffix_scale=8):
    hidden, offsets = inputs
    hidden = hidden.clone()
    offsets = ragged_offsets(offsets, receiver, donor, row_delta)
    T_perm = hidden.shape[0]
    prefix = min(max(64, math.ceil(65536 / shape["H"]), prefix_rows), T_perm - 1)
    hidden[prefix:] = (hidden[prefix:].float() * suffix_scale).to(hidden.dtype)
    return [hidden, offsets]


CANONICAL = dict(receiver=0, donor=1, row_delta=129, prefix_rows=64, suffix_scale=8)

SPECS = [ProblemSpec(
    entry=problems.get("06_sonic_moe_swiglu", "2026-06-12"),
    regime="compute", peak_key="bf16", global_names=_KEYS,
    stress_cases=cases(stress("small_hidden", 5e-4, 5e-2, inputs=(0,), scale=1e-2),
                       stress("large_hidden", 0.1, 0.05, inputs=(0,), scale=8.0)),
    flops_expr="2*T_total*H*(2*I)", bytes_expr="T_total*K*H*2 + E*H*(2*I)*2 + T_total*K*I*2",
    interface=dict(init="Model(T_total, H, I, E, K)",
                   forward="forward(hidden_states bf16 (T_total*K, H), expert_offsets int32 (E+1,)) -> bf16 (T_total*K, I)",
                   state_dict={"W_gate": dict(kind="parameter", dtype="bfloat16", shape="(E,H,I)", persistent=True),
                               "W_up": dict(kind="parameter", dtype="bfloat16", shape="(E,H,I)", persistent=True)},
                   module_helpers=["Model", "get_inputs", "get_init_inputs", "balanced_offsets", *_KEYS],
                   import_reference_allowed=True),
    oracle_fn=oracle, triton_fn=lazy_triton("sonic_moe"),
    property_cases=[PropertyCase("sonic_ragged_canonical", 1, CANONICAL,
                                 lambda spec, shape, inp: ragged_mutate(spec, shape, inp, **CANONICAL), 0.1, 0.05)],
    property_since="2026-08-07", stress_since="2026-06-02",
    notes=["flops counts T_total, not T_perm (understates the GEMM work by K); kept as the deck has it.",
           "Replay should run ragged/empty experts on every shape (Part F.6)."],
)]
