"""The agent's message queue: ingestion from the inbox, priority dequeue,
status settlement, crash replay and operator requeue.

Durable truth is the ``queue`` ledger:
  ``{"op": "admitted", "seq": N, "message": <envelope>}`` (v2: snake_case;
  v1 camelCase records are upgraded when read)
  ``{"op": "status", "message_id": ID, "status": dequeued|processed|aborted|interrupted}``
``state/queue.json`` is a snapshot of the fold (only unfinished entries) plus
the ledger offset it reflects; loading replays the ledger tail after that
offset, so a crash between a ledger append and a snapshot write loses
nothing and the cost of loading does not grow with history.

Bodies stay out of the snapshot: an entry keeps the envelope's head (no
body) and the byte offset of its ``admitted`` record. The full envelope of an
unfinished message also stays in ``inbox/cur/<id>.json`` (moved there from
``inbox/new`` at ingestion, removed when the message is settled), so a turn
reads exactly one message body, and a truncated ledger can be rebuilt from
the snapshot and the inbox. Memory and time per turn stay flat with the
size of the backlog.

Entry status: ``queued`` (waiting), ``dequeued`` (a turn is working on it),
then ``processed`` or ``aborted`` (final, dropped from the snapshot).
``interrupted`` is recorded when a dequeued entry is found with no turn
running (its turn crashed); the entry goes back to ``queued`` in its original
place and is replayed once per crash, up to ``MAX_ATTEMPTS`` attempts.
An aborted message can be re-admitted by an operator (``holon queue
requeue``): a new ``admitted`` record with ``requeued: true``.

Ingestion validates every inbox file through the admission policy
(re-deriving trust and authority from the origin and the admission surface);
a file that fails is moved to ``inbox/quarantine/`` with an
``inbox_message_quarantined`` event naming the file and the reason, so one
bad file never wedges the agent.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from holon_cli import clock
from holon_cli.errors import CorruptStateError, NotFoundError, RejectedError, UsageError
from holon_cli.model.envelope import (
    AUTHORITY_BY_ORIGIN,
    PRIORITY_RANK,
    TRIGGER_BY_KIND,
    TRUST_BY_ORIGIN,
    Envelope,
    EnvelopeError,
    EnvelopeHead,
    QueueEntry,
    QueueSnapshot,
    check_body,
    check_kind,
    check_origin,
    envelope_head,
    upgrade_envelope,
    validate_stored,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import fsync_dir, read_snapshot, write_snapshot

QUEUE_SNAPSHOT_VERSION = 2  # v2: entries carry a head and a ledger offset, no body
QUEUE_RECORD_VERSION = 2
MAX_ATTEMPTS = 3
# ids of recently settled messages, a second guard against re-admitting a
# message whose inbox file survived a crash (ingestion always runs before a
# dequeue under the same lock, so the unfinished entries are the first guard);
# small, because the snapshot is rewritten on every queue change
RECENT_IDS = 256
FINAL = ("processed", "aborted")
# an inbox file larger than this cannot be a message admit() wrote
# (bodies are capped at 1 MB; JSON escaping can at most ~6x that)
MAX_INBOX_FILE_BYTES = 8_000_000
LIST_STATUSES = ("queued", "dequeued", "aborted", "processed", "unfinished", "all")


@dataclass
class QueueState:
    offset: int = 0
    next_seq: int = 1
    entries: dict[str, QueueEntry] = field(default_factory=dict)
    processed: int = 0
    aborted: int = 0
    recent_final: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_IDS))
    # set by load() when the snapshot's offset lies past the end of the ledger
    truncated: tuple[int, int] | None = None

    def apply(self, rec: dict[str, Any], offset: int | None = None) -> None:
        """Fold one ledger record; ``offset`` is where the record starts."""
        op = rec.get("op")
        if op == "admitted":
            try:
                msg = upgrade_envelope(rec.get("message"))
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
            elif mid in self.entries or mid in self.recent_final:
                return
            seq = rec.get("seq", self.next_seq)
            seq = seq if isinstance(seq, int) else self.next_seq
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
        elif op == "status":
            smid = rec.get("message_id")
            entry_ = self.entries.get(smid) if isinstance(smid, str) else None
            if entry_ is None or not isinstance(smid, str):
                return
            status = rec.get("status")
            if status == "dequeued":
                entry_["status"] = "dequeued"
                entry_["attempts"] = int(entry_.get("attempts", 0)) + 1
                entry_["turn_id"] = rec.get("turn_id")
                entry_["dequeued_at"] = rec.get("at")
            elif status == "interrupted":
                entry_["status"] = "queued"
                entry_["interrupted"] = int(entry_.get("interrupted", 0)) + 1
                entry_.pop("turn_id", None)
            elif status in FINAL:
                del self.entries[smid]
                self.recent_final.append(smid)
                if status == "processed":
                    self.processed += 1
                else:
                    self.aborted += 1

    def pending(self) -> list[QueueEntry]:
        """Queued entries in dequeue order: priority band, then admission order."""
        q = [e for e in self.entries.values() if e["status"] == "queued"]
        q.sort(key=lambda e: (PRIORITY_RANK.get(e["priority"], 2), e["seq"]))
        return q

    def in_flight(self) -> list[QueueEntry]:
        return [e for e in self.entries.values() if e["status"] == "dequeued"]

    def to_snapshot(self) -> QueueSnapshot:
        entries = []
        for e in sorted(self.entries.values(), key=lambda e: e["seq"]):
            e = cast(QueueEntry, {k: v for k, v in e.items() if k != "envelope" or _legacy(e)})
            entries.append(e)
        return {
            "v": QUEUE_SNAPSHOT_VERSION,
            "offset": self.offset,
            "next_seq": self.next_seq,
            "processed": self.processed,
            "aborted": self.aborted,
            "entries": entries,
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
            if "envelope" in e:  # v1 snapshot: the body is inline; keep it until settled
                env = upgrade_envelope(e["envelope"])
                e["envelope"] = env
                e["legacy_inline"] = True
                e.setdefault("head", envelope_head(env))
                e.setdefault("ledger_offset", None)
            if not isinstance(e.get("priority"), str) or e["priority"] not in PRIORITY_RANK:
                e["priority"] = "normal"
            st.entries[e["message_id"]] = cast(QueueEntry, e)
        st.recent_final.extend(snap.get("recent_final", []))
        return st


def _legacy(e: QueueEntry) -> bool:
    return bool(cast(dict[str, Any], e).get("legacy_inline"))


def load(store: AgentStore) -> QueueState:
    """Snapshot plus ledger tail. Read-only; safe without the agent lock.

    A snapshot whose offset lies past the end of the ledger means the ledger
    was truncated or emptied behind our back: the snapshot's entries are kept
    (never silently dropped) and ``st.truncated`` is set so the next writer
    (:func:`ingest`) rebuilds the ledger from the snapshot and the inbox."""
    led = store.ledger("queue")
    snap = read_snapshot(store.layout.queue_file, max_version=QUEUE_SNAPSHOT_VERSION)
    st = QueueState.from_snapshot(snap) if snap else QueueState()
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
    write_snapshot(store.layout.queue_file, cast(dict[str, Any], st.to_snapshot()))


def _append(store: AgentStore, st: QueueState, rec: dict[str, Any]) -> None:
    led = store.ledger("queue")
    led.append(rec)
    st.apply(rec, led.last_append_offset)
    # our append is the last line unless another writer raced us, which the
    # agent lock prevents; read the true size to stay exact either way
    st.offset = led.size()


# ------------------------------------------------------------------ bodies


def _body_file(store: AgentStore, message_id: str) -> Path:
    return store.inbox.cur / f"{message_id}.json"


def _usable(raw: Any) -> Envelope:
    """A stored envelope as a turn may see it: upgraded, body shape checked,
    trust, authority and trigger kind re-derived from the origin (whatever a
    file says). Raises :class:`EnvelopeError`."""
    env = upgrade_envelope(raw)
    try:
        check_body(env.get("body"))
        origin = check_origin(env.get("origin"))
        kind = check_kind(env.get("kind"))
    except UsageError as exc:
        raise EnvelopeError(exc.message) from None
    okind = origin["kind"]
    env["origin"] = origin
    env["trust"] = TRUST_BY_ORIGIN[okind]
    env["authority_class"] = AUTHORITY_BY_ORIGIN[okind]
    env["trigger_kind"] = TRIGGER_BY_KIND[kind]
    if not isinstance(env.get("priority"), str) or env["priority"] not in PRIORITY_RANK:
        env["priority"] = "normal"
    return env


def load_envelope(store: AgentStore, entry: QueueEntry) -> Envelope:
    """The full envelope of an unfinished entry: from ``inbox/cur``, else
    from its ``admitted`` record in the ledger. Reads one message. Raises
    :class:`CorruptStateError` (or :class:`EnvelopeError` for an unusable
    one) when no copy can be used."""
    inline = cast(dict[str, Any], entry).get("envelope")
    if inline is not None:
        return _usable(inline)
    mid = entry["message_id"]
    try:
        return _usable(store.inbox.read(_body_file(store, mid)))
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        pass  # damaged copy: the ledger holds the same envelope
    off = entry.get("ledger_offset")
    led = store.ledger("queue")
    if isinstance(off, int):
        rec = led.read_at(off)
        if rec is not None and rec.get("op") == "admitted":
            msg = rec.get("message")
            if isinstance(msg, dict) and msg.get("id") == mid:
                return _usable(msg)
    found = _find_admitted(store, mid)
    if found is not None:
        return _usable(found[1])
    raise CorruptStateError(
        f"the body of queued message {mid} is gone (no {_body_file(store, mid)} and no admitted record in {led.path})",
        hint="the message cannot be run; it is aborted. Check `holon queue list --status aborted`",
        details={"message_id": mid},
    )


def _find_admitted(store: AgentStore, message_id: str) -> tuple[int, Envelope] | None:
    """The last ``admitted`` record of ``message_id`` in the ledger (a full scan)."""
    led = store.ledger("queue")
    found: tuple[int, Envelope] | None = None
    start = 0
    for _, end, rec in led.scan(0):
        if rec.get("op") == "admitted":
            msg = rec.get("message")
            if isinstance(msg, dict) and msg.get("id") == message_id:
                try:
                    found = (start, upgrade_envelope(msg))
                except EnvelopeError:
                    pass
        start = end
    return found


def _release_body(store: AgentStore, message_id: str) -> None:
    try:
        os.unlink(_body_file(store, message_id))
    except FileNotFoundError:
        pass


def _with_envelope(store: AgentStore, entry: QueueEntry) -> QueueEntry:
    out = cast(QueueEntry, dict(entry))
    out["envelope"] = load_envelope(store, entry)
    return out


# ------------------------------------------------------------------ ingest


def _quarantine(store: AgentStore, path: Path, reason: str) -> None:
    dest = store.inbox.quarantine(path, reason)
    store.emit(
        "inbox_message_quarantined",
        {"file": path.name, "path": str(dest), "reason": reason},
    )


def _read_inbox_file(store: AgentStore, path: Path) -> tuple[Envelope, list[str]]:
    size = path.stat().st_size
    if size > MAX_INBOX_FILE_BYTES:
        raise EnvelopeError(f"file is {size} bytes, larger than any admitted message")
    try:
        raw = store.inbox.read(path)
    except (UnicodeDecodeError, ValueError) as exc:
        raise EnvelopeError(f"not a JSON object ({exc.__class__.__name__}: {exc})") from None
    env, replaced = validate_stored(raw)
    if env["agent_id"] != store.agent_id:
        raise EnvelopeError(
            f"agent_id {env['agent_id']!r} does not match this inbox's agent {store.agent_id!r}"
        )
    if path.name != f"{env['id']}.json":
        raise EnvelopeError(f"file name does not match the message id {env['id']!r}")
    return env, replaced


def ingest(store: AgentStore, st: QueueState) -> list[EnvelopeHead]:
    """Move delivered inbox messages into the queue ledger. Caller holds the agent lock.

    Every file is validated first; what fails is quarantined with an event.
    Returns the heads (envelopes without bodies: memory stays flat however
    large the batch) of the newly admitted messages; each also gets a
    ``message_admitted`` event.
    """
    admitted: list[EnvelopeHead] = []
    changed = False
    if st.truncated is not None:
        _rebuild(store, st)
        changed = True
    store.inbox.sweep_tmp()
    if _sweep_cur(store, st):
        changed = True
    moved = False
    for path in store.inbox.pending():
        try:
            env, replaced = _read_inbox_file(store, path)
        except FileNotFoundError:
            continue  # another ingester took it
        except (OSError, EnvelopeError) as exc:
            _quarantine(store, path, str(exc))
            continue
        mid = env["id"]
        if mid in st.entries:
            # ledger append survived, the move to cur/ did not: finish it
            store.inbox.retain(path)
            moved = True
            continue
        if mid in st.recent_final:
            store.inbox.archive(path)
            continue
        if replaced:
            store.emit(
                "inbox_message_corrected",
                {
                    "file": path.name,
                    "fields": replaced,
                    "reason": "trust, authority and provenance are derived from the origin and the admission surface, never taken from the file",
                },
                message=env,
            )
        rec: dict[str, Any] = {
            "v": QUEUE_RECORD_VERSION,
            "op": "admitted",
            "seq": st.next_seq,
            "at": clock.now_iso(),
            "message": env,
        }
        _append(store, st, rec)
        if replaced:  # cur/ keeps the corrected envelope, never the claim
            from holon_cli.store.fsio import atomic_write_bytes, dumps

            store.inbox.cur.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(
                _body_file(store, mid), (dumps(env) + "\n").encode("utf-8"), mode=0o600
            )
            store.inbox.archive(path)
        else:
            store.inbox.retain(path)
        moved = True
        changed = True
        store.emit(
            "message_admitted",
            {
                "queue_seq": rec["seq"],
                "kind": env.get("kind"),
                "created_at": env.get("created_at"),
            },
            message=env,
        )
        admitted.append(envelope_head(env))
    if moved:
        fsync_dir(store.inbox.cur)
    if changed:
        _save(store, st)
    return admitted


def _sweep_cur(store: AgentStore, st: QueueState) -> bool:
    """``inbox/cur`` must hold exactly the bodies of unfinished messages: a
    leftover of a settled one (killed between settle and unlink) is removed;
    a body the queue does not know at all (its ledger and snapshot both lost)
    is admitted again, never dropped. Returns whether the queue changed."""
    try:
        names = os.listdir(store.inbox.cur)
    except FileNotFoundError:
        return False
    orphans = []
    for name in names:
        if not name.endswith(".json"):
            continue
        mid = name[: -len(".json")]
        if mid in st.entries:
            continue
        if mid in st.recent_final:
            _release_body(store, mid)
        else:
            orphans.append(store.inbox.cur / name)
    readmitted = []
    for p in sorted(orphans):
        try:
            env, _ = _read_inbox_file(store, p)
        except (OSError, EnvelopeError) as exc:
            _quarantine(store, p, str(exc))
            continue
        _append(
            store,
            st,
            {
                "v": QUEUE_RECORD_VERSION,
                "op": "admitted",
                "seq": st.next_seq,
                "at": clock.now_iso(),
                "message": env,
                "rebuilt": True,
            },
        )
        readmitted.append(env["id"])
    if readmitted:
        store.emit(
            "queue_rebuilt_from_inbox",
            {
                "reason": "message bodies in inbox/cur that neither the queue ledger nor its snapshot knew",
                "restored_message_ids": readmitted,
            },
        )
    return bool(readmitted)


def _rebuild(store: AgentStore, st: QueueState) -> None:
    """The ledger lost bytes the snapshot had folded: write every unfinished
    message (from the snapshot + ``inbox/cur``) back into the ledger, and
    re-admit ``inbox/cur`` files the snapshot does not know. Loud: an event,
    a warning on stderr (from :func:`load`), and a ``home check`` problem
    until this has run."""
    assert st.truncated is not None
    was, now = st.truncated
    st.truncated = None
    restored: list[str] = []
    lost: list[str] = []
    for e in sorted(list(st.entries.values()), key=lambda e: e["seq"]):
        mid = e["message_id"]
        try:
            env = load_envelope(store, e)
        except CorruptStateError:
            lost.append(mid)
            del st.entries[mid]
            continue
        led = store.ledger("queue")
        led.append(
            {
                "v": QUEUE_RECORD_VERSION,
                "op": "admitted",
                "seq": e["seq"],
                "at": clock.now_iso(),
                "message": env,
                "rebuilt": True,
            }
        )
        e["ledger_offset"] = led.last_append_offset
        if e["status"] == "dequeued":  # let recovery decide, as after any crash
            led.append(
                {
                    "v": QUEUE_RECORD_VERSION,
                    "op": "status",
                    "message_id": mid,
                    "status": "dequeued",
                    "at": clock.now_iso(),
                    "reason": "rebuilt",
                }
            )
        restored.append(mid)
    # bodies the snapshot never saw (ingested after its last write)
    for p in sorted(store.inbox.cur.glob("*.json")) if store.inbox.cur.is_dir() else []:
        mid = p.name[: -len(".json")]
        if mid in st.entries or mid in st.recent_final:
            continue
        try:
            env, _ = _read_inbox_file(store, p)
        except (OSError, EnvelopeError) as exc:
            _quarantine(store, p, str(exc))
            continue
        _append(
            store,
            st,
            {
                "v": QUEUE_RECORD_VERSION,
                "op": "admitted",
                "seq": st.next_seq,
                "at": clock.now_iso(),
                "message": env,
                "rebuilt": True,
            },
        )
        restored.append(mid)
    st.offset = store.ledger("queue").size()
    store.emit(
        "queue_ledger_truncated",
        {
            "path": str(store.ledger("queue").path),
            "snapshot_offset": was,
            "ledger_size": now,
            "restored_message_ids": restored,
            "lost_message_ids": lost,
        },
    )


# ------------------------------------------------------------------ steps


def recover(store: AgentStore, st: QueueState) -> list[QueueEntry]:
    """Requeue entries whose turn died. Caller holds the agent lock *and* the turn lock
    (so no live turn owns a dequeued entry). Entries past ``MAX_ATTEMPTS`` are aborted."""
    changed: list[QueueEntry] = []
    for entry in list(st.in_flight()):
        mid = entry["message_id"]
        head = entry["head"]
        if int(entry.get("attempts", 0)) >= MAX_ATTEMPTS:
            set_status(store, st, mid, "aborted", reason="max_attempts_exceeded", save=False)
            store.emit(
                "runtime_error",
                {
                    "error": f"message {mid} aborted after {MAX_ATTEMPTS} interrupted attempts",
                    "kind": "replay_limit",
                    "hint": f"re-admit it with `holon queue requeue {mid} --agent {store.agent_id}`",
                },
                message=head,
            )
        else:
            set_status(store, st, mid, "interrupted", reason="turn_crashed", save=False)
            store.emit("message_replayed", {"attempts": entry.get("attempts", 0)}, message=head)
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
        "v": QUEUE_RECORD_VERSION,
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
    if status in FINAL:
        _release_body(store, message_id)


def dequeue_next(store: AgentStore, turn_id: str) -> QueueEntry | None:
    """The turn engine's dequeue step: ingest, recover, take the head of the queue.

    The caller must hold the agent's turn lock. Returns the entry (with its
    full ``envelope`` loaded) marked ``dequeued``, or ``None`` when nothing is
    queued. A message whose body cannot be found anywhere is aborted with an
    event instead of wedging the queue."""
    with store.lock():
        st = load(store)
        ingest(store, st)
        recover(store, st)
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
                store.emit(
                    "runtime_error",
                    {"error": str(exc), "kind": "message_unreadable"},
                    message=head["head"],
                )
                continue
            set_status(store, st, head["message_id"], "dequeued", turn_id=turn_id)
            entry.update(st.entries[head["message_id"]])
            return entry


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


def try_ingest(store: AgentStore) -> list[EnvelopeHead] | None:
    """Ingest now if the agent lock is free; ``None`` when it is busy (the
    message stays in the Maildir for the next pass). Never waits, never
    fails the caller: the message is already durable in the inbox."""
    from holon_cli.errors import BusyError, HolonError
    from holon_cli.store.ledger import flocked

    try:
        with flocked(store.layout.agent_lock, timeout=0, what=f"agent {store.agent_id!r}"):
            return ingest(store, load(store))
    except BusyError:
        return None
    except (HolonError, OSError):
        return None
    except Exception:  # noqa: BLE001 - the message is already acknowledged
        # whatever went wrong, the caller must still report the durable id;
        # the next tick/turn ingests (and reports) properly
        return None


# ------------------------------------------------------------------ operator


def _summary(
    mid: str, status: str, head: EnvelopeHead | dict[str, Any], **extra: Any
) -> dict[str, Any]:
    from holon_cli.model.envelope import origin_label

    out: dict[str, Any] = {
        "message_id": mid,
        "status": status,
        "kind": head.get("kind"),
        "origin": origin_label(head.get("origin")),
        "authority_class": head.get("authority_class"),
        "priority": head.get("priority"),
        "created_at": head.get("created_at"),
        "work_item_id": head.get("work_item_id"),
    }
    out.update(extra)
    return out


def _history(store: AgentStore) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every message the ledger knows, with its last status (a full scan)."""
    seen: dict[str, dict[str, Any]] = {}
    for _, _, rec in store.ledger("queue").scan(0):
        op = rec.get("op")
        if op == "admitted":
            msg = rec.get("message")
            if not isinstance(msg, dict) or not isinstance(msg.get("id"), str):
                continue
            try:
                head = envelope_head(upgrade_envelope(msg))
            except EnvelopeError:
                continue
            item = seen.pop(msg["id"], None) or {}
            item.update({"head": head, "status": "queued", "admitted_at": rec.get("at")})
            seen[msg["id"]] = item
        elif op == "status" and rec.get("message_id") in seen:
            item = seen[rec["message_id"]]
            item["status"] = rec.get("status")
            item["settled_at" if rec.get("status") in FINAL else "status_at"] = rec.get("at")
            if rec.get("reason"):
                item["reason"] = rec.get("reason")
    yield from seen.items()


