"""Issue 31 item 27: ``Ledger.tail_previews`` reads the last records of a
ledger whose lines may be huge (a 1 MB message body in the transcript)
without parsing or holding any of them whole: small records come back as
:meth:`Ledger.tail` returns them, a large one as the fields its head holds."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest

from holon_cli.errors import CorruptStateError
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.store import ledger as L
from holon_cli.store import ledger_tail
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.ledger import Ledger
from holon_cli.store.ledger_tail import PREVIEW_KEY, scan_tail

MB = 1_000_000


@pytest.fixture
def led(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger" / "transcript.jsonl", tmp_path / "locks" / "t.lock")


def _message(i: int, size: int) -> dict:
    return {
        "kind": "message",
        "message_id": f"msg_{i}",
        "authority_class": "operator_instruction",
        "text": f"{i:05d} " + "x" * size,
    }


def test_small_records_come_back_as_tail_returns_them(led: Ledger) -> None:
    for i in range(30):
        led.append({"i": i, "pad": "p" * (i * 3000)})  # across read chunks
    fresh = Ledger(led.path, led.lock_path)
    assert fresh.tail_previews(7, max_record_bytes=200_000) == fresh.tail(7)
    assert fresh.tail_previews(100, max_record_bytes=200_000) == fresh.tail(100)
    assert fresh.tail_previews(0) == []


def test_a_large_record_is_a_preview_of_its_head(led: Ledger) -> None:
    led.append({"kind": "assistant_round", "text": "before"})
    led.append(_message(1, 2 * MB))
    led.append({"kind": "assistant_round", "text": "after"})
    recs = Ledger(led.path, led.lock_path).tail_previews(3, text_chars=500, max_bytes=5 * MB)
    assert [r["kind"] for r in recs] == ["assistant_round", "message", "assistant_round"]
    big = recs[1]
    assert big["message_id"] == "msg_1" and big["authority_class"] == "operator_instruction"
    assert big["text"] == "00001 " + "x" * 494
    assert big[PREVIEW_KEY] == len(json.dumps(_message(1, 2 * MB), separators=(",", ":"))) + 6
    assert PREVIEW_KEY not in recs[0] and recs[2]["text"] == "after"


def test_a_cut_inside_an_escape_or_a_multibyte_character_still_previews(led: Ledger) -> None:
    text = ('é\\"\n' * 40_000) + "tail"
    led.append({"kind": "message", "text": text})
    rec = Ledger(led.path, led.lock_path).tail_previews(1, max_record_bytes=1001, max_bytes=MB)[0]
    assert rec[PREVIEW_KEY] > 1001 and text.startswith(rec["text"]) and len(rec["text"]) > 100


def test_memory_is_bounded_by_the_window_not_the_bodies(led: Ledger) -> None:
    """Thirty 1 MB records: ``tail`` holds all of them, the previews a
    bounded head of each (a regression reading every body fails here)."""
    for i in range(30):
        led.append(_message(i, MB))
        led.append({"kind": "assistant_round", "text": "noted."})
    tracemalloc.start()
    try:
        recs = Ledger(led.path, led.lock_path).tail_previews(60, max_bytes=40 * MB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(recs) == 60 and [r["text"][:5] for r in recs[::2]] == [f"{i:05d}" for i in range(30)]
    assert peak < 6 * MB, f"peak {peak / MB:.1f} MB for previews of 30 MB of records"


def test_the_bytes_read_stop_at_the_budget(led: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default at most ``n * max_record_bytes`` bytes are read: the newest
    records whole or previewed, the rest (which no preview budget would
    show) left out, the one the stop fell in too."""
    for i in range(30):
        led.append({"kind": "assistant_round", "text": f"small {i}"})
    for i in range(10):
        led.append(_message(i, MB))
        led.append({"kind": "assistant_round", "text": f"noted {i}"})
    read = 0
    pread = os.pread

    def counted(fd: int, size: int, offset: int) -> bytes:
        nonlocal read
        data = pread(fd, size, offset)
        read += len(data)
        return data

    monkeypatch.setattr(os, "pread", counted)
    recs = Ledger(led.path, led.lock_path).tail_previews(40)  # budget 40 * 64 KiB
    assert read <= 40 * L.PREVIEW_RECORD_BYTES + ledger_tail.CHUNK_BYTES
    assert [r["text"][:7] for r in recs][-2:] == ["00009 x", "noted 9"]
    assert 4 <= len(recs) < 10 and all(
        r["kind"] != "assistant_round" or "noted" in r["text"] for r in recs
    )


