"""Event kinds, error kinds and the main event payloads, in one place.

``EventKind`` is what :meth:`AgentStore.emit` accepts: a new event kind is
added here first (mypy rejects an unknown one). ``ErrorKind`` (every stable
``kind`` of :class:`holon_cli.errors.HolonError`, provider failure kinds
included) lives in :mod:`holon_cli.kinds`, below the error tree.
``ToolErrorKind`` is every ``kind`` of a tool's error envelope
(:class:`holon_cli.tools.base.ToolError`): the tool-specific ones plus any
``ErrorKind`` a tool passes through from the runtime. The
payload TypedDicts describe the ``data`` of the turn's events exactly as they
are written (zero runtime cost; the JSON is unchanged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from holon_cli.kinds import ErrorKind
from holon_cli.model.event_record import EventRecord as EventRecord
from holon_cli.model.turn import ClosureDecision, ProviderAttemptTimeline

if TYPE_CHECKING:
    from holon_cli.model.timer import TimerPurpose

EventKind = Literal[
    # agents
    "agent_created",
    "agent_model_changed",
    "agent_state_changed",
    "agent_state_repaired",
    "workspace_bound",
    "workspace_detached",
    "worktree_created",
    # queue
    "inbox_message_rejected",
    "inbox_message_quarantined",
    "inbox_message_corrected",
    "queue_ledger_truncated",
    "queue_rebuilt_from_inbox",
    "message_requeued",
    "message_admitted",
    "message_replayed",
    "message_interjected",
    # turn
    "message_processing_started",
    "turn_context_built",
    "provider_round_completed",
    "assistant_round_recorded",
    "tool_executed",
    "skill_activated",
    "turn_round_limit_reached",
    "context_compacted",
    "context_window_rolled",
    "turn_interrupted",
    "turn_abort_requested",
    "turn_terminal",
    "runtime_error",
    "brief_recorded",
    # tick
    "tick_completed",
    # work plane
    "plan_artifact_changed",
    "plan_artifact_missing",
    "work_item_completed",
    "work_item_created",
    "work_item_focus_released",
    "work_item_picked",
    "work_item_recheck_due",
    "work_item_stale_reminder",
    "work_item_turn_end_commit",
    "work_item_continuation_held",
    "work_item_updated",
    # task plane
    "tasks_recovered",
    "task_recovery_failed",
    # child agents (runtime/children): in the parent, except child_agent_archived
    "child_agent_spawned",
    "child_agent_result_reported",
    "child_agent_archived",
    "worktree_retained",
    # waiting plane
    "timer_created",
    "timer_fired",
    "timer_cancelled",
    "trigger_provisioned",
    "trigger_rotated",
    "trigger_revoked",
    "external_trigger_delivered",
    "wake_hint_converted",
    "continuation_resolved",
    "message_settled_without_turn",
    "waiting_intent_recorded",
    "waiting_intent_cancelled",
]

ToolErrorKind = (
    Literal[
        # the framework (tools.base)
        "invalid_arguments",
        "unknown_tool",
        "tool_internal_error",
        "unavailable",
        "limit_exceeded",
        # paths (exec_command, apply_patch)
        "execution_root_violation",
        "protected_path",
        "unsafe_path",
        # exec_command
        "spawn_failed",
        "supervisor_lost",
        # apply_patch
        "invalid_patch",
        "patch_conflict",
        "file_exists",
        "file_not_found",
        "not_a_directory",
        "unsupported_file",
        "write_failed",
        # mcp (tools/mcp.py): the call is waiting for an operator's answer
        "mcp_input_required",
    ]
    | ErrorKind
)


class ToolErrorEnvelope(TypedDict):
    """The spec's Tool Error Envelope: what a failing tool call records
    (``ToolResult.error``, ``tool_executed.tool_error``); the model sees it
    rendered by :func:`holon_cli.model.tool.render_error`."""

    kind: ToolErrorKind
    message: str
    details: dict[str, Any] | None
    recovery_hint: str | None
    retryable: bool


class ToolWarning(TypedDict):
    """A soft problem next to a successful tool result (``ToolResult.warnings``,
    ``tool_executed.warnings``): a stable ``kind`` and a message for the model.
    A work-item tool's warnings may carry a field of their own (a count)."""

    kind: str
    message: str


