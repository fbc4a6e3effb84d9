"""The HTTP surface of ``holon serve``: the starlette app, its route table and
the guards every request passes. The handlers are module-level functions in
``serve/http/routes.py`` (control and read routes) and
``serve/http/public.py`` (public ingress); what they share (settings, the
per-app :class:`ServeContext`, body and agent helpers) is in
``serve/http/common.py``. The listen address lives in ``serve/http/listen.py``,
the uvicorn server in ``serve/http/server.py``, the public ingress policy in
``serve/http/ingress.py``, webhook signatures and replay dedupe in
``serve/http/webhooks.py``.

Every route calls the same runtime functions as the CLI (``admit``,
``agent_summary``, ``create_work_item``, ``tail_events``); these modules only
add transport concerns:

- ``Host`` check on every request (DNS rebinding): the listen host,
  ``localhost``, ``127.0.0.1``, ``[::1]`` or the ``--advertise`` host, else 403;
- no cross-site control: a control route refuses (403) a request whose
  ``Origin`` is not one of the server's own origins (``Origin: null``
  included) or whose ``Sec-Fetch-Site`` is ``cross-site`` or ``same-site``
  (another port of localhost is "same-site"); a control POST with a body needs
  ``Content-Type: application/json`` (415), so a page cannot send one as a
  "simple" request without a preflight; no CORS header is ever sent.
  Requests without ``Origin`` (curl, the CLI) are not browsers' and pass;
- control routes (``/control/...``, ``/agents/...``, ``/events``) need
  ``Authorization: Bearer <token>`` whenever a token is configured (compared
  in constant time); without a token serve listens on loopback only, and a
  request from elsewhere is refused; the Unix socket is token-free (its 0600
  mode is the access control);
- the public routes (``POST /agents/{id}/enqueue``, ``/webhooks/...``,
  ``/callbacks/...``) need no token and are rate-limited per client address
  (``ingress.rate_per_minute``, 429); they admit external evidence only;
- the client address is the connection's peer: ``X-Forwarded-For``,
  ``Forwarded`` and ``X-Real-IP`` count only from a peer named in
  ``serve.trusted_proxies`` (``serve/http/proxies.py``; uvicorn's own proxy
  handling is off);
- bodies are capped (1 MiB prompts, enqueues and webhooks, 256 KiB
  callbacks: 413) and must be standard JSON where JSON is expected (400);
- every error is ``{"error": {"kind", "message", "hint"}}``; nothing is
  persisted on a refusal.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from holon_cli.errors import HolonError
from holon_cli.serve.http import public
from holon_cli.serve.http import routes as control
from holon_cli.serve.http.common import HttpSettings as HttpSettings
from holon_cli.serve.http.common import (
    OriginKey,
    RuntimeStatus,
    ServeContext,
    ctx_of,
    via_unix,
)
from holon_cli.serve.http.errors import HttpError as HttpError
from holon_cli.serve.http.errors import error_response as error_response
from holon_cli.serve.http.errors import from_holon
from holon_cli.serve.http.listen import is_loopback

# ------------------------------------------------------------ browsers

_DEFAULT_PORTS = {"http": 80, "https": 443}
# what a browser says of a request it makes on a page's behalf: only the
# server's own pages ("same-origin") and a typed-in URL ("none") may control
_OWN_FETCH_SITES = {"same-origin", "none"}


def origin_key(value: str, *, url: bool = False) -> OriginKey | None:
    """``scheme://host[:port]`` -> (scheme, host, port) with the default port
    filled in; None for anything else (``null``, a path, a bad port). With
    ``url`` a path is allowed (the origin of the ``--advertise`` URL)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in ("", "/") and not url:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def own_origins(settings: HttpSettings) -> set[OriginKey]:
    """The origins of this server: each loopback name and the listen host on
    the bound port, and the ``--advertise`` origin."""
    hosts = {"127.0.0.1", "localhost", "::1", settings.host.lower().strip("[]")}
    own = {("http", h, settings.port) for h in hosts}
    adv = origin_key(settings.advertise, url=True) if settings.advertise else None
    if adv is not None:
        own.add(adv)
    return own


