"""The build environment a replayed solution needs, and what is missing from it.

A solution graded on the benchmark's machine built its extensions there: CUTLASS headers in a
checkout of the run, `nvcc` at the path it named, the CUDA headers NVRTC found, the Python
`nvidia` wheels laid out as a regular package.  Replayed elsewhere, a missing piece makes the build
fail, and that failure says nothing about the solution.  `missing_piece(text)` reads a build or
import failure (error, traceback, compiler output) and names the piece; the replay then reports
`not_replayable (build environment: <piece>)`, never a solution failure.

`supply(cutlass=..., cuda_include=...)` gives the replay's children the pieces it can give:

* CUTLASS: `--cutlass-include DIR` / `FORENSICS_CUTLASS_DIR` (a CUTLASS checkout, or its `include`
  directory).  Every child then has the include directories (`include`, `tools/util/include`,
  `examples/common` where present) on `CPATH` and `CPLUS_INCLUDE_PATH`, which the host compiler and
  nvcc's preprocessing read whatever `-I` the solution passes, and `CUTLASS_ROOT`, `CUTLASS_PATH`,
  `CUTLASS_DIR`, `CUTLASS_HOME` (the checkout) and `CUTLASS_INCLUDE` / `CUTLASS_INCLUDE_DIR` (its
  include directory), the variables solutions read to find it.
* CUDA headers: `--cuda-include DIR|auto` / `FORENSICS_CUDA_INCLUDE` (`auto`: `$CUDA_HOME/include`,
  else the include directory beside `nvcc` on PATH, else /usr/local/cuda/include) on `CPATH`, and `CUDA_PATH` / `CUDA_HOME` set
  to the toolkit root when unset, which cupy-style NVRTC callers turn into `-I` options.  NVRTC
  itself reads no environment variable: a solution that compiles with NVRTC and passes no include
  option for `cuda_bf16.h` stays `not_replayable`, and the reason names the header.
* `nvidia.__file__`: `--nvidia-file` / `FORENSICS_NVIDIA_FILE=1`.  Where the `nvidia` wheels form a
  namespace package, the child gives it the `__file__` a regular package in its directory has
  (worker._give_nvidia_a_file), as the machines that ship `nvidia/__init__.py` do: a solution that
  derives the CUDA include paths from `os.path.dirname(nvidia.__file__)` builds.

* Another GPU's architecture: a build that pins only architectures this GPU cannot run (`-gencode
  arch=compute_120,code=sm_120`, `TORCH_CUDA_ARCH_LIST=12.0`) is rebuilt for this one by default, a
  named deviation (worker.rewrite_arch_flags, Record.note_arch_rebuild); `--no-arch-rebuild` /
  `FORENSICS_ARCH_REBUILD=0` leaves it as it is (it then fails: not replayable).

The variables reach the child through the runner's environment allowlist (runner.ENV_ALLOW).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

#: variables this module sets for the children (all on runner.ENV_ALLOW)
CHILD_VARS = ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "CUTLASS_ROOT", "CUTLASS_PATH", "CUTLASS_DIR",
              "CUTLASS_HOME", "CUTLASS_INCLUDE", "CUTLASS_INCLUDE_DIR", "CUDA_PATH", "CUDA_HOME")

_MISSING = r"(?:no such file or directory|cannot open source file|could not open source file|not found|" \
           r"file not found|could not find|missing)"
_CUTLASS = re.compile(r"\b(cutlass|cute)(?:/[\w./-]+)?\b.*" + _MISSING + "|" + _MISSING + r".*\b(cutlass|cute)/[\w./-]+",
                      re.I)
_HEADER = re.compile(r"""["'<]?((?:cuda|cuda_[\w]+|cuda_runtime[\w]*|mma|cooperative_groups[\w/]*|vector_types|"""
                     r"""cublas[\w]*|cusparse[\w]*|curand[\w]*|cufft[\w]*|cudnn[\w]*|nvrtc|crt/[\w]+|cub/[\w/.]+|"""
                     r"""thrust/[\w/.]+|cuda/[\w/.]+|nv/[\w/.]+)\.h(?:pp|h)?)["'>]?""", re.I)
_NVCC_PATH = re.compile(r"(/[\w./-]*/nvcc)\b['\"]?:?\s*(?:not found|no such file)|no such file or directory:\s*"
                        r"['\"](/[\w./-]*nvcc)['\"]", re.I)
_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")


def missing_piece(text: str, local_modules: set[str] | None = None,
                  named_files: dict[str, str] | None = None) -> str | None:
    """The build-environment piece whose absence `text` reports, or None (a real failure).

    `local_modules`: top-level module names the solution ships itself (its sidecars): an import
    of one of those that fails is the solution's own failure.  `named_files`: module -> a file of
    it the solution's source names (`local_files_named`); a missing module it names as its own file
    is the archive's gap (public archives keep solution.py only), said so, not a package to install."""
    if not text:
        return None
    low = text.lower()
    for ln in text.splitlines():
        lo = ln.lower()
        if "cutlass" in lo or "cute/" in lo:
            if _CUTLASS.search(ln) or ("headers" in lo and ("missing" in lo or "not found" in lo)):
                return "CUTLASS headers (cutlass/... not found; supply --cutlass-include DIR or FORENSICS_CUTLASS_DIR)"
        m = _NVCC_PATH.search(ln)
        if m:
            path = m.group(1) or m.group(2)
            return f"nvcc at {path} (a path the solution names) is not there"
        if re.search(r"cannot open source file|could not open source file|no such file or directory|file not found",
                     lo):
            h = _HEADER.search(ln)
            if h and not ln.strip().startswith("#include"):
                via = "NVRTC" if "nvrtc" in low or "catastrophic error" in lo else "the compiler"
                return (f"CUDA header {h.group(1)} not found by {via} (supply --cuda-include DIR / "
                        "FORENSICS_CUDA_INCLUDE; NVRTC takes include directories only from its options)")
    if "nvidia.__file__" in text and ("nonetype" in low or "has no attribute '__file__'" in low):
        return ("Python package `nvidia` has no __file__ here (a namespace package; the solution derives CUDA "
                "include paths from nvidia.__file__; supply --nvidia-file)")
    if "ninja is required to load c++ extensions" in low:
        return "ninja (required by torch.utils.cpp_extension) is not installed"
    m = _NO_MODULE.search(text)
    if m:
        top = m.group(1).split(".")[0]
        if top not in ("solution", "reference") and top not in (local_modules or set()):
            if top in (named_files or {}):
                return (f"the solution's own module '{top}' (its source names {named_files[top]}) is not among "
                        "the run's files: the archive did not keep it")
            return f"Python package '{m.group(1)}' is not installed"
        if top in (local_modules or set()):
            return None
    return None


