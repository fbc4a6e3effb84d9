"""Issue 29 item 1: segmented ledgers. The open ``events``/``transcript``
file is closed into ``segments/`` by size (or by ``close_segment``), closed
segments are compressed, and every reader sees one history across them;
event numbers continue; a kill at any step of a rotation loses nothing."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.home.checks import event_seq_findings
from holon_cli.runtime.inspect import follow_events, home_check, tail_events
from holon_cli.store import ledger as L
from holon_cli.store.agent_store import AgentStore


@pytest.fixture
def small_segments(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(L, "SEGMENT_BYTES", 3000)
    return 3000


def emit(store: AgentStore, n: int) -> list[int]:
    return [store.emit("agent_state_changed", {"i": i})["event_seq"] for i in range(n)]


def seqs(recs: list[dict]) -> list[int]:
    return [r["event_seq"] for r in recs]


def test_appends_close_segments_by_size_and_readers_see_one_history(
    small_segments: int,
) -> None:
    store = open_agent(None)
    first = store.events.last()["event_seq"]  # agent_created & co.
    got = emit(store, 120)
    segs = store.events.closed_segments()
    assert len(segs) >= 3 and all(p.name.endswith(".jsonl.gz") for p in segs)
    assert store.events.path.stat().st_size < small_segments + 400
    whole = list(range(1, got[-1] + 1))
    assert seqs(store.events.records()) == whole
    assert first < got[0]
    # a fresh handle (another process) reads the same across segments
    other = AgentStore(store.layout)
    assert seqs(other.events.tail(60)) == whole[-60:]
    assert seqs(other.events.records_after("event_seq", 10, 5)[0]) == [11, 12, 13, 14, 15]
    recs, offset = other.events.records_after("event_seq", 0)
    assert seqs(recs) == whole and offset == other.events.size()
    assert seqs(tail_events(other, since=whole[-3])) == whole[-2:]
    # the compressed segments hold exactly the records, one per line
    lines = b"".join(gzip.open(p).read() for p in segs).splitlines()
    assert [json.loads(x)["event_seq"] for x in lines] == whole[: len(lines)]


def test_numbers_continue_across_a_closed_segment_and_home_check_is_clean(
    small_segments: int,
) -> None:
    store = open_agent(None)
    before = emit(store, 5)
    seg = store.events.close_segment()
    assert seg is not None and seg.name.endswith(".gz")
    assert not store.events.path.exists()
    # status reads the last event from the closed segment while the open one is empty
    assert AgentStore(store.layout).events.last()["event_seq"] == before[-1]
    assert L.read_mark(store.events.mark_path) == {"size": 0, "high_water": before[-1]}
    report = home_check()
    assert report["ok"], report["problems"]
    after = emit(store, 2)
    assert after == [before[-1] + 1, before[-1] + 2]
    problems, notes = event_seq_findings(store.layout)
    assert problems == [] and notes == []
    assert home_check()["ok"]
    assert store.events.close_segment() is not None
    assert store.events.close_segment() is None  # nothing open: nothing to close


def test_transcript_is_segmented_and_its_tail_spans_segments(small_segments: int) -> None:
    store = open_agent(None)
    led = store.ledger("transcript")
    for i in range(80):
        led.append({"kind": "note", "text": f"entry {i} " + "x" * 40, "at": "2026-01-01T00:00:00Z"})
    assert led.closed_segments()
    texts = [r["text"].split()[1] for r in AgentStore(store.layout).ledger("transcript").tail(40)]
    assert texts == [str(i) for i in range(40, 80)]


def test_other_ledgers_are_never_segmented(small_segments: int) -> None:
    store = open_agent(None)
    led = store.ledger("queue")
    assert led.segment_bytes is None
    assert store.ledger("work_items").segment_bytes is None
    assert store.ledger("briefs").segment_bytes is None  # the memory index tails it by offset


def test_follow_continues_across_a_segment_close(small_segments: int) -> None:
    store = open_agent(None)
    start = emit(store, 3)[-1]
    got: list[int] = []
    it = follow_events(store, since=start, poll=0.01)
    emit(store, 2)
    got += [next(it)["event_seq"], next(it)["event_seq"]]
    store.events.close_segment()
    emit(store, 1)
    store.events.close_segment()
    emit(store, 2)
    got += [next(it)["event_seq"] for _ in range(3)]
    assert got == list(range(start + 1, start + 6))


def test_a_plain_and_a_compressed_copy_read_once(small_segments: int) -> None:
    """A kill after the .gz was renamed into place but before the plain file
    was removed leaves both: the .gz stands for the segment."""
    store = open_agent(None)
    emit(store, 4)
    seg = store.events.close_segment()
    assert seg is not None
    plain = seg.with_suffix("")
    plain.write_bytes(gzip.open(seg).read())
    assert store.events.closed_segments() == [seg]
    assert seqs(store.events.records()) == list(range(1, seqs(store.events.records())[-1] + 1))
    # a kill before the .gz was renamed: only the plain segment, read as is
    seg.unlink()
    assert store.events.closed_segments() == [plain]
    assert seqs(store.events.records())[-1] == store.events.last()["event_seq"]


def test_a_kill_between_mark_reset_and_rename_is_not_a_cut(small_segments: int) -> None:
    store = open_agent(None)
    emit(store, 4)
    high = store.events.last()["event_seq"]
    L.write_mark(store.events.mark_path, 0, high)  # the first step of a close, then the kill
    assert home_check()["ok"]
    assert emit(store, 1) == [high + 1]


class _Killed(BaseException):
    pass


def _kill_at(monkeypatch: pytest.MonkeyPatch, target: object, name: str, when: Any) -> None:
    real = getattr(target, name)

    def dying(*args: Any, **kw: Any) -> Any:
        if when(*args):
            raise _Killed
        return real(*args, **kw)

    monkeypatch.setattr(target, name, dying)


def test_a_kill_before_the_rename_of_a_close_checks_clean_and_duplicates_nothing(
    small_segments: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the close's small files but before its rename: the
    records are all still in the open file, so no segment is missing, repair
    rebuilds nothing, and the next close numbers the segment as if nothing
    happened."""
    from holon_cli.runtime.home.repair import repair_home

    store = open_agent(None)
    emit(store, 4)
    store.events.close_segment()
    emit(store, 4)
    before = len(store.events.records())
    with monkeypatch.context() as m:
        _kill_at(m, L.os, "rename", lambda src, dst: str(dst).endswith(".jsonl"))
        with pytest.raises(_Killed):
            store.events.close_segment()
    report = home_check()
    assert report["ok"], report["problems"]
    repair_home()
    store = AgentStore(open_agent(None).layout)
    got = seqs(store.events.records())
    assert got == sorted(set(got)) and len(got) == before
    emit(store, 1)
    store.events.close_segment()
    assert len(store.events.closed_segments()) == 2
    assert seqs(store.events.tail(9)) == sorted(set(seqs(store.events.records())))[-9:]
    assert home_check()["ok"]


