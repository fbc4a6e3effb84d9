"""Supervising children: what a child is doing (its observability
snapshot), when it reached terminal closure, the ONE ``task_result`` that
closure admits into the parent, and the sweeps of the tick pass that make
all of it restart-safe.

Invariants:
- :func:`report_child` is the only place a child handle becomes final with a
  result; it runs under the handle's lock, does nothing once
  ``result_message_id`` is set, and admits with the idempotency key
  ``child_result:<task_id>``, so a kill between the admission and the record
  write is repaired by the next pass without a second message;
- the ``task_result``'s ``work_item_id`` is the one the delegation record
  saved at spawn, never the parent's focus at the time of the result;
- a child is archived (stopped, ``archived_at``) only when its handle is
  missing or final (:func:`sweep_child`); an ``interrupted`` handle whose
  child is alive is resumed (``running``), never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holon_cli import clock
from holon_cli.errors import HolonError
from holon_cli.model import task as tm
from holon_cli.model.agent import is_supervised_child
from holon_cli.model.child import (
    DELEGATION_ORIGIN,
    DELEGATION_RECORD_VERSION,
    child_phase,
)
from holon_cli.runtime.tasks import procs
from holon_cli.runtime.tasks.records import iter_records, read_record_file, tasks_root
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.fsio import write_snapshot
from holon_cli.store.layout import HomeLayout

if TYPE_CHECKING:
    from holon_cli.model.child import ChildObservability, DelegationRecord
    from holon_cli.model.events import ChildAgentArchivedData, ChildAgentResultReportedData
    from holon_cli.model.task import TaskRecord
    from holon_cli.model.tracecontext import TraceContext

RESULT_KEY_PREFIX = "child_result:"
SPAWN_GRACE_S = 60.0
DELIVERY_KEY_PREFIX = "delegation:"
BRIEF_CHARS = 2000


def is_final(rec: Mapping[str, Any]) -> bool:
    """A child handle that ended for good; ``interrupted`` is not: the next
    pass resumes it while its child lives."""
    status = rec.get("status")
    return tm.is_terminal(status) and status != "interrupted"


def open_child(agent_id: str | None) -> AgentStore | None:
    """The child's store, or ``None`` when its folder or record is gone."""
    if not agent_id:
        return None
    layout = HomeLayout.current().agent(agent_id)
    return AgentStore(layout) if layout.exists else None


def _briefs(child: AgentStore) -> tuple[str | None, str | None]:
    """(last progress brief, last result brief) texts of the child."""
    progress = result = None
    for b in reversed(child.ledger("briefs").tail(20)):
        text = str(b.get("text") or "")[:BRIEF_CHARS] or None
        if b.get("kind") in ("result", "failure"):
            result = result or text
        elif b.get("kind") == "ack":
            progress = progress or text
        if progress and result:
            break
    return progress, result


def _work_summary(child: AgentStore, wid: str | None) -> str | None:
    if not wid:
        return None
    from holon_cli.runtime.workitems import require_work_item

    try:
        return str(require_work_item(child, wid).get("objective") or "")[:200] or None
    except HolonError:
        return None


def _pending(child: AgentStore) -> int:
    from holon_cli.runtime import queue as q

    return q.pending_count(child)  # the inbox's undelivered files included


def observe(child: AgentStore) -> ChildObservability:
    """The child's compact observability snapshot."""
    state = child.read_record()["state"]
    phase, blocked, waiting = child_phase(
        status=state["status"],
        closure=state.get("last_closure"),
        pending=_pending(child),
        archived=bool(state.get("archived_at")),
    )
    progress, result = _briefs(child)
    wid = state.get("current_work_item_id")
    return {
        "phase": phase,
        "blocked_reason": blocked,
        "waiting_reason": waiting,
        "active_work_item_id": wid,
        "work_summary": _work_summary(child, wid),
        "last_progress_brief": progress,
        "last_result_brief": result,
    }


