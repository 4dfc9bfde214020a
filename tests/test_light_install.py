"""The light install (`pip install -e .`, no torch): `forensics replay` and `forensics kernels ...`
name the extra to install and exit 2 instead of a ModuleNotFoundError traceback (their --help
prints all the same: tests/test_cli_conventions.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO

NO_TORCH = ("import sys\n"
            "sys.modules['torch'] = None   # as if torch were not installed\n"
            "from forensics.cli import main\n"
            "main(sys.argv[1:], prog_name='forensics')\n")


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=120)


@pytest.mark.parametrize("args", [["replay", "corpus/fixtures/archive"], ["kernels", "list"],
                                  ["kernels", "check", "01_fp8_gemm", "--device", "cpu"]])
def test_replay_commands_without_torch_name_the_extra(args):
    r = _run(NO_TORCH, *args)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "pip install 'kernel-forensics[replay]'" in r.stderr and "torch" in r.stderr
    assert "download.pytorch.org/whl/cpu" in r.stderr    # the CPU build, not PyPI's multi-GB CUDA one
    assert f"forensics {args[0]}" in r.stderr


def test_command_guard_when_the_module_imports_but_torch_is_gone():
    """The guard at the top of the command functions: the module imported (torch present then),
    torch unimportable afterwards, e.g. once replay's module no longer imports torch at import time."""
    code = ("import sys\nimport forensics.replay.cli\n"
            "for k in [k for k in sys.modules if k == 'torch' or k.startswith(('torch.', 'forensics.kernels'))]:\n"
            "    sys.modules[k] = None\n"
            "sys.modules['torch'] = None   # (the module no longer imports torch itself)\n"
            "from forensics.cli import main\nmain(sys.argv[1:], prog_name='forensics')\n")
    r = _run(code, "kernels", "list")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "pip install 'kernel-forensics[replay]'" in r.stderr


NO_DEVKIT = ("import sys\n"
             "sys.modules['devkit'] = None   # as in a wheel install: devkit/ is a source checkout's\n"
             "from forensics.cli import main\n"
             "main(sys.argv[1:], prog_name='forensics')\n")


@pytest.mark.parametrize("args", [["bench", "timeline"], ["bench", "--help"], ["corpus", "generate", "out"],
                                  ["corpus"]])
def test_developer_commands_without_the_devkit_say_so_in_one_line(args):
    r = _run(NO_DEVKIT, *args)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().count("\n") == 0, r.stderr
    assert f"`forensics {args[0]}` is a developer command" in r.stderr and "source checkout" in r.stderr


def test_replay_side_imports_without_the_store_dependencies():
    """The GPU machine has torch but not the store's packages (orjson, duckdb, pyarrow...): the
    replay, its rule table and the real-archive bench must import there.  (Rule lives in
    analyze/findings.py, which once imported orjson at its top: the H200 run died on it.)"""
    pytest.importorskip("torch")
    code = ("import sys\n"
            "for k in ('orjson', 'duckdb', 'pyarrow', 'rapidfuzz', 'datasketch'):\n"
            "    sys.modules[k] = None\n"
            "import forensics.replay.rules, forensics.replay.session, forensics.replay.outcome, forensics.replay.api, forensics.replay.drivers\n"
            "import forensics.replay.worker, forensics.replay.runner\n"
            "import devkit.replay.real_bench, devkit.replay.deck_check\n"
            "print('ok')\n")
    r = _run(code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
