"""The per-agent external trigger capability and its callback ingress.

One default capability per agent, fixed ``wake_hint`` delivery, provisioned
lazily on first use. ``state/trigger.json`` is the current record,
``ledger/triggers.jsonl`` the audit trail (``provisioned``, ``rotated``,
``revoked``, ``delivered``); both hold only the token's SHA-256. The token
itself is in ``secrets/trigger_token`` (folder 0700, file 0600) so
``holon trigger show`` can print it. ``locks/trigger.lock`` orders every
change of the record.

:func:`deliver` is the callback ingress: ``holon trigger deliver`` calls it
locally and the HTTP route ``POST /callbacks/wake/{token}`` calls it
unchanged. Every refusal raises before anything is written.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from holon_cli import clock
from holon_cli.errors import CorruptStateError, HolonError, RejectedError, UsageError
from holon_cli.model.agent import lifecycle_hint
from holon_cli.model.trigger import (
    DELIVERY_MODE,
    MAX_BODY_BYTES,
    TOKEN_RE,
    TRIGGER_VERSION,
    TriggerDescriptor,
    TriggerRecord,
    descriptor,
    token_from,
    token_matches,
    token_sha256,
)
from holon_cli.runtime.waiting.common import lock_file, secrets_dir, state_file
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import (
    atomic_write_bytes,
    fsync_dir,
    read_record,
    write_snapshot,
)
from holon_cli.store.locks import locked
from holon_cli.store.records import TRIGGER_SNAPSHOT

if TYPE_CHECKING:
    from holon_cli.model.events import (
        ExternalTriggerDeliveredData,
        TriggerProvisionedData,
        TriggerRevokedData,
        TriggerRotatedData,
    )
    from holon_cli.model.trigger import TriggerLedgerRecord, WakeHint
    from holon_cli.model.typed import JsonObject
    from holon_cli.runtime.waiting.hints import HintOutcome

NAME = "trigger"
LEDGER: Final = "triggers"
TOKEN_FILE = "trigger_token"
DEFAULT_HTTP_ADDR = "127.0.0.1:7878"

# error kind -> HTTP status of ``POST /callbacks/wake/{token}`` (for ``serve``)
HTTP_STATUS_BY_KIND = {
    "invalid_callback_token": 403,
    "agent_stopped": 409,
    "payload_too_large": 413,
    "invalid_json": 400,
    "invalid_body": 400,
}


def new_token() -> str:
    import secrets  # loads OpenSSL's hashlib: only when a token is minted

    return "cb_" + secrets.token_hex(16)


def base_url(advertise: str | None = None) -> str:
    """``serve --advertise`` when given, else ``http://$HOLON_HTTP_ADDR``."""
    if advertise:
        return advertise.rstrip("/")
    return "http://" + (os.environ.get("HOLON_HTTP_ADDR") or DEFAULT_HTTP_ADDR)


def trigger_url(token: str, advertise: str | None = None) -> str:
    return f"{base_url(advertise)}/callbacks/wake/{token}"


# ------------------------------------------------------------ storage


def _read(store: AgentStore) -> TriggerRecord | None:
    """``state/trigger.json``; when it is damaged, the capability as the last
    record of ``triggers.jsonl`` has it (every change, deliveries included,
    appends the whole record there first), so a damaged snapshot does not
    refuse every delivery. ``home check`` reports the damage and
    ``home check --repair`` rewrites the snapshot."""
    try:
        rec = read_record(state_file(store, NAME), TRIGGER_SNAPSHOT, max_version=TRIGGER_VERSION)
    except CorruptStateError as exc:
        last = store.ledger(LEDGER).last()
        trig = last.get("trigger") if last else None
        if trig is None:
            raise
        import logging

        logging.getLogger("holon.trigger").warning(
            "%s; using the last record of %s (run `holon home check --repair`)",
            exc.message,
            store.ledger(LEDGER).path,
        )
        return trig
    return rec


def _write(
    store: AgentStore,
    rec: TriggerRecord,
    op: str,
    *,
    delivered: tuple[str | None, str | None] | None = None,
) -> None:
    # audit first (only the hash), then the snapshot readers use
    line: TriggerLedgerRecord = {"v": 1, "op": op, "at": rec["updated_at"], "trigger": {**rec}}
    if delivered is not None:
        line["source"], line["content_type"] = delivered
    store.ledger(LEDGER).append(line)
    write_snapshot(state_file(store, NAME), rec)


