"""Triton fused int4-dequant GEMM / GEMV (hard/07_w4a16_gemm; also usable for the Kimi QuantLinear).

w[k,n] = bf16((q[k,n] - z[k//g,n]) * s[k//g,n]), y = bf16(x @ w) with fp32 accumulation.
(q - z) * s is exact in fp32 (a 5-bit integer times an 8-bit mantissa), so rounding it once to
bf16 gives exactly the reference's bf16 product.

Two kernels, one launch per call either way (the timing counts host time, so no split-K buffers
are allocated or zeroed per call and no reduction kernel follows):
  * M >= 2: `_w4a16_gemm_kernel`, BLOCK_M x BLOCK_N tiles, the packed bytes of a [BLOCK_K, BLOCK_N]
    tile loaded once per K row (the two rows of a byte hit the same addresses: one memory
    transaction, cp.async-pipelined), unpacked and dequantized in registers, one bf16 tl.dot per
    step with fp32 accumulation;
  * M == 1: `_w4a16_gemv_kernel`, no MMA (a 16-row MMA tile for one useful row): fp32 FMAs into a
    2-D accumulator reduced once at the end.
Both split K only when the output tiles alone cannot fill the SMs; the partial sums go to a cached
fp32 workspace and the last program of a tile (an atomic counter, re-armed to 0 by that program)
adds them in split order, so the result is deterministic.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from ._common import cdiv, interpreting

_MAGIC = tl.constexpr(8388608.0)   # 2**23: (q | 0x4B000000) read as fp32 is 2**23 + q, an exact int->float without I2F


@triton.jit
def _dequant(q, zm, s):
    """q: int32 nibbles, zm = zero + 2**23 (fp32), s: fp32 scale -> fp32 of the bf16 weight's value."""
    qf = (q | 0x4B000000).to(tl.float32, bitcast=True)
    return (qf - zm) * s


@triton.jit
def _dequant_pairs(q, s, zb):
    """The weight on sm_90's bf16x2 ALU, two weights an instruction: q int32 whose low nibble is
    the weight (the bits above are masked here), s the bf16 scale, zb the bf16 zero + 128.
    (q | 0x4300) read as bf16 is 128 + q; (128 + q) - (128 + z) is exact in bf16 (|q - z| <= 15)
    and one bf16 multiply rounds (q - z) * s once: the reference's bf16 product.  Elementwise
    whichever two elements Triton pairs (each 16-bit half carries its own q, s, z); PTX only, so
    never under the interpreter."""
    return tl.inline_asm_elementwise(
        "{ .reg .b32 t; prmt.b32 t, $1, $2, 0x5410; lop3.b32 t, t, 0x000F000F, 0x43004300, 0xEA; "
        "sub.rn.bf16x2 t, t, $4; mul.rn.bf16x2 $0, t, $3; }",
        "=r,r,r,r,r", [q, s, zb], dtype=tl.bfloat16, is_pure=True, pack=2)


@triton.jit
def _round_bf16(v):
    """fp32 -> the fp32 value of its round-to-nearest-even bf16, in integer ops (finite v), instead
    of a cvt to bf16 and back per weight (the GEMV's ALU budget is ~1 op per weight byte read)."""
    b = v.to(tl.uint32, bitcast=True)
    b = (b + (0x7FFF + ((b >> 16) & 1))) & 0xFFFF0000
    return b.to(tl.float32, bitcast=True)


@triton.jit
def _finish(acc, y_ptr, ws_ptr, lock_ptr, tile, pid_k, y_off, ws_off, ws_split, mask, SPLIT: tl.constexpr):
    """Store the tile (SPLIT == 1) or its partial; the SPLIT-th arrival sums the partials in order."""
    if SPLIT == 1:
        tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(ws_ptr + pid_k * ws_split + ws_off, acc, mask=mask)
        tl.debug_barrier()                      # every thread's partial is written before the count
        arrived = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel")
        if arrived == SPLIT - 1:
            tot = tl.load(ws_ptr + ws_off, mask=mask, other=0.0, cache_modifier=".cg")
            for s in range(1, SPLIT):
                tot += tl.load(ws_ptr + s * ws_split + ws_off, mask=mask, other=0.0, cache_modifier=".cg")
            tl.store(y_ptr + y_off, tot.to(y_ptr.dtype.element_ty), mask=mask)
            tl.atomic_xchg(lock_ptr + tile, 0)  # re-armed for the next call