def list_messages(
    store: AgentStore, *, status: str = "unfinished", limit: int | None = None
) -> list[dict[str, Any]]:
    """Queue entries for ``holon queue list``. ``unfinished`` (default) is
    queued + dequeued + aborted: everything an operator may want to act on."""
    if status not in LIST_STATUSES:
        raise UsageError(
            f"unknown status {status!r}", hint=f"use one of: {', '.join(LIST_STATUSES)}"
        )
    if limit is not None and limit < 0:
        raise UsageError("--limit must be zero or positive")
    with_final = status in ("aborted", "processed", "unfinished", "all")
    out: list[dict[str, Any]] = []
    st = load(store)
    live = {
        e["message_id"]: _summary(
            e["message_id"],
            e["status"],
            e["head"],
            seq=e["seq"],
            attempts=e.get("attempts", 0),
            interrupted=e.get("interrupted", 0),
            admitted_at=e.get("admitted_at"),
        )
        for e in sorted(st.entries.values(), key=lambda e: e["seq"])
    }
    if with_final:
        for mid, item in _history(store):
            if mid in live:
                continue
            if item["status"] in FINAL:
                out.append(
                    _summary(
                        mid,
                        item["status"],
                        item["head"],
                        admitted_at=item.get("admitted_at"),
                        settled_at=item.get("settled_at"),
                        reason=item.get("reason"),
                    )
                )
    out.extend(live.values())
    for p in store.inbox.pending():  # delivered, not ingested yet
        mid = p.name[: -len(".json")]
        if mid not in live and mid not in st.recent_final:
            out.append({"message_id": mid, "status": "queued", "in_inbox": True})

    def keep(item: dict[str, Any]) -> bool:
        s = item["status"]
        if status == "all":
            return True
        if status == "unfinished":
            return s in ("queued", "dequeued", "aborted")
        return bool(s == status)

    out = [o for o in out if keep(o)]
    if limit is not None:
        out = out[-limit:] if limit else []
    return out


