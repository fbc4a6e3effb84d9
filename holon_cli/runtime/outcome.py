"""The outcome of one message, and waiting for it (``holon enqueue --wait``).

A message is settled when the ``queue`` ledger records its final status
(``processed`` or ``aborted``). The turn that settled it writes its brief
and the transcript's ``turn_terminal`` *before* that status record (see
:mod:`holon_cli.runtime.turn.settle`), so once the status is seen the rest
of the outcome is already on disk.

Whoever settles the message (``serve``, a cron ``holon turn``, another
``turn`` or ``run`` in a terminal) does not matter: only ledgers are read,
from offsets taken before the message was admitted (:func:`marks`), so each
poll reads only the bytes appended since the last one. Waiting polls the
size of the queue ledger with a growing interval (20 ms up to 0.5 s); a poll
that finds the file unchanged costs one ``stat``. No lock is taken.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypedDict

from holon_cli.model.envelope import is_status
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.envelope import StatusRecord
    from holon_cli.model.turn import BriefRecord

FIRST_POLL_S = 0.02
MAX_POLL_S = 0.5


class Marks(NamedTuple):
    """Ledger sizes before a message was admitted: nothing about it lies before."""

    queue: int = 0
    transcript: int = 0
    briefs: int = 0


class MessageOutcome(TypedDict):
    message_id: str
    status: str  # processed | aborted
    reason: str | None
    turn_id: str | None
    final_text: str
    brief: BriefRecord | None


def marks(store: AgentStore) -> Marks:
    return Marks(
        store.ledger("queue").size(),
        store.ledger("transcript").size(),
        store.ledger("briefs").size(),
    )


def _start(store: AgentStore, name: str, offset: int) -> int:
    # a ledger shorter than the mark was replaced (compaction, restore): read it all
    return offset if store.ledger(name).size() >= offset else 0


def _final_text(store: AgentStore, turn_id: str | None, since: int) -> str:
    if not turn_id:
        return ""  # settled without a turn (a control message, a missing body)
    led = store.ledger("transcript")
    # the recent window first: it spans a segment closed since the admission
    # (the byte offset ``since`` then points into the closed one)
    for rec in reversed(led.tail(256)):
        if rec.get("kind") == "turn_terminal" and rec.get("turn_id") == turn_id:
            return str(rec.get("text") or "")
    text = ""
    for _, _, rec in led.scan(_start(store, "transcript", since)):
        if rec.get("kind") == "turn_terminal" and rec.get("turn_id") == turn_id:
            text = str(rec.get("text") or "")
    return text


def _brief(store: AgentStore, mid: str, turn_id: str | None, since: int) -> BriefRecord | None:
    """The message's own brief (its ``result`` or ``failure``), else the newest
    brief of the turn that settled it (a ``work_done`` report)."""
    own: BriefRecord | None = None
    of_turn: BriefRecord | None = None
    for _, _, rec in store.ledger("briefs").scan(_start(store, "briefs", since)):
        if rec.get("related_message_id") == mid:
            own = rec
        elif turn_id and rec.get("turn_id") == turn_id:
            of_turn = rec
    return own or of_turn


class OutcomeReader:
    """Reads one message's outcome incrementally: each :meth:`poll` scans only
    the queue ledger's new bytes."""

    def __init__(self, store: AgentStore, message_id: str, since: Marks) -> None:
        self.store = store
        self.message_id = message_id
        self.since = since
        self._offset = since.queue
        self._size = -1

    def poll(self) -> MessageOutcome | None:
        from holon_cli.runtime.queue import FINAL

        led = self.store.ledger("queue")
        size = led.size()
        if size == self._size:
            return None  # unchanged since the last poll: one stat
        if size < self._offset:
            self._offset = 0
        self._size = size
        for _, end, rec in led.scan(self._offset):
            self._offset = end
            if is_status(rec) and rec["message_id"] == self.message_id and rec["status"] in FINAL:
                return self._outcome(rec)
        return None

    def _outcome(self, rec: StatusRecord) -> MessageOutcome:
        turn_id = rec.get("turn_id")
        return {
            "message_id": self.message_id,
            "status": rec["status"],
            "reason": rec.get("reason"),
            "turn_id": turn_id,
            "final_text": _final_text(self.store, turn_id, self.since.transcript),
            "brief": _brief(self.store, self.message_id, turn_id, self.since.briefs),
        }


def wait_for_outcome(
    store: AgentStore,
    message_id: str,
    since: Marks,
    *,
    timeout_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    waiting: Callable[[float], None] | None = None,
) -> MessageOutcome | None:
    """Block until the message is settled and return its outcome, or ``None``
    when ``timeout_s`` passes first (``None``: wait as long as it takes).
    ``waiting(seconds waited)`` runs after each poll that found nothing (the
    caller's notice: nothing would run the turn)."""
    reader = OutcomeReader(store, message_id, since)
    start = monotonic()
    end = None if timeout_s is None else start + timeout_s
    interval = FIRST_POLL_S
    while True:
        found = reader.poll()
        if found is not None:
            return found
        now = monotonic()
        if waiting is not None:
            waiting(now - start)
        if end is not None and now >= end:
            return None
        pause = interval if end is None else min(interval, end - now)
        sleep(pause)
        interval = min(interval * 1.5, MAX_POLL_S)
