"""cuda/03_megaqwen_decode: a 4-layer Qwen-style decoder, one token per step, with a stateful
prefill / decode_steps / run API.  Block math in fp32 with upcast weights; K/V written to the
bf16 caches; each block's output cast to bf16."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN = 1024
INTERMEDIATE = 3072
NUM_HEADS = 16
NUM_KV_HEADS = 8
HEAD_DIM = 128
NUM_LAYERS = 4
EPS = 1e-6
ROPE_THETA = 10000.0
CHECK_SHAPES = [(128, 8), (256, 8), (512, 4)]


def rms_norm(x, w, eps=EPS):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_rotate_half(x, pos, theta=ROPE_THETA):
    """x (..., D) at integer position pos; pairs (i, i + D/2), inv_i = theta^(-i/(D/2))."""
    d = x.shape[-1]
    half = d // 2
    inv = theta ** (-torch.arange(half, dtype=x.dtype, device=x.device) / half)
    ang = pos * inv
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        bf = torch.bfloat16
        self.input_ln = nn.Parameter(torch.ones(HIDDEN, dtype=bf))
        self.q_proj = nn.Parameter((torch.randn(NUM_HEADS * HEAD_DIM, HIDDEN) * 0.02).to(bf))
        self.k_proj = nn.Parameter((torch.randn(NUM_KV_HEADS * HEAD_DIM, HIDDEN) * 0.02).to(bf))
        self.v_proj = nn.Parameter((torch.randn(NUM_KV_HEADS * HEAD_DIM, HIDDEN) * 0.02).to(bf))
        self.q_norm = nn.Parameter(torch.ones(HEAD_DIM, dtype=bf))
        self.k_norm = nn.Parameter(torch.ones(HEAD_DIM, dtype=bf))
        self.o_proj = nn.Parameter((torch.randn(HIDDEN, NUM_HEADS * HEAD_DIM) * 0.02).to(bf))
        self.post_ln = nn.Parameter(torch.ones(HIDDEN, dtype=bf))
        self.gate_proj = nn.Parameter((torch.randn(INTERMEDIATE, HIDDEN) * 0.02).to(bf))
        self.up_proj = nn.Parameter((torch.randn(INTERMEDIATE, HIDDEN) * 0.02).to(bf))
        self.down_proj = nn.Parameter((torch.randn(HIDDEN, INTERMEDIATE) * 0.02).to(bf))

    def forward(self, x, k_cache, v_cache, position, dtype=torch.float32):
        f = lambda p: p.to(dtype)  # noqa: E731
        r = x.to(dtype)
        h = rms_norm(r, f(self.input_ln))
        q = (h @ f(self.q_proj).T).view(NUM_HEADS, HEAD_DIM)
        k = (h @ f(self.k_proj).T).view(NUM_KV_HEADS, HEAD_DIM)
        v = (h @ f(self.v_proj).T).view(NUM_KV_HEADS, HEAD_DIM)
        q = rope_rotate_half(rms_norm(q, f(self.q_norm)), position)
        k = rope_rotate_half(rms_norm(k, f(self.k_norm)), position)
        k_cache[:, position, :] = k.to(k_cache.dtype)
        v_cache[:, position, :] = v.to(v_cache.dtype)
        keys = k_cache[:, : position + 1].to(dtype).repeat_interleave(NUM_HEADS // NUM_KV_HEADS, dim=0)
        vals = v_cache[:, : position + 1].to(dtype).repeat_interleave(NUM_HEADS // NUM_KV_HEADS, dim=0)
        att = torch.softmax((keys @ q[:, :, None]).squeeze(-1) / math.sqrt(HEAD_DIM), dim=-1)
        o = (att[:, None, :] @ vals).reshape(NUM_HEADS * HEAD_DIM)
        r = r + o @ f(self.o_proj).T
        h2 = rms_norm(r, f(self.post_ln))
        r = r + (F.silu(h2 @ f(self.gate_proj).T) * (h2 @ f(self.up_proj).T)) @ f(self.down_proj).T
        return r.to(torch.bfloat16)


class Model(nn.Module):
    def __init__(self, num_layers=NUM_LAYERS, max_seq=131072):
        super().__init__()
        self.num_layers, self.max_seq = num_layers, max_seq
        self.blocks = nn.ModuleList([Block() for _ in range(num_layers)])

    def reset_parameters(self, seed):
        """check.py: CPU generator seeded with `seed`; 2-D params normal(0, 0.02), 1-D ones."""
        g = torch.Generator(device="cpu").manual_seed(seed)
        with torch.no_grad():
            for _, p in self.named_parameters():
                if p.dim() == 2:   # drawn in the parameter's dtype (bf16), as check.py's _reinit does
                    p.copy_(torch.empty(p.shape, dtype=p.dtype, device="cpu").normal_(0.0, 0.02, generator=g))
                else:
                    p.fill_(1.0)
        return self

    def new_caches(self, max_seq=None, device=None):
        max_seq = max_seq or self.max_seq
        device = device or next(self.parameters()).device
        mk = lambda: torch.zeros(NUM_KV_HEADS, max_seq, HEAD_DIM, dtype=torch.bfloat16, device=device)  # noqa: E731
        return [mk() for _ in range(self.num_layers)], [mk() for _ in range(self.num_layers)]

    def forward(self, x, k_caches, v_caches, position, dtype=torch.float32):
        h = x
        for i, blk in enumerate(self.blocks):
            h = blk(h, k_caches[i], v_caches[i], position, dtype)
        return h, k_caches, v_caches


def draw(gen):
    """One step's noise as the deck draws it: randn(HIDDEN) in bf16 from a CPU generator.

    Drawn in bf16, never fp32-then-cast: torch 2.11 (the GPU machines) draws bf16 from other
    numbers than fp32 (the same generator gives a different vector, max |diff| 5.07), while torch
    2.13 gives the same; a solution that draws the stream itself (the check hands it only seeds)
    follows the deck's call, so the reference must make the same call."""
    return torch.randn(HIDDEN, generator=gen, device="cpu", dtype=torch.bfloat16)


