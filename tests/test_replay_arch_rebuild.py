"""A solution built for another GPU's architecture (graded on an sm_120 machine, replayed on an H100):
its build's architecture options are rewritten for this GPU, a named deviation; where the source needs
the other architecture the rebuilt build fails and the run is not replayable with that cause (issue 40).

CPU: the rewrite as a unit, the wrappers around torch.utils.cpp_extension (the real
`_get_cuda_arch_flags` for TORCH_CUDA_ARCH_LIST), what the worker sends, and the outcome rows."""

from __future__ import annotations

import json
import os
import types

import pytest

torch = pytest.importorskip("torch")

from forensics.replay import worker as W  # noqa: E402
from forensics.replay.outcome import Outcome  # noqa: E402
from forensics.replay.record import Record  # noqa: E402
from forensics.replay.runner import Reply  # noqa: E402

H100 = (9, 0)


@pytest.mark.parametrize("flags,want", [
    (["-O3", "-gencode", "arch=compute_120,code=sm_120"], ["-O3", "-gencode", "arch=compute_90,code=sm_90"]),
    (["-gencode=arch=compute_120a,code=[sm_120a,compute_120a]", "--use_fast_math"],
     ["--use_fast_math", "-gencode", "arch=compute_90a,code=sm_90a"]),
    (["-O3 -gencode arch=compute_100a,code=sm_100a -lineinfo"], ["-O3 -lineinfo", "-gencode", "arch=compute_90a,code=sm_90a"]),
    (["-arch=sm_120", "-DX=1"], ["-DX=1", "-gencode", "arch=compute_90,code=sm_90"]),
    (["--gpu-architecture", "sm_120"], ["-gencode", "arch=compute_90,code=sm_90"]),
    (["-arch=compute_100", "-code=sm_100,sm_120"], ["-gencode", "arch=compute_90,code=sm_90"]),
])
def test_flags_pinning_only_another_gpu_are_rewritten_for_this_one(flags, want):
    new, change = W.rewrite_arch_flags(flags, H100)
    assert new == want
    assert change["host"] == "sm_90" and change["added"] == want[-2:]
    assert all(t not in " ".join(new) for t in ("120", "100"))


@pytest.mark.parametrize("flags", [
    ["-gencode", "arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_120,code=sm_120"],   # one runs here
    ["-arch=sm_80"],            # sm_80 SASS does not run on 9.0, its PTX (compute_80) does
    ["-arch=sm_89"], ["-gencode", "arch=compute_80,code=compute_80"],
    ["-arch=native"], ["-O3", "--use_fast_math"], [], None, "-O3",
    ["-gencode"],               # no value: unreadable, left alone
])
def test_flags_that_run_here_or_cannot_be_read_are_left_alone(flags):
    assert W.rewrite_arch_flags(flags, H100) == (None, None)


def test_sass_only_for_an_older_minor_of_the_same_major_runs_and_an_arch_specific_one_does_not():
    assert W.rewrite_arch_flags(["-gencode", "arch=compute_80,code=sm_80"], (8, 6)) == (None, None)
    new, _ = W.rewrite_arch_flags(["-gencode", "arch=compute_80,code=sm_80"], H100)
    assert new == ["-gencode", "arch=compute_90,code=sm_90"]
    new, _ = W.rewrite_arch_flags(["-gencode", "arch=compute_90a,code=sm_90a"], (10, 0))
    assert new == ["-gencode", "arch=compute_100a,code=sm_100a"]
    new, _ = W.rewrite_arch_flags(["-gencode", "arch=compute_86,code=sm_86"], (8, 0))
    assert new == ["-gencode", "arch=compute_80,code=sm_80"]     # no `a` variant below 9.0


@pytest.mark.parametrize("value,want", [("12.0", "9.0"), ("12.0a", "9.0a"), ("10.0;12.0+PTX", "9.0"),
                                        ("10.0 12.0", "9.0"), ("9.0", None), ("8.0+PTX", None), ("9.0;12.0", None), ("8.0;12.0", "9.0"),
                                        ("Blackwell", None), ("native", None), ("", None), (None, None)])
