"""The HTTP surface of ``holon serve``: the starlette app and its routes.
The listen address lives in ``serve/listen.py``, the uvicorn server in
``serve/server.py``, the public ingress policy in ``serve/ingress.py``.

Every route calls the same runtime functions as the CLI (``admit``,
``agent_summary``, ``create_work_item``, ``tail_events``); this module only
adds transport concerns:

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
- the public ingress route ``POST /agents/{id}/enqueue`` needs no token and
  admits only ``channel:``/``webhook:`` origins, never ``interject``, never a
  caller-supplied trust or authority (``ingress.public_admit``);
- bodies are capped (1 MiB prompts and enqueues, 256 KiB callbacks: 413);
- every error is ``{"error": {"kind", "message", "hint"}}``; nothing is
  persisted on a refusal.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from holon_cli.errors import HolonError, UsageError
from holon_cli.model.jsontext import parse_json
from holon_cli.serve.http_errors import HttpError as HttpError
from holon_cli.serve.http_errors import error_response as error_response
from holon_cli.serve.http_errors import from_holon as _from_holon
from holon_cli.serve.http_errors import too_large as _too_large
from holon_cli.serve.listen import is_loopback

PROMPT_CAP = 1 << 20
CALLBACK_CAP = 256 << 10
EVENTS_DEFAULT_LIMIT = 100
EVENTS_MAX_LIMIT = 1000
SSE_POLL_S = 0.2
SSE_HEARTBEAT_S = 15.0


@dataclass
class HttpSettings:
    host: str
    port: int  # the bound TCP port (its own origins are http://<loopback>:port)
    token: str | None = None
    advertise: str | None = None
    socket_path: str | None = None
    allowed_hosts: set[str] = field(default_factory=set)


# ------------------------------------------------------------ browsers

OriginKey = tuple[str, str, int]
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


async def read_body(request: Request, cap: int) -> bytes:
    """The raw body, at most ``cap`` bytes (413 beyond, before reading it all)."""
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > cap:
        raise _too_large(cap)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise _too_large(cap)
        chunks.append(chunk)
    return b"".join(chunks)


# ------------------------------------------------------------------ app


RuntimeStatus = Callable[[], dict[str, Any]]


def build_app(
    settings: HttpSettings,
    *,
    runtime_status: RuntimeStatus,
    request_shutdown: Callable[[], None],
    stopping: threading.Event,
) -> Starlette:
    allowed = {
        "localhost",
        "127.0.0.1",
        "[::1]",
        "::1",
        settings.host.lower(),
        f"[{settings.host.lower()}]",
        *settings.allowed_hosts,
    }
    if settings.advertise:
        adv = urlsplit(settings.advertise).hostname
        if adv:
            allowed.add(adv.lower())
    own = own_origins(settings)

    def via_unix(request: Request) -> bool:
        server = request.scope.get("server")
        return server is None or server[1] is None

    def check_host(request: Request) -> None:
        if via_unix(request):
            return
        raw = request.headers.get("host", "")
        name = raw.rsplit(":", 1)[0] if not raw.endswith("]") else raw
        if name.lower() not in allowed:
            raise HttpError(
                403,
                "forbidden_host",
                f"host {raw!r} is not served here",
                "use the listen address, localhost or 127.0.0.1 (DNS rebinding protection)",
            )

    def check_control(request: Request) -> None:
        if via_unix(request):
            return  # a browser cannot reach the 0600 socket
        check_not_cross_site(request, own)
        if settings.token is None:
            client = request.client.host if request.client else ""
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
        ok = scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), settings.token.encode()
        )
        if not ok:
            raise HttpError(
                401,
                "unauthorized",
                "missing or bad bearer token",
                "send `Authorization: Bearer <token>` (HOLON_CONTROL_TOKEN or --token-file)",
            )

    from holon_cli import clock
    from holon_cli.serve.ingress import RateLimiter, rate_per_minute

    limiter = RateLimiter(clock.now)

    def check_rate(request: Request) -> None:
        """Public routes: ``ingress.rate_per_minute`` per client address (429)."""
        if via_unix(request):
            return
        client = request.client.host if request.client else ""
        wait = limiter.take(client, rate_per_minute())
        if wait is not None:
            raise HttpError(
                429,
                "rate_limited",
                f"too many requests from {client} (ingress.rate_per_minute)",
                f"retry in {wait:.0f} s, or raise ingress.rate_per_minute in config.yaml",
                headers={"Retry-After": str(max(1, round(wait + 0.5)))},
            )

    Handler = Callable[[Request], Awaitable[Response]]

    def route(handler: Handler, *, control: bool = True, public: bool = False) -> Handler:
        async def wrapped(request: Request) -> Response:
            try:
                check_host(request)
                if public:
                    check_rate(request)
                if control:
                    check_control(request)
                    if request.method == "POST" and not via_unix(request):
                        check_json_content_type(request)
                return await handler(request)
            except HttpError as e:
                return error_response(e.status, e.kind, e.message, e.hint, e.headers)
            except HolonError as e:
                return _from_holon(e)

        return wrapped

    async def read_json(request: Request, cap: int) -> dict[str, Any]:
        raw = await read_body(request, cap)
        try:
            value = parse_json(raw or b"null")
        except UsageError as exc:
            raise HttpError(400, "invalid_json", exc.message, exc.hint or "") from None
        if not isinstance(value, dict):
            raise HttpError(400, "invalid_body", "the body must be a JSON object", "")
        return value

    def open_public(agent_id: str) -> Any:
        from holon_cli.errors import NotFoundError
        from holon_cli.runtime.agents import open_agent

        store = open_agent(agent_id, create_default=False)
        if store.read_record()["identity"].get("visibility") == "private":
            raise NotFoundError(f"unknown agent {agent_id!r}", hint="GET /agents/list")
        return store

    # -------------------------------------------------------------- routes
    async def healthz(_request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def runtime_status_route(_request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(runtime_status))

    async def shutdown(_request: Request) -> Response:
        request_shutdown()
        return JSONResponse({"ok": True, "draining": True}, status_code=202)

    async def agents_list(_request: Request) -> Response:
        from holon_cli.runtime.agents import list_agents

        entries = await run_in_threadpool(list_agents)
        return JSONResponse({"agents": [e.to_dict() for e in entries]})

    async def agent_status(request: Request) -> Response:
        from holon_cli.runtime.inspect import agent_summary

        def get() -> dict[str, Any]:
            return agent_summary(open_public(request.path_params["agent_id"]))

        return JSONResponse(await run_in_threadpool(get))

    async def agent_state(request: Request) -> Response:
        from holon_cli.runtime import workitems as wi
        from holon_cli.runtime.inspect import agent_summary

        def get() -> dict[str, Any]:
            store = open_public(request.path_params["agent_id"])
            rec = store.read_record()
            return {
                "agent": agent_summary(store),
                "state": rec["state"],
                "identity": rec["identity"],
                "work_items": wi.list_work_items(store, filter="open", refresh=False),
            }

        return JSONResponse(await run_in_threadpool(get))

    async def control_prompt(request: Request) -> Response:
        from holon_cli.runtime.enqueue import admit

        body = await read_json(request, PROMPT_CAP)
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise HttpError(400, "invalid_body", "`text` must be a non-empty string", "")
        priority = body.get("priority", "normal")
        if not isinstance(priority, str):
            raise HttpError(400, "invalid_body", "`priority` must be a string", "")

        def go() -> Any:
            store = open_public(request.path_params["agent_id"])
            return admit(
                text,
                store=store,
                kind="operator_prompt",
                origin="operator",
                priority=priority,
                delivery_surface="http_control_prompt",
                admission_context="control_authenticated",
            )

        env = await run_in_threadpool(go)
        return JSONResponse({"message_id": env["id"]}, status_code=202)

    async def control_work_item(request: Request) -> Response:
        from holon_cli.runtime import workitems as wi

        body = await read_json(request, PROMPT_CAP)
        objective = body.get("objective")
        if not isinstance(objective, str) or not objective.strip():
            raise HttpError(
                400, "invalid_body", "`objective` must be a non-empty string", "say what to do"
            )

        def go() -> dict[str, Any]:
            store = open_public(request.path_params["agent_id"])
            return wi.create_work_item(store, objective, source="control_plane")

        return JSONResponse(await run_in_threadpool(go), status_code=201)

    def _cursor(request: Request, name: str = "after") -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return None
        if not raw.isdigit():
            raise HttpError(400, "invalid_query", f"`{name}` must be an event_seq (>= 0)", "")
        return int(raw)

    async def events_page(request: Request) -> Response:
        from holon_cli.runtime.inspect import tail_events

        after = _cursor(request)
        lim_raw = request.query_params.get("limit")
        if lim_raw is not None and not lim_raw.isdigit():
            raise HttpError(400, "invalid_query", "`limit` must be a positive integer", "")
        limit = min(int(lim_raw or EVENTS_DEFAULT_LIMIT), EVENTS_MAX_LIMIT)

        def get() -> list[dict[str, Any]]:
            store = open_public(request.path_params["agent_id"])
            return tail_events(store, since=after if after is not None else 0, limit=limit)

        events = await run_in_threadpool(get)
        next_after = events[-1]["event_seq"] if events else (after or 0)
        return JSONResponse({"events": events, "next_after": next_after})

    async def events_stream(request: Request) -> Response:
        from holon_cli.runtime.inspect import tail_events

        after = _cursor(request)
        last_id = request.headers.get("last-event-id", "").strip()
        if last_id:
            if not last_id.isdigit():
                raise HttpError(400, "invalid_header", "Last-Event-ID must be an event_seq", "")
            after = int(last_id)
        store = await run_in_threadpool(open_public, request.path_params["agent_id"])

        async def gen() -> AsyncIterator[bytes]:
            cursor = after or 0
            idle = 0.0
            while not stopping.is_set():
                events = await run_in_threadpool(
                    tail_events, store, since=cursor, limit=EVENTS_DEFAULT_LIMIT
                )
                for ev in events:
                    cursor = int(ev["event_seq"])
                    data = json.dumps(ev, ensure_ascii=False)
                    kind = ev.get("kind", "event")
                    yield f"id: {cursor}\nevent: {kind}\ndata: {data}\n\n".encode()
                if events:
                    idle = 0.0
                    continue
                if await request.is_disconnected():
                    return
                await asyncio.sleep(SSE_POLL_S)
                idle += SSE_POLL_S
                if idle >= SSE_HEARTBEAT_S:
                    idle = 0.0
                    yield b": keep-alive\n\n"

        return StreamingResponse(
            gen(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def public_enqueue(request: Request) -> Response:
        from holon_cli.model.envelope import DEFAULT_KIND_BY_ORIGIN, parse_origin
        from holon_cli.runtime.enqueue import admit
        from holon_cli.serve.ingress import public_admit

        body = await read_json(request, PROMPT_CAP)
        env = await run_in_threadpool(
            lambda: public_admit(
                request.path_params["agent_id"],
                body,
                admit=admit,
                parse_origin=parse_origin,
                default_kind=DEFAULT_KIND_BY_ORIGIN,
                open_store=open_public,
            )
        )
        return JSONResponse({"message_id": env["id"]}, status_code=202)

    async def webhook(request: Request) -> Response:
        from holon_cli.model.envelope import parse_origin
        from holon_cli.runtime.enqueue import admit
        from holon_cli.serve import webhooks
        from holon_cli.serve.ingress import webhook_config

        source = request.path_params["source"]
        parse_origin(f"webhook:{source}")  # a malformed source is a 400
        body = await read_body(request, PROMPT_CAP)
        headers = request.headers
        await run_in_threadpool(webhooks.verify, source, webhook_config(source), body, headers)
        did = webhooks.delivery_id(headers)
        text, is_json = webhooks.body_text(body, headers.get("content-type"))
        event = headers.get("x-github-event") or headers.get("x-event-type")
        origin = {"kind": "webhook", "source": source}
        if event:
            origin["event_type"] = event[:100]

        def go() -> dict[str, Any]:
            store = open_public(request.path_params["agent_id"])

            def admit_one() -> Any:
                return admit(
                    text,
                    store=store,
                    json_body=is_json,
                    kind="webhook_event",
                    origin=origin,
                    metadata={"webhook_delivery_id": did} if did else None,
                    delivery_surface="http_webhook",
                    admission_context="public_unauthenticated",
                )

            return webhooks.receive(store, source, did, admit_one)

        res = await run_in_threadpool(go)
        return JSONResponse(res, status_code=200 if res.get("duplicate") else 202)

    async def callback_wake(request: Request) -> Response:
        # capability URL: the token in the path is the authorization; the
        # waiting plane's deliver() is what `holon trigger deliver` runs
        import importlib

        triggers = importlib.import_module("holon_cli.runtime.waiting.triggers")
        raw = await read_body(request, CALLBACK_CAP)

        def go() -> Any:
            return triggers.deliver(
                request.path_params["token"],
                raw,
                request.headers.get("content-type"),
                request.headers.get("x-holon-source"),
                correlation_id=request.headers.get("x-correlation-id"),
            )

        try:
            res = await run_in_threadpool(go)
        except HolonError as e:
            status = triggers.HTTP_STATUS_BY_KIND.get(str(e.kind))
            if status is None:
                raise
            return error_response(status, str(e.kind), e.message, e.hint or "")
        return JSONResponse(res.to_dict(), status_code=202)

    routes = [
        Route(
            "/callbacks/wake/{token}",
            route(callback_wake, control=False, public=True),
            methods=["POST"],
        ),
        Route(
            "/webhooks/{source}/{agent_id}",
            route(webhook, control=False, public=True),
            methods=["POST"],
        ),
        Route("/healthz", route(healthz, control=False), methods=["GET"]),
        Route("/control/runtime/status", route(runtime_status_route), methods=["GET"]),
        Route("/control/runtime/shutdown", route(shutdown), methods=["POST"]),
        Route("/agents/list", route(agents_list), methods=["GET"]),
        Route("/agents/{agent_id}/status", route(agent_status), methods=["GET"]),
        Route("/agents/{agent_id}/state", route(agent_state), methods=["GET"]),
        Route("/agents/{agent_id}/events", route(events_page), methods=["GET"]),
        Route("/agents/{agent_id}/events/stream", route(events_stream), methods=["GET"]),
        Route(
            "/agents/{agent_id}/enqueue",
            route(public_enqueue, control=False, public=True),
            methods=["POST"],
        ),
        Route("/control/agents/{agent_id}/prompt", route(control_prompt), methods=["POST"]),
        Route("/control/agents/{agent_id}/work-items", route(control_work_item), methods=["POST"]),
    ]

    async def not_found(request: Request, _exc: Exception) -> Response:
        return error_response(404, "not_found", f"no route {request.url.path}", "see GET /healthz")

    async def not_allowed(request: Request, _exc: Exception) -> Response:
        return error_response(
            405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}"
        )

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
