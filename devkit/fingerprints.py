"""Fingerprints of the libraries the decks forbid, for PASTED-LIBRARY-SOURCE and LIBRARY-PROVENANCE-MARK.

    python -m devkit.fingerprints build [--cache DIR] [--out forensics/data/library_fingerprints.json]
    python -m devkit.fingerprints stats [--data FILE]

`build` downloads each library's published artifact (a wheel with `pip download --no-deps`; an
sdist, whose metadata pip would have to build with the library's own build system, straight from
the package index pip uses, PEP 691 JSON), checks it against the sha256 pinned in `SOURCES`, and
reads it without extracting it:

1. **Files.**  C/C++/CUDA sources of the library's own tree (vendored third-party trees such as
   CUTLASS, CCCL and composable_kernel, tests, benchmarks and AMD/CPU back-ends left out), and the
   Python files that hold kernels (Triton, CuTe DSL, load_inline) with the Python around them, plus
   each source's `extra` files (the wrappers a deck names, e.g. bitsandbytes' functional.py).
2. **Functions.**  Every Python function and method, and every C/C++/CUDA function definition
   (`static.cuda.outline`), tokenized and shingled by the similarity engine (`forensics.text.code`).
3. **Provenance.**  A file that says it was adapted or copied from a library's repository, or keeps
   that library's copyright holder, is attributed to that upstream as well (vLLM's copy of FLA's
   kernels is FLA's code).
4. **Generic shingles.**  Near-duplicate functions are clustered (MinHash, the engine's signatures,
   exact Jaccard >= 0.5); a shingle found in clusters of `GENERIC_LIBS` or more upstream libraries,
   or in the commons (the project's own kernels, CUTLASS/CuTe and CUB: honest code in the same style), is generic and
   dropped.  What remains is what tells one library's function from everyone's.
5. **Sketches.**  Functions of `MIN_LINES` lines of code or more with `MIN_SHINGLES` distinctive
   shingles keep a bottom-`SAMPLE` sketch (`static.pasted.sketch`); identical sketches are stored
   once with all their owners.  A shorter function is a snippet: it counts towards the generic
   shingles, never gets a fingerprint.
6. **Marks.**  How many of each library's files carry each copyright-holder pattern of the table
   (`static.pasted.LIBRARIES[...].holders`: the project's own holders, never a vendor such as NVIDIA
   or Meta whose headers honest CUTLASS/CUDA code carries), and the library's distinctive function
   and kernel names (`_name_distinctive`, defined by that upstream only).

Only derived data is written: hashes, names, line numbers, holder strings; never source text.  The
output is deterministic: same artifacts, same file (sorted everything, no timestamps, fixed seeds).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from devkit.paths import REPO
from forensics.analyze.static import pasted as P
from forensics.analyze.static.cuda import outline, strip_c_comments
from forensics.text.code import K, lex_cpp_ids, lex_python_ids, shingle_hashes

DEFAULT_OUT = REPO / "forensics" / "data" / P.DATA
DEFAULT_CACHE = Path(os.environ.get("FORENSICS_FINGERPRINT_CACHE", Path.home() / ".cache" / "forensics-fingerprints"))

CPP_EXT = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".cxx", ".inl", ".c")
MAX_FILE = 600_000          # bytes; larger files are generated instantiations or embedded binaries
MIN_RAW = 30                # shingles a function needs before it is considered at all
GENERIC_LIBS = 2            # a shingle in clusters of this many upstream libraries is generic
CLUSTER_J = 0.5
NAME_MIN_LEN = 24
NAME_MIN_PARTS = 5

# paths never fingerprinted: third-party trees vendored wholesale, tests, benchmarks, other back-ends
EXCLUDE = re.compile(r"(^|/)(tests?|testing|benchmarks?|examples?|docs?|third_party|3rdparty|thirdparty|cutlass|cccl|cute|"
                     r"composable_kernel|spdlog|cub|thrust|googletest|pybind11|rocm|hip|amd|cpu|xpu|npu|hpu|mps|metal|"
                     r"triton_amd|flash_attn_triton_amd|flash_attn_ck|csrc/cpu|generated|instantiations?|"
                     r"build|setup\.py|conftest\.py)(/|$)|_hip\.|\.hip$|_rocm\.|_amd\.|_test\.py$|/test_[^/]*\.py$", re.I)
KERNEL_PY = re.compile(r"@triton\.(?:jit|autotune|heuristics)|\btriton\.language\b|^\s*import triton\b|^\s*from triton\b|"
                       r"@cute\.(?:jit|kernel)|cutlass\.cute|\bload_inline\s*\(|\btilelang\b|@T\.prim_func", re.M)


@dataclass(frozen=True)
class Source:
    """One artifact of one library, pinned."""

    library: str                  # pasted.LIBRARIES id
    dist: str                     # PyPI name
    version: str
    filename: str
    sha256: str
    include: str = r"."           # regex a member path (top folder stripped) must match
    extra: str = r"(?!)"          # Python files taken whole even without kernel markers
    pip: tuple[str, ...] = ()     # platform arguments for `pip download` (wheels)
    note: str = ""                # what this artifact does not cover

    @property
    def sdist(self) -> bool:
        return self.filename.endswith((".tar.gz", ".zip")) and not self.filename.endswith(".whl")


_ANY = ("--only-binary", ":all:", "--platform", "any", "--python-version", "3.12", "--implementation", "py")
SOURCES: tuple[Source, ...] = (
    Source("fla", "fla-core", "0.6.0", "fla_core-0.6.0-py3-none-any.whl",
           "b0708b70e0b119cd58a0a5146ea56cb175cef6ed969d8ac60267e3e077ce3ebd", r"^fla/(ops|modules)/", pip=_ANY,
           note="flash-linear-attention 0.6 keeps its kernels in fla-core; its layers and models (pure torch) are not"),
    Source("vllm", "vllm", "0.33.0", "vllm-0.33.0.tar.gz",
           "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112",
           r"^(csrc/|vllm/)"),
    Source("flashinfer", "flashinfer-python", "0.7.2.post1", "flashinfer_python-0.7.2.post1-py3-none-any.whl",
           "bfdc18b9e1e4d8d0730fe4343dc0e284cd0c160086de80f99888bc4867922d49",
           r"^flashinfer/(data/include/flashinfer/|data/csrc/[^/]+\.(cu|cuh|h)$|triton/|[^/]+\.py$|"
           r"(attention|decode|prefill|gemm|norm|sampling|topk|fused_moe)/[^/]+\.py$)",
           pip=_ANY, note="the generated and experimental kernel trees (data/csrc/*/, experimental/) are not fingerprinted"),
    Source("flash_attn", "flash-attn", "2.8.3.post2", "flash_attn-2.8.3.post2.tar.gz",
           "d0f9f0b08a986cdeadbffcf5ec8b3a8f514366c68ad1853d3ab061bc83cc340b",
           r"^(csrc/flash_attn/src/|hopper/[^/]+\.(h|hpp|cuh|cu)$|flash_attn/(flash_attn_triton\.py|ops/triton/|cute/))",
           note="CUDA template instantiation files (flash_*_hdim*.cu) hold no code of their own"),
    Source("bitsandbytes", "bitsandbytes", "0.50.2", "bitsandbytes-0.50.2-py3-none-macosx_14_0_arm64.whl",
           "4311f52a880b341bada639e4edd1a3c8d786830c9c93cdde29eaa1f062c8f8e5", r"^bitsandbytes/",
           r"^bitsandbytes/(functional\.py|backends/)",
           pip=("--only-binary", ":all:", "--platform", "macosx_14_0_arm64", "--python-version", "3.12"),
           note="its CUDA kernels (csrc/kernels.cu) ship compiled only: no wheel or sdist on PyPI carries their source"),
    Source("gptq", "auto-gptq", "0.7.1", "auto_gptq-0.7.1.tar.gz",
           "5c61ad380e9b4c603757c254765e9083a90a820cd0aff1b5d2c6f7fd96c85e80", r"^(autogptq_extension|auto_gptq)/"),
    Source("gptq", "gptqmodel", "7.7.0", "gptqmodel-7.7.0.tar.gz",
           "039874c39fb56ba75b750dd4870968e7fe83b6ca28890a53e94ad3c46be699d0", r"^(gptqmodel_ext|gptqmodel)/"),
    Source("awq", "autoawq", "0.2.9", "autoawq-0.2.9.tar.gz",
           "f3397687118c7d23c769de0de05ff1dca8950a2644acbe1b6eb1399c691fe7ee", r"^awq/",
           note="AutoAWQ's CUDA kernels are in autoawq-kernels, published as compiled wheels only"),
    Source("exllama", "exllamav2", "0.3.2", "exllamav2-0.3.2-py3-none-any.whl",
           "7cd61ae4bf1d8d12034595ab9731f0f43bac415d6394fbb273d4383293d6079e", r"^exllamav2/exllamav2_ext/", pip=_ANY),
    Source("exllama", "exllama", "0.1.0", "exllama-0.1.0-py3-none-any.whl",
           "f12f27686fbcaaa74298626eb5e8182f39207f2e0db2d28e8634bc2d8124a75d", r"^exllama", pip=_ANY),
    Source("torchao", "torchao", "0.18.0", "torchao-0.18.0-py3-none-any.whl",
           "5c2b4485341bf28b7fed2c4fc95b9f298e209f41685350f067de85527a05585e", r"^torchao/", pip=_ANY,
           note="the C++/CUDA extension ships compiled; its Triton and CuTe kernels are fingerprinted"),
    Source("transformers", "transformers", "5.23.0", "transformers-5.23.0-py3-none-any.whl",
           "018e82fd07490ad5bb58414f65e31576033dc7f36bed10c574843f69b90991bf",
           r"^transformers/(integrations/|kernels/|models/(deepseek_v3|deepseek_v2|kimi_linear|qwen3|qwen3_moe|qwen3_next|"
           r"glm4_moe|llama|mixtral)/modeling_)",
           r"^transformers/models/(deepseek_v3|deepseek_v2|kimi_linear|qwen3|qwen3_moe|qwen3_next|glm4_moe|llama|mixtral)/modeling_",
           pip=_ANY, note="only its kernels, integrations and the modeling files of the decks' model families"),
    Source("sglang", "sglang", "0.5.23", "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl",
           "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
           r"^sglang/(srt/layers/|kernels/(ops|kda_kernels)/|jit_kernel/)",
           pip=("--only-binary", ":all:", "--platform", "manylinux_2_34_x86_64", "--python-version", "3.11"),
           note="sgl-kernel's CUDA ships compiled; the Triton and JIT kernels of sglang are fingerprinted"),
    Source("megablocks", "megablocks", "0.10.0", "megablocks-0.10.0.tar.gz",
           "956fd9880fa869f7468da125da230733d5f84e10a9f8c2991e5e16523c6fe1e0", r"^(csrc|megablocks)/"),
    Source("sonic_moe", "sonic-moe", "0.1.2.post1", "sonic_moe-0.1.2.post1-py3-none-any.whl",
           "de103b91c3e5fab09c10b45c989d38b5204ce0fe1e97bec596359b59aed76932", r"^sonicmoe/", r"^sonicmoe/", pip=_ANY),
    Source("pufferlib", "pufferlib", "3.0.0", "pufferlib-3.0.0.tar.gz",
           "7df3a3e3f5f894d78d2a1f5374097890aec01473183e748abefe4f3faa10eaa9", r"^pufferlib/(extensions/|[^/]+\.py$)",
           r"^pufferlib/(models|pytorch|extensions/[^/]+)\.py$", note="its C environments (ocean/) are not kernels"),
    Source("liger_kernel", "liger-kernel", "0.8.5", "liger_kernel-0.8.5-py3-none-any.whl",
           "60789cd576af073ab9b192b570d2597fd0cdad489cd62fb44fb16256d43754c9", r"^liger_kernel/ops/", pip=_ANY),
    Source("quack", "quack-kernels", "0.6.5", "quack_kernels-0.6.5-py3-none-any.whl",
           "df1ddd31366c82eb9692fe087c671209189dcbde53c909c81a865d4ee66b158d", r"^quack/", pip=_ANY),
)
# Libraries a deck forbids whose source no PyPI artifact carries (recorded in the output's `gaps`)
GAPS = {"marlin": "not on PyPI (the name belongs to another project); fingerprinted through the copies vLLM and "
                  "GPTQModel vendor, attributed by their 'adapted from IST-DASLab/marlin' lines",
        "scattermoe": "not on PyPI", "flash_mla": "PyPI holds a 6 kB placeholder (flash-mla 1.0.0.dev0), no source",
        "triton_tutorials": "not a package; library functions whose files cite them are attributed to them"}


# ---------------------------------------------------------------------- fetching
def _index_files(dist: str) -> list[dict]:
    req = urllib.request.Request(f"https://pypi.org/simple/{dist}/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["files"]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for b in iter(lambda: fh.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def fetch(src: Source, cache: Path, log=print) -> Path:
    """The pinned artifact in `cache`, downloaded when missing; refuses a file whose sha256 differs."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / src.filename
    if not path.exists():
        if src.sdist:
            f = next((x for x in _index_files(src.dist) if x["filename"] == src.filename), None)
            if f is None:
                raise RuntimeError(f"{src.filename} is not on the index any more")
            log(f"  downloading {src.filename} from the index")
            tmp = path.with_suffix(path.suffix + ".part")
            with urllib.request.urlopen(f["url"], timeout=600) as r, open(tmp, "wb") as out:
                for b in iter(lambda: r.read(1 << 20), b""):
                    out.write(b)
            tmp.rename(path)
        else:
            log(f"  pip download {src.dist}=={src.version}")
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache),
                   *src.pip, f"{src.dist}=={src.version}"]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0 or not path.exists():
                raise RuntimeError(f"pip download {src.dist}=={src.version} failed: {p.stderr.strip()[-400:]}")
    got = _sha256(path)
    if got != src.sha256:
        raise RuntimeError(f"{path}: sha256 {got} is not the pinned {src.sha256}; delete it to download it again")
    return path


