"""Synthetic problem decks: names, shapes, stress cases, forbidden ops, and short template files.

The real deck files are not available to us, so every template here is written from the
semantics in spec/replay-contract.md: short, plausible, and clearly synthetic.  The facts
(problem names, shape lists, tolerances, stress-case names, forbidden substrings, output
line formats) follow the spec; the code does not copy any benchmark file.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    bench: str
    name: str
    shapes: tuple[dict, ...]
    stress: tuple[str, ...]
    forbidden: tuple[str, ...]
    tolerance: dict
    regime: str  # compute | memory | toks | sps | mega
    seeds: tuple[int, ...] = (42, 123, 456)
    property_suite: bool = False
    init_args: str = ""
    notes: str = ""
    extra_yaml: dict = field(default_factory=dict)

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0]


_TRITON = ("import triton", "from triton", "@triton.jit", "triton.language")
_DSL = ("import thunderkittens", "from cutlass.cute", "import tilelang")
_REF = ("import reference", "from reference")

PROBLEMS: dict[tuple[str, str], Problem] = {}


def _p(*a, **k) -> None:
    p = Problem(*a, **k)
    PROBLEMS[(p.bench, p.name)] = p


_p("hard", "01_fp8_gemm",
   ({"M": 4096, "N": 4096, "K": 4096}, {"M": 4096, "N": 4096, "K": 4127},
    {"M": 32, "N": 8192, "K": 8192}, {"M": 4096, "N": 14336, "K": 4096}),
   ("small_input", "large_input", "small_weight"),
   ("torch._scaled_mm", "torch.ops.aten._scaled_mm"),
   {"bfloat16": 0.2, "fp8_e4m3fn": 0.2}, "compute", init_args="M, N, K")
_p("hard", "02_kda_cutlass",
   ({"B": 2, "T": 1024, "H": 8, "K": 128, "V": 128}, {"B": 2, "T": 2048, "H": 8, "K": 128, "V": 128},
    {"B": 1, "T": 4096, "H": 8, "K": 128, "V": 128}, {"B": 1, "T": 2048, "H": 4, "K": 128, "V": 128}),
   ("small_qkv", "large_qkv"),
   ("fla.ops.kda", "fla.ops.chunk_kda", "chunk_kda", "fused_recurrent_kda", "naive_chunk_kda", "naive_recurrent_kda"),
   {"torch.bfloat16": 0.05}, "compute", property_suite=True, init_args="B, T, H, K, V, CHUNK_SIZE")
_p("hard", "03_paged_attention",
   ({"batch": 8, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128, "seq_len": 1024, "page_size": 16},
    {"batch": 32, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128, "seq_len": 2048, "page_size": 16},
    {"batch": 4, "num_heads": 64, "num_kv_heads": 8, "head_dim": 128, "seq_len": 4096, "page_size": 16},
    {"batch": 16, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128, "seq_len": 1535, "page_size": 16},
    {"batch": 8, "num_heads": 16, "num_kv_heads": 4, "head_dim": 64, "seq_len": 2000, "page_size": 16}),
   ("small_q_kv", "large_q_kv"),
   ("vllm.attention", "flashinfer.batch_decode_with_paged_kv_cache", "flashinfer.decode",
    "torch.nn.functional.scaled_dot_product_attention", "F.scaled_dot_product_attention"),
   {"bfloat16": 0.02, "float16": 0.02}, "memory", property_suite=True,
   init_args="BATCH, NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, SEQ_LEN, PAGE_SIZE")
_p("hard", "05_topk_bitonic",
   ({"batch": 1, "n": 131072, "k": 64}, {"batch": 64, "n": 8192, "k": 8}, {"batch": 32, "n": 16384, "k": 32},
    {"batch": 16, "n": 12000, "k": 16}, {"batch": 128, "n": 4096, "k": 1}),
   ("tiny_values", "large_values"),
   ("torch.topk", "torch.kthvalue", "torch.sort", "torch.argsort", "Tensor.topk", "Tensor.kthvalue",
    "Tensor.sort", "Tensor.argsort", "torch.ops.aten.topk", "torch.ops.aten.sort", "torch.ops.aten.kthvalue"),
   {"float32": 1.0e-4}, "memory", property_suite=True, init_args="batch, n, k")
_p("hard", "06_sonic_moe_swiglu",
   ({"T_total": 32768, "H": 4096, "I": 1536, "E": 128, "K": 8}, {"T_total": 4096, "H": 2048, "I": 1024, "E": 64, "K": 4},
    {"T_total": 16384, "H": 2048, "I": 4096, "E": 64, "K": 8}),
   ("small_hidden", "large_hidden"),
   ("torch.matmul", "torch.bmm", "torch.nn.functional.linear", "F.linear", "from sonic_moe", "import sonic_moe"),
   {"bfloat16": 0.02}, "compute", property_suite=True, init_args="T_total, H, I, E, K")
_p("hard", "07_w4a16_gemm",
   ({"M": 1, "N": 12288, "K": 4096}, {"M": 32, "N": 12288, "K": 4096}, {"M": 256, "N": 12288, "K": 4096},
    {"M": 1, "N": 4096, "K": 4096}, {"M": 16, "N": 14336, "K": 4096}),
   ("small_activation", "large_activation"),
   ("bitsandbytes.functional.dequantize_4bit", "bitsandbytes.functional.gemv_4bit", "marlin_kernel.gemm",
    "torch.nn.functional.linear"),
   {"bfloat16": 0.10}, "memory", init_args="M, N, K")
_p("cuda", "01_glm52_fused_moe",
   tuple({"T": t, "E": 256, "top_k": 8, "n_shared": 1, "H": 4096, "I": 2048} for t in (4096, 4127, 1, 8192, 512, 1000)),
   ("small_hidden", "large_hidden"),
   _TRITON + ("import vllm", "from vllm", "flashinfer", "megablocks", "scattermoe", "torch._grouped_mm") + _DSL + _REF,
   {"bfloat16": 0.08, "float32": 1e-3}, "compute", init_args="T, E, top_k, n_shared, H, I")
_p("cuda", "02_deepseek_nsa",
   ({"B": 1, "H": 16, "S": 2048, "D": 64}, {"B": 1, "H": 16, "S": 4127, "D": 64}, {"B": 1, "H": 8, "S": 8192, "D": 64},
    {"B": 1, "H": 8, "S": 8191, "D": 128}, {"B": 4, "H": 8, "S": 1024, "D": 64}, {"B": 2, "H": 8, "S": 3000, "D": 64}),
   ("small_qkv", "large_qkv"),
   _TRITON + ("flash_attn", "flashinfer", "scaled_dot_product_attention", "F.scaled_dot_product_attention",
              "torch.nn.functional.scaled_dot_product_attention") + _DSL + _REF,
   {"bfloat16": 0.1, "float32": 2e-3}, "compute", seeds=(42, 123), init_args="B, H, S, D")
_p("cuda", "03_megaqwen_decode",
   ({"ctx_len": 2048, "decode_steps": 64}, {"ctx_len": 8192, "decode_steps": 64},
    {"ctx_len": 32768, "decode_steps": 32}, {"ctx_len": 131072, "decode_steps": 16}),
   (), _TRITON + ("flash_attn", "flashinfer", "scaled_dot_product_attention", "F.scaled_dot_product_attention",
                  "import vllm", "from vllm") + _DSL + _REF,
   {"bfloat16": 0.08}, "toks", init_args="num_layers, max_seq")
_p("cuda", "04_grid_mingru_sps",
   ({"num_envs": 4096, "horizon": 32}, {"num_envs": 16384, "horizon": 32}, {"num_envs": 65536, "horizon": 16},
    {"num_envs": 8192, "horizon": 64}),
   ("small_obs_state", "large_obs_state"),
   _TRITON + _DSL + ("gymnasium", "import gym", "pufferlib") + _REF,
   {"float32": 1e-3}, "sps", init_args="")
_p("mini", "01_dequant_gemv", ({"N": 4096, "K": 4096}, {"N": 11008, "K": 4096}, {"N": 4096, "K": 11008}),
   ("small_activation", "large_activation"), ("torch.nn.functional.linear",), {"bfloat16": 0.05}, "memory",
   init_args="N, K")
_p("mini", "02_segmented_decay_scan", ({"B": 8, "T": 4096, "D": 256}, {"B": 2, "T": 16384, "D": 512}),
   ("small_x", "large_x"), ("torch.cumsum",), {"float32": 1e-3}, "memory", init_args="B, T, D")
_p("mini", "03_topp_mask", ({"batch": 64, "vocab": 32000}, {"batch": 8, "vocab": 151936}),
   ("flat_logits", "peaky_logits"), ("torch.sort", "torch.topk"), {"float32": 1e-5}, "memory",
   init_args="batch, vocab")
_p("mini", "04_flash_attention", ({"B": 4, "H": 16, "S": 2048, "D": 64}, {"B": 1, "H": 32, "S": 8192, "D": 128}),
   ("small_qkv", "large_qkv"), ("scaled_dot_product_attention", "flash_attn"), {"bfloat16": 0.02}, "compute",
   init_args="B, H, S, D")
_p("mega", "02_kimi_linear_decode",
   ({"ctx": 2048, "steps": 32, "n_experts": 64}, {"ctx": 8192, "steps": 16, "n_experts": 64},
    {"ctx": 16384, "steps": 16, "n_experts": 64}),
   (), ("transformers", "flash_mla", "fla.ops", "vllm", "bitsandbytes", "torchao", "marlin"),
   {"bfloat16": 0.98}, "mega", seeds=(0, 1, 2), init_args="cfg")

BENCHES = ("hard", "cuda", "mini", "mega")
TEMPLATE_NAMES = ("reference.py", "sota.py", "shapes.py", "problem.yaml", "check.py", "benchmark.py", "PROMPT.txt")
GPUS = {
    "RTX_PRO_6000": ("problems", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "sm_120a"),
    "H100": ("problems-h100", "NVIDIA H100 PCIe", "sm_90a"),
    "H100_SXM": ("problems-h100sxm", "NVIDIA H100 80GB HBM3", "sm_90a"),
    "B200": ("problems-b200", "NVIDIA B200", "sm_100a"),
}


def problems_of(bench: str) -> list[Problem]:
    return [p for (b, _), p in sorted(PROBLEMS.items()) if b == bench]


def get(bench: str, name: str) -> Problem:
    return PROBLEMS[(bench, name)]


def template_names(bench: str) -> tuple[str, ...]:
    return TEMPLATE_NAMES + (("baseline.py",) if bench == "mega" else ())


# ----------------------------------------------------------------------------- template files


def _shape_literal(p: Problem) -> str:
    rows = ",\n".join("    " + repr(s) for s in p.shapes)
    return f"SHAPES = [\n{rows},\n]\n"


FP8_DECK_CHANGE = "20260614"  # 01_fp8_gemm: bf16 weight -> fp8 weight + per-channel scale


def template_files(p: Problem, gpu: str = "RTX_PRO_6000", date: str = "20260807") -> dict[str, bytes]:
    """The synthetic template files of one problem for one GPU deck (name -> bytes) as of `date`
    (YYYYMMDD): before 2026-06-14 the fp8 problem had a bf16 weight and the dead fp8 tolerance key."""
    gpu_full = GPUS[gpu][1]
    tolerance = p.tolerance
    if p.name == "01_fp8_gemm" and date < FP8_DECK_CHANGE:
        tolerance = {"fp8_e4m3fn": 0.15}
    tol = "\n".join(f"  {k}: {v}" for k, v in tolerance.items())
    forb = "\n".join(f"  - {f!r}" for f in p.forbidden) or "  []"
    stress = ", ".join(p.stress) or "none"
    yaml = (
        f"name: {p.name}\nbench: {p.bench}\nhardware: {gpu}\nregime: {p.regime}\n"
        f"tolerance:\n{tol}\nforbidden:\n{forb}\nnum_perf_trials: 30\n"
        f"# numeric stress cases run after nominal: {stress}\n"
    )
    if p.bench == "cuda":
        yaml += "require_cuda_evidence: true\nallow_triton: false\n"
    ref = (
        f'"""Reference for {p.name} (synthetic deck).  Readable and slow on purpose."""\n'
        "import torch\nimport torch.nn as nn\n\n"
        f"# module globals set by check.py per shape: {p.init_args or 'none'}\n"
        + "".join(f"{k} = {v}\n" for k, v in p.shapes[0].items())
        + "\n\nclass Model(nn.Module):\n"
        f"    def __init__(self, *args):\n        super().__init__()\n        self.args = args\n"
        "        self.register_buffer('_dummy', torch.zeros(1), persistent=False)\n\n"
        "    def forward(self, *inputs):\n"
        "        raise NotImplementedError('see the semantics in PROMPT.txt')\n\n\n"
        f"def get_init_inputs():\n    return [{p.init_args}]\n\n\n"
        "def get_inputs():\n    torch.manual_seed(0)\n    return [torch.randn(16, 16)]\n"
    )
    check = (
        '"""Correctness check (synthetic deck): nominal plus numeric-stress cases, then PASS."""\n'
        "import re\nimport sys\nfrom pathlib import Path\n\nimport torch\nimport yaml\n\n"
        "REPO_ROOT = Path(__file__).resolve().parents[2]\nsys.path.insert(0, str(REPO_ROOT))\n"
        "from src.eval.correctness import check_correctness  # noqa: E402\n"
        "from src.eval.numeric_stress import stress_cases  # noqa: E402\n\n"
        "import reference  # noqa: E402\nimport shapes  # noqa: E402\n\n\n"
        "def main():\n"
        "    cfg = yaml.safe_load(Path('problem.yaml').read_text())\n"
        "    src = Path('solution.py').read_text()\n"
        "    for op in cfg.get('forbidden', []):\n"
        "        if re.search(re.escape(op), src):\n"
        "            print(f'FAIL: forbidden op used: {op}')\n            sys.exit(1)\n"
        "    try:\n        import solution\n    except Exception as e:\n"
        "        print(f'FAIL: import error: {e}')\n        sys.exit(1)\n"
        f"    for i, shape in enumerate(shapes.SHAPES):\n"
        f"        for seed in {p.seeds!r}:\n"
        "            for case in stress_cases(cfg):\n"
        "                ok, msg = check_correctness(reference, solution, shape, seed, case, cfg)\n"
        "                if not ok:\n"
        "                    print(f'FAIL: shape {i} {shape} seed {seed} case {case}: {msg}')\n"
        "                    sys.exit(1)\n"
        "    Path('framework.txt').write_text(detect_framework(src) + '\\n')\n"
        "    print('PASS')\n\n\n"
        "def detect_framework(src):\n"
        "    for label, pat in (('ptx', r'asm\\s+volatile'), ('cutlass3', r'cute::'), ('triton', r'@triton\\.jit')):\n"
        "        if re.search(pat, src):\n            return label\n    return 'cuda_raw'\n\n\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    bench = (
        '"""Timing (synthetic deck): L2 flush, warmup, median of trials, roofline fraction."""\n'
        "import math\nimport sys\nfrom pathlib import Path\n\nimport torch\n\n"
        "REPO_ROOT = Path(__file__).resolve().parents[2]\nsys.path.insert(0, str(REPO_ROOT))\n"
        "from src.eval.timing import time_variant  # noqa: E402\n"
        "from src.eval.roofline import peak_fraction_of  # noqa: E402\n\n"
        "import shapes  # noqa: E402\nimport solution  # noqa: E402\n\n\n"
        "def main():\n    fracs = []\n"
        "    for i, shape in enumerate(shapes.SHAPES):\n"
        "        ms = time_variant(solution, shape, variant='solution', shape_idx=i)\n"
        "        frac = peak_fraction_of(shape, ms)\n"
        "        print(f'shape={i} solution_peak_fraction={frac:.4f}')\n"
        "        fracs.append(frac)\n"
        "    gm = math.exp(sum(math.log(max(f, 1e-9)) for f in fracs) / len(fracs))\n"
        "    print(f'peak_fraction: {gm:.4f}')\n"
        "    print('RESULT: OK' if gm >= 0.1 else 'RESULT: LOW')\n\n\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    prompt = (
        f"You are optimizing {p.name} for the {gpu_full}.\n\n"
        "Write solution.py in this directory.  It must expose the same interface as reference.py\n"
        "(class Model, same parameters and buffers so load_state_dict(strict=True) works) and\n"
        "compute the same result within the tolerances in problem.yaml.  check.py verifies\n"
        f"correctness over the shapes in shapes.py (numeric stress: {stress}); benchmark.py\n"
        "reports peak_fraction against the roofline.  Do not edit the harness files.\n"
        "Forbidden: " + (", ".join(p.forbidden) or "none") + ".\n"
    )
    sota = (
        '"""Best known public implementation, used only as a timing comparator."""\n'
        "def sota_available():\n    return False\n"
    )
    files = {
        "reference.py": ref.encode(),
        "sota.py": sota.encode(),
        "shapes.py": (f'"""Shapes for {p.name}."""\n' + _shape_literal(p)).encode(),
        "problem.yaml": yaml.encode(),
        "check.py": check.encode(),
        "benchmark.py": bench.encode(),
        "PROMPT.txt": prompt.encode(),
    }
    if p.bench == "mega":
        files["baseline.py"] = (
            '"""Baseline denominator: dequantize each weight to bf16 and multiply with @."""\n'
            "import torch\n\n\nclass Model(torch.nn.Module):\n    def step(self, hidden, state):\n"
            "        raise NotImplementedError\n"
        ).encode()
    return files


REPO_SRC_FILES = {
    "src/__init__.py": b"",
    "src/eval/__init__.py": b"",
    "src/eval/correctness.py": (
        b'"""Tolerance predicate shared by every check.py (synthetic)."""\nimport torch\n\n\n'
        b"def check_correctness(reference, solution, shape, seed, case, cfg):\n"
        b"    return True, ''\n"),
    "src/eval/numeric_stress.py": (
        b'"""Numeric-stress cases; KBH_NUMERIC_STRESS=0 disables them (synthetic)."""\nimport os\n\n\n'
        b"def stress_cases(cfg):\n    if os.environ.get('KBH_NUMERIC_STRESS', '1') == '0':\n"
        b"        return ['nominal']\n    return ['nominal'] + list(cfg.get('stress', []))\n"),
    "src/eval/timing.py": (
        b'"""L2 flush + CUDA-event timing (synthetic)."""\n\n\ndef time_variant(mod, shape, variant, shape_idx):\n'
        b"    return 0.0\n"),
    "src/eval/roofline.py": b'"""Roofline (synthetic)."""\n\n\ndef peak_fraction_of(shape, ms):\n    return 0.0\n',
    "src/hardware/__init__.py": b"",
    "src/hardware/rtx_pro_6000.py": b'PEAK_TFLOPS = {"bf16": 503.8, "fp8": 1007.6}\nPEAK_BW_GB_S = 1792.0\n',
    "src/hardware/h100.py": b'PEAK_TFLOPS = {"bf16": 756.0, "fp8": 1513.0}\nPEAK_BW_GB_S = 2000.0\n',
}
