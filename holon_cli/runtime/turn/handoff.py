"""What a settling turn handed to the background (runtime spec: Brief
Output Contract, "Acknowledgements are useful when work will continue
asynchronously"): the command tasks and child agents the message started
that are still running, and the external waits its turns recorded.

Read from durable records, never from the turn's memory, so a settle
replayed after a kill sees the same work: a task or child handle names the
message that started it (``parent_message_id``), a waiting intent the turn
that recorded it (``turn_id``; a replayed turn passes every turn id of the
message its journal knows).

``turn/settle.py`` turns a non-empty list into the turn's ``ack`` brief
("continuing in the background"), linked to the first task
(``related_task_id``); the task's result then comes back as a
``task_result`` whose own brief names the task again.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal, NotRequired, TypedDict

from holon_cli.store.agent_store import AgentStore

MAX_LISTED = 5


class Work(TypedDict):
    """One piece of work left running: a command task, a child agent (its
    task and agent) or an external wait."""

    kind: Literal["task", "child", "wait"]
    summary: str
    task_id: NotRequired[str]
    created_at: NotRequired[str]
    child_agent_id: NotRequired[str | None]
    waiting_intent_id: NotRequired[str]
    work_item_id: NotRequired[str | None]


def background_work(
    store: AgentStore, message_id: str | None, turn_ids: Collection[str]
) -> list[Work]:
    """Running tasks and children started for ``message_id``, then active
    waits recorded by ``turn_ids``, oldest first."""
    if not message_id:
        return []
    from holon_cli.model import task as tm
    from holon_cli.runtime.tasks.records import iter_records

    out: list[Work] = []
    for _d, rec in iter_records(store):
        if rec.get("parent_message_id") != message_id or not rec.get("promoted"):
            continue
        if tm.is_terminal(rec.get("status")):
            continue
        item: Work = {
            "kind": "child" if tm.is_child_task(rec) else "task",
            "task_id": rec["id"],
            "summary": str(rec.get("summary") or ""),
            "created_at": str(rec.get("created_at") or ""),
        }
        if tm.is_child_task(rec):
            item["child_agent_id"] = (rec.get("child") or {}).get("child_agent_id")
        out.append(item)
    out.sort(key=lambda i: (i.get("created_at", ""), i.get("task_id", "")))
    if turn_ids:
        from holon_cli.runtime.waiting import intents

        for w in intents.active(store):
            if w.get("turn_id") in turn_ids:
                out.append(
                    {
                        "kind": "wait",
                        "waiting_intent_id": w["id"],
                        "work_item_id": w.get("work_item_id"),
                        "summary": f"{w.get('source')}: {w.get('description')}",
                    }
                )
    return out


def _one(item: Work) -> str:
    summary = " ".join(str(item.get("summary") or "").split())[:80]
    if item["kind"] == "child":
        return f"child agent {item.get('child_agent_id')} ({item.get('task_id')}: {summary})"
    if item["kind"] == "task":
        return f"task {item.get('task_id')} ({summary})"
    return f"an external wait {item.get('waiting_intent_id')} ({summary})"


def ack_text(final_text: str, work: list[Work]) -> str:
    """The acknowledgement: the turn's own words, then what continues."""
    shown = [_one(i) for i in work[:MAX_LISTED]]
    more = f" and {len(work) - MAX_LISTED} more" if len(work) > MAX_LISTED else ""
    kinds = {i["kind"] for i in work}
    how = []
    if kinds & {"task", "child"}:
        how.append("results come back as task_result messages")
    if "wait" in kinds:
        how.append("a delivery to the trigger wakes the agent")
    line = f"Continuing in the background: {', '.join(shown)}{more}; {' and '.join(how)}."
    return f"{final_text.rstrip()}\n\n{line}" if final_text.strip() else line


def first_task_id(work: list[Work]) -> str | None:
    return next((str(i.get("task_id")) for i in work if i.get("task_id")), None)
