"""Work items (the work plane). Placeholder surface used by admission until
the work-plane module lands: ``require_work_item`` checks the ledger."""

from __future__ import annotations

from typing import Any

from holon_cli.errors import NotFoundError
from holon_cli.store.agent_store import AgentStore


def require_work_item(store: AgentStore, work_item_id: str) -> dict[str, Any]:
    found: dict[str, Any] | None = None
    for _, _, rec in store.ledger("work_items").scan(0):
        if rec.get("id") == work_item_id:
            found = rec
    if found is None:
        raise NotFoundError(f"unknown work item {work_item_id!r} for agent {store.agent_id!r}", hint="list work items with `holon workitem list`")
    return found