def allowed_hosts(settings: HttpSettings) -> set[str]:
    """The ``Host`` names served (DNS rebinding protection)."""
    host = settings.host.lower()
    allowed = {"localhost", "127.0.0.1", "[::1]", "::1", host, f"[{host}]"}
    allowed |= settings.allowed_hosts
    if settings.advertise:
        adv = urlsplit(settings.advertise).hostname
        if adv:
            allowed.add(adv.lower())
    return allowed


# ------------------------------------------------------------ guards


def check_host(request: Request, ctx: ServeContext) -> None:
    if via_unix(request):
        return
    raw = request.headers.get("host", "")
    name = raw.rsplit(":", 1)[0] if not raw.endswith("]") else raw
    if name.lower() not in ctx.allowed_hosts:
        raise HttpError(
            403,
            "forbidden_host",
            f"host {raw!r} is not served here",
            "use the listen address, localhost or 127.0.0.1 (DNS rebinding protection)",
        )


def check_not_cross_site(request: Request, own: set[OriginKey]) -> None:
    """403 for a request a browser makes on behalf of another site's page."""
    hint = "control routes serve the CLI, scripts and this server's own pages only"
    site = request.headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in _OWN_FETCH_SITES:
        raise HttpError(
            403, "cross_site", f"cross-site request refused (Sec-Fetch-Site: {site})", hint
        )
    origin = request.headers.get("origin")
    if origin is not None and origin_key(origin) not in own:
        raise HttpError(
            403, "cross_site", f"requests from origin {origin!r} may not use control routes", hint
        )


def check_control(request: Request, ctx: ServeContext) -> None:
    if via_unix(request):
        return  # a browser cannot reach the 0600 socket
    check_not_cross_site(request, ctx.own_origins)
    check_caller(request, ctx.settings.token)
    if request.method == "POST":
        check_json_content_type(request)


def client_of(request: Request) -> str:
    """The client's address: the connection's peer, or what a proxy named in
    ``serve.trusted_proxies`` forwarded (``serve/http/proxies.py``); forwarding
    headers from any other peer are ignored."""
    from holon_cli.serve.http.ingress import trusted_proxies
    from holon_cli.serve.http.proxies import client_host

    peer = request.client.host if request.client else ""
    return client_host(peer, request.headers.getlist, trusted_proxies())


def check_caller(request: Request, token: str | None) -> None:
    """The bearer token when one is set (401), else a loopback client (403)."""
    if token is None:
        client = client_of(request)
        if not is_loopback(client):
            raise HttpError(
                403,
                "forbidden",
                "control routes are served to loopback clients only",
                "configure HOLON_CONTROL_TOKEN or --token-file to allow remote control",
            )
        return
    auth = request.headers.get("authorization", "")
    scheme, _, given = auth.partition(" ")
    ok = scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
    if not ok:
        raise HttpError(
            401,
            "unauthorized",
            "missing or bad bearer token",
            "send `Authorization: Bearer <token>` (HOLON_CONTROL_TOKEN or --token-file)",
        )