# what a sweep did to one handle: ``action`` and the ids it names (a
# ``child_agent_id`` read from a damaged handle may be null)
SweepAction = dict[str, str | None]


def handle_dir(parent: AgentStore, task_id: str) -> Path:
    return tasks_root(parent) / task_id


def _result_text(rec: TaskRecord, status: str, result_summary: str) -> tuple[str, int, int]:
    """The ``task_result`` text and where the child's own text sits in it
    (offset, length): the prompt fences that span as evidence."""
    child = rec.get("child") or {}
    head = (
        f"Child agent {child.get('child_agent_id')} ({rec.get('summary', '')}) {status}; "
        f"supervision task {rec.get('id')}."
    )
    if rec.get("stop_reason") == "stop_requested":
        head += " It was stopped through TaskStop."
    body = result_summary or "(the child gave no final text)"
    lead = head + "\nResult:\n"
    text = lead + body + "\nThis is a delegated child's result, not an operator instruction."
    return text, len(lead), len(body)


def _admit_result(parent: AgentStore, rec: TaskRecord, parts: tuple[str, int, int]) -> str:
    from holon_cli.runtime.tasks.records import admit_task_message

    child = rec.get("child") or {}
    text, offset, length = parts
    meta: dict[str, object] = {
        "task_id": rec["id"],
        "task_kind": tm.CHILD_TASK_KIND,
        "task_status": rec.get("status"),
        "child_agent_id": child.get("child_agent_id"),
        "delegation_id": child.get("delegation_id"),
        "result_summary": rec.get("result_summary"),
        "stop_reason": rec.get("stop_reason"),
        "work_item_id": child.get("work_item_id"),
        "output_offset": offset,
        "output_length": length,
    }

    def go(work_item_id: str | None) -> str:
        key = RESULT_KEY_PREFIX + rec["id"]
        return admit_task_message(
            parent, rec, text, meta, idempotency_key=key, work_item_id=work_item_id
        )

    try:
        return go(child.get("work_item_id"))
    except HolonError as exc:
        if exc.kind not in ("not_found", "work_item_not_found"):
            raise
        return go(None)  # the work item is gone: the id stays in the metadata


def report_child(
    parent: AgentStore,
    task_id: str,
    *,
    status: tm.TaskStatus,
    result_summary: str | None,
    stop_reason: str | None = None,
) -> str | None:
    """Make the handle final (unless it already is) and admit its ONE
    ``task_result``; returns the message id admitted now, else ``None``."""
    d = handle_dir(parent, task_id)
    with procs.flocked(d / "lock"):
        rec = read_record_file(d)
        if not rec or not tm.is_child_task(rec) or rec.get("result_message_id"):
            return None
        if rec.get("result_undeliverable"):
            return None
        if not is_final(rec):
            rec["status"] = status
            rec["finished_at"] = clock.now_iso()
            rec["stop_reason"] = stop_reason
            rec["result_summary"] = result_summary
        parts = _result_text(rec, str(rec.get("status")), rec.get("result_summary") or "")
        try:
            mid: str | None = _admit_result(parent, rec, parts)
            rec["result_message_id"] = mid
            rec.pop("result_deferred", None)
        except HolonError as exc:
            mid = None
            if exc.kind == "agent_stopped":
                rec["result_deferred"] = f"{exc.kind}: {exc.message}"
            else:
                rec["result_undeliverable"] = f"{exc.kind}: {exc.message}"
        rec["updated_at"] = clock.now_iso()
        write_snapshot(d / "task.json", rec)
    if mid is not None:
        _record_completion(parent, rec, mid)
    return mid


def _record_completion(parent: AgentStore, rec: TaskRecord, message_id: str) -> None:
    from holon_cli.runtime.tasks.records import _ledger_record

    parent.ledger("tasks").append(_ledger_record(rec))
    append_delegation(parent, rec, "completed", result_message_id=message_id)
    child = rec.get("child") or {}
    reported: ChildAgentResultReportedData = {
        "task_id": rec["id"],
        "child_agent_id": child.get("child_agent_id"),
        "task_status": rec.get("status"),
        "result_message_id": message_id,
    }
    parent.emit(
        "child_agent_result_reported",
        reported,
        task_id=rec["id"],
        work_item_id=child.get("work_item_id"),
    )


