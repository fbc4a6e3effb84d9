"""The message envelope of the runtime spec and its admission policy.

Everything that may influence an agent normalizes to one envelope. Trust and
authority are derived from the origin at admission, never taken from a
caller; kind and origin default from each other when only one is given, and
a kind that does not belong to its origin is refused (public-ingress policy).

On disk and on the wire the envelope is snake_case and carries ``v``
(``ENVELOPE_VERSION``). Version 1 records (the spec's camelCase field names:
``agentId``, ``createdAt``, ``authorityClass``, ...) are upgraded at the read
boundary by :func:`upgrade_envelope`, so the rest of the code sees one shape.
"""

from __future__ import annotations

import re
from typing import Any, Literal, NotRequired, TypedDict, cast

from holon_cli.errors import UsageError

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
    ``ledger_offset`` (see ``runtime/queue.py``)."""

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


class QueueSnapshot(TypedDict):
    v: int
    offset: int
    next_seq: int
    processed: int
    aborted: int
    entries: list[QueueEntry]
    recent_final: list[str]


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


MESSAGE_KINDS: tuple[str, ...] = (
    "operator_prompt",
    "channel_event",
    "webhook_event",
    "callback_event",
    "timer_tick",
    "system_tick",
    "task_result",
    "task_status",
    "control",
    "brief_ack",
    "brief_result",
    "internal_followup",
)

# origin kind -> the field that names its source
ORIGIN_KINDS: dict[str, str] = {
    "operator": "actor_id",
    "channel": "channel_id",
    "webhook": "source",
    "callback": "descriptor_id",
    "timer": "timer_id",
    "system": "subsystem",
    "task": "task_id",
}
ORIGIN_REQUIRES_ID = {"channel", "webhook", "callback", "timer", "system", "task"}
# every field an origin object may carry, per kind (spec: Origins)
ORIGIN_FIELDS: dict[str, tuple[str, ...]] = {
    "operator": ("actor_id",),
    "channel": ("channel_id", "sender_id"),
    "webhook": ("source", "event_type"),
    "callback": ("descriptor_id", "source"),
    "timer": ("timer_id",),
    "system": ("subsystem",),
    "task": ("task_id",),
}
# origin ids are printed into prompts and headers: a strict charset keeps
# them from forging structure (no spaces, brackets, quotes or newlines)
ORIGIN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/+#=-]{0,127}")
ORIGIN_ID_CHARSET = (
    "letters, digits and _ . : @ / + # = - (at most 128, starting with a letter or digit)"
)

PRIORITIES: tuple[str, ...] = ("interject", "next", "normal", "background")
PRIORITY_RANK = {p: i for i, p in enumerate(PRIORITIES)}

TRUST_BY_ORIGIN = {
    "operator": "trusted_operator",
    "system": "trusted_system",
    "task": "trusted_system",
    "timer": "trusted_system",
    "callback": "trusted_integration",
    "webhook": "trusted_integration",
    "channel": "untrusted_external",
}

AUTHORITY_BY_ORIGIN = {
    "operator": "operator_instruction",
    "system": "runtime_instruction",
    "task": "runtime_instruction",
    "timer": "runtime_instruction",
    "callback": "integration_signal",
    "webhook": "integration_signal",
    "channel": "external_evidence",
}

TRIGGER_BY_KIND = {
    "operator_prompt": "operator_input",
    "channel_event": "external_event",
    "webhook_event": "external_event",
    "callback_event": "external_event",
    "timer_tick": "timer_fire",
    "system_tick": "system_tick",
    "task_result": "task_result",
    "task_status": "task_status",
    "control": "control",
    "brief_ack": "brief_ack",
    "brief_result": "brief_result",
    "internal_followup": "internal_followup",
}

DEFAULT_KIND_BY_ORIGIN = {
    "operator": "operator_prompt",
    "channel": "channel_event",
    "webhook": "webhook_event",
    "callback": "callback_event",
    "timer": "timer_tick",
    "system": "internal_followup",
    "task": "task_result",
}

# public-ingress policy: the origins each kind may come from. A channel
# cannot send an operator prompt; only the runtime sends ticks and results.
ORIGINS_BY_KIND: dict[str, tuple[str, ...]] = {
    "operator_prompt": ("operator",),
    "channel_event": ("channel",),
    "webhook_event": ("webhook",),
    "callback_event": ("callback",),
    "timer_tick": ("timer",),
    "system_tick": ("system", "callback", "timer"),
    "task_result": ("task",),
    "task_status": ("task",),
    "control": ("operator", "system"),
    "brief_ack": ("operator", "system"),
    "brief_result": ("operator", "system"),
    "internal_followup": ("system",),
}

DEFAULT_ORIGIN_BY_KIND = {
    "operator_prompt": "operator",
    "channel_event": "channel:cli",
    "webhook_event": "webhook:cli",
    "callback_event": "callback:cli",
    "timer_tick": "timer:manual",
    "system_tick": "system:cli",
    "task_result": "task:manual",
    "task_status": "task:manual",
    "control": "operator",
    "brief_ack": "operator",
    "brief_result": "operator",
    "internal_followup": "system:cli",
}

DELIVERY_SURFACES: tuple[str, ...] = (
    "cli_prompt",
    "run_once",
    "http_public_enqueue",
    "http_webhook",
    "http_callback_enqueue",
    "http_callback_wake",
    "http_control_prompt",
    "timer_scheduler",
    "runtime_system",
    "task_rejoin",
)
ADMISSION_CONTEXTS: tuple[str, ...] = (
    "public_unauthenticated",
    "control_authenticated",
    "external_trigger_capability",
    "local_process",
    "runtime_owned",
)

# the admission surface decides which origins it may admit: runtime-owned
# origins (system, task, timer: trusted_system) only from internal callers
ORIGINS_BY_SURFACE: dict[str, tuple[str, ...]] = {
    "cli_prompt": ("operator", "channel", "webhook", "callback"),
    "run_once": ("operator",),
    "http_public_enqueue": ("channel", "webhook"),
    "http_webhook": ("webhook",),
    "http_callback_enqueue": ("callback",),
    "http_callback_wake": ("callback",),
    "http_control_prompt": ("operator", "channel", "webhook"),
    "timer_scheduler": ("timer",),
    "runtime_system": tuple(ORIGIN_KINDS),
    "task_rejoin": ("task",),
}
CONTEXTS_BY_SURFACE: dict[str, tuple[str, ...]] = {
    "cli_prompt": ("local_process",),
    "run_once": ("local_process",),
    "http_public_enqueue": ("public_unauthenticated",),
    "http_webhook": ("public_unauthenticated", "control_authenticated"),
    "http_callback_enqueue": ("external_trigger_capability",),
    "http_callback_wake": ("external_trigger_capability",),
    "http_control_prompt": ("control_authenticated",),
    "timer_scheduler": ("runtime_owned",),
    "runtime_system": ("runtime_owned",),
    "task_rejoin": ("runtime_owned",),
}
RUNTIME_ORIGINS = ("system", "task", "timer")

# source ref key for each origin id field
_SOURCE_REF_KEY = {
    "channel_id": "channel_id",
    "source": "webhook_source",
    "descriptor_id": "callback_descriptor_id",
    "timer_id": "timer_id",
    "subsystem": "subsystem",
    "task_id": "task_id",
    "actor_id": "actor_id",
}

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


def _choices(values: Any) -> str:
    return ", ".join(values)


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def check_kind(kind: Any) -> str:
    if not _is_text(kind) or kind not in MESSAGE_KINDS:
        raise UsageError(
            f"unknown message kind {kind!r}", hint=f"use one of: {_choices(MESSAGE_KINDS)}"
        )
    return cast(str, kind)


def check_priority(priority: Any) -> str:
    if not _is_text(priority) or priority not in PRIORITIES:
        raise UsageError(
            f"unknown priority {priority!r}", hint=f"use one of: {_choices(PRIORITIES)}"
        )
    return cast(str, priority)


def check_origin_id(kind: str, field: str, ident: Any) -> str:
    if not _is_text(ident) or not ORIGIN_ID_RE.fullmatch(ident):
        raise UsageError(
            f"origin {kind!r}: {field} {ident!r} is not a valid id",
            hint=f"use {ORIGIN_ID_CHARSET}",
        )
    return cast(str, ident)


def parse_origin(text: Any) -> Origin:
    """``operator``, ``operator:alice``, ``channel:slack``, ``timer:tmr_1`` ... -> origin object."""
    if not _is_text(text):
        raise UsageError(
            f"origin must be text, not {type(text).__name__}", hint="e.g. channel:slack"
        )
    kind, _, ident = text.partition(":")
    kind = kind.strip()
    ident = ident.strip()
    if kind not in ORIGIN_KINDS:
        raise UsageError(
            f"unknown origin {text!r}",
            hint="use one of: operator[:ACTOR], channel:ID, webhook:SOURCE, callback:DESCRIPTOR, timer:ID, system:SUBSYSTEM, task:ID",
        )
    field = ORIGIN_KINDS[kind]
    if kind in ORIGIN_REQUIRES_ID and not ident:
        raise UsageError(
            f"origin {kind!r} needs an id ({field})",
            hint=f"write it as {kind}:<{field}>, e.g. {kind}:example",
        )
    origin: dict[str, str] = {"kind": kind}
    if ident:
        origin[field] = check_origin_id(kind, field, ident)
    return cast(Origin, origin)


def check_origin(origin: Any) -> Origin:
    """Validate an origin object built by runtime code or read from disk (a
    copy is returned, upgraded to v2 field names, unknown fields dropped)."""
    if not isinstance(origin, dict):
        raise UsageError(
            f"origin must be an object, not {type(origin).__name__}",
            hint='e.g. {"kind": "channel", "channel_id": "slack"}',
        )
    kind = origin.get("kind")
    if not _is_text(kind) or kind not in ORIGIN_KINDS:
        raise UsageError(
            f"unknown origin kind {kind!r}", hint=f"use one of: {_choices(ORIGIN_KINDS)}"
        )
    out: dict[str, str] = {"kind": kind}
    for key, value in origin.items():
        name = _V1_ORIGIN_FIELDS.get(key, key)
        if name in ORIGIN_FIELDS[kind] and value is not None and value != "":
            out[name] = check_origin_id(kind, name, value)
    field = ORIGIN_KINDS[kind]
    if kind in ORIGIN_REQUIRES_ID and not out.get(field):
        raise UsageError(f"origin {kind!r} needs {field!r}", hint=f"set origin.{field}")
    return cast(Origin, out)


def origin_label(origin: Any) -> str:
    """``channel:slack`` for an origin object (v1 or v2 field names)."""
    if not isinstance(origin, dict):
        return "?"
    kind = str(origin.get("kind", "?"))
    field = ORIGIN_KINDS.get(kind)
    ident = None
    if field:
        ident = origin.get(field)
        if ident is None:
            v1 = {v: k for k, v in _V1_ORIGIN_FIELDS.items()}.get(field)
            ident = origin.get(v1) if v1 else None
    return f"{kind}:{ident}" if ident else kind


def check_admission(
    kind: str, origin_kind: str, delivery_surface: Any, admission_context: Any
) -> None:
    """The public-ingress policy: the kind must belong to its origin, and the
    admission surface must be allowed to admit that origin."""
    if not _is_text(delivery_surface) or delivery_surface not in DELIVERY_SURFACES:
        raise UsageError(
            f"unknown delivery surface {delivery_surface!r}",
            hint=f"use one of: {_choices(DELIVERY_SURFACES)}",
        )
    if not _is_text(admission_context) or admission_context not in ADMISSION_CONTEXTS:
        raise UsageError(
            f"unknown admission context {admission_context!r}",
            hint=f"use one of: {_choices(ADMISSION_CONTEXTS)}",
        )
    if admission_context not in CONTEXTS_BY_SURFACE[delivery_surface]:
        raise UsageError(
            f"delivery surface {delivery_surface!r} does not admit with context {admission_context!r}",
            hint=f"use one of: {_choices(CONTEXTS_BY_SURFACE[delivery_surface])}",
        )
    allowed = ORIGINS_BY_KIND[kind]
    if origin_kind not in allowed:
        raise UsageError(
            f"a {kind} message cannot come from a {origin_kind} origin",
            hint=f"{kind} comes from: {_choices(allowed)}; "
            f"a {origin_kind} origin sends {DEFAULT_KIND_BY_ORIGIN[origin_kind]} (omit --kind)",
            kind="kind_origin_mismatch",
        )
    surface_origins = ORIGINS_BY_SURFACE[delivery_surface]
    if origin_kind not in surface_origins:
        runtime_only = origin_kind in RUNTIME_ORIGINS
        raise UsageError(
            f"origin {origin_kind!r} cannot be admitted through {delivery_surface}"
            + (" (runtime-owned origins are admitted only by the runtime)" if runtime_only else ""),
            hint=f"{delivery_surface} admits: {_choices(surface_origins)}",
            kind="origin_not_admissible",
        )


def build_envelope(
    *,
    message_id: str,
    agent_id: str,
    created_at: str,
    body: MessageBody | dict[str, Any],
    kind: str | None = None,
    origin: str | Origin | dict[str, Any] | None = None,
    priority: str = "normal",
    work_item_id: str | None = None,
    task_id: str | None = None,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    delivery_surface: str = "cli_prompt",
    admission_context: str = "local_process",
    metadata: dict[str, Any] | None = None,
    source_refs: dict[str, str] | None = None,
) -> Envelope:
    """Normalize one admitted message. Raises :class:`UsageError` on bad values."""
    if kind is not None:
        check_kind(kind)
    if origin is None:
        origin = DEFAULT_ORIGIN_BY_KIND[kind] if kind else "operator"
    origin_obj = parse_origin(origin) if isinstance(origin, str) else check_origin(origin)
    okind = origin_obj["kind"]
    if kind is None:
        kind = DEFAULT_KIND_BY_ORIGIN[okind]
    check_priority(priority)
    check_admission(kind, okind, delivery_surface, admission_context)
    for name, value in (
        ("work_item_id", work_item_id),
        ("task_id", task_id),
        ("correlation_id", correlation_id),
        ("causation_id", causation_id),
    ):
        if value is not None and not _is_text(value):
            raise UsageError(f"{name} must be text, not {type(value).__name__}")
    if metadata is not None and not isinstance(metadata, dict):
        raise UsageError(f"metadata must be an object, not {type(metadata).__name__}")
    if source_refs is not None and not isinstance(source_refs, dict):
        raise UsageError(f"source_refs must be an object, not {type(source_refs).__name__}")
    # caller refs first: the origin's own ids are stable provenance and win
    refs: dict[str, str] = {str(k): str(v) for k, v in (source_refs or {}).items()}
    for field, ovalue in cast(dict[str, str], origin_obj).items():
        if field != "kind" and field in _SOURCE_REF_KEY:
            refs[_SOURCE_REF_KEY[field]] = str(ovalue)
    if okind == "task" and task_id is None:
        task_id = origin_obj.get("task_id")
    env: dict[str, Any] = {
        "v": ENVELOPE_VERSION,
        "id": message_id,
        "agent_id": agent_id,
        "created_at": created_at,
        "kind": kind,
        "origin": origin_obj,
        "trust": TRUST_BY_ORIGIN[okind],
        "authority_class": AUTHORITY_BY_ORIGIN[okind],
        "priority": priority,
        "trigger_kind": TRIGGER_BY_KIND[kind],
        "body": body,
        "delivery_surface": delivery_surface,
        "admission_context": admission_context,
        "source_refs": refs,
    }
    if work_item_id:
        env["work_item_id"] = work_item_id
    if task_id:
        env["task_id"] = task_id
    if correlation_id:
        env["correlation_id"] = correlation_id
    if causation_id:
        env["causation_id"] = causation_id
    if metadata:
        env["metadata"] = metadata
    return cast(Envelope, env)


class EnvelopeError(ValueError):
    """A stored envelope (inbox file, ledger record) that cannot be used."""


def upgrade_envelope(raw: Any) -> Envelope:
    """The read boundary: any stored envelope (v1 camelCase or v2) -> a v2
    envelope. Raises :class:`EnvelopeError` naming the field on anything else."""
    if not isinstance(raw, dict):
        raise EnvelopeError(f"envelope is not a JSON object ({type(raw).__name__})")
    v = raw.get("v", 1)
    if not isinstance(v, int) or isinstance(v, bool):
        raise EnvelopeError(f"envelope `v` is not an integer ({v!r})")
    if v > ENVELOPE_VERSION:
        raise EnvelopeError(
            f"envelope format v{v} is newer than this holon understands (max v{ENVELOPE_VERSION})"
        )
    if v == ENVELOPE_VERSION:
        return cast(Envelope, raw)
    out: dict[str, Any] = {"v": ENVELOPE_VERSION}
    for key, value in raw.items():
        if key == "v":
            continue
        name = _V1_FIELDS.get(str(key), str(key))
        if name == "origin" and isinstance(value, dict):
            value = {_V1_ORIGIN_FIELDS.get(k, k): x for k, x in value.items()}
        out[name] = value
    return cast(Envelope, out)


def validate_stored(raw: Any) -> tuple[Envelope, list[str]]:
    """Upgrade and re-validate a stored envelope (an inbox file) through the
    admission policy, re-deriving trust, authority and trigger kind from the
    origin and the admission surface. Returns the clean envelope and the names
    of fields whose claimed value was replaced. Raises :class:`EnvelopeError`
    naming the field when the envelope cannot be admitted at all."""
    env = upgrade_envelope(raw)
    mid = env.get("id")
    if not _is_text(mid) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", mid):
        raise EnvelopeError(f"id {mid!r} is not a valid message id")
    for name in ("agent_id", "created_at"):
        if not _is_text(env.get(name)) or not env.get(name):
            raise EnvelopeError(f"{name} must be non-empty text, not {env.get(name)!r}")
    body = env.get("body")
    try:
        origin = env.get("origin")
        kind = env.get("kind")
        clean = build_envelope(
            message_id=mid,
            agent_id=env["agent_id"],
            created_at=env["created_at"],
            body=check_body(body),
            kind=check_kind(kind),
            origin=check_origin(origin),
            priority=check_priority(env.get("priority", "normal")),
            work_item_id=env.get("work_item_id"),
            task_id=env.get("task_id"),
            correlation_id=env.get("correlation_id"),
            causation_id=env.get("causation_id"),
            delivery_surface=env.get("delivery_surface", "cli_prompt"),
            admission_context=env.get("admission_context", "local_process"),
            metadata=env.get("metadata"),
            source_refs=_check_refs(env.get("source_refs")),
        )
    except UsageError as exc:
        raise EnvelopeError(exc.message) from None
    claimed = cast(dict[str, Any], env)
    derived = cast(dict[str, Any], clean)
    replaced: list[str] = [
        name
        for name in ("trust", "authority_class", "trigger_kind", "origin", "source_refs")
        if name in claimed and claimed[name] != derived[name]
    ]
    return clean, replaced


def _check_refs(refs: Any) -> dict[str, str] | None:
    if refs is None:
        return None
    if not isinstance(refs, dict) or not all(_is_text(k) and _is_text(v) for k, v in refs.items()):
        raise UsageError("source_refs must be an object of text values")
    return refs


def check_body(body: Any) -> MessageBody:
    """A message body must be one of the spec's shapes."""
    if not isinstance(body, dict):
        raise UsageError(f"body must be an object, not {type(body).__name__}")
    btype = body.get("type")
    if btype == "text":
        if not _is_text(body.get("text")):
            raise UsageError("a text body needs `text` as text")
    elif btype == "json":
        if "value" not in body:
            raise UsageError("a json body needs `value`")
    elif btype == "brief":
        if not _is_text(body.get("text")):
            raise UsageError("a brief body needs `text` as text")
        if "title" in body and not _is_text(body["title"]):
            raise UsageError("a brief body's `title` must be text")
    else:
        raise UsageError(f"unknown body type {btype!r}", hint="use text, json or brief")
    return cast(MessageBody, body)


def envelope_head(env: Envelope, *, max_metadata_bytes: int = 4096) -> EnvelopeHead:
    """The envelope without its body, for indexes that must stay small."""
    head = {k: v for k, v in env.items() if k != "body"}
    meta = head.get("metadata")
    if meta is not None:
        import json

        if len(json.dumps(meta, ensure_ascii=False)) > max_metadata_bytes:
            head.pop("metadata")
    return cast(EnvelopeHead, head)


def body_text(body: Any) -> str:
    """A plain-text rendering of a message body for prompts and listings."""
    if not isinstance(body, dict):
        return str(body)
    btype = body.get("type")
    if btype == "text" or btype == "brief":
        title = body.get("title")
        text = str(body.get("text", ""))
        return f"{title}\n{text}" if title else text
    if btype == "json":
        import json

        return json.dumps(body.get("value"), ensure_ascii=False, sort_keys=True)
    return str(body)
