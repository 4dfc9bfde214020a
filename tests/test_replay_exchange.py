"""The replay process never follows a name in a place the solution's process can write.

io/ (the tensor exchange) and the sha-keyed build cache are writable by the sandboxed child, and
the replay process (root on a GPU host) acts on files there.  Mechanism: every exchange file is
opened O_NOFOLLOW|O_NONBLOCK and used only if fstat says it is a regular file with one link
(`worker.open_exchange`, under pack_save / pack_load / is_pack / load_any / save_exchange /
load_exchange); `Scratch.path` removes whatever the child put at a name before creating the file
O_EXCL|O_NOFOLLOW; the build cache's claim lives outside the cache, its stale locks are removed
through directory descriptors opened O_NOFOLLOW, its subdirectories are replaced when they are
not real directories, and `prepare_owner` walks by descriptor (os.fwalk) and changes each entry
through a descriptor of its own.  Look-alike none of it may refuse: the plain files the parent
and the child write, and a real stale lock.

Unit tests here need no sandbox; the end-to-end case (corpus/replay/sandbox_exchange.py)
replays a hostile solution on the CPU with whatever sandbox the machine allows.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import uuid
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from forensics.replay.outcome import Limits  # noqa: E402
from forensics.replay.runner import Scratch, ScratchTampered, claim_build_cache  # noqa: E402
from forensics.replay.worker import (ExchangeTampered, is_pack, load_any, load_exchange, open_exchange,  # noqa: E402
                                     pack_load, pack_save, save_exchange)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="O_NOFOLLOW semantics and /proc are Linux's")

REPO = Path(__file__).resolve().parent.parent
FAST = Limits(build_s=300, call_s=240, probe_s=300, time_s=120)


def _canary(tmp_path: Path, name: str = "canary.txt") -> tuple[Path, tuple]:
    c = tmp_path / name
    c.write_bytes(b"canary " + uuid.uuid4().hex.encode())
    os.chmod(c, 0o600)
    return c, _state(c)


def _state(p: Path) -> tuple:
    st = os.lstat(p)
    return p.read_bytes(), st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), st.st_ino, st.st_size


def _payload():
    return {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": [torch.ones(2, dtype=torch.int64), 3]}


# ------------------------------------------------------------------------------ open_exchange
@pytest.mark.parametrize("op", ["open-rb", "open-wb", "open-r+b", "pack_save", "pack_load", "pack_load-share",
                                "is_pack", "load_any", "save_exchange", "load_exchange"])
def test_a_symlink_at_an_exchange_name_is_refused_and_its_target_untouched(tmp_path, op):
    canary, before = _canary(tmp_path)
    # the canary as a valid pack file too, so a reader that followed would succeed, not fail by luck
    pack_save({"t": torch.ones(3)}, str(canary))
    before = _state(canary)
    io = tmp_path / "io"
    io.mkdir()
    p = io / "00001-out.pt"
    p.symlink_to(canary)
    calls = {
        "open-rb": lambda: open_exchange(str(p), "rb"), "open-wb": lambda: open_exchange(str(p), "wb"),
        "open-r+b": lambda: open_exchange(str(p), "r+b"), "pack_save": lambda: pack_save(_payload(), str(p)),
        "pack_load": lambda: pack_load(str(p)), "pack_load-share": lambda: pack_load(str(p), share=True),
        "is_pack": lambda: is_pack(str(p)), "load_any": lambda: load_any(str(p)),
        "save_exchange": lambda: save_exchange(_payload(), str(p)), "load_exchange": lambda: load_exchange(str(p)),
    }
    with pytest.raises(ExchangeTampered, match="symbolic link"):
        calls[op]()
    assert _state(canary) == before
    assert p.is_symlink()


def _in_thread(fn, timeout: float = 20.0):
    box: dict = {}

    def run():
        try:
            box["ret"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["exc"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return t.is_alive(), box


@pytest.mark.parametrize("mode", ["rb", "wb", "r+b"])
def test_a_fifo_at_an_exchange_name_is_refused_without_waiting(tmp_path, mode):
    fifo = tmp_path / "00002-put.pt"
    os.mkfifo(fifo)
    hung, box = _in_thread(lambda: open_exchange(str(fifo), mode))
    if hung:   # free the thread before failing: a peer on the other end
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        os.close(fd)
    assert not hung, "open_exchange waited on a FIFO"
    assert isinstance(box.get("exc"), ExchangeTampered), box
    assert "not a regular file" in str(box["exc"])


def test_pack_load_of_a_fifo_does_not_hang(tmp_path):
    fifo = tmp_path / "00003-out.pt"
    os.mkfifo(fifo)
    for fn in (lambda: pack_load(str(fifo)), lambda: load_exchange(str(fifo)), lambda: pack_save(_payload(), str(fifo))):
        hung, box = _in_thread(fn)
        if hung:
            os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
        assert not hung and isinstance(box.get("exc"), ExchangeTampered), box


@pytest.mark.parametrize("op", ["pack_save", "save_exchange", "open-wb"])
def test_a_hard_linked_exchange_file_is_not_written(tmp_path, op):
    other, before = _canary(tmp_path, "other.txt")
    p = tmp_path / "00004-write.pt"
    os.link(other, p)
    with pytest.raises(ExchangeTampered, match="hard links"):
        {"pack_save": lambda: pack_save(_payload(), str(p)), "save_exchange": lambda: save_exchange(_payload(), str(p)),
         "open-wb": lambda: open_exchange(str(p), "wb")}[op]()
    assert _state(other) == before


def test_a_directory_at_an_exchange_name_is_refused(tmp_path):
    d = tmp_path / "00005-out.pt"
    d.mkdir()
    for mode in ("rb", "wb", "r+b"):
        with pytest.raises(ExchangeTampered, match="not a regular file"):
            open_exchange(str(d), mode)


# ------------------------------------------------------------------------------ the look-alike: plain files
def test_plain_exchange_files_round_trip(tmp_path):
    p = tmp_path / "00006-out.pt"
    pack_save(_payload(), str(p))
    assert is_pack(str(p))
    got = pack_load(str(p))
    assert torch.equal(got["a"], _payload()["a"]) and got["b"][1] == 3
    assert torch.equal(load_any(str(p))["b"][0], torch.ones(2, dtype=torch.int64))
    q = tmp_path / "00007-run.pt"
    q.write_bytes(b"x" * 10000)   # an older, longer content: truncated, not mixed in
    save_exchange(_payload(), str(q))
    assert not is_pack(str(q))
    got = load_exchange(str(q))
    assert torch.equal(got["a"], _payload()["a"]) and torch.equal(load_any(str(q))["a"], got["a"])
    with open_exchange(str(tmp_path / "00008-new.pt"), "wb") as f:   # created where it does not exist
        f.write(b"abc")
    with open_exchange(str(tmp_path / "00008-new.pt"), "rb") as f:
        assert f.read() == b"abc"


def test_shared_pack_mappings_see_each_other_also_after_unlink(tmp_path):
    p = tmp_path / "00009-put.pt"
    pack_save({"x": torch.zeros(8), "y": torch.arange(4, dtype=torch.int32), "e": torch.empty(0)}, str(p))
    mine = pack_load(str(p), share=True)
    theirs = pack_load(str(p), share=True)
    p.unlink()
    theirs["x"][3] = 7.0
    theirs["y"].add_(1)
    assert mine["x"][3].item() == 7.0 and mine["y"].tolist() == [1, 2, 3, 4] and mine["e"].numel() == 0
    mine["x"][0] = -1.0
    assert theirs["x"][0].item() == -1.0


# ------------------------------------------------------------------------------ Scratch.path
def test_scratch_path_removes_a_planted_symlink_and_creates_a_new_file(tmp_path):
    canary, before = _canary(tmp_path)
    sc = Scratch(b"x = 1\n", cache_root=tmp_path / "cache", work_root=tmp_path)
    try:
        sc._owner = os.geteuid()   # the sandbox-uid path (fchown on the new file), possible as any user
        planted = Path(sc.io) / "00001-put.pt"
        planted.symlink_to(canary)
        p = sc.path("put")
        assert p == str(planted)
        st = os.lstat(p)
        assert stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_size == 0 and stat.S_IMODE(st.st_mode) == 0o660
        assert _state(canary) == before
        assert len(sc.planted) == 1 and "taken before it was created" in sc.planted[0]
        pack_save(_payload(), p)
        assert _state(canary) == before and torch.equal(pack_load(p)["a"], _payload()["a"])
        # the look-alike: a name nobody touched is no event
        q = sc.path("out")
        assert os.path.isfile(q) and len(sc.planted) == 1
        (Path(sc.io) / "00003-snap.pt").mkdir()
        with pytest.raises(ScratchTampered, match="directory"):
            sc.path("snap")
    finally:
        sc.cleanup()


def test_scratch_path_refuses_a_name_that_keeps_reappearing(tmp_path, monkeypatch):
    sc = Scratch(b"x = 1\n", cache_root=tmp_path / "cache", work_root=tmp_path)
    real_open = os.open

    def racing_open(path, flags, *a, **kw):   # the child recreates the name after every unlink
        if str(path).endswith("-put.pt") and flags & os.O_EXCL:
            os.symlink("/etc/hostname", path)
        return real_open(path, flags, *a, **kw)

    try:
        monkeypatch.setattr(os, "open", racing_open)
        with pytest.raises(ScratchTampered, match="kept reappearing"):
            sc.path("put")
    finally:
        monkeypatch.undo()
        sc.cleanup()


# ------------------------------------------------------------------------------ the build cache
def test_stale_lock_removal_never_follows_a_planted_directory_symlink(tmp_path):
    outside = tmp_path / "outside"
    (outside / "x").mkdir(parents=True)
    (outside / "x" / "lock").write_text("not yours")
    (outside / "lock").write_text("not yours either")
    cache = tmp_path / "cache" / ("a" * 32)
    ext = cache / "torch_extensions"
    (ext / "py311_cu126" / "w4a16_ext").mkdir(parents=True)
    (ext / "py311_cu126" / "w4a16_ext" / "lock").write_text("")      # a real stale lock: goes
    (ext / "evil").symlink_to(outside, target_is_directory=True)       # torch_extensions/evil -> outside
    (ext / "py311_cu126" / "evil2").symlink_to(outside / "x", target_is_directory=True)
    (ext / "py311_cu126" / "dirlink").mkdir()
    (ext / "py311_cu126" / "dirlink" / "lock").symlink_to(outside / "lock")   # a lock that is a symlink: kept
    fd, removed = claim_build_cache(cache)
    try:
        assert fd >= 0
        assert removed == ["torch_extensions/py311_cu126/w4a16_ext/lock"]
        assert (outside / "x" / "lock").read_text() == "not yours"
        assert (outside / "lock").read_text() == "not yours either"
        assert (ext / "py311_cu126" / "dirlink" / "lock").is_symlink()
    finally:
        os.close(fd)


def test_the_claim_lives_outside_the_cache_and_is_never_followed(tmp_path):
    canary, before = _canary(tmp_path)
    cache = tmp_path / "cache" / ("b" * 32)
    cache.mkdir(parents=True)
    (cache / ".replay-claim").symlink_to(canary)            # where the claim used to be: ignored now
    fd, _ = claim_build_cache(cache)
    assert fd >= 0 and os.fstat(fd).st_ino == os.stat(cache.with_name(cache.name + ".claim")).st_ino
    os.close(fd)
    assert _state(canary) == before
    other = tmp_path / "cache" / ("c" * 32)
    other.mkdir()
    other.with_name(other.name + ".claim").symlink_to(canary)   # a symlink at the claim itself: not opened
    assert claim_build_cache(other) == (-1, [])
    assert _state(canary) == before


def test_scratch_replaces_planted_cache_subdirs_without_following_them(tmp_path):
    outside = tmp_path / "outside"
    (outside / "tag" / "ext").mkdir(parents=True)
    (outside / "tag" / "ext" / "lock").write_text("keep")
    canary, before = _canary(tmp_path)
    sol = b"x = 2\n"
    first = Scratch(sol, cache_root=tmp_path / "cache", work_root=tmp_path)
    cache = first.cache
    first.cleanup()
    import shutil
    shutil.rmtree(cache / "torch_extensions")
    (cache / "torch_extensions").symlink_to(outside, target_is_directory=True)
    (cache / "triton").rmdir()
    (cache / "triton").symlink_to(canary)
    (cache / "cuda").rmdir()
    (cache / "cuda").write_text("a file where a directory belongs")
    sc = Scratch(sol, cache_root=tmp_path / "cache", work_root=tmp_path)
    try:
        assert sc.cache == cache
        for sub in ("torch_extensions", "triton", "cuda"):
            st = os.lstat(cache / sub)
            assert stat.S_ISDIR(st.st_mode), sub
        assert sc.stale_build_locks == []
        assert (outside / "tag" / "ext" / "lock").read_text() == "keep"
        assert sorted(p.name for p in outside.iterdir()) == ["tag"]
        assert _state(canary) == before
    finally:
        sc.cleanup()


def test_prepare_owner_never_follows_a_directory_swapped_for_a_symlink_mid_walk(tmp_path, monkeypatch):
    """The cache is shared with a concurrent replay of the same solution whose child can swap a
    directory for a symlink after the walk checked it and before it lists it: os.walk then lists and
    chmods (as root: chowns) the symlink's target.  Look-alike: the cache's own files are changed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("host file")
    os.chmod(outside / "f", 0o600)
    before = _state(outside / "f")
    sc = Scratch(b"x = 3\n", cache_root=tmp_path / "cache", work_root=tmp_path)
    a = sc.cache / "triton" / "a"
    a.mkdir()
    (a / "f").write_text("cache file")
    os.chmod(a / "f", 0o600)
    own = sc.cache / "cuda" / "g"
    own.write_text("cache file")
    os.chmod(own, 0o600)
    real_scandir, real_listdir = os.scandir, os.listdir
    a_ino = os.stat(a).st_ino
    swapped = []

    def swap_when_entering_a(p):
        # the walker has decided to descend into `a` (checked it is no symlink) and now lists it:
        # the concurrent child swaps it for a symlink to the outside in between
        if swapped:
            return
        if isinstance(p, int):
            hit = os.fstat(p).st_ino == a_ino
        else:
            hit = Path(os.fsdecode(p)) == a
        if hit:
            os.rename(a, sc.cache / "triton" / "a.moved")
            a.symlink_to(outside, target_is_directory=True)
            swapped.append(True)

    def scandir(p="."):
        swap_when_entering_a(p)
        return real_scandir(p)

    def listdir(p="."):
        swap_when_entering_a(p)
        return real_listdir(p)

    uid = os.geteuid() if os.geteuid() != 0 else 54321
    try:
        monkeypatch.setattr(os, "scandir", scandir)
        monkeypatch.setattr(os, "listdir", listdir)
        sc.prepare_owner(uid)
        monkeypatch.undo()
        assert swapped
        assert _state(outside / "f") == before
        assert stat.S_IMODE(os.stat(own).st_mode) == 0o660
        if os.geteuid() == 0:
            assert os.stat(own).st_uid == uid
    finally:
        monkeypatch.undo()
        sc.cleanup()