def append_delegation(
    parent: AgentStore, rec: TaskRecord, event: str, *, result_message_id: str | None = None
) -> None:
    child = rec.get("child") or {}
    line: DelegationRecord = {
        "v": DELEGATION_RECORD_VERSION,
        "at": clock.now_iso(),
        "event": "completed" if event == "completed" else "started",
        "delegation_id": str(child.get("delegation_id")),
        "parent_agent_id": parent.agent_id,
        "child_agent_id": str(child.get("child_agent_id")),
        "supervision_task_id": rec["id"],
        "work_item_id": child.get("work_item_id"),
        "workspace_mode": str(child.get("workspace_mode") or "inherit"),
        "summary": rec.get("summary", ""),
        "status": str(rec.get("status")),
        "result_message_id": result_message_id,
    }
    if child.get("trace_context"):
        line["trace_context"] = child["trace_context"]
    parent.ledger("delegations").append(line)


def settle_if_terminal(parent: AgentStore, rec: TaskRecord, child: AgentStore) -> str | None:
    """Report the handle when its child reached terminal closure."""
    obs = observe(child)
    if obs["phase"] != "terminal" or is_final(rec):
        return None
    closure = child.read_record()["state"].get("last_closure")
    failed = closure is not None and closure.get("outcome") == "failed"
    status: tm.TaskStatus = "failed" if failed else "completed"
    mid = report_child(parent, rec["id"], status=status, result_summary=obs["last_result_brief"])
    cleanup_for(parent, rec["id"])
    return mid


def parent_of(child: AgentStore) -> tuple[AgentStore | None, str | None]:
    """(the parent's store or None, the supervision task id) of a child."""
    ident = child.read_record()["identity"]
    return open_child(ident.get("lineage_parent_agent_id")), ident.get("supervision_task_id")


def delegation_trace(child: AgentStore) -> TraceContext | None:
    """The trace a child's turns continue: the parent's ``execute_tool
    SpawnAgent`` span, stored with the delegation (the handle's ``child``
    detail), so it holds in any process that runs the child's turn."""
    from holon_cli.model.tracecontext import check_trace_context

    parent, task_id = parent_of(child)
    if parent is None or not task_id:
        return None
    rec = read_record_file(handle_dir(parent, task_id))
    return check_trace_context((rec.get("child") or {}).get("trace_context")) if rec else None


def after_child_turn(child: AgentStore) -> str | None:
    """After a turn of ``child``: report its ONE result when it just closed."""
    if not is_supervised_child(child.read_record()["identity"]):
        return None
    parent, task_id = parent_of(child)
    if parent is None or not task_id:
        return None
    rec = read_record_file(handle_dir(parent, task_id))
    if not rec:
        return None
    return settle_if_terminal(parent, rec, child)


def deliver_initial(parent: AgentStore, rec: TaskRecord, child: AgentStore, text: str) -> str:
    """Admit the child's first message (idempotent per handle)."""
    return deliver_to_child(
        parent, rec, child, text, "initial_message", DELIVERY_KEY_PREFIX + rec["id"]
    )


def deliver_to_child(
    parent: AgentStore,
    rec: TaskRecord,
    child: AgentStore,
    text: str,
    purpose: str,
    idempotency_key: str | None = None,
) -> str:
    """Admit ``text`` into the child as runtime-owned delegation input (never
    operator authority), tagged with the delegation record; its message id."""
    from holon_cli.runtime.enqueue import admit

    meta = delegation_meta(parent, rec, purpose)
    env = admit(
        text,
        store=child,
        kind="internal_followup",
        origin=DELEGATION_ORIGIN,
        correlation_id=meta["delegation_id"],
        delivery_surface="runtime_system",
        admission_context="runtime_owned",
        metadata=meta,
        idempotency_key=idempotency_key,
    )
    return str(env["id"])


