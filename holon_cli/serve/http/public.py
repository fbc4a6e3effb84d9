"""The public ingress routes of ``holon serve`` (no token; rate-limited per
client address by ``serve/http/app.py``): ``POST /agents/{id}/enqueue`` (policy
in ``serve/http/ingress.py``), ``POST /webhooks/{source}/{agent_id}`` (signatures
and replay dedupe in ``serve/http/webhooks.py``) and ``POST /callbacks/wake/{token}``
(the waiting plane's capability URL). What they admit is external evidence,
never an operator instruction; nothing is persisted on a refusal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from holon_cli.errors import HolonError
from holon_cli.serve.http.common import (
    CALLBACK_CAP,
    PROMPT_CAP,
    open_public,
    read_body,
    read_json,
)
from holon_cli.serve.http.errors import error_response

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope


async def public_enqueue(request: Request) -> Response:
    from functools import partial

    from holon_cli.model.envelope import DEFAULT_KIND_BY_ORIGIN, parse_origin
    from holon_cli.model.tracecontext import from_headers
    from holon_cli.runtime.enqueue import admit
    from holon_cli.serve.http.ingress import public_admit

    body = await read_json(request, PROMPT_CAP)
    # the caller's `traceparent`, stored on the message: its turn continues that trace
    traced = partial(admit, trace_context=from_headers(request.headers))
    env = await run_in_threadpool(
        lambda: public_admit(
            request.path_params["agent_id"],
            body,
            admit=traced,
            parse_origin=parse_origin,
            default_kind=DEFAULT_KIND_BY_ORIGIN,
            open_store=open_public,
        )
    )
    return JSONResponse({"message_id": env["id"]}, status_code=202)


async def webhook(request: Request) -> Response:
    from holon_cli.model.envelope import ORIGIN_ID_RE, parse_origin
    from holon_cli.model.tracecontext import from_headers
    from holon_cli.runtime.enqueue import admit
    from holon_cli.serve.http import webhooks
    from holon_cli.serve.http.ingress import webhook_config

    source = request.path_params["source"]
    parse_origin(f"webhook:{source}")  # a malformed source is a 400
    body = await read_body(request, PROMPT_CAP)
    headers = request.headers
    body_key = await run_in_threadpool(
        webhooks.verify, source, webhook_config(source), body, headers
    )
    did = webhooks.delivery_id(headers)
    text, is_json = webhooks.body_text(body, headers.get("content-type"))
    origin = {"kind": "webhook", "source": source}
    event = (headers.get("x-github-event") or headers.get("x-event-type") or "").strip()
    if ORIGIN_ID_RE.fullmatch(event):  # metadata: an odd value is dropped, not refused
        origin["event_type"] = event
    trace = from_headers(headers)  # the sender's trace, continued by the turn

    def go() -> webhooks.Receipt:
        store = open_public(request.path_params["agent_id"])

        def admit_one() -> Envelope:
            return admit(
                text,
                store=store,
                json_body=is_json,
                kind="webhook_event",
                origin=origin,
                metadata={"webhook_delivery_id": did} if did else None,
                delivery_surface="http_webhook",
                admission_context="public_unauthenticated",
                trace_context=trace,
            )

        return webhooks.receive(store, source, did, admit_one, body_key)

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