# ----------------------------------------------------------- turn events
# ``turn_id`` leads the data of every turn event; the turn's recorder adds it


class MessageProcessingStartedData(TypedDict):
    turn_id: NotRequired[str]
    turn_index: int
    attempt: int
    queue_wait_ms: int | None
    trigger_kind: str | None
    replayed: bool
    worker: NotRequired[str]  # the executor id of the serve worker (`--engine dbos`)


class TurnContextBuiltData(TypedDict):
    turn_id: NotRequired[str]
    context_build_ms: float
    prompt_cache_key: str | None
    context_fingerprint: str | None
    sections: Any
    tool_count: int
    bound_work_item_id: str | None
    # the frame's cache record (runtime spec: ProviderPromptCache) and the
    # history of earlier turns the requests carry
    working_memory_revision: NotRequired[int]
    compression_epoch: NotRequired[int]
    history_turns: NotRequired[int]
    history_tokens: NotRequired[int]


class ContextCompactedData(TypedDict):
    """Older rounds of the running turn were replaced by a summary: how many
    messages (this compaction) and the turn's compaction count so far."""

    turn_id: NotRequired[str]
    compacted_message_count: int
    compression_epoch: int
    budget_tokens: int
    estimated_tokens: int
    kept_message_count: int
    reason: str  # over_budget | context_length_exceeded


class ContextWindowRolledData(TypedDict):
    """The earlier turns the requests carry (runtime/memory/history.py)
    started a new epoch: older ones left the prompt (the working memory and
    the earlier-conversation summary carry them); the prefix changes once.
    ``compression_epoch`` is the agent's (the frame's cache record)."""

    turn_id: NotRequired[str]
    dropped_message_count: int
    kept_message_count: int
    compression_epoch: int
    budget_tokens: int
    estimated_tokens: int
    # history_window (over its share of the budget) | over_budget (this turn
    # alone did not fit) | blocks_shrunk (the turn shrank its blocks: the next
    # one shows them whole, a new prefix)
    reason: str


class ProviderRoundCompletedData(TypedDict):
    turn_id: NotRequired[str]
    round: int
    token_usage: dict[str, int]
    context_build_ms: float
    provider_round_ms: float
    provider_started_at: str
    provider_completed_at: str
    provider_attempt_timeline: ProviderAttemptTimeline
    stop_reason: str | None
    model_ref: str | None
    # incremental Responses requests: ``full`` | ``incremental``, and why full
    request_mode: NotRequired[str]
    request_mode_reason: NotRequired[str]
    # server-side context edits the provider applied (counts only)
    context_edits: NotRequired[list[dict[str, Any]]]


class AssistantRoundRecordedData(TypedDict):
    turn_id: NotRequired[str]
    round: int
    text_preview: str
    tool_requests: list[str]


class ToolExecutedData(TypedDict):
    turn_id: NotRequired[str]
    round: int
    tool_name: str
    call_id: str
    ok: bool
    duration_ms: float
    error: str | None
    tool_error: ToolErrorEnvelope | None
    warnings: list[ToolWarning] | None


class RuntimeErrorData(TypedDict):
    turn_id: NotRequired[str]
    error: str
    failure_kind: str | None
    failure_artifact: NotRequired[dict[str, Any]]
    provider_attempt_timeline: NotRequired[ProviderAttemptTimeline]
    token_usage: NotRequired[dict[str, int] | None]
    provider_round_ms: NotRequired[float]


class TurnTerminalData(TypedDict):
    turn_id: NotRequired[str]
    turn_index: int
    status: Literal["completed", "aborted"]
    completed_at: str
    duration_ms: int
    cleanup_ms: float
    last_assistant_message: str
    closure: ClosureDecision
    model_rounds: int
    token_usage: dict[str, int]
    failure_kind: str | None
    reason: NotRequired[str]  # ``operator_aborted`` for an operator's abort


