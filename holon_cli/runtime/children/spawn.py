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
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from holon_cli import clock
from holon_cli.errors import HolonError, RejectedError, UsageError
from holon_cli.model import task as tm
from holon_cli.model.agent import is_supervised_child
from holon_cli.model.child import (
    BOOTSTRAP_ORIGIN,
    CONTEXT_MODES,
    WORKSPACE_MODES,
    spawn_summary,
    supervision,
)
from holon_cli.runtime import telemetry
from holon_cli.runtime.agents.lifecycle import create_agent
from holon_cli.runtime.children import context as child_context
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
    from holon_cli.model.child import ChildSupervision
    from holon_cli.model.events import ChildAgentSpawnedData
    from holon_cli.model.task import ChildTaskDetail, TaskHandle, TaskRecord, WorktreeInfo
    from holon_cli.runtime.agents.profiles import ChildProfile
    from holon_cli.runtime.workspace import WorkspaceBinding
    from holon_cli.runtime.workspace.plane import Target
    from holon_cli.store.layout import AgentLayout


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
    child: ChildTaskDetail,
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
        "child": child,
        "result_message_id": None,
    }


def _bind_workspace(
    child: AgentStore,
    parent: AgentStore,
    worktree: WorktreeInfo | None,
    public: bool,
    explicit: Target | None = None,
) -> None:
    """The child's workspace, through the workspace plane. inherit: the
    parent's active entry (its execution root, a managed worktree included);
    worktree: the parent's workspace projected onto the task's worktree;
    explicit_root: the directory the spawn named (checked before the child
    was made); a public peer, or a parent in its agent home: the attached
    set only."""
    from holon_cli.model.workspace import AGENT_HOME
    from holon_cli.runtime.workspace import attached_ids, workspace_for
    from holon_cli.runtime.workspace.plane import Target, bind

    pstate = parent.read_record()["state"]
    ids = attached_ids(pstate)

    def attach(st: AgentState) -> None:
        st["attached_workspaces"] = list(ids)

    child.update_state(attach)
    if explicit is not None:
        bind(child, explicit, source="spawn")
        return
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


def _explicit_target(
    parent: AgentStore, workspace_mode: str, workspace_root: str | None
) -> Target | None:
    """``explicit_root``'s directory, checked by the workspace plane before
    anything is made (refused: the holon home, inside it, the filesystem
    root, a missing directory)."""
    if workspace_mode != "explicit_root":
        if workspace_root is not None:
            raise UsageError(
                "workspace_root is only for workspace_mode 'explicit_root'",
                kind="invalid_arguments",
                details={"field": "workspace_root"},
            )
        return None
    if not (workspace_root or "").strip():
        raise UsageError(
            "workspace_mode 'explicit_root' needs workspace_root (the child's directory)",
            kind="invalid_arguments",
            details={"field": "workspace_root"},
        )
    from holon_cli.runtime.workspace.plane import explicit_root_target

    assert workspace_root is not None
    return explicit_root_target(parent, workspace_root, _parent_binding(parent).cwd)


def _check_profile_price(parent: AgentStore, profile: ChildProfile) -> None:
    """A profile's ``cost_usd_per_day`` cannot be kept for a model without a
    price: refused (``prices.<ref>`` named) before anything is made."""
    from holon_cli.errors import ConfigError
    from holon_cli.runtime.agents.models import candidates
    from holon_cli.store.config import load_config
    from holon_cli.store.config_schema import missing_price

    override = profile.model or parent.read_record()["state"].get("model_override")
    try:
        models = candidates({"model_override": override})
    except ConfigError:
        return  # no model at all: the child's first turn says so
    key = f"budgets.cost_usd_per_day of profile {profile.path}"
    err = missing_price(load_config(), models, key)
    if err is not None:
        raise err


class PrivateChildResult(TypedDict):
    """What ``SpawnAgent`` returns for a private child."""

    agent_id: str
    child_agent_id: str
    supervision_task_id: str
    task_handle: TaskHandle
    child_supervision: ChildSupervision
    context: str
    profile: NotRequired[str]
    workspace_root: NotRequired[str]


