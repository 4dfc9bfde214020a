"""Regex scans that jump to where a match can begin.

Python's `re` finds a pattern fast only when it starts with a plain literal; a pattern that starts
with `\\b`, a group of alternatives or a character class is tried at every offset of the text,
which on a 100 kB CUDA source costs milliseconds per pattern.  When every match of a pattern is
known to begin with one of a few literal strings (its *heads*), the offsets where a match can start
are found with `str.find` and the pattern is only tried there: the matches are exactly those of
`rx.finditer` (same spans, same groups, same order), since `rx.match(text, s, endpos)` sees the
text before `s` (`\\b`, lookbehinds) just as the full scan does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator


def starts(text: str, heads: Iterable[str], pos: int = 0, endpos: int | None = None) -> list[int]:
    """Sorted offsets in [pos, endpos) where one of the literal `heads` begins, wholly before endpos."""
    end = len(text) if endpos is None else min(endpos, len(text))
    out: set[int] = set()
    find = text.find
    for h in heads:
        if not h:
            raise ValueError("a head must be a non-empty literal")
        i = find(h, pos, end)
        while i != -1:
            out.add(i)
            i = find(h, i + 1, end)
    return sorted(out)


def finditer(rx: re.Pattern, text: str, heads: Iterable[str], pos: int = 0,
             endpos: int | None = None) -> Iterator[re.Match]:
    """The matches of `rx.finditer(text, pos, endpos)`, for a pattern every match of which begins
    with one of the literal strings `heads` (so no match is empty).

    Candidate offsets are taken in increasing order, each head's next occurrence found only when
    the scan has passed its last one (a search that stops at the first match reads little)."""
    end = len(text) if endpos is None else min(endpos, len(text))
    find = text.find
    nxt: dict[str, int] = {}
    for h in heads:
        if not h:
            raise ValueError("a head must be a non-empty literal")
        i = find(h, pos, end)
        if i != -1:
            nxt[h] = i
    match = rx.match
    while nxt:
        s = min(nxt.values())
        m = match(text, s, end)
        if m is not None:
            yield m
            cur = m.end()
        else:
            cur = s + 1
        for h, i in list(nxt.items()):
            if i < cur:
                j = find(h, cur, end)
                if j == -1:
                    del nxt[h]
                else:
                    nxt[h] = j


def search(rx: re.Pattern, text: str, heads: Iterable[str], pos: int = 0, endpos: int | None = None) -> re.Match | None:
    """`rx.search(text, pos, endpos)` for a pattern every match of which begins with one of `heads`."""
    return next(finditer(rx, text, heads, pos, endpos), None)
