"""Waiting-plane tools: ``RecordExternalWait`` and ``CancelExternalWait``.

Thin adapters onto :mod:`holon_cli.runtime.waiting.intents`. A recorded wait
binds "I am waiting for X outside myself" to a work item (default: the
current one); the runtime never parses ``blocked_by``. The receipt carries
the agent's trigger URL, marked as a capability secret: the agent gives it
only to the external system it is configuring to wake it.

Effects reported through ``ctx.report``: ``external_wait`` (the recorded
intent: ``waiting_intent_id``, ``work_item_id``) and ``work_item_id`` (the
call's events bind to that item). The closure rule ("a turn that ends with
an active external wait on its current item is waiting") reads the intents
ledger itself, so a wait recorded in an earlier turn counts as well.
"""

from __future__ import annotations

from dataclasses import dataclass

from holon_cli.errors import HolonError, UsageError
from holon_cli.tools.base import ToolContext, ToolError, field_doc, tool

SECRET_NOTE = (
    "capability secret: give this URL only to the external system you are configuring "
    "to wake you; never repeat, store or forward it elsewhere"
)


def _tool_error(err: HolonError, field: str | None = None) -> ToolError:
    kind = "invalid_arguments" if isinstance(err, UsageError) else err.kind
    message, hint = err.said_on("tool")
    return ToolError(kind, message, recovery_hint=hint, field=field)


@dataclass(frozen=True)
class RecordExternalWaitArgs:
    description: str = field_doc("What you are waiting for, in words (e.g. 'CI run for PR 42').")
    source: str = field_doc("The external system that will signal it (e.g. 'github-actions').")
    external_ref: str | None = field_doc(
        "Optional stable reference in that system (URL, run id, ticket key).", default=None
    )
    work_item_id: str | None = field_doc(
        "The work item the wait belongs to; omit for the current work item.", default=None
    )


@tool(
    "RecordExternalWait",
    RecordExternalWaitArgs,
    description=(
        "Record that a work item waits for an external change (CI, review, a deploy). Returns the "
        "waiting_intent_id and your trigger URL: configure the external system to call that URL "
        "when the change happens. A delivery wakes you with its content as evidence; it never "
        "clears the blocker or completes the item. Cancel the wait with CancelExternalWait."
    ),
    guidance=(
        "When a work item waits on something outside you, set `blocked_by` with UpdateWorkItem and "
        "record the wait with RecordExternalWait; your trigger URL is a capability secret."
    ),
)
def record_external_wait(ctx: ToolContext, args: RecordExternalWaitArgs) -> dict[str, object]:
    from holon_cli.runtime.waiting import intents, triggers

    try:
        cap = triggers.show(ctx.store)
        rec = intents.record_wait(
            ctx.store,
            description=args.description,
            source=args.source,
            external_ref=args.external_ref,
            work_item_id=args.work_item_id,
            external_trigger_id=cap["external_trigger_id"],
            turn_id=ctx.turn_id,
        )
    except HolonError as err:
        field = "work_item_id" if "not_found" in err.kind else None
        raise _tool_error(err, field) from None
    ctx.report.external_wait = {
        "waiting_intent_id": rec["id"],
        "work_item_id": rec["work_item_id"],
        "kind": "external",
    }
    ctx.report.work_item_id = rec["work_item_id"]
    return {
        "waiting_intent_id": rec["id"],
        "work_item_id": rec["work_item_id"],
        "status": rec["status"],
        "trigger_url": cap["trigger_url"],
        "trigger_url_note": SECRET_NOTE,
        "summary": (
            f"Recorded wait {rec['id']} on {rec['work_item_id']}. Deliveries to the "
            "trigger URL wake you; "
            "the blocker stays until you clear it."
        ),
    }


@dataclass(frozen=True)
class CancelExternalWaitArgs:
    waiting_intent_id: str = field_doc("The id RecordExternalWait returned.")


@tool(
    "CancelExternalWait",
    CancelExternalWaitArgs,
    description=(
        "Cancel a recorded external wait (the external change happened or no longer matters). "
        "The trigger URL stays valid; this only removes the wait from the work item."
    ),
)
def cancel_external_wait(ctx: ToolContext, args: CancelExternalWaitArgs) -> dict[str, object]:
    from holon_cli.runtime.waiting import intents

    try:
        rec, changed = intents.cancel_wait(ctx.store, args.waiting_intent_id.strip())
    except HolonError as err:
        raise _tool_error(err, "waiting_intent_id") from None
    ctx.report.work_item_id = rec["work_item_id"]
    return {
        "waiting_intent_id": rec["id"],
        "work_item_id": rec["work_item_id"],
        "status": rec["status"],
        "changed": changed,
        "summary": f"Wait {rec['id']} is cancelled."
        if changed
        else f"Wait {rec['id']} was already cancelled; nothing changed.",
    }
