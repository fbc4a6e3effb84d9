"""Timers: ``holon timer add|list|cancel`` and their firing from ``tick``.

Durable truth is ``ledger/timers.jsonl``: one line per change, each carrying
the timer's full record (``op`` = ``created`` | ``fired`` | ``cancelled``).
``state/timers.json`` is the fold of that ledger plus the byte offset it
reflects; loading replays only the ledger tail after it.

Every read-modify-write (add, cancel, a firing pass) holds
``locks/timer_schedule.lock`` from the read to the ledger append, so:

- two ``tick`` processes fire each due timer exactly once (the second one
  finds ``next_fire_at`` already moved);
- a cancel racing a fire is ordered by that lock: the timer fires once
  (then is cancelled) or not at all.

A fire admits one ``timer_tick`` (origin ``timer:<id>``, ``trusted_system``,
surface ``timer_scheduler``, ``sourceRefs.timer_id``) and then records
``fire_count + 1``. While the timer's previous ``timer_tick`` is still
queued, a fire only counts. That rule also covers a crash between the
admission and the ledger append: the next pass finds the message queued and
records the fire without a second message. Repeating timers move to the
first point of their schedule after now, so fires missed while nothing ran
coalesce into one message (``metadata.missed_fires`` says how many).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from holon_cli import clock
from holon_cli.errors import (
    CorruptStateError,
    HolonError,
    NotFoundError,
    RejectedError,
    UsageError,
)
from holon_cli.model.timer import (
    MIN_EVERY_MS,
    TIMER_VERSION,
    StoredTimer,
    TimerRecord,
    advance,
    default_message,
    public,
)
from holon_cli.runtime.waiting.common import field as env_field
from holon_cli.runtime.waiting.common import (
    lock_file,
    metadata_of,
    queued_envelopes,
    source_refs,
    state_file,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot, write_snapshot
from holon_cli.store.locks import locked

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.events import TimerCancelledData, TimerCreatedData, TimerFiredData
    from holon_cli.model.timer import TimerLedgerRecord

LEDGER: Final = "timers"
SNAPSHOT_VERSION = 1
MAX_MESSAGE_CHARS = 4000


class TimerState:
    """The timers ledger folded: each timer's latest record, and how far it was read."""

    def __init__(self) -> None:
        self.offset = 0
        self.timers: dict[str, StoredTimer] = {}

    def apply(self, rec: TimerLedgerRecord) -> None:
        t = rec["timer"]
        self.timers[t["id"]] = t

    def active(self) -> list[StoredTimer]:
        out = [t for t in self.timers.values() if t["status"] == "active"]
        out.sort(key=lambda t: (t.get("next_fire_at") or "", t["id"]))
        return out


def load(store: AgentStore) -> TimerState:
    """Snapshot plus ledger tail. Read-only; safe without the lock.

    The snapshot is only a fold of ``timers.jsonl``: a damaged one (or one
    that reflects more than the ledger holds) is ignored and the state is
    folded from the whole ledger, so it never wedges the agent (``home
    check`` reports it; the next save or ``home check --repair`` rewrites it)."""
    led = store.ledger(LEDGER)
    try:
        snap = read_snapshot(state_file(store, LEDGER), max_version=SNAPSHOT_VERSION)
    except CorruptStateError:
        snap = None
    st = TimerState()
    if snap and int(snap.get("offset", 0)) > led.size():
        import logging

        logging.getLogger("holon.timers").warning(
            "warning: %s is shorter than %s says (emptied or cut); `holon home check "
            "--repair` appends its timers back",
            led.path,
            state_file(store, LEDGER).name,
        )
    if snap and int(snap.get("offset", 0)) <= led.size():
        st.offset = int(snap["offset"])
        for t in snap.get("timers", []):
            st.timers[t["id"]] = t
    for _, end, rec in led.scan(st.offset):
        st.apply(rec)
        st.offset = end
    return st


def _save(store: AgentStore, st: TimerState) -> None:
    write_snapshot(
        state_file(store, LEDGER),
        {
            "v": SNAPSHOT_VERSION,
            "offset": st.offset,
            "timers": sorted(st.timers.values(), key=lambda t: t["id"]),
        },
    )


def _append(
    store: AgentStore,
    st: TimerState,
    op: str,
    timer: StoredTimer,
    *,
    reason: str | None = None,
    fired: tuple[str | None, str | None, int] | None = None,
) -> None:
    """One ledger line; ``fired``: the message admitted, the queued one it
    joined instead, the fires it missed."""
    led = store.ledger(LEDGER)
    rec: TimerLedgerRecord = {"v": 1, "op": op, "at": clock.now_iso(), "timer": {**timer}}
    if op == "cancelled":
        rec["reason"] = reason
    if fired is not None:
        rec["message_id"], rec["coalesced_into"], rec["missed_fires"] = fired
    led.append(rec)
    st.apply(rec)
    st.offset = led.size()  # we hold the timers lock: ours is the last line


