"""Read surfaces of the work plane: ``GetWorkItem`` / ``holon workitem show``,
``ListWorkItems`` / ``holon workitem list`` and the readiness counts of
``holon status``. Views carry the plan descriptor (never the body) and the
derived readiness projection; nothing here changes focus.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from holon_cli.errors import UsageError
from holon_cli.model import workitem as wm
from holon_cli.model import workitem_readiness as wr
from holon_cli.model.workitem import WorkItemRecord
from holon_cli.runtime.workitems.access import current_id as _current_id
from holon_cli.runtime.workitems.access import require
from holon_cli.runtime.workitems.hints import TOOLS, Vocabulary
from holon_cli.runtime.workitems.plans import refresh as refresh_descriptors
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.workitem_index import WorkItemIndex, load


class CompletionReport(TypedDict):
    """A completed item's report: its result summary, else its newest
    delivery summary."""

    text: str
    source: str  # result_summary | delivery_summary
    delivery_summary_id: NotRequired[str | None]
    created_at: NotRequired[str | None]


def completion_report(idx: WorkItemIndex, rec: WorkItemRecord) -> CompletionReport | None:
    if rec.get("state") != "completed":
        return None
    if summary := rec.get("result_summary"):
        return {"text": summary, "source": "result_summary"}
    rep = idx.report_of(str(rec.get("id")))
    if rep:
        return {
            "text": rep["text"],
            "source": "delivery_summary",
            "delivery_summary_id": rep.get("id"),
            "created_at": rep.get("created_at"),
        }
    return None


def view(
    idx: WorkItemIndex,
    rec: WorkItemRecord,
    *,
    current_id: str | None,
    include_todo_list: bool = True,
) -> dict[str, Any]:
    """A read-surface view: the record, its plan descriptor (never the body)
    and the derived readiness projection."""
    waits = idx.waits_for(rec)
    out: dict[str, Any] = dict(wm.public_record(rec))
    out["plan_artifact"] = dict(rec.get("plan_artifact") or {})
    todos = list(rec.get("todo_list") or [])
    if not include_todo_list:
        out.pop("todo_list", None)
    out["todo_counts"] = wm.todo_counts(todos)
    proj = wr.readiness_projection(rec, current_id=current_id, waits=waits)
    out.update(
        {
            "is_current": proj["focus"] == "current",
            "readiness": proj["readiness"],
            "scheduling_state": proj["scheduling_state"],
            "candidate_class": proj["candidate_class"],
            "current_todo": proj["current_todo"],
            "has_active_waits": proj["has_active_waits"],
            "has_triggered_waits": proj["has_triggered_waits"],
        }
    )
    if waits.active:
        out["waits"] = [wait_brief(w) for w in waits.active]
    if rec.get("state") == "completed":
        out["completion_report"] = completion_report(idx, rec)
    return out


def wait_brief(w: Mapping[str, object]) -> dict[str, object]:
    return {
        k: w.get(k)
        for k in (
            "id",
            "kind",
            "source",
            "resource",
            "condition",
            "trigger_count",
            "last_triggered_at",
        )
        if w.get(k) is not None
    }


def get_work_item(
    store: AgentStore,
    work_item_id: str,
    *,
    include_todo_list: bool = True,
    refresh: bool = True,
    vocab: Vocabulary = TOOLS,
) -> dict[str, Any]:
    """``GetWorkItem`` / ``holon workitem show``: one view with a fresh plan descriptor."""
    require(store, load(store), work_item_id, vocab)
    if refresh:
        refresh_descriptors(store, [work_item_id])
    idx = load(store)
    rec = idx.get(work_item_id)
    assert rec is not None  # required above; items are never removed
    return {
        "work_item": view(
            idx,
            rec,
            current_id=_current_id(store),
            include_todo_list=include_todo_list,
        )
    }


# filters that only ever match open items: the index's head holds every one
# of them, so these lists never read the archive of completed items
OPEN_FILTERS = frozenset({"current", "open", "queued", "blocked"})


def _ordered(
    idx: WorkItemIndex, current_id: str | None, *, every_item: bool
) -> list[WorkItemRecord]:
    """Current first, then the candidate classes in priority order, then
    completed items (newest first)."""
    items = idx.items if every_item else {r["id"]: r for r in idx.open_records()}
    cand = wr.classify(
        items.values(),
        current_id=current_id,
        waits=idx.wait_summaries(every_item=every_item),
        has_report={w: True for w in items},
    )
    out: list[WorkItemRecord] = []
    if cand.current is not None:
        out.append(cand.current)
    for cls in wr.CANDIDATE_CLASSES[1:]:
        out.extend(cand.classes[cls])
    return out


def list_work_items(
    store: AgentStore,
    *,
    filter: str = "all",
    limit: int | None = None,
    include_todo_list: bool = False,
    refresh: bool = True,
) -> dict[str, Any]:
    """``ListWorkItems`` / ``holon workitem list``."""
    if filter not in wm.LIST_FILTERS:
        raise UsageError(
            f"unknown filter {filter!r}",
            hint=f"use one of: {', '.join(wm.LIST_FILTERS)}",
            kind="invalid_arguments",
            details={"field": "filter"},
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise UsageError(
            f"limit must be a positive integer (got {limit!r})",
            hint="e.g. limit 20",
            kind="invalid_arguments",
            details={"field": "limit"},
        )
    idx = load(store)
    current_id = _current_id(store)
    every_item = filter not in OPEN_FILTERS
    waits = idx.wait_summaries(every_item=every_item)
    matched = [
        r
        for r in _ordered(idx, current_id, every_item=every_item)
        if wr.matches_filter(
            r, filter, current_id=current_id, waits=waits.get(r["id"], wr.NO_WAITS)
        )
    ]
    shown = matched[:limit] if limit is not None else matched
    if refresh and shown:
        if refresh_descriptors(store, [r["id"] for r in shown]):
            idx = load(store)
    return {
        "filter": filter,
        "current_work_item_id": current_id,
        "total": len(matched),
        "truncated": len(shown) < len(matched),
        "work_items": [
            view(idx, found, current_id=current_id, include_todo_list=include_todo_list)
            for found in _records(idx, shown, every_item=every_item)
        ],
        "counts": counts(idx),
    }


def _records(
    idx: WorkItemIndex, shown: list[WorkItemRecord], *, every_item: bool
) -> list[WorkItemRecord]:
    """The index's records of ``shown`` (refreshed descriptors included)."""
    if every_item:
        items = idx.items
        return [items.get(r["id"], r) for r in shown]
    return [idx.get(r["id"]) or r for r in shown]


def counts(idx: WorkItemIndex) -> dict[str, int]:
    """Items by readiness, a blocked item whose wait has fired counted as
    ``triggered_blocked`` (not ``blocked``): the counts sum to the total. The
    open ones from the head, the completed by count (a completed item's
    bucket is ``completed`` whatever its waits)."""
    out = {r: 0 for r in wr.STATUS_COUNTS}
    waits = idx.wait_summaries()
    for rec in idx.open_records():
        out[wr.status_bucket(rec, waits.get(rec["id"], wr.NO_WAITS))] += 1
    out["completed"] += idx.completed_count()
    return out


def readiness_counts(store: AgentStore) -> dict[str, int]:
    """``{runnable, waiting_for_operator, triggered_blocked, blocked, completed}``
    counts for ``holon status``, the console and ``ListWorkItems``."""
    return counts(load(store))
