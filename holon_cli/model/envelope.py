"""The message envelope of the runtime spec and its admission defaults.

Everything that may influence an agent normalizes to one envelope. Trust and
authority are derived from the origin at admission, never taken from a
caller; kind and origin default from each other when only one is given.
"""

from __future__ import annotations

from typing import Any

from holon_cli.errors import UsageError

MESSAGE_KINDS = (
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

# origin kind -> the field that names its source (None: optional actor)
ORIGIN_KINDS: dict[str, str | None] = {
    "operator": "actorId",
    "channel": "channelId",
    "webhook": "source",
    "callback": "descriptorId",
    "timer": "timerId",
    "system": "subsystem",
    "task": "taskId",
}
ORIGIN_REQUIRES_ID = {"channel", "webhook", "callback", "timer", "system", "task"}

PRIORITIES = ("interject", "next", "normal", "background")
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

DELIVERY_SURFACES = (
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
ADMISSION_CONTEXTS = (
    "public_unauthenticated",
    "control_authenticated",
    "external_trigger_capability",
    "local_process",
    "runtime_owned",
)

# source ref key for each origin id field
_SOURCE_REF_KEY = {
    "channelId": "channel_id",
    "source": "webhook_source",
    "descriptorId": "callback_descriptor_id",
    "timerId": "timer_id",
    "subsystem": "subsystem",
    "taskId": "task_id",
    "actorId": "actor_id",
}


def _choices(values: Any) -> str:
    return ", ".join(values)


def check_kind(kind: str) -> str:
    if kind not in MESSAGE_KINDS:
        raise UsageError(
            f"unknown message kind {kind!r}", hint=f"use one of: {_choices(MESSAGE_KINDS)}"
        )
    return kind


def check_priority(priority: str) -> str:
    if priority not in PRIORITIES:
        raise UsageError(
            f"unknown priority {priority!r}", hint=f"use one of: {_choices(PRIORITIES)}"
        )
    return priority


def parse_origin(text: str) -> dict[str, str]:
    """``operator``, ``operator:alice``, ``channel:slack``, ``timer:tmr_1`` ... -> origin object."""
    kind, _, ident = text.partition(":")
    kind = kind.strip()
    ident = ident.strip()
    if kind not in ORIGIN_KINDS:
        raise UsageError(
            f"unknown origin {text!r}",
            hint="use one of: operator[:ACTOR], channel:ID, webhook:SOURCE, callback:DESCRIPTOR, timer:ID, system:SUBSYSTEM, task:ID",
        )
    if kind in ORIGIN_REQUIRES_ID and not ident:
        field = ORIGIN_KINDS[kind]
        raise UsageError(
            f"origin {kind!r} needs an id ({field})",
            hint=f"write it as {kind}:<{field}>, e.g. {kind}:example",
        )
    origin: dict[str, str] = {"kind": kind}
    if ident:
        origin[ORIGIN_KINDS[kind] or "id"] = ident
    return origin


def check_origin(origin: dict[str, Any]) -> dict[str, Any]:
    """Validate an origin object built by runtime code (a copy is returned)."""
    kind = origin.get("kind")
    if kind not in ORIGIN_KINDS:
        raise UsageError(
            f"unknown origin kind {kind!r}", hint=f"use one of: {_choices(ORIGIN_KINDS)}"
        )
    field = ORIGIN_KINDS[kind]
    if kind in ORIGIN_REQUIRES_ID and not origin.get(field or ""):
        raise UsageError(f"origin {kind!r} needs {field!r}", hint=f"set origin.{field}")
    return dict(origin)


def origin_label(origin: dict[str, Any]) -> str:
    kind = str(origin.get("kind", "?"))
    field = ORIGIN_KINDS.get(kind)
    ident = origin.get(field) if field else None
    return f"{kind}:{ident}" if ident else kind


def build_envelope(
    *,
    message_id: str,
    agent_id: str,
    created_at: str,
    body: dict[str, Any],
    kind: str | None = None,
    origin: str | dict[str, Any] | None = None,
    priority: str = "normal",
    work_item_id: str | None = None,
    task_id: str | None = None,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    delivery_surface: str = "cli_prompt",
    admission_context: str = "local_process",
    metadata: dict[str, Any] | None = None,
    source_refs: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Normalize one admitted message. Raises :class:`UsageError` on bad values."""
    if kind is not None:
        check_kind(kind)
    if origin is None:
        origin = DEFAULT_ORIGIN_BY_KIND[kind] if kind else "operator"
    origin_obj = parse_origin(origin) if isinstance(origin, str) else check_origin(origin)
    if kind is None:
        kind = DEFAULT_KIND_BY_ORIGIN[origin_obj["kind"]]
    check_priority(priority)
    if delivery_surface not in DELIVERY_SURFACES:
        raise UsageError(
            f"unknown delivery surface {delivery_surface!r}",
            hint=f"use one of: {_choices(DELIVERY_SURFACES)}",
        )
    if admission_context not in ADMISSION_CONTEXTS:
        raise UsageError(
            f"unknown admission context {admission_context!r}",
            hint=f"use one of: {_choices(ADMISSION_CONTEXTS)}",
        )
    okind = origin_obj["kind"]
    # caller refs first: the origin's own ids are stable provenance and win
    refs: dict[str, str] = {str(k): str(v) for k, v in (source_refs or {}).items()}
    for field, value in origin_obj.items():
        if field != "kind" and field in _SOURCE_REF_KEY:
            refs[_SOURCE_REF_KEY[field]] = str(value)
    if okind == "task" and task_id is None:
        task_id = origin_obj.get("taskId")
    env: dict[str, Any] = {
        "id": message_id,
        "agentId": agent_id,
        "createdAt": created_at,
        "kind": kind,
        "origin": origin_obj,
        "trust": TRUST_BY_ORIGIN[okind],
        "authorityClass": AUTHORITY_BY_ORIGIN[okind],
        "priority": priority,
        "triggerKind": TRIGGER_BY_KIND[kind],
        "body": body,
        "deliverySurface": delivery_surface,
        "admissionContext": admission_context,
        "sourceRefs": refs,
    }
    if work_item_id:
        env["workItemId"] = work_item_id
    if task_id:
        env["taskId"] = task_id
    if correlation_id:
        env["correlationId"] = correlation_id
    if causation_id:
        env["causationId"] = causation_id
    if metadata:
        env["metadata"] = metadata
    return env


def body_text(body: dict[str, Any]) -> str:
    """A plain-text rendering of a message body for prompts and listings."""
    btype = body.get("type")
    if btype == "text" or btype == "brief":
        title = body.get("title")
        text = str(body.get("text", ""))
        return f"{title}\n{text}" if title else text
    if btype == "json":
        import json

        return json.dumps(body.get("value"), ensure_ascii=False, sort_keys=True)
    return str(body)
