"""Operator views and actions on the queue: ``holon queue list`` and
``holon queue requeue``.

Invariants:
- listing is read-only and safe without the agent lock; settled messages
  come from a full ledger scan, unfinished ones from the fold, and files
  delivered to the inbox but not yet ingested are listed as ``queued``;
- only an ``aborted`` message can be requeued: its body goes back to
  ``inbox/cur`` first, then a new ``admitted`` record with ``requeued: true``;
  an unknown id is not found (exit 3), any other status is rejected (exit 4).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NotRequired, TypedDict

from holon_cli.errors import NotFoundError, RejectedError, UsageError
from holon_cli.model.envelope import (
    Envelope,
    EnvelopeError,
    EnvelopeHead,
    envelope_head,
    is_admitted,
    is_status,
    upgrade_envelope,
)
from holon_cli.runtime.queue.ingest import _body_file, _find_admitted, ingest
from holon_cli.runtime.queue.state import (
    FINAL,
    LIST_STATUSES,
    _append,
    _save,
    admitted_record,
    load,
)
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.events import MessageRequeuedData


class MessageRow(TypedDict):
    """One message as ``holon queue list`` shows it."""

    message_id: str
    status: str
    kind: NotRequired[str | None]
    origin: NotRequired[str]
    authority_class: NotRequired[str | None]
    priority: NotRequired[str | None]
    created_at: NotRequired[str | None]
    work_item_id: NotRequired[str | None]
    seq: NotRequired[int]  # unfinished: its place in the queue
    attempts: NotRequired[int]
    interrupted: NotRequired[int]
    admitted_at: NotRequired[str | None]
    settled_at: NotRequired[str | None]  # settled: when, and why
    reason: NotRequired[str | None]
    in_inbox: NotRequired[bool]  # delivered, not ingested yet


class _Known(TypedDict):
    """A message the queue ledger knows, with its last status."""

    head: EnvelopeHead
    status: str
    admitted_at: str | None
    settled_at: NotRequired[str | None]
    status_at: NotRequired[str | None]
    reason: NotRequired[str | None]


def _summary(mid: str, status: str, head: EnvelopeHead) -> MessageRow:
    from holon_cli.model.envelope import origin_label

    return {
        "message_id": mid,
        "status": status,
        "kind": head.get("kind"),
        "origin": origin_label(head.get("origin")),
        "authority_class": head.get("authority_class"),
        "priority": head.get("priority"),
        "created_at": head.get("created_at"),
        "work_item_id": head.get("work_item_id"),
    }


def _history(store: AgentStore) -> Iterator[tuple[str, _Known]]:
    """Every message the ledger knows, with its last status (a full scan)."""
    seen: dict[str, _Known] = {}
    for _, _, rec in store.ledger("queue").scan(0):
        if is_admitted(rec):
            msg = rec["message"]
            try:
                head = envelope_head(upgrade_envelope(msg))
            except EnvelopeError:
                continue
            known = seen.pop(msg["id"], None)
            item: _Known = {"head": head, "status": "queued", "admitted_at": rec.get("at")}
            if known is not None:  # admitted again (requeued): keep what the first one had
                item = {**known, **item}
            seen[msg["id"]] = item
        elif is_status(rec) and rec["message_id"] in seen:
            item = seen[rec["message_id"]]
            item["status"] = rec["status"]
            if rec["status"] in FINAL:
                item["settled_at"] = rec.get("at")
            else:
                item["status_at"] = rec.get("at")
            if rec.get("reason"):
                item["reason"] = rec.get("reason")
    yield from seen.items()


def list_messages(
    store: AgentStore, *, status: str = "unfinished", limit: int | None = None
) -> list[MessageRow]:
    """Queue entries for ``holon queue list``. ``unfinished`` (default) is
    queued + dequeued + aborted: everything an operator may want to act on."""
    if status not in LIST_STATUSES:
        raise UsageError(
            f"unknown status {status!r}", hint=f"use one of: {', '.join(LIST_STATUSES)}"
        )
    if limit is not None and limit < 0:
        raise UsageError("--limit must be zero or positive")
    with_final = status in ("aborted", "processed", "unfinished", "all")
    out: list[MessageRow] = []
    st = load(store)
    live: dict[str, MessageRow] = {}
    for e in sorted(st.entries.values(), key=lambda e: e["seq"]):
        row = _summary(e["message_id"], e["status"], e["head"])
        row["seq"] = e["seq"]
        row["attempts"] = e.get("attempts", 0)
        row["interrupted"] = e.get("interrupted", 0)
        row["admitted_at"] = e.get("admitted_at")
        live[e["message_id"]] = row
    if with_final:
        for mid, item in _history(store):
            if mid in live:
                continue
            if item["status"] in FINAL:
                row = _summary(mid, item["status"], item["head"])
                row["admitted_at"] = item.get("admitted_at")
                row["settled_at"] = item.get("settled_at")
                row["reason"] = item.get("reason")
                out.append(row)
    out.extend(live.values())
    for p in store.inbox.pending():  # delivered, not ingested yet
        mid = p.name[: -len(".json")]
        if mid not in live and mid not in st.recent_final:
            out.append({"message_id": mid, "status": "queued", "in_inbox": True})

    def keep(item: MessageRow) -> bool:
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
                hint=(
                    "only aborted messages can be requeued; a queued one runs at the next "
                    "`holon turn`"
                ),
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
                hint=(
                    "only aborted messages can be requeued; send a new message with `holon enqueue`"
                ),
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
            admitted_record(st.next_seq, env, requeued=True),
        )
        _save(store, st)
        requeued: MessageRequeuedData = {"queue_seq": st.next_seq - 1}
        store.emit("message_requeued", requeued, message=env)
        return env
