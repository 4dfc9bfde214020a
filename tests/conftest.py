"""Shared test fixtures: paths to the repository, the bundled corpus and ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FORENSICS_SHARED", REPO.parent / "shared"))
FIXTURE_ARCHIVE = REPO / "corpus" / "fixtures" / "archive"
FIXTURE_LABELS = REPO / "corpus" / "fixtures" / "labels.json"


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
