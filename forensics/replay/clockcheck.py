"""The clock cross-check (issue 36): nothing that judges may rest on a time measured only inside the
solution's process.  The timing probe runs it once per replay (forensics/replay/probes/timing.py,
`crosscheck`); this module holds its arithmetic (`choose`, `judge`, `loop_overhead_s`).

The child times the solution with clocks the solution's interpreter holds (perf_counter, CUDA events).
A solution that reaches the worker's clock (through gc or a frame: both audited, `replay-capability`)
can make every reported time 10x faster.  So the parent sends two timing requests whose iteration
counts it chooses, `n1` and `n2`, the same in every other respect, and measures each request's wall
time on its own clock (`Reply.elapsed_s`, time.monotonic in this process).  Everything but the extra
`n2 - n1` iterations is the same in both, so

    parent per iteration  P = (W2 - W1) / (n2 - n1)
    child per iteration   C = (S2 - S1) / (n2 - n1)     (S: the sum of the times the child reported)

and P = C + O, where O is the timing loop's own cost per iteration outside the timed window: on a GPU
the L2 flush, two synchronizes and two event records, measured here in the parent (trusted) with the
same flush size; on the CPU two perf_counter calls, also measured here.  The child's clock is judged
slow (`replay-clock-mismatch`, measurement, high) when

    P - O > RATIO * C    and    (P - O - C) * (n2 - n1) > MIN_EXCESS_S

i.e. its clock runs at less than half the real rate and the time it does not account for is more than
50 ms in all (above a loaded machine's scheduling noise).  One-time costs (a lazy build in the first
call) land in the first request's warm-up and only make P smaller.  `n2 - n1` is chosen from the
child's own first timing so that the extra iterations take TARGET_S by its account (a clock 10x slow
makes that 10x longer, bounded by MAX_ITERS and the timing limit).

What it also catches: work the timed window does not hold but the request's synchronizes wait for
(a side stream after the end event on a GPU).  What it cannot: a solution that is slow only when
not timed."""

from __future__ import annotations

import time


RATIO = 2.0
MIN_EXCESS_S = 0.05
TARGET_S = 0.3
MAX_ITERS = 4000
N1 = 2


def loop_overhead_s(cuda: bool, flush_bytes: int, device: str = "cuda", n: int = 20) -> float:
    """The timing loop's own cost per iteration outside its timed window, measured in this process."""
    if not cuda:
        pc = time.perf_counter
        t0 = pc()
        for _ in range(2000):
            a = pc()
            b = pc()
            del a, b
        return (pc() - t0) / 2000
    import torch
    buf = torch.empty(max(flush_bytes, 4) // 4, dtype=torch.float32, device=device)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        buf.zero_()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        e.record()
        torch.cuda.synchronize()
        s.elapsed_time(e)
    took = (time.perf_counter() - t0) / n
    del buf
    return took


def choose(child_per_iter_s: float, limit_s: float) -> tuple[int, int]:
    """(n1, n2): the extra iterations take TARGET_S by the child's account, within MAX_ITERS and a
    tenth of the request limit by the parent's worst case (RATIO x slower than claimed)."""
    per = max(child_per_iter_s, 1e-7)
    extra = int(TARGET_S / per)
    extra = min(extra, MAX_ITERS, max(1, int(limit_s / 10 / (RATIO * per))))
    return N1, N1 + max(extra, 8)


def judge(n: tuple[int, int], parent_s: tuple[float, float], child_s: tuple[float, float],
          overhead_s: float) -> dict:
    """The comparison (see the module docstring)."""
    dn = n[1] - n[0]
    p = (parent_s[1] - parent_s[0]) / dn
    c = (child_s[1] - child_s[0]) / dn
    net = p - overhead_s
    excess = (net - c) * dn
    slow = net > RATIO * max(c, 0.0) and excess > MIN_EXCESS_S
    return {"n": list(n), "parent_s": [round(x, 6) for x in parent_s], "child_s": [round(x, 6) for x in child_s],
            "parent_per_iter_ms": round(p * 1e3, 6), "child_per_iter_ms": round(c * 1e3, 6),
            "overhead_per_iter_ms": round(overhead_s * 1e3, 6), "unaccounted_s": round(excess, 6),
            "ratio": round(net / c, 3) if c > 0 else None, "mismatch": slow,
            "tolerance": {"ratio": RATIO, "min_unaccounted_s": MIN_EXCESS_S}}