def spawn_private_child(
    parent: AgentStore,
    initial_message: str,
    *,
    template: str | None = None,
    workspace_mode: str = "inherit",
    parent_message: Mapping[str, Any] | None = None,
    turn_id: str | None = None,
    context: str = "fork",
    workspace_root: str | None = None,
    profile: ChildProfile | None = None,
) -> PrivateChildResult:
    """Create a supervised private child; returns the contract's result.
    ``context``: ``fork`` (the parent's relevant context, derived and fenced:
    ``children/context.py``) or ``fresh`` (the handoff only); ``profile``: a
    profile file's model, tools, budgets and instructions."""
    _refuse_child_caller(parent)
    if workspace_mode not in WORKSPACE_MODES:
        raise UsageError(f"workspace_mode must be one of {', '.join(WORKSPACE_MODES)}")
    if context not in CONTEXT_MODES:
        raise UsageError(
            f"context must be one of {', '.join(CONTEXT_MODES)}",
            kind="invalid_arguments",
            details={"field": "context"},
        )
    explicit = _explicit_target(parent, workspace_mode, workspace_root)
    if profile is not None and "cost_usd_per_day" in profile.budgets:
        _check_profile_price(parent, profile)
    pstate = parent.read_record()["state"]
    task_id = clock.new_id("task")
    child_id = clock.new_id("child").replace("_", "-")
    worktree = None
    if workspace_mode == "worktree":
        from holon_cli.runtime.workspace.guard import check_root

        pb = _parent_binding(parent)
        check_root(pb.execution_root, agent_home=parent.layout.home)
        worktree = wt_plane.create(pb, child_id, task_id)
    anchor_wi: str | None = pstate.get("current_work_item_id") or (parent_message or {}).get(
        "work_item_id"
    )
    detail: ChildTaskDetail = {
        "child_agent_id": child_id,
        "delegation_id": clock.new_id("dlg"),
        "work_item_id": anchor_wi,
        "workspace_mode": workspace_mode,
        "worktree": worktree,
        "initial_message_id": None,
        "child_archived": False,
        "context": context,
        "profile": profile.name if profile is not None else None,
        "workspace_root": str(explicit.binding.cwd) if explicit is not None else None,
    }
    trace = telemetry.current_trace_context()  # the SpawnAgent call's span
    if trace is not None:
        detail["trace_context"] = trace
    rec = _handle_record(parent, task_id, initial_message, detail, parent_message, turn_id)
    d = handle_dir(parent, task_id)
    d.mkdir(parents=True)
    procs.put_record(d / "task.json", rec, durable=True)
    inherited = child_context.record(
        parent,
        mode=context,
        handoff=initial_message,
        work_item_id=anchor_wi,
        supervision_task_id=task_id,
    )
    try:
        child = _make_child(
            parent, child_id, task_id, template, worktree, explicit, profile, inherited
        )
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
        "context": context,
        "profile": profile.name if profile is not None else None,
        "inherited_chars": len(inherited.get("text") or ""),
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
    explicit: Target | None,
    profile: ChildProfile | None,
    inherited: child_context.InheritedContext,
) -> AgentStore:
    model = parent.read_record()["state"].get("model_override")
    if profile is not None and profile.model is not None:
        model = profile.model

    def finish(layout: AgentLayout) -> None:
        # in the staging home: the child exists with these or not at all
        child_context.write(layout, inherited)
        if profile is not None and profile.instructions:
            agents_md = layout.home / "AGENTS.md"
            head = agents_md.read_text() if agents_md.exists() else ""
            agents_md.write_text(
                f"{head.rstrip()}\n\n# Profile {profile.name} ({profile.path})\n\n"
                f"{profile.instructions}\n"
            )

    child = create_agent(
        child_id,
        template=template,
        model=model,
        kind="child",
        visibility="private",
        ownership="parent_supervised",
        profile_preset="private_child",
        lineage_parent_agent_id=parent.agent_id,
        supervision_task_id=task_id,
        profile=profile.identity() if profile is not None else None,
        finish=finish,
    )
    try:
        _bind_workspace(child, parent, worktree, public=False, explicit=explicit)
    except BaseException:
        # refused by the workspace plane after the child was made (a check at
        # bind time): the child made a moment ago by this call goes with it
        shutil.rmtree(child.layout.home, ignore_errors=True)
        raise
    return child


def _undo_handle(d: Path, worktree: WorktreeInfo | None) -> None:
    """A spawn that failed before its child existed leaves nothing behind."""
    if worktree is not None:
        try:
            wt_plane.cleanup_for_failed_spawn(worktree)
        except HolonError:
            pass
    shutil.rmtree(d, ignore_errors=True)


def private_child_result(parent_id: str, rec: TaskRecord) -> PrivateChildResult:
    child = rec.get("child") or {}
    cid = str(child.get("child_agent_id"))
    mode = str(child.get("workspace_mode") or "inherit")
    out: PrivateChildResult = {
        "agent_id": cid,
        "child_agent_id": cid,
        "supervision_task_id": rec["id"],
        "task_handle": tm.handle(rec),
        "child_supervision": supervision(parent_id, cid, rec["id"], mode, child.get("worktree")),
        "context": child.get("context") or "fresh",
    }
    profile, root = child.get("profile"), child.get("workspace_root")
    if profile:
        out["profile"] = profile
    if root:
        out["workspace_root"] = root
    return out


def spawn_public_named(
    creator: AgentStore,
    agent_id: str,
    *,
    initial_message: str | None = None,
    template: str | None = None,
) -> dict[str, str]:
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
