"""Turn records that cross layers: the spec's ClosureDecision (with its
WorkSignal), ContinuationResolution, ProviderAttemptTimeline, and the
settlement a turn saves in its journal before writing its terminal records.
TypedDicts: zero runtime cost, the JSON is unchanged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

if TYPE_CHECKING:
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
    transport_diagnostics: NotRequired[dict[str, Any]]


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
    failure_artifact: dict[str, Any] | None
    failure_kind: str | None
    sleep: SleepRequestDict | None
    turn_skills: dict[str, dict[str, Any]]
    # the no-progress streak this turn leaves on the agent, and the guard's
    # brief when this turn trips it (absent in settlements of earlier builds)
    no_progress: NotRequired[NoProgressStreak | None]
    notice: NotRequired[BriefPlan | None]
    budget: NotRequired[dict[str, Any] | None]  # a BudgetHit: the budget that stopped it
    # why an aborted turn ended, when it was not a provider failure
    # (``operator_aborted``: ``holon agent abort``)
    reason: NotRequired[str]
    # what the turn adds to working memory (applied when the agent records the turn)
    memory: NotRequired[TurnMemoryDelta]
    # filled when the terminal records are written
    duration_ms: NotRequired[int]
    completed_at: NotRequired[str]
