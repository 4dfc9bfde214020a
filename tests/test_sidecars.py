"""Published solution files with their scratch sidecars appended (the public archive's form)."""

import ast

from forensics.archive.sidecars import split_sidecars

RULE = "# " + "=" * 60 + "\n"


def banner(name: str, body: str, unit: str = "bytes") -> str:
    size = len(body.encode()) if unit == "bytes" else len(body)
    return f"\n{RULE}# ===== sidecar: {name} ({size} bytes, loaded by solution.py) =====\n{RULE}\n{body}\n"


PY = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
CU = "// kernel \u2014 with a non-ASCII dash\n__global__ void k(float* y) { y[threadIdx.x] = 0.f; }\n"
PY2 = '"""second module"""\nX = 1\n'


def test_split_gives_parseable_python_and_each_sidecar_with_its_line():
    text = PY + banner("k.cu", CU) + banner("helper.py", PY2, unit="chars")
    s = split_sidecars(text)
    ast.parse(s.python)
    assert s.python.rstrip() == PY.rstrip()
    assert [c.name for c in s.sidecars] == ["k.cu", "helper.py"]
    assert s.sidecars[0].text == CU and s.sidecars[1].text == PY2
    assert all(c.size_matches for c in s.sidecars)
    lines = text.splitlines()
    for c in s.sidecars:
        assert lines[c.first_line - 1] == c.text.splitlines()[0]


def test_a_wrong_byte_count_runs_to_the_next_banner():
    text = PY + banner("k.cu", CU).replace(f"({len(CU.encode())} bytes", "(3 bytes") + banner("helper.py", PY2)
    s = split_sidecars(text)
    assert not s.sidecars[0].size_matches
    assert s.sidecars[0].text.startswith(CU) and s.sidecars[1].text == PY2


def test_plain_solution_and_lookalike_comment_are_left_whole():
    lookalike = PY + "# ===== sidecar: notes (see README) =====\n"   # no byte count: not a banner
    assert split_sidecars(PY).python == PY and not split_sidecars(PY).has_sidecars
    assert split_sidecars(lookalike).python == lookalike


def test_a_banner_name_cannot_be_a_path():
    s = split_sidecars(PY + banner("../../etc/evil.cu", CU))
    assert s.sidecars[0].name == "evil.cu"


PUBLISHED_PY = '''"""FP8 GEMM from a CUDA source kept beside the solution."""
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

_ext = load(name="fp8_ext", sources=[os.path.join(os.path.dirname(__file__), "fp8_ext.cu")])


class Model(nn.Module):
    def __init__(self, M, N, K):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(N, K, dtype=torch.bfloat16))

    def forward(self, x):
        return _ext.gemm(x, self.weight)
'''
SHIM_CU = '''#include <torch/extension.h>
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  return at::matmul(x.to(at::kBFloat16), w.t());
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("gemm", &gemm, "gemm"); }
'''


def test_lint_splits_a_published_file_and_cites_the_published_lines():
    from forensics.analyze.static import lint_source

    text = PUBLISHED_PY + banner("fp8_ext.cu", SHIM_CU)
    rep = lint_source(text, "solution.py", "01_fp8_gemm")
    assert "PARSE-FALLBACK" not in rep.rules()           # the banner and the C++ are no longer parsed as Python
    assert rep.parse["appended_sidecars"][0]["name"] == "fp8_ext.cu"
    lines = text.splitlines()
    lib = [h for h in rep.hits if h.rule == "LIBRARY-DOES-WORK"]
    assert lib and "at::matmul" in lines[lib[0].line_start - 1]   # the published file's own line
    assert "WORK-BY-LIBRARY" in rep.rules()               # the appended shim is the library doing the work
    # without its sidecar, the same solution's extension is unknown, never a library
    alone = lint_source(PUBLISHED_PY, "solution.py", "01_fp8_gemm")
    assert "WORK-BY-LIBRARY" not in alone.rules() and "PARSE-FALLBACK" not in alone.rules()
