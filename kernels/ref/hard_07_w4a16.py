"""hard/07_w4a16_gemm: bf16 activations x int4 (asymmetric, group 128 along K) weights."""
import torch
import torch.nn as nn

M = 1
N = 12288
K = 4096


def quantize_w4(w, group_size=128):
    """(K,N) fp32 -> w_q (K/2,N) uint8 (low nibble = even row), scales/zeros (K/g,N) bf16."""
    Kw, Nw = w.shape
    wg = w.reshape(Kw // group_size, group_size, Nw)
    mn = wg.amin(dim=1)
    mx = wg.amax(dim=1)
    scale = (mx - mn).clamp_min(1e-8) / 15
    zero = torch.round(-mn / scale).clamp(0, 15)
    q = torch.round(wg / scale[:, None, :] + zero[:, None, :]).clamp(0, 15).to(torch.uint8).reshape(Kw, Nw)
    w_q = q[0::2] | (q[1::2] << 4)
    return w_q, scale.to(torch.bfloat16), zero.to(torch.bfloat16)


def dequantize_w4(w_q, scales, zeros, group_size=128):
    """bf16 (K,N): (q - z) * s computed in bf16 (exact subtraction, bf16-rounded product)."""
    q = torch.stack([w_q & 0xF, w_q >> 4], dim=1).reshape(w_q.shape[0] * 2, *w_q.shape[1:])
    z = zeros.repeat_interleave(group_size, dim=-2)
    s = scales.repeat_interleave(group_size, dim=-2)
    return (q.to(torch.bfloat16) - z) * s


class Model(nn.Module):
    def __init__(self, M, N, K, group_size=128):
        super().__init__()
        self.M, self.N, self.K, self.group_size = M, N, K, group_size
        torch.manual_seed(0xC0DE ^ (M * 1315423911 + N * 2654435761 + K))
        w = torch.randn(K, N) * 0.02
        w_q, scales, zeros = quantize_w4(w, group_size)
        self.register_buffer("w_q", w_q)
        self.register_buffer("scales", scales)
        self.register_buffer("zeros", zeros)

    def forward(self, x):
        return x @ dequantize_w4(self.w_q, self.scales, self.zeros, self.group_size)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.bfloat16)]   # drawn in bf16, as the deck (not fp32-then-cast)


def get_init_inputs():
    return [M, N, K]
