"""Text of check.log / benchmark.log / in-session check output (spec sections 6 and 7)."""

from __future__ import annotations

import math
from datetime import datetime, timezone

from .decks import Problem

UV_NOISE = ("Using CPython 3.11.15\nCreating virtual environment at: {venv}\n"
            "Installed 57 packages in 110ms\n")
NINJA_NOISE = ("[1/3] /usr/local/cuda-13/bin/nvcc --generate-dependencies-with-compile -DTORCH_EXTENSION_NAME={ext} "
               "-O3 --use_fast_math -gencode=arch=compute_{arch},code={sm} -c cuda.cu -o cuda.cuda.o\n"
               "[2/3] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME={ext} -O3 -c main.cpp -o main.o\n"
               "[3/3] c++ main.o cuda.cuda.o -shared -L/usr/local/cuda-13/lib64 -lcudart -o {ext}.so\n")


def shape_str(shape: dict) -> str:
    return "{" + ", ".join(f"'{k}': {v}" for k, v in shape.items()) + "}"


def fail_tolerance(p: Problem, shape_idx=0, seed=None, case="nominal", bad=3708, total=16777216,
                   max_abs=11.7578, era="E4") -> str:
    seed = p.seeds[0] if seed is None else seed
    atol = next(iter(p.tolerance.values()))
    msg = (f"tolerance exceeded: max_abs_diff={max_abs:g} max_rel_diff={max_abs * 3.1:g} bad={bad}/{total} "
           f"worst_idx=(0, 17) (atol={atol}, rtol={atol})")
    if era == "E0":
        return f"FAIL: shape {shape_idx} {shape_str(p.shapes[shape_idx])} seed {seed}: max_abs_diff={max_abs:g} (atol={atol}, rtol={atol})"
    return f"FAIL: shape {shape_idx} {shape_str(p.shapes[shape_idx])} seed {seed} case {case}: {msg}"


def check_text(p: Problem, outcome: str, *, era: str, fail_line: str | None = None, noise: str = "",
               framework: str = "triton", cuda_evidence: tuple[str, ...] = ("load_inline", "global_kernel")) -> str:
    """The combined output of check.py: noise, optional PROPERTY_SEED / cuda_language line, PASS or a FAIL line."""
    out = [noise.rstrip("\n")] if noise else []
    if era == "E5" and p.property_suite:
        out.append("PROPERTY_SEED: 14862740297143410563")
    if p.bench == "cuda" and outcome != "BUILD_FAIL":
        ev = ",".join(cuda_evidence) or "none"
        out.append(f"cuda_language: ok framework={framework} evidence={ev}")
    if p.bench == "mega" and outcome == "PASS":
        for s in p.seeds:
            for ctx in (2048, 8192):
                out.append(f"seed {s} ctx {ctx}: out=0.99{(s * 7 + ctx) % 90 + 10:02d} S=0.9999 cache=1.0000 OK")
    if outcome == "PASS":
        out.append("PASS")
    elif outcome in ("FAIL", "BUILD_FAIL"):
        out.append(fail_line or fail_tolerance(p, era=era))
    # TIMEOUT: no verdict line at all
    return "\n".join(x for x in out if x) + "\n"


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(max(x, 1e-9)) for x in xs) / len(xs))


def _normalize(fr: list[float], target: float) -> list[float]:
    """Scale per-shape fractions so the geomean of their 4dp roundings prints as round(target, 4)."""
    gm = _geomean(fr)
    out = [max(1e-4, round(x * target / gm, 4)) for x in fr]
    want = round(target, 4)
    for _ in range(200):
        got = round(_geomean(out), 4)
        if got == want:
            break
        step = 0.0001 if got < want else -0.0001
        i = max(range(len(out)), key=lambda j: out[j])
        out[i] = round(max(1e-4, out[i] + step * len(out)), 4)
    return out


