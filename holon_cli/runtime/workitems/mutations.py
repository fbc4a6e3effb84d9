"""Work-item mutations: create, pick, update (complete: :mod:`.completion`).

Each one holds the agent lock for its whole read-validate-append-index cycle
(:func:`~holon_cli.runtime.workitems.access.mutation`) and rewrites the agent
record itself while holding it; events are emitted after the lock is released.

Focus
  ``AgentState.current_work_item_id`` (in the agent record) is the one focus
  pointer. It changes only by explicit action: ``pick``, or the release that
  happens inside the mutation that makes the current item non-runnable
  (complete, block, needs_input). The runtime never re-picks.

Hints and warnings are worded for the caller: ``vocab`` when given, else the
CLI's words for ``source="operator"`` and the model's tool words otherwise
(:mod:`holon_cli.runtime.workitems.hints`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.errors import UsageError
from holon_cli.model import workitem as wm
from holon_cli.model import workitem_readiness as wr
from holon_cli.model.workitem import UNSET, Unset
from holon_cli.runtime.workitems.access import (
    HOLD_KEY,
    config_runtime,
    mutation,
    require,
    require_open,
)
from holon_cli.runtime.workitems.hints import BINDING_NOTE, Vocabulary, for_source
from holon_cli.runtime.workitems.views import view
from holon_cli.runtime.workspace import workspace_for
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import atomic_write_text
from holon_cli.store.workitem_index import append_item, describe_file, plan_path, save

if TYPE_CHECKING:
    from holon_cli.model.events import (
        WorkItemCreatedData,
        WorkItemFocusReleasedData,
        WorkItemPickedData,
        WorkItemUpdatedData,
    )

DEFAULT_RECHECK_AFTER_MS = 30 * 60 * 1000


def default_recheck_after_ms() -> int:
    value = config_runtime().get("default_recheck_after_ms")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return DEFAULT_RECHECK_AFTER_MS


def _deadline(ms: int) -> str:
    return clock.iso(clock.now() + ms / 1000.0)


def create_work_item(
    store: AgentStore,
    objective: str,
    *,
    plan_status: str | None = None,
    plan: str | None = None,
    todo_list: list[Any] | None = None,
    source: str = "agent",
    vocab: Vocabulary | None = None,
    turn_id: str | None = None,
) -> dict[str, Any]:
    """Create an open work item and its plan file. Focus is never changed:
    this is also the control-plane enqueue path (no message is admitted)."""
    vocab = for_source(source, vocab)
    with vocab.worded():
        objective = wm.validate_objective(objective)
        status = wm.validate_plan_status(plan_status) if plan_status is not None else "draft"
        todos = wm.normalize_todo_list(todo_list) if todo_list is not None else []
    if plan is not None and not isinstance(plan, str):
        raise UsageError("plan must be text", kind="invalid_arguments", details={"field": "plan"})
    wid = clock.new_id("wi")
    path = plan_path(store, wid)
    body = plan if plan and plan.strip() else wm.default_plan_text(objective, wid)
    atomic_write_text(path, body if body.endswith("\n") else body + "\n")
    desc = describe_file(path)
    with mutation(store) as (idx, agent):
        state = agent["state"]
        rec = wm.new_work_item_record(
            work_item_id=wid,
            agent_id=store.agent_id,
            workspace_id=workspace_for(store.layout.home, state).workspace_id,
            objective=objective,
            plan_status=status,
            todo_list=todos,
            plan_artifact=desc,
            created_at=clock.now_iso(),
        )
        rec = append_item(store, idx, rec, "created")
        save(store, idx)
        current_id = state.get("current_work_item_id")
    data: WorkItemCreatedData = {
        "objective": objective,
        "plan_status": status,
        "todo_count": len(todos),
        "plan_path": str(path),
        "plan_seeded": bool(plan and plan.strip()),
        "source": source,
    }
    store.emit("work_item_created", data, work_item_id=wid, turn_id=turn_id)
    note = (
        f"Created {wid}; focus unchanged (current: {current_id})."
        if current_id
        else f"Created {wid}. No work item is current: {vocab.pick(wid)} to make it current."
    )
    return {
        "work_item": view(idx, rec, current_id=current_id),
        "current_work_item_id": current_id,
        "note": f"{note} Edit the plan file directly: {path}",
        "warnings": wm.todo_warnings(todos),
    }


def pick_work_item(
    store: AgentStore,
    work_item_id: str,
    *,
    reason: str | None = None,
    source: str = "agent",
    vocab: Vocabulary | None = None,
    turn_id: str | None = None,
) -> dict[str, Any]:
    """Set the focus pointer. A ``reason`` is required only when switching away
    from a runnable current item; missing, it is a warning (phase one), and
    the ``work_item_picked`` event says ``reason_required``/``reason_missing``.
    The reason lives only on that event."""
    vocab = for_source(source, vocab)
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else None
    with mutation(store) as (idx, agent):
        rec = require(store, idx, work_item_id, vocab)
        wid = rec["id"]
        require_open(
            rec,
            "is completed and cannot be picked",
            vocab.pick_completed_hint(),
        )
        state = agent["state"]
        prev_id = state.get("current_work_item_id")
        prev = idx.get(prev_id) if isinstance(prev_id, str) else None
        prev_open = prev is not None and prev.get("state") == "open"
        prev_readiness = wr.readiness(prev, idx.waits_for(prev)) if prev and prev_open else None
        cur_readiness = wr.readiness(rec, idx.waits_for(rec))
        switch_kind, reason_required = _switch_kind(prev_id, wid, prev_open, prev_readiness)
        if prev_id != wid or state.get(HOLD_KEY):
            state["current_work_item_id"] = wid
            if state.get(HOLD_KEY):
                state[HOLD_KEY] = None  # picking is the explicit action that lifts a hold
            store.write_record(agent)
    reason_missing = reason_required and reason is None
    data: WorkItemPickedData = {
        "agent_id": store.agent_id,
        "previous_work_item_id": prev_id,
        "current_work_item_id": wid,
        "reason": reason,
        "previous_readiness": prev_readiness,
        "current_readiness": cur_readiness,
        "switch_kind": switch_kind,
        "reason_required": reason_required,
        "reason_missing": reason_missing,
        "source": source,
    }
    store.emit("work_item_picked", data, work_item_id=wid, turn_id=turn_id)
    return {
        "work_item": view(idx, rec, current_id=wid),
        "previous_work_item": view(idx, prev, current_id=wid)
        if prev is not None and prev_id != wid
        else None,
        "current_work_item_id": wid,
        "switch_kind": switch_kind,
        "binding": BINDING_NOTE.format(wid=wid),
        "warnings": _pick_warnings(vocab, data),
    }


def _switch_kind(
    prev_id: str | None, wid: str, prev_open: bool, prev_readiness: str | None
) -> tuple[str, bool]:
    """What a pick does to the focus, and whether it needs a reason: only
    switching away from a runnable open item does."""
    if prev_id == wid:
        return "reaffirm", False
    if prev_open and prev_readiness == "runnable":
        return "explicit_focus_override", True
    if prev_open:
        return "switch_from_non_runnable", False
    return "select", False


def _pick_warnings(vocab: Vocabulary, data: WorkItemPickedData) -> list[dict[str, Any]]:
    """The pick's warnings: a missing reason, then a non-runnable pick."""
    warnings: list[dict[str, Any]] = []
    prev_id = data["previous_work_item_id"]
    if data["reason_missing"]:
        warnings.append(
            {
                "kind": "pick_reason_missing",
                "message": vocab.pick_reason_missing(prev_id),
                "previous_work_item_id": prev_id,
            }
        )
    cur_readiness = data["current_readiness"]
    if cur_readiness != "runnable":
        warnings.append(
            {
                "kind": "picked_non_runnable",
                "message": vocab.picked_non_runnable(data["current_work_item_id"], cur_readiness),
                "readiness": cur_readiness,
            }
        )
    return warnings


