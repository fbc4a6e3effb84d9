"""Append-only JSONL ledgers: append/scan/tail/last, torn tails, corruption, versions."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from holon_cli.errors import CorruptStateError
from holon_cli.store.ledger import LEDGER_VERSION, Ledger


@pytest.fixture
def led(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger" / "events.jsonl", tmp_path / "locks" / "events.lock")


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


def _seq(last: dict | None) -> dict:
    return {"seq": (last["seq"] + 1) if last else 1}


# -- append / read ---------------------------------------------------------


def test_append_writes_one_versioned_line_per_record(led: Ledger) -> None:
    rec = led.append({"kind": "a"})
    led.append({"kind": "b", "v": 1})
    assert rec["v"] == LEDGER_VERSION
    raw = led.path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 2
    assert [json.loads(x) for x in raw.splitlines()] == [
        {"kind": "a", "v": 1},
        {"kind": "b", "v": 1},
    ]
    assert led.records() == [{"kind": "a", "v": 1}, {"kind": "b", "v": 1}]


def test_append_creates_missing_folders(led: Ledger) -> None:
    assert not led.path.parent.exists()
    led.append({"x": 1})
    assert led.path.is_file()
    assert led.lock_path.is_file()  # the lock file stays; it is released by closing


def test_append_callable_sees_last_record(led: Ledger) -> None:
    for _ in range(5):
        led.append(_seq)
    assert [r["seq"] for r in led.records()] == [1, 2, 3, 4, 5]


def test_sequence_stays_dense_across_ledger_handles(led: Ledger) -> None:
    """A second handle on the same file (another process) must not reuse a stale cache."""
    other = Ledger(led.path, led.lock_path)
    for i in range(6):
        (led if i % 2 else other).append(_seq)
    assert [r["seq"] for r in led.records()] == [1, 2, 3, 4, 5, 6]


def test_concurrent_appenders_never_interleave(led: Ledger) -> None:
    def worker() -> None:
        mine = Ledger(led.path, led.lock_path)
        for _ in range(40):
            mine.append(_seq)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r["seq"] for r in led.records()] == list(range(1, 161))
    assert led.check() == []


def test_scan_yields_line_numbers_and_end_offsets(led: Ledger) -> None:
    for i in range(3):
        led.append({"i": i})
    rows = list(led.scan(0))
    assert [r[0] for r in rows] == [1, 2, 3]
    assert rows[-1][1] == led.size()
    # resuming from an offset yields only what follows it
    recs, end = led.read_from(rows[0][1])
    assert [r["i"] for r in recs] == [1, 2]
    assert end == led.size()
    assert led.read_from(end) == ([], end)


def test_missing_and_empty_ledger(led: Ledger) -> None:
    assert led.records() == [] and led.tail(3) == [] and led.last() is None
    assert led.size() == 0 and led.check() == [] and not led.has_torn_tail()
    led.path.parent.mkdir(parents=True)
    led.path.write_bytes(b"")
    assert led.records() == [] and led.tail(3) == [] and led.last() is None
    assert list(led.scan(0)) == [] and led.check() == []
    led.append({"first": True})
    assert led.records() == [{"first": True, "v": 1}]


def test_tail_returns_newest_n_in_order(led: Ledger) -> None:
    for i in range(10):
        led.append({"i": i})
    assert [r["i"] for r in led.tail(3)] == [7, 8, 9]
    assert [r["i"] for r in led.tail(100)] == list(range(10))
    assert led.tail(0) == []
    assert led.last() == {"i": 9, "v": 1}


def test_tail_and_last_across_read_chunks(led: Ledger) -> None:
    """Records larger than the 64 KiB backwards-read chunk."""
    big = "x" * 70_000
    for i in range(4):
        led.append({"i": i, "pad": big})
    assert [r["i"] for r in led.tail(2)] == [2, 3]
    fresh = Ledger(led.path, led.lock_path)
    assert fresh.last()["i"] == 3
    fresh.append(_seq_from_i)
    assert fresh.last()["i"] == 4


def _seq_from_i(last: dict | None) -> dict:
    return {"i": (last["i"] + 1) if last else 0}


# -- torn tails -------------------------------------------------------------


def _tear(led: Ledger, fragment: bytes = b'{"v":1,"seq":99,"kind":"half') -> None:
    with open(led.path, "ab") as f:
        f.write(fragment)


def test_torn_tail_is_ignored_on_read(led: Ledger) -> None:
    led.append(_seq)
    led.append(_seq)
    _tear(led)
    assert [r["seq"] for r in led.records()] == [1, 2]
    assert [r["seq"] for r in led.tail(5)] == [1, 2]
    assert Ledger(led.path, led.lock_path).last()["seq"] == 2
    assert led.check() == []  # a torn tail is normal, not a problem
    assert led.has_torn_tail()


def test_torn_tail_is_repaired_before_the_next_append(led: Ledger) -> None:
    led.append(_seq)
    _tear(led)
    writer = Ledger(led.path, led.lock_path)  # a fresh process
    writer.append(_seq)
    lines = _lines(led.path)
    assert lines[-1] == b""  # ends with a newline
    assert [json.loads(x)["seq"] for x in lines[:-1]] == [1, 2]
    assert not led.has_torn_tail()
    assert led.check() == []
    # the fragment is kept aside for forensics, never glued onto a record
    assert b'"kind":"half' in Path(str(led.path) + ".torn").read_bytes()
    assert b"half" not in led.path.read_bytes()


def test_file_that_is_only_a_fragment(led: Ledger) -> None:
    led.path.parent.mkdir(parents=True)
    led.path.write_bytes(b'{"v":1,"se')
    assert led.records() == [] and led.last() is None and led.tail(1) == []
    led.append(_seq)
    assert led.path.read_bytes() == b'{"seq":1,"v":1}\n'


def test_torn_tail_after_large_records(led: Ledger) -> None:
    led.append({"pad": "y" * 100_000, "seq": 1})
    _tear(led, b'{"v":1,' + b"z" * 70_000)
    led.append(_seq)
    assert [r["seq"] for r in led.records()] == [1, 2]


# -- corruption and versions ---------------------------------------------------


def _write_lines(led: Ledger, *lines: bytes) -> None:
    led.path.parent.mkdir(parents=True, exist_ok=True)
    led.path.write_bytes(b"".join(ln + b"\n" for ln in lines))


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (b'{"v":1,"seq":', "not valid JSON"),
        (b"", "empty line"),
        (b"[1,2]", "not a JSON object"),
        (b'{"seq":2}', "format version"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_corrupt_middle_line_names_file_and_line(led: Ledger, bad: bytes, why: str) -> None:
    _write_lines(led, b'{"v":1,"seq":1}', bad, b'{"v":1,"seq":3}')
    with pytest.raises(CorruptStateError) as ei:
        led.records()
    err = ei.value
    assert f"{led.path}:2" in err.message
    assert why in err.message
    assert err.details["line"] == 2 and err.details["path"] == str(led.path)
    assert err.hint and "holon home check" in err.hint
    assert err.exit_code == 1
    problems = led.check()
    assert [(p.path, p.line) for p in problems] == [(str(led.path), 2)]
    assert why in problems[0].message


def test_corrupt_line_found_by_tail_names_byte_offset(led: Ledger) -> None:
    _write_lines(led, b'{"v":1,"seq":1}', b"{oops", b'{"v":1,"seq":3}')
    with pytest.raises(CorruptStateError) as ei:
        led.tail(2)
    assert str(led.path) in ei.value.message
    assert ei.value.details["offset"] == len(b'{"v":1,"seq":1}\n')


def test_newer_record_version_is_rejected(led: Ledger) -> None:
    _write_lines(led, b'{"v":1,"seq":1}', b'{"v":2,"seq":2}')
    with pytest.raises(CorruptStateError) as ei:
        led.records()
    assert "newer" in ei.value.message and f"{led.path}:2" in ei.value.message
    assert "upgrade" in (ei.value.hint or "")
    with pytest.raises(CorruptStateError):
        led.last()
    assert led.check()[0].line == 2
    # a reader that understands v2 accepts it
    assert len(Ledger(led.path, led.lock_path, max_version=2).records()) == 2


def test_append_after_corrupt_middle_does_not_hide_it(led: Ledger) -> None:
    _write_lines(led, b'{"v":1,"seq":1}', b"garbage", b'{"v":1,"seq":3}')
    led.append({"seq": 4})
    assert led.check()[0].line == 2


def test_tail_window_follows_appends_incrementally(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.jsonl", tmp_path / "l.lock")
    for i in range(5):
        led.append({"i": i})
    assert [r["i"] for r in led.tail(3)] == [2, 3, 4]
    led.append({"i": 5})
    other = Ledger(led.path, led.lock_path)  # another process appends too
    other.append({"i": 6})
    assert [r["i"] for r in led.tail(3)] == [4, 5, 6]
    with open(led.path, "ab") as f:  # a writer killed mid-append
        f.write(b'{"v":1,"i":')
    assert [r["i"] for r in led.tail(2)] == [5, 6]
    other.append({"i": 7})  # repairs the torn tail first
    assert [r["i"] for r in led.tail(2)] == [6, 7]
    assert [r["i"] for r in led.tail(1000)] == list(range(8))  # larger than the window: full read


# -- a complete last record without its final newline (issue 14 #5) ---------


def _drop_final_newline(led: Ledger) -> None:
    raw = led.path.read_bytes()
    assert raw.endswith(b"\n")
    led.path.write_bytes(raw[:-1])


@pytest.mark.parametrize("n", [1, 3])
def test_complete_last_record_without_newline_is_a_record(led: Ledger, n: int) -> None:
    for _ in range(n):
        led.append(_seq)
    _drop_final_newline(led)
    fresh = Ledger(led.path, led.lock_path)
    assert [r["seq"] for r in fresh.records()] == list(range(1, n + 1))
    assert [r["seq"] for r in fresh.tail(5)] == list(range(1, n + 1))
    assert fresh.last()["seq"] == n
    assert fresh.check() == [] and not fresh.has_torn_tail()
    # the next append finishes the line instead of moving the record aside
    fresh.append(_seq)
    assert [json.loads(x)["seq"] for x in _lines(led.path)[:-1]] == list(range(1, n + 2))
    assert not Path(str(led.path) + ".torn").exists()


def test_scan_from_the_end_of_a_newline_less_record_continues(led: Ledger) -> None:
    led.append(_seq)
    led.append(_seq)
    _drop_final_newline(led)
    recs, end = led.read_from(0)
    assert [r["seq"] for r in recs] == [1, 2] and end == led.size()
    Ledger(led.path, led.lock_path).append(_seq)  # adds the "\n", then record 3
    more, end2 = led.read_from(end)
    assert [r["seq"] for r in more] == [3] and end2 == led.size()


def test_read_at_returns_the_record_starting_there(led: Ledger) -> None:
    led.append(_seq)
    first_end = led.size()
    led.append(_seq)
    assert led.last_append_offset == first_end
    assert led.read_at(first_end)["seq"] == 2
    assert led.read_at(0)["seq"] == 1
    assert led.read_at(3) is None  # not the start of a line
    assert led.read_at(led.size()) is None