def members(path: Path) -> Iterator[tuple[str, bytes]]:
    """(path inside the artifact, the top folder of an sdist stripped; bytes) of its source files."""
    if path.name.endswith(".whl") or path.suffix == ".zip":
        with zipfile.ZipFile(path) as z:
            for i in sorted(z.infolist(), key=lambda i: i.filename):
                if not i.is_dir() and i.filename.endswith((".py",) + CPP_EXT) and i.file_size <= MAX_FILE:
                    yield _strip_top(i.filename, path), z.read(i)
    else:
        with tarfile.open(path) as t:
            ms = sorted((m for m in t.getmembers() if m.isfile() and m.name.endswith((".py",) + CPP_EXT)
                         and m.size <= MAX_FILE), key=lambda m: m.name)
            for m in ms:
                fh = t.extractfile(m)
                if fh is not None:
                    yield _strip_top(m.name, path), fh.read()


def _strip_top(name: str, path: Path) -> str:
    if path.name.endswith(".whl"):
        return name
    return name.split("/", 1)[1] if "/" in name else name


# ---------------------------------------------------------------------- functions
@dataclass
class Func:
    library: str
    file: str            # "dist-version/path"
    name: str
    first: int
    last: int
    shingles: np.ndarray     # unique uint32
    origins: tuple[str, ...] = ()
    cluster: int = -1
    code_lines: int = 0      # lines holding code (comments and docstrings are not)


