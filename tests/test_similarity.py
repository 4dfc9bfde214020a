"""Source similarity: normalization, MinHash equivalence with datasketch, discount, spans, store."""

from __future__ import annotations

import random

import numpy as np
from datasketch import MinHash

from devkit.bench import contamination_eval as E
from forensics.analyze import similarity as SIM
from devkit.bench import similarity as B
from forensics.store.db import Store

CORPUS = E.CORPUS


def _src(prob: str, name: str) -> str:
    return (CORPUS / prob / f"{name}.py").read_text()


def test_signatures_equal_datasketch_update_batch():
    rng = np.random.default_rng(3)
    sets = [np.unique(rng.integers(0, 2**32, k, dtype=np.uint64)) for k in (1, 7, 300, 0, 1000)]
    sigs = SIM.signatures(sets, num_perm=64, batch_cols=500)
    for s, sig in zip(sets, sigs):
        if not len(s):
            continue
        m = MinHash(num_perm=64, seed=SIM.SEED, hashfunc=lambda x: x, scheme="affine32")
        m.update_batch([int(x) for x in s])
        assert np.array_equal(sig, m.hashvalues)


def test_renaming_does_not_change_shingles_but_editing_does():
    src = _src("04_kahan_softmax", "sol_cuda_warp")
    a = SIM.build_doc("a", {"solution.py": src})
    r = SIM.build_doc("r", {"solution.py": E.rename(src, "t")})
    assert E.rename(src, "t") != src
    assert np.array_equal(a.shingles, r.shingles)
    other = SIM.build_doc("o", {"solution.py": _src("04_kahan_softmax", "sol_triton_online")})
    j = SIM.exact_scores(a.shingles, other.shingles)[0]
    assert j < 0.2


def test_tokenizer_lexes_cuda_in_strings_and_drops_comments():
    py = 'import torch\n# a comment\nSRC = r"""\n__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"""\nY = "hello"\n'
    toks = SIM.tokenize_python(py)
    texts = [t.text for t in toks]
    assert "__global__" in texts and "threadIdx" in texts and "comment" not in texts
    assert "S" in texts  # the ordinary string
    g = next(t for t in toks if t.text == "__global__")
    assert g.line == 4


def test_kernel_moved_to_sidecar_is_still_found():
    src = _src("01_fp8_gemm", "sol_cuda_smem")
    moved = E.move_to_sidecar(src)
    assert moved and "scratch/kernels.cu" in moved
    docs = [SIM.build_doc("base", {"solution.py": src}, "p"),
            SIM.build_doc("moved", moved, "p"),
            SIM.build_doc("indep", {"solution.py": _src("01_fp8_gemm", "sol_triton_splitk")}, "p")]
    pairs, _ = SIM.find_pairs(docs, {})
    best = {(docs[p.a].doc_id, docs[p.b].doc_id): p for p in pairs}
    p = best[("base", "moved")]
    assert p.score > 0.6
    assert any(s["b_file"] == "scratch/kernels.cu" for s in p.spans)
    assert best.get(("base", "indep")) is None or best[("base", "indep")].score < p.score / 3


def test_scaffolding_discount_removes_shared_template_text():
    rng = random.Random(5)
    shared = B.gen_solution(random.Random(99), 40)
    docs = []
    for i in range(8):
        docs.append(SIM.build_doc(f"d{i}", {"solution.py": shared + "\n\n" + B.gen_solution(rng, 40)}, "p"))
    SIM.discount(docs, {})
    for d in docs:
        assert len(d.distinct) < len(d.shingles)
    # after the discount independent documents are dissimilar although they share 50% of their text
    j = SIM.exact_scores(docs[0].distinct, docs[1].distinct)[0]
    raw = SIM.exact_scores(docs[0].shingles, docs[1].shingles)[0]
    assert raw > 0.2 and j < raw / 3


