"""Admission: validation before anything is written, durable Maildir delivery, stopped agents."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from holon_cli.errors import NotFoundError, RejectedError, UsageError
from holon_cli.runtime import queue as q
from holon_cli.runtime.agents.lifecycle import create_agent, open_agent, set_lifecycle
from holon_cli.runtime.enqueue import MAX_BODY_BYTES, admit, make_body


def test_admit_delivers_a_normalized_envelope(holon_home: Path) -> None:
    env = admit("hello")
    assert env["id"].startswith("msg_") and env["agent_id"] == "main"
    assert env["body"] == {"type": "text", "text": "hello"}
    assert env["trust"] == "trusted_operator" and env["authority_class"] == "operator_instruction"
    path = holon_home / "agents" / "main" / ".holon" / "inbox" / "new" / f"{env['id']}.json"
    assert json.loads(path.read_text()) == env


def test_ids_are_unique_and_sortable() -> None:
    ids = [admit(f"m{i}")["id"] for i in range(50)]
    assert len(set(ids)) == 50 and ids == sorted(ids)
    store = open_agent(None)
    assert [p.name[:-5] for p in store.inbox.pending()] == ids


def test_json_body() -> None:
    env = admit('{"ref": "main", "n": [1, 2]}', json_body=True, origin="webhook:github")
    assert env["body"] == {"type": "json", "value": {"ref": "main", "n": [1, 2]}}
    assert env["kind"] == "webhook_event" and env["trust"] == "trusted_integration"


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"text": "{nope", "json_body": True}, "not valid JSON"),
        ({"text": "   \n"}, "empty"),
        ({"text": "x", "kind": "shout"}, "unknown message kind"),
        ({"text": "x", "priority": "urgent"}, "unknown priority"),
        ({"text": "x", "origin": "martian"}, "unknown origin"),
        ({"text": "x", "origin": "channel"}, "needs an id"),
        ({"text": "x" * (MAX_BODY_BYTES + 1)}, "larger than"),
    ],
)
def test_bad_input_is_rejected_before_anything_is_written(
    holon_home: Path, kwargs: dict, needle: str
) -> None:
    text = kwargs.pop("text")
    with pytest.raises(UsageError) as ei:
        admit(text, **kwargs)
    assert needle in ei.value.message and ei.value.exit_code == 2
    assert not holon_home.exists()  # not even the default agent was created


def test_unknown_agent_is_not_found_and_not_created(holon_home: Path) -> None:
    with pytest.raises(NotFoundError):
        admit("hi", agent_id="ghost")
    assert not (holon_home / "agents" / "ghost").exists()


def test_stopped_agent_rejects_and_nothing_is_queued() -> None:
    store = create_agent("w")
    admit("before", agent_id="w")
    set_lifecycle("w", "stop")
    with pytest.raises(RejectedError) as ei:
        admit("during", agent_id="w")
    assert ei.value.exit_code == 4 and ei.value.kind == "agent_stopped"
    assert "holon agent start" in (ei.value.hint or "")
    assert [p.name for p in store.inbox.pending()].__len__() == 1
    assert os.listdir(store.inbox.tmp) == []
    assert q.pending_count(store) == 1
    set_lifecycle("w", "start")
    admit("after", agent_id="w")
    assert q.pending_count(store) == 2


def test_unknown_work_item_is_not_found() -> None:
    with pytest.raises(NotFoundError):
        admit("bound", work_item_id="wi_missing")
    assert open_agent(None).inbox.pending() == []


def test_make_body() -> None:
    assert make_body("x") == {"type": "text", "text": "x"}
    assert make_body("null", json_body=True) == {"type": "json", "value": None}
    assert make_body("  keep spacing  ") == {"type": "text", "text": "  keep spacing  "}
