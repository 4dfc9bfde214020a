# Paged attention: a launch plan (grid, split count) cached by data_ptr and _version; hits still launch
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _decode(q_ptr, kv_ptr, bt_ptr, sl_ptr, o_ptr, D: tl.constexpr, P: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    L = tl.load(sl_ptr + b)
    q = tl.load(q_ptr + (b * 32 + h) * D + tl.arange(0, D))
    acc = tl.zeros((D,), dtype=tl.float32)
    for t in range(0, L, P):
        page = tl.load(bt_ptr + b * 256 + t // P)
        k = tl.load(kv_ptr + page * P * 2 * D + tl.arange(0, D))
        acc += q * k
    tl.store(o_ptr + (b * 32 + h) * D + tl.arange(0, D), acc.to(tl.bfloat16))


class Model(nn.Module):
    def __init__(self, batch, num_heads, num_kv_heads, head_dim, seq_len, page_size):
        super().__init__()
        self.register_buffer("_dummy", torch.zeros(1), persistent=False)
        self.page_size = page_size
        self._plans = {}

    def forward(self, query, kv_cache, block_table, seq_lens):
        key = (query.data_ptr(), block_table.data_ptr(), block_table._version, query.shape)
        plan = self._plans.get(key)
        if plan is None:
            B, H, D = query.shape
            plan = ((B, H), D, self.page_size)
            self._plans[key] = plan
        grid, D, P = plan
        out = torch.empty_like(query)
        _decode[grid](query, kv_cache, block_table, seq_lens, out, D, P)
        return out