def test_the_torch_arch_list_is_rewritten_only_where_nothing_in_it_runs_here(value, want):
    new, change = W.rewrite_arch_list(value, H100)
    assert new == want
    assert (change is None) == (want is None)


def test_the_wrappers_rewrite_the_build_calls_and_the_worker_reports_each_once(monkeypatch):
    """load_inline's extra_cuda_cflags (positional or keyword) and the real `_get_cuda_arch_flags`
    under TORCH_CUDA_ARCH_LIST=12.0 are rewritten for sm_90; each rewrite goes out with the next reply
    of the worker and only that one."""
    import torch.utils.cpp_extension as ce
    got: list = []

    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
                    **kw):
        got.append(extra_cuda_cflags)
        return name
    monkeypatch.setattr(ce, "load_inline", load_inline)      # the build itself needs nvcc: its arguments are what counts
    monkeypatch.setattr(ce, "load", ce.load)
    monkeypatch.setattr(ce, "CUDAExtension", ce.CUDAExtension)
    monkeypatch.setattr(ce, "_get_cuda_arch_flags", ce._get_cuda_arch_flags)
    monkeypatch.setattr(W, "ARCH_REBUILT", [])
    W._install_arch_rebuild(H100)
    W._install_arch_rebuild(H100)                               # once only
    assert ce.load_inline("m", "", "", None, None, ["-O3", "-gencode", "arch=compute_120,code=sm_120"]) == "m"
    ce.load_inline("m", "", extra_cuda_cflags=["-arch=sm_90a"])
    assert got == [["-O3", "-gencode", "arch=compute_90,code=sm_90"], ["-arch=sm_90a"]]
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "12.0")
    assert ce._get_cuda_arch_flags() == ["-gencode=arch=compute_90,code=sm_90"]
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "12.0"          # the solution's setting is put back
    assert ce._get_cuda_arch_flags(["-gencode=arch=compute_120,code=sm_120"]) == []   # its own flags: unused
    assert [e["where"] for e in W.ARCH_REBUILT] == ["load_inline(extra_cuda_cflags)", "TORCH_CUDA_ARCH_LIST"]
    r, w = os.pipe()
    worker = W.Worker(os.open(os.devnull, os.O_RDONLY), w, "cpu")
    worker.reply({"id": 1})
    worker.reply({"id": 2})
    worker.wf.close()
    lines = [json.loads(x) for x in os.fdopen(r).read().splitlines()]
    assert [e["targets"] for e in lines[0]["arch_rebuilt"]] == [["sm_120"], ["sm_120"]]
    assert "arch_rebuilt" not in lines[1] and W.ARCH_REBUILT == []


def _record(tmp_path, source: str) -> Record:
    sol = tmp_path / "sol"
    sol.mkdir()
    (sol / "solution.py").write_text(source)
    rec = Record(types.SimpleNamespace(sol_dir=sol), "cuda")
    rec.hello = {"gpu": "NVIDIA H100 80GB HBM3", "capability": [9, 0]}
    return rec


SRC = 'from torch.utils.cpp_extension import load_inline\nFLAGS = ["-gencode", "arch=compute_100a,code=sm_100a"]\n'
REWRITE = {"where": "load_inline(extra_cuda_cflags)", "targets": ["sm_100a"], "host": "sm_90",
           "removed": ["-gencode", "arch=compute_100a,code=sm_100a"], "added": ["-gencode", "arch=compute_90a,code=sm_90a"]}
BUILD_FAILS = ("RuntimeError: Error building extension 'tc'",
               "FAILED: tc.cuda.o\nptxas error   : Instruction 'tcgen05.mma' not supported on .target 'sm_90a'\n"
               "ninja: build stopped: subcommand failed.\n")


