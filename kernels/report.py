"""Markdown tables from a `python -m forensics.kernels.verify --out FILE` result (for BENCHMARKS.md).

    python -m forensics.kernels.report FILE [BEFORE_FILE]

One row per problem and canonical shape: Triton median, library median, their ratio (and, with a
second result file, the ratio it had there), the same three for the device's share alone
(ms_device_median: the host's launch time hidden; "-" in results from before it was measured;
marked * and given no ratio where every trial synced with the host inside the call, so the
interval held host stalls),
then one row per problem for the reference side of the full check.  It only formats what verify
measured; it measures nothing itself.
"""
from __future__ import annotations

import json
import sys


def _shape(s: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in s.items())


def _ratios(result: dict) -> dict:
    out = {}
    for p in result.get("problems", []):
        for r in p.get("shapes", []):
            t = r.get("timing", {})
            out[(p.get("problem"), p.get("deck_version"), _shape(r.get("shape", {})))] = t.get("triton_over_library")
    return out


def _f(x, nd=3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def tables(result: dict, before: dict | None = None) -> str:
    prev = _ratios(before) if before else {}
    head = ("| problem | shape | oracle | Triton ms | library ms | ratio |" + (" before |" if before else "")
            + " Triton device ms | library device ms | device ratio | library op |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for p in result.get("problems", []):
        for r in p.get("shapes", []):
            t = r.get("timing", {})
            key = (p.get("problem"), p.get("deck_version"), _shape(r.get("shape", {})))
            ok = r.get("triton_vs_oracle", {}).get("ok")
            row = (f"| {p.get('problem')}@{p.get('deck_version')} | {key[2]} | {'ok' if ok else 'FAIL'} | "
                   f"{_f(t.get('triton', {}).get('ms_median'))} | {_f(t.get('library', {}).get('ms_median'))} | "
                   f"{_f(t.get('triton_over_library'), 2)} |")
            if before:
                row += f" {_f(prev.get(key), 2)} |"
            tt, lt = t.get("triton", {}), t.get("library", {})
            td, ld = tt.get("ms_device_median"), lt.get("ms_device_median")
            # ms_device_ok False: every trial synced with the host inside the call (marked *): no ratio
            ok_d = tt.get("ms_device_ok", True) and lt.get("ms_device_ok", True)
            row += (f" {_f(td)}{'' if tt.get('ms_device_ok', True) else '*'} | {_f(ld)}"
                    f"{'' if lt.get('ms_device_ok', True) else '*'} | {_f(td / ld if td and ld and ok_d else None, 2)} |")
            lines.append(row + f" {t.get('library', {}).get('op', '')[:48]} |")
    lines += ["", "| problem | full check, reference side s | build | inputs | forward | under 2 s |", "|---|---|---|---|---|---|"]
    for p in result.get("problems", []):
        fc = p.get("full_check_reference", {})
        if "total_s" in fc:
            lines.append(f"| {p.get('problem')}@{p.get('deck_version')} | {fc['total_s']} | {fc.get('build_s')} | "
                         f"{fc.get('inputs_s')} | {fc.get('forward_s')} | {'yes' if fc.get('under_2s') else 'NO'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or len(argv) > 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    loaded = []
    for a in argv:
        try:
            with open(a, encoding="utf-8") as f:
                loaded.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"forensics.kernels.report: cannot read {a}: {e}", file=sys.stderr)
            return 2
    print(tables(loaded[0], loaded[1] if len(loaded) > 1 else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