def test_template_shingles_are_discounted():
    ref = (CORPUS / "04_kahan_softmax" / "reference.py").read_text()
    sol = _src("04_kahan_softmax", "sol_triton_twopass")
    docs = [SIM.build_doc("a", {"solution.py": ref + "\n" + sol}, "p"), SIM.build_doc("b", {"solution.py": ref}, "p")]
    SIM.discount(docs, {"p": SIM.shingle_set_of_text({"reference.py": ref})})
    assert len(docs[1].distinct) == 0


def test_spans_align_reordered_functions():
    src = _src("01_fp8_gemm", "sol_triton_splitk")
    a = SIM.build_doc("a", {"solution.py": src})
    b = SIM.build_doc("b", {"solution.py": E.reorder(src)})
    spans = SIM.aligned_spans(a, b)
    assert len(spans) >= 2
    lines_a = src.splitlines()
    # the first function of a is found later in b
    s = max(spans, key=lambda x: x["tokens"])
    assert s["a_start"] != s["b_start"]
    assert lines_a[s["a_start"] - 1].strip() == E.reorder(src).splitlines()[s["b_start"] - 1].strip()


def test_prefix_join_equals_brute_force_and_lsh_recall():
    srcs, probs = B.corpus(300, seed=11)
    sets = [B._shingle_one(s) for s in srcs]
    truth = B.prefix_join(sets, probs, 0.5)
    assert truth == B.brute_force(sets, probs, 0.5)
    sigs = SIM.signatures(sets)
    cand, _ = SIM.lsh_candidates(sigs, B.LSH_T, groups=probs)
    found = {p for p in cand if SIM.exact_scores(sets[p[0]], sets[p[1]])[0] >= 0.5}
    assert truth and len(found & truth) / len(truth) >= 0.9


def test_analyze_writes_pairs_and_chain_findings(tmp_path):
    root = tmp_path / "archive"
    sol = _src("04_kahan_softmax", "sol_triton_online")
    runs = {"20260801_100000_claude_m_04_kahan_softmax": sol,
            "20260802_100000_codex_m_04_kahan_softmax": E.rename(sol, "z"),
            "20260802_110000_kimi_m_04_kahan_softmax": _src("04_kahan_softmax", "sol_cuda_warp")}
    store = Store(":memory:")
    rows = []
    for name, text in runs.items():
        d = root / name
        (d / "template_files").mkdir(parents=True)
        (d / "solution.py").write_text(text)
        (d / "template_files" / "reference.py").write_text((CORPUS / "04_kahan_softmax" / "reference.py").read_text())
        rows.append({"run_id": name, "run_name": name, "problem": "04_kahan_softmax", "archive": str(d), "run_path": ""})
    store.insert_rows("runs", rows)
    b = "20260802_100000_codex_m_04_kahan_softmax"
    a = "20260801_100000_claude_m_04_kahan_softmax"
    store.insert_rows("foreign_refs", [{"run_id": b, "call_seq": 7, "source": "codex_session.jsonl", "line": 120,
                                        "foreign_run_id": a, "foreign_file": "solution.py", "artifact": "solution",
                                        "classification": "deliberate_read", "same_problem": True}])
    SIM.analyze(store)
    pairs = store.query("select * from similarity_pairs")
    top = max(pairs, key=lambda r: r["score"])
    assert {top["a_id"], top["b_id"]} == {a, b} and top["score"] > 0.9
    f = store.query("select * from findings where analyzer='similarity' and rule='contamination-chain'")
    assert len(f) == 1 and f[0]["run_id"] == b and f[0]["severity"] == "high"
    assert "tool call 7" in f[0]["message"] and "transcript line 120" in f[0]["message"]
    SIM.analyze(store)  # idempotent
    assert len(store.query("select * from findings where analyzer='similarity' and rule='contamination-chain'")) == 1


# ------------------------------------------------------------------------------ fast lexer, spans, exact pairs

import similarity_oracle as O  # noqa: E402  the sequential lexer and greedy tiling before the rewrite

