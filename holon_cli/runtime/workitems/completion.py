"""Completing a work item: the state change (blocker and recheck cleared,
focus released when it was the current item), then the item's waiting
intents cancelled through the waiting plane's hook, and the completion
report promoted (``result_summary``, a delivery summary and a ``work_done``
result brief) only when the rules below allow it.

Holds the agent lock for its read-validate-append-index cycle like the
other mutations (:mod:`.mutations`); events are emitted after it is
released.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.model import workitem as wm
from holon_cli.model.workitem import DeliverySummaryRecord
from holon_cli.runtime.workitems.access import mutation, require, require_open
from holon_cli.runtime.workitems.hints import (
    COMPLETION_REPORT_AMBIGUOUS,
    COMPLETION_REPORT_NOT_FOCUSED,
    MISSING_COMPLETION_REPORT,
    Vocabulary,
    for_source,
)
from holon_cli.runtime.workitems.views import completion_report, view
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.workitem_index import WorkItemIndex, append_item, append_report, save

if TYPE_CHECKING:
    from collections.abc import Callable

    from holon_cli.model.events import WorkItemCompletedData
    from holon_cli.model.trigger import WaitingIntent


def complete_work_item(
    store: AgentStore,
    work_item_id: str,
    *,
    report: str | None = None,
    source: str = "agent",
    vocab: Vocabulary | None = None,
    ambiguous_round: bool = False,
    turn_id: str | None = None,
    related_task_id: str | None = None,
    cancel_waits: Callable[[AgentStore, str], list[WaitingIntent]],
) -> dict[str, Any]:
    """Mark a work item completed (clears blocker and recheck; releases focus).

    ``cancel_waits(store, work_item_id)``: the waiting plane's hook that
    cancels the item's waiting intents and returns them (runtime spec: a
    completed item's waits end with it); the caller passes
    ``runtime.waiting.intents.cancel_for_work_item`` (work items do not
    import the waiting plane, which reads them).

    ``source="agent"``: ``report`` is the same assistant round's text. It is
    promoted -- into ``result_summary``, a ``DeliverySummaryRecord`` and a
    ``work_done`` result brief -- only after the state change succeeds, and
    only when it is non-empty, the item was the focused one, and the round
    holds no other completion (``ambiguous_round``): the runtime does not
    guess which report belongs to which item. ``source="operator"``: the
    explicit ``report`` becomes ``result_summary``. Unfinished todos never
    block completion; they produce the structured ``unfinished_todos`` warning.
    """
    vocab = for_source(source, vocab)
    text = report.strip() if isinstance(report, str) else ""
    ds_rec: DeliverySummaryRecord | None = None
    with mutation(store) as (idx, agent):
        rec = require(store, idx, work_item_id, vocab)
        wid = rec["id"]
        require_open(
            rec, "is already completed", "nothing to do; create a new work item for follow-up work"
        )
        state = agent["state"]
        focused = state.get("current_work_item_id") == wid
        unfinished = wm.unfinished_todos_warning(rec.get("todo_list") or [])
        promote, refused = _report_promotion(source, text, ambiguous_round, focused, wid)
        warnings = [w for w in (unfinished, refused) if w]
        now = clock.now_iso()
        rec = append_item(store, idx, _completed(rec, text if promote else None, now), "completed")
        if focused:
            state["current_work_item_id"] = None
            store.write_record(agent)
        if promote and source != "operator":
            ds_rec = _delivery_summary(store, idx, wid, text, now, turn_id, unfinished)
        save(store, idx)
        current_id = state.get("current_work_item_id")
    # after the completion is written: RecordExternalWait re-checks under the same lock
    cancelled = cancel_waits(store, wid)
    brief_id = (
        _result_brief(store, rec, text, turn_id, related_task_id) if ds_rec is not None else None
    )
    data = _completed_data(rec, source, promote, ds_rec, brief_id, focused, unfinished, warnings)
    store.emit("work_item_completed", data, work_item_id=wid, turn_id=turn_id)
    return {
        "work_item": view(idx, rec, current_id=current_id),
        "completion_report": completion_report(idx, rec),
        "delivery_summary_id": data["delivery_summary_id"],
        "brief_id": brief_id,
        "focus_released": focused,
        "current_work_item_id": current_id,
        "note": _completed_note(wid, len(cancelled), focused, vocab),
        "cancelled_waiting_intent_ids": [w["id"] for w in cancelled],
        "warnings": warnings,
    }


def _completed_note(wid: str, cancelled: int, focused: bool, vocab: Vocabulary) -> str:
    note = f"{wid} completed."
    if cancelled:
        note += f" Its {cancelled} waiting intent(s) were cancelled."
    if focused:
        note += f" Focus released; no work item is current: {vocab.pick()} for the next one."
    return note


def _report_promotion(
    source: str, text: str, ambiguous_round: bool, focused: bool, wid: str
) -> tuple[bool, dict[str, Any] | None]:
    """Whether the completion report is promoted, else the warning saying why
    not. An operator's explicit report is promoted when non-empty (no
    warning); an agent's needs text, one completion in the round, and focus."""
    if source == "operator":
        return bool(text), None
    if not text:
        return False, {"kind": "missing_completion_report", "message": MISSING_COMPLETION_REPORT}
    if ambiguous_round:
        return False, {
            "kind": "completion_report_ambiguous",
            "message": COMPLETION_REPORT_AMBIGUOUS,
        }
    if not focused:
        return False, {
            "kind": "completion_report_not_focused",
            "message": COMPLETION_REPORT_NOT_FOCUSED.format(wid=wid),
        }
    return True, None