def test_a_copy_left_by_an_older_close_killed_before_its_rename_is_no_gap(
    small_segments: int,
) -> None:
    """A home written by a version that copied the tail before the rename:
    a copy numbered above every segment whose records the open file still
    holds is an interrupted close, not a deleted segment."""
    store = open_agent(None)
    emit(store, 4)
    seg = store.events.close_segment()
    assert seg is not None
    emit(store, 3)
    seg_dir = store.events.segments_dir
    (copy,) = seg_dir.glob("events.*.tail")
    n = L.segment_number(seg.name, "events") or 0
    # the old order: the next copy written (the open file's records), then the kill
    copy.unlink()
    L.tail_path(seg_dir, "events", n + 1).write_bytes(store.events.path.read_bytes())
    assert home_check()["ok"]
    L.tail_path(seg_dir, "events", n + 1).write_bytes(b'{"v":1,"event_seq":999}\n')
    assert not home_check()["ok"]  # a copy the open file does not hold: a deleted segment


def test_a_kill_after_the_rename_before_the_copy_reads_one_history(
    small_segments: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_agent(None)
    emit(store, 4)
    store.events.close_segment()
    emit(store, 4)
    before = len(store.events.records())
    with monkeypatch.context() as m:
        import holon_cli.store.fsio as fsio

        _kill_at(m, fsio, "atomic_write_bytes", lambda path, data: str(path).endswith(".tail"))
        with pytest.raises(_Killed):
            store.events.close_segment()
    assert home_check()["ok"]
    store = AgentStore(open_agent(None).layout)
    assert seqs(store.events.tail(8)) == seqs(store.events.records())[-8:]
    emit(store, 2)
    store.events.close_segment()
    got = seqs(store.events.records())
    assert got == sorted(set(got)) and len(got) == before + 2
    assert home_check()["ok"]


def test_a_damaged_line_in_a_closed_segment_names_the_segment(small_segments: int) -> None:
    store = open_agent(None)
    emit(store, 3)
    seg = store.events.close_segment()
    assert seg is not None
    data = gzip.open(seg).read().replace(b'"event_seq":2,', b'"event_seq":2,,', 1)
    with gzip.open(seg, "wb") as f:
        f.write(data)
    with pytest.raises(Exception) as exc:
        store.events.records()
    assert str(seg) in str(exc.value)
    recs, problems = store.events.records_skipping_damaged()
    assert [p.path for p in problems] == [str(seg)] and 2 not in seqs(recs)


APPENDER = textwrap.dedent(
    """
    import sys
    from holon_cli.store import ledger as L
    L.SEGMENT_BYTES = 1500
    from holon_cli.runtime.agents.lifecycle import open_agent
    store = open_agent(None)
    while True:
        ev = store.emit("agent_state_changed", {"pad": "y" * 60})
        sys.stdout.write(f"{ev['event_seq']}\\n")
        sys.stdout.flush()
    """
)


@pytest.mark.slow
def test_sigkill_during_rotations_loses_no_acknowledged_event(holon_home: Path) -> None:
    """A real appender closing (and compressing) a segment every ~15 events,
    SIGKILLed at varying moments, six times over: every event it acknowledged
    is read back once, in order, and the home checks clean."""
    open_agent(None)
    acked: list[int] = []
    for i in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", APPENDER],
            stdout=subprocess.PIPE,
            env={**os.environ, "HOLON_HOME": str(holon_home)},
        )
        time.sleep(0.3 + 0.07 * i)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        acked += [int(x) for x in out.split()]
    store = AgentStore(open_agent(None).layout)
    got = seqs(store.events.records())
    assert got == sorted(set(got))  # increasing, no duplicates
    assert set(acked) <= set(got)
    assert len(store.events.closed_segments()) > 6
    report = home_check()
    assert report["ok"], report["problems"]