def test_torn_tail_and_corrupt_lines_as_tail(led: Ledger) -> None:
    led.append({"seq": 1})
    led.append({"seq": 2, "text": "y" * 200_000})
    with open(led.path, "ab") as f:
        f.write(b'{"v":1,"seq":3,"kind":"half')
    recs = led.tail_previews(5)
    assert [r["seq"] for r in recs] == [1, 2] and recs[1][PREVIEW_KEY] > 200_000
    whole = led.path.read_bytes()
    whole = whole[: whole.rindex(b"\n") + 1]
    led.path.write_bytes(whole + b'{"v":1,"seq":4,"text":"' + b"z" * 300_000)
    assert [r["seq"] for r in Ledger(led.path, led.lock_path).tail_previews(5, max_bytes=MB)] == [
        1,
        2,
    ]
    led.path.write_bytes(b'{"v":1,"seq":1}\n{oops\n{"v":1,"seq":3}\n')
    with pytest.raises(CorruptStateError) as ei:
        Ledger(led.path, led.lock_path).tail_previews(2)
    assert ei.value.details["offset"] == len(b'{"v":1,"seq":1}\n')


def test_scan_tail_keeps_the_head_of_a_long_line(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"a" * 10 + b"\n" + b"b" * 1_000_000 + b"c\n" + b"d" * 3)
    lines, read = scan_tail(p, 5, 100, 2_000_000)
    assert read == p.stat().st_size
    assert [(ln.raw, ln.size, ln.offset, ln.terminated) for ln in lines] == [
        (b"a" * 10, 10, 0, True),
        (b"b" * 100, 1_000_001, 11, True),
        (b"ddd", 3, 1_000_013, False),
    ]
    assert scan_tail(tmp_path / "missing", 3, 100) == ([], 0)
    lines, read = scan_tail(p, 5, 100)  # the default budget, 500 bytes: the last line only
    assert [ln.raw for ln in lines] == [b"ddd"] and read <= 500


def test_previews_span_closed_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(L, "SEGMENT_BYTES", 300_000)
    store = open_agent(None)
    led = store.ledger("transcript")
    for i in range(12):
        led.append(_message(i, 200_000))
    assert led.closed_segments()
    recs = AgentStore(store.layout).ledger("transcript").tail_previews(10, max_bytes=4 * MB)
    assert [r["message_id"] for r in recs] == [f"msg_{i}" for i in range(2, 12)]
    assert all(PREVIEW_KEY in r for r in recs)


def test_a_close_copies_a_capped_tail_and_tail_stays_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Closing a segment of 1 MB records neither parses nor holds them: the
    copy of the closed tail keeps the newest lines within TAIL_COPY_BYTES,
    headed as capped; ``tail`` past it reads the segments (still exact), the
    previews never show the header."""
    monkeypatch.setattr(L, "SEGMENT_BYTES", 3 * MB)
    store = open_agent(None)
    led = store.ledger("transcript")
    for i in range(30):  # ten closes
        led.append(_message(i, MB))
    tracemalloc.start()
    try:
        led.close_segment()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the copy's lines, joined once, written once: a few times the cap, not 9 MB of records
    assert peak < 4 * L.TAIL_COPY_BYTES + 2 * MB, f"a close held {peak / MB:.1f} MB"
    monkeypatch.setattr(L, "TAIL_COPY_BYTES", int(2.5 * MB))
    led.append(_message(30, MB))
    led.close_segment()
    copy = sorted(led.segments_dir.glob("transcript.*.tail"))[-1]
    lines = copy.read_bytes().splitlines()
    assert json.loads(lines[0]) == {"v": 1, L.COPY_HEADER: True}
    assert [json.loads(x)["message_id"] for x in lines[1:]] == ["msg_29", "msg_30"]
    fresh = AgentStore(store.layout).ledger("transcript")
    assert [r["message_id"] for r in fresh.tail(5)] == [f"msg_{i}" for i in range(26, 31)]
    previews = AgentStore(store.layout).ledger("transcript").tail_previews(5, max_bytes=10 * MB)
    assert [r["message_id"] for r in previews] == ["msg_29", "msg_30"]


def test_an_uncapped_copy_has_no_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(L, "SEGMENT_BYTES", 3000)
    store = open_agent(None)
    led = store.ledger("transcript")
    for i in range(80):
        led.append({"kind": "note", "text": f"entry {i} " + "x" * 40})
    copy = sorted(led.segments_dir.glob("transcript.*.tail"))[-1]
    assert L.COPY_HEADER.encode() not in copy.read_bytes()
    fresh = AgentStore(store.layout).ledger("transcript")
    assert [r["text"].split()[1] for r in fresh.tail(60)] == [str(i) for i in range(20, 80)]