def benchmark_text(p: Problem, *, era: str, target: float, rng, t0: float, baselines: bool = False
                   ) -> tuple[str, float, list[float]]:
    """benchmark.py output; returns (text, peak_fraction as printed (4dp), per-shape fractions)."""
    lines: list[str] = []
    fr = [max(1e-4, target * math.exp(rng.gauss(0, 0.35))) for _ in p.shapes]
    t = t0
    if p.bench == "mega":
        sp = [round(x, 2) for x in _normalize([max(0.05, target * math.exp(rng.gauss(0, 0.15))) for _ in p.shapes], target)]
        for sh, x in zip(p.shapes, sp):
            base = rng.uniform(4.0, 9.0)
            sol = base / x
            lines.append(f"shape ctx={sh['ctx']}: solution {sol:.3f} ms/tok ({int(1000 / sol)} tok/s) | "
                         f"baseline {base:.3f} ms/tok | speedup {x:.2f}x")
        pf = round(_geomean([round(x, 2) for x in sp]), 4)
        lines += [f"peak_fraction: {pf:.4f}", "RESULT: OK" if pf >= 1.0 else "RESULT: LOW"]
        return "\n".join(lines) + "\n", pf, sp
    fr = _normalize(fr, target)
    for i, (sh, f) in enumerate(zip(p.shapes, fr)):
        ms = rng.uniform(0.015, 3.0)
        if p.regime == "toks":
            tok = f * 50000
            lines.append(f"shape={i} variant=solution ctx_len={sh['ctx_len']} decode_steps={sh['decode_steps']} "
                         f"tok_s={tok:.1f} decode_wall_s={sh['decode_steps'] / tok:.4f} prefill_wall_s={rng.uniform(1, 60):.3f} "
                         f"peak_fraction={f:.4f}")
            continue
        if p.regime == "sps":
            sps = f * 1.5e8
            lines.append(f"shape={i} variant=solution num_envs={sh['num_envs']} horizon={sh['horizon']} sps={sps:.1f} "
                         f"wall_s={sh['num_envs'] * sh['horizon'] / sps:.4f} peak_fraction={f:.4f}")
            continue
        if era == "E0":
            for v in ("eager", "compiled"):
                vm = ms * rng.uniform(1.2, 4.0)
                lines.append(f"shape={i} variant={v} tflops={rng.uniform(5, 200):.3f} gbps={rng.uniform(100, 1500):.3f} ms={vm:.3f}")
        else:
            ts = datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")
            lines.append(f"benchmark_event event=variant_start shape={i} variant=solution ts={ts}")
            el = rng.uniform(0.4, 3.0)
            t += el
            ts2 = datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")
            lines.append(f"benchmark_event event=variant_end shape={i} variant=solution ts={ts2} elapsed_s={el:.3f} ms={ms:.6f}")
        lines.append(f"shape={i} variant=solution tflops={rng.uniform(5, 400):.3f} gbps={rng.uniform(100, 1700):.3f} ms={ms:.3f}")
        if baselines:
            for v in ("eager", "compiled"):
                lines.append(f"shape={i} variant={v} tflops={rng.uniform(5, 200):.3f} gbps={rng.uniform(100, 1500):.3f} "
                             f"ms={ms * rng.uniform(1.2, 4):.3f}")
            lines.append("  [sota unavailable] sota_available() returned False")
        lines.append(f"shape={i} solution_peak_fraction={f:.4f}")
    pf = round(_geomean(fr), 4)
    thr = 0.1 if p.bench == "hard" else 0.001
    lines += [f"peak_fraction: {pf:.4f}", "RESULT: OK" if pf >= thr else "RESULT: LOW"]
    return "\n".join(lines) + "\n", pf, fr


def benchmark_failed_text(p: Problem, *, era: str, rng, t0: float, fail_shape: int, exc: str) -> str:
    """A benchmark that produced some shapes and then died (no peak_fraction line unless mega)."""
    lines = []
    t = t0
    for i in range(fail_shape):
        ts = datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")
        ms = rng.uniform(0.05, 2)
        lines.append(f"benchmark_event event=variant_start shape={i} variant=solution ts={ts}")
        lines.append(f"benchmark_event event=variant_end shape={i} variant=solution ts={ts} elapsed_s=1.021 ms={ms:.6f}")
        lines.append(f"shape={i} variant=solution tflops={rng.uniform(5, 300):.3f} gbps={rng.uniform(100, 1500):.3f} ms={ms:.3f}")
        lines.append(f"shape={i} solution_peak_fraction={rng.uniform(0.01, 0.3):.4f}")
    ts = datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")
    lines.append(f"benchmark_event event=variant_start shape={fail_shape} variant=solution ts={ts}")
    lines.append(f"benchmark_event event=variant_error shape={fail_shape} variant=solution ts={ts} error=RuntimeError")
    lines += ["Traceback (most recent call last):", '  File "benchmark.py", line 41, in main',
              "    flush_l2()", '  File "src/eval/timing.py", line 22, in flush_l2',
              "    _scratch.zero_()", f"RuntimeError: {exc}"]
    return "\n".join(lines) + "\n"
