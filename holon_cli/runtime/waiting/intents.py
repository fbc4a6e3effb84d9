"""Waiting intents: what an agent waits for outside itself, bound to a work
item (``RecordExternalWait`` / ``CancelExternalWait``).

``ledger/waiting_intents.jsonl`` holds one full intent snapshot per change;
the newest line for an id is its state. The work plane reads the same
ledger (readiness ``waiting_external``, ``triggered_blocked`` candidates).
Persisted status is only ``active`` | ``cancelled``; "triggered" is derived
(``trigger_count > 0`` and ``last_triggered_at`` set) and the wait stays
active across repeated deliveries. ``locks/waiting.lock`` orders every
read-modify-write. A delivery never clears ``blocked_by``, never completes
the item and never touches the trigger capability.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final, cast

from holon_cli import clock
from holon_cli.errors import NotFoundError, RejectedError, UsageError
from holon_cli.model.trigger import WaitingIntent
from holon_cli.model.typed import Checker
from holon_cli.runtime.waiting.common import lock_file
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.locks import locked

if TYPE_CHECKING:
    from holon_cli.model.events import WaitingIntentCancelledData, WaitingIntentRecordedData
    from holon_cli.model.workitem import WaitingIntentRecord

LEDGER: Final = "waiting_intents"
MAX_TEXT = 2000


def _lock(store: AgentStore) -> Any:
    return locked(lock_file(store, "waiting"), what=f"waiting intents of agent {store.agent_id!r}")


# ledger path -> (inode, offset folded so far, newest record per id): the
# ledger only grows, so a later load parses only what was appended since
_FOLDED: dict[str, tuple[int, int, dict[str, WaitingIntent]]] = {}


# the ledger's records as this plane writes them; the work plane reads the
# same lines as WaitingIntentRecord (only id and work_item_id guaranteed)
_WHOLE: Checker[WaitingIntent] = Checker(WaitingIntent)


def _line(rec: WaitingIntent) -> WaitingIntentRecord:
    """A whole record as the ledger's (looser) line type: the same dict."""
    return cast("WaitingIntentRecord", {**rec})


def load(store: AgentStore) -> dict[str, WaitingIntent]:
    """The newest record of every intent (a copy; cheap on repeated calls)."""
    led = store.ledger(LEDGER)
    key = str(led.path)
    try:
        ino = os.stat(led.path).st_ino
    except FileNotFoundError:
        return {}
    hit = _FOLDED.get(key)
    offset, folded = (hit[1], dict(hit[2])) if hit and hit[0] == ino else (0, {})
    if offset > led.size():
        offset, folded = 0, {}
    for _, end, rec in led.scan(offset):
        if _WHOLE.problem(rec) is None:  # the waiting plane's own records are whole
            folded[rec["id"]] = _WHOLE(rec)
        offset = end
    _FOLDED[key] = (ino, offset, folded)
    return dict(folded)


def active(store: AgentStore, *, work_item_id: str | None = None) -> list[WaitingIntent]:
    return [
        w
        for w in load(store).values()
        if w.get("status") == "active"
        and w.get("kind", "external") == "external"
        and (work_item_id is None or w.get("work_item_id") == work_item_id)
    ]


def _text(value: str | None, name: str, *, required: bool) -> str | None:
    v = (value or "").strip()
    if not v:
        if required:
            raise UsageError(f"`{name}` must not be empty", hint=f"describe the {name}")
        return None
    if len(v) > MAX_TEXT:
        raise UsageError(f"`{name}` is longer than {MAX_TEXT} characters", hint="keep it short")
    return v