def test_a_recent_window_after_a_close_reads_no_compressed_segment(
    small_segments: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn looks at the last 40-200 records every round: right after a
    close (serve's daily pass) that must not cost a decompression."""
    store = open_agent(None)
    emit(store, 300)
    store.events.close_segment()
    whole = seqs(store.events.records())

    def no_gzip(*_a: object, **_k: object) -> None:
        raise AssertionError("a compressed segment was read")

    monkeypatch.setattr(gzip, "open", no_gzip)
    fresh = AgentStore(store.layout)
    assert seqs(fresh.events.tail(200)) == whole[-200:]
    assert fresh.events.last()["event_seq"] == whole[-1]
    assert fresh.events.records_after("event_seq", whole[-1])[0] == []


def test_a_close_after_a_writer_killed_before_its_mark_reuses_no_number(
    small_segments: int,
) -> None:
    """A writer killed between its record and its mark leaves the mark one
    behind; the close that follows must still number above the record."""
    store = open_agent(None)
    emit(store, 5)
    high = store.events.last()["event_seq"]
    L.write_mark(store.events.mark_path, store.events.size(), high - 1)
    store.events.close_segment()
    assert emit(store, 1) == [high + 1]


def test_home_check_reads_closed_segments_and_names_a_damaged_one(small_segments: int) -> None:
    store = open_agent(None)
    emit(store, 5)
    seg = store.events.close_segment()
    assert seg is not None
    n = len(store.events.records())
    assert home_check()["checked"]["records"] >= n
    seg.write_bytes(seg.read_bytes()[:-20])  # a cut .gz
    report = home_check()
    (p,) = [p for p in report["problems"] if p["path"] == str(seg)]
    assert "cannot be read" in p["message"]


def test_gc_finishes_a_compression_a_kill_interrupted(small_segments: int) -> None:
    from holon_cli.runtime.home.gc import gc_home

    store = open_agent(None)
    emit(store, 5)
    seg = store.events.close_segment()
    assert seg is not None
    plain = seg.with_suffix("")
    plain.write_bytes(gzip.open(seg).read())
    seg.unlink()  # killed before the .gz was renamed into place
    leftover = store.events.segments_dir / f".{plain.name}.999999999.tmp"
    leftover.write_bytes(b"partial")
    gc_home()
    assert not plain.exists() and seg.exists() and not leftover.exists()
