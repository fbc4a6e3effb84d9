"""The task tools on any handle: ``TaskStatus``, ``TaskOutput``,
``TaskInput``, ``TaskStop`` (and ``holon task status|output|input|stop``).
A command task goes to the task plane unchanged; a ``child_agent_task``
gets the child's shapes: the supervision projection, the observability
snapshot, a follow-up as input, a recursive stop that archives the child.
``active_children`` is ``AgentGet``'s list.

Invariants: a refused follow-up is ``accepted_input: false`` (not an
error); a follow-up after the child ended is refused and its result is
reported first if it was still due.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict, cast

from holon_cli.model import task as tm
from holon_cli.model.child import supervision
from holon_cli.runtime.children import supervision as sv
from holon_cli.runtime.children.worktree import live_view
from holon_cli.runtime.tasks import plane
from holon_cli.store.agent_store import AgentStore

if TYPE_CHECKING:
    from holon_cli.model.child import (
        ActiveChild,
        ChildObservability,
        ChildSupervision,
        ChildTaskSnapshot,
    )
    from holon_cli.model.task import (
        RetrievalStatus,
        TaskFailure,
        TaskOutputResult,
        TaskRecord,
        TaskSnapshot,
        WorktreeInfo,
    )

OUTPUT_PREVIEW_CHARS = 8000


class ChildOutputView(TypedDict):
    """``TaskOutput.task`` of a child handle: its result (or progress) as the output."""

    task_id: str
    kind: str  # child_agent_task
    status: str
    summary: str
    output_preview: str
    output_truncated: bool
    output_bytes: int
    artifacts: list[dict[str, str]]
    output_artifact: None
    result_summary: str | None
    failure_artifact: TaskFailure | None
    child_supervision: ChildSupervision
    child_observability: ChildObservability | None
    worktree: WorktreeInfo | None


class ChildOutputResult(TypedDict):
    retrieval_status: RetrievalStatus
    task: ChildOutputView


def child_snapshot(parent: AgentStore, rec: TaskRecord) -> ChildTaskSnapshot:
    """The lifecycle snapshot of a child handle, with the child's projection."""
    base = plane.snapshot(rec)
    detail = rec.get("child") or {}
    cid = str(detail.get("child_agent_id"))
    mode = str(detail.get("workspace_mode") or "inherit")
    child = sv.open_child(cid)
    wt = detail.get("worktree")
    snap = cast("ChildTaskSnapshot", dict(base))
    snap["child_agent_id"] = cid
    snap["child_observability"] = sv.observe(child) if child is not None else None
    snap["child_supervision"] = supervision(parent.agent_id, cid, rec["id"], mode, wt)
    snap["workspace_mode"] = mode
    snap["worktree"] = live_view(wt)
    snap["result_summary"] = rec.get("result_summary")
    live = not sv.is_final(rec)
    snap["accepts_input"] = live
    snap["input_target"] = "child_followup" if live else None
    return snap


def task_status(store: AgentStore, task_id: str) -> dict[str, TaskSnapshot]:
    rec = plane.read_task(store, task_id)
    if tm.is_child_task(rec):
        return {"task": child_snapshot(store, rec)}
    return {"task": plane.snapshot(rec)}


def list_tasks(store: AgentStore, *, include_all: bool = False) -> list[TaskSnapshot]:
    """``TaskList`` / ``holon task list``: child handles with their projection."""
    out: list[TaskSnapshot] = []
    for _d, rec in plane.iter_records(store):
        if not rec.get("promoted"):
            continue
        if include_all or not sv.is_final(rec):
            snap = child_snapshot(store, rec) if tm.is_child_task(rec) else plane.snapshot(rec)
            out.append(snap)
    return out


