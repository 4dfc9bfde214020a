"""JSON lines as a replay goes, and the JSON of a replay that could not finish (no click, no store:
the GPU machine runs this with torch and the standard library only)."""

from __future__ import annotations

import json
import os
import sys


class JsonLines:
    """Each event as one JSON line, flushed (and fsynced for a file) as it comes: a replay stopped
    from outside leaves every probe it finished.  `-` is stdout."""

    def __init__(self, path: str | None):
        self.path = path
        self.f = None
        if path == "-":
            self.f = sys.stdout
        elif path:
            self.f = open(path, "a", encoding="utf-8")

    def __call__(self, event: dict) -> None:
        if self.f is None:
            return
        self.f.write(json.dumps(event, default=str) + "\n")
        self.f.flush()
        if self.f is not sys.stdout:
            try:
                os.fsync(self.f.fileno())
            except OSError:
                pass

    def close(self) -> None:
        if self.f is not None and self.f is not sys.stdout:
            self.f.close()


def result_doc(out) -> dict:
    return {"info": out.info, "rows": out.rows, "findings": out.findings}


def failure_doc(exc: BaseException, events: list[dict], what: str) -> dict:
    """The JSON the CLI prints when the replay itself could not finish: the reason, and every row
    and finding the finished probes had streamed."""
    import traceback
    rows = [r for e in events for r in e.get("rows", [])]
    findings = [f for e in events for f in e.get("findings", [])]
    interrupted = isinstance(exc, KeyboardInterrupt)
    step = next((e for e in reversed(events) if e.get("event") == "progress"), None)
    return {"info": {"status": "interrupted" if interrupted else "error", "error": f"{type(exc).__name__}: {exc}",
                     "what": what, "traceback": "" if interrupted else traceback.format_exc()[-4000:],
                     "partial": True, "last_step": step and {"what": step.get("what"), "t": step.get("t")}},
            "rows": rows, "findings": findings}
