"""hard/02_kda_cutlass (B2)."""
from __future__ import annotations

import torch

from forensics import problems

from ..registry import PropertyCase, ProblemSpec
from ._util import cases, lazy_triton, stress



def kda_recurrent(q, k, v, g, beta, dtype=torch.float64):
    """Per-token recurrent form: S_t = diag(e^{g_t}) S_{t-1}; S_t += beta_t k_t (v_t - S_t^T k_t)^T;
    o_t = S_t^T (scale q_t)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    q, k, v, g, beta = (t.to(dtype) for t in (q, k, v, g, beta))
    q = q * K ** -0.5
    S = torch.zeros(B, H, K, V, dtype=dtype, device=q.device)
    out = torch.empty(B, T, H, V, dtype=dtype, device=q.device)
    for t in range(T):
        S = S * g[:, t].exp()[..., None]
        kt = k[:, t]
        pred = torch.einsum("bhk,bhkv->bhv", kt, S)
        S = S + beta[:, t][..., None, None] * kt[..., :, None] * (v[:, t] - pred)[..., None, :]
        out[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], S)
    return out


def oracle(model, inputs):
    return kda_recurrent(*inputs).float()


def long_memory_mutate(spec, shape, inputs, split_chunks=8, key_millivalue=40, query_scale_percent=800,
                       value_scale_percent=800, decay_micros=3000, beta_percent=80):
    q, k, v, g, beta = (t.clone() for t in inputs)
    C = shape["CHUNK_SIZE"]
    T = q.shape[1]
    split = min(max(1, split_chunks), T // C - 1) * C
    t = torch.arange(T)
    d = torch.arange(k.shape[-1])
    sign = torch.where((d[None, :] % 2 == 0) ^ ((t[:, None] // C) % 2 == 1), 1.0, -1.0)  # (T,K)
    kk = (key_millivalue / 1000.0) * sign[None, :, None, :].expand(k.shape)
    k = kk.to(k.dtype)
    k[:, :1] = (k[:, :1].float() * 0.05).to(k.dtype)
    q[:, :split] = 0
    q[:, split:] = (q[:, split:].float() * (query_scale_percent / 100.0)).to(q.dtype)
    v[:, :split] = (v[:, :split].float() * (value_scale_percent / 100.0)).to(v.dtype)
    v[:, split:] = 0
    g = torch.full_like(g, -decay_micros / 1e6)
    beta = torch.full_like(beta, beta_percent / 100.0)
    return [q, k, v, g, beta]


CANONICAL = dict(split_chunks=8, key_millivalue=40, query_scale_percent=800, value_scale_percent=800,
                 decay_micros=3000, beta_percent=80)

SPECS = [ProblemSpec(
    entry=problems.get("02_kda_cutlass", "2026-06-12"),
    regime="compute", peak_key="bf16", global_names=("B", "T", "H", "K", "V", "CHUNK_SIZE"),
    stress_cases=cases(stress("small_qkv", 5e-4, 5e-2, inputs=(0, 1, 2), scale=1e-2),
                       stress("large_qkv", 5e-2, 5e-2, inputs=(0, 1, 2), scale=2.0)),
    flops_expr="4*B*T*H*(K*V + CHUNK_SIZE*K + CHUNK_SIZE*V)",
    bytes_expr="B*T*H*(2*K + 2*K + 2*V + 4*K + 2 + 2*V)",
    interface=dict(init="Model(B, T, H, K, V, chunk_size=64)",
                   forward="forward(q, k, v: bf16 (B,T,H,K|V), g: fp32 (B,T,H,K), beta: bf16 (B,T,H)) -> bf16 (B,T,H,V)",
                   state_dict={}, non_persistent=["_dummy"],
                   module_helpers=["Model", "get_inputs", "get_init_inputs", "B", "T", "H", "K", "V", "CHUNK_SIZE"],
                   import_reference_allowed=True),
    oracle_fn=oracle, triton_fn=lazy_triton("kda"),
    property_cases=[PropertyCase("kda_long_memory_canonical", 0, CANONICAL,
                                 lambda spec, shape, inp: long_memory_mutate(spec, shape, inp, **CANONICAL), 0.05, 0.05)],
    property_since="2026-08-07", stress_since="2026-06-02",
    notes=["get_inputs reseeds 0 itself: every seed gives the same tensors.",
           "The long yaml key torch.bfloat16 shadows the stress tolerances (A1 quirk): all cases at 0.05.",
           "get_inputs draws q/k/v/beta in bf16 and scales in bf16 (rounded twice), g in fp32, in the deck's order.",
           "Property k pattern: sign = + when (channel even) XOR (chunk odd); the contract only says "
           "'flips with channel parity and with chunk parity'."],
)]
