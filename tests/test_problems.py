"""The problem catalogue (forensics/problems.py): its own rules, the one home of a problem's id in
forensics/, agreement with kernels/ (the replay's ProblemSpec wraps its entries), and agreement
with the benchmark's deck files (../shared/decks: problem.yaml, check.py, benchmark.py, src/,
reference.py, shapes.py) when they are present."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import problems as P

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "forensics"
CATALOGUE_FILE = PKG / "problems.py"
DECKS = Path(os.environ.get("FORENSICS_SHARED", REPO.parent / "shared")) / "decks" / "benchmarks"


# ------------------------------------------------------------------------------- the catalogue itself
def test_ids_versions_and_dates():
    assert set(P.bundled()) <= set(P.ids()) and len(P.bundled()) == 11
    fp8 = P.versions("01_fp8_gemm")
    assert [p.deck_version for p in fp8] == ["pre-2026-06-14", "2026-06-14"]
    assert P.get("01_fp8_gemm").deck_version == "2026-06-14"
    assert P.get("01_fp8_gemm", "2026-06-13T23:59:00").deck_version == "pre-2026-06-14"
    assert P.get("01_fp8_gemm", "2026-06-14").since == "2026-06-14"
    assert P.get("01_fp8_gemm", "pre-2026-06-14").until == "2026-06-14"
    with pytest.raises(KeyError):
        P.get("99_no_such_problem")
    assert P.find(None) is None and P.find("99_no_such_problem") is None
    assert P.bench_of("01_glm52_fused_moe") == "cuda" and P.bench_of(None) is None
    # longest id first: a run name holding a problem id whose tail is another id's
    long_id = max(P.ids(), key=len)
    assert P.problem_in_text(f"20260801_120000_codex_gpt-5_{long_id}_12_1") == long_id
    assert P.run_id_problem(f"gpt-5_{long_id}") == ("gpt-5", long_id)
    assert P.run_id_problem(long_id) is None


def test_entries_refuse_unknown_values():
    with pytest.raises(ValueError, match="api_kind"):
        P.Problem("00_x", bench="hard", api_kind="stream")
    with pytest.raises(ValueError, match="not a parameter"):
        P.Problem("00_x", bench="hard", entry_points=(P.EntryPoint("f", ("a",), writable=("b",)),))
    with pytest.raises(ValueError, match="state_names"):
        P.Problem("00_x", bench="hard", entry_points=(P.EntryPoint("f", ("a",), writable=("a",)),))
    with pytest.raises(ValueError, match="role"):
        P.Problem("00_x", bench="hard", grader_calls=(P.GraderCall("time.time", "clock", ("benchmark.py",)),))
    with pytest.raises(ValueError, match="unknown role"):
        P.get("05_topk_bitonic").calls("clock")


def test_entry_points_writable_args_and_the_timed_entry():
    for p in P.CATALOGUE:
        if not p.bundled:
            continue
        assert p.entry("Model") is not None, p.id
        timed = p.timed_entry_points
        assert len(timed) == 1, p.id
        # the static audit starts from the timed call's function name
        assert p.timed_entry[0] == timed[0].name.split(".")[-1], p.id
        assert not p.writable or p.api_kind in ("decode", "step"), p.id
    assert P.get("03_megaqwen_decode").writable == ("decode_steps.k_caches", "decode_steps.v_caches")
    assert P.get("02_kimi_linear_decode").writable == ("Model.step.state",)
    assert P.get("02_kda_cutlass").inputs == tuple(f"Model.forward.{a}" for a in ("q", "k", "v", "g", "beta"))


def test_the_catalogue_needs_only_the_standard_library():
    """The GPU machine's replay imports it without the store's dependencies: importing it with
    torch, duckdb, orjson, yaml and numpy made unimportable must work and load none of them."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in {'torch', 'duckdb', 'orjson', 'yaml', 'numpy', 'kernels'} "
            "or name.startswith('forensics.kernels'):\n"
            "            raise ImportError('blocked ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from forensics import problems\n"
            "assert problems.get('01_fp8_gemm').forbidden\n"
            "print(sorted(m for m in sys.modules if m.startswith('forensics')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['forensics', 'forensics.problems']"
    tree = ast.parse(CATALOGUE_FILE.read_text(encoding="utf-8"))
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert mods <= set(sys.stdlib_module_names) | {"__future__"}, mods


