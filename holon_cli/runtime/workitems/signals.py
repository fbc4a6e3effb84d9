"""Work-plane signals for the scheduler: what a tick or a turn's end should
do about the work queue.

- :func:`activation_signal`: what a work-queue tick should wake the agent for
  (continue the current item, review a triggered blocked item, pick a queued
  one); it never changes focus.
- :func:`closure_waiting_reason`: what the agent waits for when open work
  exists but none of it is actionable.
- :func:`recheck_due`: one-shot blocker recheck reminders, consumed once.
- :func:`turn_end_commit`: the bound item's transition at turn end.
- :func:`newest_completion_report_since`: ``holon run``'s final text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from holon_cli import clock
from holon_cli.digest import sha256_hex
from holon_cli.model import workitem as wm
from holon_cli.model import workitem_readiness as wr
from holon_cli.model.workitem import ContinuationHold, WorkItemRecord
from holon_cli.runtime.workitems.access import HOLD_KEY, mutation
from holon_cli.runtime.workitems.access import current_id as _current_id
from holon_cli.runtime.workitems.hints import (
    ACTIVATE_QUEUED_LEAD,
    RECHECK_TEXT,
    REVIEW_TRIGGERED_LEAD,
)
from holon_cli.store.agent_store import AgentStore
from holon_cli.store.workitem_index import WorkItemIndex, append_item, load, save

if TYPE_CHECKING:
    from holon_cli.model.events import (
        WorkItemContinuationHeldData,
        WorkItemRecheckDueData,
        WorkItemTurnEndCommitData,
    )

# provider failure kinds after which the runtime must not continue the
# current work item on its own (runtime spec: provider failures)
HOLD_FAILURE_KINDS = frozenset({"context_length_exceeded"})


class TurnEndCommit(TypedDict):
    """What :func:`turn_end_commit` did with the bound item."""

    work_item_id: str | None
    action: str  # skipped | none | blocked | continuation_held
    reason: str
    focus_released: NotRequired[bool]
    work_item: NotRequired[Mapping[str, object]]  # the item as blocked


class Candidate(TypedDict):
    """A work item as an activation signal lists it."""

    work_item_id: str
    objective: str
    readiness: str
    plan_status: str | None
    current_todo: Mapping[str, object] | None
    updated_at: str | None
    blocked_by: NotRequired[str | None]
    last_triggered_at: NotRequired[str | None]


class RecheckDue(TypedDict):
    """A blocked item whose recheck time has come (:func:`recheck_due`)."""

    id: str
    work_item_id: str
    objective: str
    blocked_by: str | None
    recheck_at: str | None
    text: str


def turn_end_commit(
    store: AgentStore, bound_work_item_id: str | None, facts: Mapping[str, Any] | None = None
) -> TurnEndCommit:
    """Resolve the bound item's transition at turn end (spec: Turn-End
    Work-Item Transition Commit).

    ``facts`` are runtime facts about the finished turn:
      ``blocking_wait`` (str | None): a blocking wait condition the runtime
      observed, in words (e.g. "waiting for task tsk_1 (cargo test)");
      ``recheck_after_ms`` (int | None): the recheck delay for that blocker;
      ``turn_status`` (``completed`` | ``aborted``), ``failure_kind`` and
      ``turn_id``: how the turn ended (see :func:`continuation_hold`).

    Only the bound item is considered, never whatever is current now. It is
    never completed here (only ``CompleteWorkItem`` completes). When a
    blocking wait is reported and the item is open with no blocker, the
    blocker is set (and focus released if it is current); an agent-authored
    blocker is never overwritten. Returns ``{work_item_id, action, reason}``
    with ``action`` one of ``skipped``, ``none``, ``blocked``, or
    ``continuation_held`` after a failure that must not auto-continue.
    """
    facts = facts or {}
    hold = _settle_hold(store, facts)
    if hold is not None:
        return {
            "work_item_id": hold["work_item_id"],
            "action": "continuation_held",
            "reason": hold["reason"],
        }
    if not bound_work_item_id:
        return {"work_item_id": None, "action": "skipped", "reason": "no_bound_work_item"}
    idx = load(store)
    rec = idx.get(bound_work_item_id)
    if rec is None:
        return {
            "work_item_id": bound_work_item_id,
            "action": "skipped",
            "reason": "unknown_work_item",
        }
    if rec["state"] == "completed":
        return {"work_item_id": bound_work_item_id, "action": "none", "reason": "completed"}
    wait = facts.get("blocking_wait")
    if not (isinstance(wait, str) and wait.strip()):
        return {"work_item_id": bound_work_item_id, "action": "none", "reason": "remains_open"}
    if rec.get("blocked_by"):
        return {"work_item_id": bound_work_item_id, "action": "none", "reason": "already_blocked"}
    # the mutations (and the views they refresh) load only for a blocking wait
    from holon_cli.runtime.workitems.mutations import update_work_item

    ms = facts.get("recheck_after_ms")
    res = update_work_item(
        store,
        bound_work_item_id,
        blocked_by=wait.strip(),
        recheck_after_ms=ms
        if isinstance(ms, int) and not isinstance(ms, bool) and ms > 0
        else None,
        source="turn_end",
    )
    data: WorkItemTurnEndCommitData = {
        "action": "blocked",
        "blocked_by": wait.strip(),
        "focus_released": res["focus_released"],
    }
    store.emit(
        "work_item_turn_end_commit",
        data,
        work_item_id=bound_work_item_id,
    )
    return {
        "work_item_id": bound_work_item_id,
        "action": "blocked",
        "reason": "blocking_wait",
        "focus_released": res["focus_released"],
        "work_item": res["work_item"],
    }


def _settle_hold(store: AgentStore, facts: Mapping[str, Any]) -> ContinuationHold | None:
    """Set the continuation hold after a failure in :data:`HOLD_FAILURE_KINDS`
    (and return it); lift an existing hold after a completed turn."""
    kind = facts.get("failure_kind")
    if facts.get("turn_status") == "completed":
        if store.read_record()["state"].get(HOLD_KEY):
            store.update_state(lambda s: s.update({HOLD_KEY: None}))
        return None
    if kind not in HOLD_FAILURE_KINDS:
        return None
    wid = _current_id(store)
    rec = load(store).get(wid) if wid else None
    if wid is None or rec is None or rec["state"] != "open":
        return None
    turn_id = facts.get("turn_id")
    hold: ContinuationHold = {
        "work_item_id": wid,
        "rev": rec.get("rev"),
        "reason": str(kind),
        "held_at": clock.now_iso(),
        "turn_id": turn_id if isinstance(turn_id, str) else None,
    }
    store.update_state(lambda s: s.update({HOLD_KEY: hold}))
    data: WorkItemContinuationHeldData = {"reason": hold["reason"], "rev": hold["rev"]}
    store.emit(
        "work_item_continuation_held",
        data,
        work_item_id=wid,
        turn_id=hold["turn_id"],
    )
    return hold


def continuation_hold(
    store: AgentStore, rec: WorkItemRecord | None = None
) -> ContinuationHold | None:
    """The hold that keeps the runtime from continuing the current item on its
    own, or ``None``.

    Runtime spec (provider failures): a turn that ends in
    ``context_length_exceeded`` "does not auto-reactivate the active work item
    through ``continue_active``". The hold (agent state
    ``work_continuation_hold``: ``{work_item_id, rev, reason, held_at,
    turn_id}``) names the item that was current and its revision. It lapses
    when that item changes (a new revision: the operator or agent updated
    it), when focus moves, when the item is picked again (an explicit
    action), or when a later turn completes. While it holds, a tick
    activates nothing for work (the current item outranks every other
    candidate)."""
    hold = store.read_record()["state"].get(HOLD_KEY)
    if not isinstance(hold, dict):
        return None
    wid = hold.get("work_item_id")
    if rec is None:
        rec = load(store).get(wid) if isinstance(wid, str) else None
    if rec is None or rec["id"] != wid or rec.get("rev") != hold.get("rev"):
        return None
    return hold


def _compact(idx: WorkItemIndex, rec: WorkItemRecord) -> Candidate:
    waits = idx.waits_for(rec)
    out: Candidate = {
        "work_item_id": rec["id"],
        "objective": rec["objective"],
        "readiness": wr.readiness(rec, waits),
        "plan_status": rec.get("plan_status"),
        "current_todo": wm.current_todo(rec.get("todo_list") or []),
        "updated_at": rec.get("updated_at"),
    }
    if rec.get("blocked_by"):
        out["blocked_by"] = rec["blocked_by"]
    if waits.triggered:
        out["last_triggered_at"] = waits.last_triggered_at
    return out


def _fingerprint(parts: Iterable[Any]) -> str:
    return sha256_hex("|".join(map(str, parts)).encode())[:16]


def activation_signal(store: AgentStore) -> dict[str, Any] | None:
    """What a work-queue tick should do, or ``None`` (no work items, or no
    candidate): 1. continue the current item when runnable; 2. surface
    triggered blocked items for review; 3. wake the agent to pick a queued
    runnable item. Never changes focus. ``action`` (alias
    ``reactivation_mode``: ``continue_active`` | ``review_triggered`` |
    ``activate_queued``) says which; ``text`` is ready for the system tick;
    ``fingerprint`` changes whenever the signal would say something new, so
    a tick can avoid re-sending it."""
    idx = load(store)
    if not idx.has_items():
        return None
    current_id = _current_id(store)
    cand = wr.classify(idx.open_records(), current_id=current_id, waits=idx.wait_summaries())
    if cand.classes["current_runnable"]:
        rec = cand.classes["current_runnable"][0]
        if continuation_hold(store, rec) is not None:
            return None  # an explicit action or a new turn lifts the hold
        todo = wm.current_todo(rec.get("todo_list") or [])
        text = f"Continue the current work item {rec['id']}: {rec['objective']}"
        if todo:
            text += f" (current todo: {todo['text']})"
        return {
            "action": "continue_current",
            "reactivation_mode": "continue_active",
            "work_item_id": rec["id"],
            "objective": rec["objective"],
            "text": text,
            "fingerprint": _fingerprint(
                ["continue", rec["id"], rec.get("rev"), rec.get("updated_at")]
            ),
        }
    for cls, action, lead in (
        (
            "triggered_blocked",
            "review_triggered",
            REVIEW_TRIGGERED_LEAD,
        ),
        (
            "queued_runnable",
            "activate_queued",
            ACTIVATE_QUEUED_LEAD,
        ),
    ):
        # a triggered item stays triggered; its review tick is sent once per
        # event: only for items whose newest event came after their last update
        top = _unreviewed(idx, cand) if cls == "triggered_blocked" else cand.top(cls)
        if top:
            lines = [lead] + [f"- {r['id']}: {r['objective']}" for r in top]
            return {
                "action": action,
                "reactivation_mode": action,
                "work_item_id": None,
                "candidates": [_compact(idx, r) for r in top],
                "text": "\n".join(lines),
                "fingerprint": _fingerprint(
                    [action, current_id]
                    + [
                        f"{r['id']}@{r.get('rev')}@{idx.waits_for(r).last_triggered_at}"
                        for r in top
                    ]
                ),
            }
    return None


def _unreviewed(idx: WorkItemIndex, cand: wr.Candidates) -> list[WorkItemRecord]:
    """Triggered blocked candidates with an event the agent has not looked at."""
    rows = [r for r in cand.classes["triggered_blocked"] if idx.waits_for(r).unreviewed]
    return rows[: wr.PROMPT_LIMITS["triggered_blocked"]]


def closure_waiting_reason(store: AgentStore) -> str | None:
    """What the agent waits for when the work queue holds open work but none
    of it is actionable (no runnable current or queued item, no unreviewed
    trigger): ``awaiting_operator_input`` when an item needs input, else
    ``awaiting_task_result`` for task waits, else ``awaiting_external_change``
    for blockers and external waits. ``None`` when there is work to do or no
    open work at all (the message-driven path decides then)."""
    idx = load(store)
    if not idx.has_items():
        return None
    cand = wr.classify(
        idx.open_records(), current_id=_current_id(store), waits=idx.wait_summaries()
    )
    if any(cand.classes[c] for c in ("current_runnable", "queued_runnable")) or _unreviewed(
        idx, cand
    ):
        return None
    open_items = idx.open_records()
    states = {wr.scheduling_state(r, idx.waits_for(r)) for r in open_items}
    if "waiting_operator" in states:
        return "awaiting_operator_input"
    if "waiting_task" in states:
        return "awaiting_task_result"
    if states & {"blocked", "waiting_external"}:
        return "awaiting_external_change"
    return None


def _as_ts(now: float | str | None) -> float:
    if now is None:
        return clock.now()
    if isinstance(now, str):
        return clock.parse_iso(now)
    return float(now)


def recheck_due(store: AgentStore, now: float | str | None = None) -> list[RecheckDue]:
    """Blocked open items whose one-shot ``recheck_at`` has passed and not yet
    been consumed. Each is marked ``recheck_consumed_at`` (so it fires once
    per deadline) and returned; the blocker is neither cleared nor
    interpreted, and focus does not change."""
    ts = _as_ts(now)

    def due(r: WorkItemRecord) -> bool:
        at = r.get("recheck_at")
        return (
            r.get("state") == "open"
            and bool(r.get("blocked_by"))
            and isinstance(at, str)
            and not r.get("recheck_consumed_at")
            and clock.parse_iso(at) <= ts
        )

    if not any(due(r) for r in load(store).open_records()):  # due: open items only
        return []
    out: list[RecheckDue] = []
    with mutation(store) as (idx, _):
        consumed_at = clock.now_iso()
        for rec in sorted(
            (r for r in idx.open_records() if due(r)), key=lambda r: (r["recheck_at"], r["id"])
        ):
            append_item(store, idx, {**rec, "recheck_consumed_at": consumed_at}, "recheck_consumed")
            out.append(
                {
                    "id": rec["id"],
                    "work_item_id": rec["id"],
                    "objective": rec["objective"],
                    "blocked_by": rec["blocked_by"],
                    "recheck_at": rec["recheck_at"],
                    "text": RECHECK_TEXT.format(
                        wid=rec["id"], objective=rec["objective"], blocked_by=rec["blocked_by"]
                    ),
                }
            )
        if out:
            save(store, idx)
    for item in out:
        data: WorkItemRecheckDueData = {
            "recheck_at": item["recheck_at"],
            "blocked_by": item["blocked_by"],
        }
        store.emit(
            "work_item_recheck_due",
            data,
            work_item_id=item["work_item_id"],
        )
    return out


def newest_completion_report_since(store: AgentStore, since_iso: str) -> str | None:
    """Text of the newest ``DeliverySummaryRecord`` created at or after
    ``since_iso`` (``holon run``'s ``final_text``), else ``None``."""
    since = clock.parse_iso(since_iso)
    best: Mapping[str, object] | None = None
    # a report this recent is in the head (its item completed recently) or
    # among the changes not yet checkpointed: never only in the archive
    idx = load(store)
    for rep in [*idx.head_reports.values(), *idx.pending_reports.values()]:
        at = rep.get("created_at")
        if (
            isinstance(at, str)
            and clock.parse_iso(at) >= since
            and (best is None or at >= str(best["created_at"]))
        ):
            best = rep
    return str(best["text"]) if best else None
