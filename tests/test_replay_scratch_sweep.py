"""Scratches of replays killed before their cleanup are removed by the next replay.

Mechanism: a replay process killed from outside (SIGKILL at a bench's run limit, an OOM kill)
never runs Scratch.cleanup; its scratch in the temp dir and its tensor-exchange directory in
/dev/shm stayed for good (this machine had 18 and 26 of them after a day of tests).  A live
scratch holds an flock on its `.live` file, which the kernel drops when the process dies; the
next Scratch removes every scratch whose lock it can take (runner.sweep_dead_scratches).
Look-alikes it must leave: a live replay's scratch in another process, a kept scratch, a scratch
without a lock file, and a symlink named like a scratch (never followed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from forensics.replay.runner import LIVE_LOCK, Scratch

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="flock and O_NOFOLLOW semantics are Linux's")

REPO = Path(__file__).resolve().parent.parent

MAKE = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from forensics.replay.runner import Scratch
    sc = Scratch(b"x = 1\\n", cache_root=Path(sys.argv[1]), work_root=Path(sys.argv[2]))
    print(sc.root, os.path.realpath(sc.io), flush=True)
    if sys.argv[3] == "die":
        os.kill(os.getpid(), 9)          # killed from outside: no cleanup runs
    sys.stdin.read()                     # alive until the test closes stdin
    os.kill(os.getpid(), 9)
""")


def _start(tmp_path: Path, how: str) -> tuple[subprocess.Popen, Path, Path]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-c", MAKE, str(tmp_path / "cache"), str(tmp_path / "work"), how],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    root, io = p.stdout.readline().split()
    return p, Path(root), Path(io)


def test_a_killed_replays_scratch_and_exchange_dir_go_with_the_next_scratch(tmp_path):
    (tmp_path / "work").mkdir()
    p, root, io = _start(tmp_path, "die")
    p.wait(timeout=60)
    assert root.is_dir() and (root / LIVE_LOCK).is_file() and io.is_dir()
    sc = Scratch(b"y = 2\n", cache_root=tmp_path / "cache", work_root=tmp_path / "work")
    try:
        assert root.name in sc.swept and not root.exists() and not io.exists()
        assert sc.root.is_dir()
    finally:
        sc.cleanup()
    assert not sc.root.exists()


def test_a_killed_replays_exchange_dir_goes_also_when_its_scratch_lived_elsewhere(tmp_path):
    """The io directories share one root (/dev/shm/forensics-replay-io) whatever the scratch's own
    temp dir: a replay killed with its scratch in another folder still has its io/ removed."""
    (tmp_path / "work").mkdir()
    p, root, io = _start(tmp_path, "die")
    p.wait(timeout=60)
    if io.parent == root:
        pytest.skip("no shared io root here: io/ lives inside the scratch")
    other = tmp_path / "elsewhere"
    other.mkdir()
    sc = Scratch(b"y = 2\n", cache_root=tmp_path / "cache", work_root=other)
    sc.cleanup()
    assert io.name in sc.swept and not io.exists() and not io.with_name(io.name + ".live").exists()
    assert root.is_dir()      # not under `other`: its own folder's next scratch removes it


def test_live_kept_unlocked_and_symlinked_scratches_are_left_alone(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    live, live_root, live_io = _start(tmp_path, "wait")      # another process's replay, alive
    kept = Scratch(b"k = 1\n", cache_root=tmp_path / "cache", work_root=work, keep=True)
    kept.cleanup()                                          # kept for the user
    old = work / "replay-0123456789ab-oldstyle"             # from before the lock: nothing says it is dead
    old.mkdir()
    (old / "sol").mkdir()
    outside = tmp_path / "outside"                          # a symlink named like a scratch, to a dead-looking tree
    outside.mkdir()
    (outside / LIVE_LOCK).write_text("")
    (outside / "precious").write_text("keep me")
    (work / "replay-ba9876543210-planted").symlink_to(outside, target_is_directory=True)
    try:
        sc = Scratch(b"y = 2\n", cache_root=tmp_path / "cache", work_root=work)
        sc.cleanup()
        # (other tests' killed replays share the io root: only these names are this test's business)
        assert not {live_root.name, live_io.name, kept.root.name, old.name, "replay-ba9876543210-planted"} & set(sc.swept)
        assert live_root.is_dir() and live_io.is_dir()
        assert kept.root.is_dir() and not (kept.root / LIVE_LOCK).exists()
        assert old.is_dir() and (outside / "precious").read_text() == "keep me"
    finally:
        live.stdin.close()
        live.wait(timeout=60)
    sc = Scratch(b"y = 3\n", cache_root=tmp_path / "cache", work_root=work)   # now it is dead: it goes
    sc.cleanup()
    assert live_root.name in sc.swept and not live_root.exists() and not live_io.exists()
