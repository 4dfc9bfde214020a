"""The import graph of forensics/ and devkit/ (every import, the lazy ones inside functions
included): imports point down the layers docs/interfaces.md's Layout lists, analyzers do not import each
other, the developer tooling (devkit/, beside the product) may import forensics but nothing in
forensics imports it (the CLI names its two commands as strings in its lazy table, nothing more),
the devkit's checkout paths come from devkit/paths.py, and there is no cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from forensics.analyze.registry import ANALYZERS, order, output_tables
from forensics.store import schema as S

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "forensics"
DEVKIT_DIR = REPO / "devkit"

# (prefix, rank): a module may import modules of its own rank's package or of a lower rank
LAYERS = (("devkit", 10), ("forensics.cli", 9), ("forensics.pipeline", 8),
          ("forensics.engine", 7), ("forensics.report", 6), ("forensics.verdict", 5),
          ("forensics.replay", 4), ("forensics.analyze", 4),
          ("forensics.analyze.findings", 3), ("forensics.analyze.registry", 3), ("forensics.store", 3),
          ("forensics.transcripts", 2), ("forensics.archive", 1), ("forensics.text", 0), ("forensics.pool", 0),
          ("forensics.vocab", 0), ("forensics.problems", 0), ("forensics.limits", 0),
          ("forensics.extras", 0))
DEVKIT = "devkit"


def modules() -> dict[str, Path]:
    out = {}
    for root in (PKG, DEVKIT_DIR):
        for p in root.rglob("*.py"):
            parts = p.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def is_devkit(m: str) -> bool:
    return m == DEVKIT or m.startswith(DEVKIT + ".")


def graph() -> dict[str, set[str]]:
    mods = modules()

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    g: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    up = pkg.split(".")[:len(pkg.split(".")) - (n.level - 1)]
                    base = ".".join(up + ([n.module] if n.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in n.names]
            for t in targets:
                k = known(t) if t.split(".")[0] in ("forensics", DEVKIT) else None
                if k and k != m:
                    g[m].add(k)
    return g


def rank(m: str) -> tuple[int, str]:
    best = ("", 0)   # forensics/__init__ and anything unlisted: the bottom
    for prefix, r in LAYERS:
        if (m == prefix or m.startswith(prefix + ".")) and len(prefix) > len(best[0]):
            best = (prefix, r)
    return best[1], best[0]


def cycles(g: dict[str, set[str]]) -> list[set[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_lazy_imports():
    g = graph()
    # engine imports the registry inside a worker function only: the walk must see it
    assert "forensics.analyze.registry" in g["forensics.engine"]
    # the devkit is in the graph, and its imports of the product are seen
    assert "forensics.cli" in g["devkit.bench.cli"] and "devkit.generator.run" in g["devkit.bench.timeline"]


def test_imports_point_down():
    up = []
    for m, deps in graph().items():
        rm, pm = rank(m)
        for d in deps:
            rd, pd = rank(d)
            if rd > rm:
                up.append(f"{m} -> {d}")
    assert up == []


def test_analyzers_do_not_import_each_other():
    g = graph()
    roots = {a.module for a in ANALYZERS}
    cross = [f"{m} -> {d}" for m in g for d in g[m]
             for a in roots for b in roots
             if a != b and (m == a or m.startswith(a + ".")) and (d == b or d.startswith(b + "."))]
    assert cross == []


def test_the_product_does_not_import_the_devkit():
    g = graph()
    bad = [f"{m} -> {d}" for m in g if not is_devkit(m) for d in g[m] if is_devkit(d)]
    assert bad == []


def test_the_product_names_the_devkit_only_in_the_cli_command_table():
    """No import of devkit in forensics/ (above); and no string naming one of its modules (an
    importlib call, a `-m devkit...` subprocess) except the CLI's lazy table of commands."""
    named = {}
    for p in PKG.rglob("*.py"):
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.match(r"devkit\.\w", n.value):
                named.setdefault(str(p.relative_to(REPO)), set()).add(n.value)
    assert set(named) == {"forensics/cli.py"}, named
    from forensics.cli import COMMANDS
    assert named["forensics/cli.py"] == {COMMANDS[c][0] for c in ("bench", "corpus")}


def test_the_devkit_takes_checkout_paths_from_one_place():
    """`__file__` (the start of every checkout-relative path) appears in devkit/paths.py only, and in
    gpucheck.py's bootstrap, which runs by path before it can import devkit.paths."""
    users = set()
    for p in DEVKIT_DIR.rglob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(tree)):
            users.add(p.relative_to(REPO).as_posix())
    assert users == {"devkit/paths.py", "devkit/generator/gpucheck.py"}


def test_no_cycle():
    assert cycles(graph()) == []


def test_the_analyzers_are_declared_and_their_tables_owned():
    order()   # requirements declared, each before its dependants
    owned = {t.name for t in S.TABLES if t.owner and t.owner != "analyze" and
             any(t.owner == a.module.removeprefix("forensics.") for a in ANALYZERS)}
    declared = {t for a in ANALYZERS for t in a.writes if t != "findings"}
    assert owned == declared
    assert set(output_tables()) >= {"findings", "foreign_refs", "file_versions", "check_runs", "replay_results"}


def test_the_cycle_finder_finds_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(g) == [{"a", "b", "c"}]
