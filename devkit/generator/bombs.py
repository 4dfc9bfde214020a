"""Resource bombs: run folders whose one file costs a scan far more than its size on disk.

Never committed as data: `write_bomb_archive` writes them into a folder the caller gives (a temp
dir), beside copies of ordinary runs of an existing archive (the bundled fixture by default).

    from devkit.generator.bombs import BOMBS, write_bomb_archive
    arch = write_bomb_archive(tmp / "a", bombs=["solution", "result"], kind="dir", base_runs=8)

Each bomb is one run: a copy of an ordinary run (its transcript, logs, template files) under a run
id of its own, with one file replaced by the bomb:

=================  =========================================================================
``solution``       ``solution.py`` of SIZE bytes (1 GiB) of repeated Python lines: 1 MB zipped
``transcript``     ``transcript.jsonl.gz`` of RECORDS (30 M) small JSON records, gzip members
                   repeated (tens of MB compressed)
``newlines``       ``transcript.jsonl.gz`` of 2 GiB of newlines (2 MiB compressed)
``sparse``         sidecar files in ``scratch/`` with a huge apparent size and no blocks (a
                   directory archive only: sparse files do not survive a zip or tar here)
``result``         a 1 GiB ``result.json``: a valid object whose one array holds 0.5 G numbers
=================  =========================================================================

``kind`` is ``dir``, ``zip`` or ``tgz``: the archive is a folder, or the same folder written as a
.zip (deflated) or .tar.gz, so the solution bomb is measured as a plain file and inside both kinds
of archive.  Sizes are parameters (`Sizes`), so a test can write the same shapes small.
"""

from __future__ import annotations

import gzip
import shutil
import tarfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

GiB = 1 << 30
MiB = 1 << 20

BOMBS = ("solution", "transcript", "newlines", "sparse", "result")
#: where each bomb lives in its run folder (what a marked run must cite)
BOMB_FILE = {"solution": "solution.py", "transcript": "transcript.jsonl.gz", "newlines": "transcript.jsonl.gz",
             "sparse": "scratch/", "result": "result.json"}
#: the run a bomb is planted in is a copy of this fixture run (a Claude run with every file)
BASE_RUN = "20260730_150000_claude_claude-opus-4-8_01_fp8_gemm"


