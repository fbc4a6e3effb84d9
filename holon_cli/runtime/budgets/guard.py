"""The no-progress guard: an agent whose last :data:`GUARD_TURNS` turns for
the same activation (the same work-queue signal, re-sent by tick: its
``tick_reason``) made no tool call and changed no work item is not
re-activated by ``tick`` (nor by ``serve``, which ticks). The turn that trips
it writes an ``action_required`` brief; new operator input lifts it.

The streak lives on the agent (``state.no_progress``); each settled turn's
settlement carries the streak it leaves, so a replay records it once:

- a turn for an activation that made a tool call or changed a work item
  ends the streak; one that did neither extends it (a different activation
  starts a new one);
- a turn for operator input (or with an operator interjection) ends it;
- any other message (a timer, a task result, a recheck reminder) and a turn
  stopped by a budget before its request leave it as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from holon_cli import clock

if TYPE_CHECKING:
    from collections.abc import Mapping

    from holon_cli.model.agent import AgentState
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.turn import BriefPlan, NoProgressStreak, TurnProgress

GUARD_TURNS = 3
ACTIVATION_MODES = ("continue_active", "review_triggered", "activate_queued")


def activation_key(signal: Mapping[str, object]) -> str:
    """The tick reason of a work signal (the key a continuation is queued under)."""
    mode = signal.get("reactivation_mode") or "continue_active"
    return f"{mode}:{signal.get('fingerprint') or signal.get('work_item_id')}"


def activation_of(msg: Envelope) -> str | None:
    """The activation a message is, or ``None`` (not a work-queue activation)."""
    if msg.get("kind") != "system_tick":
        return None
    reason = str((msg.get("metadata") or {}).get("tick_reason") or "")
    return reason if reason.split(":", 1)[0] in ACTIVATION_MODES else None


def next_streak(prev: NoProgressStreak | None, p: TurnProgress) -> NoProgressStreak | None:
    """The streak a settled turn leaves (see the module docstring)."""
    if p["operator_input"]:
        return None
    act = p["activation"]
    if act is None or p["budget_stopped"]:
        return prev
    if p["tool_calls"] or p["work_item_changed"]:
        return None
    if prev is not None and prev["activation"] == act:
        return {**prev, "turns": prev["turns"] + 1, "last_turn_id": p["turn_id"]}
    return {
        "activation": act,
        "turns": 1,
        "work_item_id": p["work_item_id"],
        "since": clock.now_iso(),
        "last_turn_id": p["turn_id"],
    }


def notice(prev: NoProgressStreak | None, streak: NoProgressStreak | None) -> BriefPlan | None:
    """The ``action_required`` brief of the turn that trips the guard."""
    if streak is None or streak["turns"] != GUARD_TURNS or prev == streak:
        return None
    wid = streak.get("work_item_id")
    what = f"work item {wid}" if wid else "the work queue"
    return {
        "kind": "result",
        "title": "no_progress_guard",
        "text": (
            f"No progress: the last {GUARD_TURNS} turns activated for {what} made no tool "
            "call and changed no work item, so tick and serve no longer activate this "
            "agent for it. Send it a message (`holon enqueue ...`) to lift the guard, or "
            "change the work item (`holon workitem pick|update ...`)."
        ),
        "visibility": "action_required",
        "work_item_id": wid,
    }


def holds(state: AgentState, key: str) -> bool:
    """Whether the guard keeps the activation ``key`` from being queued."""
    streak = state.get("no_progress")
    return bool(streak and streak["activation"] == key and streak["turns"] >= GUARD_TURNS)


def held_streak(state: AgentState) -> NoProgressStreak | None:
    """The streak that trips the guard now (its activation is not queued by
    tick or serve until operator input ends it), or ``None``."""
    streak = state.get("no_progress")
    if streak and streak["turns"] >= GUARD_TURNS:
        return streak
    return None
