"""A new user's path through a built wheel: build it, install it into a fresh venv (system site
packages for the dependencies, so no network), and from a folder outside the checkout scan a copy
of the fixture archive, list and run named queries without naming the store, and execute a
notebook against that store.  Nothing here may come from the checkout: PYTHONPATH is dropped and
the package must be imported from the venv.  The wheel holds the product only (forensics/,
kernels/ as forensics.kernels), never the developer tooling beside it (devkit/), whose commands say
so in one line.  Its distribution name and its import names are ours: `forensics` on PyPI is another
project's distribution and `kernels` another project's import name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURE_ARCHIVE, REPO, make_venv

pytestmark = pytest.mark.slow   # about a minute on 2 cores; CI runs it (only `-m 'not slow'` skips it)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (cmd, r.returncode, r.stdout[-2000:], r.stderr[-4000:])
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"   # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for pkg in ("forensics", "kernels", "devkit"):   # devkit/ too: the product's pyproject must leave it out
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "FORENSICS_DB")}
    env["PIP_NO_INDEX"] = "1"   # everything comes from the wheel and the system site packages
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q", "-w", str(dist)],
         tmp, env)
    wheel = next(dist.glob("kernel_forensics-*.whl"))
    venv = tmp / "venv"
    py = make_venv(venv, env=env)
    _run([str(py), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", str(wheel)], tmp, env)
    env["PATH"] = str(venv / "bin") + os.pathsep + env.get("PATH", "")
    work = tmp / "user"
    work.mkdir()
    shutil.copytree(FIXTURE_ARCHIVE, work / "archive", symlinks=True)
    return work, env


def test_the_package_comes_from_the_wheel(installed):
    work, env = installed
    r = _run(["python", "-c", "import forensics, forensics.kernels.common as c; print(forensics.__file__); "
                              "print(c.__file__); print(c.REF_DIR)"], work, env)
    for line in r.stdout.split():
        assert "/venv/" in line and str(REPO) not in line, r.stdout
    assert (Path(r.stdout.split()[-1]) / "hard_01_fp8_gemm.py").is_file()   # the replay copies these by path


def test_the_wheel_installs_no_name_of_another_project(installed):
    """The distribution is `kernel-forensics` (PyPI's `forensics` is an unrelated project) and the
    only top-level import package is `forensics` (`kernels`, the folder's name, is the import name
    of PyPI's `kernels`).  Checked on the wheel and on the venv's own site-packages (the venv sees
    the system site too, which may hold a development install)."""
    import zipfile
    from forensics.extras import DISTRIBUTION
    work, env = installed
    wheel = next((work.parent / "dist").glob("*.whl"))
    assert wheel.name.startswith(DISTRIBUTION.replace("-", "_") + "-") and DISTRIBUTION != "forensics"
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"forensics"}, tops
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"Name: {DISTRIBUTION}" in meta.splitlines()
    site = next((work.parent / "venv").glob("lib/python*/site-packages"))
    own = sorted(p.name for p in site.iterdir())
    assert "kernels" not in own and not [n for n in own if n.startswith("forensics-")], own
    assert [n for n in own if n.startswith("kernel_forensics-") and n.endswith(".dist-info")], own
    # the package is the folder's, not the checkout's stand-in forensics/kernels/__init__.py
    assert zipfile.ZipFile(wheel).read("forensics/kernels/__init__.py") == (REPO / "kernels" / "__init__.py").read_bytes()
    # every module of the checkout's two folders is in the wheel, under its installed name
    for folder, pkg in (("forensics", "forensics"), ("kernels", "forensics/kernels")):
        for f in (REPO / folder).rglob("*.py"):
            if "__pycache__" in f.parts or (folder == "forensics" and f.relative_to(REPO / folder).parts[0] == "kernels"):
                continue
            assert f"{pkg}/{f.relative_to(REPO / folder).as_posix()}" in names, f


def test_the_wheel_holds_the_product_not_the_devkit(installed):
    import zipfile
    work, _ = installed
    names = zipfile.ZipFile(next((work.parent / "dist").glob("kernel_forensics-*.whl"))).namelist()
    assert not [n for n in names if n.startswith("devkit")], [n for n in names if n.startswith("devkit")][:5]
    for need in ("forensics/cli.py", "forensics/pipeline.py", "forensics/queries/tool-calls-by-tool.sql",
                 "forensics/kernels/registry.py", "forensics/kernels/ref/hard_01_fp8_gemm.py"):
        assert need in names, need
    assert any(n.startswith("forensics/data/") and n.endswith(".json") for n in names)


def test_developer_commands_from_the_wheel_say_where_they_are(installed):
    work, env = installed
    found = _run(["python", "-c", "import importlib.util; print(importlib.util.find_spec('devkit') is not None)"],
                 work, env).stdout.strip()
    # CI installs the checkout's devkit editable into the interpreter whose site packages the venv
    # sees; hide it there, as a wheel-only install has none
    cmd = (["forensics"] if found == "False" else
           ["python", "-c", "import sys; sys.modules['devkit'] = None\nfrom forensics.cli import main\n"
                            "main(sys.argv[1:], prog_name='forensics')"])
    for args in (["bench", "timeline"], ["corpus", "generate", "out"]):
        r = subprocess.run(cmd + args, cwd=work, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
        assert f"`forensics {args[0]}` is a developer command" in r.stderr and "source checkout" in r.stderr


def test_scan_then_query_without_naming_the_store(installed):
    work, env = installed
    _run(["forensics", "scan", "archive"], work, env)
    assert (work / "report" / "audit.duckdb").is_file() and (work / "report" / "index.html").is_file()
    assert len(list((work / "report" / "annotations").glob("*.yaml"))) == 49
    listed = _run(["forensics", "query", "--list"], work, env).stdout
    for name in ("tool-calls-by-tool", "foreign-reads", "superseded-passes", "parse-errors"):
        assert name in listed, listed
    rows = json.loads(_run(["forensics", "query", "tool-calls-by-tool", "--json"], work, env).stdout)
    assert rows and {"run_id", "tool"} <= set(rows[0])
    reads = json.loads(_run(["forensics", "query", "foreign-reads", "--json"], work, env).stdout)
    assert any(r.get("classification") in ("deliberate_read", "copy") for r in reads)
    n = json.loads(_run(["forensics", "sql", "select count(*) as n from runs", "--json"], work, env).stdout)
    assert n == [{"n": 49}]


def test_notebook_runs_against_the_scanned_store(installed):
    work, env = installed
    if not (work / "report" / "audit.duckdb").exists():
        _run(["forensics", "scan", "archive"], work, env)
    nb = REPO / "notebooks" / "contamination.ipynb"
    code = ("import sys, nbformat\nfrom nbclient import NotebookClient\n"
            "nb = nbformat.read(sys.argv[1], as_version=4)\n"
            "NotebookClient(nb, timeout=600, kernel_name='python3', resources={'metadata': {'path': '.'}}).execute()\n"
            "out = []\n"
            "for c in nb.cells:\n"
            "    for o in c.get('outputs', []):\n"
            "        assert o.get('output_type') != 'error', o\n"
            "        out.append(o.get('text', ''))\n"
            "print(''.join(out))\n")
    r = _run(["python", "-c", code, str(nb)], work, env)
    assert "report/audit.duckdb" in r.stdout and "49 runs" in r.stdout, r.stdout[-2000:]
    assert "run/foreign-run pairs with a deliberate read or copy" in r.stdout