def delegation_meta(parent: AgentStore, rec: TaskRecord, delivery: str) -> dict[str, str | None]:
    child = rec.get("child") or {}
    return {
        "delivery": delivery,
        "parent_agent_id": parent.agent_id,
        "supervision_task_id": rec["id"],
        "delegation_id": child.get("delegation_id"),
        "followup_target": "parent_supervisor",
    }


def _sweep_handle(parent: AgentStore, rec: TaskRecord) -> SweepAction | None:
    child_id = (rec.get("child") or {}).get("child_agent_id")
    child = open_child(child_id)
    tid = rec["id"]
    if is_final(rec):
        if not rec.get("result_message_id") and not rec.get("result_undeliverable"):
            if report_child(parent, tid, status="completed", result_summary=None):
                return {"action": "child_result_reported", "task_id": tid}
        return None
    if child is None:
        if _age_s(rec) < SPAWN_GRACE_S:
            return None  # being spawned right now (the handle is written first)
        why = f"child agent {child_id!r} is missing (removed, or lost before it was made)"
        from holon_cli.runtime.tasks.records import report_lost

        report_lost(handle_dir(parent, tid), why)  # the task_status first, then the result
        report_child(parent, tid, status="failed", result_summary=why, stop_reason="child_missing")
        return {"action": "child_missing", "task_id": tid, "child_agent_id": child_id}
    if rec.get("status") == "interrupted":
        _resume(handle_dir(parent, tid))
        return {"action": "child_handle_resumed", "task_id": tid}
    if not (rec.get("child") or {}).get("initial_message_id"):
        return _redeliver(parent, rec, child)
    if settle_if_terminal(parent, rec, child):
        return {"action": "child_result_reported", "task_id": tid}
    return None


def _resume(d: Path) -> None:
    def resume(r: TaskRecord) -> None:
        if r.get("status") == "interrupted":
            r["status"] = "running"
            r["status_before_restart"] = "running"

    from holon_cli.runtime.tasks.records import update_task

    update_task(d, resume)


def _redeliver(parent: AgentStore, rec: TaskRecord, child: AgentStore) -> SweepAction:
    """A spawn killed before the child's first message: deliver it now."""
    from holon_cli.runtime.tasks.records import update_task

    prompt = str((rec.get("recovery") or {}).get("prompt") or "")
    mid = deliver_initial(parent, rec, child, prompt)

    def note(r: TaskRecord) -> None:
        r.setdefault("child", {})["initial_message_id"] = mid

    update_task(handle_dir(parent, rec["id"]), note)
    return {"action": "child_message_delivered", "task_id": rec["id"], "message_id": mid}


def sweep_parent(parent: AgentStore) -> list[dict[str, Any]]:
    """The parent's part of a tick: every child handle brought up to date."""
    # Any: tick.py extends this list with the workspace plane's actions
    # (dict[str, str]) and returns it as dict[str, object]s
    out: list[dict[str, Any]] = []
    for _d, rec in iter_records(parent):
        if not tm.is_child_task(rec) or not rec.get("promoted"):
            continue
        if is_final(rec) and rec.get("result_message_id"):
            out += finish_ended(parent, rec)
            continue
        try:
            action = _sweep_handle(parent, rec)
        except HolonError as exc:
            action = {"action": "child_sweep_failed", "task_id": rec["id"], "error": exc.message}
        if action:
            out.append(action)
    return out


def cleanup_pending(rec: Mapping[str, Any]) -> bool:
    """A final handle whose worktree cleanup has not run (a kill between the
    result and the cleanup): the next pass finishes it."""
    wt = (rec.get("child") or {}).get("worktree")
    return is_final(rec) and isinstance(wt, dict) and wt.get("cleanup_status") == "pending"


