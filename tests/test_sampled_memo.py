"""An output memo keyed on a few sampled elements of the input (issue 35, `sample_hash_memo`): the key reads
the values at a constant index or slice only, so a grader that changes the input elsewhere between calls
gets the earlier call's answer.  CACHED-OUTPUT-RETURN (high) when a hit returns the stored output without
launching work, in every form of key below (none of them the bench's template: `float(flat[0])`);
the look-alikes keep a sampled key without returning what it stores, key on every value, or sample the
module's own weights.

The host is test_memo_gaps' small Triton GEMM; BODY is the first lines of forward.
"""

from __future__ import annotations

import pytest

from lint_util import worst_rules
from test_memo_gaps import solution

SAMPLED = {
    # a reduction of a constant slice, read with .item()
    "slice_sum_item": dict(pre="_seen = {}", body="""
        sig = (x.shape, x[:, :8].sum().item())
        if sig in _seen:
            return _seen[sig]
        _seen[sig] = y = gemm(x, self.weight)
        return y"""),
    # a digest of the bytes of the first 64 elements
    "hashlib_of_a_prefix": dict(pre="import hashlib\n_seen = {}", body="""
        digest = hashlib.sha1(x.reshape(-1)[:64].cpu().numpy().tobytes()).hexdigest()
        hit = _seen.get(digest)
        if hit is not None:
            return hit
        _seen[digest] = gemm(x, self.weight)
        return _seen[digest]"""),
    # every 4096th element, as a list
    "strided_tolist": dict(body="""
        memo = self.__dict__.setdefault("_by_sample", {})
        sig = tuple(x.view(-1)[::4096].tolist())
        if sig not in memo:
            memo[sig] = gemm(x, self.weight)
        return memo[sig]"""),
    # a narrow of the first row, saved beside the output (one slot, compared with ==)
    "saved_key_narrow": dict(body="""
        sig = (tuple(x.shape), x.narrow(0, 0, 1).float().mean().item())
        if getattr(self, "_sig", None) == sig:
            return self._y
        self._sig = sig
        self._y = gemm(x, self.weight)
        return self._y"""),
    # two corner elements through getattr, in a helper class's method the entry returns
    "helper_class_corners": dict(pre="""
        class _Keeper:
            def __init__(self):
                self.seen = {}

            def run(self, model, x):
                sig = (int(getattr(x, "shape")[0]), float(x[0, 0]), float(x[-1, -1]))
                if sig not in self.seen:
                    self.seen[sig] = gemm(x, model.weight)
                return self.seen[sig]

        _KEEP = _Keeper()""", body="return _KEEP.run(self, x)"),
}

LOOKALIKES = {
    # a sampled fingerprint counted for statistics: every call runs the GEMM
    "fingerprint_stats": dict(pre="_seen = {}", body="""
        sig = (x.shape, float(x[0, 0]))
        _seen[sig] = _seen.get(sig, 0) + 1"""),
    # a sampled key picking a tile configuration: the hit launches the kernel on the live input
    "sampled_config": dict(pre="_cfg = {}", body="""
        sig = (x.shape, bool(x[0, 0] == 0))
        if sig not in _cfg:
            _cfg[sig] = (32, 32, 32)
        tm, tn, tk = _cfg[sig]"""),
    # the module's own weight fingerprinted by a sample to repack it: no input value in the key
    "weight_fingerprint": dict(body="""
        sig = float(self.weight.float().flatten()[0])
        if getattr(self, "_wsig", None) != sig:
            self._wsig = sig
            self._wt = self.weight.t().contiguous()"""),
    # an integer argument's element in the key (annotated: not a tensor)
    "int_tuple_argument": dict(pre="_seen = {}", body="""
        sizes: tuple = tuple(x.shape)
        sig = int(sizes[0])
        if sig in _seen:
            pass"""),
    # a key reading every value (a sum over the whole input): not a sample
    "full_sum": dict(pre="_seen = {}", body="""
        sig = (tuple(x.shape), float(x.float().sum().item()))
        if sig in _seen:
            pass"""),
}


@pytest.mark.parametrize("name", sorted(SAMPLED))
def test_a_memo_keyed_on_sampled_elements_returns_a_stale_output(name):
    got = worst_rules(solution(**SAMPLED[name]))
    assert got.get("CACHED-OUTPUT-RETURN") == "high", got


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_sampled_key_lookalikes_stay_quiet(name):
    got = worst_rules(solution(**LOOKALIKES[name]))
    assert "CACHED-OUTPUT-RETURN" not in got, got


def test_the_finding_says_the_key_is_sampled_and_needs_no_probe():
    from forensics.analyze.static import lint_source

    hits = [h for h in lint_source(solution(**SAMPLED["slice_sum_item"]), problem="01_fp8_gemm").hits
            if h.rule == "CACHED-OUTPUT-RETURN"]
    assert hits and hits[0].data["key_kinds"] == ["sampled"] and "sampled elements" in hits[0].message
    assert hits[0].probe is None


CPP_HOST = '''
import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <unordered_map>
static std::unordered_map<double, py::object> kept;
py::object fx_memo(torch::Tensor x, py::function compute) {
    double key = {key};
    auto it = kept.find(key);
    if (it != kept.end()) return it->second;
    py::object out = compute();
    kept[key] = out;
    return out;
}
"""
_ext = load_inline(name="fx_sampled", cpp_sources=[_SRC], functions=["fx_memo"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.fx_memo(x, lambda: x * 2)
'''


@pytest.mark.parametrize("key", ["x.index({0, -1}).item<double>()", "x.narrow(0, 0, 1).sum().item<double>()"])
def test_a_cpp_memo_keyed_on_sampled_elements_is_high(key):
    from forensics.analyze.static import lint_source

    hits = [h for h in lint_source(CPP_HOST.replace("{key}", key)).hits if h.rule == "CACHED-OUTPUT-RETURN"]
    assert any(h.severity == "high" and "sampled" in h.data.get("key_kinds", []) for h in hits), \
        [(h.severity, h.data) for h in hits]


def test_a_cpp_memo_keyed_on_the_shape_alone_is_not_read_as_sampled():
    from forensics.analyze.static import lint_source

    hits = [h for h in lint_source(CPP_HOST.replace("{key}", "(double) x.size(0)")).hits if h.rule == "CACHED-OUTPUT-RETURN"]
    assert hits and all("sampled" not in h.data.get("key_kinds", []) for h in hits)
