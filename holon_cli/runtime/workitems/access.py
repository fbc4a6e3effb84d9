"""Shared access to the work plane: the mutation lock, the focus pointer and
lookups that fail with errors a caller can act on.

Locking: :func:`mutation` holds the agent lock (``store.lock()``) for a whole
read-validate-append-index cycle. The lock is not reentrant: never call a
mutating function of the work plane while already inside :func:`mutation`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from holon_cli.errors import NotFoundError, RejectedError, UsageError
from holon_cli.model import workitem as wm
from holon_cli.model.workitem import WorkItemRecord
from holon_cli.runtime.workitems.hints import TOOLS, Vocabulary
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.workitem_index import WorkItemIndex, load

if TYPE_CHECKING:
    from holon_cli.model.agent import AgentRecord
    from holon_cli.model.config import RuntimeConfig

# agent-state key of the continuation hold (see signals.continuation_hold)
HOLD_KEY: Final = "work_continuation_hold"


@contextmanager
def mutation(store: AgentStore) -> Iterator[tuple[WorkItemIndex, AgentRecord]]:
    """Hold the agent lock; yield the fresh index and the agent record. The
    caller mutates and calls ``save`` / ``store.write_record`` itself."""
    with store.lock():
        yield load(store), store.read_record()


def current_id(store: AgentStore) -> str | None:
    cur = store.read_record()["state"].get("current_work_item_id")
    return cur if isinstance(cur, str) else None


def not_found(store: AgentStore, work_item_id: str, vocab: Vocabulary = TOOLS) -> NotFoundError:
    return NotFoundError(
        f"unknown work item {work_item_id!r} for agent {store.agent_id!r}",
        hint=vocab.list_hint(),
        kind="work_item_not_found",
        details={"field": "work_item_id", "work_item_id": work_item_id},
    )


def require(
    store: AgentStore, idx: WorkItemIndex, work_item_id: Any, vocab: Vocabulary = TOOLS
) -> WorkItemRecord:
    if not isinstance(work_item_id, str) or not work_item_id.strip():
        raise UsageError(
            "work_item_id is required",
            hint="pass the id of a work item (wi_...)",
            kind="invalid_arguments",
            details={"field": "work_item_id"},
        )
    rec = idx.get(work_item_id.strip())
    if rec is None:
        raise not_found(store, work_item_id, vocab)
    if rec.get("agent_id") not in (None, store.agent_id):
        raise RejectedError(
            f"work item {work_item_id!r} belongs to agent {rec.get('agent_id')!r}, "
            f"not {store.agent_id!r}",
            hint="work items are per agent; use one of this agent's work items",
            kind="work_item_not_owned",
        )
    return rec


def require_open(rec: WorkItemRecord, what: str, hint: str) -> None:
    """Reject a mutation of a completed item (exit 4, kind ``work_item_completed``)."""
    if rec["state"] == "completed":
        wid = rec["id"]
        raise RejectedError(
            f"work item {wid} {what}",
            hint=hint,
            kind="work_item_completed",
            details={"field": "work_item_id", "work_item_id": wid},
        )


def require_work_item(
    store: AgentStore, work_item_id: str, *, vocab: Vocabulary = TOOLS
) -> WorkItemRecord:
    """The newest record of ``work_item_id`` (``NotFoundError`` when unknown)."""
    return wm.public_record(require(store, load(store), work_item_id, vocab))


def config_runtime() -> RuntimeConfig:
    """The ``runtime`` section of ``config.yaml`` (empty when absent)."""
    from holon_cli.store.config import load_config

    return load_config().get("runtime") or {}
