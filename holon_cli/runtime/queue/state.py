"""Queue state: the fold of the ``queue`` ledger and its snapshot.

Owns :class:`QueueState` (the in-memory fold: unfinished entries, counters,
recently settled ids), :func:`load` (snapshot plus ledger tail), and the two
write primitives every other queue module uses: ``_append`` (one ledger
record, folded at once) and ``_save`` (rewrite ``state/queue.json``).

Invariants:
- the ledger is the truth; the snapshot only caches its fold up to
  ``offset``, so a crash between an append and a snapshot write loses nothing;
- while a turn batches the store's fsyncs (``store.deferring``) the snapshot
  is rewritten only once the ledger has grown :data:`SNAPSHOT_LAG_BYTES` past
  it (every reader folds the tail anyway), and then only after the ledger's
  own appends are durable: the snapshot never runs ahead of the durable
  ledger (issue 44 item 4: a turn wrote it three times, six fsyncs);
- the snapshot holds unfinished entries only, each with its envelope head
  and ledger offset, never a body (v1 inline bodies are kept until settled);
- a snapshot whose offset lies past the ledger's end keeps its entries and
  sets ``truncated`` so the next writer rebuilds the ledger (never a silent drop);
- a priority that is not known folds to ``normal`` so the sort never wedges.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, cast

from holon_cli import clock
from holon_cli.model.envelope import (
    PRIORITY_RANK,
    AbortedMessage,
    EnvelopeError,
    QueueEntry,
    QueueRecord,
    QueueSnapshot,
    StoredQueueEntry,
    clean_head,
    envelope_head,
    is_admitted,
    is_status,
    upgrade_envelope,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import read_record, write_snapshot
from holon_cli.store.records import QUEUE_SNAPSHOT

if TYPE_CHECKING:
    from holon_cli.model.envelope import AdmittedRecord, Envelope, StatusRecord

QUEUE_SNAPSHOT_VERSION = 2  # v2: entries carry a head and a ledger offset, no body
QUEUE_RECORD_VERSION = 2
MAX_ATTEMPTS = 3
# how far the ledger may run past the snapshot while a turn batches its
# fsyncs: a load folds at most this much of the tail (about ten turns)
SNAPSHOT_LAG_BYTES = 16 * 1024
# ids of recently settled messages, a second guard against re-admitting a
# message whose inbox file survived a crash (ingestion always runs before a
# dequeue under the same lock, so the unfinished entries are the first guard);
# small, because the snapshot is rewritten on every queue change
RECENT_IDS = 256
# aborted messages `holon status` names with their reason (requeue removes one)
RECENT_ABORTED = 20
FINAL = ("processed", "aborted")
# an inbox file larger than this cannot be a message admit() wrote
# (bodies are capped at 1 MB; JSON escaping can at most ~6x that)
MAX_INBOX_FILE_BYTES = 8_000_000
LIST_STATUSES = ("queued", "dequeued", "aborted", "processed", "unfinished", "all")


class QueueState:
    # a plain class, not a dataclass: `holon enqueue` loads this module, and
    # dataclasses (with inspect) would cost it more than the rest of its work
    __slots__ = (
        "offset",
        "next_seq",
        "entries",
        "processed",
        "aborted",
        "recent_final",
        "recent_aborted",
        "truncated",
        "saved_offset",
    )

    def __init__(
        self,
        offset: int = 0,
        next_seq: int = 1,
        entries: dict[str, QueueEntry] | None = None,
        processed: int = 0,
        aborted: int = 0,
        recent_final: deque[str] | None = None,
        truncated: tuple[int, int] | None = None,
    ) -> None:
        self.offset = offset
        self.next_seq = next_seq
        self.entries: dict[str, QueueEntry] = {} if entries is None else entries
        self.processed = processed
        self.aborted = aborted
        self.recent_final: deque[str] = (
            deque(maxlen=RECENT_IDS) if recent_final is None else recent_final
        )
        # the newest aborted messages: {message_id, reason, at, kind, attempts}
        self.recent_aborted: deque[AbortedMessage] = deque(maxlen=RECENT_ABORTED)
        # set by load() when the snapshot's offset lies past the end of the ledger
        self.truncated = truncated
        # the offset of the snapshot on disk (load() and _save() set it; -1: none)
        self.saved_offset = offset

    def apply(self, rec: QueueRecord, offset: int | None = None) -> None:
        """Fold one ledger record; ``offset`` is where the record starts."""
        if is_admitted(rec):
            self._admitted(rec, offset)
        elif is_status(rec):
            self._status(rec)

    def _admitted(self, rec: AdmittedRecord, offset: int | None) -> None:
        try:
            msg = upgrade_envelope(rec["message"])
            mid = msg["id"]
        except (EnvelopeError, KeyError):
            return  # not admissible; ingestion never writes such a record
        if not isinstance(mid, str):
            return
        if rec.get("requeued"):
            if mid in self.entries:
                return
            if mid in self.recent_final:
                self.recent_final.remove(mid)
            for a in [a for a in self.recent_aborted if a.get("message_id") == mid]:
                self.recent_aborted.remove(a)
        elif mid in self.entries or mid in self.recent_final:
            return
        seq = rec.get("seq", self.next_seq)
        priority = msg.get("priority", "normal")
        if not isinstance(priority, str):
            priority = "normal"
        entry: QueueEntry = {
            "seq": seq,
            "message_id": mid,
            # a bad priority in an old record must not wedge the sort
            "priority": priority if priority in PRIORITY_RANK else "normal",
            "status": "queued",
            "attempts": 0,
            "admitted_at": rec.get("at"),
            "ledger_offset": offset,
            "head": envelope_head(msg),
        }
        self.entries[mid] = entry
        self.next_seq = max(self.next_seq, seq + 1)

    def _status(self, rec: StatusRecord) -> None:
        smid = rec["message_id"]
        entry_ = self.entries.get(smid)
        if entry_ is None:
            return
        status = rec["status"]
        if status == "dequeued":
            entry_["status"] = "dequeued"
            entry_["attempts"] = int(entry_.get("attempts", 0)) + 1
            entry_["turn_id"] = rec.get("turn_id")
            entry_["dequeued_at"] = rec.get("at")
        elif status == "interrupted":
            entry_["status"] = "queued"
            entry_["interrupted"] = int(entry_.get("interrupted", 0)) + 1
            if rec.get("counted") is False:
                # the crashed turn never reached the model: not an attempt
                entry_["attempts"] = max(0, int(entry_.get("attempts", 0)) - 1)
            entry_.pop("turn_id", None)
        elif status in FINAL:
            del self.entries[smid]
            self.recent_final.append(smid)
            if status == "processed":
                self.processed += 1
            else:
                self.aborted += 1
                head = entry_.get("head") or {}
                self.recent_aborted.append(
                    {
                        "message_id": smid,
                        "reason": str(rec.get("reason") or "unknown"),
                        "at": rec.get("at"),
                        "kind": head.get("kind"),
                        "attempts": int(entry_.get("attempts", 0)),
                    }
                )

    def pending(self) -> list[QueueEntry]:
        """Queued entries in dequeue order: priority band, then admission order."""
        q = [e for e in self.entries.values() if e["status"] == "queued"]
        q.sort(key=lambda e: (PRIORITY_RANK.get(e["priority"], 2), e["seq"]))
        return q

    def in_flight(self) -> list[QueueEntry]:
        return [e for e in self.entries.values() if e["status"] == "dequeued"]

    def to_snapshot(self) -> QueueSnapshot:
        entries: list[StoredQueueEntry] = []
        for e in sorted(self.entries.values(), key=lambda e: e["seq"]):
            stored = {k: v for k, v in e.items() if k != "envelope" or e.get("legacy_inline")}
            entries.append(cast(StoredQueueEntry, stored))
        return {
            "v": QUEUE_SNAPSHOT_VERSION,
            "offset": self.offset,
            "next_seq": self.next_seq,
            "processed": self.processed,
            "aborted": self.aborted,
            "entries": entries,
            "recent_final": list(self.recent_final),
            "recent_aborted": list(self.recent_aborted),
        }

    @classmethod
    def from_snapshot(cls, snap: QueueSnapshot) -> QueueState:
        st = cls(
            offset=snap.get("offset", 0),
            next_seq=snap.get("next_seq", 1),
            processed=snap.get("processed", 0),
            aborted=snap.get("aborted", 0),
        )
        for stored in snap.get("entries", []):
            e = _entry(stored)
            st.entries[e["message_id"]] = e
        st.recent_final.extend(snap.get("recent_final", []))
        st.recent_aborted.extend(snap.get("recent_aborted") or [])
        return st


def _entry(stored: StoredQueueEntry) -> QueueEntry:
    """A stored entry as the fold keeps it: a priority it knows; a v1
    snapshot's inline envelope upgraded (kept until the message is settled)."""
    priority = stored.get("priority")
    e: QueueEntry = {
        "seq": stored["seq"],
        "message_id": stored["message_id"],
        "status": stored["status"],
        "priority": priority
        if isinstance(priority, str) and priority in PRIORITY_RANK
        else "normal",
    }
    if "attempts" in stored:
        e["attempts"] = stored["attempts"]
    if "admitted_at" in stored:
        e["admitted_at"] = stored["admitted_at"]
    if "ledger_offset" in stored:
        e["ledger_offset"] = stored["ledger_offset"]
    if "head" in stored:
        e["head"] = clean_head(stored["head"])
    if "interrupted" in stored:
        e["interrupted"] = stored["interrupted"]
    if "turn_id" in stored:
        e["turn_id"] = stored["turn_id"]
    if "dequeued_at" in stored:
        e["dequeued_at"] = stored["dequeued_at"]
    if "envelope" in stored:
        env = upgrade_envelope(stored["envelope"])
        e["envelope"] = env
        e["legacy_inline"] = True
        e.setdefault("head", envelope_head(env))
        e.setdefault("ledger_offset", None)
    return e


