"""Readiness of work items (pure values, no I/O): waits as the work plane
sees them, the spec's scheduling state and readiness labels, the readiness
projection, the RFC's candidate classes and their ranking, and the read
tools' filters.

Everything here is derived from a record (:mod:`holon_cli.model.workitem`),
the agent's focus pointer (``current_work_item_id``) and the item's waiting
intents; nothing is stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, cast

from holon_cli.errors import UsageError
from holon_cli.model.workitem import LIST_FILTERS, WorkItemRecord, current_todo

# the spec's WorkItemSchedulingState and the readiness labels projected from it
SCHEDULING_STATES = (
    "runnable",
    "waiting_operator",
    "waiting_task",
    "waiting_external",
    "blocked",
    "completed",
)
READINESS = ("runnable", "waiting_for_operator", "blocked", "completed")
_READINESS_OF = {
    "runnable": "runnable",
    "waiting_operator": "waiting_for_operator",
    "waiting_task": "blocked",
    "waiting_external": "blocked",
    "blocked": "blocked",
    "completed": "completed",
}

# candidate classes, in prompt-budget priority order (RFC: Decisions)
CANDIDATE_CLASSES = (
    "current_runnable",
    "triggered_blocked",
    "queued_runnable",
    "waiting_for_operator",
    "blocked",
    "completed_recent",
)
PROMPT_LIMITS: dict[str, int] = {
    "triggered_blocked": 3,
    "queued_runnable": 5,
    "waiting_for_operator": 3,
    "blocked": 3,
    "completed_recent": 3,
}


# ------------------------------------------------------------------ waits


class WaitSummary(NamedTuple):
    """A work item's waiting intents as the work plane sees them.

    ``triggered`` is derived exactly as the work-item RFC says: an active
    wait has ``trigger_count > 0`` and ``last_triggered_at`` set; it stays
    true across repeated events. ``unreviewed`` narrows it for scheduling:
    the newest event came *after* the item was last updated, so the agent
    has not looked at it yet (the ``triggered_blocked`` candidate class and
    its one review tick per event). Neither means the blocker is resolved.
    """

    active: tuple[dict[str, Any], ...] = ()
    active_task: int = 0
    active_external: int = 0
    triggered: bool = False
    last_triggered_at: str | None = None
    unreviewed: bool = False

    @property
    def has_active(self) -> bool:
        return bool(self.active)


NO_WAITS = WaitSummary()


def summarize_waits(rec: Mapping[str, Any], intents: Iterable[Mapping[str, Any]]) -> WaitSummary:
    """Fold a work item's waiting intents (``status`` active|cancelled,
    ``kind`` task|external|..., ``trigger_count``, ``last_triggered_at``)."""
    active = [dict(i) for i in intents if i.get("status", "active") == "active"]
    if not active:
        return NO_WAITS
    task = sum(1 for i in active if i.get("kind") == "task")
    last: str | None = None
    for i in active:
        at = i.get("last_triggered_at")
        if (
            int(i.get("trigger_count") or 0) > 0
            and isinstance(at, str)
            and (last is None or at > last)
        ):
            last = at
    updated = str(rec.get("updated_at") or "")
    triggered = last is not None
    unreviewed = last is not None and last > updated
    return WaitSummary(tuple(active), task, len(active) - task, triggered, last, unreviewed)


# -------------------------------------------------------------- readiness


def scheduling_state(rec: Mapping[str, Any], waits: WaitSummary = NO_WAITS) -> str:
    if rec.get("state") == "completed":
        return "completed"
    if rec.get("blocked_by"):
        return "blocked"
    if rec.get("plan_status") == "needs_input":
        return "waiting_operator"
    if waits.active_task:
        return "waiting_task"
    if waits.active_external:
        return "waiting_external"
    return "runnable"


def readiness(rec: Mapping[str, Any], waits: WaitSummary = NO_WAITS) -> str:
    return _READINESS_OF[scheduling_state(rec, waits)]


def is_runnable(rec: Mapping[str, Any], waits: WaitSummary = NO_WAITS) -> bool:
    return scheduling_state(rec, waits) == "runnable"


def candidate_class(
    rec: Mapping[str, Any], *, current_id: str | None, waits: WaitSummary = NO_WAITS
) -> str:
    """The RFC's candidate class of one item (work-item-centered RFC,
    "Candidate Classes"): the current item is ``current_runnable`` while it
    is runnable; an open item blocked by anything whose wait has fired
    (``trigger_count > 0`` and ``last_triggered_at`` set) is
    ``triggered_blocked``, never plain ``blocked`` (the blocker is not
    cleared: the agent reviews it); completed items are ``completed_recent``."""
    if rec.get("state") == "completed":
        return "completed_recent"
    rd = readiness(rec, waits)
    if rd == "runnable":
        return "current_runnable" if rec.get("id") == current_id else "queued_runnable"
    if rd == "waiting_for_operator":
        return "waiting_for_operator"
    return "triggered_blocked" if waits.triggered else "blocked"


# ``holon status`` counts: the readiness labels, with the blocked items whose
# wait has fired counted apart (they are review candidates, not plain blocked)
STATUS_COUNTS = ("runnable", "waiting_for_operator", "triggered_blocked", "blocked", "completed")


def status_bucket(rec: Mapping[str, Any], waits: WaitSummary = NO_WAITS) -> str:
    """Which of :data:`STATUS_COUNTS` an item counts towards."""
    rd = readiness(rec, waits)
    if rd == "blocked" and waits.triggered:
        return "triggered_blocked"
    return rd


def readiness_projection(
    rec: Mapping[str, Any], *, current_id: str | None, waits: WaitSummary = NO_WAITS
) -> dict[str, Any]:
    """The RFC's ``WorkItemReadinessProjection``, with the item's candidate
    class (the same derivation the prompt's work queue and ``holon status``
    count use)."""
    sched = scheduling_state(rec, waits)
    is_current = rec.get("id") == current_id and rec.get("state") == "open"
    return {
        "lifecycle": rec.get("state"),
        "scheduling_state": sched,
        "readiness": _READINESS_OF[sched],
        "candidate_class": candidate_class(rec, current_id=current_id, waits=waits),
        "focus": "current"
        if is_current
        else ("none" if rec.get("state") == "completed" else "queued"),
        "has_active_waits": waits.has_active,
        "has_triggered_waits": waits.triggered,
        "current_todo": current_todo(rec.get("todo_list") or []),
    }


# ------------------------------------------------------- candidate classes


class Candidates:
    """Work items split into the RFC's candidate classes, each ranked.

    ``current`` is the focused open item whatever its readiness (a blocked
    item may be picked for review); ``current_runnable`` holds it only when
    it is runnable. Every other class excludes the current item. Lists are
    complete and ranked; apply :data:`PROMPT_LIMITS` when projecting.
    """

    __slots__ = ("current", "classes", "completed_total")

    def __init__(
        self,
        current: WorkItemRecord | None = None,
        classes: dict[str, list[WorkItemRecord]] | None = None,
        completed_total: int = 0,
    ) -> None:
        self.current = current
        self.classes = {c: [] for c in CANDIDATE_CLASSES} if classes is None else classes
        self.completed_total = completed_total

    def top(self, cls: str) -> list[WorkItemRecord]:
        return self.classes[cls][: PROMPT_LIMITS.get(cls, 1)]


def _newest_first(items: list[WorkItemRecord], key: Any) -> list[WorkItemRecord]:
    """Stable sort: ISO timestamps newest first, missing values last."""
    return sorted(items, key=lambda r: (bool(key(r)), str(key(r) or "")), reverse=True)


def rank(
    cls: str, items: list[WorkItemRecord], waits: Mapping[str, WaitSummary]
) -> list[WorkItemRecord]:
    """Phase-one ranking: simple, stable, explainable.

    Multi-key orders are built from stable sorts, least significant key first
    (ties always end in id order)."""
    by_id = sorted(items, key=lambda r: r["id"])
    if cls == "triggered_blocked":
        by_update = _newest_first(by_id, lambda r: r.get("updated_at"))
        return _newest_first(by_update, lambda r: waits.get(r["id"], NO_WAITS).last_triggered_at)
    if cls == "queued_runnable":
        return sorted(
            by_id, key=lambda r: (str(r.get("updated_at") or ""), str(r.get("created_at") or ""))
        )
    return _newest_first(by_id, lambda r: r.get("updated_at"))


def classify(
    records: Iterable[WorkItemRecord],
    *,
    current_id: str | None,
    waits: Mapping[str, WaitSummary] | None = None,
    has_report: Mapping[str, bool] | None = None,
) -> Candidates:
    """Split records into candidate classes. Completed items count towards
    ``completed_recent`` only when they have a promoted completion report."""
    waits = waits or {}
    has_report = has_report or {}
    out = Candidates()
    buckets: dict[str, list[WorkItemRecord]] = {c: [] for c in CANDIDATE_CLASSES}
    for r in records:
        rec = cast(WorkItemRecord, dict(r))
        w = waits.get(rec["id"], NO_WAITS)
        if rec.get("state") == "completed":
            out.completed_total += 1
            if has_report.get(rec["id"]):
                buckets["completed_recent"].append(rec)
            continue
        if rec["id"] == current_id:
            out.current = rec
            if is_runnable(rec, w):
                buckets["current_runnable"].append(rec)
            continue
        rd = readiness(rec, w)
        if rd == "runnable":
            buckets["queued_runnable"].append(rec)
        elif rd == "waiting_for_operator":
            buckets["waiting_for_operator"].append(rec)
        elif w.triggered:  # derived, sticky across updates (work-item RFC)
            buckets["triggered_blocked"].append(rec)
        else:
            buckets["blocked"].append(rec)
    out.classes = {c: rank(c, items, waits) for c, items in buckets.items()}
    return out


def matches_filter(
    rec: Mapping[str, Any],
    filter_name: str,
    *,
    current_id: str | None,
    waits: WaitSummary = NO_WAITS,
) -> bool:
    """The read tools' filters: current, open, queued (open, not current, no
    ``blocked_by``), blocked (readiness blocked), completed, all."""
    state = rec.get("state")
    if filter_name == "all":
        return True
    if filter_name == "current":
        return state == "open" and rec.get("id") == current_id
    if filter_name == "open":
        return state == "open"
    if filter_name == "queued":
        return state == "open" and rec.get("id") != current_id and not rec.get("blocked_by")
    if filter_name == "blocked":
        return state == "open" and readiness(rec, waits) == "blocked"
    if filter_name == "completed":
        return state == "completed"
    raise UsageError(
        f"unknown filter {filter_name!r}",
        hint=f"use one of: {', '.join(LIST_FILTERS)}",
        kind="invalid_arguments",
        details={"field": "filter"},
    )