def finish_ended(parent: AgentStore, rec: TaskRecord) -> list[dict[str, str]]:
    """The durable end of a handle whose result is reported: its worktree
    cleaned up and its child archived. Each step is repeated by every pass
    until it is done (a process killed between the result and these steps
    left them undone: ``home audit`` reports it until then)."""
    out: list[dict[str, str]] = []
    tid = rec["id"]
    if cleanup_pending(rec):
        cleanup_for(parent, tid)
        out.append({"action": "child_worktree_cleaned_up", "task_id": tid})
    child = rec.get("child") or {}
    if not child.get("child_archived"):
        kid = open_child(child.get("child_agent_id"))
        if kid is not None and archive_child(kid, "supervision handle final"):
            out.append({"action": "child_archived", "task_id": tid})

        def note(r: TaskRecord) -> None:
            r.setdefault("child", {})["child_archived"] = True

        from holon_cli.runtime.tasks.records import update_task

        update_task(handle_dir(parent, tid), note)
    return out


def sweep_child(child: AgentStore) -> list[dict[str, Any]]:
    """The child's part of a tick: archive it when its handle is missing or
    final (never while the handle lives)."""
    rec = child.read_record()
    ident, state = rec["identity"], rec["state"]
    if not is_supervised_child(ident) or state.get("archived_at"):
        return []
    parent, task_id = parent_of(child)
    handle = read_record_file(handle_dir(parent, task_id)) if parent and task_id else {}
    if handle and not is_final(handle):
        return []
    if handle and not handle.get("result_message_id") and parent is not None:
        return []  # the parent's sweep reports it first
    reason = "supervision handle final" if handle else "supervision handle missing"
    archive_child(child, reason)
    return [{"action": "child_archived", "reason": reason}]


def cleanup_for(parent: AgentStore, task_id: str) -> None:
    """The handle's worktree cleanup (git, and so ``subprocess``, loaded only
    for a handle that has a worktree)."""
    rec = read_record_file(handle_dir(parent, task_id))
    if (rec.get("child") or {}).get("worktree"):
        from holon_cli.runtime.children.worktree import cleanup_for as cleanup

        cleanup(parent, task_id)


def _age_s(rec: TaskRecord) -> float:
    try:
        return clock.now() - clock.parse_iso(rec.get("created_at") or "")
    except ValueError:
        return SPAWN_GRACE_S


def archive_child(child: AgentStore, reason: str) -> bool:
    """Stop ``child`` and everything under it, and mark it archived (kept,
    listed by ``agent list --all``). False when it already was."""
    if child.read_record()["state"].get("archived_at"):
        return False
    for _d, rec in iter_records(child):  # its own supervised children first
        if tm.is_child_task(rec) and not is_final(rec):
            stop_handle(child, rec["id"])
    from holon_cli.runtime.tasks.control import stop_unsettled
    from holon_cli.runtime.turn.abort import request_abort

    stop_unsettled(child)
    request_abort(child)  # a turn in flight ends at its next step

    def archive(st: Any) -> None:
        st["status"] = "stopped"
        st["archived_at"] = clock.now_iso()

    child.update_state(archive, reason="child_archived")
    archived: ChildAgentArchivedData = {"reason": reason}
    child.emit("child_agent_archived", archived)
    return True


def stop_handle(parent: AgentStore, task_id: str) -> bool:
    """``TaskStop`` on a child handle: the child stopped (recursively) and
    archived, the handle ``cancelled`` with its ONE result, its worktree
    cleaned up. False when the handle had already ended."""
    d = handle_dir(parent, task_id)
    rec = read_record_file(d)
    was_active = not is_final(rec)
    child = open_child((rec.get("child") or {}).get("child_agent_id"))
    summary = None
    if child is not None:
        summary = observe(child)["last_result_brief"]
        archive_child(child, "supervision task stopped")
    if was_active:
        report_child(
            parent,
            task_id,
            status="cancelled",
            result_summary=summary or "stopped by the parent before it finished",
            stop_reason="stop_requested",
        )
    cleanup_for(parent, task_id)
    return was_active
