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
  Every header is parsed strictly (ASCII digits only in a timestamp, a
  bounded length): a malformed one is a 401 like a wrong signature, never a
  server error.
- **Replay dedupe**: a delivery id (``X-GitHub-Delivery``, ``webhook-id``)
  seen before for the same source is answered 200 ``{"duplicate": true}``
  with no second message, signed or not. GitHub signs only the body, not
  the delivery id, so with a ``github`` secret the id is required (400
  without) and a body whose signature was admitted for the agent in the last
  :data:`BODY_DEDUPE_S` (24 h) is a duplicate whatever its delivery id: a
  captured delivery cannot be replayed under fresh ids. (Standard Webhooks
  signs the id and the timestamp: a replay needs the same id, or a fresh
  timestamp it cannot sign.) The records live in the agent's
  ``webhook_deliveries`` ledger (so a restart remembers them) for
  :data:`DEDUPE_TTL_S`; the check, the admission and the record happen under
  one lock, so two concurrent copies of a delivery admit one message.
- **Bodies**: JSON by its Content-Type, else UTF-8 text; GitHub's
  ``application/x-www-form-urlencoded`` deliveries carry the JSON in a
  ``payload`` field, which becomes the JSON body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from holon_cli import clock
from holon_cli.serve.http.errors import HttpError

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope

TOLERANCE_S = 300  # Standard Webhooks: 5 minutes either way
DEDUPE_TTL_S = 7 * 86400  # senders retry for up to ~3 days; keep a margin
BODY_DEDUPE_S = 86400  # a github-signed body admitted this recently is a replay
LEDGER = "webhook_deliveries"
COMPACT_BYTES = 256 << 10
DELIVERY_ID_RE = re.compile(r"^[\x21-\x7e]{1,200}$")
JSON_TYPES = ("application/json", "text/json")
FORM_TYPE = "application/x-www-form-urlencoded"
TIMESTAMP_RE = re.compile(r"^[0-9]{1,12}$")  # ASCII only: str.isdigit() takes "²"
SIGNATURE_MAX = 4096  # a header longer than any real signature list is refused


# ------------------------------------------------------------ signatures


def _unauthorized(message: str, hint: str) -> HttpError:
    return HttpError(401, "bad_signature", message, hint)


def verify_github(secret: str, body: bytes, headers: Mapping[str, str]) -> str:
    """Check ``X-Hub-Signature-256``; the body's signature key (for the
    body dedupe: a digest of the signature, not the signature)."""
    given = headers.get("x-hub-signature-256", "").strip()
    if not given:
        raise _unauthorized(
            "the delivery has no X-Hub-Signature-256 header",
            "set the webhook's secret on GitHub to the value of secret_env",
        )
    mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    want = f"sha256={mac}"
    if not hmac.compare_digest(given.encode("utf-8", "replace"), want.encode()):
        raise _unauthorized(
            "X-Hub-Signature-256 does not match the body",
            "check that GitHub's webhook secret equals the value of secret_env",
        )
    if not headers.get("x-github-delivery", "").strip():
        raise HttpError(
            400,
            "missing_delivery_id",
            "a signed GitHub delivery needs its X-GitHub-Delivery header",
            "GitHub always sends it; a client replaying a body without it is refused",
        )
    return hashlib.sha256(want.encode()).hexdigest()


def verify_standard(key: bytes, body: bytes, headers: Mapping[str, str], now: float) -> None:
    wid = headers.get("webhook-id", "").strip()
    stamp = headers.get("webhook-timestamp", "").strip()
    sigs = headers.get("webhook-signature", "").strip()
    hint = "send webhook-id, webhook-timestamp and webhook-signature (Standard Webhooks)"
    if not (wid and stamp and sigs):
        raise _unauthorized("the delivery lacks the Standard Webhooks headers", hint)
    if not DELIVERY_ID_RE.match(wid):
        raise _unauthorized("webhook-id is not 1-200 visible ASCII characters", hint)
    if not TIMESTAMP_RE.match(stamp):
        raise _unauthorized("webhook-timestamp is not a Unix time in seconds", hint)
    if len(sigs) > SIGNATURE_MAX:
        raise _unauthorized("webhook-signature is too long", hint)
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
        if version == "v1" and hmac.compare_digest(value.encode("utf-8", "replace"), want):
            ok = True
    if not ok:
        raise _unauthorized(
            "no webhook-signature matches the body",
            "check that the sender's secret equals the value of secret_env (whsec_...)",
        )


