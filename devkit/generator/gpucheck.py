"""Check on a GPU that the fixture's solutions behave as their labels say.

    python3 devkit/generator/gpucheck.py corpus/fixtures [--out report.json] [--shapes 2] [--only NAME]

For every run of the labeled archive whose final solution is a plain `Model.forward` problem
(hard 01-07, cuda 01/02, cuda 04's policy), the solution is imported from a scratch copy and
compared with the bundled reference (`forensics.kernels.registry`) on the deck's check shapes, seed 42,
nominal and every numeric-stress case.  A run labelled correct (or failing only for a reason
that is not numeric: a forbidden-op grep, a mutated template) must pass; a run labelled with a
numeric or build defect must fail.  The pointer-keyed caches are not probed here (that is the
replay's job); this only guards the fixture against labels that a GPU would contradict.

Runs by path with no package import beyond `kernels` and torch, so it works on a bare GPU box.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

# Run by path (no package around it), it finds `kernels` in the checkout itself: the one
# checkout-relative path of the devkit not taken from devkit/paths.py, which it cannot import yet.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# defects that make the final source numerically wrong or unbuildable (replay must fail)
FAILING = {"shfl_lane_bug", "cuda_compile_error", "nonportable_include", "grid_sync_race", "bf16_scores_precision"}
SKIP_PROBLEMS = {"03_megaqwen_decode", "02_kimi_linear_decode"}  # stateful APIs: the replay's job


def expected_ok(lab: dict) -> bool | None:
    d = set(lab["defects"])
    if d & FAILING:
        return False
    if lab["result"].get("correct") or lab["expected"].get("correct"):
        return True
    if d & {"forbidden_op", "template_mutation"}:
        return True  # numerically fine; failed for a non-numeric reason
    return None  # nothing to assert


def load_solution(path: Path, tag: str):
    d = Path(tempfile.mkdtemp(prefix="sol_"))
    shutil.copy(path, d / "solution.py")
    spec = importlib.util.spec_from_file_location(f"solution_{tag}", d / "solution.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_run(lab: dict, run_dir: Path, n_shapes: int, device: str = "cuda") -> dict:
    import torch

    from forensics.kernels import registry

    sol_path = run_dir / "solution.py"
    if not sol_path.exists():
        sol_path = run_dir / "repo" / "problems" / lab["problem"] / "solution.py"
    spec = registry.get(lab["problem"], deck_version=lab["run_id"][:4] + "-" + lab["run_id"][4:6] + "-" + lab["run_id"][6:8])
    out = {"run_id": lab["run_id"], "scenario": lab["scenario"], "problem": lab["problem"], "cases": []}
    t0 = time.time()
    try:
        mod = load_solution(sol_path, lab["scenario"])
    except Exception as e:  # noqa: BLE001 - a broken solution is a result
        out.update(ok=False, error=f"import: {type(e).__name__}: {str(e)[:300]}")
        return out
    ok = True
    try:
        shapes = spec.check_shapes[:n_shapes]
        for si, shape in enumerate(shapes):
            if lab["problem"] == "04_grid_mingru_sps" and shape.get("part") not in (None, "policy_forward"):
                continue
            ref = spec.build_reference(shape, device)
            sol = mod.Model(*spec.init_args(shape)).to(device).eval()
            sol.load_state_dict(ref.state_dict(), strict=True)
            inputs = spec.make_inputs(shape, seed=42, device=device)
            for case in spec.stress_cases:
                with spec.apply_stress(ref, sol, inputs, case) as x:
                    want = spec.reference_forward(ref, x)
                    with torch.no_grad():
                        got = sol(*x)
                    if device == "cuda":
                        torch.cuda.synchronize()
                    r = spec.compare(want, got, case=case, inputs=x)
                out["cases"].append({"shape": si, "case": case.name, "ok": bool(r["ok"]), "msg": r["msg"][:200]})
                ok = ok and bool(r["ok"])
        if lab["problem"] == "04_grid_mingru_sps" and hasattr(mod, "run"):
            ref_mod = spec.reference_module()
            refm = spec.build_reference({}, device)
            solm = mod.Model().to(device)
            solm.load_state_dict(refm.state_dict(), strict=True)
            a = ref_mod.run(128, 8, 42, model=refm)
            b = mod.run(128, 8, 42, model=solm)
            same = bool(torch.equal(a["positions"].cpu(), b["positions"].cpu()))
            out["cases"].append({"shape": "run(128,8,42)", "case": "positions", "ok": same, "msg": ""})
            ok = ok and same
    except Exception as e:  # noqa: BLE001
        ok = False
        out["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        out["traceback"] = traceback.format_exc()[-1500:]
    out["ok"] = ok
    out["seconds"] = round(time.time() - t0, 2)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fixture", type=Path, help="folder holding archive/ and labels.json")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--shapes", type=int, default=2)
    ap.add_argument("--only", action="append")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)
    labels = json.loads((a.fixture / "labels.json").read_text())["runs"]
    report, disagree = [], 0
    for key, lab in sorted(labels.items()):
        if a.only and lab["scenario"] not in a.only:
            continue
        if lab["bench"] not in ("hard", "cuda") or lab["problem"] in SKIP_PROBLEMS or lab["final_sha256"] is None:
            continue
        want = expected_ok(lab)
        if want is None:
            continue
        r = check_run(lab, a.fixture / "archive" / lab["path"], a.shapes, a.device)
        r["expected_ok"] = want
        r["agrees"] = r["ok"] == want
        disagree += not r["agrees"]
        report.append(r)
        print(f"{'OK ' if r['agrees'] else 'BAD'} {lab['scenario']:36} want={want} got={r['ok']} "
              f"{r.get('error', '')[:160]} ({r.get('seconds')}s)", flush=True)
    if a.out:
        a.out.write_text(json.dumps(report, indent=1))
    print(f"{len(report)} runs checked, {disagree} disagree with their labels")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
