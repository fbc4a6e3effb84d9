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

from typing import Any, Literal, NotRequired, TypedDict

from holon_cli.kinds import ErrorKind
from holon_cli.model.event_record import EventRecord as EventRecord
from holon_cli.model.events_planes import (
    AgentCreatedData as AgentCreatedData,
)
from holon_cli.model.events_planes import (
    AgentFileRebuiltData as AgentFileRebuiltData,
)
from holon_cli.model.events_planes import (
    ChildAgentArchivedData as ChildAgentArchivedData,
)
from holon_cli.model.events_planes import (
    ChildAgentResultReportedData as ChildAgentResultReportedData,
)
from holon_cli.model.events_planes import (
    ChildAgentSpawnedData as ChildAgentSpawnedData,
)
from holon_cli.model.events_planes import (
    EventsLossRecordedData as EventsLossRecordedData,
)
from holon_cli.model.events_planes import (
    ExternalTriggerDeliveredData as ExternalTriggerDeliveredData,
)
from holon_cli.model.events_planes import (
    MessageSettledWithoutTurnData as MessageSettledWithoutTurnData,
)
from holon_cli.model.events_planes import (
    PlanArtifactChangedData as PlanArtifactChangedData,
)
from holon_cli.model.events_planes import (
    PlanArtifactMissingData as PlanArtifactMissingData,
)
from holon_cli.model.events_planes import (
    TaskRecoveryFailedData as TaskRecoveryFailedData,
)
from holon_cli.model.events_planes import (
    TasksRecoveredData as TasksRecoveredData,
)
from holon_cli.model.events_planes import (
    TimerCancelledData as TimerCancelledData,
)
from holon_cli.model.events_planes import (
    TimerCreatedData as TimerCreatedData,
)
from holon_cli.model.events_planes import (
    TimerFiredData as TimerFiredData,
)
from holon_cli.model.events_planes import (
    TriggerProvisionedData as TriggerProvisionedData,
)
from holon_cli.model.events_planes import (
    TriggerRevokedData as TriggerRevokedData,
)
from holon_cli.model.events_planes import (
    TriggerRotatedData as TriggerRotatedData,
)
from holon_cli.model.events_planes import (
    WaitingIntentCancelledData as WaitingIntentCancelledData,
)
from holon_cli.model.events_planes import (
    WaitingIntentRecordedData as WaitingIntentRecordedData,
)
from holon_cli.model.events_planes import (
    WakeHintConvertedData as WakeHintConvertedData,
)
from holon_cli.model.events_planes import (
    WorkItemCompletedData as WorkItemCompletedData,
)
from holon_cli.model.events_planes import (
    WorkItemContinuationHeldData as WorkItemContinuationHeldData,
)
from holon_cli.model.events_planes import (
    WorkItemCreatedData as WorkItemCreatedData,
)
from holon_cli.model.events_planes import (
    WorkItemFocusReleasedData as WorkItemFocusReleasedData,
)
from holon_cli.model.events_planes import (
    WorkItemPickedData as WorkItemPickedData,
)
from holon_cli.model.events_planes import (
    WorkItemRecheckDueData as WorkItemRecheckDueData,
)
from holon_cli.model.events_planes import (
    WorkItemTurnEndCommitData as WorkItemTurnEndCommitData,
)
from holon_cli.model.events_planes import (
    WorkItemUpdatedData as WorkItemUpdatedData,
)
from holon_cli.model.events_planes import (
    WorktreeRetainedData as WorktreeRetainedData,
)
from holon_cli.model.failure import FailureArtifact
from holon_cli.model.turn import ClosureDecision, ProviderAttemptTimeline

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
    failure_artifact: NotRequired[FailureArtifact]
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
    actions: list[dict[str, object]]


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