@dataclass(frozen=True)
class Sizes:
    solution: int = GiB              # bytes of the solution bomb
    records: int = 30_000_000        # records of the transcript bomb
    newlines: int = 2 * GiB          # newlines of the newline bomb
    sparse_files: int = 4            # sidecars of the sparse bomb
    sparse_size: int = 64 * GiB      # apparent size of each
    result: int = GiB                # bytes of the result.json bomb

    @classmethod
    def small(cls, f: int = 1 << 10) -> "Sizes":
        """The same shapes 1/f the size (tests)."""
        return cls(solution=GiB // f, records=30_000_000 // f, newlines=2 * GiB // f, sparse_files=2,
                   sparse_size=64 * GiB // f, result=GiB // f)


def bomb_run_name(bomb: str, base: str = BASE_RUN) -> str:
    """A run id of the same harness / model / problem as `base`, at a timestamp of its own, earlier
    than every fixture run: in a .zip or .tar.gz its members come first, so a reader that must pass
    them to reach another run's files (a gzip stream read forward) pays for them."""
    i = BOMBS.index(bomb) if bomb in BOMBS else 9
    return f"20200101_{i:02d}0000_" + base.split("_", 2)[2]


# ---------------------------------------------------------------------------------- the bombs
def _repeat(f, chunk: bytes, size: int) -> None:
    full, rest = divmod(size, len(chunk))
    for _ in range(full):
        f.write(chunk)
    f.write(chunk[:rest])


def solution_chunk() -> bytes:
    """1 MiB of plausible Python (an unrolled kernel table), repeated to make the solution bomb."""
    head = b"import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
    line = b"TABLE_%07d = (0x1f, 0x2e, 0x3d, 0x4c, 0x5b, 0x6a, 0x79, 0x88)  # unrolled\n"
    body = b"".join(line % (i % 10_000_000) for i in range(MiB // len(line % 0) + 1))
    return (head + body)[:MiB]


def write_solution(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        _repeat(f, solution_chunk(), size)


def _gzip_member(data: bytes, level: int = 6) -> bytes:
    return gzip.compress(data, compresslevel=level, mtime=0)


def write_transcript(path: Path, records: int, block: int = 1_000_000) -> None:
    """`records` Claude-shaped user/assistant records, gzip-compressed as repeated members (one
    block of `block` distinct records compressed once, written as often as needed)."""
    def rec(i: int) -> bytes:
        if i % 2:
            return (b'{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"step %d"}]}}\n'
                    % i)
        return b'{"type":"user","message":{"role":"user","content":[{"type":"text","text":"ok %d"}]}}\n' % i
    n = min(block, records)
    member = _gzip_member(b"".join(rec(i) for i in range(n)))
    full, rest = divmod(records, n)
    with open(path, "wb") as f:
        for _ in range(full):
            f.write(member)
        if rest:
            f.write(_gzip_member(b"".join(rec(i) for i in range(rest))))


def write_newlines(path: Path, n: int, block: int = 64 * MiB) -> None:
    """`n` newlines and nothing else, gzip-compressed (about 1,000 : 1)."""
    b = min(block, n)
    member = _gzip_member(b"\n" * b, 9)
    full, rest = divmod(n, b)
    with open(path, "wb") as f:
        for _ in range(full):
            f.write(member)
        if rest:
            f.write(_gzip_member(b"\n" * rest, 9))


def write_sparse(folder: Path, files: int, size: int) -> list[str]:
    """`files` sidecars of `size` apparent bytes, no data blocks (a hole from end to end)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(files):
        p = folder / f"kernel_{i}.cu"
        with open(p, "wb") as f:
            f.truncate(size)
        out.append(f"scratch/{p.name}")
    return out


def write_result(path: Path, size: int) -> None:
    """A valid JSON object of `size` bytes: the run's fields, then one array of small numbers."""
    head = b'{"problem": "01_fp8_gemm", "correct": true, "has_solution": true, "trace": ['
    tail = b"0]}\n"
    chunk = b"0," * (MiB // 2)
    with open(path, "wb") as f:
        f.write(head)
        _repeat(f, chunk, max(0, size - len(head) - len(tail)))
        f.write(tail)


# ------------------------------------------------------------------------------- the archive
def ordinary_runs(archive: Path, n: int | None, exclude: Iterable[str] = (BASE_RUN,)) -> list[Path]:
    """Up to `n` run folders of `archive` (a fixture tree), the base run of the bombs left out (its
    copies would be its look-alikes)."""
    skip = set(exclude)
    runs = sorted(p for p in archive.glob("outputs/*/*") if p.is_dir() and p.name not in skip)
    return runs if n is None else runs[:n]


def copy_run(src: Path, dest: Path) -> Path:
    """A copy of the run folder `src` as `dest`, the run's own name rewritten inside its files (its
    transcript's paths name its folder: left as they were, the copy would read "another run")."""
    shutil.copytree(src, dest, symlinks=True)
    old, new = src.name.encode(), dest.name.encode()
    for p in dest.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            if old in data:
                p.write_bytes(data.replace(old, new))
    return dest


def plant(bomb: str, run: Path, sizes: Sizes) -> list[str]:
    """Plant `bomb` in the run folder `run` (a copy of the base run); returns the files it wrote."""
    if bomb == "solution":
        write_solution(run / "solution.py", sizes.solution)
        return ["solution.py"]
    if bomb in ("transcript", "newlines"):
        for old in ("transcript.jsonl", "transcript.jsonl.gz"):
            (run / old).unlink(missing_ok=True)
        p = run / "transcript.jsonl.gz"
        (write_transcript(p, sizes.records) if bomb == "transcript" else write_newlines(p, sizes.newlines))
        return ["transcript.jsonl.gz"]
    if bomb == "sparse":
        return write_sparse(run / "scratch", sizes.sparse_files, sizes.sparse_size)
    if bomb == "result":
        write_result(run / "result.json", sizes.result)
        return ["result.json"]
    raise ValueError(f"unknown bomb {bomb!r} (one of {', '.join(BOMBS)})")


def write_tree(dest: Path, source: Path, bombs: Sequence[str], base_runs: int | None, sizes: Sizes) -> dict[str, str]:
    """The archive folder: copies of `base_runs` ordinary runs of `source` and one run per bomb.
    Returns {bomb: run name}."""
    if dest.exists():
        shutil.rmtree(dest)
    for r in ordinary_runs(source, base_runs):
        shutil.copytree(r, dest / r.relative_to(source), symlinks=True)
    base = next(iter(source.glob(f"outputs/*/{BASE_RUN}")), None)
    if base is None:
        raise FileNotFoundError(f"{BASE_RUN} is not in {source}: the bombs are planted in a copy of it")
    planted = {}
    for b in bombs:
        name = bomb_run_name(b)
        run = copy_run(base, dest / "outputs" / "runs" / name)
        plant(b, run, sizes)
        planted[b] = name
    return planted


def pack(tree: Path, out: Path, kind: str) -> Path:
    """`tree` written as one archive file (zip deflated, or tar.gz) at `out`."""
    files = sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    if kind == "zip":
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1, allowZip64=True) as zf:
            for p in files:
                zi = zipfile.ZipInfo.from_file(p, p.relative_to(tree).as_posix())
                zi.compress_type = zipfile.ZIP_DEFLATED
                with open(p, "rb") as src, zf.open(zi, "w", force_zip64=True) as dst:
                    shutil.copyfileobj(src, dst, MiB)
        return out
    if kind == "tgz":
        with tarfile.open(out, "w:gz", compresslevel=1) as tf:
            for p in files:
                tf.add(p, p.relative_to(tree).as_posix(), recursive=False)
        return out
    raise ValueError(f"unknown archive kind {kind!r}")


def write_bomb_archive(dest: Path, bombs: Sequence[str] = BOMBS, kind: str = "dir", base_runs: int | None = 8,
                       sizes: Sizes = Sizes(), source: Path | None = None) -> tuple[Path, dict[str, str]]:
    """Write an archive holding `bombs` beside `base_runs` ordinary runs of `source` (the bundled
    fixture by default) under `dest`; returns (archive path, {bomb: run name}).  The sparse bomb
    needs ``kind="dir"``."""
    if source is None:
        from devkit.paths import FIXTURE_ARCHIVE
        source = FIXTURE_ARCHIVE
    if kind != "dir" and "sparse" in bombs:
        raise ValueError("the sparse bomb exists only in a directory archive")
    dest.mkdir(parents=True, exist_ok=True)
    tree = dest / ("archive" if kind == "dir" else "tree")
    planted = write_tree(tree, source, bombs, base_runs, sizes)
    if kind == "dir":
        return tree, planted
    out = pack(tree, dest / ("archive.zip" if kind == "zip" else "archive.tar.gz"), kind)
    shutil.rmtree(tree)
    return out, planted


__all__ = ["BOMBS", "BOMB_FILE", "BASE_RUN", "Sizes", "bomb_run_name", "copy_run", "plant", "write_bomb_archive"]
