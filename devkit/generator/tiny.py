"""`forensics corpus generate --tiny`: many small runs, for measuring how the tool scales in runs.

Each run is a real run folder of the shared runner's first era (E0: result.json, transcript,
solution.py, check.log, benchmark.log, stderr.log; no workspace copy), written by the same
`RunBuilder` as `forensics corpus generate`, with a short session: the agent reads the prompt,
writes a solution, runs check.py (PASS) and benchmark.py, and ends.  About 10-40 kB a run.

* Run ids are valid and distinct: the start times strictly increase (a few seconds to a minute
  apart), whatever the number of runs.
* Every harness format takes its turn (the first eight runs cover all of them).
* Solutions are small programs drawn at random (two to four Triton kernels of random statements
  over random expression trees, a module that calls them), so two runs' solutions share little
  beyond the scaffolding, as
  independent agents' solutions do; `COPY_RATE` of the runs copy an earlier run's solution of the
  same problem (after reading it from that run's folder: a deliberate read and a copy, labelled),
  so the cross-run analyses have something to find.
* Memory stays bounded: only the last `KEEP` runs per problem are kept as copy sources, and labels
  are streamed to labels.json.

Same (runs, seed) -> byte-identical tree.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta
from pathlib import Path

import orjson

from . import decks
from .generate import FORMAT_HARNESS, FORMAT_ORDER, HARNESSES
from .labels import SCHEMA_VERSION
from .run import RunBuilder
from .session import ForeignRef

#: bumped whenever the runs it writes change (benches cache generated archives under it)
VERSION = 2
COPY_RATE = 0.02
KEEP = 8
START = datetime(2026, 4, 1, 8, 0, 0)

_UNARY = ("tl.exp({})", "tl.exp2({})", "tl.abs({})", "tl.sqrt(tl.abs({}) + {c})", "tl.rsqrt(tl.abs({}) + {c})",
          "tl.maximum({}, {c})", "tl.minimum({}, {c})", "tl.sigmoid({})", "tl.log(tl.abs({}) + 1.0)",
          "tl.log2(tl.abs({}) + {c})", "tl.where({} > {c}, {}, 0.0)", "tl.where({} < {c}, {c}, {})", "({} * {c})",
          "({} + {c})", "({} - {c})", "({} / {c})", "(-{})", "({} * {})", "({} ** 2)", "tl.cos({})", "tl.sin({})",
          "tl.math.tanh({})", "tl.math.erf({})", "tl.floor({})", "tl.ceil({})", "({}).to(tl.float16).to(tl.float32)",
          "tl.clamp({}, -{c}, {c})", "tl.math.fma({}, {c}, {c})", "tl.where(mask, {}, {c})", "tl.fdiv({}, {c})")
_BINARY = ("({} + {})", "({} - {})", "({} * {})", "tl.maximum({}, {})", "tl.minimum({}, {})",
           "({} / (tl.abs({}) + {c}))", "tl.where({} > {}, {}, {})", "tl.math.fma({}, {}, {c})", "({} % {c} + {})",
           "tl.where(({} < {c}) & ({} > -{c}), {}, {})", "tl.atan2({}, {})", "tl.math.pow(tl.abs({}) + {c}, {})")
_STMTS = ("    {v} = {e}", "    {v} += {e}", "    {v} -= {e}", "    {v} *= {e}",
          "    {v} = tl.where(mask, {e}, {v})", "    if {c} > 0.5:\n        {v} = {e}",
          "    for _i in range({n}):\n        {v} = {e}", "    {v} = tl.sum({e}, axis=0) + {v}",
          "    {v} = tl.max({e}, axis=0) * 0.0 + {v}", "    {v} = tl.cumsum({e}, axis=0)")


def _expr(rng: random.Random, leaves: list[str], depth: int) -> str:
    if depth <= 0 or rng.random() < 0.15:
        return rng.choice(leaves) if rng.random() < 0.75 else f"{rng.uniform(-4, 4):.{rng.randint(1, 4)}f}"
    if rng.random() < 0.55:
        t = rng.choice(_UNARY)
    else:
        t = rng.choice(_BINARY)
    t = re.sub(r"\{c\}", lambda _m: f"{rng.uniform(0.01, 8):.{rng.randint(1, 4)}f}", t)
    return t.format(*[_expr(rng, leaves, depth - 1) for _ in range(t.count("{}"))])


def tiny_solution(problem: str, rng: random.Random) -> str:
    """A small, syntactically valid Triton solution whose kernel bodies are random (statements drawn
    from a few dozen forms over random expression trees): two such solutions share little beyond
    the scaffolding, as independent agents' solutions do."""
    block = rng.choice((128, 256, 512, 1024, 2048))
    warps = rng.choice((1, 2, 4, 8))
    leaves = ["x", "y", "acc", "s"]
    kernels = []
    launches = []
    for k_i in range(rng.randint(2, 4)):
        k = f"_{rng.choice(('fused', 'tile', 'row', 'blk', 'kern', 'op', 'stage', 'pass'))}_" \
            f"{rng.choice(('fwd', 'main', 'step', 'apply', 'reduce', 'scale', 'mix'))}_{k_i}{rng.randrange(100)}"
        body = [f"    s = {_expr(rng, ['x', 'y'], 3)}", "    acc = x"]
        for _ in range(rng.randint(12, 30)):
            st = rng.choice(_STMTS)
            body.append(st.format(v=rng.choice(("acc", "y", "s")), e=_expr(rng, leaves, rng.randint(2, 5)),
                                  c=f"{rng.random():.3f}", n=rng.randint(2, 4)))
        body.append(f"    acc = {_expr(rng, leaves, 4)}")
        kernels.append(
            "@triton.jit\n"
            f"def {k}(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):\n"
            "    pid = tl.program_id(0)\n"
            "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
            "    mask = offs < n\n"
            "    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)\n"
            "    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)\n"
            + "\n".join(body) + "\n"
            "    tl.store(o_ptr + offs, acc.to(o_ptr.dtype.element_ty), mask=mask)\n")
        launches.append(f"        {k}[(triton.cdiv(n, {block}),)](x, y, out, n, BLOCK={block}, num_warps={warps})\n"
                        + ("        x = out.clone()\n" if k_i else ""))
    return (
        f'"""{problem}: fused elementwise kernels (block {block})."""\n'
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n"
        + "\n\n".join(kernels) + "\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        super().__init__()\n\n"
        "    def forward(self, x, y=None):\n"
        "        y = x if y is None else y\n"
        "        out = torch.empty_like(x)\n"
        "        n = x.numel()\n"
        + "".join(launches) +
        "        return out\n"
    )