def check_json_content_type(request: Request) -> None:
    """415 for a control POST with a body that is not ``application/json``
    (a bodiless POST such as shutdown may omit the header)."""
    ctype = request.headers.get("content-type")
    if ctype is None:
        length = request.headers.get("content-length")
        chunked = "transfer-encoding" in request.headers
        if not chunked and (length is None or length.strip() == "0"):
            return
    media = (ctype or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise HttpError(
            415,
            "unsupported_media_type",
            f"control POSTs take Content-Type: application/json, not {ctype or 'none'}",
            "send the body as JSON with `Content-Type: application/json`",
        )


def check_rate(request: Request, ctx: ServeContext) -> None:
    """Public routes: ``ingress.rate_per_minute`` per client address (429)."""
    from holon_cli.serve.http.ingress import rate_per_minute

    if via_unix(request):
        return
    client = client_of(request)
    wait = ctx.limiter.take(client, rate_per_minute())
    if wait is not None:
        raise HttpError(
            429,
            "rate_limited",
            f"too many requests from {client} (ingress.rate_per_minute)",
            f"retry in {wait:.0f} s, or raise ingress.rate_per_minute in config.yaml",
            headers={"Retry-After": str(max(1, round(wait + 0.5)))},
        )


# ------------------------------------------------------------ routes

Handler = Callable[[Request], Awaitable[Response]]


def guarded(handler: Handler, access: str) -> Handler:
    """``handler`` behind the guards of its ``access``: ``control`` (origin,
    token or loopback, JSON POSTs), ``public`` (rate limit) or ``open``."""

    async def wrapped(request: Request) -> Response:
        ctx = ctx_of(request)
        try:
            check_host(request, ctx)
            if access == "public":
                check_rate(request, ctx)
            elif access == "control":
                check_control(request, ctx)
            return await handler(request)
        except HttpError as e:
            return error_response(e.status, e.kind, e.message, e.hint, e.headers)
        except HolonError as e:
            return from_holon(e)

    return wrapped


# (path, handler, access, method)
ROUTES: list[tuple[str, Handler, str, str]] = [
    ("/healthz", control.healthz, "open", "GET"),
    ("/status", control.default_status, "control", "GET"),
    ("/state", control.default_state, "control", "GET"),
    ("/events", control.default_events, "control", "GET"),
    ("/control/runtime/status", control.runtime_status_route, "control", "GET"),
    ("/control/runtime/shutdown", control.shutdown, "control", "POST"),
    ("/agents/list", control.agents_list, "control", "GET"),
    ("/agents/{agent_id}/status", control.agent_status, "control", "GET"),
    ("/agents/{agent_id}/state", control.agent_state, "control", "GET"),
    ("/agents/{agent_id}/events", control.events_page, "control", "GET"),
    ("/agents/{agent_id}/events/stream", control.events_stream, "control", "GET"),
    ("/control/agents/{agent_id}/prompt", control.control_prompt, "control", "POST"),
    ("/control/agents/{agent_id}/work-items", control.control_work_item, "control", "POST"),
    ("/control/agents/{agent_id}/abort", control.control_abort, "control", "POST"),
    ("/control/agents/{agent_id}/pause", control.control_pause, "control", "POST"),
    ("/control/agents/{agent_id}/start", control.control_start, "control", "POST"),
    ("/agents/{agent_id}/workspaces", control.agent_workspaces, "control", "GET"),
    ("/control/agents/{agent_id}/workspace", control.control_workspace, "control", "POST"),
    ("/agents/{agent_id}/mcp", control.agent_mcp, "control", "GET"),
    (
        "/control/agents/{agent_id}/mcp/requests/{request_id}/answer",
        control.control_mcp_answer,
        "control",
        "POST",
    ),
    ("/agents/{agent_id}/enqueue", public.public_enqueue, "public", "POST"),
    ("/webhooks/{source}/{agent_id}", public.webhook, "public", "POST"),
    ("/callbacks/wake/{token}", public.callback_wake, "public", "POST"),
]


async def _not_found(request: Request, _exc: Exception) -> Response:
    return error_response(404, "not_found", f"no route {request.url.path}", "see GET /healthz")


async def _not_allowed(request: Request, _exc: Exception) -> Response:
    return error_response(
        405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}"
    )


def build_app(
    settings: HttpSettings,
    *,
    runtime_status: RuntimeStatus,
    request_shutdown: Callable[[], None],
    stopping: threading.Event,
) -> Starlette:
    from holon_cli import clock
    from holon_cli.serve.http.ingress import RateLimiter

    routes = [
        Route(path, guarded(handler, access), methods=[method])
        for path, handler, access, method in ROUTES
    ]
    app = Starlette(routes=routes, exception_handlers={404: _not_found, 405: _not_allowed})
    app.state.holon = ServeContext(
        settings=settings,
        runtime_status=runtime_status,
        request_shutdown=request_shutdown,
        stopping=stopping,
        allowed_hosts=allowed_hosts(settings),
        own_origins=own_origins(settings),
        limiter=RateLimiter(clock.now),
    )
    return app
