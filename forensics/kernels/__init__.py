"""The bundled reference kernels, `forensics.kernels`: the files of the repository's kernels/ folder.

The wheel installs that folder as this package (pyproject.toml maps it here: `kernels` alone is
the import name of another PyPI project).  A plain checkout run without installing
(`PYTHONPATH=<checkout> python -m forensics.cli replay ...` on the GPU machine) imports this file
instead, which points the package's search path at that folder, so `forensics.kernels.registry`
is kernels/registry.py there too.  Whatever kernels/__init__.py holds is not run in a checkout:
keep it free of code (tests/test_packaging.py)."""

import os as _os

__path__ = [_os.path.join(_os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))),
                          "kernels")]
