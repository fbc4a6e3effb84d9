"""The HTTP surface of ``holon serve``: the starlette app, its route table and
the guards every request passes (their code: ``serve/http/guards.py``). The
handlers are module-level functions in ``serve/http/routes.py`` (control and
read routes) and
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
  in constant time), or, with no ``Authorization`` header, the web console's
  login cookie (``serve/http/ui/session.py``; a POST must carry ``Origin``);
  without a token serve listens on loopback only, and a request from
  elsewhere is refused; the Unix socket is token-free (its 0600 mode is the
  access control);
- the web console (``/ui/``, ``serve/http/ui/``) is mounted by one call
  (:func:`~holon_cli.serve.http.ui.routes`) under the same guards
  (:func:`check_access`);
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

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from holon_cli.serve.http import public
from holon_cli.serve.http import routes as control
from holon_cli.serve.http.common import HttpSettings as HttpSettings
from holon_cli.serve.http.common import (
    RuntimeStatus,
    ServeContext,
)
from holon_cli.serve.http.errors import HttpError as HttpError
from holon_cli.serve.http.errors import error_response as error_response
from holon_cli.serve.http.guards import (
    Handler,
    allowed_hosts,
    check_access,
    guarded,
    own_origins,
)
from holon_cli.serve.http.guards import origin_key as origin_key

Access = Literal["open", "control", "public"]

# what every route of an access level may answer before its handler runs (the
# guards in serve/http/guards.py); the generated HTTP reference prints it beside each route
ACCESS_ANSWERS: dict[str, tuple[str, ...]] = {
    "open": ("403 forbidden_host: a Host that is not served here (DNS rebinding)",),
    "control": (
        "401 unauthorized: a token is configured and the request lacks "
        "`Authorization: Bearer <token>` (or, from the web console's own pages, its "
        "login cookie)",
        "403 forbidden: no token is configured and the client is not on loopback",
        "403 cross_site: an Origin that is not serve's own, or Sec-Fetch-Site "
        "cross-site or same-site",
        "403 forbidden_host: a Host that is not served here (DNS rebinding)",
        "415 unsupported_media_type: a POST with a body that is not application/json",
    ),
    "public": (
        "403 forbidden_host: a Host that is not served here (DNS rebinding)",
        "429 rate_limited: over ingress.rate_per_minute for the client address (with Retry-After)",
    ),
}
# what a route answers when a runtime step refuses (serve/http/errors.py)
RUNTIME_ANSWERS = (
    "400 for what the command line refuses with exit 2, 404 for exit 3 (no such agent, "
    "a private child), 409 for exit 4 and 75, 500 otherwise"
)


@dataclass(frozen=True)
class Api:
    """One route of the table: where, who, and what it takes and answers.
    ``body`` and ``query`` name the fields a request may send; ``answers``
    are ``"STATUS what"`` lines beyond the guards' (:data:`ACCESS_ANSWERS`);
    ``sse`` names the ``event:`` fields a ``text/event-stream`` answer carries.
    ``docs/reference/http.md`` is generated from this table."""

    path: str
    handler: Handler
    access: Access
    method: str
    summary: str
    body: str = ""
    query: str = ""
    answers: tuple[str, ...] = ()
    sse: tuple[str, ...] = ()
    cli: str = ""  # the command doing the same from the shell


# SSE: each event is named by its kind (``event: turn_terminal``), so a
# browser's ``EventSource.onmessage`` sees none of them: listen by name
EVENT_KINDS_SSE = "every event kind (docs/reference/events.md), by its own name"
STREAM_NOTES = ("history_trimmed", "history_damaged")

ROUTES: list[Api] = [
    Api(
        "/healthz",
        control.healthz,
        "open",
        "GET",
        "liveness: serve is up and answering",
        answers=('200 `{"ok": true}`',),
    ),
    Api(
        "/status",
        control.default_status,
        "control",
        "GET",
        "the default agent's status (`/agents/{agent_id}/status` of `main` or HOLON_AGENT_ID)",
        answers=("200 the `data` of `holon status --json`",),
        cli="holon status --json",
    ),
    Api(
        "/state",
        control.default_state,
        "control",
        "GET",
        "the default agent's state (`/agents/{agent_id}/state`)",
        answers=("200 `{agent, state, identity, work_items, execution_policy}`",),
    ),
    Api(
        "/events",
        control.default_events,
        "control",
        "GET",
        "the default agent's events: a page, or the live stream with `Accept: text/event-stream`",
        query="after (an event_seq), limit (default 100, at most 1000)",
        answers=(
            "200 `{events, next_after, trimmed, damaged}`, or a text/event-stream",
            "400 invalid_query: `after` or `limit` is not a number",
        ),
        sse=(EVENT_KINDS_SSE, *STREAM_NOTES),
        cli="holon tail --jsonl",
    ),
    Api(
        "/control/runtime/status",
        control.runtime_status_route,
        "control",
        "GET",
        "serve itself: pid, version, engine, http_addr and socket_path, running agents, "
        "activity, turn counters, last failure",
        answers=("200 the runtime status object (`holon daemon status --json` reads it)",),
        cli="holon daemon status --json",
    ),
    Api(
        "/control/runtime/shutdown",
        control.shutdown,
        "control",
        "POST",
        "drain and stop serve (running turns finish, 10 s at most)",
        answers=('202 `{"ok": true, "draining": true}`',),
        cli="holon daemon stop",
    ),
    Api(
        "/agents/list",
        control.agents_list,
        "control",
        "GET",
        "every public agent of the home",
        answers=("200 `{agents: [...]}`, the rows of `holon agent list --json`",),
        cli="holon agent list --json",
    ),
    Api(
        "/agents/{agent_id}/status",
        control.agent_status,
        "control",
        "GET",
        "one agent's status",
        answers=("200 the `data` of `holon status --agent ID --json`",),
        cli="holon status --agent ID --json",
    ),
    Api(
        "/agents/{agent_id}/state",
        control.agent_state,
        "control",
        "GET",
        "one agent's state: its status, record state, identity, open work items "
        "and execution policy",
        answers=("200 `{agent, state, identity, work_items, execution_policy}`",),
    ),
    Api(
        "/agents/{agent_id}/events",
        control.events_page,
        "control",
        "GET",
        "a page of the agent's events, oldest first, across segments",
        query="after (an event_seq; default 0), limit (default 100, at most 1000)",
        answers=(
            "200 `{events, next_after, trimmed, damaged}`: resume with `?after=next_after`",
            "400 invalid_query: `after` or `limit` is not a number",
        ),
        cli="holon tail --agent ID --jsonl",
    ),
    Api(
        "/agents/{agent_id}/events/stream",
        control.events_stream,
        "control",
        "GET",
        "the agent's events, live, as server-sent events (`id:` is the event_seq; "
        "resumes after `Last-Event-ID` or `?after=`; a `: keep-alive` comment every 15 s)",
        query="after (an event_seq)",
        answers=(
            "200 text/event-stream",
            "400 invalid_query, invalid_header: `after` or Last-Event-ID is not an event_seq",
        ),
        sse=(EVENT_KINDS_SSE, *STREAM_NOTES),
        cli="holon tail --agent ID --follow --jsonl",
    ),
    Api(
        "/control/agents/{agent_id}/prompt",
        control.control_prompt,
        "control",
        "POST",
        "admit an operator prompt (a `traceparent` header is continued by the turn)",
        body="text (required, non-empty), priority (interject|next|normal|background; "
        "default normal)",
        answers=(
            '202 `{"message_id"}`',
            "400 invalid_body, invalid_json",
            "409 agent_stopped and other refusals of admission",
            "413 payload_too_large: over 1 MiB",
        ),
        cli='holon enqueue --agent ID "TEXT"',
    ),
    Api(
        "/control/agents/{agent_id}/work-items",
        control.control_work_item,
        "control",
        "POST",
        "create a work item",
        body="objective (required, non-empty)",
        answers=(
            "201 the created work item (`holon workitem create --json` data)",
            "400 invalid_body, invalid_json",
            "413 payload_too_large",
        ),
        cli='holon workitem create --agent ID "OBJECTIVE"',
    ),
    Api(
        "/control/agents/{agent_id}/abort",
        control.control_abort,
        "control",
        "POST",
        "abort the running turn; the agent is left paused",
        body="run_id (optional: abort only if it is still the running turn); may be empty",
        answers=(
            "202 what was requested (`holon agent abort --json` data)",
            "400 invalid_body",
            "409 stale_run_id: another run is running",
        ),
        cli="holon agent abort ID [--run-id R]",
    ),
    Api(
        "/control/agents/{agent_id}/pause",
        control.control_pause,
        "control",
        "POST",
        "pause the agent: no new turn starts; messages are still accepted and wait",
        body="none, or `{}`",
        answers=("202 the lifecycle change (`holon agent pause --json` data)",),
        cli="holon agent pause ID",
    ),
    Api(
        "/control/agents/{agent_id}/start",
        control.control_start,
        "control",
        "POST",
        "start (resume) a paused or stopped agent; queued work runs at once",
        body="none, or `{}`",
        answers=("202 the lifecycle change (`holon agent start --json` data)",),
        cli="holon agent start ID",
    ),
    Api(
        "/agents/{agent_id}/workspaces",
        control.agent_workspaces,
        "control",
        "GET",
        "the agent's attached workspaces",
        query="all=1: known, detached ones too",
        answers=("200 `{workspaces: [...]}`, the rows of `holon workspace list --json`",),
        cli="holon workspace list --agent ID --json",
    ),
    Api(
        "/control/agents/{agent_id}/workspace",
        control.control_workspace,
        "control",
        "POST",
        "attach and enter a workspace, or enter an attached one",
        body='path (absolute) or workspace_id ("agent_home" to leave); mode (direct|isolated)',
        answers=(
            "200 the `data` of `holon workspace use --json`",
            "400 invalid_body: neither or both of path and workspace_id, a relative path",
            "404 no such directory or workspace",
            "409 forbidden_workspace (the holon home), not a git repository for isolated mode",
        ),
        cli="holon workspace use PATH|ID --agent ID [--isolated]",
    ),
    Api(
        "/control/agents/{agent_id}/tasks/{task_id}/stop",
        control.control_task_stop,
        "control",
        "POST",
        "stop a task: SIGTERM to its process tree, SIGKILL after 5 s (a child's handle: "
        "the child is stopped and archived); answers once it ended",
        body="none, or `{}`",
        answers=(
            "200 the `data` of `holon task stop --json` (`stop_requested` false for a task "
            "that had already ended)",
            "404 no such task",
        ),
        cli="holon task stop --agent ID TASK_ID",
    ),
    Api(
        "/control/agents/{agent_id}/timers/{timer_id}/cancel",
        control.control_timer_cancel,
        "control",
        "POST",
        "cancel an active timer",
        body="none, or `{}`",
        answers=(
            "200 the `data` of `holon timer cancel --json` (`changed` false for one already "
            "cancelled or fired)",
            "404 no such timer",
        ),
        cli="holon timer cancel --agent ID TIMER_ID",
    ),
    Api(
        "/control/agents/{agent_id}/work-items/{work_item_id}/pick",
        control.control_work_item_pick,
        "control",
        "POST",
        "make an open work item the agent's current focus (source operator)",
        body="reason (optional: why focus changes); may be empty",
        answers=(
            "200 the `data` of `holon workitem pick --json`",
            "400 invalid_body: `reason` is not a string",
            "404 no such work item",
            "409 the work item is completed",
        ),
        cli='holon workitem pick --agent ID WORK_ITEM_ID [--reason "..."]',
    ),
    Api(
        "/agents/{agent_id}/mcp",
        control.agent_mcp,
        "control",
        "GET",
        "the agent's MCP servers and the requests they wait on",
        query="all=1: answered requests too",
        answers=("200 `{servers, requests}` (`holon mcp list` and `holon mcp requests`)",),
        cli="holon mcp list --agent ID --json",
    ),
    Api(
        "/control/agents/{agent_id}/mcp/requests/{request_id}/answer",
        control.control_mcp_answer,
        "control",
        "POST",
        "answer an MCP server's question (elicitation); the call is sent again at once",
        body="content (the form's fields, an object) or decline: true",
        answers=(
            "200 the request's row once the call was sent again",
            "400 invalid_body: neither or both of content and decline",
            "404 no such request",
            "409 mcp_request_closed: answered before",
            "502 mcp_unavailable, mcp_timeout: the server cannot be reached (the answer is kept)",
        ),
        cli="holon mcp answer ID CONTENT_JSON | --decline",
    ),
    Api(
        "/agents/{agent_id}/enqueue",
        public.public_enqueue,
        "public",
        "POST",
        "admit external evidence (never an operator instruction); no token",
        body="origin (required: channel:<id> or webhook:<source>), text or json "
        "(exactly one), kind (must match the origin), priority (not interject), "
        "correlation_id",
        answers=(
            '202 `{"message_id"}`',
            "400 invalid_body, invalid_json",
            "403 forbidden_field, forbidden_origin, forbidden_priority, forbidden_kind",
            "413 payload_too_large: over 1 MiB",
        ),
        cli="holon enqueue --agent ID --origin channel:ID TEXT",
    ),
    Api(
        "/webhooks/{source}/{agent_id}",
        public.webhook,
        "public",
        "POST",
        "admit a webhook delivery as sent (JSON, text, or a form's `payload=`) as a "
        "`webhook_event` with origin `webhook:<source>`; verified by "
        "ingress.webhooks.<source>",
        body="anything the sender posts, up to 1 MiB",
        answers=(
            '202 `{"message_id"}`',
            '200 `{"duplicate": true, "message_id"}`: a delivery id or signed body seen before',
            "400 a body that is not UTF-8 or not standard JSON; a signed github delivery "
            "without X-GitHub-Delivery",
            "401 a missing, bad or stale signature",
            "413 payload_too_large",
            "503 config_error: config.yaml does not load (the sender retries)",
        ),
    ),
    Api(
        "/callbacks/wake/{token}",
        public.callback_wake,
        "public",
        "POST",
        "a trigger delivery to the capability URL `holon trigger show` prints: wakes the "
        "agent (a wake hint, not a message)",
        body="anything up to 256 KiB (Content-Type kept; X-Holon-Source, X-Correlation-ID headers)",
        answers=(
            "202 `{disposition, agent_id, external_trigger_id, trigger_count, "
            "coalesced_count, message_id, waiting_intent_ids, received_at}`",
            "400 invalid_json, invalid_body",
            "403 invalid_callback_token: unknown, revoked or rotated",
            "409 agent_stopped",
            "413 payload_too_large: over 256 KiB",
        ),
        cli="holon trigger deliver URL BODY",
    ),
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
    from holon_cli.serve.http import ui
    from holon_cli.serve.http.ingress import RateLimiter

    routes: list[BaseRoute] = [
        Route(r.path, guarded(r.handler, r.access), methods=[r.method]) for r in ROUTES
    ]
    routes += ui.routes(check_access)  # the web console, /ui/ (serve/http/ui/)
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
