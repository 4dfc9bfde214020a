"""Do two stores agree?  Table by table, leaving out only the columns that time things.

    python -m forensics.engine.compare local/audit.duckdb ray/audit.duckdb [--json]

For the scan of one archive by two engines (or two runs of one): every table's rows are compared
as multisets, without the columns that record when a row was written, what a replay's clock
measured or the stat of the archive's files as read (TIMING_COLUMNS).  The replays' measurements
are listed side by side instead: per run, probe and shape, the milliseconds each store recorded.  Exit status 0 when every table agrees, 1
otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

# when a row was written, and what a replay measured (the clock, not the verdict); and the stat of
# the copy of the archive that was read (runs.stamp: inodes and ctimes, forensics.store.ingest)
TIMING_COLUMNS = {("archives", "ingested_at"), ("runs", "ingested_at"), ("verdicts", "adjudicated_at"),
                  ("replay_results", "ran_at"), ("replay_results", "ms"), ("replay_results", "tflops"),
                  ("replay_results", "gbps"), ("replay_results", "data"), ("runs", "stamp")}
# what a scan keeps to resume, not what it found (which stages ran where, the code digests: a scan
# that wrote reports has the report's rows, one without has none): compared only when named in `tables`
STATE_TABLES = {"stage_runs", "stage_code"}


def table_rows(db: str | Path, table: str, where: str = "") -> list[tuple] | None:
    """The table's rows, timing columns left out; None if the store has no such table (a store
    written before the table was added to the schema)."""
    import duckdb

    from forensics.store import schema as S
    t = S.TABLE_BY_NAME[table]
    cols = ", ".join(f'"{c}"' for c in t.column_names() if (table, c) not in TIMING_COLUMNS)
    con = duckdb.connect(str(db), read_only=True)
    try:
        if not con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = ?", [table]).fetchall():
            return None
        return con.execute(f"select {cols} from {table} {where} order by all").fetchall()
    finally:
        con.close()


def diff_stores(a: str | Path, b: str | Path, where: str = "", tables=None) -> dict[str, tuple[int | None, int | None]]:
    """Tables (all but STATE_TABLES, or `tables`) whose rows differ, timing columns left out: name ->
    (rows in a, rows in b; None where that store has no such table).  `where` (an SQL WHERE clause)
    filters the tables that have a run_id.  The rows are compared as multisets inside DuckDB (both
    stores attached read-only, EXCEPT ALL both ways), so two stores of 100,000 runs compare in the
    memory DuckDB allows itself, not as Python tuples."""
    import duckdb

    from forensics.store import schema as S
    if Path(a).resolve() == Path(b).resolve():
        return {}
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET enable_progress_bar = false")
        con.execute("ATTACH ? AS sa (READ_ONLY)", [str(a)])
        con.execute("ATTACH ? AS sb (READ_ONLY)", [str(b)])
        have = {(d, t) for d, t in con.execute(
            "select database_name, table_name from duckdb_tables() where schema_name = 'main'").fetchall()}
        out = {}
        for t in S.TABLES:
            if (t.name not in tables) if tables is not None else t.name in STATE_TABLES:
                continue
            w = where if (where and "run_id" in t.column_names()) else ""
            ina, inb = ("sa", t.name) in have, ("sb", t.name) in have
            if not (ina and inb):
                if ina or inb:
                    n = con.execute(f"select count(*) from {'sa' if ina else 'sb'}.main.{t.name} {w}").fetchone()[0]
                    out[t.name] = (n, None) if ina else (None, n)
                continue
            cols = ", ".join(f'"{c}"' for c in t.column_names() if (t.name, c) not in TIMING_COLUMNS)
            qa, qb = f"select {cols} from sa.main.{t.name} {w}", f"select {cols} from sb.main.{t.name} {w}"
            na, nb, only_a, only_b = con.execute(
                f"select (select count(*) from ({qa})), (select count(*) from ({qb})), "
                f"(select count(*) from ({qa} except all {qb})), (select count(*) from ({qb} except all {qa}))").fetchone()
            if na != nb or only_a or only_b:
                out[t.name] = (na, nb)
        return out
    finally:
        con.close()


def replay_timings(a: str | Path, b: str | Path) -> list[dict[str, Any]]:
    """The timing rows of both stores' replays, matched on run, probe, shape and case."""
    import duckdb

    def read(db):
        con = duckdb.connect(str(db), read_only=True)
        try:
            return {(r[0], r[1], r[2], r[3]): (r[4], r[5]) for r in con.execute(
                "select run_id, probe, coalesce(shape, ''), coalesce(case_name, ''), ms, device from replay_results "
                "where ms is not null").fetchall()}
        finally:
            con.close()
    ta, tb = read(a), read(b)
    out = []
    for k in sorted(set(ta) | set(tb)):
        ma, mb = ta.get(k, (None, None)), tb.get(k, (None, None))
        out.append({"run_id": k[0], "probe": k[1], "shape": k[2], "case": k[3], "ms_a": ma[0], "ms_b": mb[0],
                    "ratio_b_a": round(mb[0] / ma[0], 3) if ma[0] and mb[0] else None, "device": ma[1] or mb[1]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from forensics.store import schema as S
    diff = diff_stores(args.a, args.b)
    counts = {t.name: len(table_rows(args.a, t.name) or ()) for t in S.TABLES}
    timings = replay_timings(args.a, args.b)
    if args.json:
        import orjson
        print(orjson.dumps({"a": str(args.a), "b": str(args.b), "differ": diff, "rows": counts,
                            "replay_timings": timings}, option=orjson.OPT_INDENT_2).decode())
    else:
        for t in S.TABLES:
            d = diff.get(t.name)
            state = "same" if d is None else f"only in b ({d[1]} rows)" if d[0] is None else \
                f"only in a ({d[0]} rows)" if d[1] is None else f"DIFFER {d}"
            print(f"{t.name:<18} {counts[t.name]:>8} rows  {state}")
        if timings:
            print(f"\nreplay timings (ms): {args.a} | {args.b}")
            for r in timings:
                print(f"  {r['run_id'][:60]:<60} {r['probe']:<10} {r['shape'][:30]:<30} {r['ms_a']!s:>10.10} "
                      f"{r['ms_b']!s:>10.10}  {r['ratio_b_a'] or ''}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
