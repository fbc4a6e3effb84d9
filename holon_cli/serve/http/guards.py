"""The guards every request to ``holon serve``'s HTTP surface passes before
its handler (the rules are listed in :mod:`holon_cli.serve.http.app`): the
``Host`` check, no cross-site control, the caller's token or console cookie,
JSON content type, the public routes' rate limit, and :func:`guarded`, which
wraps a route's handler in the guards of its access level."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from holon_cli.errors import HolonError
from holon_cli.serve.http.common import HttpSettings as HttpSettings
from holon_cli.serve.http.common import (
    OriginKey,
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
    if not ok and not auth:  # the web console's login cookie (serve/http/ui/session.py)
        from holon_cli.serve.http.ui.session import session_ok

        ok = session_ok(request, token)
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


def check_access(request: Request, access: str) -> None:
    """The guards of ``access`` (raising :class:`HttpError`): ``control``
    (origin, token or loopback, JSON POSTs), ``public`` (rate limit),
    ``browser`` (not cross-site: the console's login) or ``open`` (the
    ``Host`` check every request passes)."""
    ctx = ctx_of(request)
    check_host(request, ctx)
    if access == "public":
        check_rate(request, ctx)
    elif access == "control":
        check_control(request, ctx)
    elif access == "browser":
        check_not_cross_site(request, ctx.own_origins)


def guarded(handler: Handler, access: str) -> Handler:
    """``handler`` behind the guards of its ``access``: ``control`` (origin,
    token or loopback, JSON POSTs), ``public`` (rate limit) or ``open``."""

    async def wrapped(request: Request) -> Response:
        try:
            check_access(request, access)
            return await handler(request)
        except HttpError as e:
            return error_response(e.status, e.kind, e.message, e.hint, e.headers)
        except HolonError as e:
            return from_holon(e)

    return wrapped
