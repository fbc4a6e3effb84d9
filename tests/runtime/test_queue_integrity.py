"""Queue integrity: a truncated or emptied queue ledger is detected loudly and
rebuilt from the snapshot and the inbox (issue 14 #5); bodies stay out of the
snapshot (issue 14 #8); operator list/requeue (issue 8 #1b); immediate
ingestion on enqueue (issue 8 #20)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from holon_cli.errors import NotFoundError, RejectedError
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.inspect import home_check, tail_events
from holon_cli.store.agent_store import AgentStore


@pytest.fixture
def store() -> AgentStore:
    return open_agent(None)


def ingest(store: AgentStore) -> list[Any]:
    with store.lock():
        return list(q.ingest(store, q.load(store)))


def take(store: AgentStore, turn: str = "turn_t") -> Any:
    with store.turn_lock():
        return q.dequeue_next(store, turn)


def drain(store: AgentStore) -> list[str]:
    out = []
    while (e := take(store)) is not None:
        out.append(e["envelope"]["body"]["text"])
        q.settle(store, e["message_id"], "processed")
    return out


@pytest.mark.parametrize("how", ["emptied", "truncated", "replaced"])
def test_truncated_queue_ledger_is_rebuilt_not_forgotten(
    store: AgentStore, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(4):
        admit(f"m{i}", store=store)
    ingest(store)
    first = take(store)
    q.settle(store, first["message_id"], "processed")  # m0 done; m1..m3 queued
    led = store.ledger("queue").path
    raw = led.read_bytes()
    if how == "emptied":
        led.write_bytes(b"")
    elif how == "truncated":
        led.write_bytes(raw[: len(raw) // 3].rsplit(b"\n", 1)[0] + b"\n")
    else:
        led.unlink()
    # loud: home check fails, naming the ledger
    report = home_check()
    assert not report["ok"]
    assert any("truncated" in p["message"] and p["path"] == str(led) for p in report["problems"])
    # loud: a read-only load warns on stderr
    with caplog.at_level(logging.WARNING, logger="holon.queue"):
        st = q.load(store)
    assert st.truncated is not None and "truncated" in caplog.text
    assert q.pending_count(store, st) == 3  # not silently zero
    # a late arrival is ingested as well
    admit("late", store=store)
    assert drain(store) == ["m1", "m2", "m3", "late"]
    [ev] = [e for e in store.events.records() if e["kind"] == "queue_ledger_truncated"]
    assert len(ev["data"]["restored_message_ids"]) == 3 and ev["data"]["lost_message_ids"] == []
    assert home_check()["ok"]


def test_snapshot_holds_no_bodies_and_a_turn_reads_one(store: AgentStore) -> None:
    big = "x" * 200_000
    for i in range(5):
        admit(f"{i}:{big}", store=store)
    ingest(store)
    snap = store.layout.queue_file.read_bytes()
    assert len(snap) < 20_000, len(snap)  # five 200 kB bodies would be > 1 MB
    for e in json.loads(snap)["entries"]:
        assert "envelope" not in e and "body" not in e["head"]
        assert isinstance(e["ledger_offset"], int)
    entry = take(store)
    assert entry["envelope"]["body"]["text"].startswith("0:")


def test_body_comes_from_the_ledger_when_the_cur_copy_is_gone(store: AgentStore) -> None:
    env = admit("only in the ledger", store=store)
    ingest(store)
    (store.inbox.cur / f"{env['id']}.json").unlink()
    entry = take(store)
    assert entry["envelope"]["body"]["text"] == "only in the ledger"


def test_v1_snapshot_with_inline_bodies_still_runs(store: AgentStore) -> None:
    env = admit("from an older holon", store=store)
    ingest(store)
    snap = json.loads(store.layout.queue_file.read_text())
    [entry] = snap["entries"]
    v1_env = {"agentId": "main", "createdAt": env["created_at"], **dict(env)}
    for k in ("agent_id", "created_at", "v"):
        v1_env.pop(k)
    snap["v"] = 1
    snap["entries"] = [
        {
            k: entry[k]
            for k in ("seq", "message_id", "priority", "status", "attempts", "admitted_at")
        }
        | {"envelope": v1_env}
    ]
    store.layout.queue_file.write_text(json.dumps(snap))
    (store.inbox.cur / f"{env['id']}.json").unlink()
    got = take(store)
    assert got["envelope"]["body"]["text"] == "from an older holon"
    assert got["envelope"]["agent_id"] == "main"


def test_requeue_readmits_an_aborted_message(store: AgentStore) -> None:
    env = admit("try again", store=store)
    e = take(store)
    q.settle(store, e["message_id"], "aborted", reason="provider_failure")
    assert take(store) is None
    [listed] = q.list_messages(store)
    assert listed["message_id"] == env["id"] and listed["status"] == "aborted"
    assert listed["reason"] == "provider_failure"
    q.requeue(store, env["id"])
    assert [m["status"] for m in q.list_messages(store, status="all")] == ["queued"]
    again = take(store)
    assert again["envelope"]["body"]["text"] == "try again" and again["attempts"] == 1
    q.settle(store, again["message_id"], "processed")
    assert q.list_messages(store, status="processed")[0]["message_id"] == env["id"]
    with pytest.raises(RejectedError):  # processed: nothing to requeue
        q.requeue(store, env["id"])
    with pytest.raises(NotFoundError):
        q.requeue(store, "msg_unknown")
    admit("waiting", store=store)
    ingest(store)
    [queued] = q.list_messages(store, status="queued")
    with pytest.raises(RejectedError):
        q.requeue(store, queued["message_id"])


def test_replay_limit_abort_can_be_requeued(store: AgentStore) -> None:
    env = admit("crashy", store=store)
    for i in range(q.MAX_ATTEMPTS):
        assert take(store, f"turn_{i}") is not None  # never settled: a crash
    assert take(store) is None  # aborted after MAX_ATTEMPTS
    assert [m["status"] for m in q.list_messages(store, status="aborted")] == ["aborted"]
    q.requeue(store, env["id"])
    assert take(store)["envelope"]["body"]["text"] == "crashy"


def test_enqueue_ingests_at_once_when_the_agent_is_free(store: AgentStore) -> None:
    env = admit("visible now", store=store, ingest_now=True)
    kinds = [(e["kind"], e.get("message_id")) for e in tail_events(store, limit=3)]
    assert ("message_admitted", env["id"]) in kinds
    assert store.inbox.pending() == []


def test_enqueue_leaves_the_file_when_the_agent_is_busy(store: AgentStore) -> None:
    with store.lock():  # a turn or tick holds the agent lock
        env = admit("later", store=store, ingest_now=True)
    assert [p.name for p in store.inbox.pending()] == [f"{env['id']}.json"]
    assert not any(e["kind"] == "message_admitted" for e in store.events.records())
    assert [e["id"] for e in q.try_ingest(store) or []] == [env["id"]]
    assert store.inbox.pending() == []


def test_follow_ingests_an_arrival_left_in_the_maildir(store: AgentStore) -> None:
    from holon_cli.runtime.inspect import follow_events

    last = store.events.last()
    since = last["event_seq"] if last else 0
    with store.lock():  # busy when it arrived: enqueue left it in new/
        env = admit("arrived while busy", store=store, ingest_now=True)
    assert store.inbox.pending()
    polls = iter(range(50))
    gen = follow_events(store, since=since, poll=0.01, stop=lambda: next(polls, None) is None)
    first = next(gen, None)
    assert first is not None, "tail -f never showed the arrival"
    assert first["kind"] == "message_admitted" and first["message_id"] == env["id"]
    gen.close()


def test_queue_ledger_and_snapshot_both_lost_still_keeps_the_bodies(store: AgentStore) -> None:
    for i in range(3):
        admit(f"m{i}", store=store)
    ingest(store)
    store.ledger("queue").path.unlink()
    store.layout.queue_file.unlink()
    admit("m3", store=store)
    assert drain(store) == ["m0", "m1", "m2", "m3"]
    [ev] = [e for e in store.events.records() if e["kind"] == "queue_rebuilt_from_inbox"]
    assert len(ev["data"]["restored_message_ids"]) == 3


def test_leftover_body_of_a_settled_message_is_removed(store: AgentStore) -> None:
    env = admit("done", store=store)
    ingest(store)
    body = (store.inbox.cur / f"{env['id']}.json").read_bytes()
    assert drain(store) == ["done"]
    (store.inbox.cur / f"{env['id']}.json").write_bytes(body)  # killed before the unlink
    ingest(store)
    assert list(store.inbox.cur.iterdir()) == []
    assert drain(store) == []
