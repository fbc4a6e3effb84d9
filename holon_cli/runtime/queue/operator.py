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
from typing import TYPE_CHECKING, Any

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
        if is_admitted(rec):
            msg = rec["message"]
            try:
                head = envelope_head(upgrade_envelope(msg))
            except EnvelopeError:
                continue
            item = seen.pop(msg["id"], None) or {}
            item.update({"head": head, "status": "queued", "admitted_at": rec.get("at")})
            seen[msg["id"]] = item
        elif is_status(rec) and rec["message_id"] in seen:
            item = seen[rec["message_id"]]
            item["status"] = rec["status"]
            item["settled_at" if rec["status"] in FINAL else "status_at"] = rec.get("at")
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