# ------------------------------------------------------------------------------ the put file (the inputs' memory)
class _PutChild:
    """The worker's side of a put, in this process: the real `Store.op_put` of the worker (it maps the
    put file by name, shared, and names the file it mapped in its reply), after `before(path)`: what
    the solution's process does to the name first."""

    def __init__(self, before=None) -> None:
        from forensics.replay.worker import Store
        self.w = Store("cpu")
        self.before = before

    def request(self, op, timeout, **kw):
        from forensics.replay.runner import Reply
        assert op == "put"
        if self.before is not None:
            self.before(kw["file"])
        return Reply(True, "ok", self.w.op_put({"file": kw["file"], "share": kw.get("share"), "ipc": False}))


def _put_replay(tmp_path):
    """The replay's exchange (forensics/replay/exchange.py) of a CPU replay, with its record and link."""
    from forensics.replay.exchange import Exchange
    from forensics.replay.link import Link
    from forensics.replay.record import Record
    sc = Scratch(b"x = 1\n", cache_root=tmp_path / "cache", work_root=tmp_path)
    rec = Record(sc, "cpu")
    return Exchange(sc, "cpu", Link(sc, "cpu", Limits(), rec), rec), sc


def _swap_for_copy(path: str) -> None:
    data = Path(path).read_bytes()
    Path(path + ".decoy").write_bytes(data)
    os.rename(path + ".decoy", path)


