"""Building, upgrading and validating envelopes: :func:`build_envelope`
(normalize one admitted message through the policy), :func:`upgrade_envelope`
(the read boundary: v1 camelCase -> v2), :func:`validate_stored` (re-admit a
stored file), body checks, heads and text rendering.

Invariants:
- a built envelope's trust, authority and trigger kind come from
  :mod:`.policy`, and the origin's own ids win over caller ``source_refs``;
- everything read from disk passes :func:`upgrade_envelope`, which refuses
  a format newer than ``ENVELOPE_VERSION`` with :class:`EnvelopeError`;
- :func:`validate_stored` never trusts a claimed trust, authority, trigger
  kind, origin or source refs: it re-derives them and names what it replaced;
- a head (:func:`envelope_head`) never carries the body, and drops metadata
  too large for an index.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from holon_cli.errors import UsageError
from holon_cli.model.envelope.policy import (
    AUTHORITY_BY_ORIGIN,
    DEFAULT_KIND_BY_ORIGIN,
    DEFAULT_ORIGIN_BY_KIND,
    TRIGGER_BY_KIND,
    TRUST_BY_ORIGIN,
    _is_text,
    check_admission,
    check_kind,
    check_origin,
    check_priority,
    parse_origin,
)
from holon_cli.model.envelope.schema import (
    _V1_FIELDS,
    _V1_ORIGIN_FIELDS,
    ENVELOPE_VERSION,
    AdmittedRecord,
    BodyShape,
    Envelope,
    EnvelopeHead,
    MessageBody,
    Origin,
    QueueRecord,
    StatusRecord,
)
from holon_cli.model.tracecontext import TraceContext, check_trace_context
from holon_cli.model.typed import Checker

if TYPE_CHECKING:
    from typing_extensions import TypeIs

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
    trace_context: TraceContext | dict[str, Any] | None = None,
) -> Envelope:
    """Normalize one admitted message. Raises :class:`UsageError` on bad values.

    ``trace_context`` (the caller's W3C trace, e.g. an HTTP ``traceparent``
    header) is kept when it parses and dropped when it does not: it only
    links traces, so a bad one never refuses a message. It is an optional
    field of v2 (no version change): a reader that does not know it drops it
    on re-validation, and nothing else reads it."""
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
    tc = check_trace_context(trace_context)
    if tc is not None:
        env["trace_context"] = tc
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
            trace_context=env.get("trace_context"),
        )
    except UsageError as exc:
        raise EnvelopeError(exc.message) from None
    claimed: Mapping[str, object] = env
    derived: Mapping[str, object] = clean
    replaced: list[str] = [
        name
        for name in ("trust", "authority_class", "trigger_kind", "origin", "source_refs")
        if name in claimed and claimed[name] != derived[name]
    ]
    return clean, replaced


def _check_refs(refs: Any) -> dict[str, str] | None:
    if refs is None:
        return None
    if _REFS.problem(refs) is not None:
        raise UsageError("source_refs must be an object of text values")
    return _REFS(refs)


_REFS: Checker[dict[str, str]] = Checker(dict[str, str])


def check_body(body: Any) -> MessageBody:
    """A message body must be one of the spec's shapes (:data:`BodyShape`)."""
    err = _BODY.problem(body)
    if err is None:
        return cast(MessageBody, body)
    if not err.path:
        raise UsageError(f"body must be an object, not {type(body).__name__}")
    field = err.path[0]
    btype = body.get("type")
    if field == "type":
        raise UsageError(f"unknown body type {btype!r}", hint="use text, json or brief")
    if field == "value":
        raise UsageError("a json body needs `value`")
    if field == "title":
        raise UsageError("a brief body's `title` must be text")
    raise UsageError(f"a {btype} body needs `text` as text")


_BODY: Checker[BodyShape] = Checker(BodyShape)


def envelope_head(env: Envelope, *, max_metadata_bytes: int = 4096) -> EnvelopeHead:
    """The envelope without its body, for indexes that must stay small."""
    head = {k: v for k, v in env.items() if k != "body"}
    meta = head.get("metadata")
    if meta is not None:
        import json

        if len(json.dumps(meta, ensure_ascii=False)) > max_metadata_bytes:
            head.pop("metadata")
    return clean_head(head)


def clean_head(raw: Mapping[str, Any]) -> EnvelopeHead:
    """A head with only the fields that have their type: an envelope an older
    holon admitted may carry, say, a list for a priority (the queue folds it
    to ``normal``); a head is shown and copied into events, never trusted."""
    head = dict(raw)
    while (err := _HEAD.problem(head)) is not None and err.path:
        head.pop(str(err.path[0]), None)
    return _HEAD(head)


_HEAD: Checker[EnvelopeHead] = Checker(EnvelopeHead)


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


def is_admitted(rec: QueueRecord) -> TypeIs[AdmittedRecord]:
    """A queue ledger record that admitted a message."""
    return rec.get("op") == "admitted"


def is_status(rec: QueueRecord) -> TypeIs[StatusRecord]:
    """A queue ledger record that changed a message's status."""
    return rec.get("op") == "status"
