"""Hardware peak table (replay contract A7).

All compute figures are dense TFLOP/s (half the sparse datasheet figures), bandwidth in GB/s.
The deck entries (H100, H100_SXM, RTX_PRO_6000, B200) are the deck's own `src/hardware/*.py`
values; `RTX_PRO_6000_PRE_20260614` is the 2.5x-low table the RTX deck used before 2026-06-14.
`H200` / `H200_NVL` are NVIDIA datasheet figures (external: no H200 entry exists in the deck)
and `H200_MEASURED` holds what was measured on the lent H200 machine (contract A7).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Hardware:
    key: str
    name: str
    sm: str
    peak_bandwidth_gb_s: float
    peak_tflops_dense: dict = field(default_factory=dict)
    l2_mb: float | None = None
    memory_gb: float | None = None
    source: str = "deck"


HARDWARE: dict[str, Hardware] = {
    "H100": Hardware("H100", "H100 PCIe 80GB HBM2e", "sm_90a", 2039.0,
                     {"fp8": 1513, "bf16": 756, "fp16": 756, "tf32": 378, "fp32": 51, "int8": 1513},
                     l2_mb=50, memory_gb=80),
    "H100_SXM": Hardware("H100_SXM", "H100 SXM5 HBM3", "sm_90a", 3350.0,
                         {"fp8": 1979, "bf16": 989.5, "fp16": 989.5, "tf32": 494.7, "fp32": 67, "int8": 1979},
                         l2_mb=50, memory_gb=80),
    "RTX_PRO_6000": Hardware("RTX_PRO_6000", "RTX PRO 6000 Blackwell Workstation", "sm_120a", 1800.0,
                             {"fp8": 1000, "bf16": 500, "fp16": 500, "tf32": 250, "fp32": 125, "fp4": 2000,
                              "int8": 1000, "fp6": 1000, "int4": 2000},
                             l2_mb=96, memory_gb=96),
    "RTX_PRO_6000_PRE_20260614": Hardware("RTX_PRO_6000", "RTX PRO 6000 (deck table before 2026-06-14, 2.5x low)",
                                          "sm_120a", 1800.0,
                                          {"fp8": 400, "bf16": 200, "fp16": 200, "fp32": 12},
                                          l2_mb=96, memory_gb=96),
    "B200": Hardware("B200", "B200", "sm_100a", 8000.0,
                     {"fp8": 4500, "bf16": 2250, "fp16": 2250, "tf32": 1100, "fp32": 80, "fp4": 9000,
                      "int8": 4500, "fp6": 4500, "int4": 9000},
                     l2_mb=126, memory_gb=192),
    "H200": Hardware("H200", "H200 SXM 141GB HBM3e (NVIDIA datasheet)", "sm_90a", 4800.0,
                     {"fp8": 1979, "bf16": 989.5, "fp16": 989.5, "tf32": 494.7, "fp32": 67, "int8": 1979},
                     l2_mb=60, memory_gb=141, source="datasheet"),
    "H200_NVL": Hardware("H200_NVL", "H200 NVL (NVIDIA datasheet)", "sm_90a", 4800.0,
                         {"fp8": 1670, "bf16": 835, "fp16": 835},
                         l2_mb=60, memory_gb=141, source="datasheet"),
    "H200_MEASURED": Hardware("H200_MEASURED", "H200 as measured on the lent machine (D2D copy, 8192^3 bf16 GEMM)",
                              "sm_90a", 4300.0, {"bf16": 790.0}, l2_mb=60, memory_gb=139, source="measured"),
}

# Which deck directory scores against which key (contract A7, Part B/C/D headers).
DECK_HARDWARE = {
    "hard": {"rtxpro6000": "RTX_PRO_6000", "h100": "H100", "b200": "B200"},
    "cuda": {"rtxpro6000": "RTX_PRO_6000", "h100": "H100", "h100sxm": "H100_SXM"},
    "mega": {"default": "RTX_PRO_6000"},
}

#: L2 flush buffer used by the deck timing (A5): 128 MiB of fp32 zero_()'d between trials.
L2_FLUSH_BYTES = 128 * 1024 * 1024


def peaks(key: str, archive_date: str | None = None) -> Hardware:
    """Peak table for a hardware key; RTX scores from before 2026-06-14 used the low table."""
    if key == "RTX_PRO_6000" and archive_date is not None and archive_date < "2026-06-14":
        return HARDWARE["RTX_PRO_6000_PRE_20260614"]
    return HARDWARE[key]


def peak_fraction(regime: str, peak_key: str, flops: float, nbytes: float, ms: float, hw: Hardware) -> float:
    """A6: compute regime -> TFLOPS/peak_tflops[key]; otherwise GB/s / peak bandwidth.
    Clamped at >= 0, not at 1."""
    if ms <= 0:
        return 0.0
    if regime == "compute":
        return max(0.0, flops / (ms * 1e-3) / 1e12 / hw.peak_tflops_dense[peak_key])
    return max(0.0, nbytes / (ms * 1e-3) / 1e9 / hw.peak_bandwidth_gb_s)
