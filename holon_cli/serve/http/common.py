"""What the HTTP route modules share: the settings, the per-app context
(``request.app.state.holon``) and the body and agent helpers. Below
``serve/http/app.py`` (the app and its guards), ``routes.py`` (control and
read routes) and ``public.py`` (public ingress)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from holon_cli.errors import UsageError
from holon_cli.model.jsontext import parse_json
from holon_cli.serve.http.errors import HttpError, too_large

if TYPE_CHECKING:
    from holon_cli.model.typed_base import JsonObject
    from holon_cli.serve.http.ingress import RateLimiter

PROMPT_CAP = 1 << 20
CALLBACK_CAP = 256 << 10

OriginKey = tuple[str, str, int]
RuntimeStatus = Callable[[], Mapping[str, object]]


@dataclass
class HttpSettings:
    host: str
    port: int  # the bound TCP port (its own origins are http://<loopback>:port)
    token: str | None = None
    advertise: str | None = None
    socket_path: str | None = None
    allowed_hosts: set[str] = field(default_factory=set)


@dataclass
class ServeContext:
    """One app's settings and hooks into the serve process."""

    settings: HttpSettings
    runtime_status: RuntimeStatus
    request_shutdown: Callable[[], None]
    stopping: threading.Event
    allowed_hosts: set[str]
    own_origins: set[OriginKey]
    limiter: RateLimiter


def ctx_of(request: Request) -> ServeContext:
    ctx: ServeContext = request.app.state.holon
    return ctx


def via_unix(request: Request) -> bool:
    server = request.scope.get("server")
    return server is None or server[1] is None


async def read_body(request: Request, cap: int) -> bytes:
    """The raw body, at most ``cap`` bytes (413 beyond, before reading it all)."""
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > cap:
        raise too_large(cap)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise too_large(cap)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, cap: int, allow_empty: bool = False) -> JsonObject:
    """A JSON object body, standard JSON only (400 ``invalid_json``);
    ``allow_empty``: no body at all reads as ``{}``."""
    raw = await read_body(request, cap)
    if allow_empty and not raw.strip():
        return {}
    try:
        value = parse_json(raw or b"null")
    except UsageError as exc:
        raise HttpError(400, "invalid_json", exc.message, exc.hint or "") from None
    if not isinstance(value, dict):
        raise HttpError(400, "invalid_body", "the body must be a JSON object", "")
    return value


def open_public(agent_id: str) -> Any:
    """The agent's store; a private agent (a child) is 404 over HTTP."""
    from holon_cli.errors import NotFoundError
    from holon_cli.runtime.agents.lifecycle import open_agent

    store = open_agent(agent_id, create_default=False)
    if store.read_record()["identity"].get("visibility") == "private":
        raise NotFoundError(f"unknown agent {agent_id!r}", hint="GET /agents/list")
    return store
