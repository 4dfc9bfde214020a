"""Reading CUDA/C++ source text without a compiler."""

from __future__ import annotations

import re

from forensics.text import rx as RX

#: `__global__` as a word, or right after an escape in a one-line Python literal ('...\\n__global__ void k(')
_GLOBAL = re.compile(r"(?:(?<=\\[ntr])|(?<![A-Za-z0-9_]))__global__\b")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^()]*(?:\([^()]*\)[^()]*)*\)")
_NAME_CALL = re.compile(r"([A-Za-z_]\w*)\s*\(")


def global_kernel_names(text: str) -> list[str]:
    """Names of the `__global__` functions defined or declared in `text`, in order: the identifier
    before the parameter list, whatever sits between (`template <...>`, `extern "C"`, return type,
    `__launch_bounds__(...)`, `static`, `inline`)."""
    out: list[str] = []
    for m in RX.finditer(_GLOBAL, text, ("__global__",)):
        end = len(text)
        for stop in ("{", ";"):
            j = text.find(stop, m.end())
            if j != -1:
                end = min(end, j)
        head = _LAUNCH_BOUNDS.sub(" ", text[m.end():end])
        c = _NAME_CALL.search(head)
        if c and c.group(1) not in out:
            out.append(c.group(1))
    return out