class _Source:
    """A run whose solution a later run may read and copy."""

    def __init__(self, b: RunBuilder, solution: str):
        self.run_id, self.root, self.solution, self.base = b.run_id, b.root, solution, b.archive_base


def tiny_run(i: int, rng: random.Random, ts: datetime, seed: int, sources: dict[str, list[_Source]]) -> RunBuilder:
    harness = FORMAT_HARNESS[FORMAT_ORDER[i % len(FORMAT_ORDER)]] if i < 2 * len(FORMAT_ORDER) else \
        rng.choices(list(HARNESSES), weights=[v[0] for v in HARNESSES.values()])[0]
    model = rng.choice(HARNESSES[harness][1])
    p = rng.choice(decks.problems_of("hard"))
    outcome = rng.choices(("pass", "check_fail"), weights=(85, 15))[0]
    b = RunBuilder("hard", p.name, harness, "E0", ts, model, seed=seed, root="runs", scenario=f"tiny_{outcome}")
    s = b.session
    s.text(f"Reading the problem statement for {p.name}.")
    s.read("PROMPT.txt", b.template("PROMPT.txt"))
    pool = sources.get(p.name) or []
    src = rng.choice(pool) if pool and rng.random() < COPY_RATE else None
    if src is not None and src.base == b.archive_base:
        path = f"{src.base}/outputs/{src.root}/{src.run_id}/solution.py"
        s.read(path, src.solution, foreign=[ForeignRef(src.run_id, "solution.py", "deliberate_read")])
        sol = src.solution
        s.write("solution.py", sol, foreign=[ForeignRef(src.run_id, "solution.py", "copy")])
    else:
        sol = tiny_solution(p.name, rng)
        s.write("solution.py", sol)
    if outcome == "pass":
        b.check("PASS", style=rng.choice(["tail", "plain", "uvrun"]))
        b.benchmark(target=rng.uniform(0.02, 0.5))
        s.text("solution.py passes check.py; benchmark numbers above.")
        s.end("Implemented solution.py; check.py PASS.")
        b.grade("PASS")
    else:
        b.check("FAIL", style="tail")
        s.text("Still failing the tolerance; stopping here.")
        s.end("solution.py does not pass check.py yet.")
        b.grade("FAIL")
    keep = sources.setdefault(p.name, [])
    keep.append(_Source(b, sol))
    if len(keep) > KEEP:
        del keep[0]
    return b


def generate_tiny(out: str | Path, runs: int, seed: int, progress_bar: bool = False) -> dict:
    """Write OUT/outputs/runs/<run_id>/... for `runs` tiny runs and OUT/labels.json (streamed);
    returns {"runs": n, "first": run id, "last": run id}."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"tiny:{runs}:{seed}")
    sources: dict[str, list[_Source]] = {}
    ts = START
    it = range(runs)
    if progress_bar:
        from tqdm import tqdm
        it = tqdm(it, desc="runs", unit="run")
    first = last = None
    head = orjson.dumps({"schema_version": SCHEMA_VERSION,
                         "generator": {"kind": "tiny", "version": VERSION, "runs": runs, "seed": seed}}, option=orjson.OPT_SORT_KEYS)
    with open(out / "labels.json", "wb") as f:
        f.write(head[:-1] + b',"runs":{')
        for i in it:
            ts = ts + timedelta(seconds=rng.randint(1, 60))      # strictly increasing: distinct run ids
            b = tiny_run(i, random.Random(rng.getrandbits(64)), ts, seed, sources)
            lab = b.write(out)
            rid = lab["run_id"]
            first = first or rid
            last = rid
            f.write((b"," if i else b"") + orjson.dumps(rid) + b":" + orjson.dumps(lab, option=orjson.OPT_SORT_KEYS))
        f.write(b"}}\n")
    return {"runs": runs, "first": first, "last": last}