# ------------------------------------------------------------------------------- one home for an id
def _id_pattern() -> re.Pattern:
    return re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, sorted(P.ids(), key=len, reverse=True)))
                      + r")(?![A-Za-z0-9_])")


def spelled_ids(text: str) -> set[str]:
    """Problem ids written in a source text (code, strings, docstrings and comments alike)."""
    return set(_id_pattern().findall(text))


def test_the_id_scan_finds_a_planted_id():
    assert spelled_ids('X = {"05_topk_bitonic": 1}  # and 01_fp8_gemm') == {"05_topk_bitonic", "01_fp8_gemm"}
    assert spelled_ids("problems/02_kda_cutlass/") == {"02_kda_cutlass"}
    assert spelled_ids("x_05_topk_bitonic_y 105_topk_bitonic") == set()


def test_each_problem_id_is_spelled_only_in_the_catalogue():
    """Adding a problem touches one module of forensics/: no other module names a problem by id
    (a table keyed by ids, a help text's example, a docstring)."""
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        if path == CATALOGUE_FILE:
            continue
        hits = spelled_ids(path.read_text(encoding="utf-8"))
        if hits:
            found[str(path.relative_to(REPO))] = sorted(hits)
    assert found == {}
    assert spelled_ids(CATALOGUE_FILE.read_text(encoding="utf-8")) == set(P.ids())


# ------------------------------------------------------------------------------- against kernels/
def _ref_signatures(ref_file: str) -> dict[str, tuple[str, ...]]:
    """name -> parameters (self dropped) of the reference module's functions and Model methods."""
    tree = ast.parse((REPO / "kernels" / "ref" / ref_file).read_text(encoding="utf-8"))
    out: dict[str, tuple[str, ...]] = {}

    def params(f: ast.FunctionDef, method: bool) -> tuple[str, ...]:
        names = tuple(a.arg for a in f.args.posonlyargs + f.args.args)
        return names[1:] if method else names

    for n in tree.body:
        if isinstance(n, ast.FunctionDef):
            out[n.name] = params(n, False)
        elif isinstance(n, ast.ClassDef) and n.name == "Model":
            for f in n.body:
                if isinstance(f, ast.FunctionDef):
                    out["Model" if f.name == "__init__" else f"Model.{f.name}"] = params(f, True)
    return out


def test_every_problem_spec_wraps_its_catalogue_entry():
    pytest.importorskip("torch")
    from forensics.kernels import registry
    assert registry.LOAD_ERRORS == {}
    specs = [s for vs in registry.VERSIONS.values() for s in vs.values()]
    assert {(s.name, s.deck_version) for s in specs} == {(p.id, p.deck_version) for p in P.CATALOGUE if p.bundled}
    for s in specs:
        e = P.get(s.name, s.deck_version)
        assert s.entry is e
        assert (s.bench, s.since, s.until, s.ref_file) == (e.bench, e.since, e.until, e.ref_file)
        assert s.shapes == [dict(x) for x in e.shapes] and s.check_shapes == [dict(x) for x in e.check_shapes]
        assert tuple(s.seeds) == e.check_seeds and s.tolerance == dict(e.tolerance)
        assert list(s.forbidden) == list(e.forbidden) and s.forbidden_kind == e.forbidden_kind
        assert (s.api_kind, s.check_order, s.timing, s.n_trials) == (e.api_kind, e.check_order, e.timing, e.n_trials)
        assert s.api_kind in registry.API_KINDS
        # the tiny shapes carry the deck's globals (and Config fields for mega)
        keys = set().union(*(x.keys() for x in e.check_shapes))
        for t in e.tiny_shapes:
            assert keys <= set(t), (s.name, t)


