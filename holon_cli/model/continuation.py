"""Continuation resolution (spec: Continuation Resolution, SystemTick).

Derived for every dequeued message from the closure snapshot that existed
*before* the message became the active run, so the ``awake_running``
dispatch marker can never suppress a model-visible trigger. Pure: no I/O.

``resolution`` says what the runtime does with the message:
  ``model_visible``        an ordinary model turn (operator input, timer
                           fire, task result, contentful external event,
                           internal follow-up, runtime work tick)
  ``local_continuation``   a wake-hint tick with a contentful body: a model
                           turn with the body fenced as integration evidence
  ``resume_expected_wait`` a plain wake-hint tick while the prior closure was
                           waiting on an external change: a model turn
  ``liveness_only``        a plain wake-hint tick otherwise: settled, no
                           provider request
  ``observational``        ``task_status``, ``brief_ack``, ``brief_result``:
                           recorded and settled, no provider request
  ``control``              a lifecycle command (``pause``/``resume``/``stop``)
                           applied by the runtime, never shown to the model
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from holon_cli.model.trigger import is_contentful
from holon_cli.model.turn import ContinuationResolution, WaitingReason

Resolution = Literal[
    "model_visible",
    "local_continuation",
    "resume_expected_wait",
    "liveness_only",
    "observational",
    "control",
]
CONTROL_ACTIONS = ("pause", "resume", "stop")
OBSERVATIONAL_KINDS = ("task_status", "brief_ack", "brief_result")
WAKE_HINT_REASON = "wake_hint"

# trigger kind -> the prior waiting reason it answers
_MATCHES = {
    "operator_input": "awaiting_operator_input",
    "task_result": "awaiting_task_result",
    "timer_fire": "awaiting_timer",
    "external_event": "awaiting_external_change",
}


class ContinuationRecord(ContinuationResolution):
    """The spec's ContinuationResolution (``model_visible``,
    ``prior_closure_outcome``, ``prior_waiting_reason`` when the prior closure
    was waiting, ``matched_waiting_reason``, ``evidence``) plus what the
    runtime did and for which message: ``AgentState.last_continuation``."""

    resolution: Resolution
    trigger_kind: str
    message_id: str
    resolved_at: str


def _get(env: Mapping[str, Any], camel: str, snake: str) -> Any:
    return env.get(snake, env.get(camel))


def wake_hint_of(env: Mapping[str, Any]) -> dict[str, Any] | None:
    """The wake hint a hint-made ``system_tick`` carries, or ``None``."""
    meta = env.get("metadata") or {}
    if env.get("kind") == "system_tick" and meta.get("tick_reason") == WAKE_HINT_REASON:
        hint = meta.get("wake_hint")
        return hint if isinstance(hint, dict) else {}
    return None


def control_action(env: Mapping[str, Any]) -> str | None:
    """``pause``/``resume``/``stop`` from a control body (``{"action": ...}``,
    ``{"control": ...}`` or the bare word); ``None`` when it names none."""
    body = env.get("body") or {}
    value: Any = None
    if body.get("type") == "json":
        v = body.get("value")
        if isinstance(v, dict):
            value = v.get("action", v.get("control"))
        elif isinstance(v, str):
            value = v
    else:
        value = body.get("text")
    if isinstance(value, str) and value.strip().lower() in CONTROL_ACTIONS:
        return value.strip().lower()
    return None


def resolve(env: Mapping[str, Any], prior_closure: Any | None, *, at: str) -> ContinuationRecord:
    prior = prior_closure or {}
    outcome = str(prior.get("outcome") or "completed")
    waiting = prior.get("waiting_reason") if outcome == "waiting" else None
    kind = str(env.get("kind") or "")
    trigger = str(_get(env, "triggerKind", "trigger_kind") or kind)
    evidence = [f"trigger:{trigger}", f"prior_closure:{outcome}"]
    if waiting:
        evidence.append(f"prior_waiting:{waiting}")
    matched = waiting is not None and _MATCHES.get(trigger) == waiting
    resolution: Resolution = "model_visible"
    hint = wake_hint_of(env)
    if kind == "control":
        resolution = "control"
        evidence.append(f"control:{control_action(env) or 'unrecognized'}")
    elif kind in OBSERVATIONAL_KINDS:
        resolution = "observational"
    elif hint is not None:
        n = int(hint.get("coalesced_count") or 1)
        evidence.append(f"wake_hint:{hint.get('external_trigger_id', '?')}x{n}")
        if is_contentful(hint):
            resolution = "local_continuation"
            evidence.append("contentful_body")
        elif waiting == "awaiting_external_change":
            resolution = "resume_expected_wait"
            matched = True
        else:
            resolution = "liveness_only"
    elif kind in ("channel_event", "webhook_event", "callback_event"):
        evidence.append("contentful_external_event")
    if matched:
        evidence.append(f"matched:{waiting}")
    out: dict[str, Any] = {
        "model_visible": resolution
        in ("model_visible", "local_continuation", "resume_expected_wait"),
        "resolution": resolution,
        "prior_closure_outcome": outcome,
        "matched_waiting_reason": matched,
        "evidence": evidence,
        "trigger_kind": trigger,
        "message_id": str(env.get("id") or ""),
        "resolved_at": at,
    }
    if waiting:
        out["prior_waiting_reason"] = cast(WaitingReason, waiting)
    return cast(ContinuationRecord, out)
