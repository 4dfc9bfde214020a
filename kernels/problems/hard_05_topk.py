"""hard/05_topk_bitonic (B4)."""
from __future__ import annotations

import torch

from ..common import check_tensor, merge_results, _result
from forensics import problems

from ..registry import PropertyCase, ProblemSpec
from ._util import cases, lazy_triton, stress


def oracle(model, inputs):
    """Stable descending sort, first k (ties -> lowest index), fp64 values."""
    (x,) = inputs
    vals, idx = torch.sort(x.double(), dim=-1, descending=True, stable=True)
    return vals[:, : model.k].float(), idx[:, : model.k]


def compare_topk(spec, ref_out, sol_out, case, inputs):
    """Hard 05 check.py: 2-tuple/list; both (batch,k); values positional under A1 (fp32 1e-4 or the
    case's); indices (as int64) in [0,n); gather(x, idx) matches the reference values.  Property
    cases additionally need indices dtype int64, exact tensor types and no duplicates per row."""
    if inputs is None:
        raise ValueError("topk compare needs inputs (the gather check)")
    x = inputs[0]
    ref_v = ref_out[0]
    if not isinstance(sol_out, (tuple, list)) or len(sol_out) != 2:
        return _result(False, f"output must be a 2-tuple/list, got {type(sol_out).__name__}")
    sv, si = sol_out
    atol, rtol = spec.tolerance_for(ref_v.dtype, case)
    want = tuple(ref_v.shape)
    for name, t in (("values", sv), ("indices", si)):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != want:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            return _result(False, f"{name}: expected shape {want}, got {got}", atol=atol, rtol=rtol)
    parts = {"values": check_tensor(ref_v, sv, atol, rtol, "values")}
    idx = si.long().to(x.device)
    n = x.shape[-1]
    out_of_range = (idx < 0) | (idx >= n)
    if bool(out_of_range.any()):
        parts["indices"] = _result(False, f"indices: {int(out_of_range.sum())} out of [0,{n})",
                                   n_bad=int(out_of_range.sum()), n_total=idx.numel(), atol=atol, rtol=rtol)
    else:
        parts["gather"] = check_tensor(ref_v, torch.gather(x, -1, idx).to(sv.dtype), atol, rtol, "gather(x, indices)")
        srt = idx.sort(dim=-1).values
        dups = int((srt[:, 1:] == srt[:, :-1]).sum()) if idx.shape[-1] > 1 else 0
        strict = isinstance(case, PropertyCase)
        if strict:
            bad_types = [nm for nm, t in (("values", sv), ("indices", si)) if type(t) is not torch.Tensor]
            ok = dups == 0 and si.dtype == torch.int64 and not bad_types and sv.dtype == ref_v.dtype \
                and sv.device == ref_v.device
            parts["property"] = _result(ok, f"property: duplicates={dups} indices dtype={si.dtype} "
                                            f"values dtype={sv.dtype} subclass={bad_types}",
                                        n_bad=dups, n_total=idx.numel())
    res = merge_results(parts)
    res["duplicate_indices"] = None if "gather" not in parts else dups
    res["indices_dtype"] = str(si.dtype)
    return res


def cluster_mutate(spec, shape, inputs, partition=3, offset=17, extra_values=8, baseline_quarters=4):
    (x,) = inputs
    k = shape["k"]
    baseline = baseline_quarters / 4.0
    count = k + extra_values
    x = torch.full_like(x, baseline)
    start = partition * 1024 + offset % (1024 - count + 1)
    x[:, start:start + count] = torch.linspace(baseline + 1.0, baseline + 0.25, count)
    return [x]


CANONICAL = dict(partition=3, offset=17, extra_values=8, baseline_quarters=4)

SPECS = [ProblemSpec(
    entry=problems.get("05_topk_bitonic", "2026-06-12"),
    regime="memory", peak_key="fp32", global_names=("batch", "n", "k"),
    stress_cases=cases(stress("tiny_values", 1e-7, 1e-4, inputs=(0,), scale=1e-4, dtype_key="float32"),
                       stress("large_values", 1e-1, 1e-4, inputs=(0,), scale=1e3, dtype_key="float32")),
    flops_expr="batch*n*4", bytes_expr="batch*n*4 + batch*k*(4+8)",
    interface=dict(init="Model(batch, n, k)", forward="forward(x fp32 (batch,n)) -> (values fp32 (batch,k) "
                   "descending, indices int64 (batch,k))",
                   state_dict={"_dummy": dict(kind="buffer", dtype="float32", shape="(1,)", persistent=True)},
                   module_helpers=["Model", "get_inputs", "get_init_inputs", "batch", "n", "k"],
                   import_reference_allowed=True),
    oracle_fn=oracle, triton_fn=lazy_triton("topk"), compare_fn=compare_topk,
    property_cases=[PropertyCase("topk_cluster_canonical", 0, CANONICAL,
                                 lambda spec, shape, inp: cluster_mutate(spec, shape, inp, **CANONICAL), 1e-4, 1e-4)],
    property_since="2026-08-07", stress_since="2026-06-02",
    notes=["compare(..., inputs=...) is required: the gather check reads the (stressed) input.",
           "The main check does not test the index dtype; property cases do (int64, no duplicates)."],
)]