@pytest.mark.parametrize("pid", P.bundled())
def test_entry_points_are_the_references(pid):
    """Every entry point's parameters are those of the bundled reference (the deck's interface);
    the stateful APIs' required and optional names are the spec's."""
    for e in P.versions(pid):
        sigs = _ref_signatures(e.ref_file)
        for ep in e.entry_points:
            want = sigs.get(ep.name)
            assert want is not None, (pid, ep.name)
            assert ep.params == want[:len(ep.params)], (pid, ep.name, want)
            # trailing parameters the catalogue leaves out have defaults the deck never passes
    pytest.importorskip("torch")
    from forensics.kernels import registry
    spec = registry.get(pid)
    if spec.stateful:
        top = {ep.name.split(".")[0] for ep in P.get(pid).entry_points}
        declared = set(spec.stateful.get("required", [])) | set(spec.stateful.get("optional", []))
        assert declared <= top, (pid, declared - top)
        assert {ep.name for ep in P.get(pid).entry_points if ep.required and "." not in ep.name} \
            >= set(spec.stateful.get("required", [])), pid


# ------------------------------------------------------------------------------- against the decks
def _deck(p: P.Problem) -> Path:
    d = DECKS / p.deck_path
    if not (d / "problem.yaml").is_file():
        pytest.skip(f"no deck files at {d} (../shared/decks)")
    return d


def _yaml(d: Path) -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((d / "problem.yaml").read_text())


@pytest.mark.parametrize("pid", P.bundled())
def test_forbidden_tolerance_and_trials_are_the_decks(pid):
    p = P.get(pid)
    meta = _yaml(_deck(p))
    assert p.forbidden == tuple(meta["forbidden"])
    # the tolerance override check.py applies (cuda 04 reads it from `logit_tolerance`)
    assert dict(p.tolerance) == (meta.get("tolerance") or meta.get("logit_tolerance") or {})
    assert p.n_trials == meta["num_perf_trials"]
    # every module the forbidden list names as an import (or, matched by AST, names at all)
    for lit in p.forbidden:
        s = lit.strip()
        if p.forbidden_kind == "ast_import" or s.startswith(("import ", "from ")):
            mod = s.split()[1] if s.startswith(("import ", "from ")) else s
            assert mod in p.forbidden_libraries, (pid, lit)


_ALIASES = {"decode_steps": "n_decode", "context_len": "ctx"}   # kernels' names for two of the decks' keys


def _norm(shape: dict) -> dict:
    return {_ALIASES.get(k.lower(), k.lower()): v for k, v in shape.items()}


def _shapes_module(d: Path) -> dict:
    ns: dict = {}
    exec(compile((d / "shapes.py").read_text(), str(d / "shapes.py"), "exec"), ns)  # noqa: S102 - the deck's constants
    return ns


@pytest.mark.parametrize("pid", P.bundled())
def test_shapes_and_seeds_are_the_decks(pid):
    p = P.get(pid)
    d = _deck(p)
    ns = _shapes_module(d)
    assert [_norm(s) for s in ns["SHAPES"]] == [_norm(dict(s)) for s in p.shapes]
    if "CHECK_SHAPES" in ns:
        assert [_norm(s) for s in ns["CHECK_SHAPES"]] == [_norm(dict(s)) for s in p.check_shapes]
    check = ast.parse((d / "check.py").read_text())
    # check.py's seed loop: a literal tuple, or the shapes module's GRADING_SEEDS
    loops = [n.iter for n in ast.walk(check) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
             and n.target.id == "seed"]
    seeds = [tuple(ast.literal_eval(it)) if isinstance(it, ast.Tuple) else tuple(ns[it.attr]) for it in loops]
    assert seeds and all(s == p.check_seeds for s in seeds), (pid, seeds)
    bench_ints = {n.value for n in ast.walk(ast.parse((d / "benchmark.py").read_text()))
                  if isinstance(n, ast.Constant) and type(n.value) is int}
    assert p.bench_seed in bench_ints
    manual = {ast.literal_eval(n.args[0]) for n in ast.walk(check) if isinstance(n, ast.Call) and n.args
              and _name(n.func, {"torch": "torch"}) == "torch.manual_seed" and isinstance(n.args[0], ast.Constant)}
    assert (p.property_seed in manual) if p.property_seed is not None else not manual, (pid, manual)


# the deck's calls the grader-calls list must cover: torch's comparisons, timers and seeding, the
# clocks, statistics and seed sources of the standard library and hypothesis, and the deck's own src/
_TORCH = {"allclose", "isclose", "equal", "isnan", "isinf", "isfinite", "cosine_similarity", "synchronize", "Event",
          "elapsed_time", "record", "manual_seed", "manual_seed_all", "seed", "Generator", "gather", "unique"}
