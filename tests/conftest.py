"""Shared test fixtures: paths to the repository, the bundled corpus and ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FORENSICS_SHARED", REPO.parent / "shared"))
FIXTURE_ARCHIVE = REPO / "corpus" / "fixtures" / "archive"
FIXTURE_LABELS = REPO / "corpus" / "fixtures" / "labels.json"


def make_venv(venv: Path, *args: str, env: dict | None = None) -> Path:
    """`python -m venv --system-site-packages [args] VENV` that sees what this test run was installed
    into, -> its python.  Where this interpreter is itself a venv, a new venv's "system" site is the
    base interpreter's, which lacks torch, duckdb and the editable installs; so the running
    interpreter's site-packages are added too, through a .pth calling site.addsitedir (their own .pth
    files, editable installs, are processed), after the new venv's own site-packages."""
    import site
    import subprocess
    import sys
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", *args, str(venv)], check=True, env=env)
    if sys.prefix != sys.base_prefix:
        dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
        own = next(venv.glob("lib/python*/site-packages"))
        (own / "zz-parent-venv-site.pth").write_text(
            "import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs) + "\n")
    return venv / "bin" / "python"


@pytest.fixture(autouse=True)
def _fresh_replay_inputs():
    """Each test draws its own deck inputs: the replay keeps them across the replays of a process
    (forensics/replay/oracle.py SHARED_INPUTS), which would make a test's counts depend on the tests
    that ran before it.  Only where the replay is loaded (no torch import for the others)."""
    import sys
    oracle = sys.modules.get("forensics.replay.oracle")
    if oracle is not None:
        oracle.SHARED_INPUTS.clear()
    yield


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared() -> Path:
    return SHARED


# A hang fails fast, with every thread's stack, instead of eating CI's 90 minutes (a scan's worker
# pool once hung the suite until the limit).  Per test, setup and teardown included.
HANG_S = float(os.environ.get("FORENSICS_TEST_HANG_S", 900))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    import faulthandler
    if HANG_S > 0:      # the stacks name the test (its file and function are on the main thread's)
        faulthandler.dump_traceback_later(HANG_S, exit=True)
    try:
        yield
    finally:
        if HANG_S > 0:
            faulthandler.cancel_dump_traceback_later()