def _python_funcs(text: str) -> Iterator[tuple[str, int, int, str]]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    lines = text.splitlines()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = min([ch.lineno] + [d.lineno for d in ch.decorator_list])
                b = ch.end_lineno or ch.lineno
                yield ch.name, a, b, "\n".join(lines[a - 1:b])
            elif isinstance(ch, ast.ClassDef):
                stack.append(ch)


CPP_NOT_FUNCS = frozenset({"constexpr", "consteval", "requires", "noexcept", "alignas", "defined", "__attribute__"})


def _cpp_funcs(text: str) -> Iterator[tuple[str, int, int, str]]:
    clean = strip_c_comments(text)
    for f in outline(clean):
        if f.close - f.open < 80 or f.name in CPP_NOT_FUNCS:
            continue
        # the declaration starts after the previous statement, block or directive
        j = max(clean.rfind(";", 0, f.params), clean.rfind("}", 0, f.params), clean.rfind("{", 0, f.params),
                clean.rfind("#", 0, f.params))
        if j >= 0 and clean[j] == "#":
            j = clean.find("\n", j)
        start = j + 1
        while start < f.params and clean[start] in " \t\r\n":
            start += 1
        a = text.count("\n", 0, start) + 1
        b = text.count("\n", 0, f.close) + 1
        yield f.name, a, b, text[start:f.close + 1]


