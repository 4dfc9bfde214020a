"""The bundled reference kernels, imported as `forensics.kernels` (docs/kernels.md).

Installed from this folder by pyproject.toml's package-dir; in a plain checkout
forensics/kernels/__init__.py stands in for this file, so it holds no code."""