def _completed(rec: wm.WorkItemRecord, summary: str | None, now: str) -> wm.WorkItemRecord:
    """The completed revision of ``rec``: blocker and recheck cleared."""
    return {
        **rec,
        "state": "completed",
        "blocked_by": None,
        "recheck_at": None,
        "recheck_consumed_at": None,
        "result_summary": summary,
        "completed_at": now,
        "updated_at": now,
    }


def _result_brief(
    store: AgentStore,
    rec: wm.WorkItemRecord,
    text: str,
    turn_id: str | None,
    related_task_id: str | None = None,
) -> str:
    """Write the promoted report as a ``work_done`` result brief; its id
    (``related_task_id``: the task whose result drove the completing turn)."""
    from holon_cli.runtime.briefs import write_brief

    brief = write_brief(
        store,
        kind="result",
        text=text,
        visibility="work_done",
        work_item_id=rec["id"],
        related_task_id=related_task_id,
        turn_id=turn_id,
        title=rec["objective"][:200],
    )
    brief_id: str = brief["id"]
    return brief_id


def _delivery_summary(
    store: AgentStore,
    idx: WorkItemIndex,
    wid: str,
    text: str,
    now: str,
    turn_id: str | None,
    unfinished: dict[str, Any] | None,
) -> DeliverySummaryRecord:
    """Append the promoted assistant-round report as a delivery summary."""
    ds_rec = wm.new_delivery_summary(
        summary_id=clock.new_id("dsum"),
        agent_id=store.agent_id,
        work_item_id=wid,
        text=text,
        source="assistant_round",
        created_at=now,
        turn_id=turn_id,
        warnings=[unfinished] if unfinished else None,
    )
    append_report(store, idx, ds_rec)
    return ds_rec


def _completed_data(
    rec: wm.WorkItemRecord,
    source: str,
    promote: bool,
    ds_rec: DeliverySummaryRecord | None,
    brief_id: str | None,
    focused: bool,
    unfinished: dict[str, Any] | None,
    warnings: list[dict[str, Any]],
) -> WorkItemCompletedData:
    """The ``work_item_completed`` event's data."""
    counts = wm.todo_counts(rec.get("todo_list") or [])
    return {
        "objective": rec["objective"],
        "source": source,
        "report_promoted": promote,
        "delivery_summary_id": ds_rec["id"] if ds_rec else None,
        "brief_id": brief_id,
        "completed_with_unfinished_todos": unfinished is not None,
        "unfinished_todo_count": counts["pending"] + counts["in_progress"],
        "pending_todo_count": counts["pending"],
        "in_progress_todo_count": counts["in_progress"],
        "focus_released": focused,
        "warnings": [w["kind"] for w in warnings],
    }
