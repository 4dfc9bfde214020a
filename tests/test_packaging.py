"""The package among other packages, checked without building anything (tests/test_wheel.py builds
and installs the wheel): the distribution's name is ours and every install command the tool prints
uses it; the reference kernels are the subpackage `forensics.kernels` in a wheel, an editable
install and a plain checkout alike; pyproject's package list holds every package folder."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import REPO
from forensics.extras import DISTRIBUTION, install_command, missing_extra_message


def _pyproject(path: Path = REPO / "pyproject.toml") -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_the_distribution_name_is_ours_and_every_hint_uses_it():
    proj = _pyproject()
    assert proj["project"]["name"] == DISTRIBUTION
    assert DISTRIBUTION != "forensics"   # PyPI's `forensics` is "Feedback Forensics", another project
    assert _pyproject(REPO / "devkit" / "pyproject.toml")["project"]["dependencies"] == [DISTRIBUTION]
    assert install_command("replay") == f"pip install '{DISTRIBUTION}[replay]'"
    assert install_command("replay") in missing_extra_message("replay", "torch")
    for extra in ("replay", "ray"):
        assert extra in proj["project"]["optional-dependencies"]
    # no message, help text or doc suggests the other project's name
    bad = re.compile(r"""pip install (-e )?['"]?forensics\[""")
    hits = []
    for root in ("forensics", "devkit", "docs", "README.md"):
        paths = [REPO / root] if root.endswith(".md") else list((REPO / root).rglob("*.py")) + list((REPO / root).rglob("*.md"))
        for p in paths:
            for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if bad.search(line):
                    hits.append(f"{p.relative_to(REPO)}:{i}: {line.strip()}")
    assert not hits, hits


def test_pyproject_lists_every_package_folder():
    """The kernels/ -> forensics.kernels mapping needs the packages listed by name; a folder left
    out would be missing from the wheel without a word."""
    st = _pyproject()["tool"]["setuptools"]
    assert st["package-dir"] == {"forensics.kernels": "kernels"}
    want = set()
    for folder, name in (("forensics", "forensics"), ("kernels", "forensics.kernels")):
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            if folder == "forensics" and rel[:1] == ("kernels",):
                continue   # the checkout's stand-in for the mapped package
            want.add(".".join((name, *rel)))
    assert set(st["packages"]) == want, (set(st["packages"]) ^ want)


def test_the_kernels_folder_init_holds_no_code():
    """In a plain checkout forensics/kernels/__init__.py stands in for kernels/__init__.py, which
    therefore must not hold code that the checkout would skip."""
    tree = ast.parse((REPO / "kernels" / "__init__.py").read_text(encoding="utf-8"))
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    assert body == [], ast.dump(body[0])


def test_plain_checkout_imports_the_kernels_as_forensics_kernels(tmp_path):
    """No install at all (the GPU machine: PYTHONPATH=<checkout>): `forensics.kernels` is the
    kernels/ folder and the deck-style reference files are beside it.  `-S` leaves out
    site-packages, so no installed copy (an editable install, a wheel) can answer instead.  (The
    checkout's root on the path also makes its folder importable as `kernels`: a checkout's
    matter, never an install's.)"""
    code = ("import importlib.util, forensics.kernels as k\n"
            "print(k.__path__[0])\n"
            "print(importlib.util.find_spec('forensics.kernels.registry').origin)\n"
            "print(importlib.util.find_spec('forensics.kernels.triton.topk').origin)\n")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    path, registry, topk = r.stdout.split("\n")[:3]
    assert Path(path) == REPO / "kernels"
    assert Path(registry) == REPO / "kernels" / "registry.py"
    assert Path(topk) == REPO / "kernels" / "triton" / "topk.py"
    assert (Path(path) / "ref" / "hard_01_fp8_gemm.py").is_file()


def test_plain_checkout_runs_the_kernels_modules(tmp_path):
    """`python -m forensics.kernels.report` (no torch needed) runs from a checkout by its new name."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "forensics.kernels.report", str(tmp_path / "none.json")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "No module named" not in r.stderr, r.stderr
    assert "forensics.kernels.report: cannot read" in r.stderr, r.stderr


def test_the_reference_readers_find_the_files_without_a_top_level_kernels(tmp_path):
    """What reads the bundled references as files (the capability audit's reference list, the
    interface signatures `forensics similar` places files by) finds them through
    `forensics.kernels`, as in an install, where no top-level `kernels` is ours to find; a checkout's
    root on the path would otherwise hide a lookup by the old name.  Top-level `kernels` is made
    unimportable here, and torch too (none of this needs it)."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in {'kernels', 'torch', 'triton'}:\n"
            "            raise ImportError('blocked ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from forensics.analyze.static.cap_patching import _reference_files\n"
            "from forensics.analyze.similarity import interface_signatures\n"
            "refs = _reference_files()\n"
            "print(len(refs), sum(p.is_file() for ps in refs.values() for p in ps), len(interface_signatures()))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    n_refs, n_files, n_sigs = map(int, r.stdout.split())
    from forensics import problems
    assert n_refs == n_files == len({p.id for p in problems.CATALOGUE if p.ref_file}) > 0
    assert n_sigs >= len(problems.bundled()) // 2   # a constructor two problems share is dropped
