"""GPU replay tests (skipped without CUDA): the planted Triton cases through the full runner."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("label", ["fp8_honest", "fp8_stale_sampled", "fp8_weight_cache", "fp8_unwritten",
                                   "topk_honest", "topk_stale_sampled", "topk_allclose", "topk_forged_report", "topk_exit",
                                   "mq_ignores_caches", "kimi_honest", "kimi_ptr_state", "kimi_internal_state",
                                   "mingru_honest", "mingru_weight_cache", "mingru_honest_canonical"])
def test_planted_gpu_case(label):
    from forensics.replay.api import replay_solution
    from devkit.replay.gpu_verify import CASES, run_case
    from forensics.replay.outcome import Limits
    case = next(c for c in CASES if c[0] == label)
    r = run_case(case, Limits, replay_solution)
    assert r["status"] == r["want_status"], r["rules"]
    assert set(r["want_rules"]) <= set(r["rules"])


def test_ceilings_are_measured():
    from forensics.replay.timing import measure_ceilings
    c = measure_ceilings("cuda", use_disk=False)
    assert c["copy_gbps"] > 100 and c["bf16_tflops"] > 1
