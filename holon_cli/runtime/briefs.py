"""Briefs (the operator-facing output layer) and transcript entries.

A brief is an explicit record, never inferred from model text:
``kind`` is ``ack``, ``result`` or ``failure``; ``visibility`` is
``action_required``, ``work_done`` or ``turn_result`` (spec: Brief Output
Contract). Both land in their own ledgers and as events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from holon_cli import clock
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.events import BriefRecordedData
    from holon_cli.model.turn import BriefRecord, TranscriptEntry

BRIEF_KINDS = ("ack", "result", "failure")
VISIBILITIES = ("action_required", "work_done", "turn_result")


def write_brief(
    store: AgentStore,
    *,
    kind: str,
    text: str,
    visibility: str = "turn_result",
    work_item_id: str | None = None,
    related_message_id: str | None = None,
    related_task_id: str | None = None,
    title: str | None = None,
    attachments: list[dict[str, object]] | None = None,
    turn_id: str | None = None,
    workspace_id: str | None = None,
) -> BriefRecord:
    """Append one brief; it records the workspace active when it was written
    (``workspace_id``, read from the agent record unless given)."""
    assert kind in BRIEF_KINDS and visibility in VISIBILITIES
    if workspace_id is None:
        from holon_cli.runtime.workspace import workspace_for

        workspace_id = workspace_for(store.layout.home, store.read_record()["state"]).workspace_id
    rec: BriefRecord = {
        "v": 2,  # v2: snake_case field names (v1: agentId, workItemId, related*Id)
        "id": clock.new_id("brf"),
        "agent_id": store.agent_id,
        "at": clock.now_iso(),
        "kind": kind,
        "visibility": visibility,
        "text": text,
    }
    if title:
        rec["title"] = title
    if work_item_id:
        rec["work_item_id"] = work_item_id
    if related_message_id:
        rec["related_message_id"] = related_message_id
    if related_task_id:
        rec["related_task_id"] = related_task_id
    if attachments:
        rec["attachments"] = attachments
    if turn_id:
        rec["turn_id"] = turn_id
    if workspace_id:
        rec["workspace_id"] = workspace_id
    store.ledger("briefs").append(rec)
    data: BriefRecordedData = {
        "brief_id": rec["id"],
        "kind": kind,
        "visibility": visibility,
        "text_preview": text[:280],
    }
    if title:
        data["title"] = title
    store.emit(
        "brief_recorded",
        data,
        work_item_id=work_item_id,
        message_id=related_message_id,
        turn_id=turn_id,
    )
    return rec


def write_transcript(store: AgentStore, kind: str, **fields: Any) -> TranscriptEntry:
    """Append one transcript entry (``message``, ``assistant_round``, ``tool_result``,
    ``runtime_failure``, ``turn_terminal``, ...): the kind's own ``fields``
    after the head every entry has."""
    head: TranscriptEntry = {"v": 1, "id": clock.new_id("trn"), "at": clock.now_iso(), "kind": kind}
    rec = {**head, **{k: v for k, v in fields.items() if v is not None}}
    return store.ledger("transcript").append(cast("TranscriptEntry", rec))