def test_an_honest_put_is_watched_through_the_replays_own_descriptor(tmp_path):
    """The look-alike: the child maps the put file the replay wrote; what the solution writes into
    its input there is what the replay reads back, also after the name is gone; nothing else is
    an event."""
    rp, sc = _put_replay(tmp_path)
    try:
        ch = _PutChild()
        r, args = rp.put(ch, [torch.arange(8, dtype=torch.float32), 3, torch.ones(2, 2, dtype=torch.bfloat16)])
        assert r.ok and args[1] == {"lit": 3} and sorted(rp.owned) == ["x0", "x2"]
        assert not list(Path(sc.io).iterdir())                  # the name is gone, the memory is not
        assert rp.owned_changed(["x0", "x2"]) == [] and not rp.rec.exchange_events
        ch.w.slots["x0"][5] = -1.0                              # the solution writes into its input
        assert rp.owned_changed(["x0", "x2"]) == ["x0"]
        assert rp.owned_now(["x0"])["x0"][5].item() == -1.0 and not rp.rec.exchange_events
    finally:
        sc.cleanup()


def test_a_put_file_swapped_before_the_child_maps_it_is_tampering(tmp_path):
    """The solution's process replaces the put file at its name by a copy before the worker maps
    it: the worker computes on the copy.  Before, the replay had mapped the name itself before the
    call and watched the original, untouched (a forged report then passed); now the worker's reply
    names another file than the replay wrote: replay-exchange-tampered, and the slot is not
    reported as unchanged from memory the solution never used."""
    rp, sc = _put_replay(tmp_path)
    try:
        ch = _PutChild(before=_swap_for_copy)
        r, _ = rp.put(ch, [torch.arange(8, dtype=torch.float32)])
        assert r.ok
        f = next(f for f in rp.rec.out.findings if f["rule"] == "replay-exchange-tampered")
        assert "mapped another file" in f["message"] and f["severity"] == "critical"
        assert "x0" not in rp.owned
    finally:
        sc.cleanup()