class MessageInterjectedData(TypedDict):
    turn_id: NotRequired[str]
    into_message_id: str


class SkillActivatedData(TypedDict):
    """A skill a successful command used (spec: Skill Discovery And
    Activation); its own record, so no ``turn_id`` key."""

    skill: str
    scope: str
    load_reason: Literal["read_skill_md", "run_skill_script"]
    path: str
    entrypoint_path: str


# ``from``/``to`` are Python keywords: the functional form keeps the JSON names
AgentStateChangedData = TypedDict("AgentStateChangedData", {"from": str, "to": str, "reason": str})


class TurnAbortRequestedData(TypedDict):
    """``holon agent abort``: the run asked to stop (the turn settles it)."""

    run_id: str


AgentStateRepairedData = TypedDict(
    "AgentStateRepairedData",
    {"stale_run_id": str | None, "from": str, "to": str, "settled_turn_recorded": bool},
)


AgentModelChangedData = TypedDict("AgentModelChangedData", {"from": str | None, "to": str | None})


class TurnInterruptedData(TypedDict):
    turn_id: str
    reason: str  # keyboard_interrupt


class TurnRoundLimitReachedData(TypedDict):
    turn_id: NotRequired[str]
    rounds: int
    max_rounds: int


class WorkItemStaleReminderData(TypedDict):
    turn_id: NotRequired[str]
    rounds_without_mutation: int


# ----------------------------------------------------------- queue events


class MessageAdmittedData(TypedDict):
    queue_seq: int
    kind: str | None
    created_at: str | None
    text_preview: str  # the body's first 280 characters (operator consoles show it)


class InboxMessageCorrectedData(TypedDict):
    file: str
    fields: list[str]
    reason: str


class QueueRebuiltFromInboxData(TypedDict):
    reason: str
    restored_message_ids: list[str]


class QueueLedgerTruncatedData(TypedDict):
    path: str
    snapshot_offset: int
    ledger_size: int
    restored_message_ids: list[str]
    lost_message_ids: list[str]


class QueueRuntimeErrorData(TypedDict):
    """A ``runtime_error`` of the queue itself (no turn): a message whose body
    cannot be read, or one aborted after too many interrupted attempts."""

    error: str
    kind: Literal["message_unreadable", "replay_limit"]
    hint: NotRequired[str]


class MessageReplayedData(TypedDict):
    attempts: int


class MessageRequeuedData(TypedDict):
    queue_seq: int


class InboxMessageQuarantinedData(TypedDict):
    file: str
    path: str
    reason: str


class TickCompletedData(TypedDict):
    actions: list[dict[str, Any]]


class WorkspaceBoundData(TypedDict):
    workspace_anchor: str
    cwd: str
    # since workspaces (issue 25); older events have only the two above
    workspace_id: NotRequired[str]
    execution_root: NotRequired[str]
    projection_kind: NotRequired[str]
    mode: NotRequired[str]
    previous_workspace_id: NotRequired[str]
    source: NotRequired[str]  # tool | cli | run | http_control


class WorkspaceDetachedData(TypedDict):
    workspace_id: str
    workspace_anchor: str | None
    stale: bool
    source: str


class WorktreeCreatedData(TypedDict):
    workspace_id: str
    worktree_path: str
    worktree_branch: str
    original_branch: str


class BriefRecordedData(TypedDict):
    brief_id: str
    kind: str
    visibility: str
    text_preview: str
    title: NotRequired[str]  # a named notice (no_progress_guard)


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


