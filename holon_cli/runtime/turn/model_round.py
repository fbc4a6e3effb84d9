"""One model round of a turn, as records: the chain's answer (or its failure)
becomes events, transcript entries and journal records.

The loop (:class:`~holon_cli.runtime.turn.loop.TurnRun`) calls the model and
decides what happens next; this module says what a round leaves behind. It
does not fsync: the loop makes a round durable in one batch before its tools
run. The provider chain is imported only for types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.providers.base import ConversationItem, ModelResponse, ToolCall
from holon_cli.runtime.turn.journal import Journal
from holon_cli.runtime.turn.recorder import TurnRecorder

if TYPE_CHECKING:
    from holon_cli.model.events import (
        AssistantRoundRecordedData,
        ProviderRoundCompletedData,
        RuntimeErrorData,
        ToolExecutedData,
    )
    from holon_cli.model.failure import FailureArtifact
    from holon_cli.model.tool import ToolResult
    from holon_cli.providers.chain import ChainFailure, ChainResult


class ModelRound:
    """One successful provider round: the chain result and its timing."""

    __slots__ = ("chain", "provider_ms", "response", "started_at")

    def __init__(self, chain: ChainResult, started_at: str, provider_ms: float) -> None:
        self.chain = chain
        self.response: ModelResponse = chain.response
        self.started_at = started_at
        self.provider_ms = provider_ms

    @property
    def text(self) -> str:
        return self.response.text

    @property
    def tool_calls(self) -> list[ToolCall]:
        return list(self.response.tool_calls)


def _usage_dict(usage: Any) -> dict[str, int]:
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    return dict(usage.to_dict())


def record_model_round(
    rec: TurnRecorder,
    journal: Journal,
    rnd: ModelRound,
    *,
    context_build_ms: float,
    work_item_id: str | None,
) -> None:
    """The round's attempts and usage in the journal, its events
    (``provider_round_completed``, ``assistant_round_recorded``), its
    transcript entry, and the assistant item the next round sends back."""
    resp = rnd.response
    tl = rnd.chain.timeline
    usage = _usage_dict(resp.usage)
    journal.record_round(usage if resp.usage else None, list(tl.get("attempts", [])))
    round_no = journal.rounds
    calls = resp.tool_calls
    round_data: ProviderRoundCompletedData = {
        "round": round_no,
        "token_usage": usage,
        "context_build_ms": context_build_ms,
        "provider_round_ms": rnd.provider_ms,
        "provider_started_at": rnd.started_at,
        "provider_completed_at": clock.now_iso(),
        "provider_attempt_timeline": tl,
        "stop_reason": resp.stop_reason,
        "model_ref": tl.get("winning_model_ref"),
    }
    if resp.request_mode:
        round_data["request_mode"] = resp.request_mode
        if resp.request_mode_reason:
            round_data["request_mode_reason"] = resp.request_mode_reason
    if resp.context_edits:
        round_data["context_edits"] = resp.context_edits
    rec.event("provider_round_completed", round_data)
    recorded: AssistantRoundRecordedData = {
        "round": round_no,
        "text_preview": resp.text[:280],
        "tool_requests": [c.name for c in calls],
    }
    rec.event("assistant_round_recorded", recorded)
    rec.transcript(
        "assistant_round",
        round=round_no,
        text=resp.text,
        tool_calls=[c.to_dict() for c in calls],
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        data={"token_usage": usage},
        provider_attempt_timeline=tl,
        stop_reason=resp.stop_reason,
        model_ref=tl.get("winning_model_ref"),
        work_item_id=work_item_id,
    )
    journal.add_item(ConversationItem("assistant", resp.text, list(calls)))


def record_chain_failure(
    rec: TurnRecorder, journal: Journal, failure: ChainFailure, provider_ms: float
) -> tuple[FailureArtifact, str | None]:
    """A failed chain: its attempts and usage in the journal, the
    ``runtime_error`` event and the ``runtime_failure`` transcript entry.
    Returns the failure artifact and kind, which the settlement carries."""
    artifact = failure.failure_artifact()
    kind: str | None = getattr(failure.last, "kind", None)
    tl = failure.timeline
    usage = failure.usage.to_dict() if failure.usage is not None else None
    journal.record_failure(usage, list(tl.get("attempts", [])))
    summary = artifact.get("summary", str(failure))
    error_data: RuntimeErrorData = {
        "error": summary,
        "failure_kind": kind,
        "failure_artifact": artifact,
        "provider_attempt_timeline": tl,
        "token_usage": usage,
        "provider_round_ms": provider_ms,
    }
    rec.event("runtime_error", error_data)
    rec.transcript(
        "runtime_failure",
        text=summary,
        failure_artifact=artifact,
        provider_attempt_timeline=tl,
        token_usage=usage,
    )
    return artifact, kind


def record_tool_result(
    rec: TurnRecorder,
    journal: Journal,
    call: ToolCall,
    res: ToolResult,
    tool_ms: float,
    work_item_id: str | None,
) -> None:
    """One tool call's result as it lands: the ``tool_executed`` event, the
    transcript's ``tool_result`` and the journal's tool item (not fsync'd)."""
    executed: ToolExecutedData = {
        "round": journal.rounds,
        "tool_name": call.name,
        "call_id": call.id,
        "ok": res.ok,
        "duration_ms": tool_ms,
        "error": None if res.ok else res.content[:500],
        "tool_error": res.error,
        "warnings": res.warnings or None,
    }
    rec.event("tool_executed", executed, work_item_id=work_item_id)
    rec.transcript(
        "tool_result",
        round=journal.rounds,
        call_id=call.id,
        tool_name=call.name,
        ok=res.ok,
        output=res.content,
        error=res.error,
        warnings=res.warnings or None,
        duration_ms=tool_ms,
        work_item_id=work_item_id,
    )
    journal.add_item(
        ConversationItem("tool", res.content, call_id=call.id, name=call.name, is_error=not res.ok)
    )
    journal.add_latency(call.name, tool_ms, res.ok)