def update_work_item(
    store: AgentStore,
    work_item_id: str,
    *,
    objective: str | None = None,
    plan_status: str | None = None,
    todo_list: list[Any] | None = None,
    blocked_by: str | None | Unset = UNSET,
    recheck_after_ms: int | None = None,
    source: str = "agent",
    vocab: Vocabulary | None = None,
    turn_id: str | None = None,
) -> dict[str, Any]:
    """Update mutable fields. ``blocked_by``: :data:`UNSET` keeps it, ``None``
    clears it (with ``recheck_at``/``recheck_consumed_at``), text sets it with
    a fresh recheck deadline (``recheck_after_ms`` or the default). Focus is
    released inside this mutation when it blocks the current item or marks
    it ``needs_input``; clearing a blocker never re-picks."""
    vocab = for_source(source, vocab)
    upd = _validated_update(vocab, objective, plan_status, todo_list, blocked_by, recheck_after_ms)
    with mutation(store) as (idx, agent):
        rec = require(store, idx, work_item_id, vocab)
        wid = rec["id"]
        require_open(
            rec,
            "is completed; completed work items cannot be updated",
            "create a new work item for follow-up work",
        )
        new, changed = _apply_update(rec, upd)
        state = agent["state"]
        current_id = state.get("current_work_item_id")
        release_reason = _release_reason(upd) if current_id == wid else None
        rec = append_item(store, idx, new, "updated")
        if release_reason:
            state["current_work_item_id"] = None
            store.write_record(agent)
            current_id = None
        save(store, idx)
    focus_released = release_reason is not None
    _emit_updated(store, rec, upd, changed, release_reason, source=source, turn_id=turn_id)
    notes = []
    if focus_released:
        notes.append(
            f"Focus released: {wid} is no longer current ({release_reason}). "
            f"No work item is current; {vocab.pick()} for the next one."
        )
    if upd.blocker is None and current_id != wid:
        notes.append(f"Blocker cleared; {wid} is not current: {vocab.pick(wid)} to resume it.")
    return {
        "work_item": view(idx, rec, current_id=current_id),
        "changed": changed,
        "focus_released": focus_released,
        "current_work_item_id": current_id,
        "note": " ".join(notes) or None,
        "warnings": wm.todo_warnings(rec["todo_list"]) if "todo_list" in changed else [],
    }


