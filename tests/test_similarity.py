"""Source similarity: normalization, MinHash equivalence with datasketch, discount, spans, store."""

from __future__ import annotations

import random

import numpy as np
from datasketch import MinHash

from forensics.analyze import contamination_eval as E
from forensics.analyze import similarity as SIM
from forensics.bench import similarity as B
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
