"""Issue 31 item 21: resuming the event stream while events are appended.

The page route and the SSE stream call ``tail_events(since=cursor)``; it read
the last ``event_seq`` and then a tail window sized from it, so an append in
between shifted the window and dropped an event for good. Here one writer
appends while many readers page through, each checking that it saw every
event exactly once, in order.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.inspect import follow_events, tail_events
from holon_cli.store.agent_store import AgentStore

EVENTS = 400
READERS = 8


def _writer(store: AgentStore, n: int, go: threading.Event) -> None:
    go.wait()
    for i in range(n):
        # a few large events too: a tail read then needs more than one chunk
        store.emit("agent_state_changed", {"i": i, "pad": "x" * (70_000 if i % 97 == 0 else 10)})


def _page_reader(store: AgentStore, total: int, limit: int, seen: list[int]) -> None:
    cursor = 0
    while cursor < total:
        for ev in tail_events(store, since=cursor, limit=limit):
            seen.append(ev["event_seq"])
            cursor = ev["event_seq"]


def test_paging_readers_racing_a_writer_see_every_event_once() -> None:
    store = open_agent(None)
    base = store.events.last()
    start = base["event_seq"] if base else 0
    total = start + EVENTS
    go = threading.Event()
    seen: list[list[int]] = [[] for _ in range(READERS)]
    readers = [
        threading.Thread(
            target=_page_reader,
            args=(open_agent(None), total, (1, 2, 5, 100)[i % 4], seen[i]),
            daemon=True,
        )
        for i in range(READERS)
    ]
    writer = threading.Thread(target=_writer, args=(open_agent(None), EVENTS, go), daemon=True)
    for t in readers:
        t.start()
    writer.start()
    go.set()
    writer.join(60)
    for t in readers:
        t.join(60)
        assert not t.is_alive()
    want = list(range(1, total + 1))
    for got in seen:
        assert got == want, (
            f"missing {sorted(set(want) - set(got))[:5]}, dup {len(got) - len(set(got))}"
        )


def test_a_follower_started_mid_write_misses_nothing() -> None:
    store = open_agent(None)
    store.emit("agent_state_changed", {"i": -1})
    go = threading.Event()
    writer = threading.Thread(target=_writer, args=(open_agent(None), EVENTS, go), daemon=True)
    writer.start()
    go.set()
    got: list[int] = []
    followers = []
    for since in (0, 1, 1):
        it = follow_events(open_agent(None), since=since, poll=0.005)
        followers.append((since, it))
    for since, it in followers:
        got = [ev["event_seq"] for _, ev in zip(range(EVENTS + 1 - since), it, strict=False)]
        assert got == list(range(since + 1, EVENTS + 2))
    writer.join(60)


def test_resume_across_a_gap_in_event_seq() -> None:
    """After a cut file the numbers jump (they are never reused): a reader
    resuming before, inside or after the gap still gets what follows."""
    store = open_agent(None)  # agent_created is event 1
    for i in range(4):
        store.emit("agent_state_changed", {"i": i})
    # events 6..9 were lost from the file; the writer went on at 10
    for seq in (10, 11, 12):
        store.events.append(
            lambda last, seq=seq: {**(last or {}), "event_seq": seq, "id": f"evt_{seq}"}
        )
    assert [e["event_seq"] for e in tail_events(store, since=3)] == [4, 5, 10, 11, 12]
    assert [e["event_seq"] for e in tail_events(store, since=7)] == [10, 11, 12]
    assert [e["event_seq"] for e in tail_events(store, since=10, limit=1)] == [11]
    assert tail_events(store, since=12) == [] and tail_events(store, since=99) == []
    assert tail_events(store, since=0, limit=0) == []


def test_tail_follow_continues_right_after_what_it_showed(
    monkeypatch: pytest.MonkeyPatch, script_runner: Any
) -> None:
    """`holon tail --follow` printed the recent events, then read the last
    event_seq separately: one appended in between was never shown."""
    from holon_cli.runtime import inspect

    store = open_agent(None)
    real_tail = inspect.tail_events
    seen: dict[str, int] = {}

    def tail_then_append(*a: Any, **k: Any) -> list[dict[str, Any]]:
        out = real_tail(*a, **k)
        store.emit("agent_state_changed", {"racing": True})  # lands between the reads
        return out

    def follow(store_: Any, *, since: int, **k: Any) -> Iterator[dict[str, Any]]:
        seen["since"] = since
        return iter(())

    monkeypatch.setattr(inspect, "tail_events", tail_then_append)
    monkeypatch.setattr(inspect, "follow_events", follow)
    res = script_runner.run(["holon", "tail", "--follow"], print_result=False)
    assert res.returncode == 0, res.stderr
    assert seen["since"] == 1  # agent_created was shown; the racing event 2 comes next
