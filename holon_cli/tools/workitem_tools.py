"""Work-item tools: ``CreateWorkItem``, ``PickWorkItem``, ``UpdateWorkItem``,
``CompleteWorkItem``, ``GetWorkItem``, ``ListWorkItems``.

Thin adapters onto :mod:`holon_cli.runtime.workitems`: argument schemas come
from the dataclasses below; runtime errors become the Tool Error Envelope
(kind, message, ``recovery_hint``, ``field``).

Null versus absent: ``UpdateWorkItem.blocked_by`` defaults to the
:data:`~holon_cli.model.workitem.UNSET` sentinel. ``parse_args`` leaves an
omitted field at its default and turns an explicit ``null`` for an optional
field into ``None``, so the handler sees UNSET (keep the blocker), ``None``
(clear it) or text (set it) without any change to the framework.

Effects reported through ``ctx.report`` (:class:`~holon_cli.tools.base.ToolEffects`)
for the turn loop: ``work_item_mutated`` after any successful mutation
(resets the stale-reminder count), ``focus_changed`` with the new
``current_work_item_id`` (possibly ``None``) when the call changed focus, and
``completion_brief_id`` when ``CompleteWorkItem`` wrote a work_done brief.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from holon_cli.errors import BusyError, HolonError
from holon_cli.model.workitem import UNSET
from holon_cli.runtime import workitems as rt
from holon_cli.runtime.waiting.intents import cancel_for_work_item
from holon_cli.runtime.workitems.hints import round_completion_targets
from holon_cli.tools.base import ToolContext, ToolError, field_doc, tool

PlanStatus = Literal["draft", "ready", "needs_input"]
TodoState = Literal["pending", "in_progress", "completed"]
ListFilter = Literal["all", "current", "open", "queued", "blocked", "completed"]

T = TypeVar("T")


@dataclass(frozen=True)
class TodoItemArg:
    text: str = field_doc("Short progress marker.")
    state: TodoState = field_doc(
        "pending, in_progress (normally at most one) or completed.", default="pending"
    )


@dataclass(frozen=True)
class CreateWorkItemArgs:
    objective: str = field_doc("Short current-work target for a genuinely separate objective.")
    plan_status: PlanStatus | None = field_doc(
        "draft (default) while inspecting, ready when the plan is clear, needs_input for real "
        "ambiguity.",
        default=None,
    )
    plan: str | None = field_doc(
        "Optional initial plan prose; seeds work-items/<id>/plan.md. Later edit the file directly.",
        default=None,
    )
    todo_list: list[TodoItemArg] | None = field_doc(
        "Optional initial checklist (full snapshot).", default=None
    )


@dataclass(frozen=True)
class PickWorkItemArgs:
    work_item_id: str = field_doc("The open work item to make current.")
    reason: str | None = field_doc(
        "Why you switch; required when the current work item is still runnable.", default=None
    )


@dataclass(frozen=True)
class UpdateWorkItemArgs:
    work_item_id: str = field_doc("The work item to update.")
    objective: str | None = field_doc("Refined short target for the same work item.", default=None)
    plan_status: PlanStatus | None = field_doc(
        "draft, ready or needs_input (needs_input releases focus).", default=None
    )
    todo_list: list[TodoItemArg] | None = field_doc(
        "The COMPLETE current checklist; replaces the stored one.", default=None
    )
    blocked_by: str | None = field_doc(
        "Blocker text: sets the blocker (releases focus when current). Pass null to clear it; "
        "omit to leave it unchanged.",
        default=cast(Any, UNSET),
    )
    recheck_after: int | None = field_doc(
        "Milliseconds until a one-shot blocker recheck reminder; only together with blocked_by.",
        default=None,
    )


@dataclass(frozen=True)
class CompleteWorkItemArgs:
    work_item_id: str = field_doc("The work item whose objective is done.")


@dataclass(frozen=True)
class GetWorkItemArgs:
    work_item_id: str = field_doc("The work item to read.")
    include_todo_list: bool | None = field_doc(
        "Include the todo list (default true).", default=None
    )


@dataclass(frozen=True)
class ListWorkItemsArgs:
    filter: ListFilter | None = field_doc(
        "all (default), current, open, queued, blocked or completed.", default=None
    )
    limit: int | None = field_doc("At most this many items (default 20).", default=None)
    include_todo_list: bool | None = field_doc(
        "Include each item's todo list (default false; current_todo is always there).", default=None
    )


def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except HolonError as err:
        message, hint = err.said_on("tool")
        raise ToolError(
            err.kind,
            message,
            details=dict(err.details or {}),
            recovery_hint=hint,
            retryable=isinstance(err, BusyError),
        ) from None


def _todos(items: list[TodoItemArg] | None) -> list[dict[str, str]] | None:
    return None if items is None else [{"text": t.text, "state": t.state} for t in items]


def _bind(result: dict[str, object]) -> dict[str, object]:
    """Lift the item id to the top so the engine can bind the call's events."""
    item = result.get("work_item")
    if isinstance(item, dict):
        result["work_item_id"] = item.get("id")
    return result