# a Python function worth a fingerprint in a kernel file: a kernel, or code that launches or builds one
KERNEL_BODY = re.compile(r"\btl\.|\bcute\.|\bcutlass\.|\]\s*\(|@triton|@jit\b|\bT\.(?:Kernel|alloc)|load_inline|\.launch\(")


_NUM_ID = None


def informative_shingles(ids: np.ndarray) -> np.ndarray:
    """The function's shingles minus its enumerations: a window whose number-blind form (every
    number one token) recurs in the function is a register list, an unrolled loop or a table
    (`"=r"(v[0]), "=r"(v[1]), ...` of an inline-PTX wrapper), which the ISA dictates, not the author."""
    from forensics.text import code as C
    global _NUM_ID
    if _NUM_ID is None:
        _NUM_ID = C._tid("N")
    h = shingle_hashes(ids).astype(np.uint32)
    is_num = np.fromiter((C._ID_TEXT.get(int(i), "x")[:1].isdigit() for i in ids), bool, len(ids))
    blind = np.where(is_num, _NUM_ID, ids)
    hb = shingle_hashes(blind)
    u, inv, cnt = np.unique(hb, return_inverse=True, return_counts=True)
    keep = cnt[inv] < 2
    return np.unique(h[keep])


def functions_of(library: str, label: str, path: str, text: str, whole: bool = False) -> list[Func]:
    """Fingerprintable functions of one file: every C/C++/CUDA function; the Python functions that are
    kernels or launch them (all of them where `whole`: the deck names the file's wrappers), with the
    number of lines holding code (a function of fewer than `static.pasted.MIN_LINES` gets no
    fingerprint)."""
    out = []
    if path.endswith(".py"):
        found = ((n, a, b, body, *lex_python_ids(body)) for n, a, b, body in _python_funcs(text)
                 if whole or KERNEL_BODY.search(body))
    else:
        found = ((n, a, b, body, *lex_cpp_ids(body)) for n, a, b, body in _cpp_funcs(text))
    for name, a, b, body, ids, lines in found:
        if len(ids) >= K + MIN_RAW:
            sh = informative_shingles(ids)
            if len(sh) >= MIN_RAW:
                out.append(Func(library, f"{label}/{path}", name, a, b, sh, code_lines=len(np.unique(lines))))
    return out


