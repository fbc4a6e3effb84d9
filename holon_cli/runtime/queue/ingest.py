"""Queue ingestion: inbox files into the ledger, message bodies, quarantine
and rebuild after ledger loss.

Owns reading and validating inbox files (admission policy re-applied:
trust, authority and trigger kind re-derived from the origin), quarantine of
bad files, the ``inbox/cur`` body store (``_body_file``, ``load_envelope``,
``_release_body``), the ``inbox/cur`` sweep and the rebuild of a truncated
ledger from the snapshot and the inbox.

Invariants:
- every inbox file is validated before it is admitted; a file that fails is
  moved to ``inbox/quarantine/`` with an ``inbox_message_quarantined`` event,
  so one bad file never wedges the agent;
- a message is admitted at most once (unfinished entries and recently
  settled ids are both checked); the ledger record is appended before the
  file moves to ``inbox/cur``, and a crash in between is finished next time;
- ``inbox/cur`` holds exactly the bodies of unfinished messages: leftovers
  of settled ones are removed, unknown ones are re-admitted, never dropped;
- the caller of :func:`ingest` holds the agent lock.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from holon_cli import clock
from holon_cli.errors import CorruptStateError, UsageError
from holon_cli.model.envelope import (
    AUTHORITY_BY_ORIGIN,
    PRIORITY_RANK,
    TRIGGER_BY_KIND,
    TRUST_BY_ORIGIN,
    Envelope,
    EnvelopeError,
    EnvelopeHead,
    QueueEntry,
    body_text,
    check_body,
    check_kind,
    check_origin,
    envelope_head,
    upgrade_envelope,
    validate_stored,
)
from holon_cli.runtime.queue.state import (
    MAX_INBOX_FILE_BYTES,
    QUEUE_RECORD_VERSION,
    QueueState,
    _append,
    _save,
    admitted_record,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import fsync_dir

TEXT_PREVIEW_CHARS = 280  # message_admitted carries this much of the body (consoles show it)

if TYPE_CHECKING:
    from holon_cli.model.events import (
        InboxMessageCorrectedData,
        InboxMessageQuarantinedData,
        MessageAdmittedData,
        QueueLedgerTruncatedData,
        QueueRebuiltFromInboxData,
    )


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
    inline = entry.get("envelope")
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
        (
            f"the body of queued message {mid} is gone (no {_body_file(store, mid)} and no "
            f"admitted record in {led.path})"
        ),
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


def find_envelope(store: AgentStore, message_id: str) -> Envelope | None:
    """A message's envelope from its last ``admitted`` record (a full scan
    of the queue ledger: for a repair, not for a turn), else ``None``."""
    found = _find_admitted(store, message_id)
    return None if found is None else found[1]


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
    data: InboxMessageQuarantinedData = {"file": path.name, "path": str(dest), "reason": reason}
    store.emit(
        "inbox_message_quarantined",
        data,
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
            corrected: InboxMessageCorrectedData = {
                "file": path.name,
                "fields": replaced,
                "reason": (
                    "trust, authority and provenance are derived from the origin and the "
                    "admission surface, never taken from the file"
                ),
            }
            store.emit("inbox_message_corrected", corrected, message=env)
        rec = admitted_record(st.next_seq, env)
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
        data: MessageAdmittedData = {
            "queue_seq": rec.get("seq", 0),
            "kind": env.get("kind"),
            "created_at": env.get("created_at"),
            "text_preview": body_text(env.get("body"))[:TEXT_PREVIEW_CHARS],
        }
        store.emit(
            "message_admitted",
            data,
            message=env,
        )
        admitted.append(envelope_head(env))
    if moved and not store.deferring:
        # a turn batching its fsyncs leaves the moves to the page cache: a
        # move that a power loss undoes is redone from ``new/`` (the message
        # is in ``entries`` or ``recent_final``: retained or archived, never
        # admitted twice), and a body in ``cur/`` whose record was lost is
        # admitted again by ``_sweep_cur``; the queue ledger is made durable
        # by the turn's last batch
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
            admitted_record(st.next_seq, env, rebuilt=True),
        )
        readmitted.append(env["id"])
    if readmitted:
        rebuilt: QueueRebuiltFromInboxData = {
            "reason": (
                "message bodies in inbox/cur that neither the queue ledger nor its snapshot knew"
            ),
            "restored_message_ids": readmitted,
        }
        store.emit("queue_rebuilt_from_inbox", rebuilt)
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
        led.append(admitted_record(e["seq"], env, rebuilt=True))
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
            admitted_record(st.next_seq, env, rebuilt=True),
        )
        restored.append(mid)
    st.offset = store.ledger("queue").size()
    truncated: QueueLedgerTruncatedData = {
        "path": str(store.ledger("queue").path),
        "snapshot_offset": was,
        "ledger_size": now,
        "restored_message_ids": restored,
        "lost_message_ids": lost,
    }
    store.emit("queue_ledger_truncated", truncated)
