"""The spec's ClosureDecision for a settled turn (derived, never stored by
the model): failed, waiting, continuable or completed, plus the posture."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holon_cli.runtime import workitems as wi
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.turn import ClosureDecision, RuntimePosture, SleepRequestDict, WorkSignal


def derive_closure(
    store: AgentStore, *, failed: bool, sleep_req: SleepRequestDict | None
) -> ClosureDecision:
    """The spec's ClosureDecision for the settled turn."""
    posture: RuntimePosture = "asleep" if sleep_req else "awake"
    if failed:
        return {"outcome": "failed", "runtime_posture": "awake"}
    from holon_cli.runtime.waiting.scheduler import closure_wait

    external = closure_wait(store, posture)  # an active external wait on the current item
    if external:
        return external
    waiting = wi.closure_waiting_reason(store)
    if waiting:
        return {"outcome": "waiting", "waiting_reason": waiting, "runtime_posture": posture}
    if sleep_req:
        if sleep_req.get("duration_ms"):
            return {
                "outcome": "waiting",
                "waiting_reason": "awaiting_timer",
                "runtime_posture": posture,
            }
        return {"outcome": "completed", "runtime_posture": posture}
    signal = wi.activation_signal(store)
    if signal:
        work_signal: WorkSignal = {
            "work_item_id": signal.get("work_item_id"),
            "status": "active"
            if signal.get("reactivation_mode") == "continue_active"
            else "queued",
            "reactivation_mode": signal.get("reactivation_mode"),
            "text": signal.get("text"),
            "fingerprint": signal.get("fingerprint"),
        }
        return {"outcome": "continuable", "work_signal": work_signal, "runtime_posture": posture}
    return {"outcome": "completed", "runtime_posture": posture}