_STDLIB = ("time.", "statistics.", "secrets.", "random.", "hypothesis.seed")
_METHODS = {"record", "elapsed_time", "manual_seed", "synchronize", "load_state_dict"}


def _aliases(tree: ast.AST) -> dict[str, str]:
    al: dict[str, str] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                al[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            for a in n.names:
                al[a.asname or a.name] = f"{n.module}.{a.name}"
    return al


def _name(func: ast.AST, al: dict[str, str]) -> str | None:
    """The dotted name a call resolves to through the file's imports; '?.attr' for a method of a
    local value, None for a plain local function."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name) and func.id in al:
        return ".".join([al[func.id], *reversed(parts)])
    return "?." + parts[0] if parts else None


def _src_file(bench_dir: Path, dotted: str) -> tuple[Path, str] | None:
    """'src.eval.timing.time_fn' -> (src/eval/timing.py, 'time_fn')."""
    mod, _, func = dotted.rpartition(".")
    base = bench_dir / mod.replace(".", "/")
    f = next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)
    return (f, func) if f else None


def _is_main_block(n: ast.AST) -> bool:
    return isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) and "__name__" in ast.unparse(n.test)


def _deck_calls(d: Path, bench_dir: Path) -> dict[str, tuple[dict[str, str], list[ast.Call]]]:
    """file -> (its import aliases, the calls of it that run in the solution's process): all of
    check.py and benchmark.py, reference.py but its `__main__` block, and in the deck's src/ the
    functions reachable from what those call (a src module's unreached code never runs)."""
    out: dict[str, tuple[dict[str, str], list[ast.Call]]] = {}
    wanted: dict[Path, set[str]] = {}

    def note(al: dict[str, str], calls: list[ast.Call]) -> None:
        for c in calls:
            name = _name(c.func, al)
            hit = _src_file(bench_dir, name) if name and name.startswith("src.") else None
            if hit:
                wanted.setdefault(hit[0], set()).add(hit[1])

    for f in ("check.py", "benchmark.py", "reference.py"):
        tree = ast.parse((d / f).read_text())
        body = [n for n in tree.body if not (f == "reference.py" and _is_main_block(n))]
        calls = [n for top in body for n in ast.walk(top) if isinstance(n, ast.Call)]
        out[f] = (_aliases(tree), calls)
        note(out[f][0], calls)
    done: dict[Path, set[str]] = {}
    while any(wanted.get(f, set()) - done.get(f, set()) for f in wanted):
        for path in list(wanted):
            todo = wanted[path] - done.setdefault(path, set())
            if not todo:
                continue
            tree = ast.parse(path.read_text())
            al = _aliases(tree)
            defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
            rel = str(path.relative_to(bench_dir))
            calls = out.setdefault(rel, (al, []))[1]
            while todo:
                fn = todo.pop()
                if fn in done[path] or fn not in defs:
                    continue
                done[path].add(fn)
                new = [n for n in ast.walk(defs[fn]) if isinstance(n, ast.Call)]
                calls.extend(new)
                todo |= {c.func.id for c in new if isinstance(c.func, ast.Name) and c.func.id in defs}
                # a local function passed as a value (a strategy, a callback) runs too
                todo |= {n.id for n in ast.walk(defs[fn]) if isinstance(n, ast.Name) and n.id in defs}
                note(al, new)
    return out


@pytest.mark.parametrize("pid", P.bundled())
def test_grader_calls_cover_the_decks_calls(pid):
    """Every call to a torch comparison/timer/seeding function, a clock, a statistic or a seed source,
    and every call into the deck's src/, made in the solution's process, is in the problem's grader
    calls with the file it is made in; and every listed call is made where the list says."""
    p = P.get(pid)
    d = _deck(p)
    bench_dir = DECKS / p.bench
    listed = {c.name: c for c in p.grader_calls}
    missing, unmade = [], []
    files = _deck_calls(d, bench_dir)
    for rel, (al, calls) in files.items():
        made: set[str] = set()
        for n in calls:
            name = _name(n.func, al)
            tail = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
            made |= {x for x in (name, "." + str(tail)) if x}
            if name is None:
                continue
            if name.startswith("?."):
                if name[2:] not in _METHODS:
                    continue
                need = [c for c in listed.values() if c.name.endswith(name[1:])]
            elif (name.startswith("torch.") and name.rsplit(".", 1)[-1] in _TORCH) or name.startswith(_STDLIB) \
                    or name.startswith("src.eval.") or (name.startswith("src.") and rel in ("check.py", "benchmark.py")):
                need = [listed[name]] if name in listed else []
            else:
                continue
            if not any(rel in c.where for c in need):
                missing.append(f"{rel}:{n.lineno} {name}")
        for c in listed.values():
            if rel in c.where and c.name not in made and "." + c.name.rsplit(".", 1)[-1] not in made:
                unmade.append(f"{c.name} in {rel}")
    assert missing == [], missing
    assert unmade == [], unmade
    assert {w for c in p.grader_calls for w in c.where} <= set(files)


def test_the_deck_scan_finds_a_planted_call(tmp_path):
    """The scan behind the test above sees a seeding call reached through a deck src/ function and
    leaves out one in an unreached function and in reference.py's __main__ block."""
    (tmp_path / "src" / "eval").mkdir(parents=True)
    (tmp_path / "src" / "eval" / "t.py").write_text(
        "import torch\nimport statistics\n"
        "def used():\n    helper()\n    return statistics.median([1])\n"
        "def helper():\n    torch.manual_seed(1)\n"
        "def unused():\n    torch.cuda.synchronize()\n")
    d = tmp_path / "p"
    d.mkdir()
    (d / "check.py").write_text("from src.eval.t import used\nused()\n")
    (d / "benchmark.py").write_text("import time\nt = time.perf_counter()\n")
    (d / "reference.py").write_text("import torch\nif __name__ == '__main__':\n    torch.cuda.synchronize()\n")
    files = _deck_calls(d, tmp_path)
    names = {rel: {_name(c.func, al) for c in calls} for rel, (al, calls) in files.items()}
    assert names["src/eval/t.py"] >= {"torch.manual_seed", "statistics.median"}
    assert "torch.cuda.synchronize" not in names["src/eval/t.py"] | names["reference.py"]
    assert "time.perf_counter" in names["benchmark.py"]


@pytest.mark.parametrize("pid", P.bundled())
def test_how_the_deck_checks_and_times(pid):
    """The forbidden match, the language gate, the L2 flush and the entry points the deck calls on the
    solution, read from its check.py and benchmark.py."""
    p = P.get(pid)
    d = _deck(p)
    calls: set[str] = set()
    attrs: set[str] = set()
    for f in ("check.py", "benchmark.py"):
        tree = ast.parse((d / f).read_text())
        al = _aliases(tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                calls.add(_name(n.func, al) or "")
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "solution":
                attrs.add(n.attr)
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "hasattr" and \
                    getattr(n.args[0], "id", None) == "solution":
                attrs.add(n.args[1].value)
    # state check.py did not get from the solution: a value made by a reference.* call, handed to a
    # method of the solution's model
    check = ast.parse((d / "check.py").read_text())
    al = _aliases(check)
    from_ref = {t.id for n in ast.walk(check) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                and (_name(n.value.func, al) or "").startswith("reference.") for t in n.targets if isinstance(t, ast.Name)}
    fed = [n for n in ast.walk(check) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
           and isinstance(n.func.value, ast.Name) and n.func.value.id.startswith("sol")
           and any(isinstance(a, ast.Name) and a.id in from_ref for a in n.args)]
    assert bool(fed) == p.check_feeds_state, (pid, [ast.unparse(n) for n in fed])
    assert ("ast.parse" in calls) == (p.forbidden_kind == "ast_import")
    assert ("re.escape" in calls) == (p.forbidden_kind == "substring")
    assert ("src.eval.cuda_language.check_cuda_language" in calls) == p.language_gate
    assert ("src.eval.timing.time_variant" in calls) == bool(p.l2_flush)
    assert attrs == {ep.name for ep in p.entry_points if "." not in ep.name}, attrs
