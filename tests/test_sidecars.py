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
