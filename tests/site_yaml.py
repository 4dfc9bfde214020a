"""A Python port of the benchmark site's annotation reader, written from its description (the site's
`parseAnnotationYaml`, kernelbench.com `app/_lib/data.ts`, as issue 20 describes it; not its code):

* it finds `key: value` on one line (a key in column 0; lines of nested values are indented);
* it strips one pair of surrounding quotes from the value, and does nothing else to it (no escapes,
  no comments, no booleans or numbers: every value is a string);
* a value `|` or `>` starts a block scalar: the following lines indented by two spaces, up to the
  next line that is not, with the two spaces removed; `|` keeps the line breaks, `>` joins the lines
  with spaces.

Assumptions where the description is silent, chosen so the port is no more lenient than the site
could be where it matters: a chomping indicator (`|-`, `|+`) is read as the same block (the site
checks the indicator character); the block's lines are joined without a final line break; the
value of a one-line key is trimmed before the quotes are stripped.
"""

from __future__ import annotations

import re
from typing import Any

_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):(?:[ \t]+(.*))?$")
_BLOCK = re.compile(r"^([|>])[-+]?$")


def parse_site(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _KEY.match(lines[i])
        i += 1
        if not m:
            continue
        key, raw = m.group(1), (m.group(2) or "").strip()
        b = _BLOCK.match(raw)
        if b:
            block = []
            while i < len(lines) and lines[i].startswith("  "):
                block.append(lines[i][2:])
                i += 1
            out[key] = ("\n" if b.group(1) == "|" else " ").join(block)
            continue
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]
        out[key] = raw
    return out


def site_agrees(site_value: str | None, yaml_value: Any) -> bool:
    """The site's string denotes the YAML value: equal strings; for a boolean, number or null the
    literal the site shows reads back (as YAML) to the same value."""
    import yaml
    if site_value is None:
        return False
    if isinstance(yaml_value, str):
        return site_value == yaml_value
    try:
        return yaml.safe_load(f"k: {site_value}") == {"k": yaml_value}
    except yaml.YAMLError:
        return False


def top_level_scalars(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if not isinstance(v, (dict, list))}
