"""The agent's message queue: ingestion from the inbox, priority dequeue,
status settlement and crash replay.

Durable truth is the ``queue`` ledger:
  ``{"op": "admitted", "seq": N, "message": <envelope>}``
  ``{"op": "status", "message_id": ID, "status": dequeued|processed|aborted|interrupted}``
``state/queue.json`` is a snapshot of the fold (only unfinished entries) plus
the ledger offset it reflects; loading replays the ledger tail after that
offset, so a crash between a ledger append and a snapshot write loses
nothing and the cost of loading does not grow with history.

Entry status: ``queued`` (waiting), ``dequeued`` (a turn is working on it),
then ``processed`` or ``aborted`` (final, dropped from the snapshot).
``interrupted`` is recorded when a dequeued entry is found with no turn
running (its turn crashed); the entry goes back to ``queued`` in its original
place and is replayed once per crash, up to ``MAX_ATTEMPTS`` attempts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from holon_cli import clock
from holon_cli.model.envelope import PRIORITY_RANK
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_snapshot, write_snapshot

QUEUE_SNAPSHOT_VERSION = 1
MAX_ATTEMPTS = 3
# ids of recently settled messages, a second guard against re-admitting a
# message whose inbox file survived a crash (ingestion always runs before a
# dequeue under the same lock, so the unfinished entries are the first guard);
# small, because the snapshot is rewritten on every queue change
RECENT_IDS = 256
FINAL = ("processed", "aborted")


@dataclass
class QueueState:
    offset: int = 0
    next_seq: int = 1
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    processed: int = 0
    aborted: int = 0
    recent_final: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_IDS))

    def apply(self, rec: dict[str, Any]) -> None:
        op = rec.get("op")
        if op == "admitted":
            msg = rec["message"]
            mid = msg["id"]
            if mid in self.entries or mid in self.recent_final:
                return
            seq = int(rec.get("seq", self.next_seq))
            self.entries[mid] = {
                "seq": seq,
                "message_id": mid,
                "priority": msg.get("priority", "normal"),
                "status": "queued",
                "attempts": 0,
                "admitted_at": rec.get("at"),
                "envelope": msg,
            }
            self.next_seq = max(self.next_seq, seq + 1)
        elif op == "status":
            mid = rec["message_id"]
            entry = self.entries.get(mid)
            if entry is None:
                return
            status = rec["status"]
            if status == "dequeued":
                entry["status"] = "dequeued"
                entry["attempts"] = int(entry.get("attempts", 0)) + 1
                entry["turn_id"] = rec.get("turn_id")
                entry["dequeued_at"] = rec.get("at")
            elif status == "interrupted":
                entry["status"] = "queued"
                entry["interrupted"] = int(entry.get("interrupted", 0)) + 1
                entry.pop("turn_id", None)
            elif status in FINAL:
                del self.entries[mid]
                self.recent_final.append(mid)
                if status == "processed":
                    self.processed += 1
                else:
                    self.aborted += 1

    def pending(self) -> list[dict[str, Any]]:
        """Queued entries in dequeue order: priority band, then admission order."""
        q = [e for e in self.entries.values() if e["status"] == "queued"]
        q.sort(key=lambda e: (PRIORITY_RANK.get(e["priority"], 2), e["seq"]))
        return q

    def in_flight(self) -> list[dict[str, Any]]:
        return [e for e in self.entries.values() if e["status"] == "dequeued"]

    def to_snapshot(self) -> dict[str, Any]:
        return {
            "v": QUEUE_SNAPSHOT_VERSION,
            "offset": self.offset,
            "next_seq": self.next_seq,
            "processed": self.processed,
            "aborted": self.aborted,
            "entries": sorted(self.entries.values(), key=lambda e: e["seq"]),
            "recent_final": list(self.recent_final),
        }

    @classmethod
    def from_snapshot(cls, snap: dict[str, Any]) -> QueueState:
        st = cls(
            offset=int(snap.get("offset", 0)),
            next_seq=int(snap.get("next_seq", 1)),
            processed=int(snap.get("processed", 0)),
            aborted=int(snap.get("aborted", 0)),
        )
        for e in snap.get("entries", []):
            st.entries[e["message_id"]] = e
        st.recent_final.extend(snap.get("recent_final", []))
        return st


def load(store: AgentStore) -> QueueState:
    """Snapshot plus ledger tail. Read-only; safe without the agent lock."""
    led = store.ledger("queue")
    snap = read_snapshot(store.layout.queue_file, max_version=QUEUE_SNAPSHOT_VERSION)
    st = QueueState.from_snapshot(snap) if snap else QueueState()
    if st.offset > led.size():
        st = QueueState()  # snapshot from a different ledger: rebuild
    for _, end, rec in led.scan(st.offset):
        st.apply(rec)
        st.offset = end
    return st


def _save(store: AgentStore, st: QueueState) -> None:
    write_snapshot(store.layout.queue_file, st.to_snapshot())


def _append(store: AgentStore, st: QueueState, rec: dict[str, Any]) -> None:
    led = store.ledger("queue")
    led.append(rec)
    st.apply(rec)
    # our append is the last line unless another writer raced us, which the
    # agent lock prevents; read the true size to stay exact either way
    st.offset = led.size()


def ingest(store: AgentStore, st: QueueState) -> list[dict[str, Any]]:
    """Move delivered inbox messages into the queue ledger. Caller holds the agent lock.

    Returns the newly admitted envelopes (each also gets a ``message_admitted`` event).
    """
    admitted: list[dict[str, Any]] = []
    store.inbox.sweep_tmp()
    for path in store.inbox.pending():
        try:
            env = store.inbox.read(path)
            mid = env["id"]
        except (OSError, ValueError, KeyError) as exc:
            dest = store.inbox.quarantine(path)
            store.emit("inbox_message_rejected", {"path": str(dest), "reason": str(exc)})
            continue
        if mid not in st.entries and mid not in st.recent_final:
            rec = {
                "v": 1,
                "op": "admitted",
                "seq": st.next_seq,
                "at": clock.now_iso(),
                "message": env,
            }
            _append(store, st, rec)
            store.emit(
                "message_admitted",
                {
                    "queue_seq": rec["seq"],
                    "kind": env.get("kind"),
                    "created_at": env.get("createdAt"),
                },
                message=env,
            )
            admitted.append(env)
        store.inbox.archive(path)
    if admitted:
        _save(store, st)
    return admitted


def recover(store: AgentStore, st: QueueState) -> list[dict[str, Any]]:
    """Requeue entries whose turn died. Caller holds the agent lock *and* the turn lock
    (so no live turn owns a dequeued entry). Entries past ``MAX_ATTEMPTS`` are aborted."""
    changed: list[dict[str, Any]] = []
    for entry in list(st.in_flight()):
        mid = entry["message_id"]
        env = entry["envelope"]
        if int(entry.get("attempts", 0)) >= MAX_ATTEMPTS:
            set_status(store, st, mid, "aborted", reason="max_attempts_exceeded", save=False)
            store.emit(
                "runtime_error",
                {
                    "error": f"message {mid} aborted after {MAX_ATTEMPTS} interrupted attempts",
                    "kind": "replay_limit",
                },
                message=env,
            )
        else:
            set_status(store, st, mid, "interrupted", reason="turn_crashed", save=False)
            store.emit("message_replayed", {"attempts": entry.get("attempts", 0)}, message=env)
        changed.append(entry)
    if changed:
        _save(store, st)
    return changed


def set_status(
    store: AgentStore,
    st: QueueState,
    message_id: str,
    status: str,
    *,
    turn_id: str | None = None,
    reason: str | None = None,
    save: bool = True,
) -> None:
    rec: dict[str, Any] = {
        "v": 1,
        "op": "status",
        "message_id": message_id,
        "status": status,
        "at": clock.now_iso(),
    }
    if turn_id:
        rec["turn_id"] = turn_id
    if reason:
        rec["reason"] = reason
    _append(store, st, rec)
    if save:
        _save(store, st)


def dequeue_next(store: AgentStore, turn_id: str) -> dict[str, Any] | None:
    """The turn engine's dequeue step: ingest, recover, take the head of the queue.

    The caller must hold the agent's turn lock. Returns the entry (with its
    envelope) marked ``dequeued``, or ``None`` when nothing is queued.
    """
    with store.lock():
        st = load(store)
        ingest(store, st)
        recover(store, st)
        pending = st.pending()
        if not pending:
            return None
        head = pending[0]
        set_status(store, st, head["message_id"], "dequeued", turn_id=turn_id)
        return st.entries[head["message_id"]]


def settle(
    store: AgentStore,
    message_id: str,
    status: str,
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


def take_interjects(store: AgentStore, turn_id: str) -> list[dict[str, Any]]:
    """At a provider/tool safe point: dequeue trusted operator prompts queued with
    ``interject`` priority so the running turn can see them now."""
    with store.lock():
        st = load(store)
        ingest(store, st)
        out = []
        for e in st.pending():
            env = e["envelope"]
            if e["priority"] == "interject" and env.get("authorityClass") == "operator_instruction":
                set_status(
                    store,
                    st,
                    e["message_id"],
                    "dequeued",
                    turn_id=turn_id,
                    reason="interject",
                    save=False,
                )
                out.append(st.entries[e["message_id"]])
        if out:
            _save(store, st)
        return out
