"""The scaling bench's own measurements (devkit/bench/scale.py): py-spy's stacks are read whole even
where a process's command line holds newlines, and a measurement's CPU counts its workers."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from devkit.bench.scale import _measure, spy_compare, spy_inclusive
from devkit.generator.cli import corpus_cmd

REPO = Path(__file__).resolve().parent.parent


def test_spy_stacks_span_the_newlines_of_a_command_line(tmp_path):
    raw = tmp_path / "s.txt"
    # two stacks of one process run as `python -c SCRIPT` (its command line: three lines), one of a worker
    raw.write_text('process 11:"python -c \nimport x\nx.main() / 1024";<module> (<string>:3);work (m.py:5) 7\n'
                   'process 11:"python -c \nimport x\nx.main() / 1024";<module> (<string>:3);idle (m.py:9) 2\n'
                   'process 12:"python -B -c worker";run (w.py:1);work (m.py:5) 5\n')
    incl, total = spy_inclusive(raw)
    assert total == 14                           # not 14 + the "1024" that ends a line of the script
    assert incl["work (m.py)"] == 12 and incl["idle (m.py)"] == 2 and incl["<module> (<string>)"] == 9
    assert incl['process:"python -c "'] == 9     # the pid left out: the same process at two sizes compares
    other = tmp_path / "t.txt"
    other.write_text(raw.read_text().replace("process 11:", "process 99:").replace(" 7\n", " 21\n"))
    assert 'process:"python -c "' in spy_compare(raw, 1, other, 1)


def test_a_measurement_counts_its_workers(tmp_path):
    arch = tmp_path / "a"
    r = CliRunner().invoke(corpus_cmd, ["generate", str(arch), "--runs", "40", "--seed", "2", "--tiny"])
    assert r.exit_code == 0, r.output
    m = _measure(REPO, "ingest", arch, tmp_path / "m", 2, False, None)
    assert m["runs"] == 40
    assert m["workers_peak_rss_mb"] > 20          # the forkserver's workers, reaped: 0 when they were not
