"""The HTTP surface of ``holon serve``: the starlette app and its routes.
The listen address lives in ``serve/listen.py``, the uvicorn server in
``serve/server.py``, the public ingress policy in ``serve/ingress.py``.

Every route calls the same runtime functions as the CLI (``admit``,
``agent_summary``, ``create_work_item``, ``tail_events``); this module only
adds transport concerns:

- ``Host`` check on every request (DNS rebinding): the listen host,
  ``localhost``, ``127.0.0.1``, ``[::1]`` or the ``--advertise`` host, else 403;
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

from holon_cli.errors import HolonError
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
    port: int
    token: str | None = None
    advertise: str | None = None
    socket_path: str | None = None
    allowed_hosts: set[str] = field(default_factory=set)


class HttpError(Exception):
    def __init__(self, status: int, kind: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.hint = status, kind, message, hint


def error_response(status: int, kind: str, message: str, hint: str = "") -> JSONResponse:
    return JSONResponse(
        {"error": {"kind": kind, "message": message, "hint": hint}}, status_code=status
    )


_STATUS_BY_EXIT = {2: 400, 3: 404, 4: 409, 75: 409}


def _from_holon(err: HolonError) -> JSONResponse:
    status = _STATUS_BY_EXIT.get(err.exit_code, 500)
    return error_response(status, str(err.kind), err.message, err.hint or "")


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
            return
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

    Handler = Callable[[Request], Awaitable[Response]]

    def route(handler: Handler, *, control: bool = True) -> Handler:
        async def wrapped(request: Request) -> Response:
            try:
                check_host(request)
                if control:
                    check_control(request)
                return await handler(request)
            except HttpError as e:
                return error_response(e.status, e.kind, e.message, e.hint)
            except HolonError as e:
                return _from_holon(e)

        return wrapped

    async def read_json(request: Request, cap: int, allow_empty: bool = False) -> dict[str, Any]:
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
        if allow_empty and not b"".join(chunks).strip():
            return {}
        try:
            value = json.loads(b"".join(chunks) or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HttpError(
                400, "invalid_json", f"the body is not valid JSON ({exc})", "send a JSON object"
            ) from None
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

    async def control_abort(request: Request) -> Response:
        """Abort the running turn (``holon agent abort``): 202 once requested;
        body optional, ``{"run_id": R}`` aborts only that run (else 409)."""
        from holon_cli.runtime.turn.abort import request_abort

        body = await read_json(request, PROMPT_CAP, allow_empty=True)
        run_id = body.get("run_id")
        if run_id is not None and not isinstance(run_id, str):
            raise HttpError(400, "invalid_body", "`run_id` must be a string", "")

        def go() -> dict[str, Any]:
            return request_abort(open_public(request.path_params["agent_id"]), run_id)

        return JSONResponse(await run_in_threadpool(go), status_code=202)

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

        def get() -> tuple[list[dict[str, Any]], Any]:
            store = open_public(request.path_params["agent_id"])
            got = tail_events(store, since=after if after is not None else 0, limit=limit)
            # where retention cut history, when this page starts inside the cut
            trimmed = store.events.trimmed()
            through = (trimmed or {}).get("through_seq")
            return got, trimmed if isinstance(through, int) and (after or 0) < through else None

        events, trimmed = await run_in_threadpool(get)
        next_after = events[-1]["event_seq"] if events else (after or 0)
        return JSONResponse({"events": events, "next_after": next_after, "trimmed": trimmed})

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

    async def callback_wake(request: Request) -> Response:
        # capability URL: the token in the path is the authorization; the
        # waiting plane's deliver() is what `holon trigger deliver` runs
        import importlib

        triggers = importlib.import_module("holon_cli.runtime.waiting.triggers")
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > CALLBACK_CAP:
            raise _too_large(CALLBACK_CAP)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > CALLBACK_CAP:
                raise _too_large(CALLBACK_CAP)
            chunks.append(chunk)

        def go() -> Any:
            return triggers.deliver(
                request.path_params["token"],
                b"".join(chunks),
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
        Route("/callbacks/wake/{token}", route(callback_wake, control=False), methods=["POST"]),
        Route("/healthz", route(healthz, control=False), methods=["GET"]),
        Route("/control/runtime/status", route(runtime_status_route), methods=["GET"]),
        Route("/control/runtime/shutdown", route(shutdown), methods=["POST"]),
        Route("/agents/list", route(agents_list), methods=["GET"]),
        Route("/agents/{agent_id}/status", route(agent_status), methods=["GET"]),
        Route("/agents/{agent_id}/state", route(agent_state), methods=["GET"]),
        Route("/agents/{agent_id}/events", route(events_page), methods=["GET"]),
        Route("/agents/{agent_id}/events/stream", route(events_stream), methods=["GET"]),
        Route("/agents/{agent_id}/enqueue", route(public_enqueue, control=False), methods=["POST"]),
        Route("/control/agents/{agent_id}/prompt", route(control_prompt), methods=["POST"]),
        Route("/control/agents/{agent_id}/work-items", route(control_work_item), methods=["POST"]),
        Route("/control/agents/{agent_id}/abort", route(control_abort), methods=["POST"]),
    ]

    async def not_found(request: Request, _exc: Exception) -> Response:
        return error_response(404, "not_found", f"no route {request.url.path}", "see GET /healthz")

    async def not_allowed(request: Request, _exc: Exception) -> Response:
        return error_response(
            405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}"
        )

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})


def _too_large(cap: int) -> HttpError:
    return HttpError(
        413,
        "payload_too_large",
        f"the body is larger than {cap} bytes",
        "put large content in a file and send its path",
    )
