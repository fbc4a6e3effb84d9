"""The control and read routes of ``holon serve`` (token, loopback or the
Unix socket; the guards are applied by ``serve/http/app.py``). Each calls the
same runtime function as the CLI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from holon_cli.serve.http.common import PROMPT_CAP, ctx_of, open_public, read_json
from holon_cli.serve.http.errors import HttpError

if TYPE_CHECKING:
    from holon_cli.model.events import EventRecord
    from holon_cli.model.typed_base import JsonObject
    from holon_cli.store.ledger import Trimmed

EVENTS_DEFAULT_LIMIT = 100
EVENTS_MAX_LIMIT = 1000
SSE_POLL_S = 0.2
SSE_HEARTBEAT_S = 15.0


async def healthz(_request: Request) -> Response:
    return JSONResponse({"ok": True})


async def runtime_status_route(request: Request) -> Response:
    return JSONResponse(await run_in_threadpool(ctx_of(request).runtime_status))


async def shutdown(request: Request) -> Response:
    ctx_of(request).request_shutdown()
    return JSONResponse({"ok": True, "draining": True}, status_code=202)


async def agents_list(_request: Request) -> Response:
    from holon_cli.runtime.agents.lifecycle import list_agents

    entries = await run_in_threadpool(list_agents)
    return JSONResponse({"agents": [e.to_dict() for e in entries]})


async def agent_status(request: Request) -> Response:
    from holon_cli.runtime.inspect import agent_summary

    def get() -> Mapping[str, object]:
        return agent_summary(open_public(request.path_params["agent_id"]))

    return JSONResponse(await run_in_threadpool(get))


async def agent_state(request: Request) -> Response:
    from holon_cli.runtime import workitems as wi
    from holon_cli.runtime.inspect import agent_summary

    def get() -> Mapping[str, object]:
        store = open_public(request.path_params["agent_id"])
        rec = store.read_record()
        return {
            "agent": agent_summary(store),
            "state": rec["state"],
            "identity": rec["identity"],
            "work_items": wi.list_work_items(store, filter="open", refresh=False),
            "execution_policy": _policy(store.agent_id),
        }

    return JSONResponse(await run_in_threadpool(get))


def _policy(agent_id: str) -> Any:
    """The agent's execution policy projection (what ``holon debug prompt``
    shows); ``None`` while ``config.yaml`` does not load (status names why)."""
    from holon_cli.errors import ConfigError
    from holon_cli.runtime.tasks.sandbox import projection
    from holon_cli.store.config import load_config

    try:
        return projection(load_config(), agent_id)
    except ConfigError:
        return None


async def control_prompt(request: Request) -> Response:
    from holon_cli.runtime.enqueue import admit

    body = await read_json(request, PROMPT_CAP)
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise HttpError(400, "invalid_body", "`text` must be a non-empty string", "")
    priority = body.get("priority", "normal")
    if not isinstance(priority, str):
        raise HttpError(400, "invalid_body", "`priority` must be a string", "")

    from holon_cli.model.tracecontext import from_headers

    trace = from_headers(request.headers)  # the caller's trace, continued by the turn

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
            trace_context=trace,
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

    def go() -> Mapping[str, object]:
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

    def go() -> Mapping[str, object]:
        return request_abort(open_public(request.path_params["agent_id"]), run_id)

    return JSONResponse(await run_in_threadpool(go), status_code=202)


async def agent_mcp(request: Request) -> Response:
    """``holon mcp list --json`` and ``holon mcp requests --json`` of one
    agent: ``{servers, requests}`` (``?all=1``: answered requests too)."""
    from holon_cli.runtime.mcp.calls import server_rows
    from holon_cli.runtime.mcp.requests import list_requests
    from holon_cli.store.config import load_config

    include_all = request.query_params.get("all", "") in ("1", "true", "yes")

    def get() -> Mapping[str, object]:
        store = open_public(request.path_params["agent_id"])
        return {
            "servers": server_rows(load_config(), store.agent_id),
            "requests": list_requests([store], include_resolved=include_all),
        }

    return JSONResponse(await run_in_threadpool(get))


async def control_mcp_answer(request: Request) -> Response:
    """``holon mcp answer ID CONTENT_JSON | --decline``: body ``{"content":
    {...}}`` or ``{"decline": true}``; 200 with the request's row once the
    call was sent again, 409 when it was answered before, 502 when the
    server cannot be reached (the answer is kept)."""
    from holon_cli.errors import HolonError
    from holon_cli.runtime.mcp.requests import answer

    body = await read_json(request, PROMPT_CAP)
    decline = body.get("decline", False)
    if not isinstance(decline, bool):
        raise HttpError(400, "invalid_body", "`decline` must be true or false", "")
    if decline == ("content" in body):
        raise HttpError(
            400, "invalid_body", "send `content` (the form's fields) or `decline: true`", ""
        )

    def go() -> Mapping[str, object]:
        store = open_public(request.path_params["agent_id"])
        try:
            return answer(
                [store],
                request.path_params["request_id"],
                content=body.get("content"),
                decline=decline,
            )
        except HolonError as err:
            if err.kind in ("mcp_unavailable", "mcp_timeout"):
                raise HttpError(502, str(err.kind), err.message, err.hint or "") from None
            raise

    return JSONResponse(await run_in_threadpool(go))


async def control_pause(request: Request) -> Response:
    """Pause the agent (``holon agent pause``): 202; messages wait in its queue."""
    return await _lifecycle(request, "pause")


async def control_start(request: Request) -> Response:
    """Start (resume) a paused or stopped agent (``holon agent start``): 202."""
    return await _lifecycle(request, "start")


async def _lifecycle(request: Request, action: str) -> Response:
    from holon_cli.runtime.agents.lifecycle import set_lifecycle

    await read_json(request, PROMPT_CAP, allow_empty=True)  # no field is read: {} or nothing

    def go() -> Mapping[str, object]:
        store = open_public(request.path_params["agent_id"])  # 404 / private first
        return set_lifecycle(store.agent_id, action)

    return JSONResponse(await run_in_threadpool(go), status_code=202)


async def agent_workspaces(request: Request) -> Response:
    """``holon workspace list --json`` (``?all=1``: known, detached ones too)."""
    from holon_cli.runtime.workspace.plane import list_workspaces

    include_all = request.query_params.get("all", "") in ("1", "true", "yes")

    def get() -> Sequence[Mapping[str, object]]:
        return list_workspaces(
            open_public(request.path_params["agent_id"]), include_all=include_all
        )

    return JSONResponse({"workspaces": await run_in_threadpool(get)})


def _text(body: JsonObject, name: str) -> str | None:
    """``body[name]``: a non-empty string or absent (``None``); a 400 otherwise."""
    value = body.get(name)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise HttpError(400, "invalid_body", f"`{name}` must be a non-empty string", "")
    return value


def _workspace_body(body: JsonObject) -> tuple[str | None, str | None, str | None]:
    """``path`` (absolute: serve has no caller's cwd) or ``workspace_id``,
    and ``mode``; a 400 naming the field otherwise."""
    import os

    path, wid, mode = (_text(body, name) for name in ("path", "workspace_id", "mode"))
    if (path is None) == (wid is None):
        raise HttpError(
            400,
            "invalid_body",
            "give exactly one of `path` and `workspace_id`",
            'a directory to attach, or a known id such as "agent_home"',
        )
    if path is not None and not os.path.isabs(path):
        raise HttpError(
            400,
            "invalid_body",
            f"`path` must be absolute, not {path!r}",
            "serve has no working directory of yours: resolve the path first",
        )
    return path, wid, mode


async def control_workspace(request: Request) -> Response:
    """UseWorkspace for the operator (``holon workspace use``): attach a
    directory by ``path``, enter an attached ``workspace_id`` (``mode``
    direct or isolated), or ``workspace_id: "agent_home"`` to leave."""
    from holon_cli.runtime.workspace.plane import use_workspace

    body = await read_json(request, PROMPT_CAP)
    path, wid, mode = _workspace_body(body)

    def go() -> Mapping[str, object]:
        store = open_public(request.path_params["agent_id"])
        return use_workspace(store, path=path, workspace_id=wid, mode=mode, source="http_control")

    return JSONResponse(await run_in_threadpool(go))


async def control_task_stop(request: Request) -> Response:
    """``holon task stop`` (a child's handle stops and archives the child):
    200 with its ``--json`` data once the task ended (SIGKILL after 5 s); a
    task that already ended is left as it is."""
    from holon_cli.runtime.children.handle import task_stop

    await read_json(request, PROMPT_CAP, allow_empty=True)  # no field is read

    def go() -> Mapping[str, object]:
        store = open_public(request.path_params["agent_id"])
        return task_stop(store, request.path_params["task_id"])

    return JSONResponse(await run_in_threadpool(go))


async def control_timer_cancel(request: Request) -> Response:
    """``holon timer cancel``: 200 with its ``--json`` data (``changed``
    false for a timer already cancelled or fired); unknown timer 404."""
    from holon_cli.runtime.waiting.timers import cancel_timer

    await read_json(request, PROMPT_CAP, allow_empty=True)

    def go() -> Mapping[str, object]:
        store = open_public(request.path_params["agent_id"])
        return cancel_timer(store, request.path_params["timer_id"])

    return JSONResponse(await run_in_threadpool(go))


async def control_work_item_pick(request: Request) -> Response:
    """``holon workitem pick`` (source ``operator``): 200 with its ``--json``
    data; body optional, ``{"reason": ...}`` says why focus changes."""
    from holon_cli.runtime.workitems import pick_work_item

    body = await read_json(request, PROMPT_CAP, allow_empty=True)
    reason = body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise HttpError(400, "invalid_body", "`reason` must be a string", "")

    def go() -> Mapping[str, object]:
        store = open_public(request.path_params["agent_id"])
        wid = request.path_params["work_item_id"]
        return pick_work_item(store, wid, reason=reason, source="operator")

    return JSONResponse(await run_in_threadpool(go))


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

    damaged: list[Any] = []

    def get() -> tuple[list[EventRecord], Trimmed | None]:
        store = open_public(request.path_params["agent_id"])
        # a damaged line or closed segment is skipped and named (`damaged`):
        # the rest of the history is served, as `holon tail` prints it
        got = tail_events(
            store, since=after if after is not None else 0, limit=limit, damaged=damaged
        )
        # where retention cut history, when this page starts inside the cut
        trimmed = store.events.trimmed()
        through = (trimmed or {}).get("through_seq")
        return got, trimmed if isinstance(through, int) and (after or 0) < through else None

    events, trimmed = await run_in_threadpool(get)
    next_after = events[-1]["event_seq"] if events else (after or 0)
    return JSONResponse(
        {
            "events": events,
            "next_after": next_after,
            "trimmed": trimmed,
            "damaged": [p.to_dict() for p in damaged],
        }
    )


async def events_stream(request: Request) -> Response:
    from holon_cli.runtime.inspect import tail_events

    after = _cursor(request)
    last_id = request.headers.get("last-event-id", "").strip()
    if last_id:
        if not last_id.isdigit():
            raise HttpError(400, "invalid_header", "Last-Event-ID must be an event_seq", "")
        after = int(last_id)
    store = await run_in_threadpool(open_public, request.path_params["agent_id"])
    stopping = ctx_of(request).stopping

    async def gen() -> AsyncIterator[bytes]:
        cursor = after or 0
        idle = 0.0
        trimmed = await run_in_threadpool(store.events.trimmed)
        through = (trimmed or {}).get("through_seq")
        if isinstance(through, int) and cursor < through:
            # the stream starts inside what retention dropped: say so once (no id)
            yield f"event: history_trimmed\ndata: {json.dumps(trimmed)}\n\n".encode()
        named: set[str] = set()
        while not stopping.is_set():
            damaged: list[Any] = []
            events = await run_in_threadpool(
                partial(tail_events, damaged=damaged),
                store,
                since=cursor,
                limit=EVENTS_DEFAULT_LIMIT,
            )
            for p in damaged:  # skipped, named once per stream (no id)
                if (key := f"{p.path}:{p.line}") not in named:
                    named.add(key)
                    yield f"event: history_damaged\ndata: {json.dumps(p.to_dict())}\n\n".encode()
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


def _default_agent(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """``/status``, ``/state``, ``/events``: the default agent's routes
    (``/events`` with ``Accept: text/event-stream`` is the live stream)."""

    async def aliased(request: Request) -> Response:
        from holon_cli.store.layout import default_agent_id

        request.scope["path_params"] = {"agent_id": default_agent_id()}
        if handler is events_page and "text/event-stream" in request.headers.get("accept", ""):
            return await events_stream(request)
        response: Response = await handler(request)
        return response

    return aliased


default_status = _default_agent(agent_status)
default_state = _default_agent(agent_state)
default_events = _default_agent(events_page)
