"""The README is checked like code: the commands of its ```sh blocks run as written (in a folder
holding the repository's corpus, so `forensics scan corpus/fixtures/archive` scans the fixture and
the SQL commands after it find the store it wrote) with the exit code they say; the options its
```text synopses name exist; its test command is the one CI runs; every link of the README and the
docs resolves, anchors included; docs/extending.md has its checklists and names only files that
exist."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"

# What a README `sh` line may do without the test running it, and why.  Anything else must be a
# `forensics` command, which runs.
NOT_RUN = {
    "pip install": "an install (CI installs the extras first: .ci/run)",
    "python3 -m pytest": "the test suite itself",
    "FORENSICS_DB=report/audit.duckdb jupyter": "Jupyter: tests/test_notebooks.py runs the nbconvert line",
}


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)


def sh_lines() -> list[tuple[str, int]]:
    """(command, expected exit code) for every part of every line of the README's sh blocks; a
    trailing `# exit N` comment gives the code (0 without one)."""
    out = []
    for b in blocks("sh"):
        for line in b.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cmd, _, comment = line.partition("  #")
            m = re.search(r"\bexit (\d+)", comment)
            for part in cmd.strip().split(" && "):
                out.append((part.strip(), int(m.group(1)) if m else 0))
    return out


def test_every_readme_command_is_run_or_said_why_not():
    for cmd, _ in sh_lines():
        assert cmd.startswith("forensics ") or any(cmd.startswith(p) for p in NOT_RUN), \
            f"README command neither run by this test nor listed in NOT_RUN: {cmd}"


def test_readme_commands_run_as_written(tmp_path):
    """In a fresh folder whose corpus/ is the repository's (read only: nothing under it may
    change), in README order, through `python -m forensics.cli` of this checkout."""
    (tmp_path / "corpus").symlink_to(REPO / "corpus")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "NO_COLOR": "1"}
    env.pop("FORENSICS_DB", None)
    before = {p: p.lstat().st_mtime_ns for p in (REPO / "corpus" / "fixtures" / "archive").rglob("*")}
    ran = []
    for cmd, code in sh_lines():
        if not cmd.startswith("forensics "):
            continue
        argv = [sys.executable, "-m", "forensics.cli", *shlex.split(cmd)[1:]]
        p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert p.returncode == code, f"{cmd}\nexit {p.returncode}, README says {code}\n{p.stderr[-2000:]}"
        assert "Traceback" not in p.stderr, (cmd, p.stderr[-2000:])
        assert p.stdout.strip(), f"{cmd} printed nothing"
        ran.append((cmd, p.stdout))
    names = [c.split()[1] for c, _ in ran]
    assert {"scan", "query", "sql", "schema", "lint", "rules", "--help"} <= set(names)
    assert (tmp_path / "report" / "audit.duckdb").is_file() and (tmp_path / "report" / "verdict.html").is_file()
    out = dict(ran)
    csv = next(o for c, o in ran if c.startswith("forensics sql") and "--format csv" in c)
    assert csv.splitlines()[0] == "run_id,rule,severity,message"
    assert "verdict" in next(o for c, o in ran if c.startswith("forensics sql") and "publishable" in c)
    assert "superseded-passes" in out["forensics query --list"]
    after = {p: p.lstat().st_mtime_ns for p in (REPO / "corpus" / "fixtures" / "archive").rglob("*")}
    assert after == before, "a README command wrote into the archive under audit"


def test_readme_synopses_name_real_options():
    """Every `--option` of the ```text synopses is in that command's --help (help prints without
    the extras, so this runs everywhere)."""
    from click.testing import CliRunner

    from forensics.cli import main
    checked = 0
    for b in blocks("text"):
        for line in b.splitlines():
            words = line.split("#")[0].split()
            if len(words) < 2 or words[0] != "forensics":
                continue
            sub = [w for w in words[1:3] if re.fullmatch(r"[a-z]+", w)]
            r = CliRunner().invoke(main, [*sub[:2 if sub[:1] == ["kernels"] else 1], "--help"])
            assert r.exit_code == 0, (line, r.output)
            for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line):
                assert opt in r.output, f"{opt} of `{line.strip()}` is not an option of forensics {' '.join(sub[:1])}"
                checked += 1
    assert checked >= 8


def test_readme_test_command_is_what_ci_runs():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    install = next(ln.strip() for ln in ci if "pip install" in ln and "-e '.[test" in ln)
    tests = next(ln.strip() for ln in ci if "-m pytest" in ln)
    readme_cmds = [ln.strip() for b in blocks("sh") for ln in b.splitlines() if "-m pytest" in ln]
    assert readme_cmds == [f"{install.replace('python3 -m pip install -q ', 'pip install ')} && {tests}"], \
        (readme_cmds, install, tests)
    scan = [ln.strip() for b in blocks("sh") for ln in b.splitlines() if ln.startswith("pip install -e . &&")]
    assert scan == ["pip install -e . && forensics scan corpus/fixtures/archive"]


# --------------------------------------------------------------------------- links

def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def anchors(md: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fence = False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence or not re.match(r"#{1,6} ", line):
            continue
        s = slug(line.lstrip("#"))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def md_links(md: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", md.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


PAGES = [README, REPO / "CHANGELOG.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("md", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_resolve(md):
    bad = []
    for link in md_links(md):
        if re.match(r"[a-z]+:", link):
            continue   # http(s), mailto
        path, _, frag = link.partition("#")
        target = (md.parent / path).resolve() if path else md
        if not target.exists():
            bad.append(f"{link}: no such file")
        elif frag and target.suffix == ".md" and frag not in anchors(target):
            bad.append(f"{link}: no heading #{frag} in {target.name}")
    assert not bad, bad


# --------------------------------------------------------------------------- docs/extending.md

CHECKLISTS = ("Adding a transcript format", "Adding an analyzer", "Adding a problem", "Adding a static rule")


def test_extending_has_the_four_checklists_naming_real_files():
    text = (REPO / "docs" / "extending.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", text, re.S | re.M))
    for name in CHECKLISTS:
        body = sections.get(name, "")
        steps = re.findall(r"^\d+\. \*\*", body, re.M)
        assert len(steps) >= 3, f"docs/extending.md: '{name}' has {len(steps)} numbered steps"
    missing = []
    for ref in set(re.findall(r"`((?:forensics|tests|corpus|devkit|kernels|docs)/[\w./-]+)`", text)):
        if "<" in ref or "*" in ref:
            continue
        if not (REPO / ref).exists():
            missing.append(ref)
    assert not missing, f"docs/extending.md names files that do not exist: {sorted(missing)}"