def _token_path(store: AgentStore) -> Any:
    return secrets_dir(store) / TOKEN_FILE


def _write_token(store: AgentStore, token: str) -> None:
    d = secrets_dir(store)
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    atomic_write_bytes(d / TOKEN_FILE, (token + "\n").encode(), mode=0o600)


def _read_token(store: AgentStore) -> str | None:
    try:
        t = _token_path(store).read_text().strip()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:  # damaged: like a stale token, ensure() re-mints it
        return None
    return t if TOKEN_RE.match(t) else None


def _remove_token(store: AgentStore) -> None:
    try:
        os.unlink(_token_path(store))
        fsync_dir(secrets_dir(store))
    except FileNotFoundError:
        pass


def _lock(store: AgentStore) -> Any:
    return locked(lock_file(store, NAME), what=f"trigger of agent {store.agent_id!r}")


def _mint(store: AgentStore, prev: TriggerRecord | None, op: str) -> TriggerRecord:
    token = new_token()
    now = clock.now_iso()
    rec: TriggerRecord = {
        "v": TRIGGER_VERSION,
        "external_trigger_id": prev["external_trigger_id"] if prev else clock.new_id("etr"),
        "target_agent_id": store.agent_id,
        "delivery_mode": DELIVERY_MODE,
        "status": "active",
        "token_sha256": token_sha256(token),
        "token_generation": (int(prev.get("token_generation") or 0) + 1) if prev else 1,
        "created_at": prev["created_at"] if prev else now,
        "updated_at": now,
        "trigger_count": int(prev.get("trigger_count") or 0) if prev else 0,
        "last_triggered_at": prev.get("last_triggered_at") if prev else None,
    }
    # the secret file first: a crash after it leaves the old record (and a
    # token that does not match it), which the next ensure() repairs
    _write_token(store, token)
    _write(store, rec, op)
    return rec


def ensure(store: AgentStore) -> TriggerRecord:
    """The agent's capability, provisioned on first use (never a duplicate)."""
    rec = _read(store)
    if rec is not None and (rec["status"] != "active" or _token_ok(store, rec)):
        return rec
    with _lock(store):
        rec = _read(store)
        if rec is None:
            rec = _mint(store, None, "provisioned")
            data: TriggerProvisionedData = {
                "external_trigger_id": rec["external_trigger_id"],
                "delivery_mode": DELIVERY_MODE,
            }
            store.emit(
                "trigger_provisioned",
                data,
            )
        elif rec["status"] == "active" and not _token_ok(store, rec):
            # the secret file is gone or stale (a crash mid-rotate): re-mint
            rec = _mint(store, rec, "repaired")
    return rec


def _token_ok(store: AgentStore, rec: TriggerRecord) -> bool:
    tok = _read_token(store)
    return tok is not None and token_matches(tok, rec.get("token_sha256"))


def show(store: AgentStore, *, advertise: str | None = None) -> TriggerDescriptor:
    rec = ensure(store)
    tok = _read_token(store) if rec["status"] == "active" else None
    return descriptor(rec, trigger_url(tok, advertise) if tok else None)


def context_descriptor(store: AgentStore, *, provision: bool = True) -> TriggerDescriptor | None:
    """The descriptor a turn's prompt shows, read again every round (a revoke
    takes the URL out of the next request). Provisions the capability on
    first use when ``provision``; otherwise ``None`` until one exists. An
    intact capability is only read: the token file is ours, so it is checked
    against the stored hash without a constant-time comparison (no presented
    token is involved, and the turn does not load OpenSSL for it)."""
    rec = _read(store)
    if rec is None:
        return show(store) if provision else None
    if rec["status"] != "active":
        return descriptor(rec, None)
    tok = _read_token(store)
    if tok is None or token_sha256(tok) != rec.get("token_sha256"):
        return show(store)  # the secret file is gone or stale: ensure() repairs it
    return descriptor(rec, trigger_url(tok))


