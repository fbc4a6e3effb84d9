"""Work-item records and the views derived from them (pure values, no I/O).

A ``WorkItemRecord`` is the durable unit of agent-owned work (RFC: Work Item
Runtime Model). Its stored shape is small on purpose:

- lifecycle ``state``: ``open`` | ``completed`` (nothing else is stored);
- ``plan_status``: ``draft`` | ``ready`` | ``needs_input``;
- ``todo_list``: a full snapshot of ``{text, state}`` items, ``state`` one of
  ``pending`` | ``in_progress`` | ``completed``;
- ``blocked_by``: agent-authored natural language, never parsed;
- ``plan_artifact``: a *descriptor* of ``<agent_home>/work-items/<id>/plan.md``
  (the file is the source of truth; the body is never stored here).

Everything else -- runnable, queued, blocked, triggered, the candidate
classes and their ranking -- is derived in
:mod:`holon_cli.model.workitem_readiness` from a record, the agent's focus
pointer (``current_work_item_id``) and the item's waiting intents. Nothing in
either module mutates or stores a derived value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NotRequired, Required, TypedDict, cast

from holon_cli.errors import CorruptStateError, UsageError
from holon_cli.model.typed import NONNEGATIVE

WORK_ITEM_RECORD_VERSION = 1
DELIVERY_SUMMARY_VERSION = 1

STATES = ("open", "completed")
PLAN_STATUSES = ("draft", "ready", "needs_input")
TODO_STATES = ("pending", "in_progress", "completed")

LIST_FILTERS = ("all", "current", "open", "queued", "blocked", "completed")

PREVIEW_CHARS = 2000
MAX_OBJECTIVE_CHARS = 1000
MAX_BLOCKER_CHARS = 4000
MAX_TODO_ITEMS = 100
MAX_TODO_TEXT_CHARS = 1000


# ---------------------------------------------------------- record shapes
# TypedDicts: the JSON on disk and on the wire, unchanged (zero runtime cost).


class TodoItem(TypedDict):
    """One entry of a todo-list snapshot."""

    text: str
    state: str  # one of TODO_STATES


class PlanDescriptor(TypedDict):
    """What a record keeps of ``work-items/<id>/plan.md`` (never the body)."""

    path: str
    exists: bool
    hash: str | None  # "sha256:<hex>", None when the file is missing
    bytes: int
    updated_at: str | None
    preview: str
    preview_complete: bool


class BlockerFields(TypedDict):
    """The blocker, stored flat in the record: agent-authored text (never
    parsed) and its one-shot recheck deadline."""

    blocked_by: str | None
    recheck_at: str | None
    recheck_consumed_at: str | None


class WorkItemRecord(BlockerFields):
    """A work item as the ``work_items`` ledger stores it (newest line wins).

    ``v``/``rev``/``change``/``recorded_at`` are ledger bookkeeping: present on
    every stored line, absent from :func:`public_record` views."""

    id: str
    agent_id: str
    workspace_id: str | None
    objective: str
    state: str  # one of STATES
    plan_status: str  # one of PLAN_STATUSES
    plan_artifact: PlanDescriptor
    todo_list: list[TodoItem]
    result_summary: str | None
    completed_at: str | None
    created_at: str
    updated_at: str
    v: NotRequired[int]
    rev: NotRequired[int]
    change: NotRequired[str]
    recorded_at: NotRequired[str]


class WorkItemLine(TypedDict):
    """A ``work_items`` ledger line as any version wrote it: :func:`upgrade_record`
    fills in what an older line lacks and makes it a :class:`WorkItemRecord`."""

    v: NotRequired[int]
    id: str
    state: str
    objective: str


class ReportRef(TypedDict, total=False):
    """The work item index's note of an item's newest delivery summary."""

    id: str | None
    text: str | None
    created_at: str | None
    source: str | None
    turn_id: str | None


class ArchivedReport(ReportRef, total=False):
    """A ``report`` line of the work item archive: an item's report note and
    the item it belongs to."""

    work_item_id: Required[str]


class WorkItemsSnapshot(TypedDict):
    """``state/work_items.json``: the folds of the work item, delivery summary
    and waiting intent ledgers up to their offsets."""

    v: NotRequired[int]
    offset: int
    ds_offset: NotRequired[int]
    wait_offset: NotRequired[int]
    items: dict[str, WorkItemLine]
    reports: NotRequired[dict[str, ReportRef]]
    waits: NotRequired[dict[str, WaitingIntentRecord]]
    archive: NotRequired[WorkItemArchiveRef]


class WorkItemArchiveRef(TypedDict):
    """``state/work_items.json`` ``archive``: the archive file (v2 head) this
    head continues (``store/workitem_archive.py``): its generation and how
    far it reaches."""

    generation: NotRequired[str | None]  # none before the first archive is written
    bytes: NotRequired[Annotated[int, NONNEGATIVE]]
    items: NotRequired[Annotated[int, NONNEGATIVE]]
    lines: NotRequired[Annotated[int, NONNEGATIVE]]


class ContinuationHold(TypedDict):
    """Agent state ``work_continuation_hold``: the runtime must not continue
    ``work_item_id`` on its own while it is at revision ``rev``."""

    work_item_id: str
    rev: int | None
    reason: str  # the failure kind, e.g. context_length_exceeded
    held_at: str
    turn_id: str | None


class DeliverySummaryRecord(TypedDict):
    """A promoted completion report (``delivery_summaries`` ledger)."""

    v: int
    id: str
    agent_id: str
    work_item_id: str
    text: str
    source: NotRequired[str]  # absent from the oldest records
    created_at: str
    turn_id: NotRequired[str]
    warnings: NotRequired[list[dict[str, Any]]]


class WaitingIntentRecord(TypedDict, total=False):
    """A waiting intent as the work plane reads it (the waiting plane writes
    the ``waiting_intents`` ledger; only ``id`` and ``work_item_id`` are
    guaranteed)."""

    id: Required[str]
    work_item_id: Required[str]
    kind: str  # task | external | ...
    status: str  # active | cancelled
    trigger_count: int
    last_triggered_at: str | None
    source: str
    resource: str | None
    condition: str


# record keys that are ledger bookkeeping, not part of the public record
_LEDGER_KEYS = ("v", "rev", "change", "recorded_at")


class Unset:
    """The "argument not given" marker, distinct from an explicit ``None``.

    ``UpdateWorkItem.blocked_by`` is nullable: omitting it keeps the blocker,
    ``null`` clears it. Python's ``None`` cannot say both, so callers pass
    :data:`UNSET` (the default) for "leave unchanged".
    """

    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET = Unset()


# ------------------------------------------------------------- validation


def _bad(message: str, field_name: str, hint: str) -> UsageError:
    return UsageError(message, hint=hint, kind="invalid_arguments", details={"field": field_name})


def validate_objective(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise _bad(
            "objective must be non-empty text",
            "objective",
            "state the short current-work target, "
            "e.g. 'Split provider fixtures into a support module'",
        )
    text = text.strip()
    if len(text) > MAX_OBJECTIVE_CHARS:
        raise _bad(
            f"objective is {len(text)} characters; the limit is {MAX_OBJECTIVE_CHARS}",
            "objective",
            "keep the objective short and put the detailed interpretation in the plan file",
        )
    return str(text)


def validate_plan_status(value: Any) -> str:
    if value not in PLAN_STATUSES:
        raise _bad(
            f"plan_status must be one of {', '.join(PLAN_STATUSES)} (got {value!r})",
            "plan_status",
            f"use one of: {', '.join(PLAN_STATUSES)}",
        )
    return str(value)


def validate_blocked_by(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise _bad(
            "blocked_by must be non-empty text (an empty blocker says nothing)",
            "blocked_by",
            "describe what the work item is waiting for, "
            "or pass null (--clear-blocker) to clear the blocker",
        )
    text = text.strip()
    if len(text) > MAX_BLOCKER_CHARS:
        raise _bad(
            f"blocked_by is {len(text)} characters; the limit is {MAX_BLOCKER_CHARS}",
            "blocked_by",
            "summarize the blocker; put details in the plan file",
        )
    return str(text)


def validate_recheck_after_ms(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _bad(
            f"recheck_after must be a positive number of milliseconds (got {value!r})",
            "recheck_after",
            "e.g. 1800000 for 30 minutes",
        )
    return int(value)


def normalize_todo_list(items: Any) -> list[TodoItem]:
    """Validate a full todo-list snapshot; accepts dicts (or objects with
    ``text``/``state`` attributes). Returns fresh ``{text, state}`` dicts."""
    if not isinstance(items, list | tuple):
        raise _bad(
            "todo_list must be an array of {text, state} items",
            "todo_list",
            "send the complete current checklist",
        )
    if len(items) > MAX_TODO_ITEMS:
        raise _bad(
            f"todo_list has {len(items)} items; the limit is {MAX_TODO_ITEMS}",
            "todo_list",
            "keep todos as short progress markers; scope belongs in the plan file",
        )
    out: list[TodoItem] = []
    for i, item in enumerate(items):
        if isinstance(item, Mapping):
            text, state = item.get("text"), item.get("state", "pending")
        else:
            text, state = getattr(item, "text", None), getattr(item, "state", "pending")
        if not isinstance(text, str) or not text.strip():
            raise _bad(
                f"todo_list[{i}].text must be non-empty text",
                f"todo_list[{i}].text",
                "give every todo a short description",
            )
        if len(text.strip()) > MAX_TODO_TEXT_CHARS:
            raise _bad(
                f"todo_list[{i}].text is too long (limit {MAX_TODO_TEXT_CHARS})",
                f"todo_list[{i}].text",
                "keep todos short",
            )
        if state is None:
            state = "pending"
        if state not in TODO_STATES:
            raise _bad(
                f"todo_list[{i}].state must be one of {', '.join(TODO_STATES)} (got {state!r})",
                f"todo_list[{i}].state",
                f"use one of: {', '.join(TODO_STATES)}",
            )
        out.append({"text": text.strip(), "state": str(state)})
    return out


# ---------------------------------------------------------------- records


def new_work_item_record(
    *,
    work_item_id: str,
    agent_id: str,
    workspace_id: str | None,
    objective: str,
    plan_status: str,
    todo_list: list[TodoItem],
    plan_artifact: PlanDescriptor,
    created_at: str,
) -> WorkItemRecord:
    return {
        "v": WORK_ITEM_RECORD_VERSION,
        "id": work_item_id,
        "agent_id": agent_id,
        "workspace_id": workspace_id,
        "objective": objective,
        "state": "open",
        "plan_status": plan_status,
        "plan_artifact": plan_artifact,
        "todo_list": todo_list,
        "blocked_by": None,
        "recheck_at": None,
        "recheck_consumed_at": None,
        "result_summary": None,
        "completed_at": None,
        "created_at": created_at,
        "updated_at": created_at,
    }


def upgrade_record(rec: Mapping[str, Any], *, where: str = "work_items ledger") -> WorkItemRecord:
    """Accept current and older record versions; reject newer ones clearly."""
    v = rec.get("v", 1)
    if not isinstance(v, int) or v > WORK_ITEM_RECORD_VERSION:
        raise CorruptStateError(
            f"{where}: work item record format v{v!r} is newer than this holon understands "
            f"(max v{WORK_ITEM_RECORD_VERSION})",
            hint="upgrade holon-cli",
        )
    out = dict(rec)
    out.setdefault("todo_list", [])
    for k in (
        "blocked_by",
        "recheck_at",
        "recheck_consumed_at",
        "result_summary",
        "completed_at",
        "workspace_id",
    ):
        out.setdefault(k, None)
    out.setdefault("plan_status", "draft")
    return cast(WorkItemRecord, out)


def public_record(rec: Mapping[str, Any]) -> WorkItemRecord:
    """The record without ledger bookkeeping keys."""
    return cast(WorkItemRecord, {k: v for k, v in rec.items() if k not in _LEDGER_KEYS})


def new_delivery_summary(
    *,
    summary_id: str,
    agent_id: str,
    work_item_id: str,
    text: str,
    source: str,
    created_at: str,
    turn_id: str | None = None,
    warnings: list[dict[str, Any]] | None = None,
) -> DeliverySummaryRecord:
    rec: DeliverySummaryRecord = {
        "v": DELIVERY_SUMMARY_VERSION,
        "id": summary_id,
        "agent_id": agent_id,
        "work_item_id": work_item_id,
        "text": text,
        "source": source,
        "created_at": created_at,
    }
    if turn_id:
        rec["turn_id"] = turn_id
    if warnings:
        rec["warnings"] = warnings
    return rec


# ---------------------------------------------------------- plan artifact


def describe_plan(
    path: str, data: bytes | None, updated_at: str | None, *, preview_chars: int = PREVIEW_CHARS
) -> PlanDescriptor:
    """The plan artifact descriptor for file bytes (``None``: the file is missing)."""
    if data is None:
        return {
            "path": path,
            "exists": False,
            "hash": None,
            "bytes": 0,
            "updated_at": updated_at,
            "preview": "",
            "preview_complete": False,
        }
    text = data.decode("utf-8", errors="replace")
    return {
        "path": path,
        "exists": True,
        "hash": "sha256:" + _sha256(data),
        "bytes": len(data),
        "updated_at": updated_at,
        "preview": text[:preview_chars],
        "preview_complete": len(text) <= preview_chars,
    }


def plan_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    if not old:
        return True
    return (
        bool(old.get("exists", True)) != bool(new.get("exists"))
        or old.get("hash") != new.get("hash")
        or old.get("path") != new.get("path")
    )


def default_plan_text(objective: str, work_item_id: str) -> str:
    return (
        f"# {objective}\n\n"
        f"<!-- Plan for work item {work_item_id}. "
        "This file is the durable source of truth for how the\n"
        "     work is interpreted: task interpretation, scope and non-goals, "
        "approach, verification,\n"
        "     risks. Edit it directly; the runtime only keeps a descriptor and a preview. -->\n"
    )


# ---------------------------------------------------------------- todos


def current_todo(todo_list: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """First ``in_progress`` item, otherwise first ``pending`` item."""
    for want in ("in_progress", "pending"):
        for item in todo_list:
            if item.get("state") == want:
                return {"text": item.get("text"), "state": want}
    return None


def todo_counts(todo_list: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts = {s: 0 for s in TODO_STATES}
    for item in todo_list:
        st = item.get("state")
        if st in counts:
            counts[str(st)] += 1
    counts["total"] = len(todo_list)
    return counts


def unfinished_todos_warning(
    todo_list: Sequence[Mapping[str, Any]], *, sample: int = 5
) -> dict[str, Any] | None:
    """The RFC's structured ``unfinished_todos`` warning, or ``None``."""
    unfinished = [t for t in todo_list if t.get("state") in ("pending", "in_progress")]
    if not unfinished:
        return None
    return {
        "kind": "unfinished_todos",
        "message": "Work item completed with unfinished todo items.",
        "pending_count": sum(1 for t in unfinished if t.get("state") == "pending"),
        "in_progress_count": sum(1 for t in unfinished if t.get("state") == "in_progress"),
        "sample": [{"text": t.get("text"), "state": t.get("state")} for t in unfinished[:sample]],
    }


def todo_warnings(todo_list: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Soft checks on a submitted snapshot (never a rejection)."""
    n = sum(1 for t in todo_list if t.get("state") == "in_progress")
    if n > 1:
        return [
            {
                "kind": "multiple_in_progress",
                "message": f"{n} todo items are in_progress; normally at most one is.",
                "in_progress_count": n,
            }
        ]
    return []


def _sha256(data: bytes) -> str:
    from holon_cli.digest import sha256_hex

    return sha256_hex(data)
