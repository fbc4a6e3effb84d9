"""One agent's files: its record snapshot, ledgers, inbox and locks.

``AgentStore`` is a thin handle; every method does its own locking so callers
in ``runtime/`` can compose them. The agent lock guards snapshot
read-modify-write cycles; each ledger additionally has its own append lock.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from holon_cli import clock
from holon_cli.errors import CorruptStateError
from holon_cli.model.agent import AGENT_RECORD_VERSION
from holon_cli.store import ledger as ledger_mod
from holon_cli.store.fsio import read_record, write_snapshot
from holon_cli.store.inbox import Inbox
from holon_cli.store.layout import AgentLayout
from holon_cli.store.ledger import Ledger
from holon_cli.store.locks import HeldLock, locked
from holon_cli.store.records import AGENT_RECORD, ledger_validator
from holon_cli.store.wake import mark, split_agent_dir, unmark

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord, AgentState
    from holon_cli.model.budget import SpendRecord
    from holon_cli.model.child import DelegationRecord
    from holon_cli.model.envelope import QueueRecord
    from holon_cli.model.events import AgentStateChangedData, EventKind, EventRecord
    from holon_cli.model.memory import EpisodeRecord
    from holon_cli.model.task import TaskLedgerRecord
    from holon_cli.model.timer import TimerLedgerRecord
    from holon_cli.model.trigger import TriggerLedgerRecord
    from holon_cli.model.turn import BriefRecord, TranscriptEntry, TurnRecordLine
    from holon_cli.model.workitem import DeliverySummaryRecord, WaitingIntentRecord, WorkItemLine

EVENT_VERSION = 1

# provenance keys copied from an envelope (v2, snake_case) onto every event it causes
_PROVENANCE = (
    ("origin", "origin"),
    ("trust", "trust"),
    ("authority_class", "authority_class"),
    ("delivery_surface", "delivery_surface"),
    ("admission_context", "admission_context"),
    ("id", "message_id"),
    ("task_id", "task_id"),
    ("work_item_id", "work_item_id"),
    ("correlation_id", "correlation_id"),
    ("causation_id", "causation_id"),
    ("priority", "priority"),
)
REPAIR_HINT = (
    "run `holon home check --repair`: it restores state/agent.json from the copy kept "
    "before its last change (agent.json.prev) or rebuilds it from the agent's ledgers, "
    "keeping the damaged file aside; no message or event is lost"
)
# ledgers whose records moved past format v1 (readers upgrade older records)
LEDGER_MAX_VERSION = {"queue": 2, "briefs": 2}
# ledgers numbered from a high-water mark that survives a cut file
SEQ_KEYS = {"events": "event_seq"}
# ledgers written in segments that retention drops by age (store/retention.py);
# nothing unsettled lives in them (queue, work items, timers, tasks, the turn
# journal are never segmented); turn_records: settled turns' records
# (runtime/replay), kept as long as the events
SEGMENTED = ("events", "transcript", "turn_records")
# segmented ledgers of large records nothing tails: no copy of the closed tail
NO_TAIL_COPY = ("turn_records",)
# ledgers that are history only: no tick decides anything from them, so an
# append makes no wake marker (store/wake.py); every other ledger's does
WAKE_SILENT = frozenset(
    ("events", "transcript", "turn_records", "briefs", "context_episodes", "spend")
)
# ledgers whose appends are never fsync'd: the turn record (runtime/replay) is
# how a settled turn went, for `holon replay` and `agent fork`; no message's
# outcome, no queue or agent state depends on it, and the turn that writes it
# has made everything it acknowledges durable on its own. A power loss may
# lose the last seconds' records (the kernel writes them back within ~30 s);
# a kill loses nothing (the page cache outlives the process). One fsync less
# a turn (issue 44 item 4).
WRITEBACK = ("turn_records",)


class AgentStore:
    def __init__(self, layout: AgentLayout) -> None:
        self.layout = layout
        self.agent_id = layout.agent_id
        self._ledgers: dict[str, Ledger[Any]] = {}
        self.inbox = Inbox(layout.inbox_dir)
        self._defer_sync = False
        # the folder whose wake marker this agent's writers hold (None: not
        # under a home's agents/, nothing to mark)
        self.wake_dir: str | None = (
            str(layout.home) if split_agent_dir(layout.home) is not None else None
        )
        self.inbox.wake_dir = self.wake_dir
        # what waits for the deferred appends to be durable (after_sync)
        self._after_sync: list[Callable[[], None]] = []

    # -- ledgers -----------------------------------------------------------
    # each ledger's record type (store/records.py checks every line into it)
    @overload
    def ledger(self, name: Literal["queue"]) -> Ledger[QueueRecord]: ...
    @overload
    def ledger(self, name: Literal["events"]) -> Ledger[EventRecord]: ...
    @overload
    def ledger(self, name: Literal["transcript"]) -> Ledger[TranscriptEntry]: ...
    @overload
    def ledger(self, name: Literal["briefs"]) -> Ledger[BriefRecord]: ...
    @overload
    def ledger(self, name: Literal["spend"]) -> Ledger[SpendRecord]: ...
    @overload
    def ledger(self, name: Literal["work_items"]) -> Ledger[WorkItemLine]: ...
    @overload
    def ledger(self, name: Literal["delivery_summaries"]) -> Ledger[DeliverySummaryRecord]: ...
    @overload
    def ledger(self, name: Literal["waiting_intents"]) -> Ledger[WaitingIntentRecord]: ...
    @overload
    def ledger(self, name: Literal["timers"]) -> Ledger[TimerLedgerRecord]: ...
    @overload
    def ledger(self, name: Literal["triggers"]) -> Ledger[TriggerLedgerRecord]: ...
    @overload
    def ledger(self, name: Literal["tasks"]) -> Ledger[TaskLedgerRecord]: ...
    @overload
    def ledger(self, name: Literal["delegations"]) -> Ledger[DelegationRecord]: ...
    @overload
    def ledger(self, name: Literal["context_episodes"]) -> Ledger[EpisodeRecord]: ...
    @overload
    def ledger(self, name: Literal["turn_records"]) -> Ledger[TurnRecordLine]: ...
    @overload
    def ledger(self, name: str) -> Ledger[Any]: ...  # a name known only at run time
    def ledger(self, name: str) -> Ledger[Any]:
        led = self._ledgers.get(name)
        if led is None:
            led = Ledger(
                self.layout.ledger_path(name),
                self.layout.ledger_lock(name),
                max_version=LEDGER_MAX_VERSION.get(name, 1),
                validate=ledger_validator(name),
                seq_key=SEQ_KEYS.get(name),
            )
            led.defer_sync = self._defer_sync
            if name in SEGMENTED:
                led.segment_bytes = ledger_mod.SEGMENT_BYTES
            if name in NO_TAIL_COPY:
                led.tail_copy_bytes = 0
            if name not in WAKE_SILENT:
                led.wake_dir = self.wake_dir
            if name in WRITEBACK:
                led.writeback = True
            self._ledgers[name] = led
        return led

    @contextmanager
    def deferred_sync(self) -> Iterator[None]:
        """Ledger appends inside the block skip their own fsync; the caller makes
        them durable together with :meth:`sync_ledgers` (and the block's end
        does). Readers see every append at once; only durability is batched."""
        prev = self._defer_sync
        self._set_defer(True)
        try:
            yield
        finally:
            self._set_defer(prev)
            self.sync_ledgers()

    @property
    def deferring(self) -> bool:
        """Inside :meth:`deferred_sync`: a caller batches this store's fsyncs."""
        return self._defer_sync

    def _set_defer(self, on: bool) -> None:
        self._defer_sync = on
        for led in self._ledgers.values():
            led.defer_sync = on

    def sync_ledgers(self, *, skip: tuple[str, ...] = ()) -> None:
        """One fsync per ledger with deferred appends (but those in ``skip``,
        left for a later call)."""
        for name, led in self._ledgers.items():
            if name not in skip:
                led.sync()
        if not skip and self._after_sync:
            pending, self._after_sync = self._after_sync, []
            for fn in pending:
                fn()

    def after_sync(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once this store's appends so far are durable: now, or
        after the next full :meth:`sync_ledgers` while fsyncs are deferred
        (a settled message's body is unlinked only once its ``processed``
        record is durable)."""
        if self._defer_sync:
            self._after_sync.append(fn)
        else:
            fn()

    @property
    def events(self) -> Ledger[EventRecord]:
        return self.ledger("events")

    def emit(
        self,
        kind: EventKind,
        data: Mapping[str, Any] | None = None,
        *,
        message: Mapping[str, Any] | None = None,
        **provenance: Any,
    ) -> EventRecord:
        """Append one audit event with the next ``event_seq`` (strictly increasing)."""
        at = clock.now_iso()
        extra: dict[str, object] = {}
        if message is not None:
            if message.get("v", 1) < 2:  # an envelope read from an old record
                from holon_cli.model.envelope import upgrade_envelope

                message = cast(Mapping[str, Any], upgrade_envelope(dict(message)))
            for src, dst in _PROVENANCE:
                if src in message and message[src] is not None:
                    extra[dst] = message[src]
        for k, v in provenance.items():
            if v is not None:
                extra[k] = v
        base: EventRecord = {
            "v": EVENT_VERSION,
            "event_seq": 0,
            "id": clock.new_id("evt"),
            "at": at,
            "kind": kind,
            "agent_id": self.agent_id,
        }
        # provenance between the head and the data, as events were always written
        record = cast("EventRecord", {**base, **extra, "data": dict(data or {})})

        def with_seq(last: EventRecord | None) -> EventRecord:
            record["event_seq"] = int(last["event_seq"]) + 1 if last else 1
            return record

        return self.events.append(with_seq)

    # -- record snapshot ---------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        with locked(self.layout.agent_lock, what=f"agent {self.agent_id!r}"):
            yield

    def turn_lock(self) -> HeldLock:
        return HeldLock(self.layout.turn_lock, f"a turn for agent {self.agent_id!r}")

    def read_record(self) -> AgentRecord:
        """The agent record (``state/agent.json``), checked into
        :class:`holon_cli.model.agent.AgentRecord` as it is read."""
        try:
            rec = read_record(
                self.layout.agent_file, AGENT_RECORD, max_version=AGENT_RECORD_VERSION
            )
        except CorruptStateError as exc:
            if "newer than this holon" in exc.message:
                raise
            raise CorruptStateError(
                exc.message, hint=REPAIR_HINT, details=exc.details, kind=exc.kind
            ) from None
        if rec is None:
            raise CorruptStateError(
                f"agent record missing: {self.layout.agent_file}",
                hint=REPAIR_HINT,
                details={"path": str(self.layout.agent_file)},
            )
        return rec

    def write_record(self, rec: AgentRecord, *, sync_dir: bool = True) -> None:
        """Replace ``agent.json``; the version it replaces is kept as
        ``agent.json.prev`` (a hard link, no copy) for ``home check --repair``.
        ``sync_dir=False``: the new file is durable, its rename waits for the
        caller's fsync of ``state/`` (:func:`~holon_cli.store.fsio.atomic_write_bytes`)."""
        wake_fd = -1 if self.wake_dir is None else mark(self.wake_dir)
        try:
            self._write_record(rec, sync_dir=sync_dir)
        finally:
            unmark(wake_fd)

    def _write_record(self, rec: AgentRecord, *, sync_dir: bool) -> None:
        path = self.layout.agent_file
        prev = path.with_name(path.name + ".prev")
        tmp = path.with_name(f".{path.name}.prev.{os.getpid()}")
        try:
            os.link(path, tmp)
            os.replace(tmp, prev)
        except FileNotFoundError:
            pass  # the first write: nothing to keep
        except OSError:
            tmp.unlink(missing_ok=True)  # no hard links here: keep no copy
        write_snapshot(path, rec, sync_dir=sync_dir)

    def update_state(
        self,
        fn: Callable[[AgentState], None],
        *,
        reason: str = "runtime",
        message: Mapping[str, Any] | None = None,
        sync_dir: bool = True,
        **provenance: Any,
    ) -> AgentRecord:
        """Read-modify-write the agent record under the agent lock. A status
        change is stamped (``status_changed_at``) and announced as one
        ``agent_state_changed`` event {from, to, reason} (after the write, so
        a reader of the event finds the new state): every status change of
        the runtime goes through here, so none goes unrecorded."""
        with self.lock():
            rec = self.read_record()
            state = rec["state"]
            before = state["status"]
            stamp = state.get("status_changed_at")
            fn(state)
            after = state["status"]
            if after != before and state.get("status_changed_at") == stamp:
                state["status_changed_at"] = clock.now_iso()
            self.write_record(rec, sync_dir=sync_dir)
        if after != before:
            changed: AgentStateChangedData = {"from": before, "to": after, "reason": reason}
            self.emit("agent_state_changed", changed, message=message, **provenance)
        return rec
