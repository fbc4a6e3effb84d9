"""Removing agents: ``holon agent rm`` and ``holon agent prune``.

Invariants:
- An agent with a turn in progress is never removed (its turn lock is held
  for the whole removal, so no turn can start meanwhile; busy: exit 75).
- A named agent must be stopped first, and removing it needs ``force``:
  its home holds the operator's history and work items. A temporary run
  agent (made by ``holon run`` without ``--agent``) that has finished can
  be removed without ``force``.
- A parent with running children is refused without ``force``; with it,
  each child is stopped and archived first (its handle ``cancelled``).
- Its running tasks go first: a named agent's are stopped with it (their
  one ``task_result`` lands before the home goes, so no supervisor writes
  into a removed home); a temporary agent's running tasks are unfinished
  work (kept without ``force``, stopped with it).
- The home disappears atomically: it is renamed to a dot-folder (which
  ``agent list`` and every lookup ignore) and then deleted, so a crash
  mid-delete never leaves a half agent that looks alive.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, TypedDict, cast

from holon_cli.errors import NotFoundError, RejectedError
from holon_cli.runtime import queue as q
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord


def is_run_agent(agent_id: str, record: AgentRecord) -> bool:
    """A temporary private agent made by ``holon run`` (no ``--agent``)."""
    ident = record.get("identity") or {}
    return (
        agent_id.startswith("run-")
        and ident.get("visibility") == "private"
        and ident.get("profile_preset") == "private_child"
    )


def _running_tasks(store: AgentStore) -> list[str]:
    from holon_cli.model import task as tm
    from holon_cli.runtime.tasks.recovery import unsettled_tasks

    return [
        str(r["id"])
        for r in unsettled_tasks(store)
        if not tm.is_terminal(r.get("status")) and not tm.is_child_task(r)
    ]


def _running_children(store: AgentStore, force: bool) -> list[str]:
    """The agent's live children; refused without ``force`` (they are stopped
    and archived first with it)."""
    from holon_cli.runtime.children.handle import running_children

    children = running_children(store)
    if children and not force:
        raise RejectedError(
            f"agent {store.agent_id!r} supervises {len(children)} running child agent(s) "
            f"({', '.join(children)})",
            hint=f"wait for them, stop them with `holon task stop` (see `holon task list "
            f"--agent {store.agent_id}`), or pass --force to stop and archive them first",
        )
    return children


def _stop_tasks(store: AgentStore) -> list[str]:
    from holon_cli.runtime.tasks.control import stop_unsettled

    return stop_unsettled(store) if _running_tasks(store) else []


def _unfinished(store: AgentStore) -> str | None:
    """Why the agent still has work, or None when it has none left."""
    tasks = _running_tasks(store)
    if tasks:
        return f"{len(tasks)} task(s) still running ({', '.join(tasks)})"
    st = q.load(store)
    pending = q.pending_count(store, st)
    in_flight = len(st.in_flight())
    if in_flight:
        return f"{in_flight} message(s) in flight (an interrupted turn will replay them)"
    if pending:
        return f"{pending} queued message(s)"
    return None


def _store(agent_id: str) -> tuple[AgentStore, AgentRecord]:
    layout = HomeLayout.current().agent(agent_id)
    rec = read_snapshot(layout.agent_file) if layout.home.is_dir() else None
    if rec is None:
        raise NotFoundError(
            f"unknown agent {agent_id!r}", hint="`holon agent list --all` shows the agents"
        )
    return AgentStore(layout), cast("AgentRecord", rec)


def _delete_home(store: AgentStore) -> None:
    home = store.layout.home
    grave = home.with_name(f".removing-{home.name}-{os.getpid()}")
    os.replace(home, grave)
    try:
        dfd = os.open(home.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    shutil.rmtree(grave, ignore_errors=True)
    from holon_cli.store.wake import forget

    forget(home)


class Removed(TypedDict):
    """What ``holon agent rm`` removed."""

    agent_id: str
    agent_home: str
    temporary: bool
    previous_status: str
    stopped_tasks: list[str]
    stopped_children: list[str]
    removed: bool


class Pruned(TypedDict):
    """What ``holon agent prune`` removed (or would) and what it kept, why."""

    removed: list[dict[str, str]]  # {agent_id, agent_home}
    kept: list[dict[str, str]]  # {agent_id, reason}
    dry_run: bool


def remove_agent(agent_id: str, *, force: bool = False) -> Removed:
    store, rec = _store(agent_id)
    temporary = is_run_agent(agent_id, rec)
    with store.turn_lock():  # BusyError (exit 75) while a turn runs
        children = _running_children(store, force)
        rec = store.read_record()
        status = rec["state"]["status"]
        if not temporary:
            if status != "stopped":
                raise RejectedError(
                    f"agent {agent_id!r} is running (status {status})",
                    hint=f"stop it first: `holon agent stop {agent_id}`, "
                    f"then `holon agent rm {agent_id} --force`",
                )
            if not force:
                raise RejectedError(
                    f"agent {agent_id!r} is stopped; removing it deletes its home "
                    f"{store.layout.home} (history, work items, notes)",
                    hint=f"pass --force to remove it: `holon agent rm {agent_id} --force`",
                )
        else:
            why = _unfinished(store)
            if why and not force:
                raise RejectedError(
                    f"temporary agent {agent_id!r} has unfinished work: {why}",
                    hint=f"inspect it with `holon status --agent {agent_id}`; "
                    "pass --force to remove it anyway",
                )
        if children:
            from holon_cli.runtime.children.handle import stop_children

            stopped_children = stop_children(store)
        else:
            stopped_children = []
        stopped = _stop_tasks(store)
        _delete_home(store)
    return {
        "agent_id": agent_id,
        "agent_home": str(store.layout.home),
        "temporary": temporary,
        "previous_status": status,
        "stopped_tasks": stopped,
        "stopped_children": stopped_children,
        "removed": True,
    }


def prune_run_agents(*, dry_run: bool = False) -> Pruned:
    """Remove every finished temporary run agent; report what was kept and why."""
    from holon_cli.errors import BusyError

    agents_dir = HomeLayout.current().agents_dir
    try:
        names = sorted(os.listdir(agents_dir))
    except FileNotFoundError:
        names = []
    removed: list[dict[str, str]] = []
    kept: list[dict[str, str]] = []
    for name in names:
        if name.startswith(".") or not name.startswith("run-"):
            continue
        try:
            store, rec = _store(name)
        except NotFoundError:
            continue
        if not is_run_agent(name, rec):
            continue
        try:
            with store.turn_lock():
                why = _unfinished(store)
                if why:
                    kept.append({"agent_id": name, "reason": why})
                    continue
                if not dry_run:
                    _delete_home(store)
                removed.append({"agent_id": name, "agent_home": str(store.layout.home)})
        except BusyError:
            kept.append({"agent_id": name, "reason": "a turn is running"})
    return {"removed": removed, "kept": kept, "dry_run": dry_run}