def rotate(store: AgentStore, *, advertise: str | None = None) -> TriggerDescriptor:
    """A new token; the old one fails from now on. Also re-activates a revoked capability."""
    ensure(store)
    with _lock(store):
        prev = _read(store)
        rec = _mint(store, prev, "rotated")
    data: TriggerRotatedData = {
        "external_trigger_id": rec["external_trigger_id"],
        "token_generation": rec["token_generation"],
        "previous_status": prev["status"] if prev else None,
    }
    store.emit(
        "trigger_rotated",
        data,
    )
    tok = _read_token(store)
    return descriptor(rec, trigger_url(tok, advertise) if tok else None)


def revoke(store: AgentStore) -> tuple[TriggerDescriptor, bool]:
    """Every token fails until the next rotate. Returns (descriptor, changed)."""
    ensure(store)
    with _lock(store):
        rec = _read(store)
        assert rec is not None
        changed = rec["status"] != "revoked"
        if changed:
            rec = {**rec, "status": "revoked", "token_sha256": None, "updated_at": clock.now_iso()}
            _write(store, rec, "revoked")
            _remove_token(store)
    if changed:
        revoked: TriggerRevokedData = {"external_trigger_id": rec["external_trigger_id"]}
        store.emit("trigger_revoked", revoked)
    return descriptor(rec, None), changed


# ------------------------------------------------------------ delivery


class Delivery(NamedTuple):
    """The result of one accepted callback delivery."""

    disposition: str  # system_tick_admitted | coalesced
    agent_id: str
    external_trigger_id: str
    trigger_count: int
    coalesced_count: int
    message_id: str | None
    waiting_intent_ids: list[str]
    received_at: str

    def to_dict(self) -> JsonObject:
        return dict(self._asdict())


def _invalid_token() -> RejectedError:
    return RejectedError(
        "invalid callback token",
        hint=(
            "the token is unknown or was revoked or rotated; ask the agent's operator for the "
            "current URL (`holon trigger show`)"
        ),
        kind="invalid_callback_token",
    )


def find_target(token: str) -> tuple[AgentStore, TriggerRecord]:
    """The agent whose active capability matches ``token`` (constant-time
    hash comparison against every agent). Raises RejectedError otherwise."""
    from holon_cli.store.layout import HomeLayout

    if not TOKEN_RE.match(token):
        raise _invalid_token()
    home = HomeLayout.current()
    try:
        names = sorted(os.listdir(home.agents_dir))
    except FileNotFoundError:
        raise _invalid_token() from None
    found: tuple[AgentStore, TriggerRecord] | None = None
    for name in names:
        if name.startswith("."):
            continue
        layout = home.agent(name)
        try:
            rec = _read(AgentStore(layout))
        except HolonError:
            continue
        if rec is None or rec.get("status") != "active":
            continue
        # compare against every agent: timing does not depend on which matched
        if token_matches(token, rec.get("token_sha256")) and found is None:
            found = (AgentStore(layout), rec)
    if found is None:
        raise _invalid_token()
    return found


def parse_body(body: bytes, content_type: str | None) -> JsonObject | None:
    """The delivery body as a message body value (``None`` when empty)."""
    if len(body) > MAX_BODY_BYTES:
        raise UsageError(
            f"callback body is {len(body)} bytes; the limit is {MAX_BODY_BYTES} (256 KiB)",
            hint="send a small notification and let the agent fetch the details",
            kind="payload_too_large",
        )
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    if not body.strip():
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(
            "callback body is not UTF-8 text",
            hint="send JSON or text; binary payloads are not accepted",
            kind="invalid_body",
        ) from None
    if ctype == "application/json" or ctype.endswith("+json"):
        from holon_cli.model.jsontext import parse_json

        try:  # the one JSON door: no NaN, lone surrogates, runaway nesting
            return {"type": "json", "value": parse_json(text, "callback body")}
        except UsageError as exc:
            raise UsageError(
                exc.message,
                hint="send valid JSON, or another content type for plain text",
                kind="invalid_json",
            ) from None
    return {"type": "text", "text": text}


