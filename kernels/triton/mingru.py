"""cuda/04_grid_mingru_sps: policy_forward with one fused Triton kernel per MinGRU layer.

Per (row block, column block) program: zh, zg, zp = h W[l]^T restricted to the block's columns
(three fp32 dots, IEEE precision: the small-input stress case needs ~1e-6 absolute accuracy),
then out = s + sigmoid(zg) (tanh(zh) - s), p = sigmoid(zp), h' = p out + (1 - p) h, all in the
epilogue.  Encoder and heads are torch fp32 matmuls (glue).  env_step / run stay in torch.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import cdiv, interpreting


@triton.jit
def _mingru_layer_kernel(h_ptr, s_ptr, w_ptr, so_ptr, ho_ptr, N, ss_row, sso_row,
                         HID: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    kk = tl.arange(0, HID)
    r_mask = rows < N
    h = tl.load(h_ptr + rows[:, None] * HID + kk[None, :], mask=r_mask[:, None], other=0.0)
    wh = tl.load(w_ptr + cols[None, :] * HID + kk[:, None])                      # (HID, BN) = W[cols]^T
    wg = tl.load(w_ptr + (HID + cols)[None, :] * HID + kk[:, None])
    wp = tl.load(w_ptr + (2 * HID + cols)[None, :] * HID + kk[:, None])
    zh = tl.dot(h, wh, input_precision="ieee")
    zg = tl.dot(h, wg, input_precision="ieee")
    zp = tl.dot(h, wp, input_precision="ieee")
    s = tl.load(s_ptr + rows[:, None] * ss_row + cols[None, :], mask=r_mask[:, None], other=0.0)
    hc = tl.load(h_ptr + rows[:, None] * HID + cols[None, :], mask=r_mask[:, None], other=0.0)
    th = 2.0 / (1.0 + tl.exp(-2.0 * zh)) - 1.0
    out = s + (1.0 / (1.0 + tl.exp(-zg))) * (th - s)
    p = 1.0 / (1.0 + tl.exp(-zp))
    tl.store(so_ptr + rows[:, None] * sso_row + cols[None, :], out, mask=r_mask[:, None])
    tl.store(ho_ptr + rows[:, None] * HID + cols[None, :], p * out + (1.0 - p) * hc, mask=r_mask[:, None])


def policy_forward(model, obs, state):
    N = obs.shape[0]
    HID = model.w_gru.shape[2]
    layers = model.w_gru.shape[0]
    h = (obs.float() @ model.w_enc.T + model.b_enc).contiguous()
    state = state.float()
    new_state = torch.empty(N, layers, HID, dtype=torch.float32, device=obs.device)
    bm, bn = (16, 64) if interpreting(obs) else (32, 32)
    for layer in range(layers):
        w = model.w_gru[layer].contiguous()
        s = state[:, layer]
        h_new = torch.empty_like(h)
        so = new_state[:, layer]
        _mingru_layer_kernel[(cdiv(N, bm), cdiv(HID, bn))](
            h, s, w, so, h_new, N, s.stride(0), so.stride(0), HID=HID, BLOCK_M=bm, BLOCK_N=bn, num_warps=4)
        h = h_new
    logits = h @ model.w_a.T + model.b_a
    value = (h @ model.w_v.T + model.b_v).squeeze(-1)
    return logits, new_state, value


def forward(model, inputs):
    obs, state = inputs
    return policy_forward(model, obs.contiguous(), state)
