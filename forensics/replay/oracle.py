"""The reference side of a replay, all in this process: the deck's inputs, the reference models and
their outputs, the comparison with the problem's tolerances, and the shapes a replay runs.

`Oracle` wraps the problem's `ProblemSpec` (forensics/kernels) for one replay: which deck version,
which shapes (canonical, tiny, or the caller's), which seeds, which reference implementation, and
what it keeps between probes (the last inputs generated, memos the probe families ask for).
Nothing here talks to the child, and nothing of it is reachable from there."""

from __future__ import annotations

import copy
import gc
import json
from typing import Any, Iterable

import torch

from .record import Record
from .values import key_seed, shape_key, tensors


class Oracle:
    """The reference of one replay: inputs, reference outputs, comparisons."""

    MEMO_MAX = 16   # (shape, seed) input sets kept: a deck's whole check (<= 2 GiB prefetched)

    def __init__(self, spec: Any, rec: Record, device: str = "cpu", shapes: str = "canonical",
                 archive_date: str | None = None, ref_impl: str = "reference", seeds: Iterable[int] | None = None,
                 shape_list: list[dict] | None = None) -> None:
        self.spec = spec
        self.rec = rec
        self.device = device
        self.shapes_mode = shapes
        self.archive_date = archive_date
        self.ref_impl = ref_impl
        self.seeds = tuple(seeds) if seeds is not None else tuple(spec.seeds)
        #: the caller's check shapes (a CPU run of a solution that only takes some sizes)
        self.shape_list = [dict(s) for s in shape_list] if shape_list is not None else None
        self._inputs_memo: dict = {}   # (shape, seed) -> the deck's inputs, the last MEMO_MAX
        #: what probe families keep for the replay (`memo`); the names in _memo_keep survive `free`
        self._memos: dict[str, dict] = {}
        self._memo_keep: set[str] = set()

    # ---------------------------------------------------------------- shapes and inputs
    def check_shapes(self) -> list[dict]:
        if self.shape_list is not None:
            return [dict(s) for s in self.shape_list]
        if self.shapes_mode == "tiny":
            tiny = getattr(self.spec, "tiny_shapes", None)
            if tiny:
                return [dict(s) for s in tiny]
        return [dict(s) for s in self.spec.check_shapes]

    def bench_shapes(self) -> list[dict]:
        if self.shapes_mode == "tiny":
            return self.check_shapes()
        return [dict(s) for s in self.spec.shapes]

    def make_inputs(self, shape: dict, seed: int) -> list:
        """The deck's seeded inputs for (shape, seed), generated on the CPU as the deck does.  The
        last few are kept (the probes ask again for the check's first shape and seed); callers get
        clones, so nothing they do in place reaches the kept copy."""
        key = (shape_key(shape), seed)
        with self.rec.timed("inputs"):
            if key not in self._inputs_memo:
                self._inputs_memo[key] = self.spec.make_inputs(shape, seed, "cpu")
                while len(self._inputs_memo) > self.MEMO_MAX:
                    self._inputs_memo.pop(next(iter(self._inputs_memo)))
            return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in self._inputs_memo[key]]

    def prefetch(self) -> None:
        """Generate the check's inputs ahead (kept by make_inputs, up to MEMO_MAX sets and 2 GiB),
        while the child imports torch and the solution."""
        budget = 2 * 2**30
        for shape in self.check_shapes():
            for seed in self.seeds:
                if budget <= 0 or len(self._inputs_memo) >= self.MEMO_MAX:
                    return
                try:
                    xs = self.make_inputs(shape, seed)
                except Exception:  # noqa: BLE001 - the check itself reports a generator failure
                    return
                budget -= sum(t.numel() * t.element_size() for t in tensors(xs))

    def probe_shape(self, multi_row: bool = False) -> dict:
        """The first check shape; with multi_row, the first whose inputs have more than one row
        (so first row, last row and the rest are different regions)."""
        shapes = self.check_shapes()
        if multi_row:
            for sh in shapes:
                try:
                    x = self.make_inputs(sh, 0)
                except Exception:  # noqa: BLE001
                    continue
                t = next((t for t in x if isinstance(t, torch.Tensor) and t.is_floating_point()), None)
                if t is not None and t.dim() >= 2 and t.shape[0] > 1:
                    return sh
        return shapes[0]

    def stress_cases(self) -> list:
        cases = list(self.spec.stress_cases)
        since = getattr(self.spec, "stress_since", None)
        if since and self.archive_date and self.archive_date[:10] < since:
            cases = [c for c in cases if c.name == "nominal"]
            self.rec.out.info["stress_note"] = (f"numeric stress exists from {since}; archive dated "
                                                f"{self.archive_date[:10]}")
        return cases

    def init_args_spec(self, shape: dict) -> list:
        """Constructor args as the child sees them: JSON literals, or a call to `reference`."""
        args = self.spec.init_args(shape)
        try:
            json.dumps(args)
            return [{"lit": a} for a in args]
        except TypeError:
            return [{"call_ref": "get_init_inputs", "index": i} for i in range(len(args))]

    # ---------------------------------------------------------------- the reference
    def ref_model(self, shape: dict):
        with self.rec.timed("reference-model"):
            return self.spec.build_reference(shape, self.device)

    def check_reference(self, shape: dict, key: str):
        """The reference model of one check row, its weights drawn from a seed of its shape.

        check.py draws new random weights for every row; so did this, unseeded.  But a repeated
        shape's reference outputs are memoised (probes/check.py) and its slow solution model kept
        (REBUILD_SLOW_S), so the rows of one shape must share their weights: cuda 01's rows are
        T=256, 256, 1, 256, 256, 256, and the reference rebuilt for the fourth drew new weights
        while its outputs came from the first's (every later row compared against another model's
        output).  The global generators are restored after the draw."""
        devs = [torch.device(self.device).index or 0] if str(self.device).startswith("cuda") else []
        with torch.random.fork_rng(devices=devs):
            torch.manual_seed(key_seed(key))
            return self.ref_model(shape)

    def reference(self, model, inputs):
        with self.rec.timed("reference"):
            out = self._reference(model, inputs)
            if str(self.device).startswith("cuda"):
                torch.cuda.synchronize()
            return out

    def _reference(self, model, inputs):
        if self.ref_impl == "triton" and getattr(self.spec, "has_triton", False):
            return self.spec.triton_forward(model, inputs)
        if self.ref_impl == "oracle":
            return self.spec.oracle(model, inputs)
        return self.spec.reference_forward(model, inputs)

    # ---------------------------------------------------------------- comparison
    @staticmethod
    def _subclass_out(out: Any) -> bool:
        return any(isinstance(o, dict) and ("__subclass__" in o or "__opaque__" in o)
                   for o in (out if isinstance(out, (list, tuple)) else [out]))

    def compare(self, ref_out, sol_out, case="nominal", inputs=None) -> dict:
        if self._subclass_out(sol_out):
            return {"ok": False, "msg": f"solution returned a non-Tensor object: {sol_out!r}"[:300]}
        with self.rec.timed("compare"):
            return self.spec.compare(ref_out, sol_out, case=case, inputs=inputs)

    def check_compare(self, ref_model, inputs, ref_out, sol_out, case: str = "nominal", where: str = "") -> dict:
        """The check's comparison, with the deck's literal call as the arbiter of our faster reference.

        Mechanism: where the spec's reference is a faster formulation of the deck's call (`deck_fn`
        and `reference_fn` both set: the fused Triton megaqwen step on a GPU), a solution that fails
        against it is compared again with the deck's own call on the same model and inputs
        (`spec.deck_forward`).  Agreeing with the deck's call, it passes: the fast reference was the
        one off, and `replay-reference-disagrees` records both comparisons (the deck's check passed
        a run ours failed on the H200, BENCHMARKS.md round 4).  Look-alike kept as a failure: a
        solution that disagrees with the deck's call too; the result says so (`deck_reference`)."""
        res = self.compare(ref_out, sol_out, case=case, inputs=inputs)
        if res.get("ok") or self.spec.deck_fn is None or self.spec.reference_fn is None:
            return res
        try:
            with self.rec.timed("deck-reference"):
                deck_out = self.spec.deck_forward(ref_model, inputs)
        except Exception as e:  # noqa: BLE001 - the deck's call failing leaves our comparison as it is
            return dict(res, deck_reference=f"error: {type(e).__name__}: {e}"[:300])
        res2 = self.compare(deck_out, sol_out, case=case, inputs=inputs)
        if not res2.get("ok"):
            return dict(res, msg=f"{res.get('msg', '')} (against the deck's own call too)",
                        deck_reference="fails too: " + str(res2.get("msg", ""))[:300])
        self.rec.finding("replay-reference-disagrees",
                         f"{where or case}: the solution fails against the bundled fast reference "
                         f"({str(res.get('msg', ''))[:200]}) and passes against the deck's own call",
                         {"fast_reference": {k: res.get(k) for k in ("msg", "max_abs", "n_bad")},
                          "deck_reference": {k: res2.get(k) for k in ("msg", "max_abs", "n_bad")}})
        return dict(res2, reference="deck", msg=f"judged against the deck's own call: the bundled fast reference "
                    f"disagreed ({str(res.get('msg', ''))[:300]})")

    # ---------------------------------------------------------------- what is kept
    def memo(self, name: str, keep: bool = False) -> dict:
        """A dict kept for the replay under `name` (dropped by `free` unless `keep`)."""
        if keep:
            self._memo_keep.add(name)
        return self._memos.setdefault(name, {})

    def free(self) -> None:
        """Drop the kept inputs and the memos not marked to keep."""
        self._inputs_memo.clear()
        for k in [k for k in self._memos if k not in self._memo_keep]:
            del self._memos[k]
        gc.collect()
