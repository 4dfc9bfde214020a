"""Replay probes: the official check and the empirical probes auditors run by hand.

Every probe yields `replay_results` rows (dicts keyed by that table's columns, without run_id /
ran_at) and, where it fails, findings (dicts: rule, severity, category, message, probe, data).
The parent (this process) generates the inputs with `forensics.kernels.registry`, computes the reference
and compares with `ProblemSpec.compare`; the child (`worker.py`) only runs the solution.

Probes (names as in replay_results.probe):

check            nominal + numeric-stress cases (A2) over check shapes and seeds, deck version's
stress           (the stress rows are reported under probe 'stress')
property         the deck's A3 property cases on the same storage after 11 warm calls
same-buffer      warm 11 calls, then overwrite every input (and every float parameter) in place,
                 data_ptr unchanged, and compare against a fresh reference
unsampled-region the same, changing only the first row, the last row or scattered elements
fresh-state      delete the warmed model and inputs, build new ones with other weights and data
                 (CPython and the caching allocator often hand back the same id()/data_ptr)
fresh-inputs     the warmed model called on new input tensors at new addresses (the first ones kept
                 alive, so no address is handed back), then on the first ones again: catches a
                 graph captured on the caller's buffers, or any state bound to the first pointers
alternate-cache  stateful APIs: decode from caller caches other than the last prefill's (cuda 03),
                 continue a state other than the last one stepped (mega 02; step_api.py)
output-alias     does a later call overwrite an earlier returned tensor (allowed, reported)
nan-poison       memory the solution allocates and never writes is NaN (poison.py)
determinism      three calls on the same inputs must agree bit for bit
timing           see forensics.replay.timing (stateful decks: their wall-clock loops)

The stateful APIs (cuda 03 decode, mega 02 step, cuda 04 rollout) have their own forms of these
probes in stateful.py, step_api.py and rollout_api.py (stateful.table).
"""

from __future__ import annotations

import copy
import math
import os
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from forensics.vocab import ALL_PROBES  # noqa: F401 - the replay's probes, in run order (declared in vocab.py)

from .runner import Child, Reply, Scratch, ScratchTampered, close_fds
from .worker import _to_dev_tree as _to_dev  # one tree walk for both sides of the pipe
from .worker import IPC_TEST_N, ExchangeTampered, pack_load, pack_save, pack_write

#: what this side raises when a name the child can write is not the file the protocol put there
EXCHANGE_TAMPER = (ExchangeTampered, ScratchTampered)

DEFAULT_PROBES = ALL_PROBES

# Anywhere in the text: the device cannot run what the solution built / needs.
NOT_REPLAYABLE_MARKERS = (
    "no kernel image is available", "torch not compiled with cuda", "found no nvidia driver",
    "cuda driver initialization failed", "no cuda gpus are available",
    "cuda_home environment variable is not set",
)
# Only on an error line that is not the echoed compiler command: an arch this toolchain/GPU lacks.
ARCH_ERROR_MARKERS = ("unsupported gpu architecture", "compute_120", "sm_120", "compute_100", "sm_100",
                      "compute_103", "sm_103", "is not defined for option 'gpu-architecture'")



from .rules import FINDING_RULES, TAMPER_RULES  # noqa: E402,F401 - the replay's rule table

_ONCE = {"replay-early-exit", "replay-crash", "replay-timeout", "replay-not-replayable", "replay-input-mutated",
         "replay-build-failed", "replay-report-forged", "replay-exchange-tampered"}


@dataclass
class Limits:
    build_s: float = 900.0     # import + first construction (compilation happens here)
    call_s: float = 300.0      # one request during check/probes
    probe_s: float = 900.0     # whole probe
    time_s: float = 600.0      # one timing request


class ReplayInterrupted(KeyboardInterrupt):
    """A signal asked the replay to stop (SIGTERM, SIGHUP, SIGINT): the children are killed and the
    partial result is kept (`replay_solution` returns it with info["interrupted"])."""


def install_signal_handlers() -> dict:
    """SIGTERM / SIGHUP / SIGINT raise ReplayInterrupted in the main thread (so the replay kills its
    children and the CLI still writes its JSON); -> the previous handlers."""
    import signal

    def handler(signum, frame):  # noqa: ARG001
        raise ReplayInterrupted(f"stopped by {signal.Signals(signum).name}")

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            old[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):   # not the main thread
            pass
    return old


def restore_signal_handlers(old: dict) -> None:
    """Put back what install_signal_handlers replaced."""
    import signal
    for sig, h in old.items():
        try:
            signal.signal(sig, h)
        except (ValueError, OSError, TypeError):
            pass


@dataclass
class Outcome:
    rows: list[dict] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def status(self) -> str:
        """Overall: the worst row status (every probe)."""
        return _worst(self.rows, self.findings)

    def official(self) -> dict:
        """The deck's own check as replayed here: the worst status of the rows of OFFICIAL_PROBES
        (the build, check, stress and, where the archive's deck has them, property rows), and
        `correct` (True: passed; False: failed, raised, crashed, exited early or tampered; None:
        not replayable, timed out, not run or never reached).  Findings of the other probes
        (state drift, stale caches, timing) are beside it, never in it."""
        rows = [r for r in self.rows if r["probe"] in OFFICIAL_PROBES]
        st = _worst(rows, self.findings)
        correct = {"pass": True, "fail": False, "error": False, "crash": False, "early_exit": False,
                   "tampered": False}.get(st)
        reasons = [r for r in rows if r["status"] == st and r["status"] != "pass"]
        why = (reasons[0].get("detail") or "").splitlines()[0][:300] if reasons and reasons[0].get("detail") else ""
        return {"status": st, "correct": correct, "reason": why}

    def compare_archived(self, archived_correct: Any, source: str = "result.json") -> dict:
        """confirm | refute | cannot tell, for the archived `correct` against the check replayed here."""
        off = self.official()
        here = off["correct"]
        out = {"archived_correct": archived_correct, "source": source, "correct_here": here,
               "status_here": off["status"]}
        if archived_correct is None:
            out.update(status="cannot tell", why=f"no archived `correct` ({source})")
        elif here is None:
            out.update(status="cannot tell", why=f"the check here ended {off['status']}"
                       + (f": {off['reason']}" if off["reason"] else ""))
        else:
            out.update(status="confirm" if bool(archived_correct) == here else "refute",
                       why=f"the deck's check replayed here: {off['status']}"
                           + (f" ({off['reason']})" if off["reason"] else ""))
        return out


#: the probes whose rows make the deck's own check (Outcome.official); the rest are ours
OFFICIAL_PROBES = ("build", "check", "stress", "property")
STATUS_ORDER = ("tampered", "early_exit", "crash", "fail", "error", "timeout", "not_replayable", "not_run", "pass",
                "skipped")


def _env_incomplete(rows: list[dict]) -> bool:
    """A row says the build environment lacks a piece the solution needs (CUTLASS, a CUDA header, a
    compiler where the solution names it): the graded build could not be reproduced here."""
    return any(r["status"] == "not_replayable" and (r.get("detail") or "").startswith("build environment:")
               for r in rows)


def _worst(rows: list[dict], findings: list[dict]) -> str:
    if any(f["rule"] in TAMPER_RULES for f in findings):
        return "tampered"
    if _env_incomplete(rows):
        # failures after a missing build piece (a solution falling back to another path when its
        # extension cannot be built) say nothing about the graded build: not replayable here
        return "not_replayable"
    seen = {r["status"] for r in rows}
    for s in STATUS_ORDER:
        if s in seen:
            return s
    return "skipped"


