"""One scheduling pass (``holon tick``): ingest the inbox, wake agents whose
sleep has expired, deliver due work-item recheck reminders, and activate
persisted work (spec: Work-Queue Activation And Tick, SystemTick).

Ticks are runtime-owned ``system_tick`` messages, never external ingress.
A tick never enqueues a second activation while one is still queued.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.runtime import queue as q
from holon_cli.runtime import workitems as wi
from holon_cli.runtime.enqueue import admit
from holon_cli.runtime.wake import activation_held
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.events import AgentStateRepairedData, TickCompletedData


def _has_pending_tick(st: q.QueueState, reason: str) -> bool:
    for e in st.entries.values():
        env = e["head"]  # the envelope without its body
        if (
            env.get("kind") == "system_tick"
            and (env.get("metadata") or {}).get("tick_reason") == reason
        ):
            return True
    return False


def _system_tick(
    store: AgentStore,
    text: str,
    reason: str,
    *,
    work_item_id: str | None = None,
    priority: str = "normal",
) -> Envelope:
    return admit(
        text,
        store=store,
        kind="system_tick",
        origin="system:scheduler",
        priority=priority,
        work_item_id=work_item_id,
        delivery_surface="runtime_system",
        admission_context="runtime_owned",
        metadata={"tick_reason": reason},
    ).copy()


def enqueue_continuation(store: AgentStore, signal: dict[str, Any]) -> Envelope | None:
    """Admit the runtime-owned system tick for a work signal (continue the current
    item, review a triggered blocked item, or pick a queued one), unless the same
    signal is already queued."""
    from holon_cli.runtime.budgets.guard import activation_key

    wid = signal.get("work_item_id")
    text = "Runtime continuation: " + (
        signal.get("text")
        or (f"continue the current work item {wid}." if wid else "review the work queue.")
    )
    reason = activation_key(signal)
    with store.lock():
        st = q.load(store)
        q.ingest(store, st)
        if _has_pending_tick(st, reason):
            return None
    return _system_tick(store, text, reason, work_item_id=wid)


def _repair_stale_run(store: AgentStore) -> AgentStateRepairedData | None:
    """A run marker left by a killed turn is repaired when no turn holds the
    agent (a busy turn lock means the marker is live: leave it)."""
    state = store.read_record()["state"]
    if state["status"] != "awake_running" and not state.get("current_run_id"):
        return None
    from holon_cli.errors import BusyError
    from holon_cli.runtime.turn import repair_stale_run

    lock = store.turn_lock()
    try:
        lock.try_acquire()
    except BusyError:
        return None
    try:
        return repair_stale_run(store)
    finally:
        lock.release()


def _tick_children(store: AgentStore, identity: Any) -> list[dict[str, object]]:
    """Child handles of a parent brought up to date (a result due after a
    kill, a spawn to finish); a child whose handle ended is archived."""
    from holon_cli.runtime.children import supervision as sv
    from holon_cli.runtime.workspace.heal import heal
    from holon_cli.store.layout import HomeLayout

    actions = sv.sweep_parent(store)
    if identity.get("kind") == "child":
        actions.extend(sv.sweep_child(store))
    # isolated worktrees a killed command made and never bound
    actions.extend(heal(HomeLayout.current(), store.agent_id))
    return actions


def tick_agent(store: AgentStore) -> dict[str, Any]:
    from holon_cli.runtime.waiting.scheduler import tick_pass

    actions: list[dict[str, object]] = []
    rec = store.read_record()
    state = rec["state"]
    if state["status"] == "paused":
        # a paused agent still obeys a queued `resume` control message
        actions = tick_pass(store)
        state = store.read_record()["state"]
    if state["status"] in ("stopped", "paused"):
        return {"agent_id": store.agent_id, "skipped": state["status"], "actions": actions}
    with store.lock():
        st = q.load(store)
        admitted = q.ingest(store, st)
    if admitted:
        actions.append({"action": "ingested", "count": len(admitted)})
    repaired = _repair_stale_run(store)
    if repaired:
        actions.append({"action": "repaired_stale_run", **repaired})
    from holon_cli.runtime.tasks.plane import tick_tasks

    actions.extend(tick_tasks(store))
    actions.extend(_tick_children(store, rec["identity"]))
    now = clock.now()
    # timers (a timed Sleep's wake included) and pending wake hints
    actions.extend(tick_pass(store, now))
    for item in wi.recheck_due(store, now):
        wid = item["id"]
        reason = f"recheck:{wid}"
        if not _has_pending_tick(st, reason):
            blocker = item.get("blocked_by")
            _system_tick(
                store,
                (
                    f"Runtime reminder: work item {wid} is blocked by {blocker!r}; its recheck "
                    "time has come. Inspect the blocker and update or clear it."
                ),
                reason,
                work_item_id=wid,
                priority="background",
            )
            actions.append({"action": "recheck_reminder", "work_item_id": wid})
    # idle activation: only when nothing else is queued, and never for an
    # agent resting after an open-ended Sleep (only a real wake ends that)
    asleep = store.read_record()["state"]["status"] == "asleep"
    held: str | None = None
    if not asleep and q.pending_count(store) == 0:
        signal = wi.activation_signal(store)
        held = activation_held(store, signal) if signal else None
        if signal and held is None:
            msg = enqueue_continuation(store, signal)
            if msg:
                actions.append(
                    {"action": "activated", "work_signal": signal, "message_id": msg["id"]}
                )
    _note_depth(store)
    if actions:
        completed: TickCompletedData = {"actions": actions}
        store.emit("tick_completed", completed)
        return {"agent_id": store.agent_id, "actions": actions}
    # nothing happened: say why, so a cron log explains a quiet agent
    if held:
        why = held
    elif asleep:
        why = "asleep: waits for a message, timer, trigger delivery, task result or due recheck"
    elif q.pending_count(store):
        why = "messages are queued: `holon turn` runs them"
    else:
        why = "nothing due"
    return {"agent_id": store.agent_id, "actions": [], "idle_reason": why}


def _note_depth(store: AgentStore) -> None:
    """``holon.queue.depth`` after the tick (only while tracing is on)."""
    from holon_cli.runtime import telemetry

    if telemetry.active() is not None or telemetry.wanted():
        telemetry.record_queue_depth(store.agent_id, q.pending_count(store))


def _tick_one(aid: str) -> dict[str, Any]:
    """``tick_agent`` of one agent of ``tick --all``; a damaged agent is
    reported (``ok: false``, its ``error`` and ``exit_code``), not raised."""
    from holon_cli.errors import as_holon_error
    from holon_cli.runtime.agents.lifecycle import open_agent

    try:
        return tick_agent(open_agent(aid, create_default=False))
    except Exception as exc:  # noqa: BLE001 - one agent must not stop the others
        err = as_holon_error(exc)
        return {
            "agent_id": aid,
            "ok": False,
            "error": err.to_dict(),
            "exit_code": err.exit_code,
            "actions": [],
        }


def _skipped(aid: str, entry: Any) -> dict[str, Any]:
    """An agent the wake index let ``tick --all`` skip: what its last tick said."""
    why = entry.get("why") or "nothing due"
    if why in ("stopped", "paused"):
        return {"agent_id": aid, "skipped": why, "actions": []}
    return {"agent_id": aid, "actions": [], "idle_reason": why}


def tick_all() -> list[dict[str, Any]]:
    """One pass over every agent that may have something due: the home's
    wake index (``runtime/wake.py``) skips agents nothing changed for since
    their last tick and whose next deadline has not come. A damaged agent is
    reported (``ok: false``, its ``error`` and ``exit_code``) and the others
    are still ticked."""
    from holon_cli.runtime.wake import tick_all_indexed

    return tick_all_indexed(_tick_one, on_skip=_skipped)