def event_payloads() -> dict[str, tuple[type, ...]]:
    """Each :data:`EventKind` with the ``data`` shapes it is written with (one
    TypedDict, or several when different steps write it; none for a kind
    declared but not written by this version). The generated reference
    (``docs/reference/events.md``) reads it; a test checks it names every
    kind. A function, so that the start-up of a command that only emits
    events builds none of it."""
    from holon_cli.model.continuation import ContinuationRecord

    return {
        "agent_created": (AgentCreatedData,),
        "agent_model_changed": (AgentModelChangedData,),
        "agent_state_changed": (AgentStateChangedData,),
        "agent_state_repaired": (
            AgentStateRepairedData,
            AgentFileRebuiltData,
            EventsLossRecordedData,
        ),
        "workspace_bound": (WorkspaceBoundData,),
        "workspace_detached": (WorkspaceDetachedData,),
        "worktree_created": (WorktreeCreatedData,),
        "inbox_message_rejected": (),
        "inbox_message_quarantined": (InboxMessageQuarantinedData,),
        "inbox_message_corrected": (InboxMessageCorrectedData,),
        "queue_ledger_truncated": (QueueLedgerTruncatedData,),
        "queue_rebuilt_from_inbox": (QueueRebuiltFromInboxData,),
        "message_requeued": (MessageRequeuedData,),
        "message_admitted": (MessageAdmittedData,),
        "message_replayed": (MessageReplayedData,),
        "message_interjected": (MessageInterjectedData,),
        "message_processing_started": (MessageProcessingStartedData,),
        "turn_context_built": (TurnContextBuiltData,),
        "provider_round_completed": (ProviderRoundCompletedData,),
        "assistant_round_recorded": (AssistantRoundRecordedData,),
        "tool_executed": (ToolExecutedData,),
        "skill_activated": (SkillActivatedData,),
        "turn_round_limit_reached": (TurnRoundLimitReachedData,),
        "context_compacted": (ContextCompactedData,),
        "context_window_rolled": (ContextWindowRolledData,),
        "turn_interrupted": (TurnInterruptedData,),
        "turn_abort_requested": (TurnAbortRequestedData,),
        "turn_terminal": (TurnTerminalData,),
        "runtime_error": (RuntimeErrorData, QueueRuntimeErrorData),
        "brief_recorded": (BriefRecordedData,),
        "tick_completed": (TickCompletedData,),
        "plan_artifact_changed": (PlanArtifactChangedData,),
        "plan_artifact_missing": (PlanArtifactMissingData,),
        "work_item_completed": (WorkItemCompletedData,),
        "work_item_created": (WorkItemCreatedData,),
        "work_item_focus_released": (WorkItemFocusReleasedData,),
        "work_item_picked": (WorkItemPickedData,),
        "work_item_recheck_due": (WorkItemRecheckDueData,),
        "work_item_stale_reminder": (WorkItemStaleReminderData,),
        "work_item_turn_end_commit": (WorkItemTurnEndCommitData,),
        "work_item_continuation_held": (WorkItemContinuationHeldData,),
        "work_item_updated": (WorkItemUpdatedData,),
        "tasks_recovered": (TasksRecoveredData,),
        "task_recovery_failed": (TaskRecoveryFailedData,),
        "child_agent_spawned": (ChildAgentSpawnedData,),
        "child_agent_result_reported": (ChildAgentResultReportedData,),
        "child_agent_archived": (ChildAgentArchivedData,),
        "worktree_retained": (WorktreeRetainedData,),
        "timer_created": (TimerCreatedData,),
        "timer_fired": (TimerFiredData,),
        "timer_cancelled": (TimerCancelledData,),
        "trigger_provisioned": (TriggerProvisionedData,),
        "trigger_rotated": (TriggerRotatedData,),
        "trigger_revoked": (TriggerRevokedData,),
        "external_trigger_delivered": (ExternalTriggerDeliveredData,),
        "wake_hint_converted": (WakeHintConvertedData,),
        "continuation_resolved": (ContinuationRecord,),
        "message_settled_without_turn": (MessageSettledWithoutTurnData,),
        "waiting_intent_recorded": (WaitingIntentRecordedData,),
        "waiting_intent_cancelled": (WaitingIntentCancelledData,),
    }
