"""Where the checkout's files are.  The devkit runs from a source checkout (that is its nature:
the labelled corpora, the reference decks' copies and the kernels' scripts are not package data),
so every checkout-relative path is computed here, from this file's place in the repository, and
holds from any working directory (an editable install keeps __file__ in the checkout)."""

from __future__ import annotations

from pathlib import Path

#: the repository root (this file is devkit/paths.py)
REPO = Path(__file__).resolve().parents[1]
#: the top-level data folder: fixtures/, lint/, replay/, similarity/ (corpus/README.md)
CORPUS_DIR = REPO / "corpus"
#: the committed labelled fixture (`forensics corpus fixture` writes it)
FIXTURES = CORPUS_DIR / "fixtures"
FIXTURE_ARCHIVE = FIXTURES / "archive"

#: the audited real solutions beside the checkout (../shared/real-dev: data to measure with, never copied in)
REAL_DEV = REPO.parent / "shared" / "real-dev"

__all__ = ["REPO", "CORPUS_DIR", "FIXTURES", "FIXTURE_ARCHIVE", "REAL_DEV"]
