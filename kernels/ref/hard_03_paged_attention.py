"""hard/03_paged_attention: single-query decode over a paged bf16 KV cache ([K | V] packed)."""
import math

import torch
import torch.nn as nn

BATCH = 8
NUM_HEADS = 32
NUM_KV_HEADS = 8
HEAD_DIM = 128
SEQ_LEN = 1024
PAGE_SIZE = 16


class Model(nn.Module):
    def __init__(self, batch, num_heads, num_kv_heads, head_dim, seq_len, page_size):
        super().__init__()
        self.batch, self.num_heads, self.num_kv_heads = batch, num_heads, num_kv_heads
        self.head_dim, self.seq_len, self.page_size = head_dim, seq_len, page_size
        self.register_buffer("_dummy", torch.zeros(1), persistent=False)

    def forward(self, query, kv_cache, block_table, seq_lens):
        Bq, Hq, D = query.shape
        P, Hkv = kv_cache.shape[1], kv_cache.shape[2]
        group = Hq // Hkv
        out = torch.empty(Bq, Hq, D, dtype=torch.bfloat16, device=query.device)
        for b in range(Bq):
            L = int(seq_lens[b])
            pages = (L + P - 1) // P
            kv = kv_cache[block_table[b, :pages].long()].reshape(pages * P, Hkv, 2 * D)[:L]
            k = kv[..., :D].float().repeat_interleave(group, dim=1)    # (L,H,D)
            v = kv[..., D:].float().repeat_interleave(group, dim=1)
            scores = torch.einsum("hd,lhd->hl", query[b].float(), k) / math.sqrt(D)
            p = torch.softmax(scores, dim=-1)
            out[b] = torch.einsum("hl,lhd->hd", p, v).to(torch.bfloat16)
        return out


def get_inputs():
    pages = (SEQ_LEN + PAGE_SIZE - 1) // PAGE_SIZE
    total_pages = max(BATCH * pages + 8, 64)
    # drawn in bf16, scaled in bf16 (two roundings, as the deck's generator)
    query = torch.randn(BATCH, NUM_HEADS, HEAD_DIM, dtype=torch.bfloat16) * 0.1
    kv_cache = torch.randn(total_pages, PAGE_SIZE, NUM_KV_HEADS, 2 * HEAD_DIM, dtype=torch.bfloat16) * 0.1
    block_table = torch.randperm(total_pages)[: BATCH * pages].reshape(BATCH, pages).int()
    seq_lens = torch.full((BATCH,), SEQ_LEN, dtype=torch.int32)
    return [query, kv_cache, block_table, seq_lens]


def get_init_inputs():
    return [BATCH, NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, SEQ_LEN, PAGE_SIZE]
