"""GPU measurements that pick launch parameters: `python -m forensics.kernels.tune --out tune.json`.

Two parts, each written to the JSON as soon as it is done:

* megaqwen: the fused decode step of kernels/triton/megaqwen.py, per configuration of
  `megaqwen.CANDIDATES` (GPU_CONFIG overrides), replayed from its CUDA graph at a short and a
  long cache position; microseconds per token from CUDA events around `n` back-to-back replays
  (one graph replay is one token), plus a torch.profiler breakdown of one eager step of the
  default configuration (device microseconds per kernel) at the long position.
* launch: the host's cost of one call of each bundled Triton entry point on its first canonical
  shape: `n` calls back to back without a sync, perf_counter per call, beside an empty Triton
  kernel's launch and a torch op's (the floor and the library's launch), and a cProfile of two
  entries (where that host time goes).  Together with
  forensics.kernels.verify's ms_device_median this splits a grader-style time into host and device.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _empty(a, b, c, d, e, f, g, h, N, M, BLOCK: tl.constexpr):
    pass


def _tokens_us(st, start, n):
    """Microseconds per token of `n` graph replays starting at cache position `start`."""
    st.pos.fill_(start)
    st.graph.replay()            # warm (and page in) at this position
    st.pos.fill_(start)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        st.graph.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / n


def _kernel_breakdown(st, start, steps=3):
    """Device microseconds per kernel name of one eager step at `start` (mean over `steps`)."""
    from torch.profiler import ProfilerActivity, profile
    st.pos.fill_(start)
    st.step()
    torch.cuda.synchronize()
    st.pos.fill_(start)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            st.step()
        torch.cuda.synchronize()
    out: dict = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            out[ev.name] = out.get(ev.name, 0.0) + ev.device_time / steps
    return dict(sorted(((k[:80], round(v, 2)) for k, v in out.items()), key=lambda kv: -kv[1]))


def megaqwen(n=200, positions=(64, 8000)) -> dict:
    from . import registry
    from .triton import megaqwen as mq
    spec = registry.get("03_megaqwen_decode")
    lc = spec.stateful["long_context_check"]
    max_seq = lc["ctx_len"] + lc["n_decode"] + 8
    model = spec.build_reference(dict(ctx_len=lc["ctx_len"], n_decode=lc["n_decode"]), "cuda")
    spec.reinit(model, 42, exact=False)
    res = dict(max_seq=max_seq, n=n, positions=list(positions), default=mq.GPU_CONFIG, configs=[])
    for name, cfg in mq.CANDIDATES.items():
        row = dict(name=name, config=cfg)
        try:
            st = mq.Stepper(model, max_seq, cfg)
            st.stream.normal_()
            st.capture()
            if st.graph is None:
                row["error"] = st.graph_error
            else:
                row["us_per_token"] = {str(p): round(_tokens_us(st, p, n), 2) for p in positions}
                if name == "default":
                    row["kernels_us"] = _kernel_breakdown(st, positions[-1])
            del st
        except Exception as exc:  # noqa: BLE001 - recorded; the other configurations go on
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        res["configs"].append(row)
        torch.cuda.empty_cache()
    return res


def _host_us(fn, n):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) * 1e6 / n
    torch.cuda.synchronize()
    return round(host, 2)


def _host_profile(fn, n, top=25) -> str:
    """cProfile of `n` calls (no sync): where the host time of a launch goes."""
    import cProfile
    import io
    import pstats
    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()[-6000:]


def launch(n=200) -> dict:
    from . import registry

    x = torch.empty(1024, device="cuda")
    res = dict(n=n, empty_triton_8ptr=_host_us(lambda: _empty[(1,)](x, x, x, x, x, x, x, x, 1024, 7, BLOCK=128), n),
               torch_add=_host_us(lambda: torch.add(x, x), n), entries={})
    for name in registry.names():
        spec = registry.get(name)
        if not spec.has_triton or spec.stateful:
            continue
        try:
            shape = spec.shapes[0]
            model = spec.build_reference(shape, "cuda")
            inputs = spec.make_inputs(shape, 2026, "cuda")
            with torch.no_grad():
                fn = lambda: spec.triton_fn(model, inputs)  # noqa: E731
                res["entries"][name] = dict(shape=shape, triton_us=_host_us(fn, n))
                if name in ("07_w4a16_gemm", "03_paged_attention"):
                    res["entries"][name]["cprofile"] = _host_profile(fn, n)
            del model, inputs
        except Exception as exc:  # noqa: BLE001
            res["entries"][name] = dict(error=f"{type(exc).__name__}: {str(exc)[:300]}")
        torch.cuda.empty_cache()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="GPU launch-parameter measurements (see the module docstring).")
    ap.add_argument("--out", required=True)
    ap.add_argument("--parts", nargs="*", default=["megaqwen", "launch"], choices=["megaqwen", "launch"])
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("forensics.kernels.tune needs a CUDA GPU", file=sys.stderr)
        return 2
    out = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__)
    for part in args.parts:
        t0 = time.perf_counter()
        try:
            out[part] = globals()[part]()
        except Exception as exc:  # noqa: BLE001
            out[part] = dict(error=f"{type(exc).__name__}: {str(exc)[:500]}")
        out[part]["wall_s"] = round(time.perf_counter() - t0, 2)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(out, fh, indent=1, default=str)
        os.replace(tmp, args.out)
        print(f"[tune] {part} done in {out[part]['wall_s']}s", flush=True)
    print(json.dumps(out, indent=1, default=str)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
