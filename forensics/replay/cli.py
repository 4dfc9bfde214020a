"""`forensics replay RUN_DIR` and `forensics kernels list|check` (thin skins over the API).

This module imports no torch: `--help` prints on an install without the replay extra, and each
command checks for torch (and triton) when it runs, naming the extra to install (exit 2)."""

from __future__ import annotations

import json
import os
import sys
import time

import click

from forensics.vocab import ALL_PROBES

from .stream import JsonLines, failure_doc, result_doc


def _default_device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def _print_outcome(out, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"info": out.info, "rows": out.rows, "findings": out.findings}, default=str, indent=1))
        return
    info = out.info
    click.echo(f"{info.get('problem')} deck {info.get('deck_version')} ({info.get('version_choice')}) on "
               f"{(info.get('hello') or {}).get('gpu') or info.get('device')}  shapes={info.get('shapes')}  "
               f"status={info.get('status')}  {info.get('total_s')} s")
    if info.get("account"):
        from .account import line
        click.echo("  " + line(info["account"]))
    for r in out.rows:
        nums = ""
        if r.get("max_abs") is not None:
            nums += f" max_abs={r['max_abs']:.4g}"
        if r.get("n_bad") is not None:
            nums += f" bad={r['n_bad']}/{r.get('n_total')}"
        if r.get("ms") is not None:
            nums += f" ms={r['ms']:.4f}"
            if r.get("gbps") is not None:
                nums += f" GB/s={r['gbps']:.1f} TFLOP/s={r['tflops'] or 0:.2f}"
            sp = (r.get("data") or {}).get("speedup_here")
            if sp is not None:
                nums += f" speedup={sp:.3g}x over the bundled baseline"
        click.echo(f"  {r['probe']:<17} {r['status']:<14} {r.get('shape') or '':<30} seed={r.get('seed')} "
                   f"{r.get('case_name') or ''}{nums}")
        if r["status"] not in ("pass",) and r.get("detail"):
            click.echo(f"      {str(r['detail']).splitlines()[0][:160]}")
    if info.get("speedup_geomean_here") is not None:
        arch = next(((r.get("data") or {}).get("archived_peak_fraction") for r in out.rows
                     if (r.get("data") or {}).get("speedup_here") is not None), None)
        click.echo(f"  score here: geomean speedup {info['speedup_geomean_here']:.3g}x over {info.get('speedup_shapes')} "
                   f"shape(s)" + (f" (archived peak_fraction {arch}, another GPU)" if arch is not None else ""))
    for f in out.findings:
        click.echo(f"FINDING {f['severity']:<8} {f['rule']}: {f['message'][:400]}")
    off = info.get("official") or {}
    if off:
        click.echo(f"the deck's check here: {off.get('status')} (correct={off.get('correct')})"
                   + (f": {off['reason']}" if off.get("reason") else ""))
    for d in off.get("deviations") or []:
        click.echo(f"  deviation from the graded run: {d}")
    arch = info.get("archived_check")
    if arch:
        click.echo(f"archived correct={arch.get('archived_correct')} ({arch.get('source')}): {arch.get('status')}"
                   f" - {arch.get('why')}")
    if info.get("interrupted"):
        click.echo(f"INTERRUPTED ({info['interrupted']}): the result above is partial")


@click.command("replay")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--probe", "probes", multiple=True, help=f"Probe(s) to run: all, {', '.join(ALL_PROBES)} (default all).")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None, help="Default: cuda if available.")
@click.option("--shapes", type=click.Choice(["canonical", "tiny"]), default="canonical", show_default=True,
              help="The deck's shapes, or the tiny ones a CPU replay uses.")
@click.option("--problem", default=None, help="Override the problem (default: result.json / run id).")
@click.option("--deck-version", default=None, help="Force a deck version label instead of choosing by date/templates.")
@click.option("--build-timeout", type=float, default=900.0, show_default=True,
              help="Import, construction, and the first call of each child (lazy builds).")
@click.option("--call-timeout", type=float, default=300.0, show_default=True,
              help="Seconds one call of the solution may take during check and the probes.")
@click.option("--cutlass-include", default=None, type=click.Path(exists=True, file_okay=False),
              help="A CUTLASS checkout (or its include dir) the solution's build may use "
                   "(default: $FORENSICS_CUTLASS_DIR). See docs/replay.md, build environment.")
@click.option("--cuda-include", default=None, metavar="DIRECTORY|auto",
              help="CUDA headers for the solution's builds, 'auto' for the toolkit's "
                   "(default: $FORENSICS_CUDA_INCLUDE).")
