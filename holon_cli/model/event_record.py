"""One line of ``ledger/events.jsonl`` as the store reads it: light, so the
commands that append an event (``holon enqueue``) check the last one
without loading every payload type (:mod:`holon_cli.model.events`)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class EventRecord(TypedDict):
    """One line of ``ledger/events.jsonl`` (``AgentStore.emit``): the kind,
    its ``data`` (one of the payloads below), and the provenance copied from
    the message that caused it. ``kind`` is read as text: an event a newer
    or older holon wrote stays readable history."""

    v: int
    event_seq: int
    id: str
    at: str
    kind: str
    agent_id: str
    data: NotRequired[dict[str, Any] | None]
    message_id: NotRequired[str]
    turn_id: NotRequired[str]
    work_item_id: NotRequired[str]
    task_id: NotRequired[str]
    correlation_id: NotRequired[str]
    causation_id: NotRequired[str]
    origin: NotRequired[dict[str, str | None]]
    trust: NotRequired[str]
    authority_class: NotRequired[str]
    delivery_surface: NotRequired[str]
    admission_context: NotRequired[str]
    priority: NotRequired[str]