# ------------------------------------------------------------------------------ helpers
class PutFile:
    """A put file as this process created it (Scratch.create): the descriptor it was written
    through, open while an input slot read from it is owned (closed with the last FileSlot), and
    the file's identity, which the child's reply must name."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd
        st = os.fstat(fd)
        self.ident = [st.st_dev, st.st_ino]

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        close_fds(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the module's globals may be gone
            pass


class FileSlot:
    """One input tensor the child maps from the put file, as this process reads it: `read()` is a
    pread at its offset on the descriptor this process wrote the file through.  Never the name
    again (the child can swap it for a decoy), and never a mapping of this process's own: the child
    can truncate the file, and reading a mapping past the new end raises SIGBUS, which kills the
    replay.  A file now shorter than what was written raises ExchangeTampered."""

    def __init__(self, f: PutFile, slot: str, offset: int, nbytes: int, dtype: torch.dtype, shape: tuple) -> None:
        self.file, self.slot, self.offset, self.nbytes = f, slot, offset, nbytes
        self.dtype, self.shape = dtype, tuple(shape)

    def read(self) -> torch.Tensor:
        buf = bytearray(self.nbytes)
        view, got = memoryview(buf), 0
        while got < self.nbytes:
            n = os.preadv(self.file.fd, [view[got:]], self.offset + got)
            if n <= 0:
                raise ExchangeTampered(f"the put file {self.file.path} holding input slot {self.slot} is shorter "
                                       f"than this process wrote it ({self.offset + got} of at least "
                                       f"{self.offset + self.nbytes} bytes; truncated by the solution's process)")
            got += n
        return torch.frombuffer(buf, dtype=torch.uint8).view(self.dtype).reshape(self.shape)


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _unwrap(x: Any) -> Any:
    """Child exports: subclass markers -> flagged dict; opaque -> kept as marker."""
    if isinstance(x, dict) and "__subclass__" in x:
        return x
    if isinstance(x, list):
        return [_unwrap(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_unwrap(v) for v in x)
    return x


def _same(a: Any, b: Any) -> bool:
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
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _maxdiff(a: Any, b: Any) -> float:
    ta, tb = _tensors(a), _tensors(b)
    m = 0.0
    for x, y in zip(ta, tb):
        if x.shape != y.shape:
            return math.inf
        if x.numel():
            d = (x.float() - y.to(x.device).float()).abs()
            m = max(m, float(torch.nan_to_num(d, nan=math.inf).max()))
    return m


def _to_cpu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, list):
        return [_to_cpu(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_to_cpu(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_cpu(v) for k, v in x.items()}
    return x


def _nbytes(x: Any) -> list[int]:
    return [t.numel() * t.element_size() for t in _tensors(x)]


def _shape_key(shape: dict) -> str:
    """The same check shape whatever its key order (memo keys of inputs and reference outputs)."""
    return repr(sorted(shape.items()))


def _key_seed(key: str) -> int:
    """The seed a check shape's reference weights are drawn with: the same for every row of that
    shape (see `Replay.check_reference`)."""
    return zlib.crc32(key.encode()) & 0x7FFFFFFF


def shape_label(shape: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items() if isinstance(v, (int, float, str, bool)))


def _region_mutate(base: torch.Tensor, other: torch.Tensor, region: str, gen: torch.Generator) -> torch.Tensor:
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


def _perturb_state(sd: dict[str, torch.Tensor], gen: torch.Generator, signs: bool = False) -> dict[str, torch.Tensor]:
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


def _nr_line(text: str) -> str | None:
    """The line that makes this failure 'not replayable here', or None (a real failure).

    A compile error of a solution that merely targets sm_120a is still a compile error (seed
    paragraph 20); only an error about the architecture itself, or a launch without a kernel
    image, is not replayable."""
    for ln in (text or "").splitlines():
        low = ln.lower()
        if any(m in low for m in NOT_REPLAYABLE_MARKERS):
            return ln.strip()
        if ("error" in low or "fatal" in low) and "-gencode" not in low and " -c " not in low \
                and any(m in low for m in ARCH_ERROR_MARKERS):
            return ln.strip()
    return None


def not_replayable_reason(text: str, local_modules: set[str] | None = None,
                          named_files: dict[str, str] | None = None) -> str | None:
    """Why this failure is not the solution's: a missing build-environment piece (buildenv), the
    device (no kernel image, an arch this GPU lacks), or None (a real failure)."""
    from .buildenv import missing_piece
    piece = missing_piece(text, local_modules, named_files)
    if piece:
        return f"build environment: {piece}"
    return _nr_line(text)


def classify_error(text: str, local_modules: set[str] | None = None) -> str:
    return "not_replayable" if not_replayable_reason(text, local_modules) else "error"


# ------------------------------------------------------------------------------ the replay
#: The check builds a new solution model for every row of the deck's shape list, as check.py does,
#: also where a shape repeats (cuda 01 caps five of its six shapes to T=256: 256, 256, 1, 256, 256,
#: 256).  Where one build took longer than this, the model is kept for the later rows of its shape,
#: also past rows of other shapes (listed in info["check_models_reused"]), and deleted after its
#: last row: the GLM solutions draw 6.5 G bf16 weights on the CPU in their constructor, one to
#: three and a half minutes each (H200 round 7, H100 round 9), and six builds, or the three a
#: next-row-only reuse left, do not fit a replay's probe limit.  Nothing the check compares is lost:
#: a repeat feeds the same reference weights and the same seeds again.  Cost: GPU memory of one
#: kept model per repeated slow shape.
REBUILD_SLOW_S = 30.0


class Replay:
    """One solution against one ProblemSpec, in one scratch, on one device."""

    MEMO_MAX = 16   # (shape, seed) input sets kept: a deck's whole check (<= 2 GiB prefetched)

    def __init__(self, spec: Any, scratch: Scratch, device: str = "cpu", shapes: str = "canonical",
                 limits: Limits | None = None, archive_date: str | None = None, ref_impl: str = "reference",
                 python: str | None = None, seeds: Iterable[int] | None = None) -> None:
        self.spec = spec
        self.scratch = scratch
        self.device = device
        self.shapes_mode = shapes
        self.limits = limits or Limits()
        self.archive_date = archive_date
        self.ref_impl = ref_impl
        self.python = python
        self.seeds = tuple(seeds) if seeds is not None else tuple(spec.seeds)
        self.child: Child | None = None
        self.out = Outcome()
        self.tampered: list[str] = []
        self.early_exit = False
        self.build_failed: Reply | None = None
        self.hello: dict = {}
        self._sd_cache: dict[str, tuple[Any, str]] = {}
        self._seen_findings: set[tuple[str, str]] = set()
        self.expected: dict[str, torch.Tensor] = {}   # what each input slot must still hold
        self.inputs_mutated = False
        self.hung = False
        self.sol_attrs: list[str] = []
        self.archived: dict = {}
        self.phase_s: dict[str, float] = {}   # where the replay's own time goes (out.info['phase_s'])
        self.probe_deadline: float | None = None  # Limits.probe_s of the probe running now
        self._inputs_memo: dict = {}   # (shape, seed) -> the deck's inputs, the last MEMO_MAX
        self._repeated_shapes: set = set()   # check shapes listed more than once
        self._ref_memo: dict = {}      # (shape, seed, case) -> reference output, for those shapes
        #: state-dict files sent over CUDA IPC -> the device copies they name (`state_file`)
        self._state_holds: dict[str, list] = {}
        self._booting: Child | None = None   # a child started before the first request (run())
        self.ipc = False   # results over CUDA IPC (decided per child by a known-tensor test)
        #: input slots whose memory this process holds and the child computes on (see `put`):
        #: its own GPU tensors mapped by the child over IPC, or slots of the CPU put file
        self.owned: dict[str, torch.Tensor | FileSlot] = {}
        #: called with each probe's partial result as it finishes (`emit`): a replay stopped from
        #: outside leaves what it had
        self.on_event = None
        #: what the child did to the exchange files (replay-exchange-tampered's evidence)
        self.exchange_events: list[str] = []
        self._planted_seen = 0
        #: the probe running now (findings cite it)
        self.probe_name: str | None = None
        #: the path tracer's record of the solution's import (`import` reply: worker._traced) and of the
        #: last model built (`new_model`): the kernel trace reads which device queries they made
        self.import_path: dict = {}
        self.last_build_path: dict = {}

    @property
    def ref_owner(self) -> int:
        """The uid the child's files have on this host (its CUDA IPC reference counters, which
        pack_load checks before torch acts on them): the sandbox uid, or ours where it has none."""
        owner = getattr(self.scratch, "_owner", None)
        return os.geteuid() if owner is None else owner

    def _set_deadline(self, deadline: float | None) -> None:
        """Bound every child request of the current probe (a new child too) by the whole-probe limit."""
        self.probe_deadline = deadline
        if self.child is not None:
            self.child.deadline = deadline

    @contextmanager
    def timed(self, phase: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.phase_s[phase] = self.phase_s.get(phase, 0.0) + time.perf_counter() - t0

    def make_inputs(self, shape: dict, seed: int) -> list:
        """The deck's seeded inputs for (shape, seed), generated on the CPU as the deck does.  The
        last few are kept (the probes ask again for the check's first shape and seed); callers get
        clones, so nothing they do in place reaches the kept copy."""
        key = (_shape_key(shape), seed)
        with self.timed("inputs"):
            if key not in self._inputs_memo:
                self._inputs_memo[key] = self.spec.make_inputs(shape, seed, "cpu")
                while len(self._inputs_memo) > self.MEMO_MAX:
                    self._inputs_memo.pop(next(iter(self._inputs_memo)))
            return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in self._inputs_memo[key]]

    # ---------------------------------------------------------------- shapes
    def check_shapes(self) -> list[dict]:
        if self.shapes_mode == "tiny":
            tiny = getattr(self.spec, "tiny_shapes", None)
            if tiny:
                return [dict(s) for s in tiny]
        return [dict(s) for s in self.spec.check_shapes]

    def bench_shapes(self) -> list[dict]:
        if self.shapes_mode == "tiny":
            return self.check_shapes()
        return [dict(s) for s in self.spec.shapes]

    # ---------------------------------------------------------------- rows and findings
    def row(self, probe: str, status: str, shape: dict | None = None, seed: int | None = None,
            case: str | None = None, res: dict | None = None, detail: str = "", **kw: Any) -> dict:
        if status == "pass" and self.tampered:
            status = "tampered"
            detail = (detail + "; " if detail else "") + "torch was monkeypatched: " + ", ".join(self.tampered[:5])
        r = {"probe": probe, "status": status, "shape": shape_label(shape) if shape else None, "seed": seed,
             "case_name": case, "max_abs": None, "max_rel": None, "n_bad": None, "n_total": None,
             "worst_index": None, "ms": None, "tflops": None, "gbps": None,
             "device": self.hello.get("gpu") or self.device, "detail": detail[:4000] or None, "data": None}
        if res:
            for k in ("max_abs", "max_rel", "n_bad", "n_total"):
                v = res.get(k)
                r[k] = None if v is None else (float(v) if k.startswith("max") else int(v))
                if isinstance(r[k], float) and not math.isfinite(r[k]):
                    r[k] = None if math.isnan(r[k]) else 1e308
            wi = res.get("worst_index")
            r["worst_index"] = None if wi is None else str(wi)
            if not r["detail"]:
                r["detail"] = str(res.get("msg", ""))[:4000] or None
        r.update({k: v for k, v in kw.items() if k in r})
        if "data" in kw:
            r["data"] = kw["data"]
        self.out.rows.append(r)
        return r

    def finding(self, rule: str, message: str, data: dict | None = None, probe: str | None = None,
                severity: str | None = None, key: str | None = None) -> None:
        """One finding per (rule, message) ('' for the once-only rules), or per explicit `key`
        whatever the rule (the same exception seen by check and then by every probe)."""
        sev, cat, p = FINDING_RULES[rule]
        key = ("key", key) if key is not None else (rule, "" if rule in _ONCE else message)
        if key in self._seen_findings:
            return
        self._seen_findings.add(key)
        self.out.findings.append({"rule": rule, "severity": severity or sev, "category": cat,
                                  "probe": probe or p, "message": message, "data": data or {}})

    def exchange_tampered(self, what: str) -> None:
        """The solution's process swapped or planted a file in io/ (a symlink to a host file, a
        FIFO, a hard link, something at a name this process had not created yet): one critical
        finding, status `tampered`, with every such event in its data.  Nothing was followed:
        worker.open_exchange and Scratch.path refuse or remove them; this records that it happened."""
        self.exchange_events.append(what[:500])
        if not any(f["rule"] == "replay-exchange-tampered" for f in self.out.findings):
            self.finding("replay-exchange-tampered",
                         f"The solution's process tampered with the replay's tensor exchange files: {what[:500]}. "
                         "Nothing was followed; the replay refused the file or removed it.",
                         {"events": self.exchange_events})

    def note_exchange(self, e: BaseException) -> bool:
        """`exchange_tampered` where `e` is what open_exchange / Scratch.path raise on a swapped file."""
        if isinstance(e, EXCHANGE_TAMPER):
            self.exchange_tampered(str(e))
            return True
        return False

    def _note_planted(self) -> None:
        """Names Scratch.path found taken before it created them (only the child writes io/)."""
        planted = getattr(self.scratch, "planted", [])
        for what in planted[self._planted_seen:]:
            self.exchange_tampered(what)
        self._planted_seen = len(planted)

    def _note_tamper(self, reply: Reply, where: str) -> None:
        ch = reply.get("tamper") or []
        new = [c for c in ch if c not in self.tampered]
        if new:
            self.tampered.extend(new)
            self.finding("replay-torch-monkeypatch",
                         f"The solution replaced torch functions during {where}: {', '.join(new[:6])}"
                         + (f" (+{len(new) - 6} more)" if len(new) > 6 else "") + ".",
                         {"changes": new, "where": where})
            from .patching import note
            note(self, new, where)

    def failed_reply(self, probe: str, reply: Reply, shape: dict | None = None, seed: int | None = None,
                     case: str | None = None, what: str = "call") -> dict:
        """Turn a non-ok reply into a row + finding; returns the row."""
        text = (reply.error or "") + "\n" + str(reply.get("tb", "") or "") + "\n" + str(reply.get("log_tail", "") or "")
        st = reply.status
        loc = f"{probe} {shape_label(shape) if shape else ''} seed {seed} case {case}".strip()
        if st == "early_exit":
            self.early_exit = True
            self.finding("replay-early-exit",
                         f"The solution ended the replay early during {what} ({loc}): {reply.error}.",
                         {"returncode": reply.get("returncode"), "log_tail": str(reply.get("log_tail", ""))[-1500:]})
            return self.row(probe, "early_exit", shape, seed, case, detail=reply.error)
        if st == "crash":
            if classify_error(text, self.local_modules()) == "not_replayable":
                return self._not_replayable(probe, text, shape, seed, case)
            self.finding("replay-crash", f"The solution's process died during {what} ({loc}): {reply.error}.",
                         {"returncode": reply.get("returncode"), "log_tail": str(reply.get("log_tail", ""))[-1500:]})
            return self.row(probe, "crash", shape, seed, case, detail=reply.error + "\n" + str(reply.get("log_tail", ""))[-2000:])
        if st == "timeout":
            self.hung = True
            self.finding("replay-timeout",
                         f"No result from the solution within the time limit during {what} ({loc}); "
                         "timed out, not failed.", {"error": reply.error})
            return self.row(probe, "timeout", shape, seed, case, detail=reply.error)
        if classify_error(text, self.local_modules()) == "not_replayable":
            return self._not_replayable(probe, text, shape, seed, case)
        status = "fail" if probe in ("check", "stress", "property") else "error"
        rule = "replay-check-failed" if probe in ("check", "stress") else (
            "replay-property-failed" if probe == "property" else "replay-error")
        # the same exception (a constructor that always raises) is one finding;
        # every probe it stops still gets its row
        self.finding(rule, f"The solution raised during {what} ({loc}): {reply.error[:300]}.",
                     {"traceback": str(reply.get("tb", ""))[-3000:]}, probe=probe, key=reply.error[:300])
        return self.row(probe, status, shape, seed, case, detail=reply.error + "\n" + str(reply.get("tb", ""))[-2000:])

    def local_modules(self) -> set[str]:
        """Top-level module names the solution ships in its scratch (sidecar .py files and packages)."""
        try:
            return {p.stem if p.suffix == ".py" else p.name for p in self.scratch.sol_dir.iterdir()
                    if (p.suffix == ".py" or p.is_dir()) and p.name != "solution.py"}
        except OSError:
            return set()

    def named_files(self) -> dict[str, str]:
        """Modules the solution's source names as files of its own (buildenv.local_files_named)."""
        from .buildenv import local_files_named
        try:
            return local_files_named((self.scratch.sol_dir / "solution.py").read_text(errors="replace"))
        except OSError:
            return {}

    def _not_replayable(self, probe: str, text: str, shape=None, seed=None, case=None) -> dict:
        line = not_replayable_reason(text, self.local_modules(), self.named_files()) or text.strip()[:200]
        env = line.startswith("build environment:")
        where = "here" if env else f"on this device ({self.hello.get('gpu') or self.device}, capability " \
                                   f"{self.hello.get('capability')})"
        self.finding("replay-not-replayable",
                     f"The solution cannot be built or run {where}: {line[:300]}. Not a correctness failure.",
                     {"line": line, "device": self.hello.get("gpu") or self.device,
                      "reason": line if env else f"device: {line}"[:300]})
        self.out.info.setdefault("not_replayable", line[:300])
        return self.row(probe, "not_replayable", shape, seed, case, detail=line + "\n" + text[-3000:])

    # ---------------------------------------------------------------- child lifecycle
    def ensure_child(self) -> Child | None:
        """A live child with `reference` and `solution` imported, or None (build failed)."""
        if self.build_failed is not None:
            return None
        if self.child is not None and self.child.alive():
            return self.child
        if self.child is not None:
            self.child.kill()
        t0 = time.monotonic()
        ch, self._booting = self._booting, None
        if ch is None or ch.proc.poll() is not None:   # (a booted child: only the wait left counts)
            ch = Child(self.scratch, self.device, self.python)
        self.owned.clear()   # the last child's slots died with it
        ch.on_delete = self._forget_slots
        ch.deadline = self.probe_deadline
        ch.build_grace_s = float(self.limits.build_s)
        ch.on_build_wait = self._waited_on_build
        self.progress("starting the solution's process")
        h = ch.request("hello", self.limits.build_s)
        if not h.ok:
            self.build_failed = h
            self.failed_reply("build", h, what="worker start")
            return None
        self.hello = {k: v for k, v in h.data.items() if k not in ("id", "ok", "status")}
        steps = self.out.info.setdefault("start_steps_s", [])   # per child: where its start went
        steps.append({"hello": round(h.elapsed_s, 3)})
        self.progress("importing the reference in the solution's process")
        r = ch.request("import", self.limits.build_s, module="reference")
        steps[-1]["import_reference"] = round(r.elapsed_s, 3)
        if not r.ok:
            self.build_failed = r
            self.failed_reply("build", r, what="import reference")
            return None
        self.progress("importing (building) the solution")
        r = ch.request("import", self.limits.build_s, module="solution")
        steps[-1]["import_solution"] = round(r.elapsed_s, 3)
        self._note_tamper(r, "import")
        if not r.ok:
            self.build_failed = r
            text = r.error + "\n" + str(r.get("tb", ""))
            if r.status not in ("early_exit", "crash", "timeout") and \
                    classify_error(text + "\n" + str(r.get("log_tail", "") or ""), self.local_modules()) != "not_replayable":
                self.finding("replay-build-failed", f"solution.py failed to import: {r.error[:300]}.",
                             {"traceback": str(r.get("tb", ""))[-3000:]})
                self.row("build", "error", detail=text[-3000:])
            else:
                self.failed_reply("build", r, what="import solution")
            return None
        self.sol_attrs = r.get("attrs") or []
        self.import_path = r.get("path") or {}
        t_ipc = time.monotonic()
        self._ipc_test(ch)
        steps[-1]["ipc_test"] = round(time.monotonic() - t_ipc, 3)
        self.out.info.setdefault("import_s", []).append(round(time.monotonic() - t0, 3))
        self.phase_s["child-start"] = self.phase_s.get("child-start", 0.0) + time.monotonic() - t0
        self._arm_first_run(ch)
        self.child = ch
        return ch

    #: requests that run the solution's code (where a lazy build happens on the first one)
    RUN_OPS = ("call", "time", "wall")

    def _arm_first_run(self, ch: Child) -> None:
        """Lazy builds: many solutions compile inside their first forward (a JIT extension, Triton
        autotuning) instead of at import.  The first request of a new child that runs solution code
        gets the build budget (Limits.build_s, when larger than its own) and is exempt from the
        probe's whole-probe deadline, which is pushed back by the time it took."""
        orig = ch.request
        armed = [True]

        def request(op: str, timeout: float, **fields: Any) -> Reply:
            if not (armed[0] and op in self.RUN_OPS):
                return orig(op, timeout, **fields)
            armed[0] = False
            budget = max(float(timeout), float(self.limits.build_s))
            saved, grace = ch.deadline, ch.build_grace_s
            ch.deadline, ch.build_grace_s = None, 0.0   # this call has the build budget already
            t0 = time.monotonic()
            try:
                return orig(op, budget, **fields)
            finally:
                took = time.monotonic() - t0
                extra = max(0.0, took - float(timeout))
                ch.build_grace_s = max(0.0, grace - extra)   # one build budget per child in all
                if saved is not None:
                    ch.deadline = saved + extra
                if self.probe_deadline is not None:
                    self.probe_deadline += extra
                self.out.info.setdefault("first_run_s", []).append(
                    {"op": op, "s": round(took, 3), "budget_s": budget})

        ch.request = request  # type: ignore[method-assign]

    def _waited_on_build(self, op: str, granted_s: float, tools: list[str]) -> None:
        """A request waited past its limit while build tools ran under the child (runner's
        build grace): the probe's whole-probe limit moves back by as much, and the wait is recorded
        (out.info['build_waits'])."""
        if self.probe_deadline is not None:
            self.probe_deadline += granted_s
        self.out.info.setdefault("build_waits", []).append(
            {"op": op, "extra_s": granted_s, "tools": tools})

    def _boot_and_prefetch(self) -> None:
        """Start the child, and while it imports torch and the solution, generate the check's
        inputs (kept by make_inputs) so the first requests do not wait for either alone."""
        self._booting = Child(self.scratch, self.device, self.python)
        budget = 2 * 2**30
        for shape in self.check_shapes():
            for seed in self.seeds:
                if budget <= 0 or len(self._inputs_memo) >= self.MEMO_MAX:
                    return
                try:
                    xs = self.make_inputs(shape, seed)
                except Exception:  # noqa: BLE001 - the check itself reports a generator failure
                    return
                budget -= sum(t.numel() * t.element_size() for t in _tensors(xs))

    def _ipc_test(self, ch: Child) -> None:
        """Results travel as CUDA IPC handles (mapped and copied on the device) when a known tensor
        comes through intact; otherwise, and on the CPU, as bytes in the pack file."""
        self.ipc = False
        if not str(self.device).startswith("cuda"):
            self.out.info["transfer"] = "pack"
            return
        p = self.scratch.path("ipc-test")
        r = ch.request("ipc_test", self.limits.call_s, save=p)
        why = r.error
        if r.ok:
            try:
                t = pack_load(p, ipc=True, ref_owner=self.ref_owner)["t"]
                self.ipc = t.is_cuda and torch.equal(t.cpu(), torch.arange(IPC_TEST_N, dtype=torch.float32))
                why = "" if self.ipc else "the test tensor came back wrong"
            except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
                self.note_exchange(e)
                why = str(e)
        Path(p).unlink(missing_ok=True)
        self.out.info["transfer"] = "pack+cuda-ipc" if self.ipc else f"pack (CUDA IPC unavailable: {why[:200]})"

    def abort(self) -> None:
        """Kill the children now (an interrupt): no completion marker, nothing waited for."""
        for ch in (self._booting, self.child):
            if ch is not None:
                try:
                    ch.kill()
                except Exception:  # noqa: BLE001 - best effort while the replay is being stopped
                    pass
        self._booting = self.child = None

    def gpu_peak(self, side: str, gb: Any) -> None:
        """Record the most GPU memory `side` (replay: this process, solution: the child) held, in
        GiB (out.info['gpu_peak_gb']); the bench packs replays onto shared GPUs by it."""
        try:
            gb = float(gb)
        except (TypeError, ValueError):
            return
        peaks = self.out.info.setdefault("gpu_peak_gb", {})
        peaks[side] = max(gb, float(peaks.get(side) or 0.0))

    def close(self) -> None:
        if self.device.startswith("cuda") and torch.cuda.is_initialized():
            self.gpu_peak("replay", round(torch.cuda.max_memory_reserved() / 2**30, 3))
        if self._booting is not None:
            self._booting.kill()
            self._booting = None
        if self.child is not None:
            r = self.child.close()
            if r is not None and r.ok and r.get("gpu_peak_gb") is not None:
                self.gpu_peak("solution", r.get("gpu_peak_gb"))
            if r is not None and r.status in ("early_exit", "crash"):
                self.failed_reply("build", r, what="shutdown")
            elif r is not None:
                self._note_tamper(r, "the replay")
            self.child = None

    # ---------------------------------------------------------------- model / call plumbing
    def ref_model(self, shape: dict):
        with self.timed("reference-model"):
            return self.spec.build_reference(shape, self.device)

    def check_reference(self, shape: dict, key: str):
        """The reference model of one check row, its weights drawn from a seed of its shape.

        check.py draws new random weights for every row; so did this, unseeded.  But a repeated
        shape's reference outputs are memoised (`_ref_memo`) and its slow solution model kept
        (REBUILD_SLOW_S), so the rows of one shape must share their weights: cuda 01's rows are
        T=256, 256, 1, 256, 256, 256, and the reference rebuilt for the fourth drew new weights
        while its outputs came from the first's (every later row compared against another model's
        output).  The global generators are restored after the draw."""
        devs = [torch.device(self.device).index or 0] if str(self.device).startswith("cuda") else []
        with torch.random.fork_rng(devices=devs):
            torch.manual_seed(_key_seed(key))
            return self.ref_model(shape)

    def state_file(self, shape: dict, model, key: str = "") -> str:
        """The reference model's state dict, for the child's `load_state_dict`.  Where the child
        passed the IPC test its GPU tensors travel as CUDA IPC handles of copies this process holds
        (until `new_model` has built from it, `release_state`; a file sent otherwise, until it is written
        again or `free_memory`); the child copies them on the device.
        Otherwise, and for CPU tensors, as bytes.  A GLM state is 13 GB: through host memory and a
        file it cost ~100 s per model built (50 s to write, 50 s to read on this 2-core box; round 7,
        BENCHMARKS.md), over IPC it is device copies.  The copies, not the reference's own tensors,
        are shared: the child could write into what it maps."""
        with self.timed("state-transfer"):
            p = self.scratch.path("state" + key)
            self._state_holds.pop(p, None)
            if self.ipc and str(self.device).startswith("cuda"):
                hold: list = []
                pack_save({k: v.detach() for k, v in model.state_dict().items()}, p, ipc_hold=hold)
                self._state_holds[p] = hold
            else:
                pack_save({k: v.detach().cpu() for k, v in model.state_dict().items()}, p)
            return p

    def reference(self, model, inputs):
        with self.timed("reference"):
            out = self._reference(model, inputs)
            if str(self.device).startswith("cuda"):
                torch.cuda.synchronize()
            return out

    def _reference(self, model, inputs):
        if self.ref_impl == "triton" and getattr(self.spec, "has_triton", False):
            return self.spec.triton_forward(model, inputs)
        if self.ref_impl == "oracle":
            return self.spec.oracle(model, inputs)
        return self.spec.reference_forward(model, inputs)

    def init_args_spec(self, shape: dict) -> list:
        """Constructor args as the child sees them: JSON literals, or a call to `reference`."""
        args = self.spec.init_args(shape)
        try:
            import json
            json.dumps(args)
            return [{"lit": a} for a in args]
        except TypeError:
            return [{"call_ref": "get_init_inputs", "index": i} for i in range(len(args))]

    def new_model(self, ch: Child, obj: str, shape: dict, state_path: str | None, replace: bool = False,
                  reuse_attempts: int = 0) -> Reply:
        g = ch.request("setglobals", self.limits.call_s, module="reference", values=self.spec.shape_globals(shape))
        if not g.ok:
            return g
        factory = "Model"
        try:
            with self.timed("child-construct"):
                r = ch.request("new", self.limits.build_s, obj=obj, factory=f"solution:{factory}",
                               args=self.init_args_spec(shape), state_dict=state_path, strict=True,
                               replace=replace, reuse_attempts=reuse_attempts)
        finally:
            self.release_state(state_path)
        self._note_tamper(r, "construction")
        if r.ok:
            self.last_build_path = r.get("path") or {}
        return r

    def release_state(self, path: str | None) -> None:
        """A state file used once (`new_model`): its device copies go now, not when the next state is
        written (the child copied them while building; a GLM state is 13 GB that the reference's
        forward needs on an H100, where round 8 ran out of memory holding both), and the file with
        them, since its IPC handles would name freed memory."""
        if path is None:
            return
        self._state_holds.pop(path, None)
        Path(path).unlink(missing_ok=True)

    def put(self, ch: Child, inputs: list, prefix: str = "x") -> tuple[Reply, list]:
        """Send inputs into slots `<prefix><i>`.  The child computes on memory this process holds
        (`self.owned`): GPU tensors are our own copies mapped over CUDA IPC where the child passed
        the IPC test, and on the CPU the pack file, which the child maps shared and this process
        keeps open after it is unlinked.  So whether the solution wrote into an input is read
        here, not taken from the child's report (`call` compares the two).  Other inputs travel
        as bytes.

        The put file is written and later read through the descriptor that created it, never
        reopened by name (io/ is the child's: a name swapped after the write would show this
        process a decoy), and read with pread, never mapped (`FileSlot`).  The child's reply names
        the file it mapped; another one than ours is `replay-exchange-tampered` and those slots
        are no longer watched here (what the solution computes on is not what this process reads)."""
        slots = {}
        args = []
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                v = x.detach()
                slots[f"{prefix}{i}"] = v.contiguous().clone() if self.ipc and v.is_cuda else v.cpu()
                args.append({"slot": f"{prefix}{i}"})
            elif isinstance(x, (list, tuple, dict)) and _tensors(x):  # a state: list of dicts of tensors
                slots[f"{prefix}{i}"] = _to_cpu(x)
                args.append({"slot": f"{prefix}{i}"})
            else:
                args.append({"lit": x})
        with self.timed("input-transfer"):
            p, fd = self.scratch.create("put")
            pf = PutFile(p, fd)
            hold: list = []
            with os.fdopen(os.dup(fd), "wb") as f:
                layout = pack_write(slots, f, ipc_hold=hold if self.ipc else None, ipc_copy=False)
            # a snapshot of our own, not the memory shared with the child (it can write into
            # that), and not the caller's tensors (stress cases restore them in place afterwards)
            self.expected.update({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in slots.items()})
            mine = self._shared_views(pf, layout, slots, hold)
            r = ch.request("put", self.limits.call_s, file=p, ipc=self.ipc, share=True)
            Path(p).unlink(missing_ok=True)   # the child's mapping and our descriptor outlive the name
            if r.ok and r.get("file") != pf.ident:
                self.exchange_tampered(
                    f"the solution's process mapped another file ({r.get('file')!r}) than the put file {p} "
                    f"this process wrote ({pf.ident}): the name was swapped in between, so its inputs are "
                    "not the memory the replay reads")
                mine = {k: v for k, v in mine.items() if not isinstance(v, FileSlot)}
            for k in slots:
                self.owned.pop(k, None)
            if r.ok:
                self.owned.update(mine)
            return r, args

    def _shared_views(self, pf: PutFile, layout: dict, slots: dict, hold: list) -> dict[str, Any]:
        """The tensor slots whose memory the child will compute on and this process can read:
        on a CPU child every tensor of the pack file (`FileSlot`s at the offsets `pack_write`
        gave, read through our descriptor), on a GPU child the tensors shared over IPC.  CPU
        tensors a GPU child copies to its device are not."""
        tensors = {k: v for k, v in slots.items() if isinstance(v, torch.Tensor) and v.numel()}
        if not str(self.device).startswith("cuda"):
            entries = dict((k, sub) for k, sub in layout["tree"]["__dict__"])
            out = {}
            for k, v in tensors.items():
                sub = entries.get(k)
                m = layout["tensors"][sub["__t__"]] if isinstance(sub, dict) and set(sub) == {"__t__"} else None
                if m is not None and "ipc" not in m:
                    out[k] = FileSlot(pf, k, layout["start"] + m["offset"], m["nbytes"], v.dtype, v.shape)
            return out
        shared = {h.data_ptr() for h in hold}
        return {k: v for k, v in tensors.items() if v.is_cuda and v.data_ptr() in shared}

    def _forget_slots(self, slots: Iterable[str]) -> None:
        for k in slots:
            self.owned.pop(k, None)

    def owned_now(self, keys: Iterable[str]) -> dict[str, torch.Tensor]:
        """What the input slots among `keys` that this process holds contain now, read here (a GPU
        slot: our own tensor itself; a put-file slot: a fresh read, `FileSlot`).  A put file the
        child truncated is `replay-exchange-tampered`, and its slot is no longer watched."""
        now: dict[str, torch.Tensor] = {}
        for k in keys:
            v = self.owned.get(k)
            if v is None or k not in self.expected or k in now:
                continue
            if isinstance(v, FileSlot):
                try:
                    v = v.read()
                except ExchangeTampered as e:
                    self.note_exchange(e)
                    self.owned.pop(k, None)
                    continue
            now[k] = v
        return now

    def owned_changed(self, keys: Iterable[str]) -> list[str]:
        """Input slots among `keys` whose memory, as this process reads it, no longer holds what was sent."""
        return [k for k, v in self.owned_now(keys).items() if not _same(self.expected[k], v)]

    def write(self, ch: Child, values: dict[str, torch.Tensor], version: str | None = None) -> Reply:
        """Overwrite tensors in the child in place (data_ptr kept).  A module's parameters and
        buffers ("obj::name") get `copy_`, which bumps `_version` as the deck's own weight writes do;
        inputs a `.data` copy, which keeps it (the deck's same-storage property mutation);
        `version="bump"|"keep"` forces one (worker.op_write)."""
        p = self.scratch.path("write")
        vals = {k: v.detach().cpu() for k, v in values.items()}
        pack_save(vals, p)
        self.expected.update({k: v for k, v in vals.items() if "::" not in k})
        r = ch.request("write", self.limits.call_s, file=p, **({"version": version} if version else {}))
        if r.ok:
            moved = [k for k, w in r["written"].items() if w["ptr_before"] != w["ptr_after"]]
            if moved:  # pragma: no cover - copy_ never moves storage
                r.data["moved"] = moved
        return r

    def call(self, ch: Child, obj: str | None, args: list, save_inputs: list[str] | None = None, repeat: int = 1,
             out_slot: str | None = None, poison: list[int] | None = None, method: str | None = None,
             fn: dict | None = None, kwargs: dict | None = None,
             export_index: list | None = None) -> tuple[Reply, Any]:
        """Call `obj.method(*args)` (or the target `fn`, e.g. {"attr": "solution:run"}) in the child;
        -> (reply, payload with "out", "inputs_after", "inputs_mutated").  Inputs in `save_inputs`
        (default: every slot argument) must come back unchanged."""
        p = self.scratch.path("out")
        meth = method or "forward"
        if save_inputs is None:
            save_inputs = [a["slot"] for a in args if isinstance(a, dict) and "slot" in a and a["slot"] in self.expected
                           and not a.get("index")]
        with self.timed("child-call"):
            r = ch.request("call", self.limits.call_s, fn=fn or {"obj": obj, "method": meth}, args=args,
                           kwargs=kwargs or {}, save=p, save_inputs=save_inputs, repeat=repeat, out_slot=out_slot,
                           poison=poison, watch=save_inputs, export_index=export_index or [], fmt="pack",
                           ipc=self.ipc)
        if r.ok:  # the solution's own time inside the request (the rest is export and transfer)
            self.phase_s["solution"] = self.phase_s.get("solution", 0.0) + float(r.get("elapsed_s") or 0.0)
        self._note_tamper(r, "a call")
        if not r.ok:
            if r.status == "timeout":
                self.hung = True
            Path(p).unlink(missing_ok=True)
            return r, None
        with self.timed("output-transfer"):
            try:
                payload = pack_load(p, ipc=self.ipc, ref_owner=self.ref_owner)
            except (OSError, ValueError) as e:
                self.note_exchange(e)
                Path(p).unlink(missing_ok=True)
                return Reply(False, "error", r.data, f"unreadable output file from the solution's process: {e}"), None
            Path(p).unlink(missing_ok=True)
        after = payload.setdefault("inputs_after", {})
        said = {k for k in save_inputs if k in after and k in self.expected and not _same(self.expected[k], after[k])}
        now = self.owned_now(save_inputs)
        seen = [k for k, v in now.items() if not _same(self.expected[k], v)]
        forged = [k for k in seen if k not in said]
        if forged:
            self.finding("replay-report-forged",
                         f"The solution's process reported input slot(s) {', '.join(forged)} unchanged after a call, "
                         "but the memory they live in, which the replay holds, was written: the child's account "
                         "of its inputs was falsified.",
                         {"slots": forged, "max_change": max(_maxdiff(self.expected[k], now[k]) for k in forged)})
            for k in forged:   # what the storage really holds
                after[k] = now[k].clone()
        bad = [k for k in save_inputs if k in said or k in seen]
        payload["inputs_mutated"] = bad
        if bad:
            self.inputs_mutated = True
            target = fn or {"obj": obj, "method": meth}
            pos = {a["slot"]: i for i, a in enumerate(args) if isinstance(a, dict) and "slot" in a}
            changed = {k: _changed_elems(self.expected[k], after[k]) for k in bad}
            self.finding("replay-input-mutated",
                         f"The solution changed its input tensor(s) in place during a call of {_target_name(target)} in "
                         f"probe {self.probe_name or '?'} (argument(s) {', '.join(str(pos.get(k, k)) for k in bad)}: "
                         f"slots {', '.join(bad)}; max change "
                         f"{max(_maxdiff(self.expected[k], after[k]) for k in bad):.4g}): the check compares against "
                         "a reference computed on the inputs as they were.",
                         {"slots": bad, "inputs": [pos.get(k) for k in bad], "probe": self.probe_name,
                          "call": {"request": r.get("id"), "target": _target_name(target)}, "changed": changed})
            for k in bad:  # the storage now holds what the solution wrote
                self.expected[k] = after[k]
        return r, payload

    def sol_out(self, payload) -> Any:
        """The solution's output of a `call` payload, on the replay's device."""
        out = _unwrap(payload["out"])
        return _to_dev(out, self.device)

    _sol_out = sol_out

    def _check_inputs(self, probe: str, sent: dict[str, torch.Tensor], payload, shape, seed, case) -> None:
        after = payload.get("inputs_after", {})
        bad = [k for k, v in sent.items() if k in after and not _same(v, after[k])]
        if bad:
            self.finding("replay-input-mutated",
                         f"The solution changed its input tensor(s) {', '.join(bad)} during {probe} "
                         f"({shape_label(shape)}, seed {seed}, case {case}).",
                         {"inputs": bad, "max_change": max(_maxdiff(sent[k], after[k]) for k in bad)})

    def _subclass_out(self, out: Any) -> bool:
        return any(isinstance(o, dict) and ("__subclass__" in o or "__opaque__" in o)
                   for o in (out if isinstance(out, (list, tuple)) else [out]))

    def compare(self, ref_out, sol_out, case="nominal", inputs=None) -> dict:
        if self._subclass_out(sol_out):
            return {"ok": False, "msg": f"solution returned a non-Tensor object: {sol_out!r}"[:300]}
        with self.timed("compare"):
            return self.spec.compare(ref_out, sol_out, case=case, inputs=inputs)

    def check_compare(self, ref_model, inputs, ref_out, sol_out, case: str = "nominal", where: str = "") -> dict:
        """The check's comparison, with the deck's literal call as the arbiter of our faster reference.

        Mechanism: where the spec's reference is a faster formulation of the deck's call (`deck_fn`
        and `reference_fn` both set: the fused Triton megaqwen step on a GPU), a solution that fails
        against it is compared again with the deck's own call on the same model and inputs
        (`spec.deck_forward`).  Agreeing with the deck's call, it passes: the fast reference was the
        one off, and `replay-reference-disagrees` records both comparisons (the deck's check passed
        a run ours failed on the H200, BENCHMARKS.md round 4).  Look-alike kept as a failure: a
        solution that disagrees with the deck's call too; the result says so (`deck_reference`)."""
        res = self.compare(ref_out, sol_out, case=case, inputs=inputs)
        if res.get("ok") or self.spec.deck_fn is None or self.spec.reference_fn is None:
            return res
        try:
            with self.timed("deck-reference"):
                deck_out = self.spec.deck_forward(ref_model, inputs)
        except Exception as e:  # noqa: BLE001 - the deck's call failing leaves our comparison as it is
            return dict(res, deck_reference=f"error: {type(e).__name__}: {e}"[:300])
        res2 = self.compare(deck_out, sol_out, case=case, inputs=inputs)
        if not res2.get("ok"):
            return dict(res, msg=f"{res.get('msg', '')} (against the deck's own call too)",
                        deck_reference="fails too: " + str(res2.get("msg", ""))[:300])
        self.finding("replay-reference-disagrees",
                     f"{where or case}: the solution fails against the bundled fast reference "
                     f"({str(res.get('msg', ''))[:200]}) and passes against the deck's own call",
                     {"fast_reference": {k: res.get(k) for k in ("msg", "max_abs", "n_bad")},
                      "deck_reference": {k: res2.get(k) for k in ("msg", "max_abs", "n_bad")}})
        return dict(res2, reference="deck", msg=f"judged against the deck's own call: the bundled fast reference "
                    f"disagreed ({str(res.get('msg', ''))[:300]})")

    # ---------------------------------------------------------------- probe: check (+stress)
    def stress_cases(self) -> list:
        cases = list(self.spec.stress_cases)
        since = getattr(self.spec, "stress_since", None)
        if since and self.archive_date and self.archive_date[:10] < since:
            cases = [c for c in cases if c.name == "nominal"]
            self.out.info["stress_note"] = f"numeric stress exists from {since}; archive dated {self.archive_date[:10]}"
        return cases

    def probe_check(self) -> None:
        cases = self.stress_cases()
        shapes = self.check_shapes()
        keys = [_shape_key(s) for s in shapes]
        # a check shape listed again (cuda 01 caps five of six to T=256): the same reference model
        # and reference outputs; the solution is still called for every row
        self._repeated_shapes = {k for k in keys if keys.count(k) > 1}
        last: tuple = (None, None)   # (shape key, reference model)
        kept: dict = {}   # shape key -> (object name, child, build seconds): slow models kept for later rows
        for si, shape in enumerate(shapes):
            ch = self.ensure_child()
            if ch is None:
                return
            if last[0] == keys[si]:
                ref = last[1]
            else:
                # the last shape's reference goes before this one is built (two GLM references at
                # once are ~26 GB of weights)
                ref = None
                last = (None, None)
                self.free_cuda()
                self.progress(f"building the reference model for {shape_label(shape)}")
                ref = self.check_reference(shape, keys[si])
                last = (keys[si], ref)
            have = kept.get(keys[si])
            if have is not None and have[1] is ch and ch.alive():
                # a slow model kept for this later row of its shape (below); the reference module's
                # shape globals are set again, as check.py sets them for every row
                name, build_s = have[0], have[2]
                g = ch.request("setglobals", self.limits.call_s, module="reference",
                               values=self.spec.shape_globals(shape))
                if not g.ok:
                    self.failed_reply("check", g, shape, what="the reference module's shape globals")
                    continue
                self.out.info.setdefault("check_models_reused", []).append(
                    {"shape": shape_label(shape), "index": si, "build_s": round(build_s, 1)})
            else:
                name = f"m{si}"   # a model kept for later rows lives beside the next ones
                self.progress(f"building the solution's model for {shape_label(shape)}")
                t0 = time.perf_counter()
                r = self.new_model(ch, name, shape, self.state_file(shape, ref))   # used once: released
                if not r.ok:
                    self.failed_reply("check", r, shape, what="Model construction / load_state_dict(strict=True)")
                    self.child = None if not ch.alive() else ch
                    kept.pop(keys[si], None)
                    continue
                build_s = time.perf_counter() - t0
            for seed in self.seeds:
                base = self.make_inputs(shape, seed)
                for case in cases:
                    probe = "check" if case.name == "nominal" else "stress"
                    if not ch.alive() or self.early_exit or self.hung:
                        self.row(probe, "skipped", shape, seed, case.name,
                                 detail="not run: the solution's process ended or hung earlier in this check")
                        continue
                    self._check_case(ch, probe, shape, seed, case, ref, base, name)
            if ch.alive() and keys[si] in keys[si + 1:] and build_s > REBUILD_SLOW_S:
                kept[keys[si]] = (name, ch, build_s)
            elif ch.alive():
                ch.request("delete", self.limits.call_s, objs=[name], slots=[])
                kept.pop(keys[si], None)
            if self.early_exit or self.hung:
                return

    def _check_case(self, ch: Child, probe: str, shape, seed, case, ref, base, model: str = "m") -> None:
        dev_inputs = _to_dev(base, self.device)
        try:
            with self.spec.apply_stress(ref, None, dev_inputs, case) as x:
                mk = (_shape_key(shape), seed, case.name)
                ref_out = self._ref_memo.get(mk)
                if ref_out is None:
                    self.progress(f"{probe}: the reference on {shape_label(shape)} seed {seed} case {case.name}")
                    ref_out = self.reference(ref, x)
                    if mk[0] in self._repeated_shapes:
                        self._ref_memo[mk] = ref_out
                scaled_ref_state = {k: v for k, v in ref.state_dict().items() if k in case.state_scales}
                # the same state scaling written into the solution's own parameters, in place
                if case.state_scales:
                    w = self.write(ch, {f"{model}::{k}": v for k, v in scaled_ref_state.items()})
                    if not w.ok:
                        self.failed_reply(probe, w, shape, seed, case.name, what=f"state scaling {list(case.state_scales)}")
                        return
                pr, args = self.put(ch, list(x))   # device tensors: over IPC where it works
                if not pr.ok:
                    self.failed_reply(probe, pr, shape, seed, case.name, what="input transfer")
                    return
                self.progress(f"{probe}: the solution on {shape_label(shape)} seed {seed} case {case.name}")
                r, payload = self.call(ch, model, args)
        except (KeyError, TypeError) as e:  # a state-scale name missing from the reference
            self.row(probe, "error", shape, seed, case.name, detail=f"stress case cannot be applied: {e}")
            return
        if case.state_scales:  # restored reference state -> restore the solution's too
            self.write(ch, {f"{model}::{k}": v for k, v in ref.state_dict().items() if k in case.state_scales})
        if r.status != "ok":
            self.failed_reply(probe, r, shape, seed, case.name)
            return
        if case.state_scales:   # the reference's state was scaled for the call and is restored now
            res = self.compare(ref_out, self._sol_out(payload), case=case.name, inputs=x)
        else:
            res = self.check_compare(ref, x, ref_out, self._sol_out(payload), case=case.name,
                                     where=f"{probe} on {shape_label(shape)} seed {seed} case {case.name}")
        if res.get("ok"):
            self.row(probe, "pass", shape, seed, case.name, res)
        else:
            self.row(probe, "fail", shape, seed, case.name, res)
            self.finding("replay-check-failed",
                         f"{probe} failed on {shape_label(shape)} seed {seed} case {case.name}: {res.get('msg', '')}"[:600],
                         _stats(res), probe=probe)

    # ---------------------------------------------------------------- shared warm-up
    def model_on_inputs(self, probe: str, shape: dict, seed: int, obj: str):
        """A working child, the solution's model `obj` built with the reference's state, and the
        inputs of (shape, seed) in its slots. -> (ch, ref, inputs, args), or None after a row that
        says which step failed."""
        ch = self.ensure_child()
        if ch is None:
            self.row(probe, "skipped", shape, seed, detail="no working child (build failed)")
            return None
        ref = self.ref_model(shape)
        r = self.new_model(ch, obj, shape, self.state_file(shape, ref))
        if not r.ok:
            self.failed_reply(probe, r, shape, seed, what="Model construction")
            return None
        inputs = self.make_inputs(shape, seed)
        pr, args = self.put(ch, inputs, prefix=obj + "x")
        if not pr.ok:
            self.failed_reply(probe, pr, shape, seed, what="input transfer")
            return None
        return ch, ref, inputs, args

    def _warm(self, probe: str, shape: dict, seed: int, n_warm: int = 11, obj: str = "w"):
        """New model `obj` + inputs A in slots, called n_warm times. -> (ch, ref, base, args, names) or None."""
        got = self.model_on_inputs(probe, shape, seed, obj)
        if got is None:
            return None
        ch, ref, base, args = got
        names = [a["slot"] for a in args if "slot" in a]
        r, _ = self.call(ch, obj, args, repeat=n_warm)
        if not r.ok:
            self.failed_reply(probe, r, shape, seed, what=f"{n_warm} warm-up calls")
            return None
        return ch, ref, base, args, names

    def _judge(self, probe: str, rule: str, variant: str, shape, seed, ref_out, sol_payload, inputs,
               extra: str = "") -> bool:
        if self.inputs_mutated:
            self.row(probe, "error", shape, seed, variant,
                     detail="the solution alters its inputs in place, so a same-storage probe cannot be judged")
            return False
        res = self.compare(ref_out, self._sol_out(sol_payload), inputs=inputs)
        if res.get("ok"):
            self.row(probe, "pass", shape, seed, variant, res)
            return True
        self.row(probe, "fail", shape, seed, variant, res)
        self.finding(rule, f"{probe} ({variant}) on {shape_label(shape)} seed {seed}: output does not follow "
                     f"the new data{extra}: {res.get('msg', '')}"[:700], _stats(res) | {"variant": variant})
        return False

    def probe_shape(self, multi_row: bool = False) -> dict:
        """The first check shape; with multi_row, the first whose inputs have more than one row
        (so first row, last row and the rest are different regions)."""
        shapes = self.check_shapes()
        if multi_row:
            for s in shapes:
                try:
                    x = self.make_inputs(s, 0)
                except Exception:  # noqa: BLE001
                    continue
                t = next((t for t in x if isinstance(t, torch.Tensor) and t.is_floating_point()), None)
                if t is not None and t.dim() >= 2 and t.shape[0] > 1:
                    return s
        return shapes[0]

    # ---------------------------------------------------------------- probe: same-buffer + unsampled-region
    def probe_same_buffer(self, regions: bool = False) -> None:
        probe = "unsampled-region" if regions else "same-buffer"
        rule = "replay-stale-unsampled-region" if regions else "replay-stale-same-buffer"
        shape = self.probe_shape(multi_row=regions)
        seed = self.seeds[0]
        w = self._warm(probe, shape, seed)
        if w is None:
            return
        ch, ref, base, args, names = w
        other = self.make_inputs(shape, seed + 7919)
        gen = torch.Generator().manual_seed(1234)
        tens_idx = [i for i, x in enumerate(base) if isinstance(x, torch.Tensor)]
        variants: list[tuple[str, list]] = []
        if regions:
            for region in ("first-row", "last-row", "second-half", "scattered"):
                new = list(base)
                changed = False
                for i in tens_idx:
                    if base[i].is_floating_point() and base[i].shape == other[i].shape:
                        new[i] = _region_mutate(base[i], other[i], region, gen)
                        changed = changed or not torch.equal(new[i], base[i])
                if changed:
                    variants.append((region, new))
        else:
            variants.append(("all-inputs", list(other)))
            for i in tens_idx:  # one input at a time, the others kept
                if len(tens_idx) > 1 and base[i].is_floating_point():
                    new = list(base)
                    new[i] = other[i]
                    variants.append((f"input{i}", new))
        for variant, new in variants:
            wr = self.write(ch, {f"wx{i}": new[i] for i in tens_idx})
            if not wr.ok:
                self.failed_reply(probe, wr, shape, seed, variant, what="in-place overwrite")
                return
            r, payload = self.call(ch, "w", args)
            if not r.ok:
                self.failed_reply(probe, r, shape, seed, variant)
                return
            ref_out = self.reference(ref, _to_dev(new, self.device))
            ptrs = {k: (v["ptr_before"] == v["ptr_after"]) for k, v in wr["written"].items()}
            self._judge(probe, rule, variant, shape, seed, ref_out, payload, new,
                        extra=" (same storage, data_ptr unchanged)" if all(ptrs.values()) else "")
            # restore A in place before the next variant (A3 step 4)
            self.write(ch, {f"wx{i}": base[i] for i in tens_idx})
            r, _ = self.call(ch, "w", args)
        if not regions:
            self._same_buffer_params(ch, ref, shape, seed, base, args, gen)
        ch.request("delete", self.limits.call_s, objs=["w"], slots=[f"wx{i}" for i in tens_idx])

    def _same_buffer_params(self, ch, ref, shape, seed, base, args, gen) -> None:
        """Overwrite each float parameter/buffer of the warmed model in place, as the deck's
        small_weight case does: `copy_`, data_ptr kept, `_version` bumped.  A solution that does not
        follow is stale (critical).  One that follows is then given a second set of weights written
        through a `.data` alias (`_version` kept), a write the deck never makes: not following that
        is a weight cache keyed on `_version`, which the contract allows (info finding)."""
        sd = ref.state_dict()
        floats = [k for k, v in sd.items() if v.is_floating_point() and v.numel()]
        if not floats:
            return
        label = "parameters:" + ",".join(floats)[:80]
        named = dict(ref.named_parameters())
        named.update(dict(ref.named_buffers()))
        saved = {k: sd[k].detach().clone() for k in floats}
        try:
            for variant, version in (("", "bump"), ("-version-kept", "keep")):
                new_sd = _perturb_state({k: saved[k].cpu() for k in floats}, gen, signs=True)
                wr = self.write(ch, {f"w::{k}": v for k, v in new_sd.items()}, version=version)
                if not wr.ok:
                    self.failed_reply("same-buffer", wr, shape, seed, "parameters" + variant,
                                      what="in-place parameter overwrite")
                    return
                with torch.no_grad():
                    for k in floats:
                        named[k].data.copy_(new_sd[k].to(named[k].device))
                    ref_out = self.reference(ref, _to_dev(base, self.device))
                r, payload = self.call(ch, "w", args)
                if not r.ok:
                    self.failed_reply("same-buffer", r, shape, seed, "parameters" + variant)
                    return
                bumped = all(w["version"] != w["version_before"] for w in wr["written"].values())
                if version == "bump":
                    if not self._judge("same-buffer", "replay-stale-same-buffer", label, shape, seed, ref_out, payload,
                                       base, extra=" (parameters overwritten in place with copy_, as the deck's "
                                                   "small_weight case does: data_ptr kept, _version "
                                                   + ("bumped)" if bumped else "unchanged)")):
                        return
                    continue
                res = self.compare(ref_out, self._sol_out(payload), inputs=base)
                if res.get("ok"):
                    self.row("same-buffer", "pass", shape, seed, label + variant, res)
                else:
                    self.row("same-buffer", "pass", shape, seed, label + variant, res,
                             detail="weights cached by _version: a write that keeps _version (which the deck never "
                                    "makes) is not followed; allowed")
                    self.finding("replay-version-keyed-cache",
                                 f"The solution follows in-place weight writes that bump _version (the deck's copy_) "
                                 f"but not a write through a .data alias that keeps it ({shape_label(shape)}): a "
                                 "weight cache keyed on Tensor._version. Allowed by the contract; reported.",
                                 _stats(res))
        finally:
            with torch.no_grad():
                for k in floats:
                    named[k].data.copy_(saved[k])

    def _put_other(self, ch: Child, probe: str, shape, seed: int, offset: int, prefix: str):
        """Inputs of seed + offset into new slots `<prefix><i>` -> (inputs, args), or (None, None)."""
        other = self.make_inputs(shape, seed + offset)
        pr, args = self.put(ch, other, prefix=prefix)
        if not pr.ok:
            self.failed_reply(probe, pr, shape, seed, what="input transfer")
            return None, None
        return other, args

    def rebuild_rounds(self, probe: str, shape: dict, rounds: int, one_round, noun: str) -> None:
        """The fresh-state loop of the stateful APIs.  Round 0 only warms whatever the solution
        caches; each later round builds a new model with other weights (seed seeds[0] + 777*rnd,
        replacing the last) and is judged, until one fails or lands on a dead model's id() (the
        case an id()-keyed cache gets wrong), `rounds` rebuilds at most.  `one_round(rnd, s)`
        returns None when it has reported a failed request, else (obj_id, res, more): `res` the
        comparison (unused in round 0), `more` optional "variant" / "msg" suffixes and "data"."""
        seen: set = set()
        for rnd in range(rounds + 1):
            s = self.seeds[0] + 777 * rnd
            got = one_round(rnd, s)
            if got is None:
                return
            obj_id, res, more = got
            reused = obj_id in seen
            seen.add(obj_id)
            if rnd == 0:
                continue
            variant = f"rebuild-{rnd}" + ("-dead-id" if reused else "-new-id") + more.get("variant", "")
            if not res.get("ok"):
                self.row(probe, "fail", shape, s, variant, res)
                self.finding("replay-stale-fresh-state",
                             "A new model with other weights" + (" (built on a dead model's id())" if reused else "")
                             + more.get("msg", "") + f" returns {noun}: {res.get('msg', '')}"[:600],
                             _stats(res) | {"id_reused": reused, "round": rnd} | more.get("data", {}))
                return
            if reused or rnd == rounds:
                self.row(probe, "pass", shape, s, variant, res,
                         detail="" if reused else f"no id() reuse in {rounds} rebuilds: id()-keyed caches not exercised")
                return

    # ---------------------------------------------------------------- probe: fresh-state
    def probe_fresh_state(self) -> None:
        probe = "fresh-state"
        shape = self.probe_shape()
        seed = self.seeds[0]
        w = self._warm(probe, shape, seed, n_warm=3, obj="f")
        if w is None:
            return
        ch, ref, base, args, names = w
        meta0 = ch.request("meta", self.limits.call_s, objs=["f"], slots=names)
        names2 = [f"fx{i}" for i, x in enumerate(base) if isinstance(x, torch.Tensor)]
        ch.request("delete", self.limits.call_s, objs=["f"], slots=names)
        gen = torch.Generator().manual_seed(4321)
        sd2 = _perturb_state({k: v.detach().cpu() for k, v in ref.state_dict().items()}, gen)
        ref.load_state_dict({k: v.to(self.device) for k, v in sd2.items()})
        p = self.scratch.path("state-fresh")
        pack_save(sd2, p)
        r = self.new_model(ch, "f", shape, p)
        if not r.ok:
            self.failed_reply(probe, r, shape, seed, what="second Model construction")
            return
        other, args2 = self._put_other(ch, probe, shape, seed, 104729, "fx")
        if other is None:
            return
        meta1 = ch.request("meta", self.limits.call_s, objs=["f"], slots=names2)
        reused = _reuse(meta0, meta1)
        r, payload = self.call(ch, "f", args2)
        if not r.ok:
            self.failed_reply(probe, r, shape, seed)
            return
        ref_out = self.reference(ref, _to_dev(other, self.device))
        self._judge(probe, "replay-stale-fresh-state", "new-model-new-inputs", shape, seed, ref_out, payload, other,
                    extra=f" (new objects; reused: {reused or 'none'})")
        ch.request("delete", self.limits.call_s, objs=["f"], slots=names2)

    # ---------------------------------------------------------------- probe: fresh-inputs
    def probe_fresh_inputs(self) -> None:
        probe, rule = "fresh-inputs", "replay-stale-fresh-inputs"
        shape = self.probe_shape()
        seed = self.seeds[0]
        w = self._warm(probe, shape, seed, n_warm=3, obj="i")
        if w is None:
            return
        ch, ref, base, args, names = w
        other, args2 = self._put_other(ch, probe, shape, seed, 27449, "iy")  # the first stay alive
        if other is None:
            return
        names2 = [a["slot"] for a in args2 if "slot" in a]
        meta = ch.request("meta", self.limits.call_s, objs=[], slots=names + names2)
        ptrs = {k: v.get("ptr") for k, v in ((meta.get("slots") or {}) if meta.ok else {}).items()}
        shared = sorted({ptrs.get(k) for k in names} & {ptrs.get(k) for k in names2} - {None})
        where = "new storage" if not shared else f"{len(shared)} address(es) shared with the first inputs"
        for variant, a, x in (("new-inputs-new-storage", args2, other), ("first-inputs-again", args, base)):
            r, payload = self.call(ch, "i", a)
            if not r.ok:
                self.failed_reply(probe, r, shape, seed, variant)
                return
            ref_out = self.reference(ref, _to_dev(x, self.device))
            if not self._judge(probe, rule, variant, shape, seed, ref_out, payload, x, extra=f" ({where})"):
                break
        ch.request("delete", self.limits.call_s, objs=["i"], slots=names + names2)

    # ---------------------------------------------------------------- probe: output aliasing
    def probe_output_alias(self) -> None:
        probe = "output-alias"
        shape = self.probe_shape()
        seed = self.seeds[0]
        w = self._warm(probe, shape, seed, n_warm=1, obj="a")
        if w is None:
            return
        ch, ref, base, args, names = w
        r, first = self.call(ch, "a", args, out_slot="o1")
        if not r.ok:
            self.failed_reply(probe, r, shape, seed)
            return
        other = self.make_inputs(shape, seed + 15485863)
        tens_idx = [i for i, x in enumerate(base) if isinstance(x, torch.Tensor)]
        wr = self.write(ch, {f"ax{i}": other[i] for i in tens_idx})
        r2, second = self.call(ch, "a", args, out_slot="o2")
        if not (wr.ok and r2.ok):
            self.failed_reply(probe, r2 if not r2.ok else wr, shape, seed)
            return
        p = self.scratch.path("snap")
        s = ch.request("snap", self.limits.call_s, slots=["o1"], save=p, fmt="pack", ipc=self.ipc)
        if not s.ok:
            self.failed_reply(probe, s, shape, seed)
            return
        try:
            later = pack_load(p, ipc=self.ipc, ref_owner=self.ref_owner)["o1"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            self.note_exchange(e)
            self.failed_reply(probe, Reply(False, "error", {}, f"unreadable snapshot from the solution's process: {e}"),
                              shape, seed)
            return
        if _same(first["out"], later):
            self.row(probe, "pass", shape, seed, "earlier-output-intact", detail="an earlier output is not overwritten by a later call")
        else:
            d = _maxdiff(first["out"], later)
            self.row(probe, "pass", shape, seed, "earlier-output-overwritten", max_abs=d,
                     detail=f"a later call overwrote the tensor returned by an earlier call (max change {d:.4g}); "
                            "allowed by the contract, reported")
            self.finding("replay-output-alias",
                         f"A later call overwrote the tensor the solution returned from an earlier call "
                         f"(persistent output buffer; max change {d:.4g}) on {shape_label(shape)}. Allowed, reported.",
                         {"max_change": d})
        ch.request("delete", self.limits.call_s, objs=["a"], slots=["o1", "o2"] + [f"ax{i}" for i in tens_idx])

    # ---------------------------------------------------------------- probe: determinism
    def probe_determinism(self) -> None:
        probe = "determinism"
        shape = self.probe_shape()
        seed = self.seeds[0]
        w = self._warm(probe, shape, seed, n_warm=1, obj="d")
        if w is None:
            return
        ch, ref, base, args, names = w
        outs = []
        for _ in range(3):
            r, payload = self.call(ch, "d", args)
            if not r.ok:
                self.failed_reply(probe, r, shape, seed)
                return
            outs.append(payload["out"])
        d = max(_maxdiff(outs[0], o) for o in outs[1:])
        same = all(_same(outs[0], o) for o in outs[1:])
        if same:
            self.row(probe, "pass", shape, seed, "3-calls", detail="bitwise identical", max_abs=0.0)
        else:
            self.row(probe, "fail", shape, seed, "3-calls", max_abs=d, detail=f"repeated calls differ by up to {d:.4g}")
            self.finding("replay-nondeterministic",
                         f"Three calls on the same inputs returned different outputs (max difference {d:.4g}) on "
                         f"{shape_label(shape)}.", {"max_abs": d})
        ch.request("delete", self.limits.call_s, objs=["d"], slots=names)

    # ---------------------------------------------------------------- stateful APIs
    def probe_property(self) -> None:
        cases = list(getattr(self.spec, "property_cases", []) or [])
        since = getattr(self.spec, "property_since", None)
        if not cases:
            return
        if since and self.archive_date and self.archive_date[:10] < since:
            self.row("property", "skipped", detail=f"the property suite exists from {since}; "
                     f"archive dated {self.archive_date[:10]} (run anyway with --probe property)")
            return
        for case in cases:
            shape, pin = self.spec.property_inputs(case, "cpu")
            if self.shapes_mode == "tiny":
                shape = self.probe_shape()
                base = self.make_inputs(shape, case.base_seed)
                try:
                    pin = case.mutate(self.spec, shape, [b.clone() if isinstance(b, torch.Tensor) else b for b in base])
                except Exception as e:  # noqa: BLE001
                    self.row("property", "skipped", shape, None, case.name, detail=f"case needs its own shape: {e}")
                    continue
            w = self._warm("property", shape, case.base_seed, obj="p")
            if w is None:
                return
            ch, ref, base, args, names = w
            tens_idx = [i for i, x in enumerate(base) if isinstance(x, torch.Tensor)]
            same_layout = all(isinstance(pin[i], torch.Tensor) and pin[i].shape == base[i].shape
                              and pin[i].dtype == base[i].dtype for i in tens_idx)
            if same_layout:  # A3 step 5: mutate the same storage
                wr = self.write(ch, {f"px{i}": pin[i] for i in tens_idx})
                if not wr.ok:
                    self.failed_reply("property", wr, shape, None, case.name)
                    return
                r, payload = self.call(ch, "p", args)
            else:
                pr, args2 = self.put(ch, pin, prefix="pq")
                r, payload = self.call(ch, "p", args2)
            if not r.ok:
                self.failed_reply("property", r, shape, None, case.name)
                continue
            ref_out = self.reference(ref, _to_dev(pin, self.device))
            res = self.compare(ref_out, self._sol_out(payload), case=case.name, inputs=pin)
            if res.get("ok"):
                self.row("property", "pass", shape, case.base_seed, case.name, res)
            else:
                self.row("property", "fail", shape, case.base_seed, case.name, res)
                self.finding("replay-property-failed", f"property case {case.name} on {shape_label(shape)} "
                             f"(same storage after 11 calls): {res.get('msg', '')}"[:600], _stats(res))
            ch.request("delete", self.limits.call_s, objs=["p"], slots=names)

    # ---------------------------------------------------------------- driver
    def _run_probe(self, name: str, fn) -> None:
        """One probe under Limits.probe_s: a request still waiting when it runs out times out.

        The replay's own failures end the probe, not the replay: out of memory in this process (the
        reference side: a multi-GB reference model, its outputs, a comparison) frees what the
        replay keeps and reports the probe `not_run (oom in replay: ...)`; any other exception of
        the tool `not_run (replay error: ...)`, with finding `replay-tool-error`.  Either way the
        correctness of the solution is unknown for that probe, never failed.  Interrupts
        (KeyboardInterrupt, SystemExit, a signal) still end the replay (`run` closes the child)."""
        tp = time.monotonic()
        self.probe_name = name
        self._set_deadline(tp + self.limits.probe_s)
        n_rows, n_find = len(self.out.rows), len(self.out.findings)
        try:
            fn()
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except EXCHANGE_TAMPER as e:   # the solution's doing, not the tool's: refused, recorded
            self.note_exchange(e)
            self.row(name, "tampered", detail=f"the solution's process tampered with an exchange file: {e}")
        except BaseException as e:  # noqa: BLE001 - the tool's own failure, reported, never fatal
            oom = _is_oom(e)
            self.free_memory()
            what = (f"oom in replay: {e}" if oom else f"replay error: {type(e).__name__}: {e}")[:1500]
            import traceback
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]
            self.row(name, "not_run", detail=what + ("" if oom else "\n" + tb))
            self.finding("replay-tool-error",
                         f"The replay itself failed during probe {name} ({what.splitlines()[0][:300]}); that probe "
                         "did not run to the end and says nothing about the solution.",
                         {"probe": name, "oom": oom, "traceback": tb}, probe=name, key=f"tool-error:{name}")
        finally:
            self._set_deadline(None)
            self._note_planted()
            took = round(time.monotonic() - tp, 3)
            self.out.info.setdefault("probe_s", {})[name] = took
            self.emit({"event": "probe", "probe": name, "s": took, "rows": self.out.rows[n_rows:],
                       "findings": self.out.findings[n_find:]})

    def progress(self, what: str) -> None:
        """Stream the step the replay is entering: a replay killed from outside (a time limit) still
        says where its time went (the last step streamed)."""
        t0 = self.__dict__.setdefault("_progress_t0", time.monotonic())
        self.emit({"event": "progress", "what": what, "t": round(time.monotonic() - t0, 2)})

    def emit(self, event: dict) -> None:
        """Hand a partial result to `on_event` (the CLI streams it as a JSON line), never failing."""
        cb = getattr(self, "on_event", None)
        if cb is None:
            return
        try:
            cb(event)
        except Exception:  # noqa: BLE001 - a broken stream must not end the replay
            pass

    def free_cuda(self) -> None:
        if str(self.device).startswith("cuda") and torch.cuda.is_available():
            import gc
            gc.collect()
            torch.cuda.empty_cache()

    def free_memory(self) -> None:
        """Drop what the replay keeps between probes (kept inputs, reference outputs and models)."""
        import gc
        self._ref_memo.clear()
        self._inputs_memo.clear()
        self._state_holds.clear()
        for k in ("_kimi_ref", "_kimi_mod"):
            self.__dict__.pop(k, None)
        gc.collect()
        if str(self.device).startswith("cuda") and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def run(self, probes: Iterable[str], table: dict[str, Callable[[], None]], kind: str | None) -> Outcome:
        """Run `probes` from `table` (name -> callable; forensics.replay.drivers builds it for the
        problem's API kind): boot the child, each probe under its limits, timing last."""
        probes = [p for p in probes if kind or p != "alternate-cache"]  # only decode APIs take caches
        t0 = time.monotonic()
        try:
            if not kind and "check" in probes and self.child is None and self.build_failed is None:
                self._boot_and_prefetch()
            if self.ensure_child() is None:
                for p in probes:
                    if p != "check":
                        self.row(p, "skipped", detail="the solution could not be built or imported")
                return self.out
            for p in probes:
                if p == "timing":
                    continue
                if self.early_exit or self.hung:
                    self.row(p, "skipped", detail="the solution exited the replay early" if self.early_exit
                             else "the solution hung earlier (timed out); not retried")
                    continue
                if p not in table:
                    self.row(p, "skipped", detail=f"not defined for the {kind or 'stateless'} API of {self.spec.name}")
                    continue
                self._run_probe(p, table[p])
            if "timing" in probes and "timing" in table and not (self.early_exit or self.hung):
                self._run_probe("timing", table["timing"])
        except BaseException:
            self.abort()   # an interrupt (a signal, Ctrl-C): the children go now, the result so far stays
            raise
        finally:
            self._set_deadline(None)
            self.close()
            self._note_planted()
            self.out.info["total_s"] = round(time.monotonic() - t0, 3)
            self.out.info["phase_s"] = {k: round(v, 3) for k, v in sorted(self.phase_s.items())}
            self.out.info["hello"] = self.hello
        return self.out


def _is_oom(e: BaseException) -> bool:
    oom_cls = getattr(torch.cuda, "OutOfMemoryError", None)
    if isinstance(e, MemoryError) or (oom_cls is not None and isinstance(e, oom_cls)):
        return True
    return isinstance(e, RuntimeError) and "out of memory" in str(e).lower()


def _target_name(fn: dict) -> str:
    """What a call request called, for a finding: `m0.forward`, `solution:run`."""
    if "attr" in fn:
        return str(fn["attr"])
    return f"{fn.get('obj')}.{fn.get('method') or '__call__'}"


def _changed_elems(before: Any, after: Any) -> dict:
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


def _stats(res: dict) -> dict:
    return {k: res.get(k) for k in ("max_abs", "max_rel", "n_bad", "n_total", "worst_index", "atol", "rtol")
            if res.get(k) is not None}


def _reuse(m0: Reply, m1: Reply) -> str:
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
