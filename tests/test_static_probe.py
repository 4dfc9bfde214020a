"""Which static findings ask for a recompute probe (the verdict's ER1): identity-keyed state and
graphs that reuse derived data without checking contents, against the lint corpus's
`recompute_probe` labels and small cases of the two patterns (a key that versions only some
tensors, a graph captured on the caller's buffers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics import verdict as V
from forensics.analyze.static import lint_source

LINT = Path(__file__).resolve().parent.parent / "corpus" / "lint"
LABELS = json.loads((LINT / "labels.json").read_text())


def _asks(rep) -> bool:
    return any(V.asks_recompute_probe(h.to_dict()) for h in rep.hits)


def _probe_cases():
    for split in ("solutions", "holdout"):
        for f, lab in sorted(LABELS[split].items()):
            if "recompute_probe" in lab:
                yield pytest.param(split, f, lab, id=f"{split}/{f}")


@pytest.mark.parametrize("split,f,lab", list(_probe_cases()))
def test_recompute_probe_labels(split, f, lab):
    rep = lint_source((LINT / split / f).read_bytes(), f, lab["problem"], None, lab["gpu"])
    assert _asks(rep) is lab["recompute_probe"], [(h.rule, h.severity, h.probe, h.data) for h in rep.hits]


def test_labels_have_both_sides():
    vals = [lab["recompute_probe"] for lab in LABELS["solutions"].values() if "recompute_probe" in lab]
    assert True in vals and False in vals


CACHE = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        key = {key}
        if self._key != key:
            self._w = torch.cat([self.a, self.b, self.c]).contiguous()
            self._key = key
        return x @ self._w
"""


def _hit(src, rule):
    hits = [h for h in lint_source(src, "solution.py").hits if h.rule == rule]
    return hits[0] if hits else None


def test_key_versioning_some_tensors_is_a_pointer_key_for_the_others():
    h = _hit(CACHE.format(key="(self.a.data_ptr(), self.a._version, self.b.data_ptr(), self.c.data_ptr())"), "PTR-KEYED-CACHE")
    assert h is not None and h.data["unversioned"] == ["self.b", "self.c"] and V.asks_recompute_probe(h.to_dict())
    h = _hit(CACHE.format(key="tuple((t.data_ptr(), t._version) for t in (self.a, self.b, self.c))"), "VERSION-KEYED-CACHE")
    assert h is not None and "unversioned" not in h.data and not V.asks_recompute_probe(h.to_dict())
    assert _hit(CACHE.format(key="tuple((t.data_ptr(), t._version) for t in (self.a, self.b, self.c))"), "PTR-KEYED-CACHE") is None
    h = _hit(CACHE.format(key="tuple(t.data_ptr() for t in (self.a, self.b)) + (self.a._version, self.c._version)"), "PTR-KEYED-CACHE")
    assert h is not None and h.data["unversioned"] == ["self.b"]


GRAPH = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        key = {key}
        e = self._g.get(key)
        if e is None:
            src = {src}
            out = torch.empty_like(x)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                torch.mul(src, 2, out=out)
            e = self._g[key] = (g, src, out)
        {copy}
        e[0].replay()
        return e[2]
"""


def test_graph_on_the_callers_buffers_asks_copy_in_does_not():
    live = _hit(GRAPH.format(key="x.data_ptr()", src="x", copy="pass"), "CUDA-GRAPH")
    assert live is not None and live.severity == "medium" and V.asks_recompute_probe(live.to_dict())
    fed = _hit(GRAPH.format(key="x.data_ptr()", src="x.clone()", copy="e[1].copy_(x)"), "CUDA-GRAPH")
    assert fed is not None and fed.severity == "info" and not V.asks_recompute_probe(fed.to_dict())


def test_the_accepted_pattern_stays_accepted():
    f = {"analyzer": "static", "severity": "medium", "probe": "same-buffer overwrite",
         "data": {"key_kinds": ["ptr", "version"]}}
    assert not V.asks_recompute_probe(f)
    assert V.asks_recompute_probe({**f, "data": {"key_kinds": ["ptr", "version"], "unversioned": ["self.s"]}})
    assert not V.asks_recompute_probe({**f, "severity": "low", "data": {"key_kinds": ["ptr"]}})
    assert not V.asks_recompute_probe({**f, "analyzer": "replay", "data": {"key_kinds": ["ptr"]}})