@triton.jit
def _acc_dot(a, b, acc, DOT_F32: tl.constexpr, TF32X3: tl.constexpr):
    """acc + a @ b: fp32 operands on the CPU interpreter (its bf16 tl.dot is wrong; bf16 products are
    exact in fp32), near-fp32 tf32x3 for fp32 activations (the Kimi expert down-projection), else bf16."""
    if DOT_F32:
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
    elif TF32X3:
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="tf32x3")
    else:
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _w4a16_gemm_kernel(x_ptr, wq_ptr, s_ptr, z_ptr, y_ptr, ws_ptr, lock_ptr, M, N, K, K_PER_SPLIT, sxm, swk, ssg, sym,
                       GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       SPLIT: tl.constexpr, SWAP: tl.constexpr, X_F32: tl.constexpr, DOT_F32: tl.constexpr,
                       DQ: tl.constexpr = 0, TAIL: tl.constexpr = 0, N_FULL=0):
    """SWAP: the transposed product y^T tile = w^T @ x^T, so the dequantized weight is the MMA's
    first operand, which sm_90's wgmma reads from registers (the second must be in shared memory:
    unswapped, every dequantized tile is stored back to shared memory before its MMA).  DQ (GPU
    only, else 0): 0 dequantize in fp32 (_dequant), 1 in bf16x2 pairs (_dequant_pairs).  TAIL (a
    1-D grid): programs below N_FULL compute whole tiles, the others one of TAIL K-parts
    (K_PER_SPLIT each) of the tiles from N_FULL on, so a grid of a little more tiles than one wave
    of programs ends in 1 + 1/TAIL tile times instead of 2."""
    if TAIL:
        pid = tl.program_id(0)
        whole = pid < N_FULL
        part = tl.maximum(pid - N_FULL, 0)
        tile = tl.where(whole, pid, N_FULL + part // TAIL)
        pid_k = tl.where(whole, 0, part % TAIL)
        tiles_n = tl.cdiv(N, BLOCK_N)
        pid_n = tile % tiles_n
        pid_m = tile // tiles_n
        k_start = pid_k * K_PER_SPLIT
        k_end = tl.where(whole, K, tl.minimum(k_start + K_PER_SPLIT, K))
    else:
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(1)
        pid_k = tl.program_id(2)
        tile = pid_m * tl.num_programs(0) + pid_n
        k_start = pid_k * K_PER_SPLIT
        k_end = tl.minimum(k_start + K_PER_SPLIT, K)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # out-of-range rows/columns re-read valid ones (no load masks) and are dropped at the store; with
    # N % 16 == 0 (specialized by Triton) `cols % N` stays 16-contiguous: 16-byte vector loads
    offs_m = rows % M
    offs_n = cols % N
    offs_k = tl.arange(0, BLOCK_K)
    kk = k_start + offs_k
    if SWAP:     # x^T [BLOCK_K, BLOCK_M], w^T [BLOCK_N, BLOCK_K], acc = y^T tile
        x_ptrs = x_ptr + offs_m[None, :] * sxm + kk[:, None]
        w_ptrs = wq_ptr + (kk // 2)[None, :] * swk + offs_n[:, None]
        shift = ((offs_k % 2) * 4)[None, :]                   # even K rows: low nibble
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        x_ptrs = x_ptr + offs_m[:, None] * sxm + kk[None, :]
        w_ptrs = wq_ptr + (kk // 2)[:, None] * swk + offs_n[None, :]
        shift = ((offs_k % 2) * 4)[:, None]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        x = tl.load(x_ptrs)
        q = tl.load(w_ptrs).to(tl.int32) >> shift              # the two rows of a byte: same address
        g = k0 // GROUP                                       # BLOCK_K divides GROUP: one group per step
        if DQ == 0:
            q = q & 0xF
            s = tl.load(s_ptr + g * ssg + offs_n).to(tl.float32)
            zm = tl.load(z_ptr + g * ssg + offs_n).to(tl.float32) + _MAGIC
        else:                                                 # _dequant_pairs masks the nibble itself
            s = tl.load(s_ptr + g * ssg + offs_n)
            zm = (tl.load(z_ptr + g * ssg + offs_n).to(tl.float32) + 128.0).to(tl.bfloat16)
        if SWAP:
            if DQ:
                w = _dequant_pairs(q, s[:, None], zm[:, None])
            else:
                w = _dequant(q, zm[:, None], s[:, None]).to(tl.bfloat16)
            acc = _acc_dot(w, x, acc, DOT_F32, X_F32)
        else:
            if DQ:
                w = _dequant_pairs(q, s[None, :], zm[None, :])
            else:
                w = _dequant(q, zm[None, :], s[None, :]).to(tl.bfloat16)
            acc = _acc_dot(x, w, acc, DOT_F32, X_F32)
        x_ptrs += BLOCK_K
        w_ptrs += (BLOCK_K // 2) * swk
    if SWAP:
        mask = (cols < N)[:, None] & (rows < M)[None, :]
        y_off = cols[:, None] + rows[None, :] * sym
        ws_off = cols[:, None] + rows[None, :] * N
    else:
        mask = (rows < M)[:, None] & (cols < N)[None, :]
        y_off = rows[:, None] * sym + cols[None, :]
        ws_off = rows[:, None] * N + cols[None, :]
    if TAIL:
        if pid < N_FULL:
            _finish(acc, y_ptr, ws_ptr, lock_ptr, tile, pid_k, y_off, ws_off, M * N, mask, 1)
        else:
            _finish(acc, y_ptr, ws_ptr, lock_ptr, tile, pid_k, y_off, ws_off, M * N, mask, TAIL)
    else:
        _finish(acc, y_ptr, ws_ptr, lock_ptr, tile, pid_k, y_off, ws_off, M * N, mask, SPLIT)


@triton.jit
def _w4a16_gemv_kernel(x_ptr, wq_ptr, s_ptr, z_ptr, y_ptr, ws_ptr, lock_ptr, N, K, K_PER_SPLIT, swk, ssg,
                       idx_ptr, se_w, se_s, sxj, syj,
                       GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                       EXPERTS: tl.constexpr = False):
    """EXPERTS: program_id(2) = j runs expert idx[j] (read on the device) on x row j (sxj = 0: one x
    for all), into y row j, with its own partial sums and counters."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    if EXPERTS:
        j = tl.program_id(2)
        e = tl.load(idx_ptr + j).to(tl.int64)
        wq_ptr += e * se_w
        s_ptr += e * se_s
        z_ptr += e * se_s
        x_ptr += j * sxj
        y_ptr += j * syj
        ws_ptr += j * (SPLIT * N)
        lock_ptr += j * tl.num_programs(0)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_n = cols % N
    offs_h = tl.arange(0, BLOCK_K // 2)                       # packed rows of a step
    k_start = pid_k * K_PER_SPLIT
    k_end = tl.minimum(k_start + K_PER_SPLIT, K)
    acc = tl.zeros((BLOCK_K // 2, BLOCK_N), dtype=tl.float32)  # reduced once, after the loop
    for k0 in range(k_start, k_end, BLOCK_K):
        packed = tl.load(wq_ptr + (k0 // 2 + offs_h)[:, None] * swk + offs_n[None, :]).to(tl.int32)
        g = k0 // GROUP
        s = tl.load(s_ptr + g * ssg + offs_n).to(tl.float32)[None, :]
        zm = tl.load(z_ptr + g * ssg + offs_n).to(tl.float32)[None, :] + _MAGIC
        w_lo = _round_bf16(_dequant(packed & 0xF, zm, s))
        w_hi = _round_bf16(_dequant(packed >> 4, zm, s))
        x_lo = tl.load(x_ptr + k0 + 2 * offs_h).to(tl.float32)
        x_hi = tl.load(x_ptr + k0 + 2 * offs_h + 1).to(tl.float32)
        acc += x_lo[:, None] * w_lo + x_hi[:, None] * w_hi
    _finish(tl.sum(acc, axis=0), y_ptr, ws_ptr, lock_ptr, pid_n, pid_k, cols, cols, N, cols < N, SPLIT)


#: sm_90 configs (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, swap) by M, static (no autotuning: it would run
#: inside the timed call).  Small M is weight-streaming: BLOCK_N 64 gives >= 192 tiles at N = 12288
#: (no split-K) and 4 stages of 8 KiB of packed weight in flight per program.  Large M is MMA + dequant
#: bound: swapped operands (the dequantized weight as wgmma's register operand), 256 x-rows so
#: each weight tile is dequantized M/256 times, 3 stages for 2 programs per SM: 0.090 ms at
#: M=256 against 0.130 for the unswapped 128 x 128 (docs/h200/2026-12-03-kernels-verify-c8e608b.json).
_GEMM_CONFIGS = ((16, (16, 64, 128, 4, 4, False)), (32, (32, 64, 128, 4, 4, False)), (64, (64, 64, 128, 4, 4, False)),
                 (1 << 62, (256, 64, 64, 4, 3, True)))
#: GEMV: 128 columns x 128 K rows (8 KiB packed) per step
_GEMV_BN, _GEMV_BK, _GEMV_WARPS, _GEMV_STAGES = 128, 128, 4, 4
#: fp32 activations (the Kimi expert down-projection) past M = 64: the swapped 256-row tile's fp32 x
#: stages would need 297 KiB of shared memory (compile_check), over sm_90's 227 KiB
_GEMM_F32_LARGE = (128, 128, 64, 8, 4, False)
_CPU_GEMM = (16, 64, 64, 4, 1, False)      # the interpreter runs program by program: few, large programs
_CPU_GEMV_BN = 64
#: the GEMM's dequant on a GPU (the kernel's DQ): bf16x2 pairs, 0.0764 ms at M=256 against 0.0901
#: for the fp32 dequant, 0.0392 against 0.0519 at M=16 (docs/h200/2026-12-04-kernels-verify-3cd53c7.json;
#: 0.0773 / 0.0901 and 0.0364 / 0.0519 again in -3e62e03.json)
_DQ = 1
#: swapped (large-M) tiles: the tail split planned for this many programs an SM (the 256 x 64 tile's
#: registers and shared memory allow 2): 192 tiles at M=256, N=12288 on 264 slots run as 120 whole
#: tiles and 144 halves, 0.0720 ms against 0.0773 without (-3e62e03.json)
_TAIL_PER_SM = 2


def gemm_config(M: int, x_f32: bool, cpu: bool) -> tuple:
    """The GEMM's default (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, swap) for M rows."""
    if cpu:
        return _CPU_GEMM
    cfg = next(c for lim, c in _GEMM_CONFIGS if M <= lim)
    return _GEMM_F32_LARGE if x_f32 and M > 64 else cfg


@functools.lru_cache(maxsize=None)
def _sms(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


_WS: dict = {}


def _workspace(device, n_ws: int, n_lock: int):
    """Cached fp32 partial-sum buffer and int32 counters (all 0 between calls), grown on demand.
    Shared by every call on the device: calls on one stream are serialized."""
    ws, lock = _WS.get(device, (None, None))
    if ws is None or ws.numel() < n_ws:
        ws = torch.empty(max(n_ws, 1), dtype=torch.float32, device=device)
    if lock is None or lock.numel() < n_lock:
        lock = torch.zeros(max(n_lock, 1), dtype=torch.int32, device=device)
    _WS[device] = (ws, lock)
    return ws, lock


def _split(tiles: int, K: int, bk: int, want: int, split: int | None):
    """(split, K per split): unless forced, split K until tiles * split >= want programs while every
    split keeps >= 4 steps of bk."""
    if not split:
        split = 1
        while tiles * split < want and K // (2 * split) >= 4 * bk:
            split *= 2
    k_per = cdiv(cdiv(K, split), bk) * bk
    return cdiv(K, k_per), k_per


def _gemv_plan(x, N: int, K: int, group: int, rows: int, split: int | None, gemv: tuple | None = None):
    """The GEMV launch for `rows` output rows run at once (the experts' third grid axis): (BLOCK_N,
    BLOCK_K, warps, stages) from `gemv` or the defaults, column tiles, the split-K plan for 4
    programs an SM, and the workspace with a partial-sum slice and counters per row."""
    cpu = interpreting(x)
    bn, bk, warps, stages = ((_CPU_GEMV_BN, min(128, group), _GEMV_WARPS, 1) if cpu else
                             gemv or (_GEMV_BN, _GEMV_BK, _GEMV_WARPS, _GEMV_STAGES))
    assert group % bk == 0
    tiles = cdiv(N, bn)
    sp, k_per = _split(tiles * rows, K, bk, 0 if cpu else 4 * _sms(x.device), split)
    ws, lock = _workspace(x.device, rows * sp * N if sp > 1 else 0, rows * tiles if sp > 1 else 0)
    return bn, bk, warps, stages, tiles, sp, k_per, ws, lock


def w4a16_matmul(x: torch.Tensor, w_q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                 group: int = 128, out_dtype=torch.bfloat16, kernel: str = "auto", split: int | None = None,
                 config: dict | None = None, dq: int | None = None) -> torch.Tensor:
    """x (M,K) or (K,) bf16/fp32, w_q (K/2,N) uint8, scales/zeros (K/group,N) bf16 -> (M,N) out_dtype.
    kernel: "auto" (GEMV for M == 1, else the GEMM), "gemv" or "gemm".  split: force the split-K
    factor (tests; the default picks it from the SM count).  config: {"gemv": (BLOCK_N, BLOCK_K,
    warps, stages), "gemm": (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, swap)} in place of the
    defaults (the timing variants; the GEMM's also under the interpreter, for the tests), and
    "tail_slots": the programs that run at once (SMs x programs per SM; default: _TAIL_PER_SM a SM
    for swapped tiles on a GPU, else 0): when the tiles are more than that but fewer than twice, the
    last ones are split in two K halves (the kernel's TAIL) so that no SM runs two whole tiles
    while others idle.  dq: the GEMM's dequant (the kernel's DQ; default _DQ; always 0 under the
    interpreter, which runs no PTX)."""
    squeeze = x.dim() == 1
    if squeeze:
        x = x[None]
    if x.stride(-1) != 1:
        x = x.contiguous()
    M, K = x.shape
    N = w_q.shape[1]
    assert K % group == 0 and w_q.stride(1) == 1 and scales.stride(1) == 1 and zeros.stride(1) == 1
    cpu = interpreting(x)
    y = torch.empty(M, N, dtype=out_dtype, device=x.device)
    if kernel == "gemv" or (kernel == "auto" and M == 1):
        bn, bk, warps, stages, tiles, sp, k_per, ws, lock = _gemv_plan(x, N, K, group, 1, split,
                                                                       (config or {}).get("gemv"))
        for m in range(M):   # "gemv" forced on M > 1 (tests): one launch per row
            _w4a16_gemv_kernel[(tiles, sp)](x[m], w_q, scales, zeros, y[m], ws, lock, N, K, k_per, w_q.stride(0),
                                            scales.stride(0), ws, 0, 0, 0, 0, GROUP=group, BLOCK_N=bn, BLOCK_K=bk,
                                            SPLIT=sp, num_warps=warps, num_stages=stages)
    else:
        bm, bn, bk, warps, stages, swap = (config or {}).get("gemm") or gemm_config(M, x.dtype == torch.float32, cpu)
        bk = min(bk, group)
        assert group % bk == 0
        tiles = cdiv(M, bm) * cdiv(N, bn)
        slots = (config or {}).get("tail_slots")
        if slots is None:
            slots = _TAIL_PER_SM * _sms(x.device) if swap and not cpu else 0
        if slots and not split and tiles < slots < 2 * tiles:   # more tiles than one wave: halve the last ones
            n_full = 2 * tiles - slots
            k_per = cdiv(cdiv(K, 2), bk) * bk
            ws, lock = _workspace(x.device, 2 * M * N, tiles)
            grid, sp, tail = (n_full + 2 * (tiles - n_full), 1, 1), 1, 2
        else:
            sp, k_per = _split(tiles, K, bk, 0 if cpu else _sms(x.device), split)
            ws, lock = _workspace(x.device, sp * M * N if sp > 1 else 0, tiles if sp > 1 else 0)
            grid, n_full, tail = (cdiv(N, bn), cdiv(M, bm), sp), 0, 0
        _w4a16_gemm_kernel[grid](
            x, w_q, scales, zeros, y, ws, lock, M, N, K, k_per, x.stride(0), w_q.stride(0), scales.stride(0),
            y.stride(0), GROUP=group, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SPLIT=sp, SWAP=swap,
            X_F32=x.dtype == torch.float32, DOT_F32=cpu, DQ=0 if cpu else (_DQ if dq is None else dq), TAIL=tail,
            N_FULL=n_full, num_warps=warps, num_stages=1 if cpu else stages)
    return y[0] if squeeze else y


def w4a16_experts(x: torch.Tensor, w_q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, idx: torch.Tensor,
                  group: int = 128, out_dtype=torch.float32, split: int | None = None) -> torch.Tensor:
    """y[j] = x[j] @ W[idx[j]] for the selected experts of one token, in one GEMV launch: x (K,)
    (the same row for every expert) or (n, K) bf16/fp32, w_q (E, K/2, N) uint8, scales/zeros
    (E, K/group, N), idx (n,) integer on x's device -> (n, N) out_dtype.  idx stays on the device:
    no host sync (a loop over idx.tolist() reads it back every call).  split: force split-K (tests)."""
    n = idx.numel()
    K = x.shape[-1]
    N = w_q.shape[-1]
    assert K % group == 0 and w_q.stride(-1) == 1 and scales.stride(-1) == 1 and zeros.stride(-1) == 1
    assert scales.stride(0) == zeros.stride(0) and scales.stride(1) == zeros.stride(1)
    if x.stride(-1) != 1:
        x = x.contiguous()
    sxj = 0 if x.dim() == 1 else x.stride(0)
    y = torch.empty(n, N, dtype=out_dtype, device=x.device)
    bn, bk, warps, stages, tiles, sp, k_per, ws, lock = _gemv_plan(x, N, K, group, n, split)
    _w4a16_gemv_kernel[(tiles, sp, n)](x, w_q, scales, zeros, y, ws, lock, N, K, k_per, w_q.stride(1),
                                       scales.stride(1), idx, w_q.stride(0), scales.stride(0), sxj, y.stride(0),
                                       GROUP=group, BLOCK_N=bn, BLOCK_K=bk, SPLIT=sp, EXPERTS=True,
                                       num_warps=warps, num_stages=stages)
    return y


def forward(model, inputs):
    (x,) = inputs
    return w4a16_matmul(x, model.w_q, model.scales, model.zeros, model.group_size)


def _variant(gemm=None, split=None, dq=None, per_sm=None):
    """The GEMM with tiles `gemm` (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, swap; None: the
    default), dequant `dq`, and the tail split planned for `per_sm` programs an SM (0: none, None:
    the default)."""
    def run(model, inputs):
        x = inputs[0]
        config = dict(gemm=gemm or gemm_config(x.shape[0], x.dtype == torch.float32, interpreting(x)))
        if per_sm is not None:
            config["tail_slots"] = per_sm * _sms(x.device)
        return w4a16_matmul(x, model.w_q, model.scales, model.zeros, model.group_size, config=config, split=split,
                            dq=dq)
    return run


def VARIANT_APPLIES(model, inputs) -> bool:
    """The GEMM variants mean nothing at M == 1: that shape runs the GEMV (forensics.kernels.verify skips it)."""
    x = inputs[0]
    return x.dim() == 2 and x.shape[0] > 1


#: timed beside `forward` by forensics.kernels.verify on a GPU (candidates for the GEMM default above; not
#: at M == 1, see VARIANT_APPLIES).  Measured 2026-12-03 and slower than the defaults on every
#: shape (device time): GEMV (64,128,4,4), (256,64,8,4), (128,128,8,6); GEMM (128,256,64,8,3),
#: (64,128,128,4,4), (128,128,128,8,3) (docs/h200/2026-12-03-kernels-verify-8d43d9f.json);
#: unswapped 256-row tiles (-d8827ad.json); swapped tiles at M <= 64: 16-64 x-rows by 64-128
#: weight columns, no faster than the unswapped ones (-dc9fb5e.json); swapped at M = 256:
#: 256 x 128 (0.102 ms), 128 x 128 (0.163), split-K forced off (-6448cf5.json), 128 x 64 (s3, s4,
#: BLOCK_K 128) and 256 x 64 at 2 stages (0.105-0.152 against the default's 0.090, -944d520.json,
#: -c8e608b.json).  x tiles by TMA descriptor (tl.make_tensor_descriptor, then tl.trans for the
#: swapped operand): 0.0893 ms against 0.0905 at M=256, 12-34% slower at M=16 and 32 (-tma1.json);
#: the pointer loads stay.  With the bf16x2 dequant (-3cd53c7): 256 x 128 in 8 warps (0.089 ms),
#: 128 x 64 (0.081) and 256 x 64 at 4 stages (0.117) against the default's 0.076 at M=256.  A
#: dequant from the packed bytes (each byte loaded once, four a PTX call giving the low and high
#: weights, tl.join + reshape into K order) took 0.108 ms against 0.077 at M=256 (-3e62e03); dropped.
VARIANTS = {
    "dq0": _variant(dq=0),
    "no_tail": _variant(per_sm=0),
}