def requeue(store: AgentStore, message_id: str) -> Envelope:
    """Re-admit an aborted message (``holon queue requeue``). Unknown id: not
    found (3); a message that is queued, running or processed: rejected (4)."""
    if not isinstance(message_id, str) or not message_id:
        raise UsageError("a message id is required", hint="see `holon queue list`")
    with store.lock():
        st = load(store)
        ingest(store, st)
        entry = st.entries.get(message_id)
        if entry is not None:
            raise RejectedError(
                f"message {message_id} is {entry['status']}, not aborted: nothing to requeue",
                hint="only aborted messages can be requeued; a queued one runs at the next `holon turn`",
                kind="not_requeueable",
            )
        status: str | None = None
        for mid, item in _history(store):
            if mid == message_id:
                status = item["status"]
        if status is None:
            raise NotFoundError(
                f"no message {message_id} in agent {store.agent_id!r}'s queue",
                hint=f"list messages with `holon queue list --agent {store.agent_id} --status all`",
                kind="message_not_found",
            )
        if status != "aborted":
            raise RejectedError(
                f"message {message_id} is {status}, not aborted: nothing to requeue",
                hint="only aborted messages can be requeued; send a new message with `holon enqueue`",
                kind="not_requeueable",
            )
        found = _find_admitted(store, message_id)
        if found is None:  # pragma: no cover - _history saw it
            raise NotFoundError(f"no admitted record for {message_id}")
        env = found[1]
        # the body goes back to inbox/cur first, then the ledger record
        from holon_cli.store.fsio import atomic_write_bytes, dumps

        store.inbox.ensure()
        atomic_write_bytes(
            _body_file(store, message_id), (dumps(env) + "\n").encode("utf-8"), mode=0o600
        )
        _append(
            store,
            st,
            {
                "v": QUEUE_RECORD_VERSION,
                "op": "admitted",
                "seq": st.next_seq,
                "at": clock.now_iso(),
                "message": env,
                "requeued": True,
            },
        )
        _save(store, st)
        store.emit("message_requeued", {"queue_seq": st.next_seq - 1}, message=env)
        return env
