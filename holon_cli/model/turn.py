"""Turn records that cross layers: the spec's ClosureDecision (with its
WorkSignal), ContinuationResolution, ProviderAttemptTimeline, and the
settlement a turn saves in its journal before writing its terminal records.
TypedDicts: zero runtime cost, the JSON is unchanged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from holon_cli.model.failure import FailureArtifact, TransportDiagnostics

if TYPE_CHECKING:
    from holon_cli.model.budget import BudgetHit
    from holon_cli.model.memory import TurnMemoryDelta

ClosureOutcome = Literal["completed", "continuable", "failed", "waiting"]
WaitingReason = Literal[
    "awaiting_operator_input",
    "awaiting_external_change",
    "awaiting_task_result",
    "awaiting_timer",
    "budget_exhausted",
]
RuntimePosture = Literal["awake", "asleep"]


class WorkSignal(TypedDict):
    work_item_id: str | None
    status: Literal["active", "queued"]
    reactivation_mode: str | None  # continue_active | activate_queued
    text: NotRequired[str | None]
    fingerprint: NotRequired[str | None]


class ClosureDecision(TypedDict):
    outcome: ClosureOutcome
    runtime_posture: RuntimePosture
    waiting_reason: NotRequired[str]  # a WaitingReason; only when outcome = waiting
    work_signal: NotRequired[WorkSignal]  # only when outcome = continuable


class ContinuationResolution(TypedDict):
    """The spec's continuation view for a trigger that may resume work,
    derived from the closure that existed before the message became active."""

    model_visible: bool
    prior_closure_outcome: ClosureOutcome
    prior_waiting_reason: NotRequired[WaitingReason]
    matched_waiting_reason: bool
    evidence: list[str]


class TokenUsageDict(TypedDict):
    input_tokens: int
    output_tokens: int
    total_tokens: int


AttemptOutcome = Literal["succeeded", "retrying", "retries_exhausted", "fail_fast_aborted"]
AttemptDisposition = Literal["retryable", "fail_fast", "turn_terminal"]


class ProviderAttemptRecord(TypedDict):
    """One provider attempt (``providers.chain``); the failure fields only
    when it failed, ``backoff_ms`` only before a retry."""

    provider: str
    model_ref: str
    attempt: int
    max_attempts: int
    started_at: str
    completed_at: str
    duration_ms: int
    failure_kind: NotRequired[str]
    disposition: NotRequired[AttemptDisposition | None]
    outcome: AttemptOutcome
    advanced_to_fallback: bool
    backoff_ms: NotRequired[int]
    token_usage: NotRequired[dict[str, int]]
    transport_diagnostics: NotRequired[TransportDiagnostics]


class ProviderAttemptTimeline(TypedDict):
    attempts: list[ProviderAttemptRecord]
    requested_model_ref: str | None
    active_model_ref: NotRequired[str | None]
    winning_model_ref: NotRequired[str | None]
    aggregated_token_usage: NotRequired[dict[str, int]]


class SleepRequestDict(TypedDict):
    duration_ms: int | None
    reason: str | None


class BriefPlan(TypedDict):
    # ack: the turn left work running in the background (runtime/turn/handoff.py)
    kind: Literal["ack", "result", "failure"]
    text: str
    visibility: Literal["action_required", "work_done", "turn_result"]
    work_item_id: str | None
    title: NotRequired[str]
    related_task_id: NotRequired[str | None]


class TurnProgress(TypedDict):
    """What a turn did, for the no-progress guard (``runtime/budgets/guard.py``)."""

    turn_id: str
    activation: str | None  # the work-queue activation it answered (its tick reason)
    work_item_id: str | None
    tool_calls: int
    work_item_changed: bool
    operator_input: bool
    budget_stopped: bool


class NoProgressStreak(TypedDict):
    """``state.no_progress``: consecutive turns of one activation without progress."""

    activation: str
    turns: int
    work_item_id: str | None
    since: str
    last_turn_id: str


class TurnSettlement(TypedDict):
    """How a turn ends, decided once and saved in the turn journal before any
    terminal record is written (replay writes only what is missing)."""

    turn_id: str
    turn_index: int
    status: Literal["completed", "aborted"]
    closure: ClosureDecision
    final_text: str
    brief: BriefPlan | None
    failure_artifact: FailureArtifact | None
    failure_kind: str | None
    sleep: SleepRequestDict | None
    turn_skills: dict[str, dict[str, Any]]
    # the no-progress streak this turn leaves on the agent, and the guard's
    # brief when this turn trips it (absent in settlements of earlier builds)
    no_progress: NotRequired[NoProgressStreak | None]
    notice: NotRequired[BriefPlan | None]
    budget: NotRequired[BudgetHit | None]  # the budget that stopped it
    # why an aborted turn ended, when it was not a provider failure
    # (``operator_aborted``: ``holon agent abort``)
    reason: NotRequired[str]
    # what the turn adds to working memory (applied when the agent records the turn)
    memory: NotRequired[TurnMemoryDelta]
    # filled when the terminal records are written
    duration_ms: NotRequired[int]
    completed_at: NotRequired[str]


class TranscriptEntry(TypedDict):
    """One line of ``ledger/transcript.jsonl`` (``runtime/briefs.write_transcript``):
    a ``message``, ``assistant_round``, ``tool_result``, ``runtime_failure``
    or ``turn_terminal`` with that kind's fields. History: the payloads a
    kind carries (timelines, artifacts, errors) are read as written."""

    v: int
    kind: str
    id: NotRequired[str]
    at: NotRequired[str]
    turn_id: NotRequired[str | None]
    message_id: NotRequired[str | None]
    work_item_id: NotRequired[str | None]
    text: NotRequired[str | None]
    # message
    message_kind: NotRequired[str | None]
    origin: NotRequired[dict[str, str] | None]
    origin_label: NotRequired[str | None]
    authority_class: NotRequired[str | None]
    trust: NotRequired[str | None]
    priority: NotRequired[str | None]
    interject: NotRequired[bool]
    # assistant_round, tool_result, runtime_failure
    round: NotRequired[int]
    tool_calls: NotRequired[list[dict[str, Any]]]
    input_tokens: NotRequired[int]
    output_tokens: NotRequired[int]
    data: NotRequired[dict[str, Any]]
    provider_attempt_timeline: NotRequired[dict[str, Any] | None]
    stop_reason: NotRequired[str | None]
    model_ref: NotRequired[str | None]
    failure_artifact: NotRequired[FailureArtifact | None]
    token_usage: NotRequired[dict[str, Any] | None]
    call_id: NotRequired[str]
    tool_name: NotRequired[str]
    ok: NotRequired[bool]
    output: NotRequired[str | None]
    error: NotRequired[dict[str, Any] | None]
    warnings: NotRequired[list[Any] | None]
    duration_ms: NotRequired[float | None]
    # turn_terminal
    turn_index: NotRequired[int]
    completed_at: NotRequired[str]
    status: NotRequired[str]
    closure: NotRequired[dict[str, Any] | None]
    reason: NotRequired[str | None]


class BriefRecord(TypedDict):
    """One line of ``ledger/briefs.jsonl`` (``runtime/briefs.write_brief``; v1
    lines, camelCase, are upgraded by their readers)."""

    v: int
    kind: str
    id: NotRequired[str]
    agent_id: NotRequired[str]
    at: NotRequired[str]
    visibility: NotRequired[str]
    text: NotRequired[str | None]
    title: NotRequired[str]
    work_item_id: NotRequired[str]
    related_message_id: NotRequired[str]
    related_task_id: NotRequired[str]
    attachments: NotRequired[list[dict[str, Any]]]
    turn_id: NotRequired[str]
    workspace_id: NotRequired[str]


class TurnRecordLine(TypedDict):
    """One line of ``ledger/turn_records.jsonl`` (``runtime/replay/records.py``):
    a settled turn's record compressed (``codec``, base64 ``data``, ``bytes``
    before compression), or ``broken``: why there is none."""

    v: int
    turn_id: str
    message_id: NotRequired[str | None]
    at: NotRequired[str]
    codec: NotRequired[str]
    bytes: NotRequired[int]
    data: NotRequired[str]
    broken: NotRequired[str]
