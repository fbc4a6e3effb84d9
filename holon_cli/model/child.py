"""Child-agent delegation values (runtime spec: Agent Identity And
Visibility, Background Task Recovery): the supervision projection, the child
observability snapshot, the delegation ledger record and the pure rules that
derive them. No I/O: ``runtime/children`` reads the files and calls these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

from holon_cli.model.task import CHILD_TASK_KIND, TaskSnapshot, WorktreeInfo
from holon_cli.model.tracecontext import TraceContext

WORKSPACE_MODES = ("inherit", "worktree", "explicit_root")
CONTEXT_MODES = ("fork", "fresh")
SPAWN_PRESETS = ("private_child", "public_named")
ChildPhase = Literal["running", "blocked", "waiting", "terminal"]
# the summary of a handle: the first line of initial_message, this long at most
SUMMARY_CHARS = 120
DELEGATION_RECORD_VERSION = 1
# the child's delegated messages (first message and TaskInput follow-ups)
DELEGATION_ORIGIN = "system:delegation"
BOOTSTRAP_ORIGIN = "system:bootstrap"


class WorktreeRef(TypedDict):
    """``child_supervision.worktree``: where the child works."""

    path: str
    branch: str


class ChildSupervision(TypedDict):
    """The operator-facing supervision projection, the same in ``SpawnAgent``,
    ``TaskStatus`` and ``TaskOutput``."""

    parent_agent_id: str
    child_agent_id: str
    supervision_task_id: str
    workspace_mode: str
    worktree: WorktreeRef | None
    cleanup_owner: Literal["supervision_task"]
    followup_target: Literal["parent_supervisor"]


class ChildObservability(TypedDict):
    """A compact snapshot of what the child is doing, for its parent."""

    phase: ChildPhase
    blocked_reason: str | None
    waiting_reason: str | None
    active_work_item_id: str | None
    work_summary: str | None
    last_progress_brief: str | None
    last_result_brief: str | None


class ChildTaskSnapshot(TaskSnapshot):
    """``TaskStatus.task`` of a ``child_agent_task``: the lifecycle snapshot
    plus the child's identity, observability and supervision projection."""

    child_agent_id: str
    child_observability: ChildObservability | None
    child_supervision: ChildSupervision
    workspace_mode: str
    worktree: WorktreeInfo | None
    result_summary: str | None


class ActiveChild(TypedDict):
    """One entry of ``AgentGet``'s ``active_children``."""

    child_agent_id: str
    supervision_task_id: str
    status: str  # the handle's status
    agent_status: str | None  # the child agent's own status
    summary: str
    profile_preset: str
    visibility: str
    ownership: str
    child_observability: ChildObservability | None


class DelegationRecord(TypedDict):
    """One line of the parent's ``.holon/ledger/delegations.jsonl``: ``started``
    at spawn (the work item in focus then), ``completed`` when the ONE
    ``task_result`` was admitted."""

    v: int
    at: str
    event: Literal["started", "completed"]
    delegation_id: str
    parent_agent_id: str
    child_agent_id: str
    supervision_task_id: str
    work_item_id: str | None
    workspace_mode: str
    summary: str
    status: str
    result_message_id: str | None
    # the parent's trace at the spawn (model/tracecontext.py), when it traced
    trace_context: NotRequired[TraceContext]


def spawn_summary(initial_message: str) -> str:
    """The stable parent-visible label of a handle: the first non-empty line
    of ``initial_message``, whitespace folded, bounded."""
    first = next((ln for ln in initial_message.splitlines() if ln.strip()), "")
    one = " ".join(first.split())
    return one if len(one) <= SUMMARY_CHARS else one[: SUMMARY_CHARS - 1] + "…"


def supervision(
    parent_agent_id: str,
    child_agent_id: str,
    task_id: str,
    workspace_mode: str,
    worktree: Mapping[str, Any] | None,
) -> ChildSupervision:
    ref: WorktreeRef | None = None
    if worktree:
        ref = {"path": str(worktree.get("path")), "branch": str(worktree.get("branch"))}
    return {
        "parent_agent_id": parent_agent_id,
        "child_agent_id": child_agent_id,
        "supervision_task_id": task_id,
        "workspace_mode": workspace_mode,
        "worktree": ref,
        "cleanup_owner": "supervision_task",
        "followup_target": "parent_supervisor",
    }


def child_phase(
    *,
    status: str,
    closure: Mapping[str, Any] | None,
    pending: int,
    archived: bool,
) -> tuple[ChildPhase, str | None, str | None]:
    """(phase, blocked_reason, waiting_reason) of a child from its state.

    Terminal: archived, or its last closure is ``completed``/``failed`` with
    nothing queued, no turn running and no rest asked for (a child that
    called ``Sleep`` is parked: ``waiting``). An operator hold (stopped,
    paused) or a wait on its own tasks is ``blocked``; any other wait is
    ``waiting``."""
    if archived:
        return "terminal", None, None
    if status in ("stopped", "paused"):
        return "blocked", f"agent_{status}", None
    running = status == "awake_running" or pending > 0
    outcome = (closure or {}).get("outcome")
    if not running and status == "asleep" and outcome != "failed":
        return "waiting", None, str((closure or {}).get("waiting_reason") or "asleep")
    if not running and closure is not None and outcome in ("completed", "failed"):
        return "terminal", None, None
    if not running and outcome == "waiting":
        reason = str((closure or {}).get("waiting_reason") or "waiting")
        if reason == "awaiting_task_result":
            return "blocked", reason, None
        return "waiting", None, reason
    return "running", None, None


def is_child_handle_kind(kind: str | None) -> bool:
    return kind == CHILD_TASK_KIND