_NAMED_FILE = re.compile(r"(?<![\w./-])([A-Za-z_]\w*)/(?:[\w-]+/)*[\w-]+\.(?:py|cu|cuh|cpp|h)\b")


def local_files_named(source: str) -> dict[str, str]:
    """Top-level directories the solution's source names relative paths in (`kernels/build.py` in
    a comment or a string) -> the first such path: where an import of that name fails, the module
    is its own, not a package.  Absolute paths and URLs do not count (the look-behind)."""
    out: dict[str, str] = {}
    for m in _NAMED_FILE.finditer(source or ""):
        out.setdefault(m.group(1), m.group(0))
    return out


# ------------------------------------------------------------------------------ supplying the pieces
def cutlass_dirs(path: str | os.PathLike) -> tuple[Path, list[Path]]:
    """(checkout root, include directories) for a CUTLASS checkout or its include directory.
    ValueError if neither holds cutlass/cutlass.h."""
    p = Path(path).expanduser().resolve()
    if (p / "cutlass" / "cutlass.h").is_file():
        root, inc = p.parent, p
    elif (p / "include" / "cutlass" / "cutlass.h").is_file():
        root, inc = p, p / "include"
    else:
        raise ValueError(f"{path}: no cutlass/cutlass.h in it or in its include/ (a CUTLASS checkout or include dir)")
    dirs = [inc] + [d for d in (root / "tools" / "util" / "include", root / "examples" / "common") if d.is_dir()]
    return root, dirs


def cuda_include_default() -> Path | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    cands = [Path(home) / "include"] if home else []
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(Path(nvcc).resolve().parent.parent / "include")
    cands.append(Path("/usr/local/cuda/include"))
    for c in cands:
        if (c / "cuda_runtime.h").is_file():
            return c
    return None


def _prepend(env: dict, key: str, dirs: list[Path]) -> None:
    have = [d for d in (env.get(key) or "").split(os.pathsep) if d]
    new = [str(d) for d in dirs if str(d) not in have]
    env[key] = os.pathsep.join(new + have)


def supply(cutlass: str | os.PathLike | None = None, cuda_include: str | os.PathLike | None = None,
           env: dict | None = None, nvidia_file: bool = False, arch_rebuild: bool | None = None) -> dict:
    """Set the variables (in `env`, default os.environ, which the children inherit through the
    runner's allowlist); -> what was supplied, for the replay's info.  Defaults come from
    FORENSICS_CUTLASS_DIR, FORENSICS_CUDA_INCLUDE and FORENSICS_NVIDIA_FILE."""
    env = os.environ if env is None else env
    done: dict = {}
    if arch_rebuild is False:   # worker.ARCH_REBUILD_ENV: a build pinning another GPU's arch is left as it is
        env["FORENSICS_ARCH_REBUILD"] = "0"
    if env.get("FORENSICS_ARCH_REBUILD") == "0":
        done["arch_rebuild"] = False
    if nvidia_file or env.get("FORENSICS_NVIDIA_FILE") == "1":
        env["FORENSICS_NVIDIA_FILE"] = "1"
        done["nvidia_file"] = True
    cutlass = cutlass or env.get("FORENSICS_CUTLASS_DIR")
    if cutlass:
        root, dirs = cutlass_dirs(cutlass)
        for k in ("CPATH", "CPLUS_INCLUDE_PATH"):
            _prepend(env, k, dirs)
        for k in ("CUTLASS_ROOT", "CUTLASS_PATH", "CUTLASS_DIR", "CUTLASS_HOME"):
            env[k] = str(root)
        env["CUTLASS_INCLUDE"] = env["CUTLASS_INCLUDE_DIR"] = str(dirs[0])
        done["cutlass"] = {"root": str(root), "include": [str(d) for d in dirs]}
    cuda_include = cuda_include or env.get("FORENSICS_CUDA_INCLUDE")
    if cuda_include == "auto":
        inc = cuda_include_default()
    elif cuda_include:
        inc = Path(cuda_include).expanduser().resolve()
        if not (inc / "cuda_runtime.h").is_file() and not (inc / "cuda_bf16.h").is_file():
            raise ValueError(f"{cuda_include}: no cuda_runtime.h or cuda_bf16.h in it (a CUDA include directory)")
    else:
        inc = None
    if inc is not None:
        for k in ("CPATH", "CPLUS_INCLUDE_PATH"):
            _prepend(env, k, [inc])
        for k in ("CUDA_PATH", "CUDA_HOME"):
            env.setdefault(k, str(inc.parent))
        done["cuda_include"] = str(inc)
    return done
