"""Text of decoded JSON values, shared by the parsers (`base`) and the structural recovery
(`structural`), which `base` uses: kept below both so the imports have no cycle."""

from __future__ import annotations

from typing import Any

import orjson


def text_of(content: Any, keys: tuple[str, ...] = ("text",)) -> str | None:
    """Text of a message content: a string, or a list of blocks with a text-like key."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, str):
                parts.append(b)
            elif isinstance(b, dict):
                for k in keys:
                    v = b.get(k)
                    if isinstance(v, str):
                        parts.append(v)
                        break
        return "\n".join(parts) if parts else None
    if isinstance(content, dict):
        for k in keys:
            v = content.get(k)
            if isinstance(v, str):
                return v
    return None


def dumps_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if v is None:
        return ""
    try:
        return orjson.dumps(v).decode()
    except Exception:  # noqa: BLE001
        return str(v)