EDGE_SOURCES = [
    'def f(x):\n    """doc\n    string"""\n    return x  # c\n',
    '"""module doc"""\nimport torch\nX = """not a doc"""\n',
    'class A:\n    # comment\n    """doc after comment"""\n    def g(self): return "s"\n',
    "s = f'{x}' + rb'raw' + Rb\"x\" + u'u' + fr'''tri\nple'''\n",
    'a = 1_000 + 0x1F + .5e-3 + 3j + 1.\nb = a ** 2 // 3 -> 4 := 5\n',
    'SRC = r"""\n#include <cuda.h>\n/* block\ncomment */ __global__ void k(float* x) {\n  x[threadIdx.x] = 1.0f; // c\n}\n"""\nY = 2\n',
    'CU = """\nextern "C" __global__ void k() { int a = \'x\'; a <<= 2; a++; }\n"""  ; z = 1\n',
    'x = "unterminated\ny = 3\n',
    'z = """never closed\nstill string\n',
    "q = 'esc \\' quote' + \"esc \\\" dq\"\n",
    'if x:\n\n    """doc after blank line"""\n',
    'def h(): """same-line doc"""\n',
    "t = (1,\n     2)\n\tw = 3\n",
]


def _oracle_ids(name: str, text: str) -> tuple[list[int], list[int]]:
    toks = O.tokens(name, text)
    from forensics.text.code import _tid
    return [_tid(t.text) for t in toks], [t.line for t in toks]


def test_fast_lexer_equals_the_sequential_lexer():
    rng = random.Random(4)
    sources = list(EDGE_SOURCES)
    sources += [p.read_text() for p in sorted(CORPUS.rglob("*.py"))]
    sources += [B.gen_real_sized(rng, 300) for _ in range(3)] + [B.gen_solution(rng, 60) for _ in range(3)]
    for src in sources:
        ids, lines = SIM.lex_python_ids(src)
        want = _oracle_ids("solution.py", src)
        assert (ids.tolist(), lines.tolist()) == want, src[:200]
    for p in sorted(CORPUS.rglob("*.cu")):
        ids, lines = SIM.lex_cpp_ids(p.read_text())
        assert (ids.tolist(), lines.tolist()) == _oracle_ids(p.name, p.read_text())


def test_fast_lexer_counts_the_line_break_inside_a_spanning_directive():
    """`#` + line break + identifier is one C++ token; the sequential lexer did not count its line
    break, so every later line number was one short (kept as the one intended difference)."""
    src = 'S = """\n__global__ void k() {}\n# \nfoo(); bar();\n"""\n'
    toks = SIM.tokenize_python(src)
    assert [(t.text, t.line) for t in toks if t.text in ("#foo", "V")][-1] == ("V", 4)


def test_spans_equal_the_greedy_tiling():
    rng = random.Random(9)
    srcs = [p.read_text() for p in sorted(CORPUS.rglob("sol_*.py"))]
    srcs += [E.rename(s, "q") for s in srcs[:4]] + [E.reorder(s) for s in srcs[:4]]
    base = B.gen_real_sized(rng, 300)
    srcs += [base, B.derive(base, rng, 0.2), base + "\n" + srcs[0]]
    docs = [SIM.build_doc(str(i), {"solution.py": s}) for i, s in enumerate(srcs)]
    olds = [O.OldDoc({"solution.py": s}) for s in srcs]
    n = 0
    for i in range(len(docs)):
        for j in range(len(docs)):
            if i != j and (i + j) % 3 == 0:
                assert SIM.aligned_spans(docs[i], docs[j]) == O.aligned_spans(olds[i], olds[j]), (i, j)
                n += 1
    skip = {"V = V ( V )", "V = V . V"}
    assert SIM.aligned_spans(docs[0], docs[-1], skip_lines=skip) == O.aligned_spans(olds[0], olds[-1], skip_lines=skip)
    assert n > 50


