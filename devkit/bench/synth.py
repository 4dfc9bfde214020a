"""Plausible synthetic Triton solutions (scaffolding, kernels of random statements): the documents of
the similarity benchmark and the filler around a partial copy in the contamination evaluation."""

from __future__ import annotations

import random

_WORDS = ["acc", "val", "row", "col", "tile", "blk", "offs", "mask", "ptr", "base", "lane", "part", "scale", "bias",
          "norm", "gate", "head", "step", "chunk", "seg", "tmp", "out", "inp", "wgt", "state", "pos", "grp", "red"]
_OPS = ["+", "-", "*"]
_OTHERS = ["0.0", '-float("inf")', "1.0"]
_FNS = ["tl.exp", "tl.maximum", "tl.minimum", "tl.sqrt", "tl.sigmoid", "tl.abs", "tl.log"]


def _name(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}{rng.randrange(100)}"


def _stmt(rng: random.Random, vs: list[str]) -> str:
    a, b = rng.choice(vs), rng.choice(vs)
    c = rng.choice([str(rng.randrange(1, 512)), f"{rng.random():.3f}", rng.choice(vs)])
    k = rng.randrange(9)
    t = _name(rng)
    vs.append(t)
    if k == 0:
        other = rng.choice(_OTHERS)
        return f"{t} = tl.load({a} + {b} * {c}, mask={b} < {rng.randrange(16, 9000)}, other={other})"
    if k == 1:
        return f"{t} = {rng.choice(_FNS)}({a} {rng.choice(_OPS)} {c})"
    if k == 2:
        return f"{t} = tl.sum({a} * {b}, axis={rng.randrange(2)})"
    if k == 3:
        return f"tl.store({a} + {b} * {rng.randrange(1, 64)}, {c}, mask={b} < {rng.randrange(16, 9000)})"
    if k == 4:
        return f"{t} = tl.where({a} > {c}, {b}, {a} {rng.choice(_OPS)} {rng.randrange(2, 99)})"
    if k == 5:
        return f"{t} = {a} {rng.choice(_OPS)} {b} {rng.choice(_OPS)} {c}"
    if k == 6:
        return f"{t} = tl.dot({a}, {b}).to(tl.{rng.choice(['float32', 'bfloat16', 'float16'])})"
    if k == 7:
        return f"{t} = tl.arange(0, {rng.choice([16, 32, 64, 128, 256, 512])}) + {a} * {rng.randrange(1, 4096)}"
    return f"{t} = tl.program_id({rng.randrange(3)}) * {rng.randrange(8, 1024)} + {a}"


def gen_solution(rng: random.Random, n_lines: int = 60) -> str:
    """A plausible Triton solution of about n_lines lines; scaffolding shared by all documents."""
    out = ["import torch", "import torch.nn as nn", "import triton", "import triton.language as tl", "", ""]
    fns = []
    while len(out) < n_lines - 12:
        fname = "_" + _name(rng) + "_kernel"
        params = [_name(rng) for _ in range(rng.randrange(3, 7))]
        body_n = rng.randrange(6, 14)
        vs = list(params)
        out.append("@triton.jit")
        out.append(f"def {fname}({', '.join(params)}, BLOCK: tl.constexpr):")
        for _ in range(body_n):
            s = _stmt(rng, vs)
            if rng.random() < 0.15:
                out.append(f"    for {_name(rng)} in range(0, {rng.choice(vs)}, BLOCK):")
                out.append("        " + s)
            else:
                out.append("    " + s)
        out.extend(["", ""])
        fns.append((fname, len(params)))
    out.append("class Model(nn.Module):")
    out.append("    def __init__(self, *args):")
    out.append("        super().__init__()")
    out.append("")
    out.append("    def forward(self, x: torch.Tensor) -> torch.Tensor:")
    out.append("        y = torch.empty_like(x)")
    for fname, np_ in fns:
        args = ", ".join(["x", "y"] + [str(rng.randrange(1, 4096)) for _ in range(np_ - 2)])
        out.append(f"        {fname}[(triton.cdiv(x.numel(), {rng.choice([128, 256, 1024])}),)]({args}, BLOCK={rng.choice([64, 128, 256])})")
    out.append("        return y")
    return "\n".join(out) + "\n"


__all__ = ["gen_solution"]
