"""The auditor notebooks: the README's recipe runs as written (nbconvert, from the folder the user
types it in, the store named relative to that folder), and a store that is missing or not a store is
one line naming what to run - never a scan of something else in its place.

The store lookup itself (forensics/report/notebook.py) is tested directly; the notebooks are executed
only where nbconvert/nbclient and a Jupyter kernel are installed (the `test` extra has them)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from forensics.report.notebook import NoStore, find_notebook_store, launch_dir, open_store

REPO = Path(__file__).resolve().parent.parent
NB = REPO / "notebooks"
README = REPO / "README.md"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    from forensics.pipeline import scan
    tmp = tmp_path_factory.mktemp("nbdb")
    return scan(REPO / "corpus" / "fixtures" / "archive", out=tmp / "report", progress=False, reports=False).db


def readme_notebook_block() -> list[str]:
    """The shell lines of the README's notebook recipe (the ```sh block that runs nbconvert)."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    mine = [b for b in blocks if "jupyter nbconvert" in b]
    assert len(mine) == 1, "the README has one ```sh block with the notebook recipe"
    return [ln.split("  #")[0].strip() for ln in mine[0].splitlines() if ln.strip() and not ln.startswith("#")]


# --------------------------------------------------------------------------- the store lookup

def test_relative_store_is_read_against_the_launch_folder(tmp_path, db):
    """Jupyter runs the kernel in notebooks/; the user typed report/audit.duckdb at the root."""
    root = tmp_path / "clone"
    (root / "notebooks").mkdir(parents=True)
    (root / "report").mkdir()
    shutil.copy(db, root / "report" / "audit.duckdb")
    env = {"FORENSICS_DB": "report/audit.duckdb", "PWD": str(root)}
    path, why = find_notebook_store(env, cwd=root / "notebooks")
    assert Path(path) == (root / "report" / "audit.duckdb").resolve()
    assert "started from" in why
    # no $PWD (a desktop launcher): the kernel's working directory, which has no such file: an error
    with pytest.raises(NoStore, match=r"no store at FORENSICS_DB=report/audit.duckdb: looked at .*notebooks"):
        find_notebook_store({"FORENSICS_DB": "report/audit.duckdb"}, cwd=root / "notebooks")
    # absolute: itself, whatever the folders
    path, _ = find_notebook_store({"FORENSICS_DB": str(root / "report" / "audit.duckdb")}, cwd=tmp_path)
    assert Path(path) == root / "report" / "audit.duckdb"
    # unset: report/audit.duckdb of the launch folder, as `forensics query` looks
    path, why = find_notebook_store({"PWD": str(root)}, cwd=root / "notebooks")
    assert Path(path) == (root / "report" / "audit.duckdb").resolve() and "not set" in why


def test_missing_store_is_an_error_not_a_demo_scan(tmp_path):
    empty = tmp_path / "empty"
    (empty / "notebooks").mkdir(parents=True)
    with pytest.raises(NoStore, match=r"no store found: \$FORENSICS_DB is not set .*forensics scan ARCHIVE"):
        find_notebook_store({"PWD": str(empty)}, cwd=empty / "notebooks")
    with pytest.raises(NoStore, match=r"no store at FORENSICS_DB=/nowhere/audit.duckdb \(no such file\)"):
        find_notebook_store({"FORENSICS_DB": "/nowhere/audit.duckdb"}, cwd=empty)
    with pytest.raises(NoStore, match=r"\(a folder\)"):
        find_notebook_store({"FORENSICS_DB": str(empty)}, cwd=empty)


def test_a_file_that_is_not_a_store_is_one_clear_error(tmp_path):
    import duckdb
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"not a database at all")
    with pytest.raises(NoStore, match=r"cannot open the store .*junk.duckdb"):
        open_store({"FORENSICS_DB": str(junk)}, quiet=True)
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    with pytest.raises(NoStore, match=r"is a DuckDB database but not a forensics store \(no runs table\)"):
        open_store({"FORENSICS_DB": str(other)}, quiet=True)
    # IPython renders our one line instead of a traceback
    assert NoStore("x")._render_traceback_() == ["NoStore: x"]


