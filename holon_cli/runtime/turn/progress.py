"""What a settled turn did, as the settlement records it: its progress for
the no-progress guard (:func:`turn_progress`) and its working-memory delta
(:func:`memory_delta`, saved in the settlement so a replay applies these
very values)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holon_cli.runtime.budgets.guard import activation_of
from holon_cli.runtime.memory import working

if TYPE_CHECKING:
    from holon_cli.model.envelope import Envelope
    from holon_cli.model.memory import TurnMemoryDelta, WorkingMemoryState
    from holon_cli.model.turn import TurnProgress, TurnSettlement
    from holon_cli.runtime.turn.journal import Journal
    from holon_cli.runtime.workspace import WorkspaceBinding
    from holon_cli.store.agent_store import AgentStore


def turn_progress(
    msg: Envelope,
    journal: Journal,
    *,
    turn_id: str,
    bound_work_item_id: str | None,
    tool_calls: int,
    work_item_changed: bool,
    budget_stopped: bool,
) -> TurnProgress:
    """What this turn did, for the no-progress guard."""
    operator = msg.get("authority_class") == "operator_instruction"
    return {
        "turn_id": turn_id,
        "activation": activation_of(msg),
        "work_item_id": msg.get("work_item_id") or bound_work_item_id,
        "tool_calls": tool_calls,
        "work_item_changed": work_item_changed,
        "operator_input": operator or bool(journal.interject_ids),
        "budget_stopped": budget_stopped,
    }


def memory_delta(
    store: AgentStore,
    msg: Envelope,
    s: TurnSettlement,
    journal: Journal,
    *,
    turn_id: str,
    turn_index: int,
    focus: str | None,
    ws: WorkspaceBinding | None,
    wm: WorkingMemoryState,
    compacted: int,
) -> TurnMemoryDelta:
    """What this turn adds to working memory, saved in the settlement (a
    replay applies these very values)."""
    closure = s["closure"]
    waiting = closure.get("waiting_reason") if closure["outcome"] == "waiting" else None
    slept = s.get("sleep")
    if slept is not None:
        waiting = f"asleep ({slept.get('reason') or 'model_sleep'})"
    return working.turn_delta(
        store,
        msg,
        turn_id=turn_id,
        turn_index=turn_index,
        status=s["status"],
        focus=store.read_record()["state"].get("current_work_item_id") or focus,
        workspace_id=ws.workspace_id if ws else None,
        files_touched=journal.files,
        commands=journal.commands,
        completed_work_item=journal.completed_work_item,
        waiting=waiting,
        final_text=s["final_text"],
        prompted_revision=wm["working_memory_revision"],
        compacted_message_count=compacted,
    )
