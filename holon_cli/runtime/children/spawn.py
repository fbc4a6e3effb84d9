"""``SpawnAgent``: a ``private_child`` supervised through the parent's task
plane, or a ``public_named`` peer with lineage only.

The order of a private spawn is what makes it restart-safe: the handle is
written first (so a child never exists without one), then the child agent,
then the delegation record, then the child's first message (idempotent per
handle). A spawn killed midway is finished or failed by the parent's next
sweep (``supervision.sweep_parent``); a bad template leaves nothing behind.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.errors import HolonError, RejectedError, UsageError
from holon_cli.model import task as tm
from holon_cli.model.agent import is_supervised_child
from holon_cli.model.child import (
    BOOTSTRAP_ORIGIN,
    WORKSPACE_MODES,
    spawn_summary,
    supervision,
)
from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime.children import worktree as wt_plane
from holon_cli.runtime.children.supervision import (
    append_delegation,
    deliver_initial,
    handle_dir,
)
from holon_cli.runtime.tasks import procs
from holon_cli.runtime.tasks.records import update_task
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from collections.abc import Mapping

    from holon_cli.model.agent import AgentState
    from holon_cli.model.events import ChildAgentSpawnedData
    from holon_cli.model.task import TaskRecord, WorktreeInfo
    from holon_cli.runtime.workspace import WorkspaceBinding


def _refuse_child_caller(parent: AgentStore) -> None:
    if is_supervised_child(parent.read_record()["identity"]):
        raise RejectedError(
            f"agent {parent.agent_id!r} is a supervised child; children cannot spawn agents",
            hint="finish your delegated work and report back; your parent can spawn more children",
        )


def _handle_record(
    parent: AgentStore,
    task_id: str,
    text: str,
    child: dict[str, Any],
    parent_message: Mapping[str, Any] | None,
    turn_id: str | None,
) -> TaskRecord:
    now = clock.now_iso()
    summary = spawn_summary(text)
    return {
        "v": tm.TASK_RECORD_VERSION,
        "id": task_id,
        "agent_id": parent.agent_id,
        "kind": tm.CHILD_TASK_KIND,
        "status": "running",
        "promoted": True,
        "promoted_at": now,
        "created_at": now,
        "started_at": now,
        "finished_at": None,
        "parent_message_id": (parent_message or {}).get("id"),
        "turn_id": turn_id,
        "summary": summary,
        "recovery": {
            "kind": tm.CHILD_TASK_KIND,
            "summary": summary,
            "prompt": text,
            "trust": "trusted_system",
            "workspace_mode": child["workspace_mode"],
        },
        "child": child,  # type: ignore[typeddict-item]
        "result_message_id": None,
    }


def _bind_workspace(
    child: AgentStore, parent: AgentStore, worktree: WorktreeInfo | None, public: bool
) -> None:
    """The child's workspace, through the workspace plane. inherit: the
    parent's active entry (its execution root, a managed worktree included);
    worktree: the parent's workspace projected onto the task's worktree; a
    public peer, or a parent in its agent home: the attached set only."""
    from holon_cli.model.workspace import AGENT_HOME
    from holon_cli.runtime.workspace import attached_ids, workspace_for
    from holon_cli.runtime.workspace.plane import Target, bind

    pstate = parent.read_record()["state"]
    ids = attached_ids(pstate)

    def attach(st: AgentState) -> None:
        st["attached_workspaces"] = list(ids)

    child.update_state(attach)
    pb = workspace_for(parent.layout.home, pstate)
    if public or pb.workspace_id == AGENT_HOME:
        return
    if worktree is not None:
        target = Target(wt_plane.binding(pb, worktree), "isolated", worktree_created=True)
        bind(child, target, source="spawn")
    else:
        bind(child, Target(pb._replace(worktree_session=None), "direct"), source="spawn")


def _parent_binding(parent: AgentStore) -> WorkspaceBinding:
    from holon_cli.runtime.workspace import workspace_for

    return workspace_for(parent.layout.home, parent.read_record()["state"])


def spawn_private_child(
    parent: AgentStore,
    initial_message: str,
    *,
    template: str | None = None,
    workspace_mode: str = "inherit",
    parent_message: Mapping[str, Any] | None = None,
    turn_id: str | None = None,
) -> dict[str, Any]:
    """Create a supervised private child; returns the contract's result."""
    _refuse_child_caller(parent)
    if workspace_mode not in WORKSPACE_MODES:
        raise UsageError(f"workspace_mode must be one of {', '.join(WORKSPACE_MODES)}")
    pstate = parent.read_record()["state"]
    task_id = clock.new_id("task")
    child_id = clock.new_id("child").replace("_", "-")
    worktree = None
    if workspace_mode == "worktree":
        from holon_cli.runtime.workspace.guard import check_root

        pb = _parent_binding(parent)
        check_root(pb.execution_root, agent_home=parent.layout.home)
        worktree = wt_plane.create(pb, child_id, task_id)
    detail = {
        "child_agent_id": child_id,
        "delegation_id": clock.new_id("dlg"),
        "work_item_id": pstate.get("current_work_item_id")
        or (parent_message or {}).get("work_item_id"),
        "workspace_mode": workspace_mode,
        "worktree": worktree,
        "initial_message_id": None,
        "child_archived": False,
    }
    rec = _handle_record(parent, task_id, initial_message, detail, parent_message, turn_id)
    d = handle_dir(parent, task_id)
    d.mkdir(parents=True)
    procs.put_record(d / "task.json", rec, durable=True)
    try:
        child = _make_child(parent, child_id, task_id, template, worktree)
    except BaseException:
        _undo_handle(d, worktree)
        raise
    append_delegation(parent, rec, "started")
    mid = deliver_initial(parent, rec, child, initial_message)

    def note(r: TaskRecord) -> None:
        r.setdefault("child", {})["initial_message_id"] = mid

    rec = update_task(d, note)
    spawned: ChildAgentSpawnedData = {
        "child_agent_id": child_id,
        "task_id": task_id,
        "workspace_mode": workspace_mode,
    }
    parent.emit(
        "child_agent_spawned",
        spawned,
        task_id=task_id,
        work_item_id=detail["work_item_id"],
    )
    return private_child_result(parent.agent_id, rec)