def record_wait(
    store: AgentStore,
    *,
    description: str,
    source: str,
    external_ref: str | None = None,
    work_item_id: str | None = None,
    external_trigger_id: str | None = None,
    turn_id: str | None = None,
) -> WaitingIntent:
    """Record an active external wait on a work item (default: the current one)."""
    desc = _text(description, "description", required=True)
    src = _text(source, "source", required=True)
    ref = _text(external_ref, "external_ref", required=False)
    wid = work_item_id or store.read_record()["state"].get("current_work_item_id")
    if not wid:
        raise UsageError(
            "no work item to bind the wait to: none is current and `work_item_id` was not given",
            hint="pick the item the wait belongs to (PickWorkItem) or pass `work_item_id`",
        )
    _require_open_item(store, wid)
    now = clock.now_iso()
    rec: WaitingIntent = {
        "v": 1,
        "id": clock.new_id("wait"),
        "agent_id": store.agent_id,
        "work_item_id": wid,
        "kind": "external",
        "status": "active",
        "description": str(desc),
        "source": str(src),
        "external_ref": ref,
        "external_trigger_id": external_trigger_id,
        "condition": str(desc),
        "resource": ref,
        "trigger_count": 0,
        "last_triggered_at": None,
        "created_at": now,
        "updated_at": now,
        "cancelled_at": None,
        "turn_id": turn_id,
    }
    with _lock(store):
        # checked again under the lock: a completion cancels its item's waits
        # under this lock after it is written, so no wait outlives it
        _require_open_item(store, wid)
        store.ledger(LEDGER).append(_line(rec))
    data: WaitingIntentRecordedData = {
        "waiting_intent_id": rec["id"],
        "source": src,
        "external_ref": ref,
        "turn_id": turn_id,
    }
    store.emit(
        "waiting_intent_recorded",
        data,
        work_item_id=wid,
    )
    return rec


def _require_open_item(store: AgentStore, wid: str) -> None:
    from holon_cli.runtime.workitems.access import require_work_item

    if require_work_item(store, wid).get("state") == "completed":
        raise RejectedError(
            f"work item {wid} is completed; a wait on it would never matter",
            hint="record the wait on an open work item",
            kind="illegal_transition",
        )


def cancel_wait(
    store: AgentStore, waiting_intent_id: str, *, reason: str = "agent"
) -> tuple[WaitingIntent, bool]:
    """Cancel a wait. Unknown id: NotFoundError. Already cancelled: unchanged."""
    with _lock(store):
        cur = load(store).get(waiting_intent_id)
        if cur is None:
            raise NotFoundError(
                f"unknown waiting intent {waiting_intent_id!r}",
                hint=(
                    "the id is returned by RecordExternalWait and listed on the work item "
                    "(GetWorkItem)"
                ),
            )
        if cur.get("status") != "active":
            return cur, False
        now = clock.now_iso()
        new: WaitingIntent = {**cur, "status": "cancelled", "cancelled_at": now, "updated_at": now}
        store.ledger(LEDGER).append(_line(new))
    data: WaitingIntentCancelledData = {"waiting_intent_id": waiting_intent_id, "reason": reason}
    store.emit(
        "waiting_intent_cancelled",
        data,
        work_item_id=cur.get("work_item_id"),
    )
    return new, True


def cancel_for_work_item(
    store: AgentStore, work_item_id: str, *, reason: str = "work_item_completed"
) -> list[WaitingIntent]:
    """Cancel every active wait bound to ``work_item_id`` (runtime spec: work
    item cleanup cancels its waiting state, never the trigger capability).
    Later deliveries then no longer count against the item."""

    def bound() -> list[WaitingIntent]:  # every kind of wait, not only external ones
        return [
            w
            for w in load(store).values()
            if w.get("status") == "active" and w.get("work_item_id") == work_item_id
        ]

    if not bound():
        return []
    out: list[WaitingIntent] = []
    with _lock(store):
        now = clock.now_iso()
        for cur in bound():
            new: WaitingIntent = {
                **cur,
                "status": "cancelled",
                "cancelled_at": now,
                "updated_at": now,
            }
            store.ledger(LEDGER).append(_line(new))
            out.append(new)
    for w in out:
        data: WaitingIntentCancelledData = {"waiting_intent_id": w["id"], "reason": reason}
        store.emit("waiting_intent_cancelled", data, work_item_id=work_item_id)
    return out


def mark_triggered(store: AgentStore, at: str) -> list[WaitingIntent]:
    """A delivery: ``trigger_count + 1`` and ``last_triggered_at`` on every
    active external intent of the agent. Returns the updated intents."""
    if not active(store):
        return []
    out: list[WaitingIntent] = []
    with _lock(store):
        for cur in active(store):
            new: WaitingIntent = {
                **cur,
                "trigger_count": int(cur.get("trigger_count") or 0) + 1,
                "last_triggered_at": at,
                "updated_at": at,
            }
            store.ledger(LEDGER).append(_line(new))
            out.append(new)
    return out


def external_wait_on(store: AgentStore, work_item_id: str | None) -> WaitingIntent | None:
    """An active external wait on ``work_item_id`` (the closure rule's question)."""
    if not work_item_id:
        return None
    ws = active(store, work_item_id=work_item_id)
    return ws[0] if ws else None