def test_open_store_says_which_store_and_why(db, capsys):
    store, path = open_store({"FORENSICS_DB": db})
    try:
        n = store.scalar("select count(*) from runs")
    finally:
        store.close()
    assert n > 0 and path == db
    assert capsys.readouterr().out.strip() == f"store: {db} (FORENSICS_DB={db}) - {n} runs"


def test_launch_dir_ignores_what_is_not_a_folder(tmp_path):
    assert launch_dir({"PWD": "relative/x"}) is None
    assert launch_dir({"PWD": str(tmp_path / "gone")}) is None
    assert launch_dir({}) is None
    assert launch_dir({"PWD": str(tmp_path)}) == tmp_path


def test_notebooks_cite_no_file_the_repository_lacks():
    """Every repository path a notebook names exists (they once cited a spec file that did not)."""
    for name in ("contamination.ipynb", "timeline.ipynb"):
        text = (NB / name).read_text(encoding="utf-8")
        for ref in re.findall(r"\b((?:docs|spec|forensics|notebooks)/[\w./-]+\.(?:md|py|ipynb))", text):
            assert (REPO / ref).exists(), f"{name} cites {ref}, which is not in the repository"
        assert "open_store()" in text


# --------------------------------------------------------------------------- the recipe, executed

def _jupyter_or_skip() -> None:
    pytest.importorskip("nbconvert")
    pytest.importorskip("ipykernel")
    if shutil.which("jupyter") is None:
        pytest.skip("no `jupyter` command on PATH")


def test_readme_notebook_recipe_runs_as_written(tmp_path, db):
    """The README's nbconvert line, typed at the root of a clone whose report/ holds a scan (the
    scan line is `forensics scan` itself, tested elsewhere: here its store is copied in)."""
    _jupyter_or_skip()
    lines = readme_notebook_block()
    assert any(ln.startswith("pip install -e '.[notebooks]'") for ln in lines)
    assert "forensics scan corpus/fixtures/archive --out report/" in lines
    convert = [ln for ln in lines if "jupyter nbconvert" in ln]
    assert len(convert) == 1 and "FORENSICS_DB=report/audit.duckdb" in convert[0]
    root = tmp_path / "clone"
    shutil.copytree(NB, root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (root / "report").mkdir()
    shutil.copy(db, root / "report" / "audit.duckdb")
    env = {k: v for k, v in os.environ.items() if k not in ("FORENSICS_DB", "PWD")}
    # bash sets $PWD to the folder it starts in, as the user's shell has it
    p = subprocess.run(["bash", "-c", convert[0]], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    cont = (root / "report" / "contamination.html").read_text(encoding="utf-8")
    time = (root / "report" / "timeline.html").read_text(encoding="utf-8")
    store = str((root / "report" / "audit.duckdb").resolve())
    for html in (cont, time):
        assert f"store: {store} (FORENSICS_DB=report/audit.duckdb, relative to the folder Jupyter was started from" in html
        assert "Traceback" not in html and "NoStore" not in html
    assert "classes" in cont and "run/foreign-run pairs with a deliberate read or copy" in cont
    assert "contaminated yet correct:" in cont
    assert "investigating" in time and "versions; last edit at call" in time and "plot bytes:" in time
    assert "data:image/png;base64," in time, "the trajectory plot was not displayed"
    assert "rule V" in time


def test_notebook_without_a_store_stops_with_one_line(tmp_path):
    """No store anywhere: the first cell fails with the one-line NoStore, and nothing else runs."""
    _jupyter_or_skip()
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    nb = nbformat.read(NB / "contamination.ipynb", as_version=4)
    (tmp_path / "notebooks").mkdir()
    old = dict(os.environ)
    os.environ.pop("FORENSICS_DB", None)
    os.environ["PWD"] = str(tmp_path)
    try:
        with pytest.raises(CellExecutionError) as e:
            NotebookClient(nb, timeout=300, kernel_name="python3",
                           resources={"metadata": {"path": str(tmp_path / "notebooks")}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    err = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert len(err) == 1 and err[0]["ename"] == "NoStore"
    assert err[0]["traceback"] == [f"NoStore: {err[0]['evalue']}"]
    assert "no store found" in err[0]["evalue"] and "forensics scan ARCHIVE" in err[0]["evalue"]
    printed = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "stream"]
    assert printed == [], "nothing ran after the error (no demonstration store in its place)"
    assert "NoStore: no store found" in str(e.value)
