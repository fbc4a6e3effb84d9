"""follow_events starts from a tail window and then follows appends."""

from __future__ import annotations

from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.inspect import follow_events


def test_follow_starts_after_since_and_sees_new_events() -> None:
    store = open_agent(None)
    for i in range(300):
        store.emit("probe", {"i": i})
    last = store.events.last()["event_seq"]
    it = follow_events(store, since=last - 3, poll=0.01)
    got = [next(it)["event_seq"] for _ in range(3)]
    assert got == [last - 2, last - 1, last]
    store.emit("probe", {"i": "new"})
    assert next(it)["data"] == {"i": "new"}


def test_follow_from_zero_yields_everything_in_order() -> None:
    store = open_agent(None)
    for i in range(50):
        store.emit("probe", {"i": i})
    it = follow_events(store, since=0, poll=0.01)
    seqs = [next(it)["event_seq"] for _ in range(store.events.last()["event_seq"])]
    assert seqs == list(range(1, len(seqs) + 1))


def test_follow_since_beyond_the_end_waits_for_newer_events() -> None:
    store = open_agent(None)
    store.emit("probe", {})
    last = store.events.last()["event_seq"]
    it = follow_events(store, since=last + 1, poll=0.01)
    store.emit("probe", {"skip": True})  # seq last+1: not after since
    store.emit("probe", {"take": True})
    assert next(it)["data"] == {"take": True}
