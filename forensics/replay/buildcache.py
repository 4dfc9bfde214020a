"""The persistent build cache: what each replay left in it, a cap, and eviction (issue 36).

Each solution's build cache (`<cache root>/<sha256[:32]>/`: torch_extensions, triton, cuda) outlives
its replay so that the next replay of the same file does not rebuild (runner.Scratch).  It is written
by the solution's process, so it can hold anything: one solution left 1 GiB and 20,000 files.  After
every replay (`Scratch.cleanup`) the cache of that solution is measured (`usage`: files, bytes on disk
and apparent bytes, walked by directory descriptors, never through a symlink) and reported with the
replay (`info.build_cache`), then:

* a cache over the per-solution cap (`FORENSICS_REPLAY_CACHE_SOLUTION_MAX`, default 2 GiB, and
  `..._SOLUTION_MAX_FILES`, default 20,000 files) is removed now (the next replay rebuilds);
* while the caches of the root together are over the root's cap (`FORENSICS_REPLAY_CACHE_MAX`,
  default 20 GiB, and `..._MAX_FILES`, default 200,000 files), the least recently used one goes first
  (LRU by replay: each replay touches its claim file `<sha>.claim`, which only the parent writes),
  never one a live replay holds (its claim's flock) and never the one just used.

Each cache's last measured usage is kept beside its claim (`<sha>.usage`, JSON, parent-written), so
the root's total is the sum of those records, not a walk of every cache."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import time
from pathlib import Path

_CACHE_NAME = re.compile(r"[0-9a-f]{32}")
DEFAULTS = {"FORENSICS_REPLAY_CACHE_MAX": 20 * 2**30, "FORENSICS_REPLAY_CACHE_MAX_FILES": 200_000,
            "FORENSICS_REPLAY_CACHE_SOLUTION_MAX": 2 * 2**30, "FORENSICS_REPLAY_CACHE_SOLUTION_MAX_FILES": 20_000}
MAX_WALK = 2_000_000      # entries; past it the count is a lower bound ("partial")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def limits() -> dict[str, int]:
    """The caps from the environment (sizes like '2G' or bytes), defaults where unset or unreadable."""
    from .sandbox import parse_size
    out = {}
    for k, v in DEFAULTS.items():
        try:
            out[k] = int(parse_size(os.environ[k])) if k in os.environ else v
        except (ValueError, TypeError):
            out[k] = v
    return {"max_bytes": out["FORENSICS_REPLAY_CACHE_MAX"], "max_files": out["FORENSICS_REPLAY_CACHE_MAX_FILES"],
            "solution_max_bytes": out["FORENSICS_REPLAY_CACHE_SOLUTION_MAX"],
            "solution_max_files": out["FORENSICS_REPLAY_CACHE_SOLUTION_MAX_FILES"]}


def usage(path: str | Path) -> dict:
    """{files, dirs, bytes (on disk: st_blocks), apparent_bytes (st_size), partial} of the tree at
    `path`, walked by descriptors (a symlink counts as a file and is never followed)."""
    from .runner import walk_dirs
    out = {"files": 0, "dirs": 0, "bytes": 0, "apparent_bytes": 0, "partial": False}
    try:
        top = os.open(path, _DIR)
    except OSError:
        return out
    seen = 0
    try:
        for _, dfd, _, names in walk_dirs(top, 64):
            out["dirs"] += 1
            for n in names:
                seen += 1
                if seen > MAX_WALK:
                    out["partial"] = True
                    return out
                try:
                    st = os.lstat(n, dir_fd=dfd)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    continue
                out["files"] += 1
                out["bytes"] += st.st_blocks * 512
                out["apparent_bytes"] += st.st_size
    finally:
        os.close(top)
    out["dirs"] -= 1     # the top itself
    return out


def _remove(root: Path, name: str) -> bool:
    """Remove root/name (a cache directory) without following anything in it."""
    try:
        rfd = os.open(root, _DIR)
    except OSError:
        return False
    try:
        try:
            st = os.lstat(name, dir_fd=rfd)
        except FileNotFoundError:
            return True
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=rfd)
        else:
            os.unlink(name, dir_fd=rfd)
        return True
    except OSError:
        return False
    finally:
        os.close(rfd)


def _record(root: Path, name: str, use: dict) -> None:
    try:
        tmp = root / f"{name}.usage.new"
        tmp.write_text(json.dumps(use))
        os.replace(tmp, root / f"{name}.usage")
    except OSError:
        pass


def _recorded(root: Path, name: str) -> dict | None:
    try:
        d = json.loads((root / f"{name}.usage").read_text())
        return d if isinstance(d, dict) else None
    except (OSError, ValueError):
        return None


def _last_used(root: Path, name: str) -> float:
    for p in (root / f"{name}.claim", root / name):
        try:
            return os.lstat(p).st_mtime
        except OSError:
            continue
    return 0.0


def _take(root: Path, name: str) -> int:
    """The claim of another solution's cache, locked by this call (-1: a live replay holds it)."""
    import fcntl
    try:
        fd = os.open(root / f"{name}.claim", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
                     0o600)
    except OSError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError:
        os.close(fd)
        return -1


def account(cache: Path, claim_fd: int, lim: dict | None = None) -> dict:
    """After a replay: measure its solution's cache, enforce both caps, evict LRU.  -> the report
    (info.build_cache).  `claim_fd`: this replay's claim (-1 where another replay of the same solution
    held it: then this cache is in use and is neither removed nor touched)."""
    lim = lim or limits()
    root, name = cache.parent, cache.name
    use = usage(cache)
    report: dict = {"dir": str(cache), **use, "limits": lim, "evicted": []}
    if claim_fd >= 0:
        try:
            os.utime(claim_fd)          # the LRU clock: the last replay that used this cache
        except OSError:
            pass
        if use["bytes"] > lim["solution_max_bytes"] or use["files"] > lim["solution_max_files"]:
            if _remove(root, name):
                report["evicted"].append({"dir": name, "why": "over the per-solution cap", **use})
                use = {"files": 0, "dirs": 0, "bytes": 0, "apparent_bytes": 0, "partial": False}
    _record(root, name, use)
    try:
        names = [n for n in os.listdir(root) if _CACHE_NAME.fullmatch(n)]
    except OSError:
        names = []
    sizes = {}
    for n in names:
        rec = _recorded(root, n)
        if rec is None:
            rec = usage(root / n)
            _record(root, n, rec)
        sizes[n] = rec
    total_b = sum(int(r.get("bytes") or 0) for r in sizes.values())
    total_f = sum(int(r.get("files") or 0) for r in sizes.values())
    for n in sorted((n for n in names if n != name), key=lambda n: _last_used(root, n)):
        if total_b <= lim["max_bytes"] and total_f <= lim["max_files"]:
            break
        fd = _take(root, n)
        if fd < 0:
            continue        # a live replay of that solution uses it
        try:
            if _remove(root, n):
                r = sizes[n]
                total_b -= int(r.get("bytes") or 0)
                total_f -= int(r.get("files") or 0)
                report["evicted"].append({"dir": n, "why": "least recently used, over the cache root's cap",
                                          "bytes": r.get("bytes"), "files": r.get("files")})
                for suffix in (".usage",):
                    try:
                        os.unlink(root / f"{n}{suffix}")
                    except OSError:
                        pass
        finally:
            os.close(fd)
    report["root_total"] = {"bytes": total_b, "files": total_f, "caches": len(names) - sum(
        1 for e in report["evicted"] if e["dir"] != name)}
    report["at"] = time.time()
    return report