def _lock(store: AgentStore) -> Any:
    return locked(lock_file(store, "timer_schedule"), what=f"timers of agent {store.agent_id!r}")


# ------------------------------------------------------------------ add


def add_timer(
    store: AgentStore,
    *,
    after_ms: int,
    every_ms: int | None = None,
    message: str | None = None,
    work_item_id: str | None = None,
    purpose: str = "timer",
) -> TimerRecord:
    """Create a timer (an audit event ``timer_created``, never a message)."""
    if after_ms <= 0:
        raise UsageError("--after must be positive", hint="e.g. --after 90s")
    if every_ms is not None and every_ms < MIN_EVERY_MS:
        raise UsageError(
            f"--every must be at least {MIN_EVERY_MS // 1000}s",
            hint="a repeating timer fires at most once per tick pass; use e.g. --every 5m",
        )
    if message is not None:
        message = message.strip() or None
        if message and len(message) > MAX_MESSAGE_CHARS:
            raise UsageError(
                f"--message is longer than {MAX_MESSAGE_CHARS} characters",
                hint="put long instructions in a work item or a file and name it in the message",
            )
    if store.read_record()["state"]["status"] == "stopped":
        from holon_cli.model.agent import lifecycle_hint

        raise RejectedError(
            f"agent {store.agent_id!r} is stopped; no timer was created",
            hint=lifecycle_hint("stopped") or "",
            kind="agent_stopped",
        )
    if work_item_id:
        from holon_cli.runtime.workitems import require_work_item

        require_work_item(store, work_item_id)
    now = clock.now()
    tid = clock.new_id("tmr")
    timer: StoredTimer = {
        "v": TIMER_VERSION,
        "id": tid,
        "agent_id": store.agent_id,
        "status": "active",
        "created_at": clock.iso(now),
        "next_fire_at": clock.iso(now + after_ms / 1000),
        "every_ms": every_ms,
        "message": message,
        "work_item_id": work_item_id,
        "fire_count": 0,
        "last_fired_at": None,
        "purpose": "sleep" if purpose == "sleep" else "timer",
        "last_message_id": None,
    }
    with _lock(store):
        st = load(store)
        _append(store, st, "created", timer)
        _save(store, st)
    created: TimerCreatedData = {
        "next_fire_at": timer["next_fire_at"],
        "every_ms": every_ms,
        "purpose": timer["purpose"],
        "timer_id": tid,
    }
    store.emit("timer_created", created, work_item_id=work_item_id)
    return public(timer)


# ----------------------------------------------------------------- list


def list_timers(store: AgentStore, *, include_all: bool = False) -> list[TimerRecord]:
    st = load(store)
    items = list(st.timers.values()) if include_all else st.active()
    items.sort(key=lambda t: t["id"])
    return [public(t) for t in items]


def get_timer(store: AgentStore, timer_id: str) -> StoredTimer:
    t = load(store).timers.get(timer_id)
    if t is None:
        raise NotFoundError(
            f"unknown timer {timer_id!r} for agent {store.agent_id!r}",
            hint=f"list timers with `holon timer list --all --agent {store.agent_id}`",
        )
    return t


# --------------------------------------------------------------- cancel


def cancel_timer(
    store: AgentStore, timer_id: str, *, reason: str = "operator"
) -> dict[str, object]:
    """Cancel an active timer. Unknown id: NotFoundError (3). Already
    cancelled or fired: nothing changes, ``changed`` is false."""
    with _lock(store):
        st = load(store)
        t = st.timers.get(timer_id)
        if t is None:
            raise NotFoundError(
                f"unknown timer {timer_id!r} for agent {store.agent_id!r}",
                hint=f"list timers with `holon timer list --all --agent {store.agent_id}`",
            )
        if t["status"] != "active":
            return {"timer": public(t), "changed": False, "previous_status": t["status"]}
        new: StoredTimer = {**t, "status": "cancelled", "next_fire_at": None}
        _append(store, st, "cancelled", new, reason=reason)
        _save(store, st)
    cancelled: TimerCancelledData = {"timer_id": timer_id, "reason": reason}
    store.emit("timer_cancelled", cancelled)
    return {"timer": public(new), "changed": True, "previous_status": "active"}


def cancel_sleep_timers(store: AgentStore, *, keep: str | None = None) -> list[str]:
    """Cancel pending Sleep wakes (a new turn started; the rest is over)."""
    ids = [t["id"] for t in load(store).active() if t.get("purpose") == "sleep" and t["id"] != keep]
    for tid in ids:
        cancel_timer(store, tid, reason="superseded")
    return ids


# ----------------------------------------------------------------- fire


