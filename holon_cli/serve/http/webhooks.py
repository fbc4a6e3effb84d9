"""Webhook deliveries: ``POST /webhooks/{source}/{agent_id}``.

Any body (JSON or text) becomes a ``webhook_event`` with origin
``webhook:<source>`` (evidence, ``trusted_integration``), admitted through the
project's one admission function on the ``http_webhook`` surface. What this
module adds:

- **Signatures** when ``config.yaml`` ``ingress.webhooks.<source>`` names a
  secret (``secret_env``): ``scheme: github`` checks ``X-Hub-Signature-256``
  (``sha256=<hex>`` HMAC-SHA256 of the raw body); ``scheme: standard`` checks
  Standard Webhooks (``webhook-id``, ``webhook-timestamp``,
  ``webhook-signature`` holding space-separated ``v1,<base64>`` HMAC-SHA256
  of ``id.timestamp.body`` under a ``whsec_<base64>`` secret, timestamp
  within 5 minutes). Compared in constant time. A missing or wrong signature
  or a stale timestamp is 401 and nothing is persisted.
- **Replay dedupe**: a delivery id (``X-GitHub-Delivery``, ``webhook-id``)
  seen before for the same source is answered 200 ``{"duplicate": true}``
  with no second message, signed or not. The ids live in the agent's
  ``webhook_deliveries`` ledger (so a restart remembers them) for
  :data:`DEDUPE_TTL_S`; the check, the admission and the record happen under
  one lock, so two concurrent copies of a delivery admit one message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from holon_cli import clock
from holon_cli.serve.http.errors import HttpError

TOLERANCE_S = 300  # Standard Webhooks: 5 minutes either way
DEDUPE_TTL_S = 7 * 86400  # senders retry for up to ~3 days; keep a margin
LEDGER = "webhook_deliveries"
COMPACT_BYTES = 256 << 10
DELIVERY_ID_RE = re.compile(r"^[\x21-\x7e]{1,200}$")
JSON_TYPES = ("application/json", "text/json")


# ------------------------------------------------------------ signatures


def _unauthorized(message: str, hint: str) -> HttpError:
    return HttpError(401, "bad_signature", message, hint)


def verify_github(secret: str, body: bytes, headers: Mapping[str, str]) -> None:
    given = headers.get("x-hub-signature-256", "").strip()
    if not given:
        raise _unauthorized(
            "the delivery has no X-Hub-Signature-256 header",
            "set the webhook's secret on GitHub to the value of secret_env",
        )
    mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given.encode(), f"sha256={mac}".encode()):
        raise _unauthorized(
            "X-Hub-Signature-256 does not match the body",
            "check that GitHub's webhook secret equals the value of secret_env",
        )


def verify_standard(key: bytes, body: bytes, headers: Mapping[str, str], now: float) -> None:
    wid = headers.get("webhook-id", "").strip()
    stamp = headers.get("webhook-timestamp", "").strip()
    sigs = headers.get("webhook-signature", "").strip()
    hint = "send webhook-id, webhook-timestamp and webhook-signature (Standard Webhooks)"
    if not (wid and stamp and sigs):
        raise _unauthorized("the delivery lacks the Standard Webhooks headers", hint)
    if not stamp.isdigit() or len(stamp) > 12:
        raise _unauthorized("webhook-timestamp is not a Unix time in seconds", hint)
    if abs(now - int(stamp)) > TOLERANCE_S:
        raise _unauthorized(
            f"webhook-timestamp is more than {TOLERANCE_S} s away from this server's clock",
            "a stale or replayed delivery; check both clocks (NTP) if it was fresh",
        )
    signed = f"{wid}.{stamp}.".encode() + body
    want = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    ok = False
    for item in sigs.split():
        version, _, value = item.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), want):
            ok = True
    if not ok:
        raise _unauthorized(
            "no webhook-signature matches the body",
            "check that the sender's secret equals the value of secret_env (whsec_...)",
        )


def verify(
    source: str, hook: Mapping[str, Any] | None, body: bytes, headers: Mapping[str, str]
) -> None:
    """Check the delivery against ``ingress.webhooks.<source>`` (no secret: no check)."""
    from holon_cli.store.config_schema import standard_secret

    env_name = (hook or {}).get("secret_env")
    if not env_name:
        return
    secret = os.environ.get(env_name, "").strip()
    scheme = (hook or {}).get("scheme") or "github"
    key = standard_secret(secret) if scheme == "standard" else None
    if not secret or (scheme == "standard" and key is None):
        # serve checks this at start; the environment cannot change since
        raise HttpError(
            500,
            "config_error",
            f"ingress.webhooks.{source}.secret_env: ${env_name} is not a usable secret",
            "export the secret before `holon serve` (`holon home check` lists this)",
        )
    if key is not None:
        verify_standard(key, body, headers, clock.now())
    else:
        verify_github(secret, body, headers)


def delivery_id(headers: Mapping[str, str]) -> str | None:
    raw = headers.get("x-github-delivery") or headers.get("webhook-id")
    if raw is None:
        return None
    raw = raw.strip()
    if not DELIVERY_ID_RE.match(raw):
        raise HttpError(
            400,
            "invalid_header",
            "the delivery id (X-GitHub-Delivery / webhook-id) must be 1-200 visible characters",
            "",
        )
    return raw


# ------------------------------------------------------------ body


def body_text(body: bytes, content_type: str | None) -> tuple[str, bool]:
    """The message text and whether it is JSON (by its Content-Type)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    is_json = media in JSON_TYPES or media.endswith("+json")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HttpError(
            400,
            "invalid_body",
            f"the delivery is not UTF-8 text (byte {exc.start})",
            "send JSON or UTF-8 text; binary payloads are not evidence",
        ) from None
    return text, is_json


# ------------------------------------------------------------ dedupe


def _seen(store: Any, source: str, did: str, now: float) -> str | None:
    """The message id of a live record of this delivery, if any."""
    records, _problems = store.ledger(LEDGER).records_skipping_damaged()
    for rec in reversed(records):
        if rec.get("source") == source and rec.get("delivery_id") == did:
            if now - float(rec.get("at") or 0) <= DEDUPE_TTL_S:
                return str(rec.get("message_id") or "")
            return None
    return None


def _compact(store: Any, now: float) -> None:
    """Drop expired records once the ledger is large (called under the lock)."""
    from holon_cli.store.fsio import atomic_write_bytes, dumps

    led = store.ledger(LEDGER)
    if led.size() < COMPACT_BYTES:
        return
    records, _problems = led.records_skipping_damaged()
    live = [r for r in records if now - float(r.get("at") or 0) <= DEDUPE_TTL_S]
    atomic_write_bytes(led.path, "".join(dumps(r) + "\n" for r in live).encode())


def receive(
    store: Any,
    source: str,
    did: str | None,
    admit_one: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """Admit once per delivery id: ``{"message_id"}`` or ``{"duplicate": True, ...}``."""
    if did is None:
        return {"message_id": admit_one()["id"]}
    from holon_cli.store.locks import locked

    lock = store.layout.locks_dir / "webhook_dedupe.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with locked(lock, what=f"webhook deliveries of agent {store.agent_id!r}"):
        now = clock.now()
        first = _seen(store, source, did, now)
        if first is not None:
            return {"duplicate": True, "message_id": first or None}
        env = admit_one()
        store.ledger(LEDGER).append(
            {"source": source, "delivery_id": did, "message_id": env["id"], "at": now}
        )
        _compact(store, now)
    return {"message_id": env["id"]}
