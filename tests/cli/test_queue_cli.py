"""``holon queue list|requeue`` and ``holon tail`` right after ``holon enqueue``,
through the CLI (in-process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inprocess_cli import bind_runner as bind_runner  # autouse: holon() below runs in-process
from inprocess_cli import run as run_holon


def holon(*args: str) -> Any:
    """``holon ARGS``; the result has ``returncode``, ``stdout``, ``stderr``."""
    return run_holon(*args)


def data(res: Any) -> Any:
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)["data"]


def test_tail_shows_an_enqueued_message_at_once(holon_home: Path) -> None:
    mid = holon("enqueue", "hello").stdout.strip()
    res = holon("tail", "--jsonl", "-n", "5")
    events = [json.loads(x) for x in res.stdout.splitlines()]
    assert any(e["kind"] == "message_admitted" and e["message_id"] == mid for e in events)


def test_queue_list_and_requeue_of_a_message_lost_to_a_config_failure(
    holon_home: Path,
) -> None:
    mid = holon("enqueue", "important").stdout.strip()
    listed = data(holon("queue", "list", "--json"))
    assert [(m["message_id"], m["status"]) for m in listed["messages"]] == [(mid, "queued")]
    # abort it the way a failed turn does
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent("main")
    with store.turn_lock():
        entry = q.dequeue_next(store, "turn_x")
    assert entry is not None
    q.settle(store, mid, "aborted", reason="provider_failure")
    aborted = data(holon("queue", "list", "--status", "aborted", "--json"))["messages"]
    assert [m["message_id"] for m in aborted] == [mid]
    res = holon("queue", "requeue", mid, "--json")
    assert data(res) == {"agent_id": "main", "message_id": mid, "status": "queued"}
    again = holon("queue", "requeue", mid, "--json")
    assert again.returncode == 4
    assert json.loads(again.stdout)["error"]["kind"] == "not_requeueable"
    unknown = holon("queue", "requeue", "msg_nope", "--json")
    assert unknown.returncode == 3
    assert json.loads(unknown.stdout)["error"]["kind"] == "message_not_found"
    text = holon("queue", "list")
    assert mid in text.stdout and "queued" in text.stdout
    bad = holon("queue", "list", "--status", "weird")
    assert bad.returncode == 2
