"""What crosses to the solution's process and back: state files, inputs, in-place writes, calls and
their outputs, and the watch on the inputs.

The inputs a call computes on live in memory this process holds (`put`: the put file the child maps
shared on the CPU, our own GPU tensors mapped over CUDA IPC), so whether the solution wrote into
them is read here (`owned_now`), never taken from the child's report alone: a report that says
otherwise is `replay-report-forged`; a write is `replay-input-mutated` (`call`).  The put file is
written and read through the descriptor that created it (`PutFile`, `FileSlot`), never reopened by
name: io/ is the child's to write."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

import torch

from .link import Link
from .record import Record
from .runner import Child, Reply, close_fds
from .values import changed_elems, maxdiff, same, target_name, tensors, to_cpu, to_dev, unwrap
from .worker import ExchangeTampered, pack_load, pack_save, pack_write


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


class Exchange:
    """Transfers of one replay through its `Link`, recorded in its `Record`."""

    def __init__(self, scratch: Any, device: str, link: Link, rec: Record) -> None:
        self.scratch = scratch
        self.device = device
        self.link = link
        self.rec = rec
        #: what each input slot must still hold (a snapshot of our own)
        self.expected: dict[str, torch.Tensor] = {}
        #: some call changed its inputs in place (`replay-input-mutated`)
        self.inputs_mutated = False
        #: input slots whose memory this process holds and the child computes on (see `put`):
        #: its own GPU tensors mapped by the child over IPC, or slots of the CPU put file
        self.owned: dict[str, torch.Tensor | FileSlot] = {}
        #: state-dict files sent over CUDA IPC -> the device copies they name (`state_file`)
        self.state_holds: dict[str, list] = {}

    @property
    def limits(self):
        return self.link.limits

    def child_started(self, ch: Child) -> None:
        """A new child: the last one's slots died with it; deletes in this one are watched."""
        self.owned.clear()
        ch.on_delete = self.forget_slots

    def forget_slots(self, slots: Iterable[str]) -> None:
        for k in slots:
            self.owned.pop(k, None)

    # ---------------------------------------------------------------- state files
    def state_file(self, model: Any, key: str = "") -> str:
        """The reference model's state dict, for the child's `load_state_dict`.  Where the child
        passed the IPC test its GPU tensors travel as CUDA IPC handles of copies this process holds
        (until `new_model` has built from it, `release_state`; a file sent otherwise, until it is written
        again or `free_memory`); the child copies them on the device.
        Otherwise, and for CPU tensors, as bytes.  A GLM state is 13 GB: through host memory and a
        file it cost ~100 s per model built (50 s to write, 50 s to read on this 2-core box; round 7,
        BENCHMARKS.md), over IPC it is device copies.  The copies, not the reference's own tensors,
        are shared: the child could write into what it maps."""
        with self.rec.timed("state-transfer"):
            p = self.scratch.path("state" + key)
            self.state_holds.pop(p, None)
            if self.link.ipc and str(self.device).startswith("cuda"):
                hold: list = []
                pack_save({k: v.detach() for k, v in model.state_dict().items()}, p, ipc_hold=hold)
                self.state_holds[p] = hold
            else:
                pack_save({k: v.detach().cpu() for k, v in model.state_dict().items()}, p)
            return p

    def release_state(self, path: str | None) -> None:
        """A state file used once (`new_model`): its device copies go now, not when the next state is
        written (the child copied them while building; a GLM state is 13 GB that the reference's
        forward needs on an H100, where round 8 ran out of memory holding both), and the file with
        them, since its IPC handles would name freed memory."""
        if path is None:
            return
        self.state_holds.pop(path, None)
        Path(path).unlink(missing_ok=True)

    # ---------------------------------------------------------------- inputs
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
        ipc = self.link.ipc
        slots = {}
        args = []
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                v = x.detach()
                slots[f"{prefix}{i}"] = v.contiguous().clone() if ipc and v.is_cuda else v.cpu()
                args.append({"slot": f"{prefix}{i}"})
            elif isinstance(x, (list, tuple, dict)) and tensors(x):  # a state: list of dicts of tensors
                slots[f"{prefix}{i}"] = to_cpu(x)
                args.append({"slot": f"{prefix}{i}"})
            else:
                args.append({"lit": x})
        with self.rec.timed("input-transfer"):
            p, fd = self.scratch.create("put")
            pf = PutFile(p, fd)
            hold: list = []
            with os.fdopen(os.dup(fd), "wb") as f:
                layout = pack_write(slots, f, ipc_hold=hold if ipc else None, ipc_copy=False)
            # a snapshot of our own, not the memory shared with the child (it can write into
            # that), and not the caller's tensors (stress cases restore them in place afterwards)
            self.expected.update({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in slots.items()})
            mine = self._shared_views(pf, layout, slots, hold)
            r = ch.request("put", self.limits.call_s, file=p, ipc=ipc, share=True)
            Path(p).unlink(missing_ok=True)   # the child's mapping and our descriptor outlive the name
            if r.ok and r.get("file") != pf.ident:
                self.rec.exchange_tampered(
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
        tens = {k: v for k, v in slots.items() if isinstance(v, torch.Tensor) and v.numel()}
        if not str(self.device).startswith("cuda"):
            entries = dict((k, sub) for k, sub in layout["tree"]["__dict__"])
            out = {}
            for k, v in tens.items():
                sub = entries.get(k)
                m = layout["tensors"][sub["__t__"]] if isinstance(sub, dict) and set(sub) == {"__t__"} else None
                if m is not None and "ipc" not in m:
                    out[k] = FileSlot(pf, k, layout["start"] + m["offset"], m["nbytes"], v.dtype, v.shape)
            return out
        shared = {h.data_ptr() for h in hold}
        return {k: v for k, v in tens.items() if v.is_cuda and v.data_ptr() in shared}

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
                    self.rec.note_exchange(e)
                    self.owned.pop(k, None)
                    continue
            now[k] = v
        return now

    def owned_changed(self, keys: Iterable[str]) -> list[str]:
        """Input slots among `keys` whose memory, as this process reads it, no longer holds what was sent."""
        return [k for k, v in self.owned_now(keys).items() if not same(self.expected[k], v)]

    def write(self, ch: Child, values: dict[str, torch.Tensor], version: str | None = None) -> Reply:
        """Overwrite tensors in the child in place (data_ptr kept).  A module's parameters and
        buffers ("obj::name") get `copy_`, which bumps `_version` as the deck's own weight writes do;
        inputs a `.data` copy, which keeps it (the deck's same-storage property mutation);
        `version="bump"|"keep"` forces one (the worker's Store.op_write)."""
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

    # ---------------------------------------------------------------- calls
    def call(self, ch: Child, obj: str | None, args: list, save_inputs: list[str] | None = None, repeat: int = 1,
             out_slot: str | None = None, poison: list[int] | None = None, method: str | None = None,
             fn: dict | None = None, kwargs: dict | None = None,
             export_index: list | None = None) -> tuple[Reply, Any]:
        """Call `obj.method(*args)` (or the target `fn`, e.g. {"attr": "solution:run"}) in the child;
        -> (reply, payload with "out", "inputs_after", "inputs_mutated").  Inputs in `save_inputs`
        (default: every slot argument) must come back unchanged."""
        rec = self.rec
        ipc = self.link.ipc
        p = self.scratch.path("out")
        meth = method or "forward"
        if save_inputs is None:
            save_inputs = [a["slot"] for a in args if isinstance(a, dict) and "slot" in a and a["slot"] in self.expected
                           and not a.get("index")]
        with rec.timed("child-call"):
            r = ch.request("call", self.limits.call_s, fn=fn or {"obj": obj, "method": meth}, args=args,
                           kwargs=kwargs or {}, save=p, save_inputs=save_inputs, repeat=repeat, out_slot=out_slot,
                           poison=poison, watch=save_inputs, export_index=export_index or [], fmt="pack",
                           ipc=ipc)
        if r.ok:  # the solution's own time inside the request (the rest is export and transfer)
            rec.add_phase("solution", float(r.get("elapsed_s") or 0.0))
        rec.note_tamper(r, "a call")
        if not r.ok:
            if r.status == "timeout":
                rec.hung = True
            Path(p).unlink(missing_ok=True)
            return r, None
        with rec.timed("output-transfer"):
            try:
                payload = pack_load(p, ipc=ipc, ref_owner=self.link.ref_owner)
            except (OSError, ValueError) as e:
                rec.note_exchange(e)
                Path(p).unlink(missing_ok=True)
                return Reply(False, "error", r.data, f"unreadable output file from the solution's process: {e}"), None
            Path(p).unlink(missing_ok=True)
        after = payload.setdefault("inputs_after", {})
        said = {k for k in save_inputs if k in after and k in self.expected and not same(self.expected[k], after[k])}
        now = self.owned_now(save_inputs)
        seen = [k for k, v in now.items() if not same(self.expected[k], v)]
        forged = [k for k in seen if k not in said]
        if forged:
            rec.finding("replay-report-forged",
                        f"The solution's process reported input slot(s) {', '.join(forged)} unchanged after a call, "
                        "but the memory they live in, which the replay holds, was written: the child's account "
                        "of its inputs was falsified.",
                        {"slots": forged, "max_change": max(maxdiff(self.expected[k], now[k]) for k in forged)})
            for k in forged:   # what the storage really holds
                after[k] = now[k].clone()
        bad = [k for k in save_inputs if k in said or k in seen]
        payload["inputs_mutated"] = bad
        if bad:
            self.inputs_mutated = True
            target = fn or {"obj": obj, "method": meth}
            pos = {a["slot"]: i for i, a in enumerate(args) if isinstance(a, dict) and "slot" in a}
            changed = {k: changed_elems(self.expected[k], after[k]) for k in bad}
            rec.finding("replay-input-mutated",
                        f"The solution changed its input tensor(s) in place during a call of {target_name(target)} in "
                        f"probe {rec.probe_name or '?'} (argument(s) {', '.join(str(pos.get(k, k)) for k in bad)}: "
                        f"slots {', '.join(bad)}; max change "
                        f"{max(maxdiff(self.expected[k], after[k]) for k in bad):.4g}): the check compares against "
                        "a reference computed on the inputs as they were.",
                        {"slots": bad, "inputs": [pos.get(k) for k in bad], "probe": rec.probe_name,
                         "call": {"request": r.get("id"), "target": target_name(target)}, "changed": changed})
            for k in bad:  # the storage now holds what the solution wrote
                self.expected[k] = after[k]
        return r, payload

    def sol_out(self, payload: Any) -> Any:
        """The solution's output of a `call` payload, on the replay's device."""
        return to_dev(unwrap(payload["out"]), self.device)

    def load(self, path: str) -> Any:
        """A result file the child saved in the pack format (over CUDA IPC where negotiated)."""
        return pack_load(path, ipc=self.link.ipc, ref_owner=self.link.ref_owner)
