"""The message envelope of the runtime spec and its admission policy.

Everything that may influence an agent normalizes to one envelope. Trust and
authority are derived from the origin at admission, never taken from a
caller; kind and origin default from each other when only one is given, and
a kind that does not belong to its origin is refused (public-ingress policy).

On disk and on the wire the envelope is snake_case and carries ``v``
(``ENVELOPE_VERSION``). Version 1 records (the spec's camelCase field names:
``agentId``, ``createdAt``, ``authorityClass``, ...) are upgraded at the read
boundary by :func:`upgrade_envelope`, so the rest of the code sees one shape.

Modules: ``schema`` (``Literal``s and ``TypedDict``s), ``policy`` (the
admission tables and checks), ``validate`` (build, upgrade, re-validate,
heads, body text). Every name is re-exported here.
"""

from holon_cli.model.envelope.policy import (
    ADMISSION_CONTEXTS,
    AUTHORITY_BY_ORIGIN,
    CONTEXTS_BY_SURFACE,
    DEFAULT_KIND_BY_ORIGIN,
    DEFAULT_ORIGIN_BY_KIND,
    DELIVERY_SURFACES,
    MESSAGE_KINDS,
    ORIGIN_FIELDS,
    ORIGIN_ID_CHARSET,
    ORIGIN_ID_RE,
    ORIGIN_KINDS,
    ORIGIN_REQUIRES_ID,
    ORIGINS_BY_KIND,
    ORIGINS_BY_SURFACE,
    PRIORITIES,
    PRIORITY_RANK,
    RUNTIME_ORIGINS,
    TRIGGER_BY_KIND,
    TRUST_BY_ORIGIN,
    check_admission,
    check_kind,
    check_origin,
    check_origin_id,
    check_priority,
    origin_label,
    parse_origin,
)
from holon_cli.model.envelope.policy import _choices as _choices
from holon_cli.model.envelope.policy import _is_text as _is_text
from holon_cli.model.envelope.schema import _V1_FIELDS as _V1_FIELDS
from holon_cli.model.envelope.schema import _V1_ORIGIN_FIELDS as _V1_ORIGIN_FIELDS
from holon_cli.model.envelope.schema import (
    ENVELOPE_VERSION,
    AbortedMessage,
    AdmittedRecord,
    AuthorityClass,
    Envelope,
    EnvelopeHead,
    EnvelopeRef,
    MessageBody,
    MessageKind,
    Origin,
    OtherQueueRecord,
    Priority,
    QueueEntry,
    QueueRecord,
    QueueSnapshot,
    QueueStatus,
    StatusRecord,
    StoredQueueEntry,
    TrustLevel,
)
from holon_cli.model.envelope.validate import _SOURCE_REF_KEY as _SOURCE_REF_KEY
from holon_cli.model.envelope.validate import (
    EnvelopeError,
    body_text,
    build_envelope,
    check_body,
    clean_head,
    envelope_head,
    is_admitted,
    is_status,
    upgrade_envelope,
    validate_stored,
)
from holon_cli.model.envelope.validate import _check_refs as _check_refs

__all__ = [
    "ADMISSION_CONTEXTS",
    "AUTHORITY_BY_ORIGIN",
    "AdmittedRecord",
    "AuthorityClass",
    "CONTEXTS_BY_SURFACE",
    "DEFAULT_KIND_BY_ORIGIN",
    "DEFAULT_ORIGIN_BY_KIND",
    "DELIVERY_SURFACES",
    "ENVELOPE_VERSION",
    "Envelope",
    "EnvelopeError",
    "EnvelopeHead",
    "EnvelopeRef",
    "MESSAGE_KINDS",
    "MessageBody",
    "MessageKind",
    "ORIGINS_BY_KIND",
    "ORIGINS_BY_SURFACE",
    "ORIGIN_FIELDS",
    "ORIGIN_ID_CHARSET",
    "ORIGIN_ID_RE",
    "ORIGIN_KINDS",
    "ORIGIN_REQUIRES_ID",
    "Origin",
    "OtherQueueRecord",
    "PRIORITIES",
    "PRIORITY_RANK",
    "Priority",
    "QueueEntry",
    "QueueRecord",
    "AbortedMessage",
    "QueueSnapshot",
    "QueueStatus",
    "RUNTIME_ORIGINS",
    "StatusRecord",
    "StoredQueueEntry",
    "TRIGGER_BY_KIND",
    "TRUST_BY_ORIGIN",
    "TrustLevel",
    "body_text",
    "build_envelope",
    "check_admission",
    "check_body",
    "clean_head",
    "check_kind",
    "check_origin",
    "check_origin_id",
    "check_priority",
    "envelope_head",
    "is_admitted",
    "is_status",
    "origin_label",
    "parse_origin",
    "upgrade_envelope",
    "validate_stored",
]
