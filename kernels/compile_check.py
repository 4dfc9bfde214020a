"""Compile every Triton kernel for Hopper (sm_90) on a machine without a GPU.

    python -m forensics.kernels.compile_check [--arch 90] [--json]

Triton's compiler (front end, TTGIR, LLVM, ptxas) runs without a device, so the GPU-only code
paths that the CPU interpreter never takes (bf16/fp8 MMA, tf32x3 dots, pipelining, shared memory
budgets) are at least built for the target, with the block configurations the launchers use on
an H200.  This is not a substitute for running them (forensics.kernels.verify does that on a GPU).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback

os.environ.pop("TRITON_INTERPRET", None)

I32 = "i32"
F32 = "fp32"


def cases():
    from .triton import fp8_gemm, glm_moe, grouped_gemm, kda, megaqwen, mingru, nsa, paged_attention, topk, w4a16
    gemm_sig = dict(x_ptr="*fp8e4nv", w_ptr="*fp8e4nv", s_ptr="*fp32", y_ptr="*bf16", M=I32, N=I32, K=I32,
                    sxm=I32, swn=I32, sym=I32)
    out = []
    for name, (M, N, K), fp8 in (("fp8 large", (4096, 4096, 4096), True), ("fp8 M=32", (32, 8192, 8192), True),
                                 ("fp8 pre-2026-06-14 (bf16)", (4096, 4096, 4096), False),
                                 ("fp8 pre-2026-06-14 (bf16) M=32", (32, 8192, 8192), False)):
        cfg = fp8_gemm._config(M, N, K, fp8, False)
        c = {k: v for k, v in cfg.items() if k not in ("num_warps", "num_stages")}
        out.append((name, fp8_gemm._gemm_kernel, gemm_sig if fp8 else dict(gemm_sig, x_ptr="*bf16", w_ptr="*bf16"),
                    dict(c, HAS_SCALE=fp8, DOT_F32=False), cfg["num_warps"], cfg["num_stages"]))
    w4_sig = dict(x_ptr="*bf16", wq_ptr="*u8", s_ptr="*bf16", z_ptr="*bf16", y_ptr="*bf16", ws_ptr="*fp32",
                  lock_ptr="*i32", M=I32, N=I32, K=I32, K_PER_SPLIT=I32, sxm=I32, swk=I32, ssg=I32, sym=I32, N_FULL=I32)
    w4_aligned = [a for a in w4_sig if a != "N_FULL"]    # the canonical shapes: M, N, K and every stride 16-divisible
    for lim, _ in w4a16._GEMM_CONFIGS:
        for xf, sp in ((False, 1), (False, 4), (True, 4)):
            bm, bn, bk, wp, st, swap = w4a16.gemm_config(lim, xf, False)
            out.append((f"w4a16 gemm BM={bm}" + (" swapped" if swap else "") + (" split" if sp > 1 else "")
                        + (" fp32 x" if xf else ""), w4a16._w4a16_gemm_kernel, dict(w4_sig, x_ptr="*fp32" if xf else "*bf16"),
                        dict(GROUP=128, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SPLIT=sp, SWAP=swap, DOT_F32=False, X_F32=xf,
                             DQ=w4a16._DQ, TAIL=2 if swap and sp == 1 else 0),
                        wp, st, w4_aligned))
    for dq, tail, label in ((0, 0, "fp32 dequant"), (w4a16._DQ, 0, "no tail split")):
        bm, bn, bk, wp, st, swap = w4a16.gemm_config(256, False, False)   # the other GEMM builds the variants time
        out.append((f"w4a16 gemm BM={bm} swapped {label}", w4a16._w4a16_gemm_kernel, w4_sig,
                    dict(GROUP=128, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SPLIT=1, SWAP=swap, DOT_F32=False, X_F32=False,
                         DQ=dq, TAIL=tail), wp, st, w4_aligned))
    gv_sig = dict({k: v for k, v in w4_sig.items() if k not in ("M", "sxm", "sym", "N_FULL")}, idx_ptr="*i64", se_w=I32,
                  se_s=I32, sxj=I32, syj=I32)
    for xf, experts in ((False, False), (True, False), (False, True), (True, True)):
        out.append(("w4a16 gemv (no dot)" + (" fp32 x" if xf else "") + (" experts" if experts else ""),
                    w4a16._w4a16_gemv_kernel, dict(gv_sig, x_ptr="*fp32" if xf else "*bf16"),
                    dict(GROUP=128, BLOCK_N=w4a16._GEMV_BN, BLOCK_K=w4a16._GEMV_BK, SPLIT=8, EXPERTS=experts),
                    w4a16._GEMV_WARPS, w4a16._GEMV_STAGES))
    pa_sig = dict(q_ptr="*bf16", k_ptr="*bf16", v_ptr="*bf16", bt_ptr="*i32", len_ptr="*i32", ml_ptr="*fp32",
                  acc_ptr="*fp32", cnt_ptr="*i32", o_ptr="*bf16", sq_b=I32, sq_h=I32, s_page=I32, s_slot=I32,
                  s_head=I32, sbt_b=I32, tokens_per_split=I32, sm_scale=F32, n_rows=I32, v_col=I32)
    pa_aligned = [a for a in pa_sig if a.endswith("_ptr")] + ["sq_b", "sq_h", "s_page", "s_slot", "s_head", "v_col"]
    pa_const = dict(G=4, BLOCK_G=16, BLOCK_T=64, PAGE=16, CONTIG=False, DOT_F32=False, Q_F32=False, TMA=False)
    for D, split, tile, warps, stages, tma in ((128, False, 16, 1, 5, False), (128, True, 16, 1, 5, False),
                                               (64, True, 64, 4, 3, False), (128, True, 64, 4, 3, False),
                                               (128, True, 16, 1, 3, True), (64, True, 16, 1, 3, True)):
        out.append((f"paged decode D={D}" + (" split" if split else "") + f" {tile}-token tiles {warps} warps"
                    + (" TMA" if tma else ""), paged_attention._decode_kernel, pa_sig,
                    dict(pa_const, D=D, SPLIT=split, BLOCK_T=tile, TMA=tma), warps, stages, pa_aligned))
    out.append(("decode contiguous fp32 q/out (megaqwen)", paged_attention._decode_kernel,
                dict(pa_sig, q_ptr="*fp32", o_ptr="*fp32"),
                dict(pa_const, G=2, D=128, PAGE=1, CONTIG=True, SPLIT=True, Q_F32=True), 4, 3, pa_aligned))
    for k in (64, 8):
        out.append((f"topk tile k={k}", topk._tile_topk_kernel,
                    dict(x_ptr="*fp32", xi_ptr="*i64", ov_ptr="*fp32", oi_ptr="*i64", n=I32, sx_row=I32, so_row=I32),
                    dict(K=k, TILE=1024, HAS_IDX=k == 64), 4, 1))
    out.append(("topk k=1 row argmax", topk._row_argmax_kernel,
                dict(x_ptr="*fp32", ov_ptr="*fp32", oi_ptr="*i64", n=I32, sx_row=I32), dict(BLOCK=4096), 8, 1))
    sw_sig = dict(x_ptr="*bf16", rows_ptr="*i32", off_ptr="*i32", tile_cum_ptr="*i32", wg_ptr="*bf16", wu_ptr="*bf16",
                  out_ptr="*bf16", E=I32, N=I32, KD=I32, total_tiles=I32, sxr=I32, sxk=I32, swe=I32, swk=I32, swn=I32,
                  sor=I32, son=I32)
    out.append(("grouped swiglu (sonic)", grouped_gemm._swiglu_kernel, sw_sig,
                dict(HAS_ROWS=False, ROUND_BF16=True, BLOCK_E=128, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, DOT_F32=False), 8, 3))
    out.append(("grouped swiglu gathered (glm)", grouped_gemm._swiglu_kernel, sw_sig,
                dict(HAS_ROWS=True, ROUND_BF16=False, BLOCK_E=256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, DOT_F32=False), 8, 3))
    out.append(("grouped gemm (glm down)", grouped_gemm._gemm_kernel,
                dict(x_ptr="*bf16", off_ptr="*i32", tile_cum_ptr="*i32", w_ptr="*bf16", scale_ptr="*fp32",
                     dst_ptr="*i32", out_ptr="*fp32", E=I32, N=I32, KD=I32, sxr=I32, sxk=I32, swe=I32, swk=I32, swn=I32,
                     sor=I32, son=I32),
                dict(HAS_SCALE=True, BLOCK_E=256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, DOT_F32=False), 8, 3))
    dec1 = dict(x_ptr="*bf16", ids_ptr="*i64", w1r_ptr="*bf16", w1s_ptr="*bf16", h_ptr="*fp32", T=I32, I=I32, H=I32,
                sxt=I32, sit=I32, swe=I32, swn=I32, sse=I32, sht=I32, shj=I32)
    dec2 = dict(h_ptr="*fp32", ids_ptr="*i64", wts_ptr="*bf16", w2r_ptr="*bf16", w2s_ptr="*bf16", out_ptr="*bf16",
                T=I32, H=I32, I=I32, sht=I32, shj=I32, sit=I32, swe=I32, swn=I32, sse=I32, sot=I32)
    for kern, sig, cfgs, extra in ((glm_moe._decode_swiglu_kernel, dec1, glm_moe._SWIGLU_CFGS, {}),
                                   (glm_moe._decode_down_kernel, dec2, glm_moe._DOWN_CFGS, dict(N_SLOTS=9))):
        for cfg in cfgs:
            out.append((f"glm decode {kern.__name__} BN={cfg.kwargs['BLOCK_N']} BK={cfg.kwargs['BLOCK_K']}", kern, sig,
                        dict(TOP_K=8, **extra, **cfg.kwargs), cfg.num_warps, cfg.num_stages))
    f32p = "*fp32"
    out.append(("kda prep", kda._prep_kernel,
                dict(q_ptr="*bf16", k_ptr="*bf16", v_ptr="*bf16", g_ptr=f32p, b_ptr="*bf16", w_ptr=f32p, u_ptr=f32p,
                     qg_ptr=f32p, kd_ptr=f32p, aqk_ptr=f32p, gl_ptr=f32p, T=I32, H=I32, scale=F32),
                dict(C=64, K=128, V=128, PREC="tf32x3"), 8, 1))
    out.append(("kda scan", kda._scan_kernel,
                dict(w_ptr=f32p, u_ptr=f32p, qg_ptr=f32p, kd_ptr=f32p, aqk_ptr=f32p, gl_ptr=f32p, o_ptr="*bf16",
                     T=I32, H=I32), dict(C=64, K=128, V=128, BV=32, PREC="tf32x3"), 4, 2))
    for D, (bm, warps, stages, tma) in ((64, nsa._config(64, False)), (128, nsa._config(128, False)),
                                        (64, (128, 8, 3, False)), (128, (128, 8, 3, False))):
        out.append((f"nsa attention D={D} BLOCK_M={bm}" + (" TMA" if tma else ""), nsa._nsa_kernel,
                    dict(q_ptr="*bf16", k_ptr="*bf16", v_ptr="*bf16", ks_ptr="*fp32", o_ptr="*bf16", S=I32, NBF=I32,
                         qk_scale=F32),
                    dict(D=D, BLOCK_M=bm, BLK=64, NBP=128, TOP=8, WIN=64, DOT_F32=False, TMA=tma), warps, stages,
                    ("q_ptr", "k_ptr", "v_ptr", "ks_ptr", "o_ptr")))
    bf = "*bf16"
    mq = megaqwen.GPU_CONFIG          # the step's launch parameters on a GPU
    for combine in (True, False):
        out.append((f"megaqwen norm+qkv combine={combine}", megaqwen._norm_qkv_kernel,
                    dict(x_ptr=bf, stream_ptr=bf, pos_ptr="*i32", xout_ptr=bf, ln_ptr=bf, wq_ptr=bf, wk_ptr=bf, wv_ptr=bf,
                         y_ptr=f32p, eps=F32),
                    dict(COMBINE=combine, NQ=2048, NK=1024, K=1024, BLOCK_N=mq["bn_qkv"]), mq["warps"], 3))
    out.append(("megaqwen attention split", megaqwen._attn_split_kernel,
                dict(qkv_ptr=f32p, qn_ptr=bf, kn_ptr=bf, cos_ptr=f32p, sin_ptr=f32p, pos_ptr="*i32", kc_ptr=bf, vc_ptr=bf,
                     m_ptr=f32p, l_ptr=f32p, acc_ptr=f32p, s_head=I32, per=I32, sm_scale=F32, eps=F32),
                dict(NQ=2048, NK=1024, D=128, BLOCK_T=mq["block_t"]), mq["attn_warps"], 3))
    out.append(("megaqwen attention merge", megaqwen._attn_merge_kernel,
                dict(m_ptr=f32p, l_ptr=f32p, acc_ptr=f32p, o_ptr=f32p, nsplit=I32),
                dict(G=2, D=128, BLOCK_S=mq["max_split"]), 2, 3))
    for name, K, res, o, adv in (("o_proj", 2048, bf, f32p, True), ("down", 3072, f32p, bf, False)):
        out.append((f"megaqwen {name}+residual", megaqwen._gemv_residual_kernel,
                    dict(x_ptr=f32p, w_ptr=bf, res_ptr=res, out_ptr=o, pos_ptr="*i32"),
                    dict(K=K, BLOCK_N=mq["bn_res"], BLOCK_K=mq["bk_res"], ADVANCE=adv), mq["warps"], 3))
    out.append(("megaqwen norm+gate/up", megaqwen._norm_gate_up_kernel,
                dict(r_ptr=f32p, ln_ptr=bf, wg_ptr=bf, wu_ptr=bf, a_ptr=f32p, eps=F32),
                dict(K=1024, BLOCK_N=mq["bn_mlp"]), mq["warps"], 3))
    out.append(("mingru layer", mingru._mingru_layer_kernel,
                dict(h_ptr=f32p, s_ptr=f32p, w_ptr=f32p, so_ptr=f32p, ho_ptr=f32p, N=I32, ss_row=I32, sso_row=I32),
                dict(HID=256, BLOCK_M=32, BLOCK_N=32), 4, 3))
    return out


_BUFFER = re.compile(r"local_alloc : \(\) -> !ttg\.memdesc<(\d+)x([\dx]+)x(\w+),")
_WGMMA = re.compile(r"ttng\.warp_group_dot %\S+, %\S+, %\S+ (?:\{[^}]*\} )?: (tensor|!ttg\.memdesc)<")
_USAGE = re.compile(r"REG:(\d+) STACK:(\d+)")


def build_facts(ttgir: str, cubin: bytes | None) -> dict:
    """What the build did with the loops, read from Triton's TTGIR and the cubin:
    * pipeline_buffers: the multi-buffered shared-memory tiles that cp.async/TMA prefetch into,
      as "DEPTHxSHAPExDTYPE" (depth 1: the next tile is fetched only once this one is used);
    * wgmma / wgmma_register_a: sm_90 warpgroup MMAs, and how many read their first operand from
      registers (the only operand wgmma can take from registers; the other is in shared memory);
    * registers / stack_bytes per thread (stack > 0 is spilling), from cuobjdump -res-usage on the
      cubin (None where Triton's bundled cuobjdump is absent)."""
    wg = _WGMMA.findall(ttgir)
    regs = stack = None
    tool = os.path.join(os.path.dirname(__import__("triton").__file__), "backends", "nvidia", "bin", "cuobjdump")
    if cubin and os.path.exists(tool):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "k.cubin")
            with open(path, "wb") as f:
                f.write(cubin)
            out = subprocess.run([tool, "-res-usage", path], capture_output=True, text=True, timeout=120).stdout
        m = _USAGE.search(out)
        if m:
            regs, stack = int(m.group(1)), int(m.group(2))
    return dict(pipeline_buffers=sorted({f"{d}x{shape}x{dt}" for d, shape, dt in _BUFFER.findall(ttgir)}),
                wgmma=len(wg), wgmma_register_a=wg.count("tensor"), registers=regs, stack_bytes=stack)


