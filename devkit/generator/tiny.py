"""`forensics corpus generate --tiny`: many small runs, for measuring how the tool scales in runs.

Each run is a real run folder of the shared runner's first era (E0: result.json, transcript,
solution.py, check.log, benchmark.log, stderr.log; no workspace copy), written by the same
`RunBuilder` as `forensics corpus generate`, with a short session: the agent reads the prompt,
writes a solution, runs check.py (PASS) and benchmark.py, and ends.  About 10-40 kB a run.

* Run ids are valid and distinct: the start times strictly increase (a few seconds to a minute
  apart), whatever the number of runs.
* Every harness format takes its turn (the first eight runs cover all of them).
* Solutions are small programs drawn at random (2-4 kB: a Triton kernel of flat random statements
  over names the similarity's lexer keeps, a module that calls it), so two runs' solutions share
  little beyond the scaffolding, as
  independent agents' solutions do; `COPY_RATE` of the runs copy an earlier run's solution of the
  same problem (after reading it from that run's folder: a deliberate read and a copy, labelled),
  so the cross-run analyses have something to find.
* Memory stays bounded: only the last `KEEP` runs per problem are kept as copy sources, and labels
  are streamed to labels.json.

Same (runs, seed) -> byte-identical tree.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

import orjson

from . import decks
from .generate import FORMAT_HARNESS, FORMAT_ORDER, HARNESSES
from .labels import SCHEMA_VERSION
from .run import RunBuilder
from .session import ForeignRef

#: bumped whenever the runs it writes change (benches cache generated archives under it)
VERSION = 4
COPY_RATE = 0.02
KEEP = 8
START = datetime(2026, 4, 1, 8, 0, 0)

# Names the similarity's lexer keeps as themselves (forensics/text/code.py PY_KEEP; every other
# identifier and every number reads as one token), so that the statements drawn from them differ
# from run to run as token sequences, not only in their names and numbers.
_TL_FNS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid", "maximum", "minimum", "where", "sum", "max",
           "argmax", "abs", "reshape", "trans", "broadcast_to", "dot", "zeros_like", "full", "atomic_add",
           "atomic_max", "reduce", "softmax", "cdiv", "view", "permute", "load", "store", "arange")
_TORCH_FNS = ("softmax", "topk", "sort", "cat", "stack", "matmul", "mm", "bmm", "clone", "zeros_like", "empty_like",
              "where", "split", "chunk", "unsqueeze", "squeeze", "expand", "sum", "max", "min", "abs", "exp", "log",
              "sqrt", "rsqrt", "sigmoid")
_OPS = ("+", "-", "*", "/", "%", "**", "//", "&", "|", "^", "<<", ">>", "<", ">", "<=", ">=", "==", "!=")
_DTYPES = ("float16", "bfloat16", "float32", "int8", "int32", "int64", "uint8", "float8e4nv")


def _stmt(rng: random.Random, names: list[str], indent: str = "    ") -> str:
    """One flat statement (an assignment of a call of a kept name, an operator, a cast or a mask)
    with constants of its own, no 12 tokens without one: the lexer keeps numbers, so no 12-token
    shingle of the body recurs from run to run but by chance."""
    a, b, v = rng.choice(names), rng.choice(names), rng.choice(names)
    c, c2 = (f"{rng.uniform(0.01, 64):.3f}" for _ in range(2))
    f, g, op = rng.choice(_TL_FNS), rng.choice(_TL_FNS), rng.choice(_OPS)
    form = rng.randrange(8)
    if form == 0:
        return f"{indent}{v} = tl.{f}({a} {op} {b}) * {c}"
    if form == 1:
        return f"{indent}{v} = tl.{f}({a}) {op} {c}"
    if form == 2:
        return f"{indent}{v} = ({a} {op} {c}).to(tl.{rng.choice(_DTYPES)}) * {c2}"
    if form == 3:
        return f"{indent}{v} = tl.where({a} {rng.choice(_OPS[12:])} {c}, tl.{f}({b}), {a}) * {c2}"
    if form == 4:
        return f"{indent}{v} {rng.choice(('+', '-', '*'))}= tl.{f}({a}, {c}) * {c2}"
    if form == 5:
        return f"{indent}if {a} {rng.choice(_OPS[12:])} {c}:\n{indent}    {v} = tl.{f}({b}) * {c2}"
    if form == 6:
        return f"{indent}while {a} < {c}:\n{indent}    {v} = tl.{f}({v} {op} {c2})"
    return f"{indent}{v} = tl.{f}(tl.{g}({a}) {op} {c})"


def _c(rng: random.Random) -> str:
    return f"{rng.uniform(0.01, 64):.3f}"


def tiny_solution(problem: str, rng: random.Random) -> str:
    """A small (2-4 kB), syntactically valid Triton solution whose kernel body and forward are flat
    random statements over names the similarity's lexer keeps: two such solutions share little but
    the scaffolding, as independent agents' solutions do."""
    # one launch configuration for all: a choice among a few would be an idiom a fixed share of the
    # runs share, which pairs every run with that share of the others (quadratic in runs)
    block, warps = 1024, 4
    names = ["x", "y", "acc", "s", "t"]
    k = f"_{rng.choice(('fused', 'tile', 'row', 'blk', 'kern', 'op', 'stage', 'pass'))}_" \
        f"{rng.choice(('fwd', 'main', 'step', 'apply', 'reduce', 'scale', 'mix'))}_{rng.randrange(100)}"
    # (a constant first and last: the shingles across the fixed prologue and epilogue are the run's own)
    body = [f"    acc = x * {_c(rng)}"] + [_stmt(rng, names) for _ in range(rng.randint(10, 25))] + \
        [f"    acc = acc * {_c(rng)}"]
    fwd = [f"        out = out * {_c(rng)}"]
    for _ in range(rng.randint(3, 8)):
        f, a = rng.choice(_TORCH_FNS), rng.choice(("x", "y", "out"))
        fwd.append(f"        {rng.choice(('x', 'y'))} = {_c(rng)} * torch.{f}({a}{rng.choice(('', ', -1', ', 0', '.float()'))})")
    fwd.append(f"        out = out * {_c(rng)}")
    return (
        f'"""{problem}: fused kernel (block {block})."""\n'
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\n"
        f"def {k}(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):\n"
        "    pid = tl.program_id(0)\n"
        "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
        "    mask = offs < n\n"
        "    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)\n"
        "    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)\n"
        "    acc = x\n    s = y\n    t = x\n"
        + "\n".join(body) + "\n"
        "    tl.store(o_ptr + offs, acc.to(o_ptr.dtype.element_ty), mask=mask)\n\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        super().__init__()\n\n"
        "    def forward(self, x, y=None):\n"
        "        y = x if y is None else y\n"
        "        out = torch.empty_like(x)\n"
        "        n = x.numel()\n"
        f"        {k}[(triton.cdiv(n, {block}),)](x, y, out, n, BLOCK={block}, num_warps={warps})\n"
        + "\n".join(fwd) + "\n"
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
