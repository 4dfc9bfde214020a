"""Throughput of parse_source vs bare `for line in f: orjson.loads(line)` (not a test; run by hand).

    python -m forensics.transcripts.perf [N_LINES] [PROGRESS_FRACTION] [reorder]
    python -m forensics.transcripts.perf files PATH...     # existing transcripts instead

Writes /tmp/forensics_perf_claude.jsonl: a Claude stream-json transcript where PROGRESS_FRACTION
(default 0.97) of the loop iterations write a system/task_progress heartbeat and the rest an
assistant message (thinking + text + Bash tool_use blocks, one line each, shared id and usage)
or a user tool_result line.  With ``reorder`` the heartbeat keys are written subtype-first, so
the byte-prefix fast path does not apply and every line is decoded.  Times are CPU seconds, best of 7 interleaved runs.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import orjson

from forensics.transcripts import parse_source


def generate(path: Path, n: int, progress: float = 0.97, seed: int = 0, reorder: bool = False) -> None:
    rnd = random.Random(seed)
    with path.open("wb") as f:
        f.write(orjson.dumps({"type": "system", "subtype": "init", "cwd": "/workspace/problems/01",
                              "session_id": "s", "model": "claude-opus", "tools": ["Bash", "Read"],
                              "mcp_servers": [], "claude_code_version": "2.1.0"}) + b"\n")
        i = 0
        m = 0
        while i < n:
            r = rnd.random()
            if r < progress:
                head = ({"subtype": "task_progress", "type": "system"} if reorder else
                        {"type": "system", "subtype": "task_progress"})
                f.write(orjson.dumps({**head, "task_id": f"b{m % 7}",
                                      "tool_use_id": f"toolu_{m:08d}", "description": "uv run python check.py",
                                      "task_type": "local_bash", "usage": {"total_tokens": i, "tool_uses": 3,
                                      "duration_ms": i * 10}, "uuid": f"u-{i}", "session_id": "s"}) + b"\n")
            elif r < progress + (1 - progress) / 2:
                m += 1
                usage = {"input_tokens": 3, "output_tokens": 120, "cache_read_input_tokens": 40000,
                         "cache_creation_input_tokens": 900}
                for blk in ({"type": "thinking", "thinking": "", "signature": "x" * 200},
                            {"type": "text", "text": "Let me run the checker again. " * 5},
                            {"type": "tool_use", "id": f"toolu_{m:08d}", "name": "Bash",
                             "input": {"command": "cd /workspace && uv run python check.py 2>&1 | tail -20"}}):
                    f.write(orjson.dumps({"type": "assistant", "message": {"id": f"msg_{m}", "model": "claude",
                                          "role": "assistant", "content": [blk], "stop_reason": None,
                                          "usage": usage}, "parent_tool_use_id": None, "session_id": "s",
                                          "uuid": f"u-{i}"}) + b"\n")
                    i += 1
            else:
                f.write(orjson.dumps({"type": "user", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{m:08d}",
                     "content": "shape=0 ok\n" * 20 + "PASS", "is_error": False}]},
                    "parent_tool_use_id": None, "session_id": "s", "uuid": f"u-{i}"}) + b"\n")
            i += 1
        f.write(orjson.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": m,
                              "usage": {"input_tokens": 1, "output_tokens": 2}, "total_cost_usd": 1.5}) + b"\n")


def bare(*paths: Path) -> float:
    t = time.process_time()
    for path in paths:
        with path.open("rb") as f:
            for line in f:
                try:
                    orjson.loads(line)
                except orjson.JSONDecodeError:
                    pass
    return time.process_time() - t


def ours(*paths: Path, harness: str | None = "claude") -> tuple[float, int]:
    t = time.process_time()
    k = 0
    for path in paths:
        with path.open("rb") as f:
            for _ev in parse_source(f, source="transcript.jsonl", harness=harness):
                k += 1
    return time.process_time() - t, k


def compare(paths: list[Path], harness: str | None) -> tuple[float, float, int]:
    bs, os_, k = [], [], 0
    for _ in range(7):  # interleaved, best of 7 each, CPU time (the machine is shared)
        bs.append(bare(*paths))
        t, k = ours(*paths, harness=harness)
        os_.append(t)
    return min(bs), min(os_), k


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "files":
        paths = [Path(p) for p in sys.argv[2:]]
        size = sum(p.stat().st_size for p in paths)
        b, o, k = compare(paths, None)
        print(f"files={len(paths)} bytes={size} events={k}")
        print(f"bare orjson: {b:.3f}s ({size / b / 1e6:.0f} MB/s)   parse_source: {o:.3f}s "
              f"({size / o / 1e6:.0f} MB/s)   ratio={o / b:.2f}")
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    progress = float(sys.argv[2]) if len(sys.argv) > 2 else 0.97
    path = Path("/tmp/forensics_perf_claude.jsonl")
    reorder = len(sys.argv) > 3 and sys.argv[3] == "reorder"
    generate(path, n, progress, reorder=reorder)
    size = path.stat().st_size
    b, o, k = compare([path], "claude")
    print(f"lines={n} progress_fraction={progress} reorder={reorder} bytes={size} events={k}")
    print(f"bare orjson: {b:.3f}s ({size / b / 1e6:.0f} MB/s)   parse_source: {o:.3f}s "
          f"({size / o / 1e6:.0f} MB/s)   ratio={o / b:.2f}")


if __name__ == "__main__":
    main()
