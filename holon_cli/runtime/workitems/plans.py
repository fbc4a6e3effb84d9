"""Plan artifacts: keep each item's plan descriptor in step with its file.

``work-items/<id>/plan.md`` is edited directly by the agent and the operator;
the record keeps a descriptor (path, hash, size, preview). A refresh appends
a ``plan_artifact_refreshed`` revision and emits ``plan_artifact_changed`` or
``plan_artifact_missing``. A deleted file is reported, never recreated.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from holon_cli.model import workitem as wm
from holon_cli.model.workitem import PlanDescriptor
from holon_cli.runtime.workitems.access import mutation, require
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.workitem_index import (
    append_item,
    describe_file,
    load,
    save,
    unchanged_on_disk,
)

if TYPE_CHECKING:
    from holon_cli.model.events import PlanArtifactChangedData, PlanArtifactMissingData


class PlanChange(TypedDict):
    """One plan descriptor :func:`refresh` brought up to date."""

    work_item_id: str
    change: str  # changed | missing
    plan_artifact: PlanDescriptor


class PlanRefresh(TypedDict):
    """What :func:`refresh_plan_descriptor` found."""

    work_item_id: str
    changed: bool
    exists: bool
    plan_artifact: PlanDescriptor


def _plan_events(
    store: AgentStore,
    wid: str,
    old: PlanDescriptor | None,
    new: PlanDescriptor,
    turn_id: str | None,
) -> None:
    if old and old.get("exists", True) and not new.get("exists"):
        data: PlanArtifactMissingData = {"path": new["path"], "previous_hash": old.get("hash")}
        store.emit(
            "plan_artifact_missing",
            data,
            work_item_id=wid,
            turn_id=turn_id,
        )
    elif new.get("exists"):
        changed: PlanArtifactChangedData = {
            "path": new["path"],
            "hash": new["hash"],
            "previous_hash": old.get("hash") if old else None,
            "bytes": new["bytes"],
            "restored": bool(old and not old.get("exists", True)),
        }
        store.emit(
            "plan_artifact_changed",
            changed,
            work_item_id=wid,
            turn_id=turn_id,
        )


def refresh(
    store: AgentStore, ids: Iterable[str], *, turn_id: str | None = None
) -> list[PlanChange]:
    """Bring the plan descriptors of ``ids`` up to date; one lock for all changes."""
    idx = load(store)
    stale = []
    for wid in dict.fromkeys(ids):
        rec = idx.get(wid)
        if rec is None:
            continue
        if unchanged_on_disk(rec["plan_artifact"]["path"], rec.get("plan_artifact")):
            continue  # no need to read and hash the file
        fresh = describe_file(Path(rec["plan_artifact"]["path"]))
        if wm.plan_changed(rec.get("plan_artifact"), fresh):
            stale.append(wid)
    if not stale:
        return []
    changes: list[tuple[str, PlanDescriptor | None, PlanDescriptor]] = []
    with mutation(store) as (idx, _):
        for wid in stale:
            got = idx.get(wid)
            if got is None:
                continue
            rec = got
            old = rec["plan_artifact"]
            fresh = describe_file(Path(old["path"]))
            if not wm.plan_changed(old, fresh):
                continue  # another process got here first
            append_item(store, idx, {**rec, "plan_artifact": fresh}, "plan_artifact_refreshed")
            changes.append((wid, old, fresh))
        if changes:
            save(store, idx)
    out: list[PlanChange] = []
    for wid, prev, fresh in changes:
        _plan_events(store, wid, prev, fresh, turn_id)
        out.append(
            {
                "work_item_id": wid,
                "change": "changed" if fresh["exists"] else "missing",
                "plan_artifact": {**fresh},
            }
        )
    return out


def refresh_plan_descriptor(
    store: AgentStore, work_item_id: str, *, turn_id: str | None = None
) -> PlanRefresh:
    """Re-read one item's plan file. Returns ``{work_item_id, changed, exists,
    plan_artifact}``. A deleted file is reported (``exists: false`` and one
    ``plan_artifact_missing`` event), never recreated."""
    require(store, load(store), work_item_id)
    changes = refresh(store, [work_item_id], turn_id=turn_id)
    rec = load(store).get(work_item_id)
    assert rec is not None  # required above; items are never removed
    desc: PlanDescriptor = {**rec["plan_artifact"]}
    return {
        "work_item_id": work_item_id,
        "changed": bool(changes),
        "exists": bool(desc.get("exists")),
        "plan_artifact": desc,
    }


def refresh_all(store: AgentStore, *, turn_id: str | None = None) -> list[PlanChange]:
    """Refresh every open item's plan descriptor (the turn engine calls this at
    turn end). Returns one ``{work_item_id, change, plan_artifact}`` per change."""
    return refresh(store, [r["id"] for r in load(store).open_records()], turn_id=turn_id)