def deliver(
    token: str,
    body: bytes = b"",
    content_type: str | None = None,
    source: str | None = None,
    *,
    correlation_id: str | None = None,
    causation_id: str | None = None,
) -> Delivery:
    """The callback ingress (``POST /callbacks/wake/{token}``), run in-process.

    Validates everything first (token, target agent, body); a refusal raises
    a :class:`~holon_cli.errors.HolonError` whose ``kind`` maps to an HTTP
    status through :data:`HTTP_STATUS_BY_KIND`, and nothing is persisted.
    Then: delivery tracking on the capability and on the agent's active
    waiting intents, and the wake hint (see :mod:`.hints`)."""
    from holon_cli.runtime.waiting import hints, intents

    token = token_from(token)
    store, _rec = find_target(token)
    state = store.read_record()["state"]
    if state["status"] == "stopped":
        raise RejectedError(
            f"agent {store.agent_id!r} is stopped; the delivery was not accepted",
            hint=lifecycle_hint("stopped") or "",
            kind="agent_stopped",
        )
    parsed = parse_body(body, content_type)
    if source is not None:
        source = source.strip()[:200] or None
    at = clock.now_iso()
    cur = _count_delivery(store, token, at, source=source, content_type=content_type)
    touched = intents.mark_triggered(store, at)
    intent_ids = [w["id"] for w in touched]
    hint: WakeHint = {
        "external_trigger_id": cur["external_trigger_id"],
        "target_agent_id": store.agent_id,
        "delivery_mode": DELIVERY_MODE,
        "source": source,
        "content_type": content_type,
        "body": parsed,
        "correlation_id": correlation_id,
        "causation_id": causation_id,
        "waiting_intent_ids": intent_ids,
        "work_item_ids": sorted({w["work_item_id"] for w in touched}),
        "received_at": at,
    }
    outcome = hints.submit(store, hint)
    _emit_delivered(store, cur, hint, outcome, body_bytes=len(body))
    return Delivery(
        disposition=outcome["disposition"],
        agent_id=store.agent_id,
        external_trigger_id=cur["external_trigger_id"],
        trigger_count=int(cur["trigger_count"]),
        coalesced_count=int(outcome["coalesced_count"]),
        message_id=outcome.get("message_id"),
        waiting_intent_ids=list(intent_ids),
        received_at=at,
    )


def _count_delivery(
    store: AgentStore, token: str, at: str, *, source: str | None, content_type: str | None
) -> TriggerRecord:
    """Record an accepted delivery on the capability. The token is checked
    again under the lock: a rotate or revoke that won the race makes this
    delivery fail."""
    with _lock(store):
        cur = _read(store)
        if (
            cur is None
            or cur["status"] != "active"
            or not token_matches(token, cur.get("token_sha256"))
        ):
            raise _invalid_token()
        cur = {
            **cur,
            "trigger_count": int(cur.get("trigger_count") or 0) + 1,
            "last_triggered_at": at,
            "updated_at": at,
        }
        _write(store, cur, "delivered", delivered=(source, content_type))
    return cur


def _emit_delivered(
    store: AgentStore,
    cur: TriggerRecord,
    hint: WakeHint,
    outcome: HintOutcome,
    *,
    body_bytes: int,
) -> None:
    """The ``external_trigger_delivered`` event: the delivery as the wake
    hint describes it, and what became of the hint."""
    source = hint["source"]
    delivered: ExternalTriggerDeliveredData = {
        "external_trigger_id": cur["external_trigger_id"],
        "delivery_mode": DELIVERY_MODE,
        "source": source,
        "content_type": hint["content_type"],
        "body_bytes": body_bytes,
        "disposition": outcome["disposition"],
        "message_id": outcome.get("message_id"),
        "coalesced_count": outcome["coalesced_count"],
        "waiting_intent_ids": hint["waiting_intent_ids"],
        "work_item_ids": hint["work_item_ids"],
        "trigger_count": cur["trigger_count"],
    }
    store.emit(
        "external_trigger_delivered",
        delivered,
        origin={"kind": "callback", "descriptor_id": cur["external_trigger_id"], "source": source},
        trust="trusted_integration",
        authority_class="integration_signal",
        delivery_surface="http_callback_wake",
        admission_context="external_trigger_capability",
        correlation_id=hint["correlation_id"],
    )
