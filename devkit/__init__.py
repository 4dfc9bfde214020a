"""Developer tooling of the forensics project, kept beside the product package (issue 22, item 1):
the synthetic archive generator (`devkit.generator`), the benchmarks and evaluations
(`devkit.bench`: `forensics bench NAME`), and the GPU verification batch and the real-archive
replay bench (`devkit.replay`).

It runs from a source checkout (it reads corpus/, kernels/ and ../shared beside it; every such
path is computed in `devkit.paths`) and is installed from there with `pip install -e ./devkit`.
It may import `forensics`; nothing in `forensics` imports it (tests/test_layers.py): the
`forensics bench` and `forensics corpus` commands reach it only through the CLI's lazy command
table, and a wheel without it says so in one line.
"""
