"""The value one turn returns to its caller (CLI, ``holon run``, serve)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holon_cli.errors import HolonError
from holon_cli.model.value import Value

if TYPE_CHECKING:
    from holon_cli.model.budget import BudgetHit
    from holon_cli.model.failure import FailureArtifact
    from holon_cli.model.turn import (
        ClosureDecision,
        ProviderAttemptRecord,
        ProviderAttemptTimeline,
        TurnSettlement,
    )
    from holon_cli.runtime.turn.journal import Journal


def zero_usage() -> dict[str, int]:
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


def attempt_timeline(
    attempts: list[ProviderAttemptRecord],
    requested_model_ref: str | None,
    usage: dict[str, int] | None = None,
) -> ProviderAttemptTimeline:
    """The spec's ``ProviderAttemptTimeline`` over several provider rounds
    (a turn's, or a run's): every attempt in order and the requested model
    ref; the ref that answered last, and the aggregated usage when known."""
    tl: ProviderAttemptTimeline = {
        "attempts": list(attempts),
        "requested_model_ref": requested_model_ref,
    }
    if attempts:
        tl["active_model_ref"] = attempts[-1].get("model_ref")
    winners = [a.get("model_ref") for a in attempts if a.get("outcome") == "succeeded"]
    if winners:
        tl["winning_model_ref"] = winners[-1]
    if usage is not None:
        tl["aggregated_token_usage"] = dict(usage)
    return tl


class TurnResult(Value):
    """What one turn did, for its caller (``to_dict``: the fields, in order).

    ``provider_attempt_timeline`` is the spec's ProviderAttemptTimeline over
    every round of the turn; ``budget`` the budget that stopped the turn
    before a provider request (closure waiting/budget_exhausted), or that held
    it back before any dequeue (``ran`` is false then and every message stays
    queued)."""

    def __init__(
        self,
        agent_id: str,
        ran: bool,
        turn_id: str | None = None,
        message_id: str | None = None,
        status: str = "idle",  # idle | completed | aborted | settled (no model turn was needed)
        closure: ClosureDecision | None = None,
        final_text: str = "",
        model_rounds: int = 0,
        token_usage: dict[str, int] | None = None,
        provider_attempt_timeline: ProviderAttemptTimeline | None = None,
        failure_artifact: FailureArtifact | None = None,
        failure_kind: str | None = None,
        slept: bool = False,
        duration_ms: int = 0,
        replayed: bool = False,
        budget: BudgetHit | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.ran = ran
        self.turn_id = turn_id
        self.message_id = message_id
        self.status = status
        self.closure = closure
        self.final_text = final_text
        self.model_rounds = model_rounds
        self.token_usage = zero_usage() if token_usage is None else token_usage
        self.provider_attempt_timeline = (
            attempt_timeline([], None)
            if provider_attempt_timeline is None
            else provider_attempt_timeline
        )
        self.failure_artifact = failure_artifact
        self.failure_kind = failure_kind
        self.slept = slept
        self.duration_ms = duration_ms
        self.replayed = replayed
        self.budget = budget

    def take_settlement(
        self, s: TurnSettlement, journal: Journal, requested_model_ref: str | None
    ) -> None:
        """The settled turn as its caller sees it (a replay reads the saved settlement)."""
        self.closure = s["closure"]
        self.final_text = s["final_text"]
        self.status = s["status"]
        self.failure_artifact = s.get("failure_artifact")
        self.failure_kind = s.get("failure_kind")
        self.budget = s.get("budget")
        self.slept = s.get("sleep") is not None
        self.model_rounds = journal.rounds
        self.token_usage = dict(journal.usage)
        self.provider_attempt_timeline = attempt_timeline(
            journal.timeline,
            requested_model_ref,
            journal.usage if journal.usage_reported else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class AgentFailure(Value):
    """One agent of an ``--all`` pass that could not run (damaged, busy, ...)."""

    def __init__(self, agent_id: str, error: HolonError) -> None:
        self.agent_id = agent_id
        self.error = error

    @property
    def exit_code(self) -> int:
        return self.error.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {"ok": False, "agent_id": self.agent_id, "error": self.error.to_dict()}