def _queued_ticks(store: AgentStore) -> dict[str, str]:
    """timer id -> id of a ``timer_tick`` from that timer still waiting for a turn."""
    out: dict[str, str] = {}
    for env in queued_envelopes(store):
        if env.get("kind") != "timer_tick":
            continue
        tid = source_refs(env).get("timer_id") or metadata_of(env).get("timer_id")
        if isinstance(tid, str):
            out.setdefault(tid, str(env.get("id")))
    return out


def _admit_tick(store: AgentStore, t: StoredTimer, *, missed: int) -> Envelope:
    from holon_cli.runtime.enqueue import admit

    text = t.get("message") or default_message(t["id"], t.get("purpose") or "timer")
    meta: dict[str, object] = {
        "timer_id": t["id"],
        "timer_purpose": t.get("purpose") or "timer",
        "fire_seq": int(t["fire_count"]) + 1,
        "missed_fires": missed,
    }

    def admit_tick(wid: str | None) -> Envelope:
        return admit(
            text,
            store=store,
            work_item_id=wid,
            kind="timer_tick",
            origin=f"timer:{t['id']}",
            delivery_surface="timer_scheduler",
            admission_context="runtime_owned",
            metadata=meta,
            source_refs={"timer_id": t["id"]},
        )

    wid = t.get("work_item_id")
    try:
        return admit_tick(wid)
    except NotFoundError:
        if not wid:
            raise
        meta["unbound_work_item_id"] = wid  # the item is gone: fire unbound
        return admit_tick(None)


def _due(t: StoredTimer, now: float) -> bool:
    at = t.get("next_fire_at")
    return isinstance(at, str) and clock.parse_iso(at) <= now


def fire_due(store: AgentStore, now: float | None = None) -> list[dict[str, object]]:
    """Fire every due active timer once. Returns one action per timer."""
    now = clock.now() if now is None else now
    now_ms = int(round(now * 1000))
    st = load(store)
    if not any(_due(t, now) for t in st.active()):
        return []  # the common case: no lock taken
    actions: list[dict[str, object]] = []
    with _lock(store):
        st = load(store)
        due = [t for t in st.active() if _due(t, now)]
        if not due:
            return []
        queued = _queued_ticks(store)
        at = clock.iso(now)
        for t in due:
            missed = 0
            upd: StoredTimer = {**t}
            if t.get("every_ms"):
                due_ms = int(round(clock.parse_iso(str(t["next_fire_at"])) * 1000))
                nxt, missed = advance(due_ms, int(t["every_ms"] or 0), now_ms)
                upd["next_fire_at"] = clock.iso(nxt / 1000)
            else:
                upd["status"] = "fired"
                upd["next_fire_at"] = None
            pending = queued.get(t["id"])
            message_id: str | None = None
            if pending is None:
                try:
                    env = _admit_tick(store, t, missed=missed)
                except HolonError as err:  # e.g. the agent was stopped meanwhile
                    actions.append(
                        {"action": "timer_skipped", "timer_id": t["id"], "reason": err.kind}
                    )
                    continue
                message_id = env["id"]
                upd["last_message_id"] = message_id
            upd["fire_count"] = int(t["fire_count"]) + 1
            upd["last_fired_at"] = at
            _append(store, st, "fired", upd, fired=(message_id, pending, missed))
            action: dict[str, object] = {
                "action": "timer_fired" if message_id else "timer_coalesced",
                "timer_id": t["id"],
                "fire_count": upd["fire_count"],
                "message_id": message_id or pending,
            }
            if missed:
                action["missed_fires"] = missed
            if t.get("purpose") == "sleep":
                action["purpose"] = "sleep"
            actions.append(action)
            data: TimerFiredData = {
                "timer_id": t["id"],
                "fire_count": upd["fire_count"],
                "message_id": message_id,
                "coalesced_into": pending,
                "missed_fires": missed,
                "next_fire_at": upd["next_fire_at"],
                "purpose": t.get("purpose") or "timer",
            }
            store.emit(
                "timer_fired",
                data,
                work_item_id=t.get("work_item_id"),
            )
        _save(store, st)
    return actions


def next_deadline(store: AgentStore) -> str | None:
    """The earliest ``next_fire_at`` of an active timer (for ``serve`` to sleep until)."""
    act = [at for t in load(store).active() if (at := t.get("next_fire_at"))]
    return min(act) if act else None


def timer_of(env: Mapping[str, Any]) -> str | None:
    """The timer id a ``timer_tick`` message came from."""
    if env.get("kind") != "timer_tick":
        return None
    tid = source_refs(env).get("timer_id") or metadata_of(env).get("timer_id")
    origin = env_field(env, "origin", "origin") or {}
    return tid if isinstance(tid, str) else origin.get("timer_id", origin.get("timerId"))
