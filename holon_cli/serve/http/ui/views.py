"""What the web console shows, read from the runtime: plain values for the
templates (no HTML here, nothing escaped here: the templates escape every
value). The same runtime functions as the CLI's read commands (``holon
status``, ``workitem list``, ``task list``, ``timer list``, ``workspace
list``, ``memory search``) and the presentation layer the TUI uses
(``runtime/presentation.py``) for the conversation.

Read-only: nothing here takes a lock or writes a file, apart from what the
reads themselves keep in step (the memory search index, as ``holon memory
search`` does). Plan descriptors are not refreshed (as ``GET
/agents/{id}/state``); ``plan.md`` is read as it is on disk.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.runtime.presentation import Activity, present, row_text, shown_modes

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.event_record import EventRecord
    from holon_cli.store.agent_store import AgentStore

HISTORY_EVENTS = 500  # as the TUI: how far back the conversation starts
TEXT_CAP = 8000  # characters of one conversation row (the rest is cut, said so)
PLAN_CAP = 64 << 10  # bytes of plan.md rendered
TAIL_CHARS = 2000  # characters of a task's output shown
TASKS_SHOWN = 20
TIMERS_SHOWN = 20
WORK_ITEMS_SHOWN = 50
SEARCH_LIMIT = 20
SEARCH_PER_AGENT = 10
LAST_LOOK = 20  # events the home page looks back for an agent's last activity

# an agent folder's signature: the day and config.yaml's stat, then the
# watched paths' (inode, size, mtime), each None when missing
Signature = tuple[object, ...]


# ------------------------------------------------------------ conversation


def row(event: Mapping[str, Any]) -> dict[str, object] | None:
    """One event as a conversation row, tagged with the display modes that
    show it; ``None`` for what no mode shows (state syncs)."""
    presented = present(event)
    modes = shown_modes(presented)
    if not modes:
        return None
    text = row_text(presented)
    cut = len(text) - TEXT_CAP
    return {
        "seq": event.get("event_seq"),
        "at": event.get("at"),
        "title": presented["title"],
        "text": text[:TEXT_CAP] if cut > 0 else text,
        "cut": max(cut, 0),
        "visibility": presented["visibility"],
        "category": presented["category"],
        "modes": modes,
    }


def conversation(
    events: Iterable[Mapping[str, Any]], activity: Activity | None = None
) -> tuple[list[dict[str, object]], str]:
    """The rows of ``events`` and the turn-scoped activity line after them."""
    act = activity or Activity()
    rows: list[dict[str, object]] = []
    line = act.text
    for ev in events:
        line = act.update(ev, present(ev))
        r = row(ev)
        if r is not None:
            rows.append(r)
    return rows, line


# ------------------------------------------------------------ agents


def config() -> HolonConfig:
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        return load_config()
    except ConfigError:
        return {}


def next_wake(agent_id: str) -> str | None:
    """The earliest time serve would look at the agent again by itself
    (sleep end, work-item recheck, timer, budget reset), as serve computes it."""
    from holon_cli.errors import HolonError
    from holon_cli.serve.loop import agent_deadline

    try:
        at = agent_deadline(agent_id)
    except HolonError:
        return None
    return clock.iso(at) if at is not None else None


def spend_today(store: AgentStore) -> dict[str, object]:
    from holon_cli.runtime.budgets.spend import spent_today

    got = spent_today(store)
    got["tokens"] = got["input_tokens"] + got["output_tokens"]
    return got


def holds(store: AgentStore, cfg: HolonConfig) -> list[dict[str, object]]:
    """What keeps the agent's queued work from running by itself (``holon
    status`` ``holds[]``: stopped, paused, budget, the no-progress guard)."""
    from holon_cli.runtime.agents.holds import agent_holds

    return [dict(h) for h in agent_holds(store, cfg)]


def _objective(store: AgentStore, wid: Any) -> str | None:
    if not isinstance(wid, str):
        return None
    from holon_cli.runtime import workitems as wi

    rec = wi.load(store).get(wid)  # one item: the index head, the archive only if old
    return str(rec.get("objective") or "") if rec else None


def home_row(store: AgentStore, cfg: HolonConfig) -> dict[str, object]:
    """One agent on the home page."""
    from holon_cli.runtime import queue as q
    from holon_cli.runtime.tasks.control import active_tasks

    rec = store.read_record()
    state, ident = rec["state"], rec["identity"]
    qs = q.load(store)
    recent = store.events.tail(LAST_LOOK)
    wid = state.get("current_work_item_id")
    return {
        "agent_id": store.agent_id,
        "status": state["status"],
        "kind": ident["kind"],
        "private": ident.get("visibility") == "private",
        "parent": ident.get("lineage_parent_agent_id"),
        "holds": holds(store, cfg),
        "pending": q.pending_count(store, qs),
        "in_flight": len(qs.in_flight()),
        "work_item_id": wid,
        "work_item": _objective(store, wid),
        "tasks": active_tasks(store),
        "next_wake": next_wake(store.agent_id),
        "last_at": recent[-1].get("at") if recent else None,
        "last_text": _last_text(recent),
        "spend": spend_today(store),
    }


def _last_text(events: list[EventRecord]) -> str | None:
    """The newest row the ``verbose`` conversation shows, as one line."""
    for ev in reversed(events):
        presented = present(ev)
        if "verbose" in shown_modes(presented):
            return presented["summary"]
    return None


def home_rows() -> list[dict[str, object]]:
    """Every agent of the home, children right under their parent (a
    damaged agent is listed with its problem: it hides no other)."""
    from holon_cli.runtime.agents.lifecycle import list_agents

    cfg = config()
    sigs = signatures()
    rows: dict[str, dict[str, object]] = {}
    for e in list_agents(include_private=True):
        if e.problem is not None:
            rows[e.agent_id] = _damaged(e.agent_id, e.problem)
        else:
            rows[e.agent_id] = cached_row(e.agent_id, sigs.get(e.agent_id), cfg)
    for gone in set(_ROWS) - set(rows):  # removed agents leave the cache too
        _ROWS.pop(gone, None)
    return tree(rows)


# serve's warm-up reads the home rows ahead of the first console page (about
# 3 ms an agent, read once: later pages read only what changed) for homes up
# to this many agents; a larger home's first page reads them itself
WARM_ROWS_MAX = 300


def warm_rows() -> int:
    """Fill the home-row cache (serve's warm-up thread, after the templates):
    the first home page after serve starts then reads only what changed since.
    The number of rows read (0: the home is larger than ``WARM_ROWS_MAX``)."""
    from holon_cli.store.layout import HomeLayout

    try:
        names = [n for n in os.listdir(HomeLayout.current().agents_dir) if not n.startswith(".")]
    except OSError:
        return 0
    if len(names) > WARM_ROWS_MAX:
        return 0
    return len(home_rows())


# An agent's home row is kept while nothing it is read from changed: the
# events ledger (every status change, queue move, work-item pick, turn and
# spend is an event), the inbox (a message not yet ingested), the tasks
# folder (a task started by `holon task run`), config.yaml and the day (spend
# today); and until the next time it names (a wake, a hold's end) has
# passed. Only serve's own process keeps it.
_WATCHED = ("ledger/events.jsonl", "inbox/new", "tasks")
_ROWS: dict[str, tuple[Signature | None, float, dict[str, object]]] = {}


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def signatures() -> dict[str, Signature]:
    """Each agent folder's signature (plain ``stat`` calls, no parsing):
    what :func:`cached_row` and the home page's live stream compare."""
    from holon_cli.store.layout import HomeLayout

    home = HomeLayout.current()
    root = str(home.agents_dir)
    shared = (int(clock.now() // 86400), _stat(str(home.config)))
    try:
        names = os.listdir(root)
    except OSError:
        return {}
    return {
        name: (shared, *(_stat(f"{root}/{name}/.holon/{rel}") for rel in _WATCHED))
        for name in names
        if not name.startswith(".")
    }


def cached_row(agent_id: str, sig: Signature | None, cfg: HolonConfig) -> dict[str, object]:
    """:func:`home_row`, or the same row while ``sig`` holds (see above)."""
    from holon_cli.errors import HolonError
    from holon_cli.store.agent_store import AgentStore
    from holon_cli.store.layout import HomeLayout

    hit = _ROWS.get(agent_id)
    now = clock.now()
    if hit is not None and sig is not None and hit[0] == sig and now < hit[1]:
        return hit[2]
    try:
        row = home_row(AgentStore(HomeLayout.current().agent(agent_id)), cfg)
    except HolonError as exc:
        _ROWS.pop(agent_id, None)
        return _damaged(agent_id, exc.message)
    held = row["holds"]
    holds_ = held if isinstance(held, list) else []
    times = [row["next_wake"], *(h.get("until") for h in holds_ if isinstance(h, Mapping))]
    ends = [clock.parse_iso(t) for t in times if isinstance(t, str)]
    _ROWS[agent_id] = (sig, min([now - now % 86400 + 86400, *ends]), row)
    return row


def _damaged(agent_id: str, problem: str) -> dict[str, object]:
    return {"agent_id": agent_id, "status": "damaged", "problem": problem, "parent": None}


def depths() -> dict[str, int]:
    """Each agent's depth on the home page (children under their parent),
    from the agent records alone."""
    from holon_cli.runtime.agents.lifecycle import list_agents

    rows = {
        e.agent_id: {"agent_id": e.agent_id, "parent": e.lineage_parent_agent_id}
        for e in list_agents(include_private=True)
    }
    return dict(_order(rows))


def row_depths(rows: Iterable[Mapping[str, object]]) -> dict[str, int]:
    """Each row's ``depth`` by its ``agent_id`` (rows from :func:`tree`)."""
    out: dict[str, int] = {}
    for r in rows:
        aid, depth = r.get("agent_id"), r.get("depth")
        if isinstance(aid, str) and isinstance(depth, int):
            out[aid] = depth
    return out


def tree(rows: Mapping[str, Mapping[str, object]]) -> list[dict[str, object]]:
    """``rows`` in tree order, each with its ``depth``: roots sorted by id,
    each followed by its children (a parent that is gone makes a root)."""
    return [{**rows[aid], "depth": depth} for aid, depth in _order(rows)]


def _order(rows: Mapping[str, Mapping[str, object]]) -> list[tuple[str, int]]:
    """The agent ids of :func:`tree` in its order, each with its depth."""
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for aid, r in rows.items():
        parent = r.get("parent")
        if isinstance(parent, str) and parent in rows and parent != aid:
            children.setdefault(parent, []).append(aid)
        else:
            roots.append(aid)
    out: list[tuple[str, int]] = []
    seen: set[str] = set()

    def walk(aid: str, depth: int) -> None:
        if aid in seen:
            return
        seen.add(aid)
        out.append((aid, depth))
        for child in sorted(children.get(aid, ())):
            walk(child, depth + 1)

    for aid in sorted(roots):
        walk(aid, 0)
    for aid in sorted(rows):  # a cycle in hand-edited records: still listed
        walk(aid, 0)
    return out


# ------------------------------------------------------------ one agent


def summary(store: AgentStore) -> dict[str, object]:
    """The agent page's header: ``holon status`` data plus next wake, spend
    today and the current work item's objective."""
    from holon_cli.runtime.inspect import agent_summary

    s = agent_summary(store)
    s.setdefault("holds", holds(store, config()))
    last = store.events.last()
    s["last_at"] = last.get("at") if last else None
    s["next_wake"] = next_wake(store.agent_id)
    s["spend"] = spend_today(store)
    s["work_item"] = _objective(store, s.get("current_work_item_id"))
    return s


def _plan(view: Mapping[str, Any]) -> tuple[str | None, bool]:
    """``plan.md`` as it is on disk (at most :data:`PLAN_CAP` bytes) and
    whether it was cut; ``None`` when there is no file."""
    path = (view.get("plan_artifact") or {}).get("path")
    if not isinstance(path, str):
        return None, False
    try:
        with open(path, "rb") as fh:
            raw = fh.read(PLAN_CAP + 1)
    except OSError:
        return None, False
    return raw[:PLAN_CAP].decode("utf-8", errors="replace"), len(raw) > PLAN_CAP


def work_items(store: AgentStore) -> dict[str, object]:
    from holon_cli.runtime import workitems as wi

    got = wi.list_work_items(store, filter="all", limit=WORK_ITEMS_SHOWN, refresh=False)
    items = []
    for v in got["work_items"]:
        plan, cut = _plan(v) if v.get("state") == "open" else (None, False)
        items.append({**v, "plan": plan, "plan_cut": cut})
    return {"items": items, "total": got["total"], "current": got["current_work_item_id"]}


def _task_tail(t: Mapping[str, Any]) -> tuple[str, bool]:
    from holon_cli.runtime.tasks.output import output_tail

    path = (t.get("command") or {}).get("output_path")
    if isinstance(path, str) and path:
        return output_tail(Path(path), TAIL_CHARS)
    obs = t.get("child_observability")
    text = (obs or {}).get("last_progress_brief") if isinstance(obs, Mapping) else None
    text = t.get("result_summary") or text or ""
    return str(text)[-TAIL_CHARS:], len(str(text)) > TAIL_CHARS


def tasks(store: AgentStore) -> list[dict[str, object]]:
    """Command tasks and child handles, running first, then the newest."""
    from holon_cli.model import task as tm
    from holon_cli.runtime.children.handle import list_tasks

    got = list_tasks(store, include_all=True)
    got.sort(key=lambda t: str(t.get("created_at") or ""), reverse=True)
    got.sort(key=lambda t: tm.is_terminal(t.get("status")))
    out = []
    for t in got[:TASKS_SHOWN]:
        tail, cut = _task_tail(t)
        out.append({**t, "active": not tm.is_terminal(t.get("status")), "tail": tail, "cut": cut})
    return out


def timers(store: AgentStore) -> list[dict[str, object]]:
    from holon_cli.runtime.waiting.timers import list_timers

    got = list_timers(store, include_all=True)
    active = [dict(t) for t in got if t["status"] == "active"]
    done = [dict(t) for t in got if t["status"] != "active"]
    done.sort(key=lambda t: str(t.get("last_fired_at") or t.get("created_at") or ""))
    return (active + done[::-1])[:TIMERS_SHOWN]


def workspaces(store: AgentStore) -> list[dict[str, object]]:
    from holon_cli.runtime.workspace.plane import list_workspaces

    return list_workspaces(store)


def children(store: AgentStore) -> list[dict[str, object]]:
    """The agent's descendants (public and private), as a tree under it."""
    from holon_cli.runtime.agents.lifecycle import list_agents

    entries = list_agents(include_private=True)
    parent = {e.agent_id: e.lineage_parent_agent_id for e in entries}
    under: set[str] = set()
    frontier = {store.agent_id}
    while frontier:
        frontier = {a for a, p in parent.items() if p in frontier and a not in under}
        under |= frontier
    rows = {
        e.agent_id: {
            "agent_id": e.agent_id,
            "status": e.status,
            "private": e.visibility == "private",
            "archived": e.archived,
            "parent": e.lineage_parent_agent_id,
        }
        for e in entries
        if e.agent_id in under
    }
    return [
        {**rows[aid], "depth": depth + (1 if rows[aid]["parent"] == store.agent_id else 0)}
        for aid, depth in _order(rows)
    ]


_FIELD_TYPES = {"string", "boolean", "integer", "number"}


def mcp_requests(store: AgentStore) -> list[dict[str, object]]:
    """The agent's open MCP operator requests (``holon mcp requests``), each
    with the form its server asks for: ``fields[] {name, title,
    description, type, required, enum}`` (the flat schema MCP allows) and
    ``link`` (the URL it asks the operator to open, http(s) only). An agent
    that never had one reads one missing file: no MCP code is loaded."""
    if not store.layout.ledger_path("mcp_requests").exists():
        return []
    from holon_cli.runtime.mcp.requests import list_requests

    out = []
    for r in list_requests([store]):
        schema = r.get("requested_schema") or {}
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        required = set(schema.get("required") or []) if isinstance(schema, Mapping) else set()
        fields = []
        for name, p in (props or {}).items():
            p = p if isinstance(p, Mapping) else {}
            kind = str(p.get("type") or "string")
            enum = p.get("enum") if isinstance(p.get("enum"), list) else None
            fields.append(
                {
                    "name": str(name),
                    "title": str(p.get("title") or name),
                    "description": p.get("description"),
                    "type": kind if kind in _FIELD_TYPES else "string",
                    "required": name in required,
                    "enum": [str(v) for v in enum] if enum else None,
                }
            )
        url = r.get("url")
        link = (
            url
            if isinstance(url, str) and url.lower().startswith(("https://", "http://"))
            else None
        )
        out.append({**r, "fields": fields, "link": link})
    return out


def memory(store: AgentStore, query: str) -> dict[str, object]:
    """``holon memory search QUERY --all-workspaces``; a bad query is an error
    shown beside the form, never a failed page."""
    from holon_cli.errors import HolonError
    from holon_cli.runtime.memory.search import memory_search

    if not query.strip():
        return {"query": query, "results": [], "error": None}
    try:
        got = memory_search(store, query, limit=SEARCH_LIMIT, include_all_workspaces=True)
    except HolonError as exc:
        return {"query": query, "results": [], "error": exc.message}
    return {"query": query, "results": got["results"], "error": None}


def _score(result: Mapping[str, object]) -> float:
    score = result.get("score")
    return float(score) if isinstance(score, int | float) else 0.0


def search(query: str) -> dict[str, object]:
    """Cross-agent search: agents whose id matches, and each public agent's
    memory (briefs, episodes, work items and plans, memory files), best
    first."""
    from holon_cli.errors import HolonError
    from holon_cli.runtime.agents.lifecycle import list_agents
    from holon_cli.runtime.memory.search import memory_search
    from holon_cli.store.agent_store import AgentStore
    from holon_cli.store.layout import HomeLayout

    q = query.strip()
    if not q:
        return {"query": query, "agents": [], "results": [], "errors": []}
    home = HomeLayout.current()
    entries = [e for e in list_agents() if e.problem is None]
    agents = [
        {"agent_id": e.agent_id, "status": e.status}
        for e in entries
        if q.lower() in e.agent_id.lower()
    ]
    results: list[dict[str, object]] = []
    errors: list[dict[str, str]] = []
    for e in entries:
        try:
            got = memory_search(
                AgentStore(home.agent(e.agent_id)),
                q,
                limit=SEARCH_PER_AGENT,
                include_all_workspaces=True,
            )
        except HolonError as exc:
            errors.append({"agent_id": e.agent_id, "error": exc.message})
            continue
        results += [{**r, "agent_id": e.agent_id} for r in got["results"]]
    results.sort(key=_score, reverse=True)
    return {"query": query, "agents": agents, "results": results[:SEARCH_LIMIT], "errors": errors}


def events_signature(store: AgentStore) -> tuple[int, int, int] | None:
    """What changes when the agent's events ledger gains a record (or is
    closed into a segment): a ``stat``, cheap enough to poll."""
    try:
        st = os.stat(store.events.path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
