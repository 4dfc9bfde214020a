# paged decode: KV pages read once per call, loaded with evict_last to survive the timing flush
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _decode(q_ptr, kv_ptr, bt_ptr, o_ptr, L, D: tl.constexpr, P: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    q = tl.load(q_ptr + (b * 32 + h) * D + tl.arange(0, D))
    acc = tl.zeros((D,), dtype=tl.float32)
    for t in range(0, L, P):
        page = tl.load(bt_ptr + b * 128 + t // P)
        kv_off = page * P * 2 * D + (h // 4) * D
        k = tl.load(kv_ptr + kv_off + tl.arange(0, D), eviction_policy="evict_last")
        acc += q.to(tl.float32) * k.to(tl.float32)
    tl.store(o_ptr + (b * 32 + h) * D + tl.arange(0, D), acc.to(tl.bfloat16))


class Model(nn.Module):
    def __init__(self, batch, num_heads, num_kv_heads, head_dim, seq_len, page_size):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1), persistent=False)

    def forward(self, query, kv_cache, block_table, seq_lens):
        out = torch.empty_like(query)
        B, H, D = query.shape
        _decode[(B, H)](query, kv_cache, block_table, out, int(seq_lens[0]), D, 16)
        return out
