"""The import graph of forensics/ and devkit/ (every import, the lazy ones inside functions
included): imports point down the layers docs/interfaces.md's Layout lists, analyzers do not import each
other, the developer tooling (devkit/, beside the product) may import forensics but nothing in
forensics imports it (the CLI names its two commands as strings in its lazy table, nothing more),
the devkit's checkout paths come from devkit/paths.py, and there is no cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

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


# ------------------------------------------------------------------ class sizes
MAX_CLASS_LINES = 600


def long_classes(src: str, where: str) -> list[str]:
    """Classes of `src` spanning more than MAX_CLASS_LINES lines (decorators to the last line)."""
    out = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.ClassDef):
            first = min([n.lineno] + [d.lineno for d in n.decorator_list])
            span = n.end_lineno - first + 1
            if span > MAX_CLASS_LINES:
                out.append(f"{where}:{n.lineno} class {n.name}: {span} lines")
    return out


#: classes over the bar, each to be split along its seams (listed only while a split is pending: the list
#: can only shrink, an entry back under the bar fails the test); empty since capabilities.py and
#: entry_flow.py were split into their collaborators
OVER_THE_BAR: dict[str, set[str]] = {}


def test_no_class_in_forensics_spans_more_than_600_lines():
    """A class that grows past this is splitting along no seam (the replay's Replay reached 1,374 lines
    and Worker 732 before they were split into the session's parts and the worker's Store / Timing)."""
    found: dict[str, set[str]] = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = str(p.relative_to(REPO))
        for c in long_classes(p.read_text(encoding="utf-8"), rel):
            found.setdefault(rel, set()).add(c.split(" class ")[1].split(":")[0])
    assert found == OVER_THE_BAR


def test_the_class_size_check_sees_a_planted_long_class():
    src = "class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES + "\n\nclass Small:\n    y = 2\n"
    assert long_classes(src, "planted.py") == [f"planted.py:1 class Big: {MAX_CLASS_LINES + 1} lines"]


# ------------------------------------------------------------------ the replay's probes and its session
PROBES_PKG = "forensics.replay.probes"
#: what a probe module may import of the replay: the session (its public names), the registry, the
#: measurement arithmetic (timing, clockcheck: functions of values, no state) and the other probes
PROBE_MAY_IMPORT = {"forensics.replay.session", "forensics.replay.registry", "forensics.replay.timing",
                    "forensics.replay.clockcheck"}


def session_interface() -> set[str]:
    """The session's public names a probe may use (the driver's own excepted: session.RUNNER_ONLY)."""
    from forensics.replay.session import RUNNER_ONLY, Session
    return {n for n in dir(Session) if not n.startswith("_")} - RUNNER_ONLY


def probe_violations(src: str, module: str, interface: set[str]) -> list[str]:
    """What a probe module does beyond the session's public interface: imports of the replay's
    internals (runner, worker, the session's parts), private names imported from the session, any
    `_private` attribute or `__dict__`, getattr & co. with a private name, `vars()`, the child's
    protocol itself (`.request`), a session parameter not called `s`, and `s.<name>` for a name the
    session does not offer probes."""
    pkg = module.rpartition(".")[0]
    out = []
    for n in ast.walk(ast.parse(src)):
        line = getattr(n, "lineno", 0)
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            if isinstance(n, ast.Import):
                targets = [(a.name, a.name) for a in n.names]
            else:
                base = n.module or ""
                if n.level:
                    up = pkg.split(".")[:len(pkg.split(".")) - (n.level - 1)]
                    base = ".".join(up + ([n.module] if n.module else []))
                targets = [(base, a.name) for a in n.names]
            for base, name in targets:
                full = f"{base}.{name}" if base in ("forensics.replay", PROBES_PKG) else base
                if full.startswith("forensics.replay") and full not in PROBE_MAY_IMPORT \
                        and not full.startswith(PROBES_PKG):
                    out.append(f"{line}: imports {full}")
                if base == "forensics.replay.session" and name.startswith("_"):
                    out.append(f"{line}: imports the session's private {name}")
        elif isinstance(n, ast.Attribute):
            if n.attr == "__dict__" or (n.attr.startswith("_") and not n.attr.endswith("__")):
                out.append(f"{line}: private attribute .{n.attr}")
            elif n.attr == "request":
                out.append(f"{line}: the child's protocol (.request)")
            elif isinstance(n.value, ast.Name) and n.value.id == "s" and n.attr not in interface:
                out.append(f"{line}: s.{n.attr} is not the session's probe interface")
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            if n.func.id == "vars":
                out.append(f"{line}: vars()")
            elif n.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(n.args) > 1 \
                    and isinstance(n.args[1], ast.Constant) and str(n.args[1].value).startswith("_"):
                out.append(f"{line}: {n.func.id}(..., {n.args[1].value!r})")
        elif isinstance(n, (ast.FunctionDef, ast.Lambda)):
            for a in n.args.args:
                ann = getattr(a, "annotation", None)
                if isinstance(ann, ast.Name) and ann.id == "Session" and a.arg != "s":
                    out.append(f"{line}: a session parameter named {a.arg!r} (probes call it `s`)")
    return out


def test_probe_modules_use_only_the_sessions_public_interface():
    pytest.importorskip("torch")
    from forensics.replay import registry
    names = registry.load()
    mods = modules()
    assert names and all(m.startswith(PROBES_PKG + ".") for m in names)
    # every registered probe lives in a probe module
    for kind in registry.KINDS:
        for name, fn in registry.table(kind).items():
            assert fn.__module__ in names, (kind, name, fn.__module__)
    interface = session_interface()
    bad = {m: v for m in names if (v := probe_violations(mods[m].read_text(encoding="utf-8"), m, interface))}
    assert bad == {}


def test_the_probe_layering_check_sees_planted_violations():
    pytest.importorskip("torch")
    planted = '''
from ..runner import Child
from ..session import Session, _private
from .. import worker


def probe(s: Session, ch):
    s._rec.row()
    x = s.__dict__
    s.close()
    s.no_such_thing
    ch.request("new", 1)
    getattr(s, "_link")
    vars(s)


def other(session: Session):
    return session
'''
    v = "\n".join(probe_violations(planted, PROBES_PKG + ".planted", session_interface()))
    for what in ("imports forensics.replay.runner", "imports the session's private _private",
                 "imports forensics.replay.worker", "private attribute ._rec", "private attribute .__dict__",
                 "s.close is not", "s.no_such_thing is not", "(.request)", "getattr(..., '_link')", "vars()",
                 "named 'session'"):
        assert what in v, (what, v)
    honest = '''
from forensics.vocab import CHECK
from ..registry import MODULE, probe
from ..session import Session, shape_label
from . import generic


@probe(CHECK, MODULE)
def check(s: Session) -> None:
    ch = s.child()
    s.row(CHECK, "pass", detail=shape_label({}))
    s.delete(ch, objs=["m"])
'''
    assert probe_violations(honest, PROBES_PKG + ".honest", session_interface()) == []