def task_output(
    store: AgentStore, task_id: str, *, block: bool = False, timeout_ms: int = 30_000
) -> TaskOutputResult | ChildOutputResult:
    rec = plane.read_task(store, task_id)
    if not tm.is_child_task(rec):
        return plane.task_output(store, task_id, block=block, timeout_ms=timeout_ms)
    end = time.monotonic() + max(0, timeout_ms) / 1000
    while block and not sv.is_final(rec) and time.monotonic() < end:
        time.sleep(0.05)
        sv.sweep_parent(store)
        rec = plane.read_task(store, task_id)
    snap = child_snapshot(store, rec)
    terminal = sv.is_final(rec)
    obs = snap["child_observability"]
    progress = obs["last_progress_brief"] if obs is not None else None
    text = rec.get("result_summary") if terminal else progress
    text = text or ""
    view: ChildOutputView = {
        "task_id": rec["id"],
        "kind": tm.CHILD_TASK_KIND,
        "status": snap["status"],
        "summary": snap["summary"],
        "output_preview": text[:OUTPUT_PREVIEW_CHARS],
        "output_truncated": len(text) > OUTPUT_PREVIEW_CHARS,
        "output_bytes": len(text.encode("utf-8")),
        "artifacts": [],
        "output_artifact": None,
        "result_summary": rec.get("result_summary"),
        "failure_artifact": tm.failure_artifact(rec),
        "child_supervision": snap["child_supervision"],
        "child_observability": snap["child_observability"],
        "worktree": snap["worktree"],
    }
    retrieval: RetrievalStatus = "success" if terminal else ("timeout" if block else "not_ready")
    return {"retrieval_status": retrieval, "task": view}


def task_input(store: AgentStore, task_id: str, data: str) -> dict[str, Any]:
    rec = plane.read_task(store, task_id)
    if not tm.is_child_task(rec):
        return cast(dict[str, Any], plane.task_input(store, task_id, data))
    child = sv.open_child((rec.get("child") or {}).get("child_agent_id"))
    if child is not None and not sv.is_final(rec):
        sv.settle_if_terminal(store, rec, child)  # a closure not reported yet
        rec = plane.read_task(store, task_id)

    def receipt(accepted: bool, written: int, text: str) -> dict[str, Any]:
        return {
            "task": child_snapshot(store, rec),
            "accepted_input": accepted,
            "input_target": "child_followup",
            "bytes_written": written,
            "summary_text": text,
        }

    if child is None or sv.is_final(rec):
        why = f"child task {task_id} is {rec.get('status')}; the child takes no more follow-ups"
        return receipt(False, 0, why)
    mid = sv.deliver_to_child(store, rec, child, data, "followup")
    n = len(data.encode("utf-8"))
    return receipt(True, n, f"follow-up {mid} delivered to child {child.agent_id}")


def task_stop(store: AgentStore, task_id: str) -> dict[str, Any]:
    rec = plane.read_task(store, task_id)
    if not tm.is_child_task(rec):
        return cast(dict[str, Any], plane.task_stop(store, task_id))
    stopped = sv.stop_handle(store, task_id)
    rec = plane.read_task(store, task_id)
    snap = child_snapshot(store, rec)
    cid = snap["child_agent_id"]
    text = (
        f"child task {task_id} cancelled; child {cid} stopped and archived"
        if stopped
        else f"child task {task_id} already {rec.get('status')}; child {cid} archived"
    )
    return {
        "task": snap,
        "stop_requested": stopped,
        "force_stop_requested": False,
        "child_agent_id": cid,
        "archived": True,
        "summary_text": text,
    }


def active_children(parent: AgentStore) -> list[ActiveChild]:
    """The parent's live child handles, each with the child's observability."""
    out: list[ActiveChild] = []
    for _d, rec in plane.iter_records(parent):
        if not tm.is_child_task(rec) or sv.is_final(rec):
            continue
        cid = str((rec.get("child") or {}).get("child_agent_id"))
        child = sv.open_child(cid)
        ident: Mapping[str, object] = {}
        status = None
        if child is not None:
            crec = child.read_record()
            ident, status = dict(crec["identity"]), crec["state"]["status"]
        out.append(
            {
                "child_agent_id": cid,
                "supervision_task_id": rec["id"],
                "status": tm.public_status(rec.get("status")),
                "agent_status": status,
                "summary": rec.get("summary", ""),
                "profile_preset": str(ident.get("profile_preset", "private_child")),
                "visibility": str(ident.get("visibility", "private")),
                "ownership": str(ident.get("ownership", "parent_supervised")),
                "child_observability": sv.observe(child) if child is not None else None,
            }
        )
    return out


def stop_children(parent: AgentStore) -> list[str]:
    """Stop every live child handle of ``parent`` (``agent rm --force``)."""
    stopped = []
    for _d, rec in plane.iter_records(parent):
        if tm.is_child_task(rec) and not sv.is_final(rec):
            sv.stop_handle(parent, rec["id"])
            stopped.append(rec["id"])
    return stopped


def running_children(parent: AgentStore) -> list[str]:
    return [
        str((rec.get("child") or {}).get("child_agent_id"))
        for _d, rec in plane.iter_records(parent)
        if tm.is_child_task(rec) and not sv.is_final(rec)
    ]