def test_the_replay_never_opens_the_put_name_again(tmp_path, monkeypatch):
    """The put file is written and read through the descriptor that created it (a name swapped
    between the replay's write and its own reopen showed the replay a decoy)."""
    import forensics.replay.worker as worker
    rp, sc = _put_replay(tmp_path)
    opened: list[str] = []
    real = worker.open_exchange

    def spy(path, mode="rb"):
        opened.append(str(path))
        return real(path, mode)

    try:
        monkeypatch.setattr(worker, "open_exchange", spy)
        r, _ = rp.put(_PutChild(before=lambda p: opened.append("--child--")), [torch.arange(4.0)])
        assert r.ok and opened[0] == "--child--" and len(opened) == 2   # the child's open only
    finally:
        monkeypatch.undo()
        sc.cleanup()


def _in_fork(fn) -> int:
    """Run `fn` in a forked process: -> its wait status (a SIGBUS there must not end the tests)."""
    pid = os.fork()
    if pid == 0:   # pragma: no cover - the child's exit status is the result
        code = 1
        try:
            fn()
            code = 0
        except BaseException:   # noqa: BLE001
            import traceback
            traceback.print_exc()
        os._exit(code)
    return os.waitpid(pid, 0)[1]


def test_a_put_file_truncated_by_the_child_does_not_crash_the_replay(tmp_path):
    """The solution's process truncates the put file (it owns it and maps it read-write) after the
    replay took its view.  The replay read its inputs back through a mapping of its own: the read
    faulted past the new end and SIGBUS killed the replay process.  Now they are read with pread:
    a short file is replay-exchange-tampered and the slot is no longer watched."""
    rp, sc = _put_replay(tmp_path)

    kept: list[int] = []

    def scenario():
        ch = _PutChild(before=lambda p: kept.append(os.open(p, os.O_RDWR)))   # the child's own descriptor
        r, _ = rp.put(ch, [torch.arange(4096, dtype=torch.float32)])
        assert r.ok and "x0" in rp.owned
        os.ftruncate(kept[0], 0)
        assert rp.owned_changed(["x0"]) == []
        f = next(f for f in rp.rec.out.findings if f["rule"] == "replay-exchange-tampered")
        assert "shorter than this process wrote it" in f["message"] and "x0" not in rp.owned

    try:
        st = _in_fork(scenario)
        assert not os.WIFSIGNALED(st), f"the replay process died of signal {os.WTERMSIG(st)}"
        assert os.WEXITSTATUS(st) == 0
    finally:
        sc.cleanup()


