"""The console's page routes and the guard each passes.

- pages and live streams: the control routes' guards (``Host``, never
  cross-site, the token as the login cookie or a bearer header, else a
  loopback client); a page asked for without a login goes to
  ``/ui/login`` (303), any other refusal is an HTML page with the same
  status, kind and hint as the JSON error;
- ``/ui/login``: not cross-site; the POST (a form: the token in its body,
  never in a URL) must carry this server's ``Origin`` and is rate-limited
  like the public routes; a wrong token is 401, nothing set;
- ``/ui/static/...``: the ``Host`` check only (no agent data in them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from holon_cli.errors import HolonError
from holon_cli.serve.http.common import ctx_of, read_body
from holon_cli.serve.http.errors import HttpError, error_response
from holon_cli.serve.http.ui import render, session
from holon_cli.serve.http.ui.actions import actions

Check = Callable[[Request, str], None]
Handler = Callable[[Request], Awaitable[Response]]

LOGIN_BODY_CAP = 8 << 10
_STATUS_BY_EXIT = {2: 400, 3: 404, 4: 409, 75: 409}


def logged_in(request: Request) -> bool:
    token = ctx_of(request).settings.token
    return token is not None and session.has_session(request, token)


def _error_page(request: Request, status: int, kind: str, message: str, hint: str) -> Response:
    try:
        return render.page(
            "error.html",
            status_code=status,
            status=status,
            kind=kind,
            message=message,
            hint=hint,
            logged_in=logged_in(request),
        )
    except Exception:  # noqa: BLE001 - a page that cannot render still says why, as JSON
        return _json_error(status, kind, message, hint)


def _json_error(status: int, kind: str, message: str, hint: str) -> Response:
    resp = error_response(status, kind, message, hint)
    resp.headers.update(render.headers(render.NO_STORE))
    return resp


def _holon_status(err: HolonError) -> int:
    return _STATUS_BY_EXIT.get(err.exit_code, 500)


def _login_redirect(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(
        "/ui/login?next=" + quote(target, safe="/"),
        status_code=303,
        headers=render.headers(render.NO_STORE),
    )


def page_route(handler: Handler, check: Check) -> Handler:
    """A page behind the control guards (HTML errors, login redirect)."""

    async def wrapped(request: Request) -> Response:
        try:
            check(request, "control")
        except HttpError as e:
            if e.status == 401:
                return _login_redirect(request)
            return _error_page(request, e.status, e.kind, e.message, e.hint)
        try:
            return await handler(request)
        except HttpError as e:
            return _error_page(request, e.status, e.kind, e.message, e.hint)
        except HolonError as e:
            return _error_page(request, _holon_status(e), str(e.kind), e.message, e.hint or "")

    return wrapped


def stream_route(handler: Handler, check: Check) -> Handler:
    """A live stream behind the control guards (JSON errors)."""

    async def wrapped(request: Request) -> Response:
        try:
            check(request, "control")
            return await handler(request)
        except HttpError as e:
            return _json_error(e.status, e.kind, e.message, e.hint)
        except HolonError as e:
            return _json_error(_holon_status(e), str(e.kind), e.message, e.hint or "")

    return wrapped


def open_route(handler: Handler, check: Check, access: str) -> Handler:
    async def wrapped(request: Request) -> Response:
        try:
            check(request, access)
            return await handler(request)
        except HttpError as e:
            return _error_page(request, e.status, e.kind, e.message, e.hint)

    return wrapped


# ------------------------------------------------------------ pages


async def home(request: Request) -> Response:
    from holon_cli.serve.http.ui import views

    def build() -> Response:
        return render.page("home.html", rows=views.home_rows(), logged_in=logged_in(request))

    return await run_in_threadpool(build)


def _mode(request: Request) -> str:
    from holon_cli.runtime.presentation import display_mode

    try:
        return display_mode(request.query_params.get("mode") or "info")
    except ValueError as exc:
        raise HttpError(
            400, "invalid_query", str(exc), "use ?mode=info, verbose or debug"
        ) from None


async def agent(request: Request) -> Response:
    from holon_cli.runtime.inspect import tail_events
    from holon_cli.runtime.presentation import DISPLAY_MODES
    from holon_cli.serve.http.common import open_public
    from holon_cli.serve.http.ui import views

    mode = _mode(request)
    query = request.query_params.get("q", "")
    can = actions(request)

    def build() -> Response:
        store = open_public(request.path_params["agent_id"])
        events = tail_events(store, limit=views.HISTORY_EVENTS)
        rows, activity = views.conversation(events)
        a = views.summary(store)
        a["activity"] = activity
        return render.page(
            "agent.html",
            a=a,
            rows=rows,
            cursor=events[-1]["event_seq"] if events else 0,
            work=views.work_items(store),
            tasks=views.tasks(store),
            timers=views.timers(store),
            workspaces=views.workspaces(store),
            children=views.children(store),
            mcp=views.mcp_requests(store),
            memory=views.memory(store, query),
            mode=mode,
            modes=DISPLAY_MODES,
            actions=can,
            logged_in=logged_in(request),
        )

    return await run_in_threadpool(build)


async def search(request: Request) -> Response:
    from holon_cli.serve.http.ui import views

    query = request.query_params.get("q", "")

    def build() -> Response:
        return render.page("search.html", found=views.search(query), logged_in=logged_in(request))

    return await run_in_threadpool(build)


async def static(request: Request) -> Response:
    return render.static_response(request.path_params["name"], request.query_params.get("v"))


# ------------------------------------------------------------ login


def _next(value: str | None) -> str:
    """Where to go after logging in: a console path, nothing else."""
    if (
        not value
        or not value.startswith("/ui/")
        or "//" in value
        or "\\" in value
        or any(ord(c) < 0x21 for c in value)
    ):
        return "/ui/"
    return value


async def login_form(request: Request) -> Response:
    token = ctx_of(request).settings.token
    target = _next(request.query_params.get("next"))
    if token is None or session.has_session(request, token):
        return RedirectResponse(target, status_code=303, headers=render.headers(render.NO_STORE))
    return render.page("login.html", next=target, error=None)


def _check_login_rate(request: Request) -> None:
    from holon_cli.serve.http.ingress import rate_per_minute, trusted_proxies
    from holon_cli.serve.http.proxies import client_host

    ctx = ctx_of(request)
    peer = request.client.host if request.client else ""
    client = client_host(peer, request.headers.getlist, trusted_proxies())  # as app.client_of
    wait = ctx.limiter.take("ui-login:" + client, rate_per_minute())
    if wait is not None:
        raise HttpError(
            429,
            "rate_limited",
            f"too many login attempts from {client}",
            f"retry in {wait:.0f} s",
            headers={"Retry-After": str(max(1, round(wait + 0.5)))},
        )


async def login(request: Request) -> Response:
    """The login form's POST: the token in an ``application/x-www-form-
    urlencoded`` body; a cookie and a 303 to ``next`` when it matches."""
    import hmac

    if "origin" not in request.headers:
        raise HttpError(
            403,
            "cross_site",
            "a login must come from the console's own login page",
            "open /ui/login in the browser",
        )
    _check_login_rate(request)
    token = ctx_of(request).settings.token
    fields = parse_qs((await read_body(request, LOGIN_BODY_CAP)).decode("utf-8", "replace"))
    target = _next((fields.get("next") or [""])[0])
    if token is None:
        return RedirectResponse(target, status_code=303, headers=render.headers(render.NO_STORE))
    given = (fields.get("token") or [""])[0].strip()
    if not hmac.compare_digest(given.encode(), token.encode()):
        return render.page(
            "login.html",
            status_code=401,
            next=target,
            error="That is not this serve's control token.",
        )
    resp = RedirectResponse(target, status_code=303, headers=render.headers(render.NO_STORE))
    session.set_session(resp, request, token)
    return resp


async def logout(request: Request) -> Response:
    if "origin" not in request.headers:
        raise HttpError(403, "cross_site", "a logout must come from the console", "")
    resp = RedirectResponse("/ui/login", status_code=303, headers=render.headers(render.NO_STORE))
    session.clear_session(resp, request)
    return resp


async def _to_home(_request: Request) -> Response:
    return RedirectResponse("/ui/", status_code=308, headers=render.headers(render.NO_STORE))


# the web console's routes as the HTTP reference lists them (docs/reference/
# http.md): (method, path, access, what it serves); a test holds them to routes()
PAGES: tuple[tuple[str, str, str, str], ...] = (
    (
        "GET",
        "/ui/",
        "control",
        "the agents: status, holds, queue, work item, tasks, "
        "next wake, last activity, spend today (`/ui` redirects here)",
    ),
    (
        "GET",
        "/ui/agents/{agent_id}",
        "control",
        "one agent: the conversation "
        "(`?mode=info|verbose|debug`), work items and plan.md, tasks, timers, workspaces, "
        "children, MCP requests, memory search (`?q=`)",
    ),
    ("GET", "/ui/search", "control", "search every agent's memory and ids (`?q=`)"),
    ("GET", "/ui/live", "control", "the agents page's live updates (server-sent events)"),
    (
        "GET",
        "/ui/agents/{agent_id}/live",
        "control",
        "an agent page's live updates (server-sent events; `?after=`, `Last-Event-ID`)",
    ),
    ("GET", "/ui/login", "browser", "the login form (with a control token)"),
    (
        "POST",
        "/ui/login",
        "browser",
        "log in: the token in a form body; sets the "
        "`holon_console` cookie (HttpOnly, SameSite=Strict); needs serve's Origin; rate-limited",
    ),
    ("POST", "/ui/logout", "browser", "log out: clears the cookie"),
    ("GET", "/ui/static/{name}", "open", "the console's script, stylesheet and icon"),
)


def routes(check: Check) -> list[BaseRoute]:
    from holon_cli.serve.http.ui import live

    def pg(h: Handler) -> Handler:
        return page_route(h, check)

    def st(h: Handler) -> Handler:
        return stream_route(h, check)

    return [
        Route("/ui", open_route(_to_home, check, "open"), methods=["GET"]),
        Route("/ui/", pg(home), methods=["GET"]),
        Route("/ui/search", pg(search), methods=["GET"]),
        Route("/ui/agents/{agent_id}", pg(agent), methods=["GET"]),
        Route("/ui/live", st(live.home_live), methods=["GET"]),
        Route("/ui/agents/{agent_id}/live", st(live.agent_live), methods=["GET"]),
        Route("/ui/login", open_route(login_form, check, "browser"), methods=["GET"]),
        Route("/ui/login", open_route(login, check, "browser"), methods=["POST"]),
        Route("/ui/logout", open_route(logout, check, "browser"), methods=["POST"]),
        Route("/ui/static/{name}", open_route(static, check, "open"), methods=["GET"]),
    ]