# ---------------------------------------------------------------------- provenance of files
def holders_of(text: str) -> set[str]:
    """The copyright and SPDX lines of a file's header, whitespace folded (never shipped: the
    builder only counts which of the table's holder patterns they match)."""
    out = set()
    for line in text.splitlines()[:80]:
        if re.match(r"\s*(#|//|/?\*)", line) and P.LICENCE_LINE.search(line):
            out.add(re.sub(r"\s+", " ", line.strip())[:200])
    return out


def upstreams_of(text: str) -> set[str]:
    """Libraries a file says it was adapted/copied from (their repository URLs)."""
    out = set()
    for m in P.COPY_STMT.finditer(text):
        for g in P.GITHUB.finditer(m.group("what")):
            lib = P.library_of_repo(g.group(1).removesuffix(".git"))
            if lib:
                out.add(lib)
    for line in text.splitlines()[:40]:
        if re.match(r"\s*(#|//|/?\*)", line) and re.search(r"\bbased on|\bfrom\b|\bsee\b|reference", line, re.I):
            for g in P.GITHUB.finditer(line):
                lib = P.library_of_repo(g.group(1).removesuffix(".git"))
                if lib:
                    out.add(lib)
    if re.search(r"triton[- ]lang/triton/[^\s]*tutorials|triton tutorial|tutorials/0\d-", text, re.I):
        out.add("triton_tutorials")
    return out


# ---------------------------------------------------------------------- generic shingles
# The toolkit every deck allows (CUTLASS/CuTe C++ and its CuTe DSL, CUB), as the FlashInfer wheel
# vendors it: its idioms (PTX wrappers, copy atoms, tile schedulers) are generic, not a library's
TOOLKIT_ARTIFACT = "flashinfer_python-0.7.2.post1-py3-none-any.whl"
TOOLKIT = re.compile(r"^flashinfer/data/(cutlass/(include|examples/python|python/CuTeDSL)/|cccl/cub/cub/)")


def _toolkit_shingles(path: Path) -> list[np.ndarray]:
    parts = []
    for rel, raw in members(path):
        if TOOLKIT.search(rel):
            t = raw.decode("utf-8", errors="replace")
            ids, _ = lex_python_ids(t) if rel.endswith(".py") else lex_cpp_ids(t)
            if len(ids) >= K:
                parts.append(np.unique(shingle_hashes(ids).astype(np.uint32)))
    return parts


# The project's own honest kernels for the decks' problems (the reference kernels); the build
# records their digest, so a fingerprint file says which state of them it was built against
PROJECT_COMMONS = ("kernels",)


def _project_files() -> list[Path]:
    return [p for root in PROJECT_COMMONS for p in sorted((REPO / root).rglob("*"))
            if p.suffix in (".py",) + CPP_EXT and p.is_file() and p.stat().st_size <= MAX_FILE
            and "__pycache__" not in p.parts]