# ------------------------------------------------------------------------------ /dev/shm/forensics-replay-io
SHM = Path("/dev/shm")
needs_shm = pytest.mark.skipif(not (SHM.is_dir() and os.access(SHM, os.W_OK)), reason="no writable /dev/shm")


@pytest.fixture
def io_root_name(monkeypatch):
    """A fresh IO_ROOT_NAME for this test (the real one is shared with every replay on the host)."""
    from forensics.replay import runner
    name = f"forensics-replay-io-test-{uuid.uuid4().hex[:12]}"
    monkeypatch.setattr(runner, "IO_ROOT_NAME", name)
    yield name
    top = SHM / name
    if top.is_symlink() or top.is_file():
        top.unlink()
    elif top.is_dir():
        os.chmod(top, 0o700)
        for p in sorted(top.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
        top.rmdir()


def _scratch_io(tmp_path) -> tuple[Scratch, str]:
    sc = Scratch(b"x = 1\n", cache_root=tmp_path / "cache", work_root=tmp_path)
    return sc, os.path.realpath(sc.io)


@needs_shm
def test_a_symlink_planted_at_the_shared_io_root_is_not_followed(tmp_path, io_root_name):
    """Another local user plants /dev/shm/forensics-replay-io as a symlink to a directory of theirs
    before any replay runs: mkdir(exist_ok=True) accepted it, and every scratch's io/ was made in
    their directory (which they can rename and swap for a symlink while the replay, root on a GPU
    host, writes exchange files through it).  Now: io/ stays in the scratch, the refusal is kept."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (SHM / io_root_name).symlink_to(theirs, target_is_directory=True)
    sc, io = _scratch_io(tmp_path)
    try:
        assert list(theirs.iterdir()) == []
        assert not io.startswith(str(SHM)) and io == str(sc.root / "io") and os.path.isdir(io)
        assert "symlink" in sc.io_root_refused
        p = sc.path("put")                     # the exchange still works, on disk
        pack_save(_payload(), p)
        assert torch.equal(pack_load(p)["a"], _payload()["a"]) and list(theirs.iterdir()) == []
    finally:
        sc.cleanup()
    assert (SHM / io_root_name).is_symlink()   # not ours to remove


@needs_shm
@pytest.mark.parametrize("how", ["foreign-owner", "group-writable", "other-writable", "a-file"])
def test_a_shared_io_root_someone_else_can_write_is_not_used(tmp_path, io_root_name, monkeypatch, how):
    top = SHM / io_root_name
    if how == "a-file":
        top.write_bytes(b"")
    else:
        top.mkdir(mode=0o711)
        os.chmod(top, {"group-writable": 0o771, "other-writable": 0o733}.get(how, 0o711))
    euid = os.geteuid()
    if how == "foreign-owner" and euid == 0:
        os.chown(top, 54321, 54321)              # really another user's
    with monkeypatch.context() as m:
        if how == "foreign-owner" and euid != 0:   # a user cannot chown: this process looks like another uid
            m.setattr(os, "geteuid", lambda: euid + 1)
        sc, io = _scratch_io(tmp_path)
    try:
        assert not io.startswith(str(SHM)) and os.path.isdir(io)
        assert sc.io_root_refused and ("belongs to uid" in sc.io_root_refused if how == "foreign-owner" else True)
        if top.is_dir():
            assert list(top.iterdir()) == []
    finally:
        sc.cleanup()


@needs_shm
def test_the_shared_io_root_of_our_own_is_used(tmp_path, io_root_name):
    """The look-alike: made here (or left by an earlier replay of this user), 0711: used, io/ in it."""
    sc, io = _scratch_io(tmp_path)
    sc2, io2 = _scratch_io(tmp_path)   # the second scratch finds it existing: still ours, still used
    try:
        top = SHM / io_root_name
        st = os.lstat(top)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
        assert os.path.dirname(io) == os.path.dirname(io2) == str(top)
        assert sc.io_root_refused is None and sc2.io_root_refused is None
    finally:
        sc.cleanup()
        sc2.cleanup()


def test_shared_io_root_refuses_a_world_writable_parent_without_the_sticky_bit(tmp_path):
    from forensics.replay.runner import shared_io_root
    shm = tmp_path / "shm"
    shm.mkdir()
    os.chmod(shm, 0o777)
    top, why = shared_io_root(shm, "io")
    assert top is None and "sticky" in why and not (shm / "io").exists()
    os.chmod(shm, 0o1777)                      # /dev/shm as it is: sticky
    top, why = shared_io_root(shm, "io")
    assert top == shm / "io" and why is None


# ------------------------------------------------------------------------------ sol/ (the child's cwd)
def test_authored_kernel_names_never_come_through_a_symlink_or_a_fifo(tmp_path):
    """kernel-trace reads the solution's sources from sol/ while the child is alive (the session's
    solution_sources): a symlink to a
    host file was read (its kernel names reported), a FIFO swapped in after the is_file check would
    hang the replay.  Look-alike: the solution's own files, in subfolders too, are read."""
    from forensics.replay.probes.kerneltrace import authored_kernels
    from forensics.replay.session import solution_sources
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "host.cu").write_text("__global__ void host_secret_kernel(float* p) {}\n")
    (outside / "pkg").mkdir()
    (outside / "pkg" / "k.cu").write_text("__global__ void host_dir_kernel(float* p) {}\n")
    sol = tmp_path / "sol"
    (sol / "kernels").mkdir(parents=True)
    (sol / "solution.py").write_text("SRC = '__global__ void own_main_kernel(float* y) {}'\n")
    (sol / "kernels" / "side.cu").write_text("__global__ void own_side_kernel(int* p) {}\n")
    (sol / "leak.cu").symlink_to(outside / "host.cu")
    (sol / "linked").symlink_to(outside / "pkg", target_is_directory=True)
    os.mkfifo(sol / "wait.cu")
    hung, box = _in_thread(lambda: authored_kernels(solution_sources(sol)))
    if hung:
        os.close(os.open(sol / "wait.cu", os.O_RDWR | os.O_NONBLOCK))
    assert not hung, "authored_kernels waited on a FIFO"
    names, _ = box["ret"]
    assert {"own_main_kernel", "own_side_kernel"} <= names
    assert not {"host_secret_kernel", "host_dir_kernel"} & names


