"""The admission policy: which kinds, origins, priorities, delivery surfaces
and admission contexts exist, what trust, authority and trigger kind each
origin and kind implies, and the checks that enforce it.

Invariants:
- trust and authority are derived from the origin (``TRUST_BY_ORIGIN``,
  ``AUTHORITY_BY_ORIGIN``), never taken from a caller or a stored file;
- kind and origin default from each other when only one is given, and a
  kind that does not belong to its origin is refused (public ingress);
- runtime-owned origins (system, task, timer) are admitted only by
  internal callers: the admission surface decides which origins it may admit;
- origin ids use a strict charset, so they cannot forge structure in
  prompts and headers;
- every check raises :class:`UsageError` naming the field and the choices.
"""

from __future__ import annotations

import re
from typing import Any, cast, get_args

from holon_cli.errors import Said, UsageError
from holon_cli.model.envelope.schema import _V1_ORIGIN_FIELDS, MessageKind, Origin

MESSAGE_KINDS: tuple[str, ...] = get_args(MessageKind)  # one list: the Literal

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
    "mcp_result": "mcp_result",
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
    "mcp_result": ("system",),
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
    "mcp_result": "system:mcp",
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
            hint=(
                "use one of: operator[:ACTOR], channel:ID, webhook:SOURCE, "
                "callback:DESCRIPTOR, timer:ID, system:SUBSYSTEM, task:ID"
            ),
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
            (
                f"delivery surface {delivery_surface!r} does not admit with context "
                f"{admission_context!r}"
            ),
            hint=f"use one of: {_choices(CONTEXTS_BY_SURFACE[delivery_surface])}",
        )
    allowed = ORIGINS_BY_KIND[kind]
    if origin_kind not in allowed:
        raise UsageError(
            f"a {kind} message cannot come from a {origin_kind} origin",
            hint=Said(
                f"{kind} comes from: {_choices(allowed)}; a {origin_kind} origin sends "
                f"{DEFAULT_KIND_BY_ORIGIN[origin_kind]} (omit --kind)",
                http=f"{kind} comes from: {_choices(allowed)}; a {origin_kind} origin sends "
                f"{DEFAULT_KIND_BY_ORIGIN[origin_kind]} (omit kind)",
                tool=f"{kind} comes from: {_choices(allowed)}; a {origin_kind} origin sends "
                f"{DEFAULT_KIND_BY_ORIGIN[origin_kind]} (omit kind)",
            ),
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
