"""Synthetic, labeled run archives (spec archive-format.md section 12).

* `RunBuilder` writes one run folder in any bench / era / harness format and returns its labels;
  its `.session` records tool calls in the harness's own format (docs/corpus.md).
* `generate(out, runs, seed, scale)` writes a realistic archive of many runs plus labels.json.
* `build_fixture(out)` writes the small committed fixture (corpus/fixtures/).
"""

from .run import RunBuilder
from .session import ForeignRef, Session

__all__ = ["RunBuilder", "Session", "ForeignRef", "generate", "build_fixture"]


def generate(*a, **k):
    from .generate import generate as _g
    return _g(*a, **k)


def build_fixture(*a, **k):
    from .fixture import build_fixture as _b
    return _b(*a, **k)
