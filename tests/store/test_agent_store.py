"""AgentStore: events with strictly increasing event_seq and provenance, record snapshots."""

from __future__ import annotations

import pytest

from holon_cli.errors import CorruptStateError
from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.layout import HomeLayout


@pytest.fixture
def store() -> AgentStore:
    return create_agent("ops")


def test_emit_assigns_dense_event_seq(store: AgentStore) -> None:
    first = store.events.last()
    assert first is not None and first["kind"] == "agent_created" and first["event_seq"] == 1
    for i in range(3):
        store.emit("custom", {"i": i})
    # another handle (another process) continues the sequence
    other = AgentStore(HomeLayout.current().agent("ops"))
    other.emit("custom", {"i": 3})
    recs = store.events.records()
    assert [r["event_seq"] for r in recs] == [1, 2, 3, 4, 5]
    assert all(r["v"] == 1 and r["agent_id"] == "ops" and r["id"].startswith("evt_") for r in recs)


def test_emit_copies_message_provenance(store: AgentStore) -> None:
    msg = {
        "id": "msg_1",
        "origin": {"kind": "channel", "channel_id": "slack"},
        "trust": "untrusted_external",
        "authority_class": "external_evidence",
        "priority": "next",
        "task_id": "tsk_1",
        "delivery_surface": "cli_prompt",
        "admission_context": "local_process",
        "work_item_id": None,
    }
    ev = store.emit("message_admitted", {"x": 1}, message=msg, turn_id="trn_1")
    assert ev["message_id"] == "msg_1"
    assert ev["origin"] == {"kind": "channel", "channel_id": "slack"}
    assert ev["trust"] == "untrusted_external" and ev["authority_class"] == "external_evidence"
    assert ev["priority"] == "next" and ev["task_id"] == "tsk_1" and ev["turn_id"] == "trn_1"
    assert "work_item_id" not in ev  # None values are not recorded
    assert ev["data"] == {"x": 1}


def test_update_state_round_trips(store: AgentStore) -> None:
    store.update_state(lambda s: s.update(status="asleep"))
    assert store.read_record()["state"]["status"] == "asleep"


def test_missing_record_is_corrupt_state(store: AgentStore) -> None:
    store.layout.agent_file.unlink()
    with pytest.raises(CorruptStateError, match="agent record missing"):
        store.read_record()
