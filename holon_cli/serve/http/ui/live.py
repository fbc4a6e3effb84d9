"""The console's live streams (Server-Sent Events), rendered on the server
so the page's script only places HTML it is given.

Every event is named (a browser's ``onmessage`` sees none of them; the page
listens for each name):

- ``row``: ``{"seq", "html"}``, one conversation row (``id:`` its
  ``event_seq``, so a reconnecting ``EventSource`` resumes after it through
  ``Last-Event-ID``); the row carries the display modes that show it;
- ``panel``: ``{"id", "html"}``, an element of the page to replace whole (the
  status, work items, tasks, timers, workspaces, children; on the home page
  an agent's row, or the whole table when agents come or go); rows go out as
  their events land, the panels at most every :data:`PANELS_EVERY_S`.

Cost when nothing happens: the agent stream ``stat``s the agent's events
ledger every :data:`POLL_S` (and re-reads a running task's output tail
every :data:`TASKS_EVERY_S`); the home stream ``stat``s what each agent's
row is read from (:func:`views.signatures`) every :data:`HOME_POLL_S`. A
ledger that moved is read from the stream's cursor on (``records_after``:
nothing appended is skipped).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from holon_cli.serve.http.common import ctx_of, open_public
from holon_cli.serve.http.errors import HttpError
from holon_cli.serve.http.ui import render, views

if TYPE_CHECKING:
    from holon_cli.model.event_record import EventRecord
    from holon_cli.runtime.presentation import Activity
    from holon_cli.store.agent_store import AgentStore

# the named events the console's streams send (the HTTP reference lists them)
EVENTS = {
    "row": "`{seq, html}`: a conversation row, rendered; `id:` is its event_seq",
    "panel": "`{id, html}`: a part of the page to replace whole (an agent page's "
    "status, work items, tasks, timers, workspaces, children, MCP requests; an agent's "
    "row, or the whole table, on the agents page)",
}
POLL_S = 0.2  # ~0.1 ms a look (wake-up, stat): ~0.03 s of CPU a minute per open page
HOME_POLL_S = 2.0  # 3 stats per agent a look: ~1 ms for 100 agents
TASKS_EVERY_S = 2.0
PANELS_EVERY_S = 0.5  # a busy turn's events re-render the panels at most this often
HEARTBEAT_S = 15.0
BATCH = 200  # events read at a time
RETRY_MS = 2000  # how soon a browser reconnects
MACROS = "_macros.html"


def sse(name: str, data: Mapping[str, object], ident: int | None = None) -> bytes:
    """One named event; JSON with ASCII escapes (text that is not valid
    UTF-8 travels as ``\\udcxx``, never breaks the stream)."""
    head = f"id: {ident}\n" if ident is not None else ""
    return f"{head}event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _stream(gen: AsyncIterator[bytes]) -> Response:
    return StreamingResponse(
        gen,
        media_type="text/event-stream",
        headers=render.headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"}),
    )


def _after(request: Request) -> int:
    raw = request.headers.get("last-event-id", "").strip() or request.query_params.get("after", "")
    if raw == "":
        return 0
    if not raw.isdigit():
        raise HttpError(400, "invalid_query", "`after` must be an event_seq (>= 0)", "")
    return int(raw)


# ------------------------------------------------------------ one agent


def _panels(store: AgentStore, activity: str, can: dict[str, bool]) -> dict[str, str]:
    a = views.summary(store)
    a["activity"] = activity
    return {
        "panel-summary": render.macro(MACROS, "summary", a, can),
        "panel-workitems": render.macro(
            MACROS, "workitems", views.work_items(store), a["agent_id"], can
        ),
        "panel-tasks": _tasks_panel(store, can),
        "panel-timers": render.macro(MACROS, "timers", views.timers(store), store.agent_id, can),
        "panel-workspaces": render.macro(MACROS, "workspaces", views.workspaces(store)),
        "panel-children": render.macro(MACROS, "children", views.children(store)),
        "panel-mcp": render.macro(MACROS, "mcp", views.mcp_requests(store), store.agent_id, can),
    }


def _tasks_panel(store: AgentStore, can: dict[str, bool]) -> str:
    return render.macro(MACROS, "tasks", views.tasks(store), store.agent_id, can)


def _rows(events: list[EventRecord], activity: Activity) -> list[bytes]:
    from holon_cli.runtime.presentation import present

    out = []
    for ev in events:
        activity.update(ev, present(ev))
        r = views.row(ev)
        if r is not None:
            html = render.macro(MACROS, "row", r)
            out.append(sse("row", {"seq": r["seq"], "html": html}, int(ev["event_seq"])))
    return out


def _seeded(store: AgentStore, cursor: int) -> tuple[Activity, bool]:
    """The activity line as of ``cursor`` and whether events came after it."""
    from holon_cli.runtime.inspect import tail_events
    from holon_cli.runtime.presentation import Activity, present

    act = Activity()
    recent = tail_events(store, limit=50)
    for ev in recent:
        if int(ev.get("event_seq") or 0) <= cursor:
            act.update(ev, present(ev))
    newer = bool(recent) and int(recent[-1].get("event_seq") or 0) > cursor
    return act, newer


def _running(store: AgentStore) -> bool:
    from holon_cli.runtime.tasks.control import active_tasks

    return bool(active_tasks(store))


async def agent_live(request: Request) -> Response:
    from holon_cli.runtime.inspect import tail_events
    from holon_cli.serve.http.ui.actions import actions

    after = _after(request)
    store = await run_in_threadpool(open_public, request.path_params["agent_id"])
    can = actions(request)
    stopping = ctx_of(request).stopping

    async def gen() -> AsyncIterator[bytes]:
        yield f"retry: {RETRY_MS}\n\n".encode()
        cursor = after
        activity, newer = await run_in_threadpool(_seeded, store, cursor)
        # what the page shows: a panel is sent when it differs (all of them
        # when events came between the page and this stream)
        shown: dict[str, str] = {}
        if not newer:
            shown = await run_in_threadpool(_panels, store, activity.text, can)
        sig = views.events_signature(store)
        running = await run_in_threadpool(_running, store)
        tasks_at = panels_at = time.monotonic()
        quiet = 0.0
        pending, stale = newer, newer
        while not stopping.is_set():
            if pending:
                pending = False
                events = await run_in_threadpool(tail_events, store, since=cursor, limit=BATCH)
                if events:
                    cursor = int(events[-1]["event_seq"])
                    stale = True
                    for chunk in await run_in_threadpool(_rows, events, activity):
                        yield chunk
                    if len(events) == BATCH:
                        pending = True
                        continue
                quiet = 0.0
            if stale and (newer or time.monotonic() - panels_at >= PANELS_EVERY_S):
                # rows go out at once; the panels at most once a PANELS_EVERY_S
                stale = newer = False
                panels = await run_in_threadpool(_panels, store, activity.text, can)
                for pid, html in panels.items():
                    if shown.get(pid) != html:
                        yield sse("panel", {"id": pid, "html": html})
                shown = panels
                running = await run_in_threadpool(_running, store)
                tasks_at = panels_at = time.monotonic()
            elif running and time.monotonic() - tasks_at >= TASKS_EVERY_S:
                tasks_at = time.monotonic()
                html = await run_in_threadpool(_tasks_panel, store, can)
                if shown.get("panel-tasks") != html:
                    shown["panel-tasks"] = html
                    yield sse("panel", {"id": "panel-tasks", "html": html})
                running = await run_in_threadpool(_running, store)
            await asyncio.sleep(POLL_S)
            quiet += POLL_S
            if quiet >= HEARTBEAT_S:
                quiet = 0.0
                yield b": keep-alive\n\n"
            now = views.events_signature(store)
            if now != sig:
                sig, pending = now, True

    return _stream(gen())


# ------------------------------------------------------------ home


def _home_rows(ids: list[str], depth: dict[str, int]) -> list[tuple[str, str]]:
    cfg = views.config()
    sigs = views.signatures()
    out = []
    for aid in ids:
        row = {**views.cached_row(aid, sigs.get(aid), cfg), "depth": depth.get(aid, 0)}
        out.append((f"agent-{aid}", render.macro(MACROS, "agent_row", row)))
    return out


def _home_table() -> tuple[str, dict[str, int]]:
    rows = views.home_rows()
    return render.macro(MACROS, "agents_table", rows), views.row_depths(rows)


async def home_live(request: Request) -> Response:
    stopping = ctx_of(request).stopping

    async def gen() -> AsyncIterator[bytes]:
        yield f"retry: {RETRY_MS}\n\n".encode()
        sigs = views.signatures()
        depth = await run_in_threadpool(views.depths)
        quiet = 0.0
        while not stopping.is_set():
            await asyncio.sleep(HOME_POLL_S)
            quiet += HOME_POLL_S
            now = views.signatures()
            if set(now) != set(sigs):  # agents came or went: the whole table
                html, depth = await run_in_threadpool(_home_table)
                yield sse("panel", {"id": "agents-body", "html": html})
                quiet = 0.0
            elif now != sigs:
                changed = sorted(a for a in now if now[a] != sigs.get(a))
                for pid, html in await run_in_threadpool(_home_rows, changed, depth):
                    yield sse("panel", {"id": pid, "html": html})
                quiet = 0.0
            sigs = now
            if quiet >= HEARTBEAT_S:
                quiet = 0.0
                yield b": keep-alive\n\n"

    return _stream(gen())
