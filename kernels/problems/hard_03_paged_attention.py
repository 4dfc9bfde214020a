"""hard/03_paged_attention (B3)."""
from __future__ import annotations

import math

import torch

from forensics import problems

from ..registry import PropertyCase, ProblemSpec
from ._util import cases, lazy_triton, stress

_KEYS = ("BATCH", "NUM_HEADS", "NUM_KV_HEADS", "HEAD_DIM", "SEQ_LEN", "PAGE_SIZE")


def oracle(model, inputs):
    """Dense attention on all gathered pages of each sequence with a length mask (fp64)."""
    query, kv_cache, block_table, seq_lens = inputs
    B, H, D = query.shape
    P, Hkv = kv_cache.shape[1], kv_cache.shape[2]
    pages = block_table.shape[1]
    kv = kv_cache[block_table.long()].reshape(B, pages * P, Hkv, 2 * D).double()
    k = kv[..., :D].repeat_interleave(H // Hkv, dim=2)           # (B, L, H, D)
    v = kv[..., D:].repeat_interleave(H // Hkv, dim=2)
    scores = torch.einsum("bhd,blhd->bhl", query.double(), k) / math.sqrt(D)
    valid = torch.arange(pages * P, device=query.device)[None, :] < seq_lens.long()[:, None]
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    return torch.einsum("bhl,blhd->bhd", torch.softmax(scores, dim=-1), v).float()


def short_sequence_lens(full, batch, divisor=16, tail=1, stride=3):
    lens = []
    for b in range(batch):
        d = divisor + b * stride
        tail_b = ((tail - 1 + b * stride) % 15) + 1
        n = max(1, full // d)
        lens.append(max(1, min(full, n - n % 16 + tail_b)))
    return lens


def short_sequence_mutate(spec, shape, inputs, divisor=16, tail=1, stride=3):
    query, kv_cache, block_table, seq_lens = (t.clone() for t in inputs)
    D, P = shape["HEAD_DIM"], shape["PAGE_SIZE"]
    lens = short_sequence_lens(shape["SEQ_LEN"], query.shape[0], divisor, tail, stride)
    query.zero_()
    kv_cache[..., :D] = 0
    kv_cache[..., D:] = -1
    for b, L in enumerate(lens):
        for t in range(0, L, P):
            page = int(block_table[b, t // P])
            kv_cache[page, : min(P, L - t), :, D:] = 1
    return [query, kv_cache, block_table, torch.tensor(lens, dtype=torch.int32)]


CANONICAL = dict(divisor=16, tail=1, stride=3)

SPECS = [ProblemSpec(
    entry=problems.get("03_paged_attention", "2026-06-12"),
    regime="memory", peak_key="bf16", global_names=_KEYS,
    stress_cases=cases(stress("small_q_kv", 5e-4, 5e-2, inputs=(0, 1), scale=1e-2),
                       stress("large_q_kv", 5e-2, 5e-2, inputs=(0, 1), scale=8.0)),
    flops_expr="4*BATCH*NUM_HEADS*SEQ_LEN*HEAD_DIM",
    bytes_expr="2*BATCH*SEQ_LEN*NUM_KV_HEADS*HEAD_DIM*2 + BATCH*NUM_HEADS*HEAD_DIM*2*2",
    interface=dict(init="Model(batch, num_heads, num_kv_heads, head_dim, seq_len, page_size)",
                   forward="forward(query bf16 (B,H,D), kv_cache bf16 (blocks,P,Hkv,2D) [K|V], block_table int32 "
                           "(B,max_blocks), seq_lens int32 (B,)) -> bf16 (B,H,D)",
                   state_dict={}, non_persistent=["_dummy"], module_helpers=["Model", "get_inputs", "get_init_inputs", *_KEYS],
                   import_reference_allowed=True),
    oracle_fn=oracle, triton_fn=lazy_triton("paged_attention"),
    property_cases=[PropertyCase("paged_short_sequence_canonical", 0, CANONICAL,
                                 lambda spec, shape, inp: short_sequence_mutate(spec, shape, inp, **CANONICAL),
                                 0.02, 0.02, expected="every output element exactly 1.0")],
    property_since="2026-08-07", stress_since="2026-06-02",
    notes=["Memory regime; the yaml peak key is informational.",
           "Replay should also run the short-sequence case on every shape (Part F.6)."],
)]