# ------------------------------------------------------------------------------ end to end
def test_a_solution_swapping_its_exchange_files_for_symlinks_reaches_nothing(tmp_path):
    """corpus/replay/sandbox_exchange.py plants symlinks to a canary outside its view (beside the
    cache root, which it can work out from TORCH_EXTENSIONS_DIR) at the exchange names the replay
    creates next, and swaps each result file it writes for one.  Before the fix the replay truncated,
    chowned and overwrote the canary; now it is untouched and the run is `tampered`."""
    from forensics.replay.api import replay_solution
    canary, before = _canary(tmp_path)
    src = (REPO / "corpus" / "replay" / "sandbox_exchange.py").read_bytes()
    out = replay_solution("05_topk_bitonic", src, device="cpu", shapes="tiny", probes=["check"], seeds=(42,),
                          limits=FAST, cache_root=tmp_path / "cache")
    assert _state(canary) == before
    assert out.status() == "tampered", [(r["probe"], r["status"], (r["detail"] or "")[:300]) for r in out.rows]
    f = next(f for f in out.findings if f["rule"] == "replay-exchange-tampered")
    assert f["severity"] == "critical" and "exchange" in f["message"]
    events = f["data"]["events"]
    assert any("symbolic link" in e for e in events), events          # a result file swapped after it was written
    assert any("taken before it was created" in e for e in events), events   # names planted ahead
    assert not any(r["status"] == "pass" for r in out.rows if r["probe"] == "check")


