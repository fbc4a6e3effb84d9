"""The wake index's file protocol (store/wake.py): writers' markers, claims,
the snapshot and what puts it in doubt. The index may be stale-early (an
agent looked at for nothing), never stale-late (a wake lost)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.store import wake as W


def _marker(home: Path, aid: str) -> Path:
    return home / "run" / "wake" / aid


def _clear(home: Path) -> None:
    d = home / "run" / "wake"
    for p in d.iterdir() if d.is_dir() else ():
        p.unlink()


def test_the_writers_of_what_a_tick_reads_mark_the_agent(holon_home: Path) -> None:
    store = create_agent("a")
    _clear(holon_home)
    admit("hi", store=store)  # the inbox
    assert _marker(holon_home, "a").exists()
    _clear(holon_home)
    store.update_state(lambda s: s.update({"status": "asleep"}))  # the record
    assert _marker(holon_home, "a").exists()
    _clear(holon_home)
    from holon_cli.runtime.waiting import timers

    timers.add_timer(store, after_ms=60_000, purpose="test")  # a ledger
    assert _marker(holon_home, "a").exists()


def test_history_writes_make_no_marker(holon_home: Path) -> None:
    store = create_agent("a")
    _clear(holon_home)
    store.emit("tick_completed", {"actions": []})
    store.ledger("transcript").append({"v": 1, "role": "assistant", "content": "x"})
    assert not _marker(holon_home, "a").exists()


def test_an_agent_outside_a_home_is_not_marked(tmp_path: Path) -> None:
    assert W.split_agent_dir(tmp_path / "elsewhere" / "x") is None
    assert W.mark(tmp_path / "elsewhere" / "x") == -1
    assert W.split_agent_dir(tmp_path / "agents" / "x") == (str(tmp_path), "x")


def test_a_claim_takes_the_marker_and_a_later_write_makes_a_new_one(holon_home: Path) -> None:
    create_agent("a")
    fd = W.mark(holon_home / "agents" / "a")
    W.unmark(fd)
    c = W.claim(holon_home, "a")
    assert c.path is not None and not c.busy
    assert not _marker(holon_home, "a").exists() and Path(c.path).exists()
    assert W.claim(holon_home, "a") == W.Claim("a", None, False)  # nothing left to claim
    # the claimed file still counts until released
    assert set(W.marked(holon_home)) == {"a"}
    W.unmark(W.mark(holon_home / "agents" / "a"))
    assert _marker(holon_home, "a").exists()
    W.release(holon_home, [os.path.basename(c.path), "a"])  # never a writer's marker
    assert [n for n in os.listdir(holon_home / "run" / "wake")] == ["a"]


def test_a_claim_never_waits_for_a_writer_and_leaves_its_marker(holon_home: Path) -> None:
    create_agent("a")
    fd = W.mark(holon_home / "agents" / "a")  # a write in flight
    try:
        t0 = time.monotonic()
        c = W.claim(holon_home, "a")
        assert time.monotonic() - t0 < 1.0
        assert c.busy and c.path is None
        assert _marker(holon_home, "a").exists()
    finally:
        W.unmark(fd)


def test_a_writer_that_waited_for_a_claim_makes_a_new_marker(holon_home: Path) -> None:
    """A writer that opened the marker while a claim held it exclusively gets
    its shared lock only after the rename: it must not keep the claimed file
    (released soon) as its marker."""
    import fcntl

    create_agent("a")
    W.unmark(W.mark(holon_home / "agents" / "a"))
    path = _marker(holon_home, "a")
    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a claim in progress
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(W.mark(holon_home / "agents" / "a")))
    t.start()
    time.sleep(0.1)
    os.rename(path, str(path) + "~1~1")
    os.close(fd)
    t.join(5)
    assert got and got[0] >= 0
    st = os.fstat(got[0])
    assert (st.st_ino, st.st_dev) == (os.stat(path).st_ino, os.stat(path).st_dev)
    W.unmark(got[0])


def test_a_writer_killed_after_its_write_leaves_its_marker(holon_home: Path) -> None:
    """Crash between the write and anything after it: the marker was made
    before the write, so the agent is looked at."""
    store = create_agent("a")
    _clear(holon_home)
    pid = os.fork()
    if pid == 0:  # the writer: marks, writes, dies before closing anything
        try:
            W.mark(store.layout.home)
            store.inbox._deliver("msg_killed0000000000000", {"v": 2, "id": "x"})
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert _marker(holon_home, "a").exists()
    assert store.inbox.pending_count() == 1


def test_holding_suppresses_marks_in_this_thread_only(holon_home: Path) -> None:
    store = create_agent("a")
    _clear(holon_home)
    with W.holding([store.layout.home]):
        store.update_state(lambda s: s.update({"status": "asleep"}))
        assert not _marker(holon_home, "a").exists()
        other = threading.Thread(target=lambda: admit("x", store=store))
        other.start()
        other.join(10)
        assert _marker(holon_home, "a").exists()  # another thread's write marks
        _clear(holon_home)
        pid = os.fork()
        if pid == 0:  # a forked child (a command's supervisor) marks again
            try:
                W.unmark(W.mark(store.layout.home))
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert _marker(holon_home, "a").exists()
    _clear(holon_home)
    store.update_state(lambda s: s.update({"status": "awake_idle"}))
    assert _marker(holon_home, "a").exists()


def _valid(home: Path) -> W.Validity:
    return W.Validity.now(home)


def test_merge_keeps_the_later_claim_and_needs_a_full_pass_when_in_doubt(
    holon_home: Path,
) -> None:
    v = _valid(holon_home)
    e_old = W.Entry(1, None, False, "old")
    e_new = W.Entry(2, 5.0, True, "new")
    # in doubt (no snapshot): only a full pass may write it
    assert not W.merge(holon_home, {"a": e_new}, v)
    assert W.merge(holon_home, {"a": e_new}, v, full=True)
    assert W.merge(holon_home, {"a": e_old}, v)  # sound now: a partial pass may merge
    got = W.load(holon_home, v)
    assert got is not None and W.entry(got["a"]) == e_new  # the older claim lost
    assert W.merge(holon_home, {"b": e_old}, v, agents=["b"])
    got = W.load(holon_home, v)
    assert got is not None and set(got) == {"b"}


def test_what_puts_the_index_in_doubt(holon_home: Path) -> None:
    v = _valid(holon_home)
    assert W.merge(holon_home, {"a": W.Entry(1, None, False, "")}, v, full=True)
    assert W.load(holon_home, v) is not None
    assert W.load(holon_home, v._replace(boot="another-boot")) is None
    assert W.load(holon_home, v._replace(version="0.0.0")) is None
    (holon_home / "config.yaml").write_text("runtime: {}\n")
    assert W.load(holon_home, _valid(holon_home)) is None  # config.yaml changed
    # a merge whose reads predate a config change writes nothing
    assert not W.merge(holon_home, {"a": W.Entry(2, None, False, "")}, v, full=True)
    W.snapshot_path(holon_home).write_text("{not json")
    assert W.load(holon_home, _valid(holon_home)) is None
    with pytest.raises(ValueError):
        W.read_raw(holon_home)
    W.snapshot_path(holon_home).write_text(json.dumps({"v": 99, "agents": {}}))
    assert W.load(holon_home, _valid(holon_home)) is None


def test_quiet_reads_only_sound_entries() -> None:
    now = 100.0
    assert W.quiet({"at": 1, "due": None, "run": False, "why": ""}, now)
    assert W.quiet({"at": 1, "due": 101.0, "run": False, "why": ""}, now)
    assert not W.quiet({"at": 1, "due": 100.0, "run": False, "why": ""}, now)  # due now
    assert not W.quiet({"at": 1, "due": None, "run": True, "why": ""}, now)
    assert not W.quiet({"at": "x", "due": None, "run": False}, now)
    assert not W.quiet({"due": None, "run": False}, now)
    assert not W.quiet(None, now)
    assert not W.quiet([], now)