def commons_digest() -> str:
    h = hashlib.sha256()
    for p in _project_files():
        h.update(p.relative_to(REPO).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _commons(toolkit: Path | None = None) -> np.ndarray:
    """Shingles of honest code in the same style: the project's own kernels, and the toolkit
    (CUTLASS/CuTe, CUB) when its artifact is given."""
    parts = _toolkit_shingles(toolkit) if toolkit is not None else []
    for p in _project_files():
        t = p.read_text(encoding="utf-8", errors="replace")
        ids, _ = lex_cpp_ids(t) if p.suffix in CPP_EXT else lex_python_ids(t)
        if len(ids) >= K:
            parts.append(shingle_hashes(ids).astype(np.uint32))
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint32)


def cluster(funcs: list[Func]) -> int:
    """Union near-duplicate functions (exact Jaccard >= CLUSTER_J among MinHash/LSH candidates)."""
    from forensics.analyze import similarity as S
    n = len(funcs)
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    sets = [f.shingles.astype(np.uint64) for f in funcs]
    sigs = S.signatures(sets, num_perm=64, seed=S.SEED)
    pairs, _ = S.lsh_candidates(sigs, CLUSTER_J, num_perm=64, params=(16, 4))
    for i, j in sorted(pairs):
        if find(i) == find(j):
            continue
        jac = S.exact_scores(sets[i], sets[j])[0]
        if jac >= CLUSTER_J:
            parent[find(i)] = find(j)
    roots = {}
    for i, f in enumerate(funcs):
        f.cluster = roots.setdefault(find(i), len(roots))
    return len(roots)


def generic_shingles(funcs: list[Func], commons: np.ndarray) -> np.ndarray:
    """Shingles in clusters of GENERIC_LIBS or more upstream libraries, and the commons."""
    lib_of_cluster: dict[int, set[str]] = defaultdict(set)
    for f in funcs:
        lib_of_cluster[f.cluster].update(f.origins or (f.library,))
    hs, ls = [], []
    names = sorted({lib for s in lib_of_cluster.values() for lib in s})
    code = {n: i for i, n in enumerate(names)}
    per_cluster: dict[int, np.ndarray] = {}
    for f in funcs:
        prev = per_cluster.get(f.cluster)
        per_cluster[f.cluster] = f.shingles if prev is None else np.union1d(prev, f.shingles)
    for c, s in per_cluster.items():
        for lib in lib_of_cluster[c]:
            hs.append(s)
            ls.append(np.full(len(s), code[lib], np.int32))
    if not hs:
        return commons
    h = np.concatenate(hs).astype(np.uint64)
    lb = np.concatenate(ls).astype(np.uint64)
    pair = np.unique((h << np.uint64(8)) | lb)          # (shingle, library) once
    sh = (pair >> np.uint64(8)).astype(np.uint32)
    u, c = np.unique(sh, return_counts=True)
    return np.union1d(u[c >= GENERIC_LIBS], commons)


# ---------------------------------------------------------------------- build
@dataclass
class Built:
    data: dict
    stats: dict = field(default_factory=dict)


def _name_distinctive(name: str, library: str) -> bool:
    """A name nobody writes by chance: long and of NAME_MIN_PARTS words or more (a description such
    as `chunk_gated_delta_rule_fwd_kernel_h`, not `fused_moe_kernel` or `apply_rotary_pos_emb`), or
    one that carries the library's own name."""
    parts = [p.lower() for p in re.split(r"_+|(?<=[a-z0-9])(?=[A-Z])", name) if p]
    own = {library.lower(), *(m.lower() for m in P.LIBRARIES[library].modules)} if library in P.LIBRARIES else {library}
    if any(p in own for p in parts) and len(parts) >= 2:
        return True
    return len(name) >= NAME_MIN_LEN and len(parts) >= NAME_MIN_PARTS


