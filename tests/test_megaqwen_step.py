"""cuda 03 megaqwen: the fused decode step of kernels/triton/megaqwen.py (the GPU reference_run,
replayed from a CUDA graph there) run eagerly on the CPU under TRITON_INTERPRET=1 against the
deck's run and the fp64 oracle, and checked by structure to have no per-token host values."""
from __future__ import annotations

import ast
import inspect
import os
import textwrap

import pytest
import torch

os.environ.setdefault("TRITON_INTERPRET", "1")

from forensics.kernels import registry, verify  # noqa: E402

SPEC = registry.get("03_megaqwen_decode")
KERNELS = ("_norm_qkv_kernel", "_attn_split_kernel", "_attn_merge_kernel", "_gemv_residual_kernel",
           "_norm_gate_up_kernel")


def _model(seed, max_seq):
    model = SPEC.reference_module().Model(4, max_seq)
    return model.reset_parameters(seed)


def test_fused_step_matches_deck_and_oracle():
    from forensics.kernels.triton import megaqwen as mq
    ctx, dec, seed = 4, 2, 42
    model = _model(seed, ctx + dec + 8)
    st = mq.Stepper(model, ctx + dec)    # max_seq 6: splits of rows 0-3 (two tiles of 2) and 4-5, both reached
    assert (st.nsplit, st.per) == (2, 4)
    out = st.run(ctx, dec, seed, use_graph=False)
    deck = SPEC.deck_forward(model, [ctx, dec, seed])
    r = verify._vs_deck(SPEC, deck, out, [ctx, dec, seed])
    assert r["ok"], r["msg"]
    orc = SPEC.oracle(model, [ctx, dec, seed])["last_hidden"]
    assert SPEC.compare(orc, out, dtype=torch.bfloat16)["ok"]
    # as close to the fp64 oracle as the deck is (both ~1 bf16 ulp of drift), not merely within 0.08
    rel = lambda a: float((a["last_hidden"].float() - orc).norm() / orc.norm())  # noqa: E731
    assert rel(out) < max(2 * rel(deck), 5e-3), (rel(out), rel(deck))
    ref = SPEC.reference_module()
    _, kc, vc = ref.decode_steps(model, *ref.prefill(model, ctx, seed, max_seq=ctx + dec), ctx, dec, seed)
    for mine, theirs in ((st.kc, kc), (st.vc, vc)):   # every position written, at the right row
        for a, b in zip(mine, theirs):
            assert float((a.float() - b.float()).norm() / b.float().norm()) < 1e-2
    bad = {"last_hidden": out["last_hidden"].clone()}
    bad["last_hidden"][3] += 0.5
    assert not verify._vs_deck(SPEC, deck, bad, [ctx, dec, seed])["ok"]       # negative control
    # the GPU entry point on the CPU: eager, the reason recorded; a second run on the same state
    again = mq.graph_forward(model, [1, 0, seed])
    assert mq.LAST_PATH["path"] == "eager (no CUDA)"
    assert verify._vs_deck(SPEC, SPEC.deck_forward(model, [1, 0, seed]), again, None)["ok"]


class _Recorder:
    """Stands in for a Triton kernel: `k[grid](*args, **kw)` records the launch instead of running."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def __getitem__(self, grid):
        def launch(*args, **kw):
            key = lambda a: (a.data_ptr(), tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a  # noqa: E731
            self.log.append((self.name, tuple(grid), tuple(map(key, args)), tuple(sorted(kw.items()))))
        return launch


def test_step_launches_are_token_invariant_and_never_read_the_device(monkeypatch):
    """What makes the step capturable once and replayable per token: the same 24 launches with the
    same arguments at every position (the position lives in a device tensor), and no host read of
    a device value (item / tolist / cpu / bool / int / float) inside the step."""
    from forensics.kernels.triton import megaqwen as mq
    st = mq.Stepper(_model(0, 16), 16)
    log = []
    for name in KERNELS:
        monkeypatch.setattr(mq, name, _Recorder(name, log))

    def forbidden(*_a, **_k):
        raise AssertionError("host read of a device value inside the step")
    for attr in ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__"):
        monkeypatch.setattr(torch.Tensor, attr, forbidden)
    st.step()
    first = list(log)
    st.pos.fill_(9)
    log.clear()
    st.step()
    monkeypatch.undo()
    assert len(first) == 24 and log == first
    assert sum(1 for n, *_ in first if n == "_gemv_residual_kernel" and ("ADVANCE", True) in _[-1]) == 1
    # run(): the per-token loop body is a single tick (graph replay or step), nothing per token on the host
    tree = ast.parse(textwrap.dedent(inspect.getsource(mq.Stepper.run)))
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For) and "ctx + dec" in ast.unparse(n.iter)]
    assert len(loops) == 1 and [ast.unparse(s) for s in loops[0].body] == ["tick()"]


@pytest.mark.parametrize("max_seq", [6, 136, 264, 520, 8216])
@pytest.mark.parametrize("cpu", [True, False])
def test_split_sizing_covers_the_cache(max_seq, cpu):
    """Every cache row belongs to exactly one split, with the interpreter's and the GPU's sizing."""
    from forensics.kernels.triton import megaqwen as mq
    block_t, max_split, per, nsplit = mq.split_sizing(max_seq, cpu)
    assert per % block_t == 0 and nsplit <= max_split
    assert (nsplit - 1) * per < max_seq <= nsplit * per


def test_stream_drawn_in_one_call_equals_the_decks_per_token_draws():
    """Stepper.run draws each input stream with one randn(n, 1024) per generator; the deck draws
    randn(1024) per token from the same generator: the same numbers."""
    g1, g2 = torch.Generator().manual_seed(44), torch.Generator().manual_seed(44)
    per_token = torch.stack([torch.randn(1024, generator=g1) for _ in range(7)])
    assert torch.equal(per_token, torch.randn(7, 1024, generator=g2))