def test_exact_pairs_find_every_pair_and_match_brute_force():
    srcs, probs = B.corpus(240, seed=5)
    docs = [SIM.build_doc(str(i), {"solution.py": s}, probs[i]) for i, s in enumerate(srcs)]
    pairs, stats = SIM.find_pairs(docs, {}, with_spans=False)
    assert stats["exact_groups"] == len(set(probs)) and stats["lsh_docs"] == 0
    got = {(p.a, p.b): p for p in pairs}
    sets = [d.distinct for d in docs]
    for i in range(len(docs)):
        for j in range(i + 1, len(docs)):
            if probs[i] != probs[j]:
                assert (i, j) not in got
                continue
            jac, ca, cb, inter = SIM.exact_scores(sets[i], sets[j])
            sc = SIM.score_of(jac, ca, cb, len(sets[i]), len(sets[j]))
            if sc >= SIM.PAIR_FLOOR and inter:
                p = got[(i, j)]      # every pair at or above the floor, none missed
                assert abs(p.score - sc) < 1e-12 and p.shared == inter and abs(p.jaccard_est - jac) < 1e-12
            else:
                assert (i, j) not in got
    # the MinHash/LSH fallback for groups too large for the exact product finds the same strong pairs
    docs2 = [SIM.build_doc(str(i), {"solution.py": s}, probs[i]) for i, s in enumerate(srcs)]
    pairs2, stats2 = SIM.find_pairs(docs2, {}, with_spans=False, exact_work=0)
    assert stats2["exact_groups"] == 0 and stats2["lsh_docs"] == len(docs2)
    strong = {(p.a, p.b) for p in pairs if p.score >= 0.5}
    assert strong and len(strong & {(p.a, p.b) for p in pairs2}) / len(strong) >= 0.95


# ------------------------------------------------------------------------------ problems of loose files

RID = "20260801_120000_codex_gpt-9.9_05_topk_bitonic"


def test_infer_problem_from_run_ids_not_timestamp_digits(tmp_path):
    assert SIM.infer_problem(tmp_path / f"{RID}.py", "")[0] == "05_topk_bitonic"
    assert SIM.infer_problem(tmp_path / f"{RID}__copy2.py", "")[0] == "05_topk_bitonic"
    assert SIM.infer_problem(tmp_path / RID / "solution.py", "")[0] == "05_topk_bitonic"
    assert SIM.infer_problem(tmp_path / "repo" / "problems" / "03_paged_attention" / "x.py", "")[0] == "03_paged_attention"
    # digits of a timestamp are not a problem ("44_codex_gpt" was guessed from such names before)
    assert SIM.infer_problem(tmp_path / "20260801_120044_codex_gpt.py", "x = 1\n")[0] is None
    assert SIM.infer_problem(tmp_path / "backup_10_44_sol.py", "x = 1\n")[0] is None


def test_infer_problem_from_the_interface_in_the_code(tmp_path):
    topk = "import torch\nclass Model(torch.nn.Module):\n    def __init__(self, batch, n, k):\n        super().__init__()\n"
    assert SIM.infer_problem(tmp_path / "a.py", topk) == ("05_topk_bitonic", "Model constructor signature")
    w4 = "class Model:\n    def __init__(self, M, N, K, group_size=128):\n        pass\n"
    assert SIM.infer_problem(tmp_path / "b.py", w4)[0] == "07_w4a16_gemm"
    fp8 = "class Model:\n    def __init__(self, M, N, K):\n        pass\n"
    assert SIM.infer_problem(tmp_path / "c.py", fp8)[0] == "01_fp8_gemm"
    # a constructor without parameters needs the reference's forward (or a method of it) as well
    bare = "class Model:\n    def __init__(self):\n        pass\n    def forward(self, x):\n        return x\n"
    assert SIM.infer_problem(tmp_path / "d.py", bare)[0] is None
    gru = "class Model:\n    def __init__(self):\n        pass\n    def forward(self, obs, state):\n        return obs\n"
    assert SIM.infer_problem(tmp_path / "e.py", gru)[0] == "04_grid_mingru_sps"
    assert SIM.infer_problem(tmp_path / "f.py", "def not python(:\n")[0] is None