def build(sources: tuple[Source, ...] = SOURCES, cache: Path = DEFAULT_CACHE, log=print,
          artifacts: dict[str, Path] | None = None, commons: np.ndarray | None = None) -> Built:
    """Fingerprints of `sources` (artifacts from `cache`, or the given paths by file name)."""
    funcs: list[Func] = []
    libs_meta: dict[str, dict] = {}
    holder_files: dict[str, Counter] = defaultdict(Counter)     # library -> holder -> files
    own_holders_by_file: list[tuple[int, int, set[str]]] = []    # (first func, end func, holders) per file
    all_names: dict[str, set[str]] = defaultdict(set)           # name -> libraries defining it
    for src in sources:
        path = artifacts[src.filename] if artifacts and src.filename in artifacts else fetch(src, cache, log)
        label = f"{src.dist}-{src.version}"
        nfiles = 0
        inc, extra = re.compile(src.include), re.compile(src.extra)
        for rel, raw in members(path):
            if not inc.search(rel) or EXCLUDE.search(rel):
                continue
            text = raw.decode("utf-8", errors="replace")
            if rel.endswith(".py") and not (KERNEL_PY.search(text) or extra.search(rel)):
                continue
            nfiles += 1
            ups = upstreams_of(text)
            hs = holders_of(text)
            for h in hs:
                holder_files[src.library][h] += 1
            fs = functions_of(src.library, label, rel, text, whole=bool(extra.search(rel)))
            for f in fs:
                f.origins = tuple(sorted(ups - {src.library}))
                all_names[f.name].add(src.library)
            own_holders_by_file.append((len(funcs), len(funcs) + len(fs), hs))
            funcs.extend(fs)
        meta = libs_meta.setdefault(src.library, {"artifacts": [], "files": 0, "functions": 0})
        meta["artifacts"].append({"dist": src.dist, "version": src.version, "file": src.filename, "sha256": src.sha256,
                                  "via": "the package index (sdist)" if src.sdist else "pip download (wheel)",
                                  **({"not_covered": src.note} if src.note else {})})
        meta["files"] += nfiles
        log(f"{src.library:<13} {label:<34} {nfiles:5d} files {sum(1 for f in funcs if f.library == src.library):6d} functions (cumulative)")
    # copyright holders: how many of each library's files carry each holder pattern of the table
    # (static.pasted.LIBRARIES[...].holders); a file of another library carrying it is vendored code
    marks: dict[str, dict[str, int]] = {}
    for lib in sorted(P.LIBRARIES):
        pats = P.LIBRARIES[lib].holders
        if pats:
            marks[lib] = {h: sum(n for holder, n in holder_files[lib].items() if re.search(h, holder, re.I))
                          for h in pats}
    for a, b, hs in own_holders_by_file:
        ups = set()
        for holder in hs:   # a line that names one library's holder only (a "Tri Dao" line is two libraries')
            libs = {x.id for x in P.LIBRARIES.values() for h in x.holders if re.search(h, holder, re.I)}
            if len(libs) == 1:
                ups |= libs
        for f in funcs[a:b]:
            extra = ups - {f.library}
            if extra:
                f.origins = tuple(sorted(set(f.origins) | extra))
    log(f"clustering {len(funcs)} functions")
    nclu = cluster(funcs)
    if commons is None:
        tk = next((artifacts or {}).get(x.filename) or fetch(x, cache, log) for x in sources
                  if x.filename == TOOLKIT_ARTIFACT) if any(x.filename == TOOLKIT_ARTIFACT for x in sources) else None
        commons = _commons(tk)
    generic = generic_shingles(funcs, commons)
    log(f"{nclu} clusters; {len(generic)} generic shingles ({len(commons)} in the commons)")
    # sketches of the distinctive part
    by_sketch: dict[bytes, int] = {}
    sketches: list[np.ndarray] = []
    owners: list[list[tuple]] = []
    origins: list[set[str]] = []
    sizes: list[int] = []
    files: dict[str, int] = {}
    for f in funcs:
        # a snippet (fewer than MIN_LINES lines of code) is what anyone writes the same way: it takes
        # part in the generic shingles above, never gets a fingerprint of its own
        if f.code_lines < P.MIN_LINES:
            continue
        d = np.setdiff1d(f.shingles, generic, assume_unique=True)
        if len(d) < P.MIN_SHINGLES:
            continue
        s = P.sketch(d)
        key = s.tobytes()
        i = by_sketch.get(key)
        if i is None:
            i = by_sketch[key] = len(sketches)
            sketches.append(s)
            owners.append([])
            origins.append(set())
            sizes.append(len(d))
        owners[i].append((f.library, files.setdefault(f.file, len(files)), f.name, f.first, f.last))
        origins[i].update(f.origins)
        sizes[i] = max(sizes[i], len(d))
    lib_ids = sorted(set(P.LIBRARIES) | set(libs_meta))
    li = {n: i for i, n in enumerate(lib_ids)}
    file_list = [None] * len(files)
    for fn, i in files.items():
        file_list[i] = fn
    # distinctive names: defined by one upstream library, long and compound, of a fingerprinted function
    fp_names: dict[str, set[str]] = defaultdict(set)
    for os_, org in zip(owners, origins):
        for o in os_:
            fp_names[o[2]].update({o[0]} | org)
    names: dict[str, list[str]] = defaultdict(list)
    commons_names = _commons_names()
    for n, ls in sorted(fp_names.items()):
        owners_of_name = all_names.get(n, set()) | ls
        ups = {x for x in ls if x != "triton_tutorials"}
        if len(ups) == 1 and len(owners_of_name - ls) == 0 and _name_distinctive(n, next(iter(ups))) \
                and n not in commons_names:
            names[next(iter(ups))].append(n)
    order = sorted(range(len(sketches)), key=lambda i: (owners[i][0][0], file_list[owners[i][0][1]], owners[i][0][3], i))
    data = {
        "format": P.FORMAT,
        "engine": {"tokenizer": "forensics.text.code (identifiers normalized, comments and docstrings dropped)",
                   "shingle_tokens": K, "sample": P.SAMPLE, "min_shingles": P.MIN_SHINGLES, "min_lines": P.MIN_LINES,
                   "sketch": "bottom-k by MurmurHash3 fmix32 of the 32-bit shingle hash",
                   "generic": f"shingles in near-duplicate clusters (Jaccard >= {CLUSTER_J}) of >= {GENERIC_LIBS} upstream "
                              "libraries, or in the commons",
                   "commons": {"project": {"paths": list(PROJECT_COMMONS), "sha256": commons_digest()},
                               "toolkit": f"{TOOLKIT_ARTIFACT}: {TOOLKIT.pattern}"}},
        "libraries": {lib: {**libs_meta[lib], "functions": sum(1 for f in funcs if f.library == lib),
                            "fingerprints": sum(1 for os_ in owners if any(o[0] == lib for o in os_)),
                            "version": "+".join(a["version"] for a in libs_meta[lib]["artifacts"])}
                      for lib in sorted(libs_meta)},
        "gaps": GAPS,
        "files": file_list,
        "sketches": P.pack_u32(np.concatenate([sketches[i] for i in order])) if order else "",
        "shingles": [sizes[i] for i in order],
        "owners": [[[li[o[0]], o[1], o[2], o[3], o[4]] for o in sorted(owners[i])] for i in order],
        "origins": [sorted(li[x] for x in origins[i]) for i in order],
        "marks": marks,
        "names": {k: sorted(v) for k, v in sorted(names.items())},
    }
    # every library id the data names must be one the product knows
    data["libraries"] = {k: v for k, v in data["libraries"].items()}
    data["library_ids"] = lib_ids
    stats = {"functions": len(funcs), "clusters": nclu, "generic": int(len(generic)), "fingerprints": len(sketches),
             "files": len(file_list)}
    return Built(data, stats)


