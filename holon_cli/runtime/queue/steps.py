"""Queue steps the turn engine takes: dequeue, settle, interjects, crash
recovery, and the opportunistic ingest after ``holon enqueue``.

Invariants:
- every step that changes the queue runs under the agent lock, ingests
  first, and appends to the ledger before it saves the snapshot;
- :func:`dequeue_next` hands out the head of the queue (priority band, then
  admission order) with its full envelope; a message whose body is gone is
  aborted with an event instead of wedging the queue;
- a ``dequeued`` entry with no turn running is requeued in its original
  place (``interrupted``) once per crash, and aborted after ``MAX_ATTEMPTS``;
- settling a message (``processed``/``aborted``) releases its body in
  ``inbox/cur``;
- :func:`try_ingest` never waits and never fails its caller.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import TYPE_CHECKING

from holon_cli import clock
from holon_cli.errors import CorruptStateError
from holon_cli.model.envelope import (
    EnvelopeError,
    EnvelopeHead,
    QueueEntry,
    QueueStatus,
    StatusRecord,
)
from holon_cli.runtime.queue.ingest import _release_body, _with_envelope, ingest
from holon_cli.runtime.queue.state import (
    FINAL,
    MAX_ATTEMPTS,
    QUEUE_RECORD_VERSION,
    QueueState,
    _append,
    _save,
    load,
)
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.events import MessageReplayedData, QueueRuntimeErrorData


def recover(
    store: AgentStore,
    st: QueueState,
    settled: Collection[str] = (),
    attempted: Collection[str] | None = None,
) -> list[QueueEntry]:
    """Requeue entries whose turn died. Caller holds the agent lock *and* the turn lock
    (so no live turn owns a dequeued entry).

    A crashed turn counts as an attempt only when it got as far as a provider
    request (its id is in ``attempted``; ``None``: count every crash); one
    killed earlier (start-up, context building) is requeued with
    ``counted: false`` and costs its message nothing. Entries past
    ``MAX_ATTEMPTS`` counted attempts are aborted (``max_attempts_exceeded``),
    except those in ``settled``: their turn already decided how it ended (a
    durable settlement in the turn journal), so the replay only finishes
    recording it and runs no model; aborting them would leave a completed
    terminal on an aborted message."""
    changed: list[QueueEntry] = []
    for entry in list(st.in_flight()):
        mid = entry["message_id"]
        head = entry["head"]
        counted = attempted is None or entry.get("turn_id") in attempted
        over = int(entry.get("attempts", 0)) >= MAX_ATTEMPTS
        if counted and over and mid not in settled:
            set_status(store, st, mid, "aborted", reason="max_attempts_exceeded", save=False)
            limit: QueueRuntimeErrorData = {
                "error": f"message {mid} aborted after {MAX_ATTEMPTS} interrupted attempts "
                "(each reached the model and was killed)",
                "kind": "replay_limit",
                "hint": f"re-admit it with `holon queue requeue {mid} --agent {store.agent_id}`",
            }
            store.emit("runtime_error", limit, message=head)
        else:
            set_status(
                store,
                st,
                mid,
                "interrupted",
                reason="turn_crashed",
                save=False,
                counted=None if counted else False,
            )
            replayed: MessageReplayedData = {"attempts": entry.get("attempts", 0)}
            store.emit("message_replayed", replayed, message=head)
        changed.append(entry)
    if changed:
        _save(store, st)
    return changed


def set_status(
    store: AgentStore,
    st: QueueState,
    message_id: str,
    status: QueueStatus,
    *,
    turn_id: str | None = None,
    reason: str | None = None,
    save: bool = True,
    counted: bool | None = None,
) -> None:
    rec: StatusRecord = {
        "v": QUEUE_RECORD_VERSION,
        "op": "status",
        "message_id": message_id,
        "status": status,
        "at": clock.now_iso(),
    }
    if counted is not None:
        rec["counted"] = counted
    if turn_id:
        rec["turn_id"] = turn_id
    if reason:
        rec["reason"] = reason
    _append(store, st, rec)
    if save:
        _save(store, st)
    if status in FINAL:
        # after the record is durable (at once, or with a turn's last batch)
        store.after_sync(lambda: _release_body(store, message_id))


def put_back(store: AgentStore, message_id: str, *, reason: str) -> None:
    """Return a message this turn dequeued but never ran (no provider request
    was made) to the queue; its attempt is not counted."""
    with store.lock():
        st = load(store)
        entry = st.entries.get(message_id)
        if entry is None or entry.get("status") != "dequeued":
            return
        set_status(store, st, message_id, "interrupted", reason=reason, counted=False)


def dequeue_next(
    store: AgentStore,
    turn_id: str,
    *,
    settled: Collection[str] = (),
    attempted: Collection[str] | None = None,
) -> QueueEntry | None:
    """The turn engine's dequeue step: ingest, recover, take the head of the queue.

    The caller must hold the agent's turn lock. Returns the entry (with its
    full ``envelope`` loaded) marked ``dequeued``, or ``None`` when nothing is
    queued. A message whose body cannot be found anywhere is aborted with an
    event instead of wedging the queue. ``settled`` names messages whose turn
    settlement is already durable (see :func:`recover`)."""
    with store.lock():
        st = load(store)
        ingest(store, st)
        recover(store, st, settled, attempted)
        while True:
            pending = st.pending()
            if not pending:
                return None
            head = pending[0]
            try:
                entry = _with_envelope(store, head)
            except (CorruptStateError, EnvelopeError) as exc:
                mid = head["message_id"]
                set_status(store, st, mid, "aborted", reason="body_missing")
                unreadable: QueueRuntimeErrorData = {
                    "error": str(exc),
                    "kind": "message_unreadable",
                }
                store.emit("runtime_error", unreadable, message=head["head"])
                continue
            set_status(store, st, head["message_id"], "dequeued", turn_id=turn_id)
            entry.update(st.entries[head["message_id"]])
            return entry


def settle(
    store: AgentStore,
    message_id: str,
    status: QueueStatus,
    *,
    turn_id: str | None = None,
    reason: str | None = None,
) -> None:
    """Mark a dequeued message ``processed`` or ``aborted``."""
    assert status in FINAL
    with store.lock():
        st = load(store)
        set_status(store, st, message_id, status, turn_id=turn_id, reason=reason)


def pending_count(store: AgentStore, st: QueueState | None = None) -> int:
    """Queued messages, including those delivered to the inbox but not yet ingested."""
    st = st or load(store)
    queued = {e["message_id"] for e in st.entries.values() if e["status"] == "queued"}
    for p in store.inbox.pending():
        mid = p.name[: -len(".json")]
        if mid not in st.entries and mid not in st.recent_final:
            queued.add(mid)
    return len(queued)


def take_interjects(store: AgentStore, turn_id: str) -> list[QueueEntry]:
    """At a provider/tool safe point: dequeue trusted operator prompts queued with
    ``interject`` priority so the running turn can see them now."""
    with store.lock():
        st = load(store)
        ingest(store, st)
        out = []
        for e in st.pending():
            head = e["head"]
            if (
                e["priority"] == "interject"
                and head.get("authority_class") == "operator_instruction"
            ):
                try:
                    full = _with_envelope(store, e)
                except (CorruptStateError, EnvelopeError):
                    continue  # the normal dequeue path aborts it with an event
                set_status(
                    store,
                    st,
                    e["message_id"],
                    "dequeued",
                    turn_id=turn_id,
                    reason="interject",
                    save=False,
                )
                full.update(st.entries[e["message_id"]])
                out.append(full)
        if out:
            _save(store, st)
        return out


class Interjects:
    """When a turn's safe point needs to ask for interjections
    (:func:`take_interjects`): only when something may have arrived since
    the last ask, a message file in ``inbox/new`` (to ingest) or the queue
    ledger grown or cut (another process ingested one). Otherwise nothing
    new can be queued, and the ask costs a listing and a stat instead of
    the agent lock, the queue's fold and the inbox sweep (every round of
    every turn). ``due()`` before an ask, ``asked()`` after it."""

    def __init__(self, store: AgentStore) -> None:
        self.store = store
        self._seen: int | None = None  # the queue ledger's size after the last ask

    def due(self) -> bool:
        return self._seen is None or self._quiet() != self._seen

    def asked(self) -> None:
        self._seen = self._quiet()

    def _quiet(self) -> int | None:
        """The queue ledger's size, or ``None`` when the inbox holds a message."""
        try:
            names = os.listdir(self.store.inbox.new)
        except FileNotFoundError:
            names = []
        if any(n.endswith(".json") for n in names):
            return None
        return self.store.ledger("queue").size()


def try_ingest(store: AgentStore) -> list[EnvelopeHead] | None:
    """Ingest now if the agent lock is free; ``None`` when it is busy (the
    message stays in the Maildir for the next pass). Never waits, never
    fails the caller: the message is already durable in the inbox."""
    from holon_cli.errors import BusyError, HolonError
    from holon_cli.store.locks import locked

    try:
        with locked(store.layout.agent_lock, timeout=0, what=f"agent {store.agent_id!r}"):
            return ingest(store, load(store))
    except BusyError:
        return None
    except (HolonError, OSError):
        return None
    except Exception:  # noqa: BLE001 - the message is already acknowledged
        # whatever went wrong, the caller must still report the durable id;
        # the next tick/turn ingests (and reports) properly
        return None