def _mutated(
    ctx: ToolContext, result: dict[str, object], *, focus_changed: bool
) -> dict[str, object]:
    _bind(result)
    ctx.report.work_item_mutated = True
    if focus_changed:
        ctx.report.focus_changed = True
        current = result.get("current_work_item_id")
        ctx.report.current_work_item_id = current if isinstance(current, str) else None
    brief_id = result.get("brief_id")
    if isinstance(brief_id, str) and brief_id:
        ctx.report.completion_brief_id = brief_id
    return result


@tool(
    "CreateWorkItem",
    CreateWorkItemArgs,
    description=(
        "Create an open work item for a genuinely separate objective, with its plan file "
        "(work-items/<id>/plan.md, returned as plan_artifact.path). Does not change the current "
        "work item."
    ),
    guidance=(
        "Create a draft work item when inspection is needed before the plan is ready; then edit "
        "plan_artifact.path "
        "directly with normal file tools. Do not create a new item just to narrow the current "
        "one: update it instead."
    ),
)
def create_work_item(ctx: ToolContext, args: CreateWorkItemArgs) -> dict[str, object]:
    res = _run(
        rt.create_work_item,
        ctx.store,
        args.objective,
        plan_status=args.plan_status,
        plan=args.plan,
        todo_list=_todos(args.todo_list),
        source="agent",
        turn_id=ctx.turn_id,
    )
    return _mutated(ctx, res, focus_changed=False)


@tool(
    "PickWorkItem",
    PickWorkItemArgs,
    description=(
        "Make an open work item the current one. Returns the new and previous current items."
    ),
    guidance=(
        "Give a reason when switching away from runnable current work. Picking a blocked item is "
        "for review; it stays blocked until you clear blocked_by."
    ),
)
def pick_work_item(ctx: ToolContext, args: PickWorkItemArgs) -> dict[str, object]:
    res = _run(
        rt.pick_work_item,
        ctx.store,
        args.work_item_id,
        reason=args.reason,
        source="agent",
        turn_id=ctx.turn_id,
    )
    return _mutated(ctx, res, focus_changed=res["switch_kind"] != "reaffirm")


@tool(
    "UpdateWorkItem",
    UpdateWorkItemArgs,
    description=(
        "Update a work item: objective, plan_status, the full todo_list snapshot, or blocked_by "
        "(text sets it, null clears it, omitted keeps it). Plan body changes go in the plan file, "
        "not here."
    ),
    guidance=(
        "Update after material progress: a file change, a verification result, a blocker, a "
        "finished inspection. "
        "Blocking the current item or setting needs_input releases focus; clearing a blocker does "
        "not re-pick."
    ),
)
def update_work_item(ctx: ToolContext, args: UpdateWorkItemArgs) -> dict[str, object]:
    res = _run(
        rt.update_work_item,
        ctx.store,
        args.work_item_id,
        objective=args.objective,
        plan_status=args.plan_status,
        todo_list=_todos(args.todo_list),
        blocked_by=args.blocked_by,
        recheck_after_ms=args.recheck_after,
        source="agent",
        turn_id=ctx.turn_id,
    )
    return _mutated(ctx, res, focus_changed=bool(res["focus_released"]))


@tool(
    "CompleteWorkItem",
    CompleteWorkItemArgs,
    description=(
        "Mark a work item completed. Write the operator-facing completion report as your "
        "assistant text "
        "in the same round; it becomes the work item's report. Takes no report argument."
    ),
    guidance=(
        "Complete one work item per round, after updating its todos; the same-round text is the "
        "durable report."
    ),
)
def complete_work_item(ctx: ToolContext, args: CompleteWorkItemArgs) -> dict[str, object]:
    targets = round_completion_targets(ctx.round_calls)
    res = _run(
        rt.complete_work_item,
        ctx.store,
        args.work_item_id,
        report=ctx.round_text,
        source="agent",
        ambiguous_round=len(targets) > 1,
        turn_id=ctx.turn_id,
        related_task_id=(ctx.message or {}).get("task_id"),
        cancel_waits=cancel_for_work_item,
    )
    return _mutated(ctx, res, focus_changed=bool(res["focus_released"]))


@tool(
    "GetWorkItem",
    GetWorkItemArgs,
    description=(
        "Read one work item: fields, readiness, todo list and the plan artifact descriptor with a "
        "bounded preview (never the full plan)."
    ),
)
def get_work_item(ctx: ToolContext, args: GetWorkItemArgs) -> dict[str, object]:
    include = True if args.include_todo_list is None else args.include_todo_list
    return _bind(_run(rt.get_work_item, ctx.store, args.work_item_id, include_todo_list=include))


@tool(
    "ListWorkItems",
    ListWorkItemsArgs,
    description=(
        "List work items (current first, then by candidate class) with readiness, current todo "
        "and plan preview."
    ),
)
def list_work_items(ctx: ToolContext, args: ListWorkItemsArgs) -> dict[str, object]:
    return _run(
        rt.list_work_items,
        ctx.store,
        filter=args.filter or "all",
        limit=20 if args.limit is None else args.limit,
        include_todo_list=bool(args.include_todo_list),
    )
