"""The public ingress policy of ``holon serve``: what ``POST
/agents/{id}/enqueue`` (no token) may admit, checked before the project's
admission function runs.

Only ``channel:``/``webhook:`` origins, never ``interject``, never a
caller-supplied trust or authority, and the kind that matches the origin; a
refusal is an :class:`~holon_cli.serve.http.errors.HttpError` and persists nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from holon_cli.serve.http.errors import HttpError

if TYPE_CHECKING:
    from holon_cli.model.config import WebhookConfig
    from holon_cli.model.typed_base import JsonObject

PUBLIC_ORIGINS = {"channel": "http_public_enqueue", "webhook": "http_webhook"}
PUBLIC_KEYS = {"text", "json", "origin", "kind", "priority", "correlation_id"}


def public_admit(
    agent_id: str,
    body: JsonObject,
    *,
    admit: Callable[..., Any],
    parse_origin: Callable[[str], Any],
    default_kind: dict[str, str],
    open_store: Callable[[str], Any],
) -> Any:
    """The public-ingress policy, then the project's admission function."""
    forbidden = sorted(k for k in body if k.startswith(("trust", "authority")))
    if forbidden:
        raise HttpError(
            403,
            "forbidden_field",
            f"public ingress may not set {', '.join(forbidden)}",
            "trust and authority are derived from the origin",
        )
    unknown = sorted(set(body) - PUBLIC_KEYS)
    if unknown:
        raise HttpError(400, "invalid_body", f"unknown field(s): {', '.join(unknown)}", "")
    origin = body.get("origin")
    if not isinstance(origin, str) or ":" not in origin:
        raise HttpError(
            403,
            "forbidden_origin",
            "public ingress needs an origin `channel:<id>` or `webhook:<source>`",
            "operator prompts go to POST /control/agents/{id}/prompt with a token",
        )
    okind = origin.split(":", 1)[0]
    if okind not in PUBLIC_ORIGINS:
        raise HttpError(
            403,
            "forbidden_origin",
            f"origin {okind!r} is not admitted on public ingress",
            "use `channel:<id>` or `webhook:<source>`",
        )
    parse_origin(origin)  # a malformed one is a 400 (UsageError)
    priority = body.get("priority", "normal")
    if priority == "interject":
        raise HttpError(
            403, "forbidden_priority", "public ingress may not interject", "use next or normal"
        )
    kind = body.get("kind")
    if kind is not None and kind != default_kind[okind]:
        raise HttpError(
            403,
            "forbidden_kind",
            f"kind {kind!r} does not match origin {okind!r}",
            f"omit kind or use {default_kind[okind]!r}",
        )
    has_text, has_json = "text" in body, "json" in body
    if has_text == has_json:
        raise HttpError(400, "invalid_body", "send exactly one of `text` or `json`", "")
    if has_text and not isinstance(body["text"], str):
        raise HttpError(400, "invalid_body", "`text` must be a string", "")
    text = body["text"] if has_text else json.dumps(body["json"])
    correlation = body.get("correlation_id")
    if correlation is not None and not isinstance(correlation, str):
        raise HttpError(400, "invalid_body", "`correlation_id` must be a string", "")
    store = open_store(agent_id)
    return admit(
        text,
        store=store,
        json_body=has_json,
        kind=default_kind[okind],
        origin=origin,
        priority=priority if isinstance(priority, str) else "?",
        correlation_id=correlation,
        delivery_surface=PUBLIC_ORIGINS[okind],
        admission_context="public_unauthenticated",
    )


# ------------------------------------------------------------ rate limits

DEFAULT_RATE_PER_MINUTE = 60
_MAX_TRACKED = 10_000


class RateLimiter:
    """Per-client token buckets for the public routes (``ingress.rate_per_minute``):
    a client may send ``rate`` requests at once, then one every ``60/rate`` s.
    Used from the event loop's thread only (no lock)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)

    def take(self, client: str, rate: int) -> float | None:
        """Spend one request; None when allowed, else the seconds to wait."""
        t = self.now()
        tokens, at = self._buckets.get(client, (float(rate), t))
        tokens = min(float(rate), tokens + (t - at) * rate / 60.0)
        if tokens < 1.0:
            self._buckets[client] = (tokens, t)
            return (1.0 - tokens) * 60.0 / rate
        self._buckets[client] = (tokens - 1.0, t)
        if len(self._buckets) > _MAX_TRACKED:
            self._prune(t, rate)
        return None

    def _prune(self, t: float, _rate: int) -> None:
        """Forget clients whose bucket has refilled (they are back to a full one)."""
        full = 60.0  # a minute refills any bucket
        for client, (_tokens, at) in list(self._buckets.items()):
            if t - at >= full:
                del self._buckets[client]


def rate_per_minute() -> int:
    """``ingress.rate_per_minute`` from config.yaml (checked by the schema);
    the default while config.yaml is broken (serve keeps limiting)."""
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        section = load_config().get("ingress") or {}
    except ConfigError:
        return DEFAULT_RATE_PER_MINUTE
    return int(section.get("rate_per_minute") or DEFAULT_RATE_PER_MINUTE)


def trusted_proxies() -> tuple[Any, ...]:
    """``serve.trusted_proxies`` as networks; none while config.yaml is
    broken (forwarding headers are then ignored)."""
    from holon_cli.errors import ConfigError
    from holon_cli.serve.http.proxies import parse_trusted
    from holon_cli.store.config import load_config

    try:
        entries = (load_config().get("serve") or {}).get("trusted_proxies") or []
    except ConfigError:
        return ()
    return parse_trusted(tuple(str(e) for e in entries))


def webhook_config(source: str) -> WebhookConfig | None:
    """``ingress.webhooks.<source>``; while config.yaml is broken no delivery
    is taken (its secret cannot be known): 503."""
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        hooks = (load_config().get("ingress") or {}).get("webhooks") or {}
    except ConfigError as exc:
        raise HttpError(
            503,
            "config_error",
            f"webhooks are paused: {exc.message}",
            "fix config.yaml (`holon home check`); the sender will retry",
        ) from None
    hook = hooks.get(source)
    return hook if isinstance(hook, dict) else None


def check_ingress_env() -> None:
    """At serve start: a webhook secret the environment lacks is a ConfigError
    naming the key (the schema checked the file itself on load)."""
    import os

    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config
    from holon_cli.store.config_schema import ingress_problems

    problems = ingress_problems(load_config(), os.environ)
    if problems:
        key, message = problems[0]
        raise ConfigError(
            f"config.yaml: {message}",
            hint="export the variable before `holon serve`, or fix the key in config.yaml",
            details={"key": key},
        )
