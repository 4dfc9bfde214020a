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
