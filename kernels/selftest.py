"""CPU self-test of the Triton references against their oracles on tiny shapes.

    TRITON_INTERPRET=1 python -m forensics.kernels.selftest [--problems P ...] [--json]

Runs every Triton reference under the Triton interpreter on CPU tensors (`run` sets the
environment variable before it imports any kernel module; importing this module for its tiny
shapes sets nothing, so a GPU process that does keeps compiled kernels) and compares it with the
oracle and with the deck reference, nominal, under every stress case, and on the property cases
(with the property shape replaced by a tiny one).  A perturbed copy of the Triton output is also compared,
as a negative control: it must FAIL, so a comparison that cannot fail is caught.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import torch

from . import registry

#: tiny shapes per problem (module-global names as keys); property cases run on these too
TINY: dict[str, dict] = {
    "01_fp8_gemm": dict(M=20, N=48, K=72),
    "02_kda_cutlass": dict(B=1, T=256, H=2, K=16, V=16, CHUNK_SIZE=64),
    "03_paged_attention": dict(BATCH=3, NUM_HEADS=8, NUM_KV_HEADS=2, HEAD_DIM=16, SEQ_LEN=45, PAGE_SIZE=16),
    "05_topk_bitonic": dict(batch=3, n=4200, k=8),
    "06_sonic_moe_swiglu": dict(T_total=40, H=32, I=24, E=4, K=2),
    "07_w4a16_gemm": dict(M=5, N=40, K=256),
    "01_glm52_fused_moe": dict(T=6, E=16, top_k=8, n_shared=1, H=32, I=16),
    "02_deepseek_nsa": dict(B=1, H=2, S=640, D=16),
    "03_megaqwen_decode": dict(ctx_len=1, n_decode=1),
    "04_grid_mingru_sps": dict(num_envs=40),
    "02_kimi_linear_decode": dict(ctx=24, steps=1, n_experts=8),
}

#: parameters scaled up so tiny shapes give O(1) outputs (a tolerance of 0.02 then means something)
AMPLIFY = {"06_sonic_moe_swiglu": 12.0, "01_glm52_fused_moe": 8.0, "04_grid_mingru_sps": 5.0}


KIMI_TINY_CFG = dict(hidden=256, kda_heads=2, kda_head_dim=64, mla_heads=2, kv_lora=128, qk_nope=32, qk_rope=16,
                     v_head=64, n_experts=8, n_active=2, moe_inter=128)


def tiny_model(spec, shape):
    if spec.name == "02_kimi_linear_decode":      # the full config is GBs: a tiny Config, same code
        mod = spec.reference_module()
        return mod.Model(mod.Config(**KIMI_TINY_CFG)).eval()
    model = spec.build_reference(shape, "cpu")
    amp = AMPLIFY.get(spec.name)
    if amp:
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(amp)
    return model


def _out_dtype(ref):
    if isinstance(ref, dict) or (isinstance(ref, tuple) and len(ref) == 2 and isinstance(ref[1], list)):
        return None
    if isinstance(ref, (tuple, list)):
        return ref[0].dtype
    return ref.dtype


def _perturb(out):
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], list):    # Kimi (hidden, state)
        return (-out[0], out[1])
    if isinstance(out, dict):
        return {k: _perturb(v) for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        v = out[0].clone()
        v.view(-1)[0] += 1.0 + v.view(-1)[0].abs()
        return (v, *out[1:])
    o = out.clone()
    flat = o.view(-1)
    flat[flat.numel() // 2] = (flat[flat.numel() // 2].float() + 1.0 + flat.float().abs().max()).to(o.dtype)
    return o


def _summ(res):
    return {k: res.get(k) for k in ("ok", "max_abs", "max_rel", "n_bad", "n_total", "worst_index", "atol", "rtol", "msg")}


def check_problem(name: str, deck_version: str | None = None) -> dict:
    spec = registry.get(name, deck_version)
    out = dict(problem=spec.name, deck_version=spec.deck_version, cases=[], ok=True)
    if not spec.has_triton:
        out.update(skipped="no Triton reference")
        return out
    shape = TINY[spec.name]
    model = tiny_model(spec, shape)
    if spec.name == "02_kimi_linear_decode":
        from .problems.mega_02_kimi import make_inputs as kimi_inputs
        inputs = kimi_inputs(spec, shape, 0, "cpu", cfg=model.cfg)
    else:
        inputs = spec.make_inputs(shape, 42)
    runs = [(c.name, c, inputs) for c in spec.stress_cases]
    for pc in spec.property_cases:
        base = spec.make_inputs(shape, pc.base_seed)
        runs.append((pc.name, pc, pc.mutate(spec, shape, base)))
    for label, case, inp in runs:
        t0 = time.perf_counter()
        with spec.apply_stress(model, None, inp, case) if not hasattr(case, "mutate") else _null(inp) as x:
            tri = spec.triton_forward(model, x)
            dt = time.perf_counter() - t0
            ref = spec.reference_forward(model, x)
            orc = spec.oracle(model, x)
            dtype = _out_dtype(ref)
            vs_oracle = spec.compare(orc, tri, case=case, inputs=x, dtype=dtype)
            vs_ref = spec.compare(ref, tri, case=case, inputs=x)
            control = spec.compare(ref, _perturb(tri), case=case, inputs=x)
        row = dict(case=label, triton_s=round(dt, 3), vs_oracle=_summ(vs_oracle), vs_reference=_summ(vs_ref),
                   negative_control_failed=not control["ok"])
        if getattr(case, "expected", None) == "every output element exactly 1.0":
            row["property_exact_one"] = bool((tri.float() == 1.0).all())
        ok = vs_oracle["ok"] and vs_ref["ok"] and row["negative_control_failed"] and row.get("property_exact_one", True)
        row["ok"] = ok
        out["ok"] &= ok
        out["cases"].append(row)
    return out


class _null:
    def __init__(self, v):
        self.v = v

    def __enter__(self):
        return self.v

    def __exit__(self, *a):
        return False


def run(problems=None) -> list[dict]:
    os.environ.setdefault("TRITON_INTERPRET", "1")     # before check_problem imports forensics.kernels.triton
    results = []
    targets = []
    for name in problems or registry.names():
        for ver in registry.deck_versions(name):
            targets.append((name, ver))
    for name, ver in targets:
        try:
            results.append(check_problem(name, ver))
        except Exception as exc:  # noqa: BLE001 - one problem failing must not stop the others
            results.append(dict(problem=name, deck_version=ver, ok=False, error=f"{type(exc).__name__}: {exc}",
                                traceback=traceback.format_exc(limit=6)))
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="*")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    res = run(args.problems)
    if args.json:
        json.dump(res, sys.stdout, default=str)
    else:
        for r in res:
            status = "skip" if r.get("skipped") else ("ok" if r["ok"] else "FAIL")
            print(f"{r['problem']}@{r['deck_version']}: {status} {r.get('error', '')}")
            for c in r.get("cases", []):
                print(f"   {c['case']:<34} ok={c['ok']} oracle: {c['vs_oracle']['msg'][:90]}")
    return 0 if all(r["ok"] for r in res) else 1


if __name__ == "__main__":
    sys.exit(main())
