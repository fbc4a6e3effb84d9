"""The external trigger capability, wake hints and waiting intents as
records (pure values, no I/O).

Token: ``cb_`` + 32 lowercase hex chars (128 random bits). Only its SHA-256
is ever written to a ledger or snapshot; the token itself lives in a 0600
secret file so ``holon trigger show`` can print it.
"""

from __future__ import annotations

import re
from typing import Any, Literal, NotRequired, TypedDict

from holon_cli.digest import sha256_hex

TRIGGER_VERSION = 1
TOKEN_RE = re.compile(r"^cb_[0-9a-f]{32}$")
DELIVERY_MODE = "wake_hint"
MAX_BODY_BYTES = 256 * 1024

TriggerStatus = Literal["active", "revoked"]
Disposition = Literal["system_tick_admitted", "coalesced"]


class TriggerDescriptor(TypedDict):
    """``holon trigger show|rotate|revoke --json`` data (the contract's fields)."""

    external_trigger_id: str
    trigger_url: str | None
    target_agent_id: str
    delivery_mode: str
    status: TriggerStatus
    trigger_count: int
    last_triggered_at: str | None


class TriggerRecord(TypedDict):
    """The stored capability (``state/trigger.json`` and ``ledger/triggers.jsonl``)."""

    v: int
    external_trigger_id: str
    target_agent_id: str
    delivery_mode: str
    status: TriggerStatus
    token_sha256: str | None
    token_generation: int
    created_at: str
    updated_at: str
    trigger_count: int
    last_triggered_at: str | None


class TriggerLedgerRecord(TypedDict):
    """One line of ``ledger/triggers.jsonl``: the capability after ``op``
    (a delivery line carries no ``trigger``)."""

    v: int
    op: str
    trigger: NotRequired[TriggerRecord | None]
    at: NotRequired[str]
    # delivered: where it came from
    source: NotRequired[str | None]
    content_type: NotRequired[str | None]


class WakeHint(TypedDict, total=False):
    """``AgentState.pending_wake_hint``: preserved fields of the newest
    delivery plus how many deliveries were coalesced into it."""

    external_trigger_id: str
    target_agent_id: str
    delivery_mode: str
    source: str | None
    content_type: str | None
    body: dict[str, Any] | None
    correlation_id: str | None
    causation_id: str | None
    waiting_intent_ids: list[str]
    work_item_ids: list[str]
    first_received_at: str
    received_at: str
    coalesced_count: int
    # in a tick's metadata only: the body is rendered in the message text
    contentful: bool
    body_type: str | None


class WaitingIntent(TypedDict):
    """One line of ``ledger/waiting_intents.jsonl`` (a full snapshot per change)."""

    v: int
    id: str
    agent_id: str
    work_item_id: str
    kind: Literal["external", "task"]
    status: Literal["active", "cancelled"]
    description: str
    source: str
    external_ref: str | None
    external_trigger_id: str | None
    condition: str
    resource: str | None
    trigger_count: int
    last_triggered_at: str | None
    created_at: str
    updated_at: str
    cancelled_at: str | None
    # the turn that recorded it (absent in records of earlier builds)
    turn_id: NotRequired[str | None]


def token_sha256(token: str) -> str:
    return sha256_hex(token.encode("utf-8"))


def token_matches(token: str, stored_sha256: str | None) -> bool:
    """Constant-time comparison of a presented token against a stored hash."""
    if not stored_sha256:
        return False
    import hmac  # loads OpenSSL's hashlib: only when a token is checked

    return hmac.compare_digest(token_sha256(token), stored_sha256)


def token_from(text: str) -> str:
    """A token or a trigger URL (``.../callbacks/wake/<token>``) -> the token text."""
    t = text.strip()
    if "/" in t:
        t = t.rstrip("/").rsplit("/", 1)[-1]
        t = t.split("?", 1)[0].split("#", 1)[0]
    return t


def descriptor(rec: TriggerRecord, url: str | None) -> TriggerDescriptor:
    return {
        "external_trigger_id": rec["external_trigger_id"],
        "trigger_url": url if rec["status"] == "active" else None,
        "target_agent_id": rec["target_agent_id"],
        "delivery_mode": rec["delivery_mode"],
        "status": rec["status"],
        "trigger_count": int(rec.get("trigger_count") or 0),
        "last_triggered_at": rec.get("last_triggered_at"),
    }


def is_contentful(hint: WakeHint | dict[str, Any] | None) -> bool:
    if hint and isinstance(hint.get("contentful"), bool):
        return bool(hint["contentful"])  # a hint as kept in a tick's metadata
    body = (hint or {}).get("body")
    if not body:
        return False
    if body.get("type") == "json":
        return body.get("value") not in (None, "", {}, [])
    return bool(str(body.get("text") or "").strip())
