"""The archived performance number set beside ours (issue 40 item 2): reproduced on the same GPU model,
flagged when ours falls short beyond the tolerance, shown only on another model."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from devkit.bench.real import benchmark_log  # noqa: E402
from forensics.replay.timing import NUMBER_TOLERANCE, confirm_number, parse_benchmark_log, reproduced_fraction  # noqa: E402

AM = {"gpu": "h100", "peak_fraction": 0.30,
      "shapes": [{"idx": 0, "ms": 0.10, "frac": 0.20, "tflops": 1.0, "gbps": 300.0},
                 {"idx": 1, "ms": 0.20, "frac": 0.45, "tflops": 2.0, "gbps": 600.0}]}
H100 = "NVIDIA H100 80GB HBM3"


class _Rp:
    def __init__(self):
        self.found = []

    def finding(self, rule, message, data, probe=None):
        self.found.append((rule, message, data))


def _archived():
    return {"gpu": H100, "peak_fraction": AM["peak_fraction"], "shapes": parse_benchmark_log(benchmark_log(AM))}


def test_the_archived_log_round_trips():
    shapes = parse_benchmark_log(benchmark_log(AM))
    assert shapes[0]["ms"] == 0.10 and shapes[1]["peak_fraction"] == 0.45


def test_a_fraction_scales_with_one_over_time():
    f, per = reproduced_fraction(_archived()["shapes"], {0: 0.20, 1: 0.40})
    assert per[0]["fraction"] == pytest.approx(0.10) and f == pytest.approx((0.10 * 0.225) ** 0.5)
    assert reproduced_fraction({}, {0: 1.0}) == (None, [])


@pytest.mark.parametrize("slow,gpu,rule", [
    (1.0, H100, "replay-number"),                            # reproduced
    (1.3, H100, "replay-number"),                            # within the tolerance
    (NUMBER_TOLERANCE * 1.6, H100, "replay-number-unconfirmed"),  # not reproduced on the same model
    (NUMBER_TOLERANCE * 1.6, "NVIDIA H200", "replay-number"),      # another model: shown, not judged
])
def test_a_claim_is_confirmed_or_flagged_on_the_same_gpu_model(slow, gpu, rule):
    rp = _Rp()
    # the archive's per-shape geomean is 0.30: the claim stands for the shapes' fractions
    measured = {0: {"timing": 0.10 * slow, "timing-l2-reset": 0.10 * slow * 1.5},
                1: {"timing": 0.20 * slow, "timing-l2-reset": 0.20 * slow * 1.5}}
    confirm_number(rp, measured, _archived(), gpu)
    assert [r for r, _, _ in rp.found] == [rule]
    data = rp.found[0][2]
    assert data["peak_fraction_hardened"] < data["peak_fraction_here"]
    assert data["same_gpu_model"] == (gpu == H100)


@pytest.mark.parametrize("device_slow,rule,words", [
    (1.0, "replay-number", "Within this host's launch latency"),   # kernels alone reach the claim
    (NUMBER_TOLERANCE * 1.2, "replay-number-unconfirmed", "even the device time of its kernels alone"),
])
def test_the_hosts_launch_latency_is_told_from_a_number_that_does_not_reproduce(device_slow, rule, words):
    """H100: the deck's events start on an idle GPU, so they include the host's launch latency; small
    shapes timed 3x the archive's here while their kernels' device time was a third of the event time.
    A claim the solution's kernels reach on their own (device time, no host) is shown, not judged; one
    they do not reach is not reproduced whatever the host."""
    rp = _Rp()
    slow = NUMBER_TOLERANCE * 2
    measured = {0: {"timing": 0.10 * slow, "device": 0.10 * device_slow},
                1: {"timing": 0.20 * slow, "device": 0.20 * device_slow}}
    confirm_number(rp, measured, _archived(), H100)
    assert [r for r, _, _ in rp.found] == [rule] and words in rp.found[0][1]
    assert rp.found[0][2]["peak_fraction_device_bound"] is not None


@pytest.mark.parametrize("archived,why", [
    ({}, "keeps no measurement"),
    ({"gpu": "h100", "peak_fraction": 0.55, "shapes": []}, "no per-shape times for this run (its claim: peak fraction 0.5500)"),
])
def test_a_number_that_cannot_be_set_beside_the_archive_is_not_judged_and_says_why(archived, why):
    """H100: two clean runs timed on every shape got no number row at all (the archive kept no
    measurement, or a fraction without per-shape times): a reader saw silence, not 'not judged'."""
    rp = _Rp()
    confirm_number(rp, {0: {"timing": 0.1}, 1: {"timing": 0.25}}, archived, H100)
    assert [r for r, _, _ in rp.found] == ["replay-number"]
    rule, msg, data = rp.found[0]
    assert msg.startswith("Not judged: ") and why in msg and "shape 1 0.2500 ms" in msg
    assert data["judged"] is False and data["ms_here"] == {"0": 0.1, "1": 0.25}
    rp = _Rp()
    confirm_number(rp, {}, archived, H100)          # nothing timed: nothing to show
    assert rp.found == []
