"""The replay's record: result rows and findings as they are written, and what a failed reply means.

`Record` holds the `Outcome` of one replay and is the only writer of it: rows (`row`: a pass
becomes `tampered` once torch was patched), findings (`finding`: one per rule and message, or per
key), the failures a reply reports (`failed_reply`: early exit, crash, timeout, a build this host
cannot reproduce, the solution raising), torch patches (`note_tamper`), tampered exchange files
(`exchange_tampered`, `note_exchange`, `note_planted`), where the replay's own time goes (`timed`,
`phase_s`) and the progress stream (`progress`, `emit`).  Nothing here talks to the child."""

from __future__ import annotations

import math
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from forensics.vocab import BUILD_ENV, CHECK, PROPERTY, STRESS

from .account import PHASE_KIND, Account
from .outcome import Outcome
from .runner import Reply, ScratchTampered
from .rules import FINDING_RULES
from .values import shape_label
from .worker import ExchangeTampered

#: what this side raises when a name the child can write is not the file the protocol put there
EXCHANGE_TAMPER = (ExchangeTampered, ScratchTampered)

# Anywhere in the text: the device cannot run what the solution built / needs.
NOT_REPLAYABLE_MARKERS = (
    "no kernel image is available", "torch not compiled with cuda", "found no nvidia driver",
    "cuda driver initialization failed", "no cuda gpus are available",
    "cuda_home environment variable is not set",
)
# Only on an error line that is not the echoed compiler command: an arch this toolchain/GPU lacks.
ARCH_ERROR_MARKERS = ("unsupported gpu architecture", "compute_120", "sm_120", "compute_100", "sm_100",
                      "compute_103", "sm_103", "is not defined for option 'gpu-architecture'")

#: rules written once whatever their message (the first occurrence is the evidence)
_ONCE = {"replay-early-exit", "replay-crash", "replay-timeout", "replay-not-replayable", "replay-input-mutated",
         "replay-build-failed", "replay-report-forged", "replay-exchange-tampered"}


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


#: the dynamic loader missing a shared object an extension build should have left (ImportError/OSError)
_MISSING_SO = re.compile(r"([\w.+-]+\.so(?:\.[\d.]+)?): cannot open shared object file: No such file or directory")


#: a failed extension build (torch's JIT, ninja, nvcc, ptxas), as opposed to an error raised by the solution
_BUILD_FAILED = re.compile(r"error building extension|ninja: build stopped|ptxas (?:fatal|error)|nvcc (?:fatal|error)|"
                           r"\.cuh?\(\d+\): error|\.cuh?:\d+(?::\d+)?: error|command '?\S*nvcc'? failed", re.I)
_ARCH_NAME = re.compile(r"(?:sm|compute|lto)_\d+[af]?")
#: the deviation a rebuild for this GPU is named by (info["deviations"], Outcome.official)
ARCH_REBUILT_DEVIATION = "arch-rebuilt"


def classify_error(text: str, local_modules: set[str] | None = None) -> str:
    return "not_replayable" if not_replayable_reason(text, local_modules) else "error"


