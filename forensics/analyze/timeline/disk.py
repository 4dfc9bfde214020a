"""The rebuilt file tree of one run: every version of every file, the text shown of files never written.

`Disk` is what the transcript walk (`rebuild.Rebuilder`) and the shell's file effects
(`shellwrites.ShellWrites`) write into: a new `Version` per change of a file's content, a gap
(content None, with the reason) where the content cannot be established, deletions as versions.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from forensics.analyze.timeline.edits import Replace

def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Version:
    path: str
    version: int
    call_seq: int | None
    line: int | None
    ts: Any
    op: str
    tool: str | None
    content: str | None
    gap_reason: str | None = None
    basis: str = "exact"          # exact | anchor | assumed | deleted
    order: tuple = (0, 0)
    replaces: list[Replace] | None = None   # for backward resolution from the final file
    deleted: bool = False

    @property
    def gap(self) -> bool:
        return self.content is None and not self.deleted

    @property
    def sha256(self) -> str | None:
        return sha256(self.content) if self.content is not None else None


class Disk:
    def __init__(self, versions: dict[str, list[Version]], early_cwds: set[str]):
        self.versions = versions                 # the rebuild's output: path -> its versions in order
        self.state: dict[str, Version] = {}      # path -> its current version
        self.observed: dict[str, str] = {}       # path -> full text shown by a `cat FILE` / whole-file Read
        self.early_cwds = early_cwds             # working directories of the first calls (are directories)

    def emit(self, key: str, content: str | None, call: dict, op: str, order: tuple,
              gap_reason: str | None = None, basis: str = "exact", replaces=None, deleted=False) -> None:
        prev = self.state.get(key)
        if prev is not None and not deleted and not prev.deleted and content is not None \
                and prev.content == content and basis == prev.basis:
            return  # no change on disk: not a new version
        if prev is not None and deleted and prev.deleted:
            return
        vs = self.versions.setdefault(key, [])
        v = Version(key, len(vs) + 1, call.get("call_seq"), call.get("line"), call.get("ts"), op,
                    call.get("tool"), content, gap_reason if content is None and not deleted else None,
                    "deleted" if deleted else (basis if content is not None else "exact"), order, replaces, deleted)
        vs.append(v)
        self.state[key] = v

    def content_of(self, key: str) -> str | None:
        v = self.state.get(key)
        if v is None or v.deleted:
            return None
        return v.content

    def known(self, key: str) -> bool:
        return key in self.state and not self.state[key].deleted

    def observe(self, key: str, text: str) -> None:
        if not text.strip() or text.startswith("(Bash completed") or self.known(key):
            return
        self.observed[key] = text if text.endswith("\n") else text + "\n"

    def tracked(self, key: str) -> bool:
        return key in self.state

    def is_dir(self, key: str) -> bool:
        pre = key.rstrip("/") + "/"
        if any(k.startswith(pre) for k in self.state):
            return True
        return key.rstrip("/") in self.early_cwds

    def tracked_under(self, key: str) -> bool:
        pre = key.rstrip("/") + "/"
        return any(k.startswith(pre) and self.known(k) for k in self.state)

    def copy_tree(self, call, skey, tkey, a0, order):
        pre = skey.rstrip("/") + "/"
        for k in list(self.state):
            if k.startswith(pre) and self.known(k):
                dst = tkey.rstrip("/") + "/" + k[len(pre):]
                self.emit(dst, self.content_of(k), call, a0, order())
