"""Repack Ray's wheel small enough to carry to a machine without network.

    python -m forensics.engine.wheel .whl/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl --out .whl/slim

Ray's wheel is ~79 MB, most of it parts `forensics scan --engine ray` never loads: the Java jars,
the dashboard's web client, and the RLlib, Serve, Data, Tune, Train, LLM and AIR libraries.  This
writes a wheel of the same name without them (RECORD rewritten to match) whose large members
(the raylet, the GCS server, `_raylet.so`) are LZMA-compressed: ~29 MB.  pip installs it as usual
(`pip install --no-deps --no-index --target DIR WHEEL`; Python's zipfile reads LZMA members).
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import sys
import zipfile
from pathlib import Path

RAY_DROP = ("ray/jars/", "ray/dashboard/client/", "ray/rllib/", "ray/serve/", "ray/data/", "ray/tune/",
            "ray/train/", "ray/llm/", "ray/air/")
LZMA_OVER = 1 << 20     # members larger than this are LZMA-compressed


def slim(src: Path, out_dir: Path, drop: tuple[str, ...] = RAY_DROP, lzma_over: int = LZMA_OVER) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / src.name
    if dest.resolve() == src.resolve():
        raise SystemExit("--out must be another directory: the wheel keeps its name")
    with zipfile.ZipFile(src) as zin:
        names = [i for i in zin.infolist() if not i.filename.startswith(drop)]
        record = next((i for i in names if i.filename.endswith(".dist-info/RECORD")), None)
        if record is None:
            raise SystemExit(f"{src}: no RECORD (not a wheel)")
        kept = {i.filename for i in names}
        rows = [r for r in csv.reader(io.StringIO(zin.read(record).decode())) if r and (r[0] in kept or r[0] == record.filename)]
        with zipfile.ZipFile(dest, "w") as zout:
            for info in names:
                if info.filename == record.filename:
                    continue
                data = zin.read(info)
                zi = zipfile.ZipInfo(info.filename, info.date_time)
                zi.external_attr = info.external_attr   # keep the executables executable
                zi.compress_type = zipfile.ZIP_LZMA if len(data) > lzma_over else zipfile.ZIP_DEFLATED
                zout.writestr(zi, data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                for r in rows:   # the hash pip checks is of the bytes, whatever the compression
                    if r[0] == info.filename and r[1] and r[1] != f"sha256={digest}":
                        raise SystemExit(f"{info.filename}: RECORD hash mismatch in {src}")
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(rows)
            zi = zipfile.ZipInfo(record.filename, record.date_time)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(zi, buf.getvalue())
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="Directory for the slim wheel (same file name).")
    a = ap.parse_args(argv)
    dest = slim(a.wheel, a.out)
    print(f"{dest}: {dest.stat().st_size / 1e6:.1f} MB (from {a.wheel.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