@dataclass(frozen=True)
class _Update:
    """Validated update fields: ``None`` leaves a field as it is, except
    ``blocker``, where :data:`UNSET` keeps it and ``None`` clears it."""

    objective: str | None
    plan_status: str | None
    todos: list[wm.TodoItem] | None
    blocker: str | None | Unset
    recheck_after_ms: int | None


def _validated_update(
    vocab: Vocabulary,
    objective: str | None,
    plan_status: str | None,
    todo_list: list[Any] | None,
    blocked_by: str | None | Unset,
    recheck_after_ms: int | None,
) -> _Update:
    """Check the arguments before any lock is taken, worded for the caller."""
    if (
        objective is None
        and plan_status is None
        and todo_list is None
        and isinstance(blocked_by, Unset)
        and recheck_after_ms is None
    ):
        raise UsageError(
            "nothing to update",
            hint=vocab.nothing_to_update_hint(),
            kind="invalid_arguments",
        )
    with vocab.worded():
        upd = _Update(
            objective=wm.validate_objective(objective) if objective is not None else None,
            plan_status=wm.validate_plan_status(plan_status) if plan_status is not None else None,
            todos=wm.normalize_todo_list(todo_list) if todo_list is not None else None,
            blocker=(
                wm.validate_blocked_by(blocked_by) if isinstance(blocked_by, str) else blocked_by
            ),
            recheck_after_ms=(
                wm.validate_recheck_after_ms(recheck_after_ms)
                if recheck_after_ms is not None
                else None
            ),
        )
    if upd.recheck_after_ms is not None and not isinstance(upd.blocker, str):
        message, hint = vocab.recheck_without_blocker()
        raise UsageError(
            message, hint=hint, kind="invalid_arguments", details={"field": "recheck_after"}
        )
    return upd


def _apply_update(rec: wm.WorkItemRecord, upd: _Update) -> tuple[wm.WorkItemRecord, list[str]]:
    """The next revision of ``rec`` and the names of the fields that changed."""
    new: wm.WorkItemRecord = {**rec}
    changed: list[str] = []
    if upd.objective is not None:
        new["objective"] = upd.objective
        changed.append("objective")
    if upd.plan_status is not None:
        new["plan_status"] = upd.plan_status
        changed.append("plan_status")
    if upd.todos is not None:
        new["todo_list"] = upd.todos
        changed.append("todo_list")
    if isinstance(upd.blocker, str):
        new["blocked_by"] = upd.blocker
        new["recheck_at"] = _deadline(upd.recheck_after_ms or default_recheck_after_ms())
        new["recheck_consumed_at"] = None
        changed.append("blocked_by")
    elif upd.blocker is None:
        new["blocked_by"] = None
        new["recheck_at"] = None
        new["recheck_consumed_at"] = None
        changed.append("blocked_by")
    new["updated_at"] = clock.now_iso()
    return new, changed


def _release_reason(upd: _Update) -> str | None:
    """Why updating the current item releases the focus, if it does."""
    if isinstance(upd.blocker, str):
        return "blocked"
    if upd.plan_status == "needs_input":
        return "needs_input"
    return None


def _emit_updated(
    store: AgentStore,
    rec: wm.WorkItemRecord,
    upd: _Update,
    changed: list[str],
    release_reason: str | None,
    *,
    source: str,
    turn_id: str | None,
) -> None:
    """``work_item_updated``, then ``work_item_focus_released`` when it was."""
    wid = rec["id"]
    data: WorkItemUpdatedData = {
        "changed": changed,
        "objective": rec["objective"] if "objective" in changed else None,
        "plan_status": rec["plan_status"],
        "blocked_by": rec["blocked_by"],
        "blocker_cleared": upd.blocker is None,
        "recheck_at": rec["recheck_at"],
        "todo_counts": wm.todo_counts(rec["todo_list"]) if "todo_list" in changed else None,
        "focus_released": release_reason is not None,
        "source": source,
    }
    store.emit("work_item_updated", data, work_item_id=wid, turn_id=turn_id)
    if release_reason is not None:
        released: WorkItemFocusReleasedData = {"reason": release_reason, "source": source}
        store.emit("work_item_focus_released", released, work_item_id=wid, turn_id=turn_id)
