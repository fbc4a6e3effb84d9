"""The types the store checks what it reads into: one record type per
ledger (looked up by name) and per known snapshot (by file).

Valid JSON is not enough: an ``admitted`` queue record without ``message``,
an ``agent.json`` without ``state`` or a string ``offset`` in ``queue.json``
used to end in a ``KeyError``/``TypeError`` traceback far from the file.
Every ledger line (``Ledger`` is handed its record kind by name) and every
known snapshot (``fsio.read_snapshot`` by file name) is checked into its
type when it is read (``model/typed.py``), so a damaged record is a
``CorruptStateError`` that names the file (and the line), in ``holon home
check`` and in every other command alike, and what a reader holds is the
record's type, not a cast.

The types are the records' own (``model/``): what every version of the
record has carried is required, what an older one may lack is
``NotRequired``, and a field this version does not name is left alone. A
record that *carries* an envelope needs only its id
(:class:`~holon_cli.model.envelope.EnvelopeRef`): the queue runs or aborts a
message an older holon admitted instead of wedging on it. To cover a new
record kind, give it a TypedDict and add one line to ``LEDGERS`` or
``SNAPSHOTS``.

A finding reads ``<what> [<where>]: `<field>` must be int, got str`` (or
``has no `<field>```, ``unknown <field> 'x'``, ``is empty``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Generic,
    Literal,
    NotRequired,
    TypedDict,
    TypeVar,
    get_args,
)

from holon_cli.model.envelope.schema import Priority
from holon_cli.model.typed import NONEMPTY, Checker, CheckError, dotted, members, strip

if TYPE_CHECKING:  # the record types load when a record of the kind is first read
    from holon_cli.model.agent import AgentRecord, HomeMarker, TemplateProvenance
    from holon_cli.model.budget import SpendRecord
    from holon_cli.model.child import DelegationRecord
    from holon_cli.model.envelope import QueueRecord, QueueSnapshot
    from holon_cli.model.event_record import EventRecord
    from holon_cli.model.mcp import McpRequestLine
    from holon_cli.model.memory import EpisodeRecord
    from holon_cli.model.task import TaskLedgerRecord
    from holon_cli.model.timer import TimerLedgerRecord, TimersSnapshot
    from holon_cli.model.trigger import TriggerLedgerRecord, TriggerRecord
    from holon_cli.model.turn import BriefRecord, TranscriptEntry, TurnRecordLine
    from holon_cli.model.workitem import (
        ArchivedReport,
        DeliverySummaryRecord,
        WaitingIntentRecord,
        WorkItemLine,
        WorkItemsSnapshot,
    )

R = TypeVar("R")
# what a ledger reader calls on each record: the finding, or None (a RecordKind is one)
Validator = Callable[[Any], "str | None"]

QUEUE_STATUSES = ("queued", "dequeued", "processed", "aborted", "interrupted")


class InboxEnvelope(TypedDict):
    """An inbox file before it is admitted: the fields every reader of an
    envelope relies on (admission re-validates the whole)."""

    id: Annotated[str, NONEMPTY]
    kind: NotRequired[str | None]
    body: NotRequired[dict[str, object] | None]
    origin: NotRequired[dict[str, object] | None]
    priority: NotRequired[Priority | None]


class RecordKind(Generic[R]):
    """A record type as the store checks it. Calling it gives the finding
    worded for a file (``None``: the record is sound); :meth:`check` returns
    the record as its type or raises :class:`CheckError`. ``what`` names the
    record in findings; ``tag``: a key whose value names it instead
    (``{"op": {"admitted": "admitted record"}}``). The type may be named
    ``"module:Name"``: it is imported when a record of the kind is first
    read (``holon status`` does not pay for the types of files it never reads)."""

    __slots__ = ("_type", "_checker", "what", "tag")

    def __init__(
        self, tp: Any, what: str, tag: tuple[str, Mapping[str, str]] | None = None
    ) -> None:
        self._type = tp
        self._checker: Checker[R] | None = None
        self.what = what
        self.tag = tag

    @property
    def checker(self) -> Checker[R]:
        hit = self._checker
        if hit is None:
            tp = self._type
            if isinstance(tp, str):
                import importlib

                module, _, name = tp.partition(":")
                tp = getattr(importlib.import_module(module), name)
            hit = self._checker = Checker(tp)
        return hit

    def check(self, rec: object) -> R:
        return self.checker(rec)

    def __call__(self, rec: object) -> str | None:
        err = self.checker.problem(rec)
        return None if err is None else self.reason(err, rec)

    def reason(self, err: CheckError, rec: object = None) -> str:
        what = self.what
        if self.tag is not None and isinstance(rec, Mapping):
            what = self.tag[1].get(str(rec.get(self.tag[0])), what)
        return finding(err, what)


def finding(err: CheckError, what: str) -> str:
    """``err`` worded for a record named ``what``."""
    path = err.path
    where = dotted(path[:-1])
    head = f"{what} {where}" if where else what
    if not path:
        return f"{what} must be {_item_name(err.expected)}, got {_got(err.value)}"
    leaf = path[-1]
    field = f"[{leaf}]" if isinstance(leaf, int) else f"`{leaf}`"
    if err.problem == "missing":
        return f"{head} has no {field}"
    if err.problem == "value":
        return f"{head}: unknown {leaf} {err.value!r}"[:200]
    if err.problem == "rule":
        return f"{head}: {field} {err.detail}"
    if err.problem == "bound" and err.limit:
        return f"{head}: {field} must be {err.limit[1]} or more, got {err.value!r}"
    if err.problem == "key":
        return f"{head}: key {err.value!r} of {field} is not a name"
    if isinstance(leaf, int):  # an item of a list
        return f"{head}[{leaf}] must be {_item_name(err.expected)}, got {_got(err.value)}"
    return f"{head}: {field} must be {_py_name(err.expected)}, got {_got(err.value)}"


_PY = {str: "str", int: "int", float: "int/float", bool: "bool", list: "list", dict: "dict"}


def _py_name(tp: Any) -> str:
    """``str``, ``int``, ``int/float``, ``dict``, ``list`` (the Python kinds a reader indexes)."""
    names: list[str] = []
    for m in members(tp):
        m = strip(m)
        if m is type(None):
            continue
        origin = getattr(m, "__origin__", None)
        if origin is Literal:
            name = "/".join(sorted({type(a).__name__ for a in get_args(m)}))
        elif origin in (list, tuple):
            name = "list"
        elif origin in (dict, Mapping) or hasattr(m, "__required_keys__"):
            name = "dict"
        else:
            name = _PY.get(m, getattr(m, "__name__", str(m)))
        if name not in names:
            names.append(name)
    return "/".join(names) or "null"


def _item_name(tp: Any) -> str:
    name = _py_name(tp)
    return "an object" if name == "dict" else name


def _got(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# ----------------------------------------------------------------- ledgers

QUEUE_RECORD: RecordKind[QueueRecord] = RecordKind(
    "holon_cli.model.envelope.schema:QueueRecord",
    "queue record",
    ("op", {"admitted": "admitted record", "status": "status record"}),
)
EVENT_RECORD: RecordKind[EventRecord] = RecordKind(
    "holon_cli.model.event_record:EventRecord", "event"
)
TRANSCRIPT_ENTRY: RecordKind[TranscriptEntry] = RecordKind(
    "holon_cli.model.turn:TranscriptEntry", "transcript entry"
)
SPEND_RECORD: RecordKind[SpendRecord] = RecordKind(
    "holon_cli.model.budget:SpendRecord", "spend record"
)
BRIEF_RECORD: RecordKind[BriefRecord] = RecordKind("holon_cli.model.turn:BriefRecord", "brief")
WORK_ITEM_LINE: RecordKind[WorkItemLine] = RecordKind(
    "holon_cli.model.workitem:WorkItemLine", "work item record"
)
DELIVERY_SUMMARY: RecordKind[DeliverySummaryRecord] = RecordKind(
    "holon_cli.model.workitem:DeliverySummaryRecord", "delivery summary"
)
# a work item archive's report line (store/workitem_archive.py)
ARCHIVED_REPORT: RecordKind[ArchivedReport] = RecordKind(
    "holon_cli.model.workitem:ArchivedReport", "delivery summary"
)
WAITING_INTENT: RecordKind[WaitingIntentRecord] = RecordKind(
    "holon_cli.model.workitem:WaitingIntentRecord", "waiting intent"
)
TIMER_LINE: RecordKind[TimerLedgerRecord] = RecordKind(
    "holon_cli.model.timer:TimerLedgerRecord", "timer record"
)
TRIGGER_LINE: RecordKind[TriggerLedgerRecord] = RecordKind(
    "holon_cli.model.trigger:TriggerLedgerRecord", "trigger record"
)
TASK_LINE: RecordKind[TaskLedgerRecord] = RecordKind(
    "holon_cli.model.task:TaskLedgerRecord", "task record"
)
DELEGATION: RecordKind[DelegationRecord] = RecordKind(
    "holon_cli.model.child:DelegationRecord", "delegation record"
)
EPISODE: RecordKind[EpisodeRecord] = RecordKind("holon_cli.model.memory:EpisodeRecord", "episode")
MCP_REQUEST_LINE: RecordKind[McpRequestLine] = RecordKind(
    "holon_cli.model.mcp:McpRequestLine", "MCP request"
)
TURN_RECORD_LINE: RecordKind[TurnRecordLine] = RecordKind(
    "holon_cli.model.turn:TurnRecordLine", "turn record"
)
# a ledger with no record type of its own: any JSON object (``v`` is checked by every reader)
ANY_RECORD: RecordKind[dict[str, object]] = RecordKind(dict[str, object], "record")

LEDGERS: dict[str, RecordKind[Any]] = {
    "context_episodes": EPISODE,
    "turn_records": TURN_RECORD_LINE,
    "queue": QUEUE_RECORD,
    "events": EVENT_RECORD,
    "transcript": TRANSCRIPT_ENTRY,
    "spend": SPEND_RECORD,
    "briefs": BRIEF_RECORD,
    "work_items": WORK_ITEM_LINE,
    "delivery_summaries": DELIVERY_SUMMARY,
    "waiting_intents": WAITING_INTENT,
    "timers": TIMER_LINE,
    "triggers": TRIGGER_LINE,
    "tasks": TASK_LINE,
    "delegations": DELEGATION,
    "mcp_requests": MCP_REQUEST_LINE,
}


def ledger_validator(name: str) -> RecordKind[Any]:
    """The record kind of ledger ``name`` (any JSON object for one not listed)."""
    return LEDGERS.get(name, ANY_RECORD)


def ledger_problem(name: str, rec: object) -> str | None:
    """The finding for one record of ledger ``name`` (``None``: sound)."""
    return ledger_validator(name)(rec)


# --------------------------------------------------------------- snapshots

INBOX_ENVELOPE: RecordKind[InboxEnvelope] = RecordKind(InboxEnvelope, "message")
AGENT_RECORD: RecordKind[AgentRecord] = RecordKind(
    "holon_cli.model.agent:AgentRecord", "agent record"
)
QUEUE_SNAPSHOT: RecordKind[QueueSnapshot] = RecordKind(
    "holon_cli.model.envelope.schema:QueueSnapshot", "queue snapshot"
)
TIMERS_SNAPSHOT: RecordKind[TimersSnapshot] = RecordKind(
    "holon_cli.model.timer:TimersSnapshot", "timers snapshot"
)
TRIGGER_SNAPSHOT: RecordKind[TriggerRecord] = RecordKind(
    "holon_cli.model.trigger:TriggerRecord", "trigger record"
)
WORK_ITEMS_SNAPSHOT: RecordKind[WorkItemsSnapshot] = RecordKind(
    "holon_cli.model.workitem:WorkItemsSnapshot", "work item index"
)
TEMPLATE_SNAPSHOT: RecordKind[TemplateProvenance] = RecordKind(
    "holon_cli.model.agent:TemplateProvenance", "template record"
)
HOME_MARKER: RecordKind[HomeMarker] = RecordKind("holon_cli.model.agent:HomeMarker", "home marker")

SNAPSHOTS: dict[tuple[str, str], RecordKind[Any]] = {
    ("state", "agent.json"): AGENT_RECORD,
    ("state", "queue.json"): QUEUE_SNAPSHOT,
    ("state", "timers.json"): TIMERS_SNAPSHOT,
    ("state", "trigger.json"): TRIGGER_SNAPSHOT,
    ("state", "work_items.json"): WORK_ITEMS_SNAPSHOT,
    ("state", "template.json"): TEMPLATE_SNAPSHOT,
    ("", "home.json"): HOME_MARKER,
}


def snapshot_validator(path: Path) -> RecordKind[Any] | None:
    hit = SNAPSHOTS.get((path.parent.name, path.name))
    if hit is None and path.name == "home.json":
        return HOME_MARKER
    return hit


def envelope_problem(env: object, what: str = "message") -> str | None:
    """The fields every reader of an envelope relies on (an inbox file)."""
    err = INBOX_ENVELOPE.checker.problem(env)
    return None if err is None else finding(err, what)
