"""Queue semantics: ingestion, priority order, crash idempotence, replay, snapshot consistency."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.store.agent_store import AgentStore


@pytest.fixture
def store() -> AgentStore:
    return open_agent(None)


def ingest_all(store: AgentStore) -> list[dict[str, Any]]:
    with store.lock():
        st = q.load(store)
        return q.ingest(store, st)


def take(store: AgentStore, turn: str = "turn_1") -> dict[str, Any] | None:
    with store.turn_lock():
        return q.dequeue_next(store, turn)


def drain(store: AgentStore) -> list[str]:
    order = []
    while (entry := take(store)) is not None:
        order.append(entry["envelope"]["body"]["text"])
        q.settle(store, entry["message_id"], "processed")
    return order


def queue_ops(store: AgentStore) -> list[dict[str, Any]]:
    return store.ledger("queue").records()


def test_ingest_moves_inbox_into_the_ledger_once(store: AgentStore) -> None:
    envs = [admit(f"m{i}", store=store) for i in range(3)]
    assert store.inbox.pending_count() == 3
    assert q.pending_count(store) == 3  # counted before ingestion too
    admitted = ingest_all(store)
    assert [e["id"] for e in admitted] == [e["id"] for e in envs]
    assert store.inbox.pending() == []
    # bodies of unfinished messages stay in cur/ (the snapshot keeps only heads)
    assert sorted(p.name for p in store.inbox.cur.iterdir()) == sorted(
        f"{e['id']}.json" for e in envs
    )
    snap = json.loads(store.layout.queue_file.read_text())
    assert all("envelope" not in e and "body" not in e["head"] for e in snap["entries"])
    ops = queue_ops(store)
    assert [(o["op"], o["seq"]) for o in ops] == [("admitted", 1), ("admitted", 2), ("admitted", 3)]
    assert ops[0]["message"] == envs[0]  # provenance preserved verbatim
    assert ingest_all(store) == []
    assert len(queue_ops(store)) == 3
    kinds = [e["kind"] for e in store.events.records()]
    assert kinds.count("message_admitted") == 3
    ev = [e for e in store.events.records() if e["kind"] == "message_admitted"][0]
    assert (
        ev["message_id"] == envs[0]["id"]
        and ev["trust"] == "trusted_operator"
        and ev["origin"] == {"kind": "operator"}
    )
    assert drain(store) == ["m0", "m1", "m2"]
    assert list(store.inbox.cur.iterdir()) == []  # settled: bodies retired


def test_priority_order_is_stable_within_a_band(store: AgentStore) -> None:
    plan = [
        ("bg1", "background"),
        ("n1", "normal"),
        ("x1", "next"),
        ("i1", "interject"),
        ("n2", "normal"),
        ("bg2", "background"),
        ("x2", "next"),
        ("i2", "interject"),
        ("n3", "normal"),
    ]
    for text, prio in plan:
        admit(text, priority=prio, store=store)
    assert drain(store) == ["i1", "i2", "x1", "x2", "n1", "n2", "n3", "bg1", "bg2"]
    assert q.load(store).processed == 9
    assert q.load(store).entries == {}


def test_later_interject_jumps_ahead_of_queued_work(store: AgentStore) -> None:
    for t in ("a", "b"):
        admit(t, store=store)
    first = take(store)
    assert first is not None
    q.settle(store, first["message_id"], "processed")
    admit("urgent", priority="interject", store=store)
    assert drain(store) == ["urgent", "b"]


def test_ingest_is_idempotent_after_a_crash_before_archive(store: AgentStore) -> None:
    """Crash between the ledger append and retiring the inbox file."""
    env = admit("once", store=store)
    with store.lock():
        st = q.load(store)
        rec = {
            "v": 1,
            "op": "admitted",
            "seq": st.next_seq,
            "at": "2025-01-01T00:00:00.000Z",
            "message": env,
        }
        store.ledger("queue").append(rec)  # ... and the process dies here
    assert [p.name for p in store.inbox.pending()] == [f"{env['id']}.json"]
    assert q.pending_count(store) == 1  # not double counted
    assert ingest_all(store) == []  # recognized by id, not admitted again
    assert store.inbox.pending() == []
    assert [o["op"] for o in queue_ops(store)] == ["admitted"]
    assert drain(store) == ["once"]


def test_ingest_is_idempotent_for_an_already_processed_message(store: AgentStore) -> None:
    env = admit("done", store=store)
    ingest_all(store)
    assert drain(store) == ["done"]
    # the same file shows up in new/ again (e.g. restored from a backup)
    store.inbox.deliver(env["id"], env)
    assert ingest_all(store) == []
    assert drain(store) == []


def test_unreadable_inbox_file_is_quarantined(store: AgentStore) -> None:
    store.inbox.ensure()
    (store.inbox.new / "msg_zzz.json").write_text("{torn")
    admit("fine", store=store)
    admitted = ingest_all(store)
    assert len(admitted) == 1 and "body" not in admitted[0]  # heads only
    assert drain(store) == ["fine"]
    assert (store.inbox.root / "quarantine" / "msg_zzz.json").exists()
    rejected = [e for e in store.events.records() if e["kind"] == "inbox_message_quarantined"]
    assert len(rejected) == 1 and "quarantine" in rejected[0]["data"]["path"]
    assert rejected[0]["data"]["file"] == "msg_zzz.json" and "JSON" in rejected[0]["data"]["reason"]


def test_recover_replays_an_interrupted_entry_exactly_once(store: AgentStore) -> None:
    admit("a", store=store)
    admit("b", store=store)
    with store.turn_lock():
        entry = q.dequeue_next(store, "turn_crashed")
    assert entry is not None and entry["envelope"]["body"]["text"] == "a"
    # the turn dies: the entry stays dequeued
    st = q.load(store)
    assert [e["message_id"] for e in st.in_flight()] == [entry["message_id"]]
    with store.lock(), store.turn_lock():
        st = q.load(store)
        replayed = q.recover(store, st)
        again = q.recover(store, st)
    assert [e["message_id"] for e in replayed] == [entry["message_id"]]
    assert again == []
    with store.lock(), store.turn_lock():
        assert q.recover(store, q.load(store)) == []  # also after reloading
    statuses = [o["status"] for o in queue_ops(store) if o["op"] == "status"]
    assert statuses == ["dequeued", "interrupted"]
    assert [e["kind"] for e in store.events.records()].count("message_replayed") == 1
    # it goes back to its original place, ahead of "b"
    assert drain(store) == ["a", "b"]


def test_replay_stops_after_max_attempts(store: AgentStore) -> None:
    env = admit("poison", store=store)
    admit("next", store=store)
    for attempt in range(1, q.MAX_ATTEMPTS + 1):
        entry = take(store, f"turn_{attempt}")
        assert entry is not None and entry["message_id"] == env["id"]
        assert entry["attempts"] == attempt
        # crash: nothing settles it; the next dequeue recovers first
    nxt = take(store, "turn_final")
    assert nxt is not None and nxt["envelope"]["body"]["text"] == "next"
    st = q.load(store)
    assert env["id"] not in st.entries and st.aborted == 1
    aborted = [o for o in queue_ops(store) if o.get("status") == "aborted"]
    assert len(aborted) == 1 and aborted[0]["reason"] == "max_attempts_exceeded"
    errors = [e for e in store.events.records() if e["kind"] == "runtime_error"]
    assert len(errors) == 1 and errors[0]["message_id"] == env["id"]


def test_settle_marks_final_status(store: AgentStore) -> None:
    admit("a", store=store)
    entry = take(store)
    assert entry is not None and entry["status"] == "dequeued"
    q.settle(store, entry["message_id"], "aborted", reason="operator")
    st = q.load(store)
    assert st.entries == {} and st.aborted == 1 and entry["message_id"] in st.recent_final
    assert take(store) is None


def test_nothing_queued() -> None:
    store = open_agent(None)
    assert take(store) is None
    assert q.pending_count(store) == 0


def _comparable(st: q.QueueState) -> dict[str, Any]:
    snap: dict[str, Any] = json.loads(json.dumps(st.to_snapshot()))
    keep = ("seq", "message_id", "priority", "status", "attempts", "interrupted", "turn_id")
    snap["entries"] = [{k: e.get(k) for k in keep} for e in snap["entries"]]
    return snap


def _busy_history(store: AgentStore) -> None:
    for i in range(5):
        admit(f"m{i}", priority=["normal", "next"][i % 2], store=store)
    ingest_all(store)
    e = take(store)
    assert e is not None
    q.settle(store, e["message_id"], "processed")
    take(store, "turn_open")  # left in flight


def test_snapshot_and_ledger_tail_agree_when_snapshot_is_stale(store: AgentStore) -> None:
    _busy_history(store)
    full = _comparable(q.load(store))
    snap_path: Path = store.layout.queue_file
    assert json.loads(snap_path.read_text())["offset"] == store.ledger("queue").size()
    # a crash after a ledger append but before the snapshot write: stale snapshot
    stale = json.loads(snap_path.read_text())
    with store.lock():
        st = q.load(store)
        e = st.pending()[0]
        q.set_status(store, st, e["message_id"], "dequeued", turn_id="t", save=False)
    assert json.loads(snap_path.read_text()) == stale
    rebuilt = q.load(store)
    assert rebuilt.entries[e["message_id"]]["status"] == "dequeued"
    assert rebuilt.offset == store.ledger("queue").size()
    assert full != _comparable(rebuilt)


@pytest.mark.parametrize("damage", ["missing", "behind"])
def test_load_matches_a_full_replay(store: AgentStore, damage: str) -> None:
    _busy_history(store)
    expected = _comparable(q.load(store))
    snap_path = store.layout.queue_file
    if damage == "missing":
        snap_path.unlink()
    else:  # an old (v1, body inline) snapshot: the tail after its offset is replayed
        snap = json.loads(snap_path.read_text())
        first_line = store.ledger("queue").path.read_bytes().split(b"\n")[0]
        snap.update(offset=len(first_line) + 1, next_seq=2, processed=0, aborted=0, recent_final=[])
        first = json.loads(first_line)
        snap["v"] = 1
        snap["entries"] = [
            {
                "seq": 1,
                "message_id": first["message"]["id"],
                "priority": first["message"]["priority"],
                "status": "queued",
                "attempts": 0,
                "admitted_at": first["at"],
                "envelope": first["message"],
            }
        ]
        snap_path.write_text(json.dumps(snap))
    got = _comparable(q.load(store))
    assert got["entries"] == expected["entries"]
    assert got["offset"] == expected["offset"] and got["next_seq"] == expected["next_seq"]
    assert got["processed"] == expected["processed"]


def test_torn_queue_ledger_tail_is_ignored_then_repaired(store: AgentStore) -> None:
    admit("a", store=store)
    ingest_all(store)
    with open(store.ledger("queue").path, "ab") as f:
        f.write(b'{"v":1,"op":"status","message_id":"msg_')
    st = q.load(store)
    assert len(st.pending()) == 1
    admit("b", store=store)
    assert drain(store) == ["a", "b"]
    assert store.ledger("queue").check() == []
