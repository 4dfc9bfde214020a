"""Synthetic, labeled run archives (spec archive-format.md section 12).

* `RunBuilder` writes one run folder in any bench / era / harness format and returns its labels;
  its `.session` records tool calls in the harness's own format (docs/corpus.md).
* `generate(out, runs, seed, scale)` writes a realistic archive of many runs plus labels.json.
* `build_fixture(out)` writes the small committed fixture (corpus/fixtures/).
"""

from .fixture import build_fixture
from .generate import generate
from .run import RunBuilder
from .session import ForeignRef, Session

__all__ = ["RunBuilder", "Session", "ForeignRef", "generate", "build_fixture"]
