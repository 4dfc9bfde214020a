"""Does this machine's torch draw megaqwen's input stream as the deck does, and does our bundled
reference then agree with the deck's?  (The cause of the opus 084300 false fail, issue 21.)

    python -m devkit.replay.megaqwen_draws --deck ../shared/decks [--device cuda] [--trials 2]

Prints one JSON line for the draw (`randn(1024, dtype=bf16)` against `randn(1024).to(bf16)` from
the same CPU generator: equal on torch 2.13, different on torch 2.11) and one per trial: the
`last_hidden` of our reference's `run` and of the deck's `reference.run` on the same weights
(check.py's max_seq, ctx + dec + 8), compared with the check's elementwise 0.08 / 0.08.  The deck's
files are data read from DIR (`benchmarks/cuda/problems-h100/03_megaqwen_decode/reference.py`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from .deck_check import DECK_DIRS

TRIALS = [(128, 8, 42), (256, 8, 123), (512, 4, 456)]


def _deck_reference(deck: Path):
    path = Path(deck) / DECK_DIRS["cuda"] / "03_megaqwen_decode" / "reference.py"
    spec = importlib.util.spec_from_file_location("_deck_megaqwen_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def draws_agree() -> dict:
    import torch
    a = torch.randn(1024, generator=torch.Generator().manual_seed(43), dtype=torch.bfloat16)
    b = torch.randn(1024, generator=torch.Generator().manual_seed(43)).to(torch.bfloat16)
    return {"torch": torch.__version__, "bf16_draw_equals_fp32_cast": bool(torch.equal(a, b)),
            "max_abs": float((a.float() - b.float()).abs().max())}


def compare(deck: Path, device: str = "cpu", trials: int = 1) -> list[dict]:
    import torch

    from forensics.kernels.common import load_reference_module
    ours = load_reference_module("cuda_03_megaqwen.py", "_megaqwen_draws_ours")
    theirs = _deck_reference(deck)
    out = []
    for ctx, dec, seed in TRIALS[:trials]:
        max_seq = ctx + dec + 8
        ref = ours.Model(ours.NUM_LAYERS, max_seq).to(device).reset_parameters(seed)
        dm = theirs.Model(theirs.NUM_LAYERS, max_seq).to(device).eval()
        dm.load_state_dict(ref.state_dict())
        with torch.no_grad():
            o = ours.run(ctx, dec, seed, model=ref, max_seq=max_seq)["last_hidden"].float().cpu()
            d = theirs.run(ctx, dec, seed, model=dm, max_seq=max_seq)["last_hidden"].float().cpu()
        diff = (o - d).abs()
        out.append({"trial": [ctx, dec, seed], "max_abs": round(float(diff.max()), 4),
                    "n_bad": int((diff > 0.08 + 0.08 * d.abs()).sum()), "n": int(d.numel())})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deck", required=True, help="the decks' folder (../shared/decks)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trials", type=int, default=1, help=f"1 to {len(TRIALS)}")
    args = ap.parse_args(argv)
    print(json.dumps(draws_agree()))
    rows = compare(Path(args.deck), args.device, max(1, min(len(TRIALS), args.trials)))
    for r in rows:
        print(json.dumps(r))
    return 0 if all(r["n_bad"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