@click.option("--nvidia-file", is_flag=True, default=False,
              help="Give a namespace `nvidia` package the __file__ of a regular one (solutions that find CUDA "
                   "headers from nvidia.__file__; default: $FORENSICS_NVIDIA_FILE=1).")
@click.option("--no-arch-rebuild", is_flag=True, default=False,
              help="Leave a build that pins only another GPU's architecture (-gencode arch=compute_120,...) as it "
                   "is (it then fails: not replayable) instead of rebuilding it for this GPU, a named deviation "
                   "(default: $FORENSICS_ARCH_REBUILD, 0 to turn off).")
@click.option("--jsonl", "jsonl", default=None, type=click.Path(dir_okay=False, allow_dash=True),
              help="Append each finished probe's rows and findings as a JSON line to PATH ('-': stdout), then "
                   "the whole result as the last line.")
@click.option("--keep-scratch", is_flag=True, help="Keep the scratch copy (path in the JSON info).")
@click.option("--no-reuse", is_flag=True,
              help="Share no reference model or output between probes (each computes its own, as before the "
                   "reuse): for measuring what the reuse saves.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def replay_cmd(run_dir, probes, device, shapes, problem, deck_version, build_timeout, call_timeout, cutlass_include,
               cuda_include, nvidia_file, no_arch_rebuild, jsonl, keep_scratch, no_reuse, as_json):
    """Replay RUN_DIR's solution.py against the bundled reference (read-only; no store needed).
    Needs the 'replay' extra (torch).

    The result says whether it confirms or refutes the archived `correct` (result.json).  The
    process never ends without JSON (with --json / --jsonl): out of memory in the replay, a problem
    without a bundled reference, a signal from outside all end in a JSON document."""
    from forensics.extras import require_extra
    require_extra("replay", "torch")
    from .outcome import Limits, install_signal_handlers, restore_signal_handlers
    events: list[dict] = []
    stream = JsonLines(jsonl)

    def on_event(e: dict) -> None:
        events.append(e)
        stream(e)

    old_handlers = install_signal_handlers()
    code = 0
    try:
        from . import buildenv
        from .api import replay_run_dir
        supplied = buildenv.supply(cutlass=cutlass_include, cuda_include=cuda_include, nvidia_file=nvidia_file,
                                   arch_rebuild=False if no_arch_rebuild else None)
        device = device or _default_device()
        out = replay_run_dir(run_dir, problem=problem, device=device, probes=list(probes) or None, shapes=shapes,
                             deck_version=deck_version, keep_scratch=keep_scratch, on_event=on_event, reuse=not no_reuse,
                             limits=Limits(build_s=build_timeout, call_s=call_timeout))
        if supplied:
            out.info["build_env_supplied"] = supplied
        doc = result_doc(out)
        if out.info.get("interrupted"):
            code = 143
        elif any(f["severity"] in ("high", "critical") for f in out.findings):
            code = 1
    except BaseException as e:  # noqa: BLE001 - the tool never ends without its JSON
        doc = failure_doc(e, events, f"forensics replay {run_dir}")
        out = None
        code = 143 if isinstance(e, KeyboardInterrupt) else 3
    finally:    # a caller that runs the command in-process (click's runner, a notebook) gets its own back
        restore_signal_handlers(old_handlers)
    stream(dict(doc, event="result"))
    stream.close()
    if as_json:
        if jsonl != "-":
            click.echo(json.dumps(doc, default=str, indent=1))
    elif out is not None:
        _print_outcome(out, False)
    else:
        click.echo(f"replay did not finish: {doc['info']['error']}", err=True)
    sys.exit(code)


@click.group("kernels")
def kernels_cmd():
    """The bundled reference kernels (kernels/, imported as forensics.kernels); needs the 'replay'
    extra (torch, and triton for `check`)."""


@kernels_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the problems as JSON.")
def kernels_list(as_json):
    """Every problem and deck version, with shapes, tolerances and whether a Triton reference exists
    (needs the 'replay' extra: torch)."""
    from forensics.extras import require_extra
    require_extra("kernels list", "torch")
    from forensics.kernels import registry
    items = []
    for name in registry.names():
        for ver, spec in sorted(registry.VERSIONS[name].items(), key=lambda kv: kv[1].since or ""):
            items.append(dict(name=name, bench=spec.bench, deck_version=ver, since=spec.since, until=spec.until,
                              regime=spec.regime, shapes=len(spec.shapes), check_shapes=len(spec.check_shapes),
                              stress=[c.name for c in spec.stress_cases], property=[c.name for c in spec.property_cases],
                              triton=spec.has_triton, stateful=bool(spec.stateful)))
    if as_json:
        click.echo(json.dumps({"problems": items, "load_errors": getattr(registry, "LOAD_ERRORS", {})}, indent=1,
                              default=str))
        return
    for it in items:
        click.echo(f"{it['bench']:<5} {it['name']:<24} {it['deck_version']:<16} {it['regime']:<8} "
                   f"shapes={it['shapes']} check={it['check_shapes']} triton={'yes' if it['triton'] else 'no'} "
                   f"stress={','.join(it['stress'])}" + (f" property={','.join(it['property'])}" if it['property'] else ""))
    for mod, err in (getattr(registry, "LOAD_ERRORS", {}) or {}).items():
        click.echo(f"LOAD ERROR {mod}: {err}")