def verify(
    source: str, hook: Mapping[str, Any] | None, body: bytes, headers: Mapping[str, str]
) -> str | None:
    """Check the delivery against ``ingress.webhooks.<source>`` (no secret:
    no check). Returns the body key of a ``github``-signed delivery (the
    body dedupe's key), else None."""
    from holon_cli.store.config_schema import standard_secret

    env_name = (hook or {}).get("secret_env")
    if not env_name:
        return None
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
        return None
    return verify_github(secret, body, headers)


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
    """The message text and whether it is JSON (by its Content-Type). A form
    (``application/x-www-form-urlencoded``) with a ``payload`` field is
    GitHub's form delivery: the field's JSON is the body."""
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
    if media == FORM_TYPE:
        payload = _form_payload(text)
        if payload is not None:
            return payload, True
    return text, is_json


def _form_payload(text: str) -> str | None:
    """The JSON text of a form's ``payload`` field; None when the form has
    none (then the form stays text); 400 when it is not one JSON value."""
    from urllib.parse import parse_qs

    from holon_cli.errors import UsageError
    from holon_cli.model.jsontext import parse_json

    try:
        fields = parse_qs(text, keep_blank_values=True, errors="strict", max_num_fields=1000)
    except (ValueError, UnicodeDecodeError):
        return None  # not a form after all: keep it as text
    values = fields.get("payload")
    if values is None:
        return None
    hint = "send the JSON in one `payload=` field, or as application/json"
    if len(values) != 1:
        raise HttpError(400, "invalid_body", "the form has more than one payload field", hint)
    try:
        parse_json(values[0].encode("utf-8"))
    except UsageError as exc:
        raise HttpError(
            400, "invalid_body", f"the form's payload is not JSON: {exc.message}", hint
        ) from None
    return values[0]


# ------------------------------------------------------------ dedupe


def _seen(store: Any, source: str, did: str | None, body_key: str | None, now: float) -> str | None:
    """The message id of a live record of this delivery (its id from this
    source, or its signed body for the agent), if any."""
    records, _problems = store.ledger(LEDGER).records_skipping_damaged()
    for rec in reversed(records):
        age = now - float(rec.get("at") or 0)
        same_id = did is not None and rec.get("source") == source and rec.get("delivery_id") == did
        same_body = body_key is not None and rec.get("body_key") == body_key
        if (same_id and age <= DEDUPE_TTL_S) or (same_body and age <= BODY_DEDUPE_S):
            return str(rec.get("message_id") or "")
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


class Receipt(TypedDict):
    """What a webhook delivery came to: the message it admitted, or
    ``duplicate`` and the message of its first delivery (``None``: unknown)."""

    message_id: str | None
    duplicate: NotRequired[bool]


def receive(
    store: Any,
    source: str,
    did: str | None,
    admit_one: Callable[[], Envelope],
    body_key: str | None = None,
) -> Receipt:
    """Admit once per delivery id (and per signed body, given its
    ``body_key``): ``{"message_id"}`` or ``{"duplicate": True, ...}``."""
    if did is None and body_key is None:
        return {"message_id": admit_one()["id"]}
    from holon_cli.store.locks import locked

    lock = store.layout.locks_dir / "webhook_dedupe.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with locked(lock, what=f"webhook deliveries of agent {store.agent_id!r}"):
        now = clock.now()
        first = _seen(store, source, did, body_key, now)
        if first is not None:
            return {"duplicate": True, "message_id": first or None}
        env = admit_one()
        rec = {"source": source, "delivery_id": did, "message_id": env["id"], "at": now}
        if body_key is not None:
            rec["body_key"] = body_key
        store.ledger(LEDGER).append(rec)
        _compact(store, now)
    return {"message_id": env["id"]}
