"""The envelope's shapes: ``Literal`` vocabularies and ``TypedDict``s for the
envelope, its head, origins, bodies, queue entries, the queue snapshot and
queue ledger records.

The same JSON: these type what the rest of the code already writes, and
the queue's files are checked into them where the store reads them
(``store/records.py``). ``ENVELOPE_VERSION`` is the on-disk format version
(v2: snake_case); v1 records are upgraded at the read boundary
(:mod:`.validate`), so every ``Envelope`` in memory has this shape. What a
queue record *carries* of an envelope is only an :class:`EnvelopeRef` until
it is upgraded: an older holon's envelope (camelCase, a priority or body
this one would refuse) is run or aborted by the queue, never a wedge.
"""

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from holon_cli.model.tracecontext import TraceContext
from holon_cli.model.typed import NONEMPTY, Rule

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


class TextBody(TypedDict):
    """A ``text`` body as admission checks it."""

    type: Literal["text"]
    text: str


class JsonBody(TypedDict):
    """A ``json`` body: any JSON ``value``."""

    type: Literal["json"]
    value: Any


class BriefBody(TypedDict):
    """A ``brief`` body: its text and an optional title."""

    type: Literal["brief"]
    text: str
    title: NotRequired[str]


# the spec's body shapes, told apart by ``type`` (``check_body``)
BodyShape = TextBody | JsonBody | BriefBody


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
    # set on the first message of an `enqueue --idempotency-key` when that is
    # returned instead of a new one (never stored)
    duplicate: NotRequired[bool]


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


class EnvelopeRef(TypedDict):
    """An envelope as any version stored it (v1 camelCase or v2): all a queue
    record guarantees is its id; :func:`upgrade_envelope` reads the rest."""

    id: Annotated[str, NONEMPTY]


class StoredQueueEntry(TypedDict):
    """One unfinished message as ``state/queue.json`` holds it. The body is
    not here: it lives in ``inbox/cur/<id>.json`` and in the queue ledger at
    ``ledger_offset`` (see ``runtime/queue/``). A snapshot an older holon
    wrote may lack the counters and the head (readers default them); a v1
    snapshot carries the whole ``envelope`` (as that version wrote it)."""

    seq: int
    message_id: str
    status: str
    priority: NotRequired[str]  # folded to ``normal`` when not a known priority
    attempts: NotRequired[int]
    admitted_at: NotRequired[str | None]
    ledger_offset: NotRequired[int | None]
    head: NotRequired[dict[str, Any]]  # as the envelope had it (``clean_head`` reads it)
    interrupted: NotRequired[int]
    turn_id: NotRequired[str | None]
    dequeued_at: NotRequired[str | None]
    envelope: NotRequired[EnvelopeRef]
    legacy_inline: NotRequired[bool]


class QueueEntry(TypedDict):
    """One unfinished message in memory (``runtime/queue/state.py``): a
    stored entry with its priority folded and, on the entry a dequeue returns
    (or one from a v1 snapshot), its whole ``envelope`` upgraded."""

    seq: int
    message_id: str
    status: str
    priority: str
    attempts: NotRequired[int]
    admitted_at: NotRequired[str | None]
    ledger_offset: NotRequired[int | None]
    head: NotRequired[EnvelopeHead]
    interrupted: NotRequired[int]
    turn_id: NotRequired[str | None]
    dequeued_at: NotRequired[str | None]
    envelope: NotRequired[Envelope]
    legacy_inline: NotRequired[bool]


class AbortedMessage(TypedDict):
    """One of the newest aborted messages (``holon status``): why it stopped."""

    message_id: str
    reason: str  # max_attempts_exceeded | body_missing | operator_aborted | ...
    at: str | None
    kind: str | None
    attempts: int


class QueueSnapshot(TypedDict):
    """``state/queue.json``: the fold of the queue ledger up to ``offset``
    (an older holon's snapshot may lack any counter: readers default it)."""

    v: NotRequired[int]
    offset: NotRequired[Annotated[int, Rule(min=0)]]
    next_seq: NotRequired[int]
    processed: NotRequired[int]
    aborted: NotRequired[int]
    entries: NotRequired[list[StoredQueueEntry]]
    recent_final: NotRequired[list[str]]
    recent_aborted: NotRequired[list[AbortedMessage]]


class AdmittedRecord(TypedDict):
    """Queue ledger: a message entered the queue (v2: snake_case envelope;
    ``requeued``: an aborted message put back by ``holon queue requeue``)."""

    v: int
    op: Literal["admitted"]
    seq: NotRequired[int]
    at: NotRequired[str]
    message: EnvelopeRef
    requeued: NotRequired[bool]
    rebuilt: NotRequired[bool]  # written again from the inbox after the ledger was cut


class StatusRecord(TypedDict):
    """Queue ledger: a status change of an admitted message (``counted``:
    false when an interrupted turn never reached the model)."""

    v: int
    op: Literal["status"]
    message_id: str
    status: QueueStatus
    at: NotRequired[str]
    turn_id: NotRequired[str | None]
    reason: NotRequired[str | None]
    counted: NotRequired[bool]


class OtherQueueRecord(TypedDict):
    """Queue ledger: any other op (readers pass it by)."""

    v: int
    op: NotRequired[str]


QueueRecord = AdmittedRecord | StatusRecord | OtherQueueRecord


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