def _commons_names() -> set[str]:
    out = set()
    for p in _project_files():
        if p.suffix == ".py":
            out.update(re.findall(r"^\s*def\s+(\w+)", p.read_text(encoding="utf-8", errors="replace"), re.M))
    return out


def dumps(data: dict) -> bytes:
    """Deterministic JSON: sorted keys, compact, one trailing newline."""
    return (json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n").encode()


# ---------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m devkit.fingerprints", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download the pinned artifacts and write the fingerprints")
    b.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the artifacts are kept (default %(default)s)")
    b.add_argument("--out", type=Path, default=DEFAULT_OUT)
    s = sub.add_parser("stats", help="what a fingerprint file holds")
    s.add_argument("--data", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args(argv)
    if a.cmd == "build":
        built = build(cache=a.cache)
        raw = dumps(built.data)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_bytes(raw)
        print(f"wrote {a.out} ({len(raw) / 1e6:.2f} MB, sha256 {hashlib.sha256(raw).hexdigest()[:16]}): "
              + ", ".join(f"{k} {v}" for k, v in built.stats.items()))
        return 0
    d = json.loads(a.data.read_bytes())
    print(f"{a.data} ({a.data.stat().st_size / 1e6:.2f} MB), {len(d['shingles'])} fingerprints of {len(d['files'])} files")
    built_on = d["engine"].get("commons", {}).get("project", {}).get("sha256")
    if built_on != commons_digest():
        print(f"  the project's {', '.join(PROJECT_COMMONS)} changed since this file was built: rebuild it to use them")
    for lib, m in d["libraries"].items():
        arts = ", ".join(f"{x['dist']} {x['version']}" for x in m["artifacts"])
        print(f"  {lib:<13} {arts:<45} files {m['files']:5d} functions {m['functions']:6d} fingerprints {m['fingerprints']:6d}"
              f" marks {len(d['marks'].get(lib, []))} names {len(d['names'].get(lib, []))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