def seeded_hidden(seed):
    """h0 of `prefill`: one `draw` from a generator seeded `seed` (CPU, bf16)."""
    return draw(torch.Generator().manual_seed(seed))


def noise_stream(gen_seed, n):
    """The `n` step inputs' noise of one generator (prefill: seed + 1, decode: seed + 2), one
    `draw` per step exactly as the deck's loop calls it (CPU, bf16, shape (n, HIDDEN))."""
    gen = torch.Generator().manual_seed(gen_seed)
    out = torch.empty(n, HIDDEN, dtype=torch.bfloat16)
    for i in range(n):
        out[i] = draw(gen)
    return out


def _next_input(gen, h_prev, device):
    r = draw(gen).to(device)
    return r * 0.5 + h_prev.to(torch.bfloat16) * 0.5            # bf16 arithmetic


@torch.no_grad()
def prefill(model, ctx_len, seed, max_seq=None):
    device = next(model.parameters()).device
    k_caches, v_caches = model.new_caches(max_seq or model.max_seq, device)
    h = seeded_hidden(seed).to(device)
    gen = torch.Generator().manual_seed(seed + 1)
    for t in range(ctx_len):
        h, k_caches, v_caches = model(_next_input(gen, h, device), k_caches, v_caches, t)
    return h, k_caches, v_caches


@torch.no_grad()
def decode_steps(model, hidden, k_caches, v_caches, start_pos, n_steps, seed):
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed + 2)
    h = hidden
    for i in range(n_steps):
        h, k_caches, v_caches = model(_next_input(gen, h, device), k_caches, v_caches, start_pos + i)
    return h, k_caches, v_caches


@torch.no_grad()
def run(ctx_len, n_decode, seed, model=None, max_seq=None):
    if model is None:
        model = Model(NUM_LAYERS, max_seq or ctx_len + n_decode + 8)
    max_seq = max_seq or ctx_len + n_decode + 8
    h, kc, vc = prefill(model, ctx_len, seed, max_seq)
    h, kc, vc = decode_steps(model, h, kc, vc, ctx_len, n_decode, seed)
    return {"last_hidden": h}


def get_init_inputs():
    return [NUM_LAYERS, 131072]