def _make_child(
    parent: AgentStore,
    child_id: str,
    task_id: str,
    template: str | None,
    worktree: WorktreeInfo | None,
) -> AgentStore:
    child = create_agent(
        child_id,
        template=template,
        model=parent.read_record()["state"].get("model_override"),
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id=parent.agent_id,
        supervision_task_id=task_id,
    )
    _bind_workspace(child, parent, worktree, public=False)
    return child


def _undo_handle(d: Path, worktree: WorktreeInfo | None) -> None:
    """A spawn that failed before its child existed leaves nothing behind."""
    if worktree is not None:
        try:
            wt_plane.cleanup_for_failed_spawn(worktree)
        except HolonError:
            pass
    shutil.rmtree(d, ignore_errors=True)


def private_child_result(parent_id: str, rec: TaskRecord) -> dict[str, Any]:
    child = rec.get("child") or {}
    cid = str(child.get("child_agent_id"))
    mode = str(child.get("workspace_mode") or "inherit")
    return {
        "agent_id": cid,
        "child_agent_id": cid,
        "supervision_task_id": rec["id"],
        "task_handle": tm.handle(rec),
        "child_supervision": supervision(parent_id, cid, rec["id"], mode, child.get("worktree")),
    }


def spawn_public_named(
    creator: AgentStore,
    agent_id: str,
    *,
    initial_message: str | None = None,
    template: str | None = None,
) -> dict[str, Any]:
    """A public, self-owned agent with lineage only; returns ``{agent_id}``."""
    _refuse_child_caller(creator)
    cstate = creator.read_record()["state"]
    agent = create_agent(
        agent_id,
        template=template,
        model=cstate.get("model_override"),
        lineage_parent_agent_id=creator.agent_id,
    )
    _bind_workspace(agent, creator, None, public=True)
    if initial_message is not None and initial_message.strip():
        from holon_cli.runtime.enqueue import admit

        admit(
            initial_message,
            store=agent,
            kind="internal_followup",
            origin=BOOTSTRAP_ORIGIN,
            delivery_surface="runtime_system",
            admission_context="runtime_owned",
            metadata={"delivery": "bootstrap", "creator_agent_id": creator.agent_id},
        )
    return {"agent_id": agent.agent_id}
