"""The whole GPU verification batch in one command (issue 6 section 6):

    python -m forensics.replay.gpu_verify --out $OUT [--skip-kernels] [--budget-s 540]

1. the GPU, and the ceilings measured on it (D2D copy, 8192^3 bf16 GEMM);
2. kernels' own verification (`python -m kernels.verify`), if present, as a subprocess;
3. the planted cases of corpus/replay/ (plain torch) and corpus/replay/gpu/ (Triton, load_inline)
   through the full runner on CUDA, each with the finding it must end in;
4. the replay overhead per run: a second replay of the honest fp8 case, whose Triton kernels are
   then cached under the solution's sha256, excludes the solution's own compile.

`--device cpu` runs only the plain-torch cases on tiny shapes (a check of this script and of the
case table without a GPU).

Writes $OUT/gpu_verify.json after every case (so a run cut short still returns what it did) and
prints a summary table last.  Needs torch (+ triton) only: no duckdb, orjson or click.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "corpus" / "replay"

# (label, problem, solution file, sidecars, probes, shapes, seeds, rules that must appear, status wanted)
CASES = [
    ("fp8_honest", "01_fp8_gemm", "gpu/fp8_honest.py", [], ["all"], "canonical", None, [], "pass"),
    ("fp8_stale_sampled", "01_fp8_gemm", "gpu/fp8_stale_sampled.py", ["gpu/fp8_honest.py"],
     ["check", "same-buffer", "unsampled-region"], "canonical", (42,), ["replay-stale-unsampled-region"], "fail"),
    ("fp8_weight_cache", "01_fp8_gemm", "gpu/fp8_weight_cache.py", [], ["check", "same-buffer"], "canonical", (42,),
     ["replay-check-failed", "replay-stale-same-buffer"], "fail"),
    ("fp8_unwritten", "01_fp8_gemm", "gpu/fp8_unwritten.py", ["gpu/fp8_honest.py"], ["nan-poison", "determinism"],
     "canonical", (42,), ["replay-unwritten-output"], "fail"),
    ("topk_honest", "05_topk_bitonic", "topk_honest.py", [], ["all"], "canonical", None, [], "pass"),
    ("topk_stale_sampled", "05_topk_bitonic", "topk_stale_sampled.py", [], ["check", "unsampled-region"],
     "canonical", (42,), ["replay-stale-unsampled-region"], "fail"),
    ("topk_stale_ptr", "05_topk_bitonic", "topk_stale_ptr.py", [], ["same-buffer", "fresh-state"], "canonical", (42,),
     ["replay-stale-same-buffer"], "fail"),
    ("topk_allclose", "05_topk_bitonic", "topk_allclose.py", [], ["check"], "canonical", (42,),
     ["replay-torch-monkeypatch"], "tampered"),
    ("topk_forged_report", "05_topk_bitonic", "topk_forged_report.py", [], ["check", "timing"], "canonical", (42,),
     ["replay-report-forged", "replay-input-mutated"], "tampered"),
    ("topk_exit", "05_topk_bitonic", "topk_exit.py", [], ["check"], "canonical", (42,), ["replay-early-exit"],
     "early_exit"),
    ("topk_loop", "05_topk_bitonic", "topk_loop.py", [], ["check"], "canonical", (42,), ["replay-timeout"], "timeout"),
    ("topk_first_inputs", "05_topk_bitonic", "topk_first_inputs.py", [], ["check", "same-buffer", "fresh-inputs"],
     "canonical", (42,), ["replay-stale-fresh-inputs"], "fail"),
    # issue 21: a weight cache keyed on _version (the deck's weight writes bump it), the two hacks
    ("fp8_version_cache", "01_fp8_gemm", "fp8_version_cache.py", [], ["check", "same-buffer"], "canonical", (42,),
     ["replay-version-keyed-cache"], "pass"),
    ("topk_bench_switch", "05_topk_bitonic", "topk_bench_switch.py", [], ["check", "timed-outputs"], "canonical",
     (42,), ["replay-timed-output-wrong"], "fail"),
    ("topk_magnitude_sniff", "05_topk_bitonic", "topk_magnitude_sniff.py", [], ["check", "distribution"], "tiny",
     (42,), ["replay-distribution-failed"], "fail"),
    # issue 17: the kernel-name trace attributes the device time to authored or library kernels
    ("fp8_trace_authored", "01_fp8_gemm", "gpu/fp8_honest.py", [], ["check", "kernel-trace"], "canonical", (42,),
     ["replay-kernel-trace"], "pass"),
    ("fp8_library_wrapper", "01_fp8_gemm", "gpu/fp8_library_wrapper.py", [], ["check", "kernel-trace"], "canonical",
     (42,), ["replay-work-by-library"], "pass"),
    ("mq_honest", "03_megaqwen_decode", "mq_honest.py", ["mq_core.py"], ["check", "alternate-cache", "fresh-state"],
     "tiny", (42,), [], "pass"),
    ("mq_ignores_caches", "03_megaqwen_decode", "mq_ignores_caches.py", ["mq_core.py"], ["alternate-cache"], "tiny",
     (42,), ["replay-ignores-caller-cache"], "fail"),
    ("mq_id_cache", "03_megaqwen_decode", "mq_id_cache.py", ["mq_core.py"], ["fresh-state"], "tiny", (42,),
     ["replay-stale-fresh-state"], "fail"),
    # stateful APIs (plain torch; tiny configs on CUDA, then the honest ones on the deck's shapes,
    # whose timing rows are the deck's wall-clock loops)
    ("kimi_honest", "02_kimi_linear_decode", "kimi_honest.py", ["kimi_core.py"],
     ["check", "same-buffer", "fresh-state", "alternate-cache", "determinism", "timing"], "tiny", (0,), [], "pass"),
    ("kimi_frozen_state", "02_kimi_linear_decode", "kimi_frozen_state.py", ["kimi_core.py"], ["check", "state-drift"],
     "tiny", (0,), ["replay-state-drift"], "fail"),
    ("kimi_id_cache", "02_kimi_linear_decode", "kimi_id_cache.py", ["kimi_core.py"], ["fresh-state"], "tiny", (0,),
     ["replay-stale-fresh-state"], "fail"),
    ("kimi_ptr_state", "02_kimi_linear_decode", "kimi_ptr_state.py", ["kimi_core.py"], ["check", "same-buffer"], "tiny",
     (0,), ["replay-stale-same-buffer"], "fail"),
    ("kimi_internal_state", "02_kimi_linear_decode", "kimi_internal_state.py", ["kimi_core.py"], ["alternate-cache"],
     "tiny", (0,), ["replay-ignores-caller-cache"], "fail"),
    ("mingru_honest", "04_grid_mingru_sps", "mingru_honest.py", ["mingru_core.py"],
     ["check", "same-buffer", "fresh-state", "output-alias", "determinism", "timing"], "tiny", (42,), [], "pass"),
    ("mingru_weight_cache", "04_grid_mingru_sps", "mingru_weight_cache.py", ["mingru_core.py"],
     ["same-buffer", "fresh-state"], "tiny", (42,), ["replay-version-keyed-cache", "replay-stale-fresh-state"], "fail"),
    ("mingru_honest_canonical", "04_grid_mingru_sps", "mingru_honest.py", ["mingru_core.py"], ["check", "timing"],
     "canonical", None, [], "pass"),
    ("mq_honest_timing", "03_megaqwen_decode", "mq_honest.py", ["mq_core.py"], ["timing"], "tiny", (42,), [], "pass"),
    ("kimi_honest_canonical", "02_kimi_linear_decode", "kimi_honest.py", ["kimi_core.py"], ["check", "timing"],
     "canonical", (0,), [], "pass"),
    # last: its failing nvcc build for sm_120a alone takes about a minute
    ("fp8_sm120", "01_fp8_gemm", "gpu/fp8_sm120.py", [], ["check"], "canonical", (42,), ["replay-not-replayable"],
     "not_replayable"),
]


def _dump(path: Path, obj) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    tmp.replace(path)


def run_case(case, limits_cls, replay_solution, device: str = "cuda") -> dict:
    label, problem, sol, side, probes, shapes, seeds, rules, want = case
    sidecars = {Path(s).name: (CORPUS / s).read_bytes() for s in side}
    limits = limits_cls(build_s=240, call_s=20 if label == "topk_loop" else 180, time_s=240)
    t0 = time.monotonic()
    out = replay_solution(problem, (CORPUS / sol).read_bytes(), sidecars, device=device, probes=probes, shapes=shapes,
                          seeds=seeds, limits=limits)
    wall = time.monotonic() - t0
    found = sorted({f["rule"] for f in out.findings})
    caught = all(r in found for r in rules) and out.status() == want
    return {"label": label, "problem": problem, "solution": sol, "probes": probes, "shapes": shapes,
            "wall_s": round(wall, 2), "status": out.status(), "want_status": want, "want_rules": rules,
            "rules": found, "ok": caught, "info": out.info, "findings": out.findings,
            "rows": out.rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_verify_out"))
    ap.add_argument("--skip-kernels", action="store_true")
    ap.add_argument("--kernels-timeout", type=float, default=200)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--device", default="cuda", help="cpu: only the plain-torch cases on tiny shapes (no ceilings, "
                                                     "no kernels.verify, no overhead run): a check of this script")
    args = ap.parse_args(argv)
    cpu = args.device == "cpu"
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    res_path = out_dir / "gpu_verify.json"
    t_start = time.monotonic()
    import torch

    from .api import replay_solution
    from .probes import Limits
    from .timing import gpu_env_summary, measure_ceilings
    result: dict = {"env": gpu_env_summary(), "commands": [" ".join([sys.executable, "-m", "forensics.replay.gpu_verify"] + (argv or sys.argv[1:]))]}
    t = time.monotonic()
    result["ceilings"] = {} if cpu else measure_ceilings("cuda", use_disk=False)
    result["ceilings_s"] = round(time.monotonic() - t, 2)
    _dump(res_path, result)
    print("ceilings", result["ceilings"], flush=True)

    # kernels' verification (the kernels engineer's script), if it is there
    if not cpu and not args.skip_kernels and (REPO / "kernels" / "verify.py").exists():
        t = time.monotonic()
        log = out_dir / "kernels_verify.log"
        cmd = [sys.executable, "-m", "kernels.verify", "--out", str(out_dir / "kernels_verify.json"),
               "--budget-s", str(max(30, int(args.kernels_timeout) - 60))]
        try:
            p = subprocess.run(cmd, cwd=REPO, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                               timeout=args.kernels_timeout, env=dict(os.environ, PYTHONUNBUFFERED="1"))
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        result["kernels_verify"] = {"cmd": " ".join(cmd), "rc": rc, "s": round(time.monotonic() - t, 1),
                                    "tail": log.read_text(errors="replace")[-3000:]}
        _dump(res_path, result)
        print("kernels.verify rc", rc, flush=True)

    def overhead() -> None:
        """The honest fp8 check again, its Triton kernels already compiled in the sha-keyed cache."""
        t = time.monotonic()
        o = replay_solution("01_fp8_gemm", (CORPUS / "gpu/fp8_honest.py").read_bytes(), device="cuda",
                            probes=["check"], shapes="canonical", limits=Limits(build_s=240, call_s=180))
        result["overhead"] = {"probes": ["check"], "wall_s": round(time.monotonic() - t, 2), "status": o.status(),
                              "info": o.info, "n_rows": len(o.rows)}
        _dump(res_path, result)
        print(f"overhead (fp8 check, warm cache) {result['overhead']['wall_s']} s, transfer {o.info.get('transfer')}, "
              f"phases {o.info.get('phase_s')}", flush=True)

    want_overhead = not cpu and (not args.only or "overhead" in args.only)
    result["cases"] = []
    for case in CASES:
        if args.only and case[0] not in args.only:
            continue
        if cpu and (case[5] != "tiny" or case[2].startswith("gpu/")):
            continue
        try:
            r = run_case(case, Limits, replay_solution, device=args.device)
        except Exception as e:  # noqa: BLE001
            r = {"label": case[0], "ok": False, "error": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()[-3000:]}
        result["cases"].append(r)
        _dump(res_path, result)
        print(f"{r['label']:<20} ok={r.get('ok')} status={r.get('status')} rules={r.get('rules')} "
              f"wall={r.get('wall_s')}s {r.get('error', '')}", flush=True)
        if not cpu:
            torch.cuda.empty_cache()
        if case[0] == "fp8_honest" and want_overhead:  # right after it: its kernels are in the cache
            overhead()
            want_overhead = False
    if want_overhead:
        overhead()

    result["total_s"] = round(time.monotonic() - t_start, 1)
    _dump(res_path, result)
    print("\nSUMMARY")
    for r in result["cases"]:
        tim = [x for x in r.get("rows", []) if x["probe"] in ("timing", "timing-l2-reset")]
        print(f"  {r['label']:<20} {'CAUGHT/PASS' if r.get('ok') else 'MISMATCH':<12} status={r.get('status')} "
              f"want={r.get('want_status')} rules={','.join(r.get('rules', []))} wall={r.get('wall_s')}s")
        for x in tim:
            d = x.get("data") or {}
            rate = next((f"{k}={d[k]:.4g}" for k in ("tok_s", "sps") if isinstance(d.get(k), (int, float))), "")
            print(f"      {x['probe']:<16} {str(x['shape'])[:40]:<40} ms={x['ms']} GB/s={x['gbps']} TFLOP/s={x['tflops']} "
                  f"{rate} {x['status']}")
    if "overhead" in result:
        print(f"  overhead (fp8 check, warm cache): {result['overhead']['wall_s']} s, "
              f"{result['overhead']['n_rows']} rows, status {result['overhead']['status']}; "
              f"phases {result['overhead']['info'].get('phase_s')}")
    print("total", result["total_s"], "s")
    return 0 if all(r.get("ok") for r in result["cases"]) else 1


if __name__ == "__main__":
    sys.exit(main())