def load(store: AgentStore) -> QueueState:
    """Snapshot plus ledger tail. Read-only; safe without the agent lock.

    A snapshot whose offset lies past the end of the ledger means the ledger
    was truncated or emptied behind our back: the snapshot's entries are kept
    (never silently dropped) and ``st.truncated`` is set so the next writer
    (:func:`ingest`) rebuilds the ledger from the snapshot and the inbox."""
    led = store.ledger("queue")
    snap = read_record(store.layout.queue_file, QUEUE_SNAPSHOT, max_version=QUEUE_SNAPSHOT_VERSION)
    st = QueueState.from_snapshot(snap) if snap else QueueState()
    if not snap:
        st.saved_offset = -1  # none on disk: the next save writes one
    size = led.size()
    if st.offset > size:
        for _ in led.scan(0):  # what is left must still be sound (fails loudly if not)
            pass
        st.truncated = (st.offset, size)
        for e in st.entries.values():
            e["ledger_offset"] = None  # offsets into the lost bytes mean nothing
        st.offset = size
        _warn(
            f"warning: {led.path} is shorter ({size} bytes) than the queue snapshot says "
            f"({st.truncated[0]} bytes): it was truncated or replaced; keeping the "
            f"{len(st.entries)} unfinished message(s) from {store.layout.queue_file} and the inbox"
        )
        return st
    start = st.offset
    if snap:
        st.saved_offset = st.offset
    for _, end, rec in led.scan(st.offset):
        st.apply(rec, start)
        st.offset = start = end
    return st


