"""Record checks (store/records.py): every record read is checked into its
type, and a damaged one is named by its field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon_cli.errors import CorruptStateError
from holon_cli.runtime.agents.lifecycle import open_agent
from holon_cli.store import fsio, records


@pytest.mark.parametrize(
    ("rec", "why"),
    [
        ({"v": 1, "op": "admitted", "seq": 1}, "no `message`"),
        ({"v": 1, "op": "admitted", "message": {"priority": "next"}}, "no `id`"),
        ({"v": 1, "op": "admitted", "seq": "1", "message": {"id": "m"}}, "`seq` must be int"),
        ({"v": 1, "op": "status", "status": "processed"}, "no `message_id`"),
        ({"v": 1, "op": "status", "message_id": "m", "status": "gone"}, "unknown status"),
    ],
)
def test_bad_queue_records(rec: dict[str, Any], why: str) -> None:
    reason = records.ledger_problem("queue", rec)
    assert reason and why in reason


def test_envelope_checks() -> None:
    # an inbox file (not yet admitted) must be admissible as a whole
    reason = records.envelope_problem({"id": "m", "priority": ["x"]}, "inbox message")
    assert reason and "priority" in reason
    assert records.envelope_problem({"id": "m", "body": "text"}) == (
        "message: `body` must be dict, got str"
    )
    # an admitted record's envelope only needs an id: the queue tolerates the rest
    rec = {"v": 1, "op": "admitted", "message": {"id": "m", "priority": ["x"], "body": None}}
    assert records.ledger_problem("queue", rec) is None


def test_good_records_pass() -> None:
    env = {"id": "m", "kind": "operator_prompt", "priority": "normal", "body": {"type": "text"}}
    q = "queue"
    assert records.ledger_problem(q, {"v": 2, "op": "admitted", "seq": 1, "message": env}) is None
    status = {"v": 2, "op": "status", "message_id": "m", "status": "aborted"}
    assert records.ledger_problem(q, status) is None
    assert records.ledger_problem(q, {"v": 2, "op": "future_op"}) is None  # readers pass it by
    event = {"v": 1, "event_seq": 1, "id": "evt_1", "at": "t", "kind": "x", "agent_id": "a"}
    assert records.ledger_problem("events", {**event, "data": {}}) is None
    assert records.ledger_problem("transcript", {"v": 1, "kind": "message"}) is None


def test_records_are_checked_into_their_type() -> None:
    """A record read back is the record's type: nested parts are checked too."""
    event = {"v": 1, "event_seq": 1, "id": "evt_1", "at": "t", "kind": "x", "agent_id": "a"}
    assert records.ledger_problem("events", {**event, "event_seq": True}) == (
        "event: `event_seq` must be int, got bool"
    )
    spend = {
        "v": 1,
        "at": "t",
        "ts": 1.0,
        "agent_id": "a",
        "turn_id": "t",
        "message_id": None,
        "work_item_id": None,
        "model_ref": None,
        "input_tokens": 1,
        "output_tokens": -1,
        "cost_usd": 0.0,
        "estimated": False,
    }
    reason = records.ledger_problem("spend", spend)
    assert reason and "`output_tokens` must be 0 or more" in reason
    timer = {"v": 1, "op": "created", "timer": {"id": "t1", "status": "sleeping"}}
    reason = records.ledger_problem("timers", timer)
    assert reason and reason.startswith("timer record timer")


def test_ledger_line_with_wrong_fields_names_file_and_line() -> None:
    store = open_agent(None)
    led = store.ledger("queue")
    with open(led.path, "a") as f:
        f.write(json.dumps({"v": 1, "op": "admitted", "seq": 1}) + "\n")
    with pytest.raises(CorruptStateError) as ei:
        led.records()
    assert f"{led.path}:1" in ei.value.message and "message" in ei.value.message
    problems = led.check()
    assert [(p.line, "message" in p.message) for p in problems] == [(1, True)]


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda r: r.pop("state"), "no `state`"),
        (lambda r: r["state"].update(status=3), "`status` must be str"),
        (lambda r: r["state"].update(status="dancing"), "unknown status"),
        (lambda r: r["identity"].pop("agent_id"), "no `agent_id`"),
    ],
)
def test_agent_record_schema(mutate: Any, why: str) -> None:
    store = open_agent(None)
    rec = json.loads(store.layout.agent_file.read_text())
    mutate(rec)
    store.layout.agent_file.write_text(json.dumps(rec))
    with pytest.raises(CorruptStateError) as ei:
        store.read_record()
    assert str(store.layout.agent_file) in ei.value.message and why in ei.value.message


def test_queue_snapshot_schema(tmp_path: Path) -> None:
    path = tmp_path / "state" / "queue.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"v": 1, "offset": "12", "entries": []}))
    with pytest.raises(CorruptStateError) as ei:
        fsio.read_snapshot(path)
    assert "`offset` must be int" in ei.value.message
    path.write_text(json.dumps({"v": 1, "offset": 0, "entries": [{"seq": 1}]}))
    with pytest.raises(CorruptStateError, match="message_id"):
        fsio.read_snapshot(path)
    good = {"v": 1, "offset": 0, "entries": [{"seq": 1, "message_id": "m", "status": "queued"}]}
    path.write_text(json.dumps(good))
    assert fsio.read_snapshot(path) == good
    other = tmp_path / "elsewhere" / "queue.json"  # only the state snapshot is checked
    other.parent.mkdir()
    other.write_text(json.dumps({"offset": "x"}))
    assert fsio.read_snapshot(other) == {"offset": "x"}