def run(arch: int = 90) -> list[dict]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    target = GPUTarget("cuda", arch, 32)
    rows = []
    for name, fn, sig, const, warps, stages, *aligned in cases():
        try:
            # arguments the launcher always passes 16-divisible (Triton specializes those at run
            # time; without the hint loads are not vectorized and cp.async pipelining is not built)
            attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in (aligned[0] if aligned else ())}
            src = ASTSource(fn=fn, signature={**sig, **{k: "constexpr" for k in const}}, constexprs=const, attrs=attrs)
            k = triton.compile(src, target=target, options=dict(num_warps=warps, num_stages=stages))
            rows.append(dict(kernel=name, ok=True, shared_bytes=k.metadata.shared, num_warps=warps, num_stages=stages,
                             mma=("wgmma" in k.asm.get("ptx", "")) or ("mma.sync" in k.asm.get("ptx", "")),
                             **build_facts(k.asm.get("ttgir", ""), k.asm.get("cubin"))))
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(kernel=name, ok=False, error=f"{type(exc).__name__}: {str(exc)[:1500]}",
                             traceback=traceback.format_exc(limit=4)))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = run(args.arch)
    if args.json:
        json.dump(rows, sys.stdout)
    else:
        for r in rows:
            print(("OK  " if r["ok"] else "ERR ") + r["kernel"] + (
                f"  smem={r['shared_bytes']} mma={r['mma']} wgmma={r['wgmma']} (A in registers: {r['wgmma_register_a']})"
                f" regs={r['registers']} stack={r['stack_bytes']} buffers={','.join(r['pipeline_buffers']) or '-'}"
                if r["ok"] else "  " + r["error"][:600]))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