class Record:
    """The rows, findings and info of one replay (`out`), and the flags its failures set."""

    def __init__(self, scratch: Any, device: str, on_event: Callable[[dict], None] | None = None) -> None:
        self.scratch = scratch
        self.device = device
        self.out = Outcome()
        #: torch functions the child reported replaced (a pass row becomes `tampered`)
        self.tampered: list[str] = []
        self._seen_findings: set[tuple[str, str]] = set()
        #: the solution ended a request early / did not answer within a limit: later probes are skipped
        self.early_exit = False
        self.hung = False
        #: what the child said when it started (torch, gpu, capability, l2_bytes ...)
        self.hello: dict = {}
        #: builds the child rewrote for this GPU (worker.rewrite_arch_flags), as `note_arch_rebuild` read them
        self.arch_rebuilt: list[dict] = []
        #: what the child did to the exchange files (replay-exchange-tampered's evidence)
        self.exchange_events: list[str] = []
        self._planted_seen = 0
        #: the probe running now (findings cite it)
        self.probe_name: str | None = None
        #: where the replay's own time goes (out.info['phase_s'])
        self.phase_s: dict[str, float] = {}
        #: the same timeline charged exclusively to kinds and probes (account.py; out.info['account'])
        self.account = Account()
        #: called with each probe's partial result as it finishes (`emit`): a replay stopped from
        #: outside leaves what it had
        self.on_event = on_event
        self._progress_t0: float | None = None

    @contextmanager
    def timed(self, phase: str):
        t0 = time.perf_counter()
        try:
            with self.account.span(PHASE_KIND.get(phase, "other")):
                yield
        finally:
            self.phase_s[phase] = self.phase_s.get(phase, 0.0) + time.perf_counter() - t0

    def add_phase(self, phase: str, seconds: float) -> None:
        self.phase_s[phase] = self.phase_s.get(phase, 0.0) + seconds
        if phase == "solution":   # the child's own count (its clock): beside the account, never in it
            self.account.claimed_solution_s += seconds

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

    # ---------------------------------------------------------------- tampering
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

    def note_planted(self) -> None:
        """Names Scratch.path found taken before it created them (only the child writes io/)."""
        planted = getattr(self.scratch, "planted", [])
        for what in planted[self._planted_seen:]:
            self.exchange_tampered(what)
        self._planted_seen = len(planted)

    def note_tamper(self, reply: Reply, where: str) -> None:
        """torch functions the child reports replaced during `where`: `replay-torch-monkeypatch`,
        and `replay-patched` for those the grader calls (patching.py)."""
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

    # ---------------------------------------------------------------- failed replies
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
                return self.not_replayable(probe, text, shape, seed, case)
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
            return self.not_replayable(probe, text, shape, seed, case)
        arch = self.arch_rebuild_failure(text)
        if arch:
            return self.not_replayable(probe, text, shape, seed, case, line=arch)
        unbuilt = self.unbuilt_extension(text)
        if unbuilt:
            return self.not_replayable(probe, text, shape, seed, case, line=unbuilt)
        status = "fail" if probe in (CHECK, STRESS, PROPERTY) else "error"
        rule = "replay-check-failed" if probe in (CHECK, STRESS) else (
            "replay-property-failed" if probe == PROPERTY else "replay-error")
        # the same exception (a constructor that always raises) is one finding;
        # every probe it stops still gets its row
        self.finding(rule, f"The solution raised during {what} ({loc}): {reply.error[:300]}.",
                     {"traceback": str(reply.get("tb", ""))[-3000:]}, probe=probe, key=reply.error[:300])
        return self.row(probe, status, shape, seed, case, detail=reply.error + "\n" + str(reply.get("tb", ""))[-2000:])

    def note_arch_rebuild(self, entries: Any) -> None:
        """The child rebuilt an extension whose build pins only GPU architectures this GPU cannot run
        (worker.rewrite_arch_flags: `-gencode arch=compute_120,code=sm_120` on an H100) for this GPU,
        rewriting only the architecture options.  The binary replayed is not the one graded: a named
        deviation (info["deviations"], `Outcome.official`), the rewrite in info["arch_rebuild"], and an
        info finding `replay-arch-rebuilt`.  What the child reports is read as data (strings, bounded);
        whether the solution's own files name the targets is checked here (`named_in_source`)."""
        if not isinstance(entries, list):
            return
        names = self._source_arch_names()
        for e in entries[:8]:
            if not isinstance(e, dict):
                continue
            targets = [t for t in (e.get("targets") or []) if isinstance(t, str) and _ARCH_NAME.fullmatch(t)][:16]
            if not targets:
                continue

            def strs(v) -> list[str]:
                return [str(x)[:200] for x in (v if isinstance(v, list) else [])][:16]
            host = str(e.get("host") or "")[:16]
            entry = {"where": str(e.get("where") or "")[:80], "targets": targets, "host": host,
                     "removed": strs(e.get("removed")), "added": strs(e.get("added")),
                     "named_in_source": any(t in names or t.split("_", 1)[1].rstrip("af") in names for t in targets)}
            if entry in self.arch_rebuilt:
                continue
            self.arch_rebuilt.append(entry)
            self.out.info.setdefault("arch_rebuild", []).append(entry)
            devs = self.out.info.setdefault("deviations", [])
            what = (f"{ARCH_REBUILT_DEVIATION}: built for {', '.join(targets)} on the graded machine, rebuilt here for "
                    f"{host} ({' '.join(entry['removed'])} -> {' '.join(entry['added'])})")
            if what not in devs:
                devs.append(what)
            self.finding("replay-arch-rebuilt",
                         f"The solution's build ({entry['where']}) pins {', '.join(targets)}, none of which runs on this "
                         f"GPU ({self.hello.get('gpu') or self.device}, {host}): the replay rebuilt it for {host}, "
                         f"rewriting only the architecture options ({' '.join(entry['removed'])} -> "
                         f"{' '.join(entry['added'])}). The binary replayed is not the one graded: its correctness "
                         "here says the source is right on this GPU; its timing is another binary's on another GPU.",
                         entry, key=f"arch-rebuilt:{entry['where']}:{','.join(targets)}")

    def _source_arch_names(self) -> set[str]:
        """Architecture names (`sm_120`, `compute_120a`) and TORCH_CUDA_ARCH_LIST-style numbers ("120"
        for "12.0") the solution's files in the scratch spell."""
        from .runner import child_files
        out: set[str] = set()
        try:   # sol/ is the child's: read by descriptor, never through a symlink, never a FIFO
            files = list(child_files(Path(self.scratch.sol_dir), (".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")))
        except (OSError, AttributeError, TypeError):
            return out
        for _, data in files[:200]:
            text = data[:2_000_000].decode("utf-8", errors="replace")
            out.update(_ARCH_NAME.findall(text))
            out.update(f"{a}{b}" for a, b in re.findall(r"\b(\d{1,2})\.(\d)[af]?\b", text))
        return out

    def arch_rebuild_failure(self, text: str) -> str | None:
        """Where this failure is the build of an extension rebuilt for this GPU (`note_arch_rebuild`)
        failing: the reason, naming both architectures and the first error line.  The source needs the
        graded GPU's features (sm_100's tcgen05, say): not replayable here, never the solution's failure."""
        if not self.arch_rebuilt or not _BUILD_FAILED.search(text or ""):
            return None
        err = next((ln.strip() for ln in text.splitlines() if re.search(r"\berror\b|fatal", ln, re.I)
                    and "Error building extension" not in ln), "") or next(
            (ln.strip() for ln in text.splitlines() if _BUILD_FAILED.search(ln)), "")
        e = self.arch_rebuilt[-1]
        return (f"built for {', '.join(e['targets'])} on the graded machine; rebuilt here for {e['host']} "
                f"({ARCH_REBUILT_DEVIATION}), the build fails: the source needs that architecture ({err[:200]})")

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

    def unbuilt_extension(self, text: str) -> str | None:
        """The build-environment reason again, where `text` is the loader failing on a shared object
        that this replay's failed build never produced.

        An extension the solution builds lazily (on the first call of a shape that needs it) fails to
        build here for want of a piece (CUTLASS headers, say): that call is `not_replayable`. The next
        call of that shape finds the build directory without its `.so` and raises ImportError/OSError
        "cannot open shared object file": the same missing piece, not the solution failing."""
        first = str(self.out.info.get("not_replayable") or "")
        if not first.startswith(BUILD_ENV):
            return None
        m = _MISSING_SO.search(text or "")
        if not m:
            return None
        return f"{first} (the extension {m.group(1)} it would have built is not there)"

    def not_replayable(self, probe: str, text: str, shape=None, seed=None, case=None, line: str | None = None) -> dict:
        line = line or not_replayable_reason(text, self.local_modules(), self.named_files()) or text.strip()[:200]
        env = line.startswith("build environment:")
        where = "here" if env else f"on this device ({self.hello.get('gpu') or self.device}, capability " \
                                   f"{self.hello.get('capability')})"
        self.finding("replay-not-replayable",
                     f"The solution cannot be built or run {where}: {line[:300]}. Not a correctness failure.",
                     {"line": line, "device": self.hello.get("gpu") or self.device,
                      "reason": line if env else f"device: {line}"[:300]})
        self.out.info.setdefault("not_replayable", line[:300])
        return self.row(probe, "not_replayable", shape, seed, case, detail=line + "\n" + text[-3000:])

    # ---------------------------------------------------------------- the stream and the summary
    def progress(self, what: str) -> None:
        """Stream the step the replay is entering: a replay killed from outside (a time limit) still
        says where its time went (the last step streamed)."""
        if self._progress_t0 is None:
            self._progress_t0 = time.monotonic()
        self.emit({"event": "progress", "what": what, "t": round(time.monotonic() - self._progress_t0, 2)})

    def emit(self, event: dict) -> None:
        """Hand a partial result to `on_event` (the CLI streams it as a JSON line), never failing."""
        cb = self.on_event
        if cb is None:
            return
        try:
            cb(event)
        except Exception:  # noqa: BLE001 - a broken stream must not end the replay
            pass

    def gpu_peak(self, side: str, gb: Any) -> None:
        """Record the most GPU memory `side` (replay: this process, solution: the child) held, in
        GiB (out.info['gpu_peak_gb']); the bench packs replays onto shared GPUs by it."""
        try:
            gb = float(gb)
        except (TypeError, ValueError):
            return
        peaks = self.out.info.setdefault("gpu_peak_gb", {})
        peaks[side] = max(gb, float(peaks.get(side) or 0.0))
