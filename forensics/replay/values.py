"""Pure helpers over the values a replay handles (tensors and trees of them, shapes, result dicts).

No state and no child: what probes and the session share to read, compare and describe values.
Every name here is public to the probes (forensics/replay/probes/), as the session's methods are."""

from __future__ import annotations

import math
import zlib
from typing import Any

import torch

from .worker import _to_dev_tree as to_dev  # noqa: F401 - one tree walk for both sides of the pipe


def tensors(x: Any) -> list[torch.Tensor]:
    """Every tensor of a tree (lists, tuples, dict values), in order."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors(v)]
    return []


def nbytes(x: Any) -> int:
    """Bytes of every tensor of a tree (`tensors`)."""
    return sum(t.numel() * t.element_size() for t in tensors(x))


def unwrap(x: Any) -> Any:
    """Child exports: subclass markers -> flagged dict; opaque -> kept as marker."""
    if isinstance(x, dict) and "__subclass__" in x:
        return x
    if isinstance(x, list):
        return [unwrap(v) for v in x]
    if isinstance(x, tuple):
        return tuple(unwrap(v) for v in x)
    return x


def same(a: Any, b: Any) -> bool:
    """Bit for bit the same trees (an untouched tensor holding NaN is the same)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.device != b.device:
            a, b = a.cpu(), b.cpu()
        if torch.equal(a, b):
            return True
        # bit for bit: an untouched input holding NaN is the same input (NaN != NaN otherwise)
        return a.numel() > 0 and torch.equal(a.contiguous().reshape(-1).view(torch.uint8),
                                             b.contiguous().reshape(-1).view(torch.uint8))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def maxdiff(a: Any, b: Any) -> float:
    """The largest elementwise difference over two trees' tensors (inf: a shape differs or NaN)."""
    ta, tb = tensors(a), tensors(b)
    m = 0.0
    for x, y in zip(ta, tb):
        if x.shape != y.shape:
            return math.inf
        if x.numel():
            d = (x.float() - y.to(x.device).float()).abs()
            m = max(m, float(torch.nan_to_num(d, nan=math.inf).max()))
    return m


def to_cpu(x: Any) -> Any:
    """A tree with every tensor detached and on the CPU."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, list):
        return [to_cpu(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_cpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_cpu(v) for k, v in x.items()}
    return x


def shape_key(shape: dict) -> str:
    """The same check shape whatever its key order (memo keys of inputs and reference outputs)."""
    return repr(sorted(shape.items()))


def key_seed(key: str) -> int:
    """The seed a check shape's reference weights are drawn with: the same for every row of that
    shape (see `Oracle.check_reference`)."""
    return zlib.crc32(key.encode()) & 0x7FFFFFFF


def shape_label(shape: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items() if isinstance(v, (int, float, str, bool)))


def region_mutate(base: torch.Tensor, other: torch.Tensor, region: str, gen: torch.Generator) -> torch.Tensor:
    """base with only `region` replaced by other's values (float tensors; same shape)."""
    out = base.clone()
    if out.numel() == 0:
        return out
    if region == "first-row":
        out[0] = other[0] if out.dim() else other
    elif region == "last-row":
        out[-1] = other[-1] if out.dim() else other
    elif region == "second-half":  # everything past a prefix sample window
        flat_o, flat_b = out.view(-1), other.reshape(-1)
        h = flat_o.numel() // 2
        flat_o[h:] = flat_b[h:]
    elif region == "scattered":
        flat_o, flat_b = out.view(-1), other.reshape(-1)
        n = flat_o.numel()
        k = min(n, max(8, n // 997))
        idx = torch.randperm(n, generator=gen)[:k]
        flat_o[idx] = flat_b[idx]
    else:  # pragma: no cover
        raise ValueError(region)
    return out


def perturb_state(sd: dict[str, torch.Tensor], gen: torch.Generator, signs: bool = False) -> dict[str, torch.Tensor]:
    """Other valid weights: every float tensor scaled elementwise by U(0.5, 1.0) (never up: fp8
    weights already span the format's whole range, and e4m3fn overflows to NaN); with `signs`, each
    element's sign flipped at random too (exact in every format, and far from the old weights even
    where a loose tolerance hides a rescaling)."""
    out = {}
    for k, v in sd.items():
        if v.is_floating_point() and v.numel():
            f = torch.rand(v.shape, generator=gen) * 0.5 + 0.5
            if signs:
                f = torch.where(torch.rand(v.shape, generator=gen) < 0.5, -f, f)
            out[k] = (v.float() * f).to(v.dtype)
        else:
            out[k] = v.clone()
    return out


def stats(res: dict) -> dict:
    """The element statistics of a comparison result, for a finding's data."""
    return {k: res.get(k) for k in ("max_abs", "max_rel", "n_bad", "n_total", "worst_index", "atol", "rtol")
            if res.get(k) is not None}


def reuse(m0: Any, m1: Any) -> str:
    """What two `meta` replies share: the id() of a model, an input's data_ptr ('' for nothing)."""
    if not (m0.ok and m1.ok):
        return ""
    hits = []
    ids0 = {v for v in (m0.get("ids") or {}).values()}
    ids1 = {v for v in (m1.get("ids") or {}).values()}
    if ids0 & ids1:
        hits.append("id() of the model")
    p0 = {v.get("ptr") for v in (m0.get("slots") or {}).values()}
    p1 = {v.get("ptr") for v in (m1.get("slots") or {}).values()}
    if p0 & p1 - {None}:
        hits.append("input data_ptr")
    return ", ".join(hits)


def changed_elems(before: Any, after: Any) -> dict:
    """How much of an input a call changed: elements changed of all, and whether it was zeroed."""
    if not (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor)) or before.shape != after.shape \
            or before.dtype != after.dtype or not before.numel():
        return {}
    a, b = before.detach().cpu(), after.detach().cpu()
    ne = a != b
    if a.is_floating_point():
        ne &= ~(torch.isnan(a) & torch.isnan(b))
    return {"elements": int(ne.sum()), "of": int(a.numel()),
            "zeroed": bool((a != 0).any()) and not bool((b != 0).any())}


def target_name(fn: dict) -> str:
    """What a call request called, for a finding: `m0.forward`, `solution:run`."""
    if "attr" in fn:
        return str(fn["attr"])
    return f"{fn.get('obj')}.{fn.get('method') or '__call__'}"


def is_oom(e: BaseException) -> bool:
    """An out-of-memory error (host or device)."""
    oom_cls = getattr(torch.cuda, "OutOfMemoryError", None)
    if isinstance(e, MemoryError) or (oom_cls is not None and isinstance(e, oom_cls)):
        return True
    return isinstance(e, RuntimeError) and "out of memory" in str(e).lower()
