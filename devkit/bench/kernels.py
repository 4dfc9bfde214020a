"""`forensics bench kernels`: the bundled Triton references beside the best library op (GPU).

A thin wrapper over `python -m forensics.kernels.verify` (kernels/verify.py), which does the work: Triton
vs oracle statistics per canonical shape, Triton and library-op medians with CUDA events and a
128 MiB L2 flush, and the reference side of a full check per problem.  Without a GPU it runs the
same flow on tiny shapes under the Triton interpreter (correctness only; timings meaningless).
"""

from __future__ import annotations

import json
from pathlib import Path  # noqa: F401 (click path type)

import click


@click.command("kernels")
@click.option("--problems", "-p", multiple=True, help="Problem name(s); default all.")
@click.option("--quick", is_flag=True, help="First canonical shape only, 5 timing trials.")
@click.option("--device", default=None, help="cuda (default when available) or cpu.")
@click.option("--budget-s", type=float, default=None, help="Skip the remaining work units after this many seconds.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Also write the JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_kernels(problems, quick, device, budget_s, out, as_json) -> None:
    """Triton references vs oracles and vs the best library op; full-check reference time."""
    from forensics.kernels import verify

    res = verify.run(list(problems) or None, device, quick, budget_s, out_path=str(out) if out else None)
    if as_json:
        click.echo(json.dumps(res, indent=1, default=str))
    else:
        click.echo("\n".join(verify.summary_lines(res)))
    if not res["ok"]:
        raise SystemExit(1)
