"""The auditor notebooks run as shipped (nbclient, kernel python3) and produce their key outputs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NB = Path(__file__).resolve().parent.parent / "notebooks"


def run_nb(name: str, env: dict[str, str] | None = None):
    nb = nbformat.read(NB / name, as_version=4)
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NB)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    return nb


def outputs(nb) -> str:
    text = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            assert o.get("output_type") != "error", o
            text.append(o.get("text", "") or "".join(str(v) for k, v in o.get("data", {}).items() if k == "text/plain"))
    return "\n".join(text)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    from forensics.pipeline import scan
    tmp = tmp_path_factory.mktemp("nbdb")
    archive = NB.parent / "corpus" / "fixtures" / "archive"
    if not archive.exists():
        archive = tmp / "gen"
        subprocess.run([sys.executable, "-m", "forensics.cli", "corpus", "generate", str(archive), "--runs", "24",
                        "--seed", "3"], check=True, capture_output=True)
    return scan(archive, out=tmp / "r", progress=False, reports=False).db


def test_contamination_notebook_as_shipped():
    nb = run_nb("contamination.ipynb", {"FORENSICS_DB": ""} if "FORENSICS_DB" in os.environ else None)
    out = outputs(nb)
    assert "store:" in out and "classes" in out
    assert "run/foreign-run pairs with a deliberate read or copy" in out
    assert "contaminated yet correct:" in out


def test_timeline_notebook(db):
    nb = run_nb("timeline.ipynb", {"FORENSICS_DB": db})
    out = outputs(nb)
    assert "investigating" in out and "versions; last edit at call" in out
    assert "plot bytes:" in out
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert images, "the trajectory plot was not displayed"
    assert "verdict" in out and "rule V" in out
