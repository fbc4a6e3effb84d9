"""The waiting plane's entry points for ``tick`` and ``turn`` (and later
``serve``): one function per moment, each a small call from the caller.

- :func:`tick_pass`: fire due timers, wake an agent whose Sleep timer fired,
  convert a pending wake hint, apply a paused agent's queued controls;
- :func:`before_turn`: the continuation decision (see :mod:`.continuation`);
- :func:`closure_wait`: the closure rule for an active external wait;
- :func:`after_turn`: a timed Sleep becomes a one-shot timer; a hint that
  arrived during the turn becomes its one ``system_tick``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from holon_cli import clock
from holon_cli.model.turn import ClosureDecision, RuntimePosture
from holon_cli.runtime.waiting import continuation, hints, intents, timers
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentState

before_turn = continuation.before_turn


def _wake_from_sleep(store: AgentStore) -> dict[str, object] | None:
    woke: list[bool] = []

    def mutate(s: AgentState) -> None:
        if s["status"] == "asleep":
            woke.append(True)
            s.update(
                {
                    "status": "awake_idle",
                    "status_changed_at": clock.now_iso(),
                    "sleeping_until": None,
                    "last_wake_reason": "sleep_expired",
                }
            )

    store.update_state(mutate, reason="sleep_expired")
    if not woke:
        return None
    return {"action": "woke", "reason": "sleep_expired"}


def _migrate_sleep(store: AgentStore) -> None:
    """An agent put asleep by an older holon (``sleeping_until`` and no Sleep
    timer) gets the timer now, so its wake is not lost."""
    st = store.read_record()["state"]
    until = st.get("sleeping_until")
    if st["status"] != "asleep" or not isinstance(until, str):
        return
    if any(t.get("purpose") == "sleep" for t in timers.load(store).active()):
        return
    left_ms = max(1, int((clock.parse_iso(until) - clock.now()) * 1000))
    timers.add_timer(store, after_ms=left_ms, purpose="sleep")


def tick_pass(store: AgentStore, now: float | None = None) -> list[dict[str, object]]:
    """The waiting plane's part of one scheduling pass. Returns its actions."""
    status = store.read_record()["state"]["status"]
    if status == "stopped":
        return []
    if status == "paused":
        return continuation.settle_queued_controls(store)
    _migrate_sleep(store)
    actions = timers.fire_due(store, now)
    if any(a.get("purpose") == "sleep" and a["action"] == "timer_fired" for a in actions):
        woke = _wake_from_sleep(store)
        if woke:
            actions.append(woke)
    conv = hints.flush(store)
    if conv:
        actions.append(conv)
    return actions


def closure_wait(store: AgentStore, posture: RuntimePosture = "awake") -> ClosureDecision | None:
    """``waiting``/``awaiting_external_change`` when the current work item has
    an active external wait at turn end, else ``None``."""
    wid = store.read_record()["state"].get("current_work_item_id")
    if intents.external_wait_on(store, wid) is None:
        return None
    return {
        "outcome": "waiting",
        "waiting_reason": "awaiting_external_change",
        "runtime_posture": posture,
    }


def after_turn(store: AgentStore, *, sleep_ms: int | None = None) -> list[dict[str, object]]:
    """Called once a turn has settled (its message and the agent state)."""
    actions: list[dict[str, object]] = []
    if sleep_ms:
        timers.cancel_sleep_timers(store)  # the newest Sleep wins: one pending wake at most
        t = timers.add_timer(store, after_ms=int(sleep_ms), purpose="sleep")
        actions.append(
            {"action": "sleep_timer_set", "timer_id": t["id"], "next_fire_at": t["next_fire_at"]}
        )
    conv = hints.flush(store)
    if conv:
        actions.append(conv)
    return actions
