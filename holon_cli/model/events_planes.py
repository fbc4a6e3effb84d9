"""Payloads of the events beside the turn and the queue: the work plane,
tasks and waits, child agents, triggers and repairs (``model/events.py``
holds the kinds, the turn's and the queue's payloads, and re-exports these;
``event_payloads`` there maps each kind to its payload)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from holon_cli.model.timer import TimerPurpose


# ------------------------------------------------------- work plane events


class WorkItemCreatedData(TypedDict):
    objective: str
    plan_status: str
    todo_count: int
    plan_path: str
    plan_seeded: bool
    source: str


class WorkItemPickedData(TypedDict):
    agent_id: str
    previous_work_item_id: str | None
    current_work_item_id: str
    reason: str | None
    previous_readiness: str | None
    current_readiness: str
    switch_kind: str
    reason_required: bool
    reason_missing: bool
    source: str


class WorkItemUpdatedData(TypedDict):
    changed: list[str]
    objective: str | None
    plan_status: str
    blocked_by: str | None
    blocker_cleared: bool
    recheck_at: str | None
    todo_counts: dict[str, int] | None
    focus_released: bool
    source: str


class WorkItemFocusReleasedData(TypedDict):
    reason: str | None
    source: str


class WorkItemCompletedData(TypedDict):
    objective: str
    source: str
    report_promoted: bool
    delivery_summary_id: str | None
    brief_id: str | None
    completed_with_unfinished_todos: bool
    unfinished_todo_count: int
    pending_todo_count: int
    in_progress_todo_count: int
    focus_released: bool
    warnings: list[str]


# ------------------------------------------------- task and waiting events


class TaskRecoveryFailedData(TypedDict):
    error: str


class TasksRecoveredData(TypedDict):
    interrupted: list[str]
    reported: list[str]
    reaped_foreground: list[str]
    # running tasks a serve took over from one that is gone (a restart)
    recovered: NotRequired[list[str]]


class TimerCreatedData(TypedDict):
    next_fire_at: str | None
    every_ms: int | None
    purpose: TimerPurpose
    timer_id: str


class TimerCancelledData(TypedDict):
    timer_id: str
    reason: str


class TimerFiredData(TypedDict):
    timer_id: str
    fire_count: int
    message_id: str | None
    coalesced_into: str | None
    missed_fires: int
    next_fire_at: str | None
    purpose: str


class AgentCreatedData(TypedDict):
    kind: str
    visibility: str
    ownership: str
    profile_preset: str | None
    template: dict[str, Any] | None
    model_override: str | None
    # a spawned agent: its lineage (and a child's supervision handle), so that
    # `home check --repair` rebuilds the identity whole
    lineage_parent_agent_id: NotRequired[str | None]
    supervision_task_id: NotRequired[str | None]
    # `holon agent fork`: the agent (and the turn, with --at) it was forked from
    forked_from: NotRequired[dict[str, str | None]]


# ----------------------------------------------------------- child agents


class ChildAgentSpawnedData(TypedDict):
    """In the parent: a private child was spawned under handle ``task_id``."""

    child_agent_id: str
    task_id: str
    workspace_mode: str
    # fork | fresh, the profile file it was made from, the inherited context's size
    context: NotRequired[str]
    profile: NotRequired[str | None]
    inherited_chars: NotRequired[int]


class ChildAgentResultReportedData(TypedDict):
    """In the parent: the child's ONE task_result was admitted."""

    task_id: str
    child_agent_id: str | None
    task_status: str | None
    result_message_id: str


class ChildAgentArchivedData(TypedDict):
    """In the child: it was stopped and archived (its handle ended or is gone)."""

    reason: str


class WorktreeRetainedData(TypedDict):
    """In the parent: a worktree child's worktree was kept at cleanup."""

    task_id: str
    reason: str
    path: str
    branch: str
    repo: str
    base_commit: str | None
    changed_files: list[str]
    cleanup_status: str


class PlanArtifactMissingData(TypedDict):
    path: str
    previous_hash: str | None


class PlanArtifactChangedData(TypedDict):
    path: str
    hash: str | None
    previous_hash: str | None
    bytes: int
    restored: bool


class WorkItemRecheckDueData(TypedDict):
    recheck_at: str | None
    blocked_by: str | None


class WorkItemTurnEndCommitData(TypedDict):
    action: str
    blocked_by: str
    focus_released: bool


class WorkItemContinuationHeldData(TypedDict):
    reason: str
    rev: int | None


class WaitingIntentRecordedData(TypedDict):
    waiting_intent_id: str
    source: str | None
    external_ref: str | None
    turn_id: str | None


class WaitingIntentCancelledData(TypedDict):
    waiting_intent_id: str
    reason: str


class MessageSettledWithoutTurnData(TypedDict):
    turn_id: NotRequired[str | None]
    resolution: str
    control: dict[str, Any] | None


class TriggerProvisionedData(TypedDict):
    external_trigger_id: str
    delivery_mode: str


class TriggerRotatedData(TypedDict):
    external_trigger_id: str
    token_generation: int
    previous_status: str | None


class TriggerRevokedData(TypedDict):
    external_trigger_id: str


class ExternalTriggerDeliveredData(TypedDict):
    external_trigger_id: str
    delivery_mode: str
    source: str | None
    content_type: str | None
    body_bytes: int
    disposition: str
    message_id: str | None
    coalesced_count: int
    waiting_intent_ids: list[str]
    # the work items whose waits it triggered (now triggered_blocked candidates)
    work_item_ids: NotRequired[list[str]]
    trigger_count: int


class WakeHintConvertedData(TypedDict):
    coalesced_count: int | None
    message_id: str


class AgentFileRebuiltData(TypedDict):
    """``agent_state_repaired`` from ``holon home check --repair``: a damaged
    snapshot (the agent record, the queue, timers, ...) rebuilt from its source."""

    file: str
    rebuilt_from: str


class EventsLossRecordedData(TypedDict):
    """``agent_state_repaired`` from ``holon home check --repair``: events cut
    from ``events.jsonl`` recorded as lost (``[first, last]`` event_seq)."""

    file: str
    lost_event_seq: list[int]
