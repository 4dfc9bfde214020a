"""The parent's end of the replay child's evidence pipe (the audit hook of `childaudit.py`).

`EvidenceReader` is started by `runner.Child` for every child: a daemon thread reads the pipe as the
child writes it (so the hook never blocks on a full pipe and what it sent is here even if the child
dies), keeps the records (bounded), and accounts for the channel itself: the sequence numbers of each
writing process, the worker's heartbeats (one per request it served) and the lines that are not the
hook's.  `silenced(replied)` says whether the channel went quiet while the worker kept replying (a
solution that closed the pipe's descriptor, put another file on it, or wrote its own lines there).
Standard library only."""

from __future__ import annotations

import json
import os
import select
import threading

MAX_RECORDS = 20000
MAX_BYTES = 16 * 2**20


class EvidenceReader:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.records: list[dict] = []
        self.heartbeats: dict[int, set] = {}      # pid -> request ids
        self.seqs: dict[int, list[int]] = {}      # pid -> sequence numbers seen
        self.bad_lines = 0
        self.dropped = 0
        self.overflow = False
        self.eof = False
        self._bytes = 0
        self._stop = False
        self._buf = b""
        self._t = threading.Thread(target=self._run, name="replay-evidence", daemon=True)
        self._t.start()

    def _run(self) -> None:
        try:
            while not self._stop:
                try:
                    ready, _, _ = select.select([self.fd], [], [], 0.5)
                except (OSError, ValueError):
                    break
                if not ready:
                    continue
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    self.eof = True
                    break
                self._feed(chunk)
        finally:
            if self._buf.strip():
                self._line(self._buf)
            self._buf = b""
            try:
                os.close(self.fd)
            except OSError:
                pass

    def _feed(self, chunk: bytes) -> None:
        self._buf += chunk
        while b"\n" in self._buf:
            line, _, self._buf = self._buf.partition(b"\n")
            self._line(line)
        if len(self._buf) > 1 << 20:   # no newline in a megabyte: not the hook's
            self.bad_lines += 1
            self._buf = b""

    def _line(self, line: bytes) -> None:
        try:
            rec = json.loads(line)
        except ValueError:
            self.bad_lines += 1
            return
        if not (isinstance(rec, dict) and type(rec.get("seq")) is int and type(rec.get("pid")) is int
                and rec.get("k") in ("ev", "hb", "overflow")):
            self.bad_lines += 1
            return
        self.seqs.setdefault(rec["pid"], []).append(rec["seq"])
        if rec["k"] == "hb":
            self.heartbeats.setdefault(rec["pid"], set()).add(rec.get("req"))
            return
        if rec["k"] == "overflow":
            self.overflow = True
            return
        self._bytes += len(line)
        if len(self.records) >= MAX_RECORDS or self._bytes > MAX_BYTES:
            self.dropped += 1
            return
        self.records.append(rec)

    def finish(self, timeout: float = 5.0) -> None:
        """Wait for the writers to be gone (EOF), at most `timeout` seconds, then stop reading."""
        self._t.join(timeout)
        if self._t.is_alive():
            self._stop = True
            self._t.join(1.0)

    def silenced(self, worker_pid: int | None, replied: list) -> list[str]:
        """Why the channel cannot be the whole account of what the worker did (empty: it is):
        requests the worker replied to without a heartbeat first, gaps in its sequence numbers,
        lines that are not the hook's."""
        why: list[str] = []
        if worker_pid is None:
            pids = [p for p in self.heartbeats]
            worker_pid = pids[0] if len(pids) == 1 else None
        beats = self.heartbeats.get(worker_pid, set()) if worker_pid is not None else set()
        missing = [r for r in replied if r not in beats]
        if replied and missing:
            why.append(f"{len(missing)} of the {len(replied)} requests the worker answered sent no heartbeat on the "
                       f"evidence channel first (request ids {missing[:8]})")
        seqs = sorted(self.seqs.get(worker_pid, [])) if worker_pid is not None else []
        if seqs:
            gaps = [(a, b) for a, b in zip(seqs, seqs[1:]) if b != a + 1]
            if seqs[0] != 1:
                gaps.insert(0, (0, seqs[0]))
            if gaps:
                why.append(f"records missing between sequence numbers {gaps[:5]} (of {seqs[-1]} sent)")
        if self.bad_lines:
            why.append(f"{self.bad_lines} line(s) on the channel that the audit hook did not write")
        return why