def _run_similar(args):
    from click.testing import CliRunner

    from forensics.cli import main
    return CliRunner().invoke(main, ["similar", *args, "--json"])


def test_similar_on_a_flat_folder(tmp_path):
    import orjson
    flat = tmp_path / "flat"
    flat.mkdir()
    sol = _src("04_kahan_softmax", "sol_triton_online")
    other = _src("04_kahan_softmax", "sol_cuda_warp")
    (flat / "20260801_100000_claude_m_04_kahan_softmax.py").write_text(sol)
    (flat / "20260801_100000_claude_m_04_kahan_softmax__copy.py").write_text(E.rename(sol, "w"))
    (flat / "20260802_100000_codex_m_04_kahan_softmax.py").write_text(other)
    r = _run_similar([str(flat)])
    assert r.exit_code == 0, r.output
    rows = orjson.loads(r.output)
    top = rows[0]
    assert {top["a_id"], top["b_id"]} == {"20260801_100000_claude_m_04_kahan_softmax.py",
                                          "20260801_100000_claude_m_04_kahan_softmax__copy.py"}
    assert top["score"] > 0.9 and top["a_problem"] == top["b_problem"] == "04_kahan_softmax" and top["spans"]
    # a file that neither its name nor its code places is left out and listed, with the way out in the message
    (flat / "mystery.py").write_text(E.rename(sol, "m"))
    r = _run_similar([str(flat)])
    assert r.exit_code == 0 and all("mystery.py" not in (x["a_id"], x["b_id"]) for x in orjson.loads(r.stdout))
    assert "mystery.py" in r.stderr and "--problem" in r.stderr and "--cross-problem" in r.stderr
    r = _run_similar([str(flat), "--problem", "04_kahan_softmax"])
    assert r.exit_code == 0 and any("mystery.py" in (x["a_id"], x["b_id"]) for x in orjson.loads(r.stdout))
    # a copy filed under another problem is compared only with --cross-problem
    (flat / "mystery.py").unlink()
    (flat / "20260803_100000_kimi_m_01_fp8_gemm.py").write_text(E.rename(sol, "k"))
    rows = orjson.loads(_run_similar([str(flat)]).output)
    assert all("01_fp8_gemm" not in (x["a_id"] + x["b_id"]) for x in rows)
    rows = orjson.loads(_run_similar([str(flat), "--cross-problem"]).output)
    assert any("01_fp8_gemm" in (x["a_id"] + x["b_id"]) and x["score"] > 0.9 for x in rows)


def test_pairs_under_the_floor_are_dropped_before_they_are_scored_one_by_one(monkeypatch):
    """A problem's documents that share a shingle or two pairwise (candidates of the exact sparse
    product, all far under PAIR_FLOOR) are dropped as arrays: only the pairs over the floor reach
    the per-pair scoring (a Python tuple for each candidate held gigabytes at 40,000 tiny runs),
    and the pairs found are the same."""
    import numpy as np

    from forensics.text.code import Doc
    n, own = 300, 60
    docs = []
    for k in range(n):
        mine = np.arange(own, dtype=np.uint64) + np.uint64(1_000_000 + k * 1000)
        links = np.array([10 + k, 10 + (k + 1) % n], dtype=np.uint64)     # one shingle with each neighbour
        docs.append(Doc(f"r{k:04d}", "p", {"solution.py": ""}, shingles=np.unique(np.concatenate([mine, links]))))
    docs[200].shingles = docs[100].shingles.copy()                          # one planted copy
    calls = []
    orig = SIM.score_of

    def score_of(*a):
        calls.append(a)
        return orig(*a)
    monkeypatch.setattr(SIM, "score_of", score_of)
    pairs, stats = SIM.find_pairs(docs, {}, with_spans=False)
    assert stats["candidates"] >= n                       # every neighbour pair was a candidate ...
    assert len(calls) == len(pairs) == 1                  # ... and only the copy was scored
    p = pairs[0]
    assert {docs[p.a].doc_id, docs[p.b].doc_id} == {"r0100", "r0200"} and p.score == 1.0
