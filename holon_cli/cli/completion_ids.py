"""The live ids a TAB press offers: agents, work items, tasks, timers and
workspaces.

Read by the ``shell_complete`` callbacks of :mod:`holon_cli.cli.params` while
the shell waits, so every reader here:

- takes no lock and writes nothing: snapshots are replaced atomically and
  ledgers only grow, so a lock-free read sees a whole (if slightly old) state;
  a home or agent that does not exist yields nothing and is not created (the
  commands create the default agent on first use; completing never does);
- skips what it cannot read: a damaged agent (no record, or one that is not
  valid JSON or not the contract's shape) is left out and the others are
  offered; a damaged ledger gives no ids for that agent;
- filters by the typed prefix before reading a record, so a TAB after a few
  letters reads only the agents that can match.

Click-free: returns :class:`Candidate` (value, one-line description) pairs;
``params.py`` wraps them in click's ``CompletionItem``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from holon_cli.errors import HolonError
from holon_cli.store.layout import AGENT_ID_RE, HomeLayout, default_agent_id

if TYPE_CHECKING:
    from holon_cli.store.agent_store import AgentStore

HELP_WIDTH = 60

# what a damaged file or a racing writer can raise on a lock-free read
_UNREADABLE = (HolonError, OSError, ValueError, KeyError, TypeError, AttributeError)


class Candidate(NamedTuple):
    value: str
    help: str


def _line(*parts: object) -> str:
    """One line of description: the non-empty parts, control characters dropped."""
    text = " ".join(str(p) for p in parts if p not in (None, ""))
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split())
    return text if len(text) <= HELP_WIDTH else text[: HELP_WIDTH - 3].rstrip() + "..."


def _guarded(read: Callable[[], list[Candidate]]) -> list[Candidate]:
    try:
        return read()
    except _UNREADABLE:
        return []


# -- agents -------------------------------------------------------------------------


def agents(prefix: str = "") -> list[Candidate]:
    """Every agent of the home whose record reads, public and private, by id;
    the description is its status (and ``private`` for ``holon run``'s)."""
    home = HomeLayout.current()
    try:
        names = sorted(os.listdir(home.agents_dir))
    except OSError:
        return []
    out: list[Candidate] = []
    for name in names:
        if not name.startswith(prefix) or not AGENT_ID_RE.fullmatch(name):
            continue  # staging folders (dot names) and stray files never match
        desc = _agent_description(home, name)
        if desc is not None:
            out.append(Candidate(name, desc))
    return out


def _agent_description(home: HomeLayout, agent_id: str) -> str | None:
    """``status [private]`` from the record; ``None`` for a damaged agent."""
    from holon_cli.store.fsio import read_snapshot

    try:
        rec = read_snapshot(home.agent(agent_id).agent_file, max_version=_agent_version())
        if rec is None:
            return None
        status, ident = rec["state"]["status"], rec["identity"]
        private = ident.get("visibility") == "private"
        return _line(status, "private" if private else "", ident.get("kind"))
    except _UNREADABLE:
        return None


def _agent_version() -> int:
    from holon_cli.model.agent import AGENT_RECORD_VERSION

    return AGENT_RECORD_VERSION


def _store(agent_id: str | None) -> AgentStore | None:
    """The named (or default) agent's store when its record exists; never created."""
    aid = agent_id or default_agent_id()
    if not AGENT_ID_RE.fullmatch(aid):
        return None
    layout = HomeLayout.current().agent(aid)
    if not layout.exists:
        return None
    from holon_cli.store.agent_store import AgentStore

    return AgentStore(layout)


# -- work items, tasks, timers ------------------------------------------------------


def work_items(agent_id: str | None, prefix: str = "", *, open_only: bool) -> list[Candidate]:
    """The agent's work items (open ones only with ``open_only``), by id;
    described by state and objective."""

    def read() -> list[Candidate]:
        store = _store(agent_id)
        if store is None:
            return []
        from holon_cli.store.workitem_index import load

        idx = load(store)
        # open items are all in the index's head: no need to read the archive
        items = {r["id"]: r for r in idx.open_records()} if open_only else idx.items
        return [
            Candidate(wid, _line(rec.get("state"), rec.get("objective")))
            for wid, rec in sorted(items.items())
            if wid.startswith(prefix) and (not open_only or rec.get("state") == "open")
        ]

    return _guarded(read)


def turns(agent_id: str | None, prefix: str = "") -> list[Candidate]:
    """The agent's recorded turns (``holon replay``), newest first."""

    def read() -> list[Candidate]:
        store = _store(agent_id)
        if store is None:
            return []
        from holon_cli.runtime.replay.records import turn_ids

        return [Candidate(t, "recorded turn") for t in turn_ids(store) if t.startswith(prefix)]

    return _guarded(read)


def tasks(agent_id: str | None, prefix: str = "", *, active_only: bool) -> list[Candidate]:
    """The agent's command tasks (running ones only with ``active_only``), by id;
    described by status and command. No recovery pass runs: a task whose
    supervisor died shows its last recorded status."""

    def read() -> list[Candidate]:
        store = _store(agent_id)
        if store is None:
            return []
        from holon_cli.model.task import is_terminal, public_status
        from holon_cli.runtime.tasks.records import iter_records

        out = []
        for _dir, rec in iter_records(store):
            tid: Any = rec.get("id")
            if not isinstance(tid, str) or not tid.startswith(prefix) or not rec.get("promoted"):
                continue
            if active_only and is_terminal(rec.get("status")):
                continue
            out.append(Candidate(tid, _line(public_status(rec.get("status")), rec.get("summary"))))
        return out

    return _guarded(read)


def timers(agent_id: str | None, prefix: str = "", *, active_only: bool) -> list[Candidate]:
    """The agent's timers (active ones only with ``active_only``), by id;
    described by status, next fire and message."""

    def read() -> list[Candidate]:
        store = _store(agent_id)
        if store is None:
            return []
        from holon_cli.runtime.waiting.timers import load

        out = []
        for tid, t in sorted(load(store).timers.items()):
            if not tid.startswith(prefix) or (active_only and t.get("status") != "active"):
                continue
            nxt = t.get("next_fire_at") if t.get("status") == "active" else None
            out.append(Candidate(tid, _line(t.get("status"), nxt, t.get("message"))))
        return out

    return _guarded(read)


# -- workspaces ---------------------------------------------------------------------


def workspaces(agent_id: str | None, prefix: str = "", *, with_home: bool) -> list[Candidate]:
    """The agent's attached workspace ids (``agent_home`` first with
    ``with_home``), described by anchor and whether it is active."""

    def read() -> list[Candidate]:
        store = _store(agent_id)
        if store is None:
            return []
        from holon_cli.model.workspace import AGENT_HOME
        from holon_cli.runtime.workspace import attached_ids, legacy_anchors, workspace_for
        from holon_cli.store.workspace_registry import read_registry

        state = store.read_record()["state"]
        active = workspace_for(store.layout.home, state).workspace_id
        anchors = {
            r["workspace_id"]: r["workspace_anchor"] for r in read_registry(HomeLayout.current())
        }
        anchors.update(legacy_anchors(state))
        ids = ([AGENT_HOME] if with_home else []) + attached_ids(state)
        return [
            Candidate(w, _line("active" if w == active else "", anchors.get(w)))
            for w in ids
            if w.startswith(prefix)
        ]

    return _guarded(read)


def skills(agent_id: str | None, prefix: str = "") -> list[Candidate]:
    """The agent's own skills (folders of ``<agent_home>/skills/`` holding a
    SKILL.md: what ``holon skills rm`` takes)."""

    def read() -> list[Candidate]:
        store = _store(agent_id)
        if store is None:
            return []
        root = store.layout.home / "skills"
        try:
            names = sorted(os.listdir(root))
        except OSError:
            return []
        return [
            Candidate(n, "")
            for n in names
            if n.startswith(prefix)
            and not n.startswith(".")
            and os.path.isfile(os.path.join(root, n, "SKILL.md"))
        ]

    return _guarded(read)
