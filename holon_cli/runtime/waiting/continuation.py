"""The continuation decision for each dequeued message, before its turn.

:func:`before_turn` resolves the message against the closure of the turn
before it (``AgentState.last_closure``), persists the result as
``AgentState.last_continuation`` and either lets the model turn run or
settles the message itself, with no provider request:

- ``liveness_only`` (a plain wake-hint tick), ``observational``
  (``task_status``, ``brief_ack``, ``brief_result``): recorded, settled
  ``processed``; the agent's posture (e.g. ``asleep``) is kept;
- ``control``: ``pause``/``resume``/``stop`` applied to the agent lifecycle
  when the origin is trusted (operator or runtime), refused otherwise.

:func:`settle_queued_controls` lets a paused agent still obey a queued
``resume`` (a turn never runs while paused).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict

from holon_cli import clock
from holon_cli.model.continuation import ContinuationRecord, control_action, resolve
from holon_cli.runtime.waiting.common import field
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState, AgentStatus
    from holon_cli.model.envelope import QueueEntry
    from holon_cli.model.events import MessageSettledWithoutTurnData

TRUSTED_CONTROL = ("trusted_operator", "trusted_system")


class ControlOutcome(TypedDict):
    """What a control message did to the agent's lifecycle."""

    action: str | None
    applied: NotRequired[bool]
    reason: NotRequired[str]  # why it was not applied
    trust: NotRequired[str | None]  # the untrusted origin's trust
    previous: NotRequired[AgentStatus]
    status: NotRequired[AgentStatus]
    changed: NotRequired[bool]


class Decision(NamedTuple):
    run_model: bool
    continuation: ContinuationRecord
    settled_as: str | None = None  # resolution when settled without a turn
    control: ControlOutcome | None = None


def resolve_for(store: AgentStore, env: Mapping[str, Any]) -> ContinuationRecord:
    state = store.read_record()["state"]
    return resolve(env, state.get("last_closure"), at=clock.now_iso())


def apply_control(store: AgentStore, env: Mapping[str, Any]) -> ControlOutcome:
    """Apply a control message's lifecycle action. Returns what happened."""
    action = control_action(env)
    trust = field(env, "trust", "trust")
    if action is None:
        return {"applied": False, "reason": "unrecognized_control", "action": None}
    if trust not in TRUSTED_CONTROL:
        return {"applied": False, "reason": "untrusted_origin", "action": action, "trust": trust}
    out: ControlOutcome = {"action": action}

    def mutate(state: AgentState) -> None:
        prev = state["status"]
        new: AgentStatus
        if action == "stop":
            new = "stopped"
        elif action == "pause":
            new = prev if prev == "stopped" else "paused"
        else:  # resume
            new = "awake_idle" if prev in ("paused", "stopped") else prev
        out["previous"] = prev
        out["status"] = new
        out["changed"] = new != prev
        out["applied"] = True
        if new != prev:
            state["status"] = new
            state["status_changed_at"] = clock.now_iso()

    store.update_state(mutate, reason=f"control_{action}", message=env)
    return out


def _persist(store: AgentStore, res: ContinuationRecord) -> None:
    value = res.copy()
    store.update_state(lambda s: s.update({"last_continuation": value}))


def _settle(store: AgentStore, env: Mapping[str, Any], turn_id: str | None, reason: str) -> None:
    from holon_cli.runtime import queue as q

    q.settle(store, env["id"], "processed", turn_id=turn_id, reason=reason)


def before_turn(
    store: AgentStore, entry: QueueEntry, turn_id: str, *, persist: bool = True
) -> Decision:
    """Resolve, persist ``last_continuation``, and settle what needs no model.
    ``persist=False``: a message the model will see leaves ``last_continuation``
    to the caller (the turn writes it with its start, in the same write of the
    agent record); one settled here is persisted here either way."""
    from holon_cli.runtime.waiting import timers

    env = entry["envelope"]
    res = resolve_for(store, env)
    if persist or not res["model_visible"]:
        _persist(store, res)
    store.emit("continuation_resolved", dict(res), message=env, turn_id=turn_id)
    if res["model_visible"]:
        # a model turn ends any timed rest: its wake would be spurious now
        timers.cancel_sleep_timers(store, keep=timers.timer_of(env))
        return Decision(True, res)
    control = apply_control(store, env) if res["resolution"] == "control" else None
    data: MessageSettledWithoutTurnData = {
        "turn_id": turn_id,
        "resolution": res["resolution"],
        "control": None if control is None else dict(control),
    }
    store.emit(
        "message_settled_without_turn",
        data,
        message=env,
        turn_id=turn_id,
    )
    if env.get("kind") == "task_status":
        _transcript_entry(store, env, turn_id)
    _settle(store, env, turn_id, res["resolution"])
    return Decision(False, res, settled_as=res["resolution"], control=control)


def _transcript_entry(store: AgentStore, env: Mapping[str, Any], turn_id: str | None) -> None:
    """An observational ``task_status`` (a task recovered or lost after a
    restart) runs no turn, but the agent hears of it: it joins the
    transcript, so the next turn's recent conversation carries it."""
    from holon_cli.model.envelope import body_text, origin_label
    from holon_cli.runtime.briefs import write_transcript

    write_transcript(
        store,
        "message",
        message_id=env["id"],
        turn_id=turn_id,
        message_kind=env.get("kind"),
        origin=env.get("origin"),
        origin_label=origin_label(env.get("origin", {})),
        authority_class=env.get("authority_class"),
        trust=env.get("trust"),
        priority=env.get("priority"),
        task_id=env.get("task_id"),
        text=body_text(env.get("body", {})),
    )


def settle_queued_controls(store: AgentStore) -> list[dict[str, object]]:
    """For a paused agent: apply queued control messages in queue order
    (a ``resume`` among them unpauses it). Other messages wait."""
    from holon_cli.runtime import queue as q

    actions: list[dict[str, object]] = []
    while True:
        with store.lock():
            if store.read_record()["state"]["status"] != "paused":
                break
            st = q.load(store)
            q.ingest(store, st)
            head = next((e for e in st.pending() if e["head"].get("kind") == "control"), None)
            if head is None:
                break
            q.set_status(store, st, head["message_id"], "dequeued", reason="control")
        env = q.load_envelope(store, head)
        res = resolve_for(store, env)
        _persist(store, res)
        control = apply_control(store, env)
        settled: MessageSettledWithoutTurnData = {
            "resolution": "control",
            "control": dict(control),
        }
        store.emit(
            "message_settled_without_turn",
            settled,
            message=env,
        )
        _settle(store, env, None, "control")
        actions.append(
            {
                "action": "control_applied",
                "message_id": env["id"],
                **{k: v for k, v in control.items() if k != "action"},
                "control": control.get("action"),
            }
        )
    return actions