def test_a_rebuild_is_a_named_deviation_of_the_outcome(tmp_path):
    rec = _record(tmp_path, SRC)
    rec.note_arch_rebuild([REWRITE, REWRITE, "junk", {"targets": ["<script>"]}])
    rec.row("check", "pass", {"n": 1}, 42, "nominal")
    assert len(rec.out.info["arch_rebuild"]) == 1 and rec.out.info["arch_rebuild"][0]["named_in_source"] is True
    off = rec.out.official()
    assert off["status"] == "pass" and off["correct"] is True
    assert off["deviations"] == ["arch-rebuilt: built for sm_100a on the graded machine, rebuilt here for sm_90 "
                                 "(-gencode arch=compute_100a,code=sm_100a -> -gencode arch=compute_90a,code=sm_90a)"]
    f = [f for f in rec.out.findings if f["rule"] == "replay-arch-rebuilt"]
    assert len(f) == 1 and f[0]["severity"] == "info" and "not the one graded" in f[0]["message"]
    assert "deviations" not in Outcome().official()


def test_a_rebuilt_build_that_fails_is_not_replayable_with_the_cause(tmp_path):
    """The source needs the graded GPU's instructions (tcgen05 on sm_100a): the rebuild for sm_90a fails,
    and the run is not_replayable naming both architectures and the error, never a failed check."""
    rec = _record(tmp_path, SRC)
    rec.note_arch_rebuild([REWRITE])
    row = rec.failed_reply("check", Reply(False, "error", {"tb": BUILD_FAILS[1]}, BUILD_FAILS[0]), {"n": 1}, 42)
    assert row["status"] == "not_replayable"
    assert "rebuilt here for sm_90" in row["detail"] and "tcgen05.mma" in row["detail"]
    off = rec.out.official()
    assert off["status"] == "not_replayable" and off["correct"] is None and off["deviations"]
    assert {f["rule"] for f in rec.out.findings} == {"replay-arch-rebuilt", "replay-not-replayable"}


def test_without_a_rebuild_the_same_compile_error_is_the_solutions(tmp_path):
    rec = _record(tmp_path, SRC)
    row = rec.failed_reply("check", Reply(False, "error", {"tb": BUILD_FAILS[1]}, BUILD_FAILS[0]), {"n": 1}, 42)
    assert row["status"] == "fail" and "deviations" not in rec.out.official()
    (tmp_path / "b").mkdir()
    rec2 = _record(tmp_path / "b", SRC)
    rec2.note_arch_rebuild([REWRITE])        # a rebuild, but an error the solution raised itself
    row = rec2.failed_reply("check", Reply(False, "error", {"tb": "ValueError: bad shape"}, "ValueError: bad shape"))
    assert row["status"] == "fail"


def test_the_run_page_shows_the_deviation_escaped():
    from forensics.report.html import replay_deviations_html
    out = replay_deviations_html(["arch-rebuilt: built for sm_120 <b>x</b>, rebuilt here for sm_90"])
    assert 'id="replay-deviations"' in out and "arch-rebuilt: built for sm_120 &lt;b&gt;x&lt;/b&gt;" in out
    assert replay_deviations_html([]) == "" and replay_deviations_html(None) == ""


def test_whether_the_source_names_the_targets_is_read_without_following_the_childs_symlinks(tmp_path):
    """`named_in_source` reads the solution's scratch, the child's place: a symlink planted there to a
    file that names the target is not followed (nor a FIFO waited on)."""
    outside = tmp_path / "outside.py"
    outside.write_text('ARCH = "sm_100a"\n')
    rec = _record(tmp_path, "import torch\n")
    (rec.scratch.sol_dir / "planted.py").symlink_to(outside)
    os.mkfifo(rec.scratch.sol_dir / "pipe.py")
    rec.note_arch_rebuild([REWRITE])
    assert rec.out.info["arch_rebuild"][0]["named_in_source"] is False
    (tmp_path / "x").mkdir()
    rec2 = _record(tmp_path / "x", SRC)
    rec2.note_arch_rebuild([REWRITE])
    assert rec2.out.info["arch_rebuild"][0]["named_in_source"] is True