def kernels_check(problem: str, device: str, shapes: str = "auto", seed: int | None = None) -> dict:
    """Deck reference vs oracle, and Triton vs deck reference, per shape (the API behind the command)."""
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before kernels imports triton
    import torch
    from forensics.kernels import registry
    from .api import TINY_SHAPES
    spec = registry.get(problem)
    if shapes == "auto":
        shapes = "canonical" if device.startswith("cuda") else "tiny"
    if shapes == "tiny":
        plan = TINY_SHAPES.get(spec.name) or []
        if not plan:
            return {"problem": spec.name, "error": "no tiny shapes for this problem; use --shapes canonical"}
    elif shapes == "check":
        plan = spec.check_shapes
    else:
        plan = spec.shapes
    seed = spec.seeds[0] if seed is None else seed
    rows = []
    for shape in plan:
        t0 = time.monotonic()
        row = {"shape": dict(shape)}
        try:
            model = spec.build_reference(shape, device)
            inputs = spec.make_inputs(shape, seed, device)
            ref = spec.reference_forward(model, inputs)
            row["reference_s"] = round(time.monotonic() - t0, 4)
            try:
                orc = spec.oracle(model, inputs)
                # the oracle is fp32/fp64: judge it with the deck output's tolerance (compare's `dtype`)
                r = spec.compare(orc if not isinstance(orc, dict) else orc, ref, inputs=inputs,
                                 dtype=ref.dtype if isinstance(ref, torch.Tensor) else None)
                row["oracle_vs_reference"] = {k: r.get(k) for k in ("ok", "max_abs", "n_bad", "n_total", "msg")}
            except NotImplementedError as e:
                row["oracle_vs_reference"] = {"ok": None, "msg": str(e)}
            if spec.has_triton:
                t1 = time.monotonic()
                tri = spec.triton_forward(model, inputs)
                row["triton_s"] = round(time.monotonic() - t1, 4)
                r = spec.compare(ref, tri, inputs=inputs)
                row["triton_vs_reference"] = {k: r.get(k) for k in ("ok", "max_abs", "n_bad", "n_total", "msg")}
        except Exception as e:  # noqa: BLE001 - reported per shape
            row["error"] = f"{type(e).__name__}: {e}"[:500]
        rows.append(row)
    ok = all(r.get("oracle_vs_reference", {}).get("ok") is not False and r.get("triton_vs_reference", {}).get("ok")
             is not False and "error" not in r for r in rows)
    return {"problem": spec.name, "deck_version": spec.deck_version, "device": device, "shapes": shapes,
            "seed": seed, "ok": ok, "rows": rows}


@kernels_cmd.command("check")
@click.argument("problem")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None, help="Default: cuda if available.")
@click.option("--shapes", type=click.Choice(["auto", "tiny", "check", "canonical"]), default="auto",
              help="auto: canonical on a GPU, tiny on the CPU.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def kernels_check_cmd(problem, device, shapes, as_json):
    """Oracle vs deck reference vs Triton for PROBLEM on the available device (needs the 'replay'
    extra: torch and triton)."""
    from forensics.extras import require_extra
    require_extra("kernels check", "torch", "triton")
    from forensics.cliutil import InputError
    from forensics.kernels import registry
    try:
        registry.get(problem)
    except KeyError as e:
        raise InputError(f"{e.args[0]}; known: {', '.join(registry.names())}") from e
    res = kernels_check(problem, device or _default_device(), shapes)
    if as_json:
        click.echo(json.dumps(res, indent=1, default=str))
    else:
        click.echo(f"{res['problem']} {res.get('deck_version')} on {res.get('device')} ({res.get('shapes')}): "
                   f"{'OK' if res.get('ok') else 'FAIL'}" + (f" {res['error']}" if 'error' in res else ""))
        for r in res.get("rows", []):
            click.echo(f"  {r['shape']}: oracle={r.get('oracle_vs_reference', {}).get('ok')} "
                       f"triton={r.get('triton_vs_reference', {}).get('ok')} ref_s={r.get('reference_s')} "
                       f"triton_s={r.get('triton_s')} {r.get('error', '')}")
    sys.exit(0 if res.get("ok") else 1)