def _replay_apart(tmp_path, case: str, probes=("check",)) -> tuple[int, dict]:
    """A CPU replay of corpus/replay/<case> in a process of its own (a replay killed by a signal
    must fail the test, not end it): -> (wait status, {"status", "findings"})."""
    import json
    import subprocess
    res = tmp_path / "out.json"
    script = (
        "import json, pathlib, sys\n"
        "from forensics.replay.api import replay_solution\n"
        "from forensics.replay.outcome import Limits\n"
        f"src = open({str(REPO / 'corpus' / 'replay' / case)!r}, 'rb').read()\n"
        f"out = replay_solution('05_topk_bitonic', src, device='cpu', shapes='tiny', probes={list(probes)!r},\n"
        f"    seeds=(42,), limits=Limits(build_s=300, call_s=240, probe_s=300, time_s=120),\n"
        f"    cache_root=pathlib.Path({str(tmp_path / 'cache')!r}))\n"
        f"json.dump({{'status': out.status(), 'findings': out.findings}}, open({str(res)!r}, 'w'), default=str)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(tmp_path), capture_output=True, timeout=900)
    return r.returncode, (json.loads(res.read_text()) if res.exists() else {"stderr": r.stderr.decode()[-3000:]})


def test_a_solution_computing_on_a_decoy_put_file_is_tampering(tmp_path):
    """corpus/replay/topk_put_decoy.py sorts its input in place, forges the worker's report, and
    swaps the put file for a copy just before the worker maps it.  Before the fix the replay had
    mapped the original by name and saw it untouched: the run passed.  Now the worker's reply names
    another file than the replay wrote: `tampered`."""
    rc, out = _replay_apart(tmp_path, "topk_put_decoy.py")
    assert rc == 0, out
    rules = {f["rule"] for f in out["findings"]}
    assert out["status"] == "tampered" and "replay-exchange-tampered" in rules, (out["status"], rules)
    f = next(f for f in out["findings"] if f["rule"] == "replay-exchange-tampered")
    assert any("mapped another file" in e for e in f["data"]["events"])


def test_a_solution_truncating_its_put_file_does_not_kill_the_replay(tmp_path):
    """corpus/replay/topk_put_truncate.py truncates each put file after computing its answer (and
    keeps the worker off the lost pages).  Before the fix the replay process died of SIGBUS
    reading its own mapping of the inputs; now it reads them with pread: `tampered`."""
    rc, out = _replay_apart(tmp_path, "topk_put_truncate.py")
    assert rc == 0, (rc, out)
    f = next(f for f in out["findings"] if f["rule"] == "replay-exchange-tampered")
    assert any("shorter than this process wrote it" in e for e in f["data"]["events"])
    assert out["status"] == "tampered"
