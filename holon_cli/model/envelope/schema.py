"""The envelope's shapes: ``Literal`` vocabularies and ``TypedDict``s for the
envelope, its head, origins, bodies, queue entries, the queue snapshot and
queue ledger records.

Zero runtime cost and the same JSON: these only type what the rest of the
code already writes. ``ENVELOPE_VERSION`` is the on-disk format version
(v2: snake_case); v1 records are upgraded at the read boundary
(:mod:`.validate`), so every ``Envelope`` in memory has this shape.
"""

from typing import Any, Literal, NotRequired, TypedDict

from holon_cli.model.tracecontext import TraceContext

ENVELOPE_VERSION = 2

MessageKind = Literal[
    "operator_prompt",
    "channel_event",
    "webhook_event",
    "callback_event",
    "timer_tick",
    "system_tick",
    "task_result",
    "task_status",
    "mcp_result",
    "control",
    "brief_ack",
    "brief_result",
    "internal_followup",
]
TrustLevel = Literal[
    "trusted_operator", "trusted_system", "trusted_integration", "untrusted_external"
]
AuthorityClass = Literal[
    "operator_instruction", "runtime_instruction", "integration_signal", "external_evidence"
]
Priority = Literal["interject", "next", "normal", "background"]
QueueStatus = Literal["queued", "dequeued", "processed", "aborted", "interrupted"]


class Origin(TypedDict, total=False):
    """``{"kind": ..., <id field>: ...}``; the id field depends on the kind."""

    kind: str
    actor_id: str
    channel_id: str
    sender_id: str
    source: str
    event_type: str
    descriptor_id: str
    timer_id: str
    subsystem: str
    task_id: str


class MessageBody(TypedDict, total=False):
    type: str  # text | json | brief
    text: str
    value: Any
    title: str
    attachments: list[dict[str, Any]]


class Envelope(TypedDict):
    v: int
    id: str
    agent_id: str
    created_at: str
    kind: str
    origin: Origin
    trust: str
    authority_class: str
    priority: str
    trigger_kind: str
    body: MessageBody
    delivery_surface: str
    admission_context: str
    source_refs: dict[str, str]
    work_item_id: NotRequired[str]
    task_id: NotRequired[str]
    correlation_id: NotRequired[str]
    causation_id: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]
    # the caller's W3C trace (model/tracecontext.py); optional in v2
    trace_context: NotRequired[TraceContext]


class EnvelopeHead(TypedDict, total=False):
    """An envelope without its body (what the queue snapshot keeps per entry)."""

    v: int
    id: str
    agent_id: str
    created_at: str
    kind: str
    origin: Origin
    trust: str
    authority_class: str
    priority: str
    trigger_kind: str
    delivery_surface: str
    admission_context: str
    source_refs: dict[str, str]
    work_item_id: str
    task_id: str
    correlation_id: str
    causation_id: str
    metadata: dict[str, Any]


class QueueEntry(TypedDict):
    """One unfinished message in ``state/queue.json``. The body is not here:
    it lives in ``inbox/cur/<id>.json`` and in the queue ledger at
    ``ledger_offset`` (see ``runtime/queue/``)."""

    seq: int
    message_id: str
    priority: str
    status: str
    attempts: int
    admitted_at: str | None
    ledger_offset: int | None
    head: EnvelopeHead
    interrupted: NotRequired[int]
    turn_id: NotRequired[str | None]
    dequeued_at: NotRequired[str | None]
    # filled in only on the entry a dequeue returns (never persisted)
    envelope: NotRequired[Envelope]


class AbortedMessage(TypedDict):
    """One of the newest aborted messages (``holon status``): why it stopped."""

    message_id: str
    reason: str  # max_attempts_exceeded | body_missing | operator_aborted | ...
    at: str | None
    kind: str | None
    attempts: int


class QueueSnapshot(TypedDict):
    v: int
    offset: int
    next_seq: int
    processed: int
    aborted: int
    entries: list[QueueEntry]
    recent_final: list[str]
    recent_aborted: NotRequired[list[AbortedMessage]]


class AdmittedRecord(TypedDict):
    """Queue ledger: a message entered the queue (v2: snake_case envelope)."""

    v: int
    op: Literal["admitted"]
    seq: int
    at: str
    message: Envelope


class StatusRecord(TypedDict):
    """Queue ledger: a status change of an admitted message."""

    v: int
    op: Literal["status"]
    message_id: str
    status: str
    at: str
    turn_id: NotRequired[str]
    reason: NotRequired[str]


# v1 (camelCase) -> v2 (snake_case) field names, top level and in origins
_V1_FIELDS = {
    "agentId": "agent_id",
    "createdAt": "created_at",
    "authorityClass": "authority_class",
    "triggerKind": "trigger_kind",
    "workItemId": "work_item_id",
    "taskId": "task_id",
    "sourceRefs": "source_refs",
    "deliverySurface": "delivery_surface",
    "admissionContext": "admission_context",
    "correlationId": "correlation_id",
    "causationId": "causation_id",
}
_V1_ORIGIN_FIELDS = {
    "actorId": "actor_id",
    "channelId": "channel_id",
    "senderId": "sender_id",
    "eventType": "event_type",
    "descriptorId": "descriptor_id",
    "timerId": "timer_id",
    "taskId": "task_id",
}