def _warn(text: str) -> None:
    """Loud, on stderr, even from a read-only command (runtime code does not
    print; the logging module's last-resort handler writes to stderr)."""
    import logging

    logging.getLogger("holon.queue").warning(text)


def _save(store: AgentStore, st: QueueState) -> None:
    if store.deferring:
        # (a snapshot that is missing, or ahead of the ledger, which was
        # cut, is written at once)
        lag = st.offset - st.saved_offset
        if st.truncated is None and st.saved_offset >= 0 and 0 <= lag < SNAPSHOT_LAG_BYTES:
            return  # a turn's batch: the tail is folded by every load
        store.ledger("queue").sync()  # never ahead of the durable ledger
    write_snapshot(store.layout.queue_file, st.to_snapshot())
    st.saved_offset = st.offset


def admitted_record(
    seq: int, env: Envelope, *, rebuilt: bool = False, requeued: bool = False
) -> AdmittedRecord:
    """One ``admitted`` record of the queue ledger; a flag marks how it got
    there (``rebuilt`` from the inbox, ``requeued`` by an operator)."""
    rec: AdmittedRecord = {
        "v": QUEUE_RECORD_VERSION,
        "op": "admitted",
        "seq": seq,
        "at": clock.now_iso(),
        "message": env,
    }
    if rebuilt:
        rec["rebuilt"] = True
    if requeued:
        rec["requeued"] = True
    return rec


def _append(store: AgentStore, st: QueueState, rec: QueueRecord) -> None:
    led = store.ledger("queue")
    led.append(rec)
    st.apply(rec, led.last_append_offset)
    # our append is the last line unless another writer raced us, which the
    # agent lock prevents; read the true size to stay exact either way
    st.offset = led.size()
